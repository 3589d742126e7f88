#!/bin/bash
# One-H200 host, session 18, call 3 (issue 44): the scattering store's stores (st.wb, st.wt,
# st.cs) in beside_bench --writes and in the engine (GPUSORT_SCATTER_STORE), with the releaser
# thread that frees a slot once its writes are done; 8 GiB u64, traced at 1/256; then the budget
# test alone and shards 1 and 2 of gpu_executor_tests (tiny budget, scatter on) side by side.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call3.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s); left() { echo $(( 585 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
s=$(date +%s%N)
timeout 100 $C/beside_bench --writes yes --json $OUT/writes.json > $OUT/writes.txt 2>&1
echo "== beside_bench --writes rc=$? $(ms $s) ms"; cat $OUT/writes.txt
bench() {  # name timeout env...
  local name=$1 t=$2; shift 2
  local s=$(date +%s%N)
  env "$@" timeout $t $C/gpu_bench --chunks yes \
    --chunk-bytes 8Gi --gpus 1 --kinds u64 --budgets 1/8,1/256,smallest --repeat 3 \
    --json $OUT/chunks-$name.json > $OUT/chunks-$name.txt 2>&1
  echo "== $name ($*) rc=$? $(ms $s) ms"
  grep -E "budget (1/8|1/256|smallest)|round 1 (sort|copy in|copy out|round)" $OUT/chunks-$name.txt | sed 's/.*GiB //' | cut -c1-120
}
bench off 40 GPUSORT_SCATTER=off
bench wb 40 GPUSORT_SCATTER=on GPUSORT_PROFILE_TRACE=$OUT/trace-wb.txt
bench wt 40 GPUSORT_SCATTER=on GPUSORT_SCATTER_STORE=wt GPUSORT_PROFILE_TRACE=$OUT/trace-wt.txt
bench cs 40 GPUSORT_SCATTER=on GPUSORT_SCATTER_STORE=cs
s=$(date +%s%N)
GPUSORT_SCATTER=on GPUSORT_TEST_BUDGET=tiny timeout 60 $C/gpu_executor_tests --gtest_filter='*TheGpuHoldsNoMoreThanItsBudget*' > $OUT/budget-test.txt 2>&1
echo "== budget test alone (tiny, scatter on) rc=$? $(ms $s) ms: $(grep -E '^\[  (PASSED|FAILED)' $OUT/budget-test.txt | tr '\n' ' ')"
shard() {  # shard index
  local s=$(date +%s%N)
  GPUSORT_SCATTER=on GPUSORT_TEST_BUDGET=tiny GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$(($1-1)) \
    timeout $(( $(left) - 10 )) $C/gpu_executor_tests --gtest_brief=1 > $OUT/gpu_executor_tests.shard$1of4.txt 2>&1
  echo "== gpu_executor_tests shard $1/4 (tiny, scatter on) rc=$? $(ms $s) ms: $(tail -3 $OUT/gpu_executor_tests.shard$1of4.txt | tr '\n' ' ')"
}
shard 1 > $OUT/s1.log 2>&1 &
shard 2 > $OUT/s2.log 2>&1
wait; cat $OUT/s1.log $OUT/s2.log
grep -h -E "^\[  FAILED|Failure" -A4 $OUT/gpu_executor_tests*.txt $OUT/budget-test.txt | head -30
echo "elapsed $(( $(date +%s) - T0 )) s"
