#!/bin/bash
# One-H200 host, session 20, call 5: call 4's gpu_tests failed gpu_gather (21 of 24 cases, the
# kernel's output untouched) while it shared the GPU with the executor's shards and the
# sanitizers. The same bundle: the gather tests alone, then the whole of gpu_tests alone.
D=$PWD/dist; mkdir -p $D; tar xJf .gpucarry/dist.tar.xz -C $D
FINAL=$OUT; OUT=/tmp/w5; mkdir -p $OUT
trap 'tar czf $FINAL/call5.tar.gz -C $OUT .' EXIT
echo "commit $(cat $D/COMMIT)"
T0=$(date +%s)
GPUSORT_TEST_BUDGET=tiny timeout 30 $D/tests/gpu/gpu_tests --gtest_brief=1 --gtest_filter='*gpu_gather*' > $OUT/gather.txt 2>&1
echo "== gather alone rc=$? $(( $(date +%s) - T0 )) s: $(grep -E '^\[  (PASSED|FAILED)' $OUT/gather.txt | head -3 | tr '\n' ' ')"
GPUSORT_TEST_BUDGET=tiny timeout $(( 125 - ($(date +%s) - T0) )) $D/tests/gpu/gpu_tests --gtest_brief=1 > $OUT/gpu_tests.txt 2>&1
echo "== gpu_tests alone rc=$? $(( $(date +%s) - T0 )) s: $(grep -E '^\[  (PASSED|FAILED)|SKIPPED \]' $OUT/gpu_tests.txt | head -5 | tr '\n' ' ' | cut -c1-400)"
