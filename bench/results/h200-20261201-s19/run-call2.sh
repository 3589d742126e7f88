#!/bin/bash
# One-H200 host, session 19, call 2: scripts/gpu-check.sh's tests at the commit in dist/COMMIT
# (aligned bounds on by default), its parts side by side on the one GPU, each in its own folder:
# gpu_executor_tests in four shards, gpu_tests, gpu_fault + pipeline + core, lean + lean_cli.
# The budget test (it reads the GPU's free memory, which processes beside it move) is left out
# of the shards (GTEST_FILTER) and run alone after. Sanitizers and benchmarks: call 3.
D=$PWD/dist; mkdir -p $D; tar xJf .gpucarry/dist.tar.xz -C $D
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call2.tar.gz -C $OUT .' EXIT
echo "commit $(cat $D/COMMIT)"
T0=$(date +%s)
part() {  # name timeout args...
  local name=$1 t=$2; shift 2
  local s=$(date +%s)
  timeout $t env GPUSORT_BIN=$D scripts/gpu-check.sh $OUT/$name --skip-sanitizer --skip-bench "$@" \
    > $OUT/$name.log 2>&1
  echo "== $name rc=$? $(( $(date +%s) - s )) s"
}
for k in 1 2 3 4; do
  GTEST_FILTER='-*TheGpuHoldsNoMoreThanItsBudget*' part exec$k 500 --only gpu_executor --shard $k/4 > $OUT/p-exec$k.txt &
done
part gpu 500 --only gpu > $OUT/p-gpu.txt &
part fault-pipeline-core 500 --only gpu_fault,pipeline,core > $OUT/p-fpc.txt &
part lean 500 --only lean,lean_cli > $OUT/p-lean.txt &
wait
cat $OUT/p-*.txt
s=$(date +%s)
GPUSORT_TEST_BUDGET=tiny timeout 40 $D/tests/gpu/gpu_executor_tests --gtest_filter='*TheGpuHoldsNoMoreThanItsBudget*' > $OUT/budget-test.txt 2>&1
echo "== budget test alone (tiny) rc=$? $(( $(date +%s) - s )) s: $(grep -E '^\[  (PASSED|FAILED)' $OUT/budget-test.txt | tr '\n' ' ')"
for f in $OUT/*/*_tests*.txt; do echo "$(basename $(dirname $f))/$(basename $f): $(grep -E '^\[==========\]|^\[  PASSED|^\[  FAILED|^\[  SKIPPED' $f | tr '\n' ' ' | cut -c1-200)"; done
grep -h -E "^\[  FAILED" $OUT/*/*_tests*.txt | sort -u | head -20
grep -h -B2 -A8 "Failure$" $OUT/*/*_tests*.txt | head -40
echo "elapsed $(( $(date +%s) - T0 )) s"
