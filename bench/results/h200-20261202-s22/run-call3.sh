#!/bin/bash
# One-H200 host, session 22, call 3, the bundle in dist/COMMIT: the two gpu_executor_tests that
# read the GPU's free memory, alone, as gpu-check.sh now runs them after the shards (call 2's
# four-fifths job failed in a shard, counting the other shards' device memory as its own).
D=$PWD/dist; mkdir -p $D; tar xJf .gpucarry/dist.tar.xz -C $D
echo "commit $(cat $D/COMMIT)"
GPUSORT_TEST_BUDGET=tiny GTEST_FILTER='*TheGpuHoldsNoMoreThanItsBudget*:*AJobOfFourFifthsOfTheBudget*' \
  timeout 120 $D/tests/gpu/gpu_executor_tests --gtest_brief=1 2>&1 | tail -8
echo "rc=${PIPESTATUS[0]}"
