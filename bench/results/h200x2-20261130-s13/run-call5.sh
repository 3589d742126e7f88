#!/bin/bash
# Two-H200 host, session 13, call 5: the GPU fault sweep (tiny budget) with the sample sort's
# scratch for the GPU's own policy (d2390fb's default) and the tests' shared captured_log
# (2907f93), on GPU 0; the test of the sort a round takes on GPU 1.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call5.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=1 timeout 60 $C/gpu_executor_tests --gtest_filter='*OutOfCoreFloat*' > $OUT/exec-float.txt 2>&1 &
P=$!
CUDA_VISIBLE_DEVICES=0 GPUSORT_TEST_BUDGET=tiny timeout 170 $C/gpu_fault_tests > $OUT/gpu_fault_tests.txt 2>&1
echo "== gpu_fault_tests (GPU 0, tiny) rc=$? $(ms $s) ms"; grep -E "^\[  (PASSED|FAILED|SKIPPED)|Failure" $OUT/gpu_fault_tests.txt | head
wait $P; echo "== OutOfCoreFloat (GPU 1) rc=$?"; grep -E "OK|FAILED|Failure" $OUT/exec-float.txt | head -5
