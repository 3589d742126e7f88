#!/usr/bin/env bash
# Two-H200 host, call 4 (the session's last device seconds): the cudaMemGetInfo budget test
# after every buffer is counted in whole pages (it failed in call 2 for pairs), the rows' 64 GiB
# case on one H200 with the batched, streamed gather and populated pages (c46f66c; call 1: 13.3
# s, gather 9.5 s), then the executor suite (tiny budget) printing each test, to see how far it
# gets (calls 2 and 3 stopped at their limits with no failure but call 2's budget test).
set -u
D=/tmp/d; mkdir -p $D && tar xJf .gpucarry/bins.tar.xz -C $D
echo "commit $(cat $D/COMMIT)"
s=$SECONDS
GPUSORT_TEST_BUDGET=tiny timeout 110 $D/tests/gpu/gpu_executor_tests \
  --gtest_filter='gpu_test.TheGpuHoldsNoMoreThanItsBudget' > $OUT/budget.txt 2>&1
echo "== budget test rc $? in $((SECONDS - s)) s"; grep -E -A5 "Failure|OK \]|FAILED" $OUT/budget.txt | head -30
echo "== rows_bench 64 GiB, one H200, profiled"
CUDA_VISIBLE_DEVICES=0 timeout 90 $D/bench/rows_bench --records-bytes 64Gi --columns-bytes 0 \
  --profile yes --cpu no --repeat 1 2>&1 | grep -v "^| ---\|^| target"
s=$SECONDS
GPUSORT_TEST_BUDGET=tiny timeout 280 $D/tests/gpu/gpu_executor_tests \
  --gtest_filter='-gpu_test.TheGpuHoldsNoMoreThanItsBudget' > $OUT/gpu_executor_tests.txt 2>&1
echo "== gpu_executor_tests rc $? in $((SECONDS - s)) s"
grep -c "^\[       OK \]" $OUT/gpu_executor_tests.txt; grep -E -A6 "Failure|FAILED" $OUT/gpu_executor_tests.txt | head -30
tail -n 2 $OUT/gpu_executor_tests.txt
