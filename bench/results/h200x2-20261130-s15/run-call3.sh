#!/bin/bash
# Two-H200 host, session 15, call 3: beside_bench with the copy engines' gathers (1 to 8
# streams) and the kernel beside copies of a share of the slices, alone on GPU 0; then gpu_tests
# on GPU 1.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call3.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s)
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=0 timeout 200 $C/beside_bench > $OUT/beside.txt 2>&1
echo "== beside_bench (GPU 0) rc=$? $(ms $s) ms"; cat $OUT/beside.txt
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=1 timeout 200 $C/gpu_tests --gtest_brief=1 > $OUT/gpu_tests.txt 2>&1
echo "== gpu_tests (GPU 1) rc=$? $(ms $s) ms: $(tail -3 $OUT/gpu_tests.txt | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure" -A4 $OUT/gpu_tests.txt | head -20
echo "elapsed $(( $(date +%s) - T0 )) s"
