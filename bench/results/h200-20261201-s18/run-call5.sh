#!/bin/bash
# One-H200 host, session 18, call 5 (issue 44): HEAD's scattering store (scatter_lines on 16
# blocks, the releaser). gpu_bench 8 GiB u64 DSPS and scattered at 1/8, 1/256 and the smallest
# budget, and as the engine chooses (auto); then gpu_executor_tests (tiny budget, every
# out-of-core job scattered) shards 3 and 4 of four side by side (1 and 2 ran in call 3, before scatter_lines), the budget test alone (it reads the
# GPU's free memory, which shards beside it move), gpu_fault_tests (tiny, scatter on).
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call5.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s); left() { echo $(( 330 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
bench() {  # name timeout env...
  local name=$1 t=$2; shift 2
  local s=$(date +%s%N)
  env "$@" timeout $t $C/gpu_bench --chunks yes \
    --chunk-bytes 8Gi --gpus 1 --kinds u64 --budgets 1/8,1/256,smallest --repeat 3 \
    --json $OUT/chunks-$name.json > $OUT/chunks-$name.txt 2>&1
  echo "== $name ($*) rc=$? $(ms $s) ms"
  grep -E "budget (1/8|1/256|smallest)" $OUT/chunks-$name.txt | sed 's/.*GiB //' | cut -c1-110
}
bench off 40 GPUSORT_SCATTER=off
bench on 40 GPUSORT_SCATTER=on
bench auto 40
shard() {  # shard index
  local s=$(date +%s%N)
  GPUSORT_SCATTER=on GPUSORT_TEST_BUDGET=tiny GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$(($1-1)) \
    timeout $(( $(left) - 45 )) $C/gpu_executor_tests --gtest_brief=1 > $OUT/gpu_executor_tests.shard$1of4.txt 2>&1
  echo "== gpu_executor_tests shard $1/4 (tiny, scatter on) rc=$? $(ms $s) ms: $(tail -3 $OUT/gpu_executor_tests.shard$1of4.txt | tr '\n' ' ')"
}
for k in 3 4; do shard $k > $OUT/s$k.log 2>&1 & done
wait; cat $OUT/s3.log $OUT/s4.log
s=$(date +%s%N)
GPUSORT_SCATTER=on GPUSORT_TEST_BUDGET=tiny timeout 30 $C/gpu_executor_tests --gtest_filter='*TheGpuHoldsNoMoreThanItsBudget*' > $OUT/budget-test.txt 2>&1
echo "== budget test alone (tiny, scatter on) rc=$? $(ms $s) ms: $(grep -E '^\[  (PASSED|FAILED)' $OUT/budget-test.txt | tr '\n' ' ')"
s=$(date +%s%N)
GPUSORT_SCATTER=on GPUSORT_TEST_BUDGET=tiny timeout $(( $(left) + 20 )) $C/gpu_fault_tests > $OUT/gpu_fault_tests.txt 2>&1
echo "== gpu_fault_tests (tiny, scatter on) rc=$? $(ms $s) ms: $(grep -E '^\[  (PASSED|FAILED)' $OUT/gpu_fault_tests.txt | tr '\n' ' ')"
grep -h -E "^\[  FAILED|Failure" -A4 $OUT/gpu_executor_tests*.txt $OUT/budget-test.txt $OUT/gpu_fault_tests.txt | head -30
echo "elapsed $(( $(date +%s) - T0 )) s"
