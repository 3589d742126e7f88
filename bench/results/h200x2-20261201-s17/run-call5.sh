#!/bin/bash
# Two-H200 host, session 17, call 5: the GPU suites with every out-of-core job scattered
# (GPUSORT_SCATTER=on) at d8b1d9d: gpu_executor_tests with the tiny budget in four shards, two
# a GPU one after another, gpu_fault_tests (tiny) on GPU 1, then the two-GPU tests.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call5.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
export GPUSORT_SCATTER=on
T0=$(date +%s); left() { echo $(( 585 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
shard() {  # GPU, shard index
  local s=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=$1 GPUSORT_TEST_BUDGET=tiny GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$(($2-1)) \
    timeout $(( $(left) - 60 )) $C/gpu_executor_tests --gtest_brief=1 > $OUT/gpu_executor_tests.shard$2of4.txt 2>&1
  echo "== gpu_executor_tests shard $2/4 (GPU $1, tiny, scatter on) rc=$? $(ms $s) ms: $(tail -3 $OUT/gpu_executor_tests.shard$2of4.txt | tr '\n' ' ')"
}
( shard 0 1; shard 0 3 ) > $OUT/g0.log 2>&1 &
( shard 1 2; shard 1 4
  s=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=1 GPUSORT_TEST_BUDGET=tiny timeout $(( $(left) - 40 )) $C/gpu_fault_tests > $OUT/gpu_fault_tests.txt 2>&1
  echo "== gpu_fault_tests (GPU 1, tiny, scatter on) rc=$? $(ms $s) ms: $(grep -E '^\[  (PASSED|FAILED)' $OUT/gpu_fault_tests.txt | tr '\n' ' ')"
) > $OUT/g1.log 2>&1
wait; cat $OUT/g0.log $OUT/g1.log
s=$(date +%s%N)
timeout $(( $(left) - 3 )) $C/gpu_executor_tests --gtest_filter='*TwoGpus*:*ResidentSortMerges*' > $OUT/two-gpu-tests.txt 2>&1
echo "== two-GPU tests (scatter on) rc=$? $(ms $s) ms: $(grep -E '^\[  (PASSED|FAILED)' $OUT/two-gpu-tests.txt | tr '\n' ' ')"
grep -h -E "^\[  FAILED|Failure" -A4 $OUT/gpu_executor_tests*.txt $OUT/gpu_fault_tests.txt $OUT/two-gpu-tests.txt | head -30
echo "elapsed $(( $(date +%s) - T0 )) s"
