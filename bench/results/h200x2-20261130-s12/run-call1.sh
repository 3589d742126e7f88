#!/bin/bash
# Two-H200 host, session 12, call 1 (issue 40): the resident sort in 1.125 times its share (one
# piece-sized work array, ranges merged from every run into a ring carved from it). Its tests on
# both GPUs (resident, argsort, two GPUs, the budget held, the fault sweep of its final stage),
# gpusort plan --largest on the real GPUs, and the time model's check (gpu_bench --model) with
# this build (ba1bfc2's, the two-arrays resident sort, in a later call).
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call1.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s); left() { echo $(( 560 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader
df -h /dev/shm | tail -1; free -g | head -2
s=$(date +%s%N); timeout 200 $C/gpu_executor_tests \
  --gtest_filter='*Resident*:*TwoGpusSortAJobThatFits*:*FiveSixths*:*HoldsNoMoreThanItsBudget*:*ReuseThePinned*:*KeepBothKinds*' \
  > $OUT/exec_resident.txt 2>&1
echo "gpu_executor_tests resident rc=$? $(ms $s) ms"; grep -E "^\[  (PASSED|FAILED|SKIPPED)" $OUT/exec_resident.txt
grep -m4 -B2 -A10 "Failure$" $OUT/exec_resident.txt | head -60
s=$(date +%s%N); GPUSORT_TEST_BUDGET=tiny timeout 150 $C/gpu_fault_tests --gtest_filter='GpuResidentFault*' \
  > $OUT/fault_resident.txt 2>&1
echo "gpu_fault_tests GpuResidentFault rc=$? $(ms $s) ms"; tail -2 $OUT/fault_resident.txt
grep -m3 -A8 "Failure$" $OUT/fault_resident.txt | head -30
D=/tmp/cfg; mkdir -p $D; printf 'devices: [0]\n' > $D/one.yaml; printf 'devices: [0, 1]\n' > $D/two.yaml
for cfg in one two; do
  for shape in "--dtype u64" "--dtype u32" "--dtype u64 --value-bytes 8"; do
    s=$(date +%s%N)
    r=$(timeout 60 $C/gpusort plan --largest $shape --config $D/$cfg.yaml --json 2>&1)
    echo "plan --largest $cfg $shape: $(ms $s) ms $(echo "$r" | grep -o '"elements":[0-9]*,"bytes":[0-9]*')"
  done
done
$C/gpusort plan --largest --dtype u64 --config $D/one.yaml > $OUT/largest-one.txt 2>&1
for b in new; do
  [ $(left) -lt 120 ] && { echo "no time for the $b model run"; continue; }
  bin=$C/gpu_bench; [ $b = old ] && bin=$C/old/gpu_bench
  s=$(date +%s%N)
  timeout $(( $(left) - 20 )) $bin --model yes --chunk-bytes 8Gi,32Gi --repeat 3 \
    --json $OUT/model-$b.json > $OUT/model-$b.txt 2>&1
  rc=$?; c=$C/COMMIT; [ $b = old ] && c=$C/old/COMMIT
  echo "== gpu_bench --model ($b, $(cat $c)) rc=$rc $(ms $s) ms"
  grep -E "measured|GB/s" $OUT/model-$b.txt | head -30
done
