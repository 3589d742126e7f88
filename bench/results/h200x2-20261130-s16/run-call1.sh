#!/bin/bash
# Two-H200 host, session 16, call 1 (d708287): beside_bench with its green-context cases (the
# gather on 8, 16, 32 SMs of its own, the sort on the rest) on GPU 0, while GPU 1 runs the
# loader's tests (GpuSortLanes) and gpu_tests; then gpu_bench --model 8Gi on both GPUs (each
# GPU copying one way while each sorts, new in 4665414).
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call1.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s); left() { echo $(( 330 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
( s=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=1 timeout 60 $C/gpu_executor_tests --gtest_filter='*SortLanes*' > $OUT/lanes-test.txt 2>&1
  echo "== SortLanes tests (GPU 1) rc=$? $(ms $s) ms: $(grep -E '^\[  (PASSED|FAILED)' $OUT/lanes-test.txt | tr '\n' ' ')"
  s=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=1 timeout 120 $C/gpu_tests --gtest_brief=1 > $OUT/gpu_tests.txt 2>&1
  echo "== gpu_tests (GPU 1) rc=$? $(ms $s) ms: $(tail -3 $OUT/gpu_tests.txt | tr '\n' ' ')"
) > $OUT/g1.log 2>&1 &
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=0 timeout 150 $C/beside_bench --json $OUT/beside.json > $OUT/beside.txt 2>&1
echo "== beside_bench (GPU 0) rc=$? $(ms $s) ms"; cat $OUT/beside.txt | cut -c1-150
wait; cat $OUT/g1.log
grep -h -E "^\[  FAILED|Failure" -A4 $OUT/lanes-test.txt $OUT/gpu_tests.txt | head -20
s=$(date +%s%N)
timeout $(( $(left) - 5 )) $C/gpu_bench --model yes --chunk-bytes 8Gi --json $OUT/model.json > $OUT/model.txt 2>&1
echo "== gpu_bench --model 8Gi rc=$? $(ms $s) ms"; cut -c1-150 $OUT/model.txt | tail -60
echo "elapsed $(( $(date +%s) - T0 )) s"
