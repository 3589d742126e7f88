#!/bin/bash
# Two-H200 host, call 3: `round1_buffer: by-job` (what --local's auto now means) and the rest
# owed. GPU 1: lean_cli_tests with the GPU host's limit and kills (the second-command test now
# takes that limit) and the executor's round-1 buffer test with by-job; then, alone, the CLI
# on 8 GiB of u64 in /dev/shm on GPU 0 at device budgets of 32 MiB (5 MiB chunks: by-job pins),
# 256 MiB (about 40 MiB chunks: pageable) and 1 GiB, each default against the other choice
# (GPUSORT_ROUND1_PINNED); then the largest job that runs in one round (resident) per key
# layout on one and on two H200, found by bisection with `gpusort plan` (issue 40 item 3).
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call3.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
T0=$(date +%s); left() { echo $(( T0 + 530 - $(date +%s) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
s=$(date +%s%N); CUDA_VISIBLE_DEVICES=1 GPUSORT_LEAN_CLI_BUDGET=1Gi GPUSORT_LEAN_KILLS=40 \
  GPUSORT_TEST_CLI=$C/gpusort timeout 200 $C/lean_cli_tests > $OUT/lean_cli_tests.txt 2>&1
echo "lean_cli_tests (GPU 1) rc=$? $(ms $s) ms"; tail -3 $OUT/lean_cli_tests.txt
grep -m3 -A8 "Failure$" $OUT/lean_cli_tests.txt
s=$(date +%s%N); CUDA_VISIBLE_DEVICES=1 GPUSORT_TEST_BUDGET=tiny timeout 120 $C/gpu_executor_tests \
  --gtest_filter='*APageableRound1BufferIsStagedBothWays*' > $OUT/exec_round1.txt 2>&1
echo "gpu_executor_tests round-1 buffer (GPU 1) rc=$? $(ms $s) ms"; tail -3 $OUT/exec_round1.txt
grep -m3 -A8 "Failure$" $OUT/exec_round1.txt
echo "== CLI: 8 GiB u64 in /dev/shm into a new file, GPU 0, --profile"
D=/dev/shm/g44; mkdir -p $D
$C/gpusort gen --dtype u64 --dist uniform --count 1Gi --seed 5 --out $D/k.bin > /dev/null
for b in 32MiB 256MiB 1GiB; do printf "devices: [0]\ndevice_memory_budget: $b\n" > $D/$b.yaml; done
n=0
for run in 32MiB:def 32MiB:0 32MiB:def 32MiB:0 256MiB:def 256MiB:1 256MiB:def 256MiB:1 1GiB:def; do
  l=$(left); [ $l -lt 200 ] && break
  b=${run%:*}; pin=${run#*:}; n=$((n + 1)); s=$(date +%s%N)
  env CUDA_VISIBLE_DEVICES=0 $([ $pin != def ] && echo GPUSORT_ROUND1_PINNED=$pin) timeout 25 \
    $C/gpusort sort $D/k.bin --dtype u64 --local --config $D/$b.yaml --out $D/s.bin --json \
    --profile > $OUT/cli-$n-$b-$pin.txt 2>&1
  echo "$b pinned=$pin rc=$? $(ms $s) ms $(grep -o '"seconds":[0-9.]*,"wall_seconds":[0-9.]*,"peak_rss_bytes":[0-9]*' $OUT/cli-$n-$b-$pin.txt)"
  grep -E "round-1 buffer|chunks" $OUT/cli-$n-$b-$pin.txt | head -3 | cut -c1-140
  rm -f $D/s.bin
done
rm -rf $D
echo "== the largest one-round (resident) job, by bisection with gpusort plan"
printf 'devices: [0]\n' > /tmp/one.yaml; printf 'devices: [0, 1]\n' > /tmp/two.yaml
largest() {  # cfg dtype extra...
  local cfg=$1 dt=$2; shift 2; local lo=1 hi=$((1 << 36)) mid
  while [ $((hi - lo)) -gt $((1 << 24)) ]; do
    mid=$(( (lo + hi) / 2 ))
    if $C/gpusort plan --count $mid --dtype $dt "$@" --config $cfg --json 2>/dev/null | grep -q '"path":"resident"'; then
      lo=$mid; else hi=$mid; fi
  done
  echo $lo
}
for cfg in one two; do
  for spec in "u64" "u32" "u64 --value-bytes 8" "u64 --stable" "u64 --argsort"; do
    l=$(left); [ $l -lt 10 ] && break
    s=$(date +%s%N); n=$(largest /tmp/$cfg.yaml $spec)
    echo "$cfg H200: $spec: largest resident N about $n ($(( n * $( [ "${spec%% *}" = u32 ] && echo 4 || echo 8) / 1048576 )) MiB of keys) [$(ms $s) ms]"
  done
done | tee $OUT/largest.txt
