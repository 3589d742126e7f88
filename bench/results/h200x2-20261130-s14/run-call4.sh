#!/bin/bash
# Two-H200 host, session 14, call 4: the GPU suites at the commit with the sort lanes, with the
# tiny test budget: gpu_executor_tests in four shards (two a GPU, one after another), gpu_tests
# on GPU 0, gpu_fault_tests on GPU 1.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call4.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s); left() { echo $(( 585 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
lane() {  # GPU, then shard indices
  local g=$1; shift
  for k in "$@"; do
    local s=$(date +%s%N)
    CUDA_VISIBLE_DEVICES=$g GPUSORT_TEST_BUDGET=tiny GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$((k-1)) \
      timeout $(( $(left) - 20 )) $C/gpu_executor_tests --gtest_brief=1 > $OUT/gpu_executor_tests.shard${k}of4.txt 2>&1
    echo "== gpu_executor_tests shard $k/4 (GPU $g, tiny) rc=$? $(ms $s) ms: $(tail -3 $OUT/gpu_executor_tests.shard${k}of4.txt | tr '\n' ' ')"
  done
}
( lane 0 1 2
  s=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=0 timeout $(( $(left) - 10 )) $C/gpu_tests --gtest_brief=1 > $OUT/gpu_tests.txt 2>&1
  echo "== gpu_tests (GPU 0) rc=$? $(ms $s) ms: $(tail -3 $OUT/gpu_tests.txt | tr '\n' ' ')" ) > $OUT/gpu0.log 2>&1 &
P=$!
lane 1 3 4
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=1 GPUSORT_TEST_BUDGET=tiny timeout $(( $(left) - 10 )) $C/gpu_fault_tests > $OUT/gpu_fault_tests.txt 2>&1
echo "== gpu_fault_tests (GPU 1, tiny) rc=$? $(ms $s) ms: $(grep -E '^\[  (PASSED|FAILED)' $OUT/gpu_fault_tests.txt | tr '\n' ' ')"
wait $P; cat $OUT/gpu0.log
grep -h -E "^\[  FAILED|Failure" -A4 $OUT/*.txt | head -40
echo "elapsed $(( $(date +%s) - T0 )) s"
