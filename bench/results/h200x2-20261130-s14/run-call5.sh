#!/bin/bash
# Two-H200 host, session 14, call 5: why call 4's tiny-budget suites failed (cudaErrorInvalidValue
# copying a gather table, cuda_device.cpp:408) with a diagnostic build, with sort lanes 4 and 1;
# the new count_below_runs test; the resident cut with one launch a GPU a step (gpu_bench --model).
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call5.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s)
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
for l in 4 1; do
  s=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=0 GPUSORT_SORT_LANES=$l GPUSORT_TEST_BUDGET=tiny timeout 60 $C/gpu_fault_tests \
    --gtest_filter='*EveryCudaCall*OutOfCore*' > $OUT/fault-ooc-lanes$l.txt 2>&1
  echo "== fault OOC lanes $l rc=$? $(ms $s) ms"; grep -E "DIAG|FAILED|OK \]" $OUT/fault-ooc-lanes$l.txt | cut -c1-900 | head -4
  s=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=0 GPUSORT_SORT_LANES=$l GPUSORT_TEST_BUDGET=tiny timeout 60 $C/gpu_executor_tests \
    --gtest_filter='GpuEngineKeys/2.EveryInCoreEngine*:gpu_test.OutOfCoreAndInCore*' > $OUT/exec-lanes$l.txt 2>&1
  echo "== executor lanes $l rc=$? $(ms $s) ms"; grep -E "DIAG|FAILED|OK \]" $OUT/exec-lanes$l.txt | cut -c1-900 | head -6
done
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=1 timeout 60 $C/gpu_tests --gtest_filter='*CountBelow*' > $OUT/count-below.txt 2>&1
echo "== count_below_runs tests rc=$? $(ms $s) ms"; grep -E "FAILED|OK \]|Failure" -A3 $OUT/count-below.txt | head -12
s=$(date +%s%N)
timeout 150 $C/gpu_bench --model yes --chunk-bytes 8Gi,32Gi --repeat 3 > $OUT/model.txt 2>&1
echo "== gpu_bench --model rc=$? $(ms $s) ms"
grep -E "measured|^\| multi" $OUT/model.txt
grep -E "profiled run|round 1 (copy in|copy out|ranges cut)" $OUT/model.txt | head -40
echo "elapsed $(( $(date +%s) - T0 )) s"
