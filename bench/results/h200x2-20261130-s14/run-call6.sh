#!/bin/bash
# Two-H200 host, session 14, call 6: call 5's failure again with a check after each batch.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call6.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
CUDA_VISIBLE_DEVICES=0 GPUSORT_TEST_BUDGET=tiny timeout 60 $C/gpu_executor_tests \
  --gtest_filter='GpuEngineKeys/2.EveryInCoreEngine*:gpu_test.OutOfCoreAndInCore*' > $OUT/exec.txt 2>&1
echo "== rc=$?"; grep -E "DIAG|FAILED|OK \]" $OUT/exec.txt | cut -c1-1500 | head -6
