#!/bin/bash
# Two-H200 host, session 15, call 5: alone on GPU 0, round 2's warp gather on more blocks
# (GPUSORT_GATHER_BLOCKS 32 = the default, 64, 128, 264): a shorter window of reads of mapped
# memory, if the sort beside slows as much at any rate (beside_bench); 8 GiB u64 and f64 at
# 1/256, then the smallest budget at 32 and 128. Then the GPU suites at this commit (the
# engine's code as at 0b8cefe, whose shards 1 and 2 passed in call 2): gpu_executor_tests
# shards 3 and 4 of 4 with the tiny budget, one a GPU, then gpu_fault_tests (tiny) on GPU 1.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call5.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s); left() { echo $(( 570 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
run() {  # name, blocks, budgets
  local name=$1 blocks=$2 budgets=$3
  [ $(left) -lt 330 ] && { echo "no time for $name"; return; }
  local s=$(date +%s%N)
  GPUSORT_GATHER_BLOCKS=$blocks CUDA_VISIBLE_DEVICES=0 timeout 90 $C/gpu_bench --chunks yes \
    --chunk-bytes 8Gi --gpus 1 --kinds u64,f64 --budgets $budgets --repeat 3 > $OUT/$name.txt 2>&1
  echo "== $name (gather blocks $blocks) rc=$? $(ms $s) ms"
  grep -E "budget (1/256|smallest)|round 2 (sort|round|copy in) " $OUT/$name.txt | grep -v "plan:" | cut -c1-118
}
run b32-a 32 1/256
run b64 64 1/256
run b128-a 128 1/256
run b264 264 1/256
run b32-b 32 1/256
run b128-b 128 1/256
run small-b32 32 smallest
run small-b128 128 smallest
shard() {  # GPU, shard index
  local s=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=$1 GPUSORT_TEST_BUDGET=tiny GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$(($2-1)) \
    timeout $(( $(left) - 10 )) $C/gpu_executor_tests --gtest_brief=1 > $OUT/gpu_executor_tests.shard$2of4.txt 2>&1
  echo "== gpu_executor_tests shard $2/4 (GPU $1, tiny) rc=$? $(ms $s) ms: $(tail -3 $OUT/gpu_executor_tests.shard$2of4.txt | tr '\n' ' ')"
}
shard 0 3 > $OUT/s3.log 2>&1 &
( shard 1 4
  s=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=1 GPUSORT_TEST_BUDGET=tiny timeout $(( $(left) - 5 )) $C/gpu_fault_tests > $OUT/gpu_fault_tests.txt 2>&1
  echo "== gpu_fault_tests (GPU 1, tiny) rc=$? $(ms $s) ms: $(grep -E '^\[  (PASSED|FAILED)' $OUT/gpu_fault_tests.txt | tr '\n' ' ')"
) > $OUT/s4.log 2>&1
wait; cat $OUT/s3.log $OUT/s4.log
grep -h -E "^\[  FAILED|Failure" -A4 $OUT/gpu_executor_tests*.txt $OUT/gpu_fault_tests.txt | head -30
echo "elapsed $(( $(date +%s) - T0 )) s"
