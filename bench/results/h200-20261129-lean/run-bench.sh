#!/usr/bin/env bash
# Call 2 (issue 39): the lean path on one H200. gpu_bench --lean at 32 GiB (plain and
# registered memory: lean within 3.5 GiB against the 4N floor and the two-round path at budget
# 1/8), then 100 GiB in plain memory; then gpusortd with host_memory_budget 4 GiB sorting a
# 75 GiB /dev/shm file (60% of the host's 125 GiB) in place through `gpusort sort FILE`.
set -u
mkdir -p /tmp/d && tar xJf .gpucarry/bins.tar.xz -C /tmp/d
D=/tmp/d; C=$(cat $D/COMMIT); echo "commit $C"
b() {  # name, gpu_bench arguments...
  local n=$1 s=$SECONDS; shift
  timeout 230 $D/gpu_bench --lean yes --machine h200 --commit $C --json $OUT/$n.json "$@" \
    > $OUT/$n.txt 2>&1
  echo "== $n rc $? in $((SECONDS - s)) s"; grep -E "^(GPU|PCIe|[0-9.]+ [GM]iB|\|)" $OUT/$n.txt
}
b lean-32Gi --lean-bytes 32Gi --lean-memory pageable,pinned --repeat 3
b lean-100Gi --lean-bytes 100Gi --lean-memory pageable --repeat 1
# The daemon: a file of 60% of the host's memory, in place within 4 GiB beyond it.
F=/dev/shm/big.bin; S=/tmp/gpusortd.sock; s=$SECONDS
printf "socket: $S\nhost_memory_budget: 4GiB\n" > /tmp/gpusortd.yaml
$D/gpusort gen --dtype u64 --dist uniform --count 10G --seed 9 --out $F > /dev/null
sum() { python3 -c "import numpy as n,sys; a=n.memmap('$F',dtype=n.uint64,mode='r'); print(int(n.add.reduce(a,dtype=n.uint64)), int(n.bitwise_xor.reduce(a)))"; }
before=$(sum); echo "generated 75 GiB in $((SECONDS - s)) s, sum/xor $before"
$D/gpusortd --config /tmp/gpusortd.yaml 2> $OUT/gpusortd.log & P=$!
for i in $(seq 100); do [ -S $S ] && break; sleep 0.1; done
s=$SECONDS; /usr/bin/time -v $D/gpusort sort $F --dtype u64 --socket $S --json > $OUT/daemon-75Gi.json 2> $OUT/daemon-75Gi.time
echo "== daemon in place rc $? in $((SECONDS - s)) s"; cat $OUT/daemon-75Gi.json
grep -E "VmHWM|VmRSS|RssAnon|RssShmem|RssFile" /proc/$P/status | tee $OUT/gpusortd-status.txt
grep "Maximum resident" $OUT/daemon-75Gi.time; tail -3 $OUT/gpusortd.log
ls -la /dev/shm; kill $P; wait $P
after=$(sum); echo "sum/xor after $after"; [ "$before" = "$after" ] && echo "same elements"
s=$SECONDS; $D/gpusort verify $F --dtype u64 > $OUT/verify.txt 2>&1; echo "verify rc $? in $((SECONDS - s)) s"; cat $OUT/verify.txt
rm -f $F
