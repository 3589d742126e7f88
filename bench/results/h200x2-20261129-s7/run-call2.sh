#!/usr/bin/env bash
# Two-H200 host, call 2 (issue 44): the device budget counted in pages (f5fe5c4). The new test
# that cudaMemGetInfo's count stays within the budget, the small-budget tests, many chunks at
# 1/256 of 8 GiB on one H200, then the executor and fault suites with the tiny budget.
set -u
D=/tmp/d; mkdir -p $D && tar xJf .gpucarry/bins.tar.xz -C $D
echo "commit $(cat $D/COMMIT)"
t() {  # name timeout exe [args...]: env from the caller
  local n=$1 limit=$2 exe=$3; shift 3; local s=$SECONDS
  timeout $limit $exe --gtest_brief=1 "$@" > $OUT/$n.txt 2>&1
  echo "== $n rc $? in $((SECONDS - s)) s"; grep -E "FAILED|Failure|held|PASSED|tests ran" $OUT/$n.txt | head -20
}
CUDA_VISIBLE_DEVICES=0 t budget 120 $D/tests/gpu/gpu_executor_tests \
  --gtest_filter='gpu_test.TheGpuHoldsNoMoreThanItsBudget:gpu_test.ASmallJob*:gpu_test.ABudgetAbove*'
echo "== gpu_bench --chunks, one H200"
CUDA_VISIBLE_DEVICES=0 timeout 120 $D/bench/gpu_bench --chunks yes --chunk-bytes 8Gi \
  --gpus 1 --repeat 1 --machine h200x2 --commit $(cat $D/COMMIT) --json $OUT/chunks.json \
  > $OUT/chunks.txt 2>&1; echo "rc $?"; grep -v "^    " $OUT/chunks.txt | tail -40
GPUSORT_TEST_BUDGET=tiny t gpu_executor_tests 330 $D/tests/gpu/gpu_executor_tests
GPUSORT_TEST_BUDGET=tiny t gpu_fault_tests 60 $D/tests/gpu/gpu_fault_tests
