#!/bin/bash
# One-H200 host, session 18, call 2 (issue 44): where round 1 of a scattering round loses its
# time. beside_bench --writes (round 1's writes by the engine's kernel, by whole lines and, for
# DSPS, by the copy engine, each beside the copy-in and the sort); gpu_bench 8 GiB u64 at 1/256
# and the smallest budget with GPUSORT_PROFILE_TRACE (every chunk's stage marks), scattered and
# DSPS; then shards 3 and 4 of gpu_executor_tests (tiny budget, scatter on) and gpu_fault_tests.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call2.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s); left() { echo $(( 585 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
s=$(date +%s%N)
timeout 150 $C/beside_bench --writes yes --json $OUT/writes.json > $OUT/writes.txt 2>&1
echo "== beside_bench --writes rc=$? $(ms $s) ms"; cat $OUT/writes.txt
bench() {  # name budgets timeout env...
  local name=$1 budgets=$2 t=$3; shift 3
  local s=$(date +%s%N)
  env "$@" GPUSORT_PROFILE_TRACE=$OUT/trace-$name.txt timeout $t $C/gpu_bench --chunks yes \
    --chunk-bytes 8Gi --gpus 1 --kinds u64 --budgets $budgets --repeat 3 \
    --json $OUT/chunks-$name.json > $OUT/chunks-$name.txt 2>&1
  echo "== $name ($*) rc=$? $(ms $s) ms"
  grep -E "budget (1/8|1/256|smallest)|round 1 (sort|copy in|copy out|round)" $OUT/chunks-$name.txt | sed 's/.*GiB //' | cut -c1-120
}
bench on-256 1/256 40 GPUSORT_SCATTER=on
bench on-small smallest 40 GPUSORT_SCATTER=on
bench off-256 1/8,1/256 40 GPUSORT_SCATTER=off
ls -la $OUT
shard() {  # shard index
  local s=$(date +%s%N)
  GPUSORT_SCATTER=on GPUSORT_TEST_BUDGET=tiny GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$(($1-1)) \
    timeout $(( $(left) - 50 )) $C/gpu_executor_tests --gtest_brief=1 > $OUT/gpu_executor_tests.shard$1of4.txt 2>&1
  echo "== gpu_executor_tests shard $1/4 (tiny, scatter on) rc=$? $(ms $s) ms: $(tail -3 $OUT/gpu_executor_tests.shard$1of4.txt | tr '\n' ' ')"
}
shard 3 > $OUT/s3.log 2>&1 &
shard 4 > $OUT/s4.log 2>&1
wait; cat $OUT/s3.log $OUT/s4.log
s=$(date +%s%N)
GPUSORT_SCATTER=on GPUSORT_TEST_BUDGET=tiny timeout $(( $(left) - 3 )) $C/gpu_fault_tests > $OUT/gpu_fault_tests.txt 2>&1
echo "== gpu_fault_tests (tiny, scatter on) rc=$? $(ms $s) ms: $(grep -E '^\[  (PASSED|FAILED)' $OUT/gpu_fault_tests.txt | tr '\n' ' ')"
grep -h -E "^\[  FAILED|Failure" -A4 $OUT/gpu_executor_tests*.txt $OUT/gpu_fault_tests.txt | head -30
echo "elapsed $(( $(date +%s) - T0 )) s"
