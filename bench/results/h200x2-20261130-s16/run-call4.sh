#!/bin/bash
# Two-H200 host, session 16, call 4: beside_bench's new cases (2D copies of a superset of the
# slices; the kernel writing slices to host memory) on GPU 0; then the GPU suites at this
# commit (the engine's code as at d708287: the loader's refactor 1b62425 and the lean
# gatherer's wait d708287 not yet run on a GPU in full): gpu_executor_tests with the tiny
# budget in four shards, two a GPU, gpu_fault_tests (tiny) on GPU 1, then the two-GPU tests.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call4.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s); left() { echo $(( 585 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=0 timeout 100 $C/beside_bench --json $OUT/beside.json > $OUT/beside.txt 2>&1
echo "== beside_bench (GPU 0) rc=$? $(ms $s) ms"; cut -c1-150 $OUT/beside.txt
shard() {  # GPU, shard index
  local s=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=$1 GPUSORT_TEST_BUDGET=tiny GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$(($2-1)) \
    timeout $(( $(left) - 60 )) $C/gpu_executor_tests --gtest_brief=1 > $OUT/gpu_executor_tests.shard$2of4.txt 2>&1
  echo "== gpu_executor_tests shard $2/4 (GPU $1, tiny) rc=$? $(ms $s) ms: $(tail -3 $OUT/gpu_executor_tests.shard$2of4.txt | tr '\n' ' ')"
}
( shard 0 1; shard 0 3 ) > $OUT/g0.log 2>&1 &
( shard 1 2; shard 1 4
  s=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=1 GPUSORT_TEST_BUDGET=tiny timeout $(( $(left) - 40 )) $C/gpu_fault_tests > $OUT/gpu_fault_tests.txt 2>&1
  echo "== gpu_fault_tests (GPU 1, tiny) rc=$? $(ms $s) ms: $(grep -E '^\[  (PASSED|FAILED)' $OUT/gpu_fault_tests.txt | tr '\n' ' ')"
) > $OUT/g1.log 2>&1
wait; cat $OUT/g0.log $OUT/g1.log
s=$(date +%s%N)
timeout $(( $(left) - 3 )) $C/gpu_executor_tests --gtest_filter='*TwoGpus*:*ResidentSortMerges*' > $OUT/two-gpu-tests.txt 2>&1
echo "== two-GPU tests rc=$? $(ms $s) ms: $(grep -E '^\[  (PASSED|FAILED)' $OUT/two-gpu-tests.txt | tr '\n' ' ')"
grep -h -E "^\[  FAILED|Failure" -A4 $OUT/gpu_executor_tests*.txt $OUT/gpu_fault_tests.txt $OUT/two-gpu-tests.txt | head -30
echo "elapsed $(( $(date +%s) - T0 )) s"
