#!/bin/bash
# Two-H200 host, session 12, call 4 (issue 40): the resident sort with 16 pieces and 48 ranges
# (1.0625 times its share) and a 16-way search of the ranges' bounds (16 steps for u64 keys
# instead of 64). Its tests on both GPUs and the resident fault sweep; gpu_bench --model with
# this build and with b99a20f's (8 pieces, 32 ranges, bisection) in one run; then e2e_bench at
# 32 GiB on both GPUs (the CLI and the daemon's paths against the engine on pinned memory).
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call4.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT), mid $(cat $C/mid/COMMIT)"
T0=$(date +%s); left() { echo $(( 560 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
s=$(date +%s%N); timeout 150 $C/gpu_executor_tests \
  --gtest_filter='*Resident*:*TwoGpusSortAJobThatFits*:*FourFifths*:*HoldsNoMoreThanItsBudget*:*ReuseThePinned*:*KeepBothKinds*' \
  > $OUT/exec_resident.txt 2>&1
echo "gpu_executor_tests resident rc=$? $(ms $s) ms"; grep -E "^\[  (PASSED|FAILED|SKIPPED)" $OUT/exec_resident.txt
grep -m4 -B2 -A10 "Failure$" $OUT/exec_resident.txt | head -60
s=$(date +%s%N); GPUSORT_TEST_BUDGET=tiny timeout 100 $C/gpu_fault_tests --gtest_filter='GpuResidentFault*' \
  > $OUT/fault_resident.txt 2>&1
echo "gpu_fault_tests GpuResidentFault rc=$? $(ms $s) ms"; tail -1 $OUT/fault_resident.txt
for b in new mid new2; do
  bin=$C/gpu_bench; [ $b = mid ] && bin=$C/mid/gpu_bench
  s=$(date +%s%N)
  timeout 100 $bin --model yes --chunk-bytes 8Gi,32Gi --repeat 3 --json $OUT/model-$b.json \
    > $OUT/model-$b.txt 2>&1
  echo "== gpu_bench --model $b rc=$? $(ms $s) ms"
  grep -E "fitting on . GPU\(s\)" $OUT/model-$b.txt
  grep -A1 "fitting on 2 GPU" $OUT/model-$b.txt | grep resident | head -2
done
l=$(left); echo "left for e2e: $l s"
s=$(date +%s%N)
timeout $(( l - 10 )) $C/e2e_bench --bin $C --dir /dev/shm --bytes 32Gi --cpu-bytes 256Mi --repeat 1 \
  --paths cli,daemon_fd,daemon_fd_inplace,daemon_shm --json $OUT/e2e-32Gi.json > $OUT/e2e-32Gi.txt 2>&1
echo "== e2e_bench 32 GiB rc=$? $(ms $s) ms"
grep -E "^\|" $OUT/e2e-32Gi.txt | head -40
