#!/bin/bash
# Two-H200 host, session 17, call 1: the scattered rounds (fd89b30) on a GPU for the first time.
# GPU 0: gpu_bench --chunks, 8 GiB, every kind, 1/8, 1/256 and the smallest budget, with
# GPUSORT_SCATTER=off (DSPS, as before) and unset (auto: the scattered rounds from 256 chunks).
# GPU 1 meanwhile: gpu_executor_tests with the tiny budget and GPUSORT_SCATTER=on (every
# out-of-core job scattered), four shards side by side.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call1.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"; nvidia-smi -L; df -h /dev/shm | tail -1
T0=$(date +%s); left() { echo $(( 585 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
shard() {  # shard index
  local s=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=1 GPUSORT_SCATTER=on GPUSORT_TEST_BUDGET=tiny GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$(($1-1)) \
    timeout 420 $C/gpu_executor_tests --gtest_brief=1 > $OUT/gpu_executor_tests.scatter.shard$1of4.txt 2>&1
  echo "== gpu_executor_tests shard $1/4 (GPU 1, tiny, scatter on) rc=$? $(ms $s) ms: $(tail -3 $OUT/gpu_executor_tests.scatter.shard$1of4.txt | tr '\n' ' ')"
}
( shard 1 ) > $OUT/t1.log 2>&1 &
( shard 2 ) > $OUT/t2.log 2>&1 &
( shard 3 ) > $OUT/t3.log 2>&1 &
( shard 4 ) > $OUT/t4.log 2>&1 &
for mode in off auto; do
  s=$(date +%s%N)
  if [ $mode = off ]; then export GPUSORT_SCATTER=off; else unset GPUSORT_SCATTER; fi
  CUDA_VISIBLE_DEVICES=0 timeout 150 $C/gpu_bench --chunks yes --chunk-bytes 8Gi --gpus 1 \
    --kinds u64,u64.stable,f64,f64.stable --budgets 1/8,1/256,smallest --repeat 3 \
    --json $OUT/chunks-$mode.json > $OUT/chunks-$mode.txt 2>&1
  echo "== gpu_bench --chunks 8Gi one H200, scatter $mode rc=$? $(ms $s) ms"
  grep -E "budget (1/8|1/256|smallest)" $OUT/chunks-$mode.txt | grep -v "plan:" | cut -c1-160
  tail -3 $OUT/chunks-$mode.txt
done
unset GPUSORT_SCATTER
wait; cat $OUT/t?.log
grep -h -E "^\[  FAILED|Failure" -A4 $OUT/gpu_executor_tests*.txt | head -40
echo "elapsed $(( $(date +%s) - T0 )) s"
