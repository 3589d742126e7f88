#!/bin/bash
# One-H200 host, session 19, call 3, the same bundle as call 2 (b674e91): call 2 ran seven parts
# of gpu-check.sh at once and the executor's shards, pipeline_tests and lean_cli_tests did not
# end in 500 s (16 cores, every process's OpenMP on all of them). Here gpu_executor_tests as
# gpu-check.sh runs it (GPUSORT_TEST_BUDGET=tiny, the budget test left out: call 2 ran it alone)
# in four shards at once, 4 OpenMP threads each; then, in the time left, gpu-check.sh's
# pipeline_tests in two shards and lean_cli_tests side by side.
D=$PWD/dist; mkdir -p $D; tar xJf .gpucarry/dist.tar.xz -C $D
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call3.tar.gz -C $OUT .' EXIT
echo "commit $(cat $D/COMMIT)"
T0=$(date +%s); left() { echo $(( 545 - ($(date +%s) - T0) )); }
shard() {
  local s=$(date +%s)
  OMP_NUM_THREADS=4 GPUSORT_TEST_BUDGET=tiny GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$(($1-1)) \
    timeout 380 $D/tests/gpu/gpu_executor_tests --gtest_filter='-*TheGpuHoldsNoMoreThanItsBudget*' \
    > $OUT/gpu_executor_tests.shard$1of4.txt 2>&1
  echo "== gpu_executor_tests shard $1/4 rc=$? $(( $(date +%s) - s )) s: $(grep -c '^\[       OK' $OUT/gpu_executor_tests.shard$1of4.txt) ok; $(grep -E '^\[==========\]|^\[  PASSED|^\[  FAILED|^\[  SKIPPED' $OUT/gpu_executor_tests.shard$1of4.txt | tr '\n' ' ')"
}
for k in 1 2 3 4; do shard $k > $OUT/s$k.log & done; wait; cat $OUT/s?.log
part() {  # name args...
  local name=$1; shift
  local s=$(date +%s) l=$(left)
  [ $l -lt 20 ] && { echo "== $name not started"; return; }
  OMP_NUM_THREADS=8 timeout $l env GPUSORT_BIN=$D scripts/gpu-check.sh $OUT/$name --skip-sanitizer --skip-bench "$@" \
    > $OUT/$name.log 2>&1
  echo "== $name rc=$? $(( $(date +%s) - s )) s: $(tail -3 $OUT/$name.log | tr '\n' ' ' | cut -c1-200)"
}
part pipeline1 --only pipeline --shard 1/2 > $OUT/q1.log &
part pipeline2 --only pipeline --shard 2/2 > $OUT/q2.log &
part lean_cli --only lean_cli > $OUT/q3.log &
wait; cat $OUT/q?.log
grep -h -E "^\[  FAILED" $OUT/*.txt $OUT/*/*_tests*.txt 2>/dev/null | sort -u | head -20
grep -h -B2 -A8 "Failure$" $OUT/*.txt $OUT/*/*_tests*.txt 2>/dev/null | head -40
echo "elapsed $(( $(date +%s) - T0 )) s"
