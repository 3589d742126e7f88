#!/usr/bin/env bash
# Issue 39, call 2: the gathering round 2 at 100 GiB in registered memory within 3.5 GiB (the
# target is 1.5 of the floor); then gpusortd with host_memory_budget 4 GiB sorting a 75 GiB
# /dev/shm file (60% of the host's 125 GiB) in place through `gpusort sort FILE`, checked.
set -u
mkdir -p /tmp/d && tar xJf .gpucarry/bins.tar.xz -C /tmp/d
D=/tmp/d; C=$(cat $D/COMMIT); echo "commit $C"
s=$SECONDS
timeout 250 $D/gpu_bench --lean yes --machine h200 --commit $C --json $OUT/lean-100Gi-gather.json \
  --lean-bytes 100Gi --lean-memory pinned --repeat 1 > $OUT/lean-100Gi-gather.txt 2>&1
echo "== lean-100Gi-gather rc $? in $((SECONDS - s)) s"
grep -E "^(host|PCIe|[0-9.]+ [GM]iB|\||    round 2 (evic|copy|round))" $OUT/lean-100Gi-gather.txt
F=/dev/shm/big.bin; S=/tmp/gpusortd.sock; s=$SECONDS
printf "socket: $S\nhost_memory_budget: 4GiB\n" > /tmp/gpusortd.yaml
$D/gpusort gen --dtype u64 --dist uniform --count 10G --seed 9 --out $F > /dev/null
sum() { python3 -c "import numpy as n,sys; a=n.memmap('$F',dtype=n.uint64,mode='r'); print(int(n.add.reduce(a,dtype=n.uint64)), int(n.bitwise_xor.reduce(a)))"; }
before=$(sum); echo "generated 75 GiB in $((SECONDS - s)) s, sum/xor $before"
$D/gpusortd --config /tmp/gpusortd.yaml 2> $OUT/gpusortd.log & P=$!
for i in $(seq 100); do [ -S $S ] && break; sleep 0.1; done
s=$SECONDS; /usr/bin/time -v $D/gpusort sort $F --dtype u64 --socket $S --json > $OUT/daemon-75Gi.json 2> $OUT/daemon-75Gi.time
echo "== daemon in place rc $? in $((SECONDS - s)) s"; cat $OUT/daemon-75Gi.json; echo
grep -E "VmHWM|VmRSS|RssAnon|RssShmem|RssFile" /proc/$P/status | tee $OUT/gpusortd-status.txt
grep "Maximum resident" $OUT/daemon-75Gi.time; tail -3 $OUT/gpusortd.log
kill $P; wait $P
after=$(sum); echo "sum/xor after $after"; [ "$before" = "$after" ] && echo "same elements"
s=$SECONDS; $D/gpusort verify $F --dtype u64 > $OUT/verify.txt 2>&1; echo "verify rc $? in $((SECONDS - s)) s"; cat $OUT/verify.txt
rm -f $F
