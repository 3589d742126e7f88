#!/bin/bash
# Two-H200 host, session 12, call 2 (issue 40): every fitting job goes through the new resident
# sort, so the whole of gpu_executor_tests with gpu-check.sh's environment (GPUSORT_TEST_BUDGET
# =tiny), in four gtest shards, two at a time, one per GPU (the two-GPU tests skip there; call 1
# ran them on both), then gpu_fault_tests on GPU 0 as time allows.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call2.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s); left() { echo $(( T0 + 550 - $(date +%s) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
shard() {  # GPU K
  s=$(date +%s%N); l=$(left); [ $l -lt 10 ] && { echo "shard $2/4 not started" >> $OUT/summary.txt; return; }
  CUDA_VISIBLE_DEVICES=$1 GPUSORT_TEST_BUDGET=tiny GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$(( $2 - 1 )) \
    timeout $l $C/gpu_executor_tests > $OUT/gpu_executor_tests.shard$2of4.txt 2>&1
  echo "gpu_executor_tests shard $2/4 (GPU $1) rc=$? $(ms $s) ms" >> $OUT/summary.txt
}
( shard 0 1; shard 0 3
  s=$(date +%s%N); l=$(left)
  if [ $l -gt 20 ]; then
    CUDA_VISIBLE_DEVICES=0 GPUSORT_TEST_BUDGET=tiny timeout $l $C/gpu_fault_tests > $OUT/gpu_fault_tests.txt 2>&1
    echo "gpu_fault_tests (GPU 0) rc=$? $(ms $s) ms" >> $OUT/summary.txt
  fi ) &
A=$!
( shard 1 2; shard 1 4 ) &
B=$!
wait $A $B
cat $OUT/summary.txt
for f in $OUT/*.txt; do
  [ $(basename $f) = summary.txt ] && continue
  echo "== $(basename $f)"; grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED" $f | tail -4
  grep -m5 -B2 -A8 "Failure$" $f | head -40
done
