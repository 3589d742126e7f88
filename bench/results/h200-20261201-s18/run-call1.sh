#!/bin/bash
# One-H200 host, session 18, call 1 (issue 44): the scattering store with its slice table read
# from pinned memory (its copy had queued behind the next chunk's copy-in on the H2D engine)
# and the next slot placed while the writes before run. 8 GiB u64 at 1/8, 1/256 and the
# smallest budget: scattered (GPUSORT_SCATTER=on), DSPS (off), the table copied as before
# (GPUSORT_SCATTER_TABLE=copy), and CUDA_DEVICE_MAX_CONNECTIONS=32 (streams aliased on the
# default 8 hardware queues?); every other kind scattered; then two of four shards of
# gpu_executor_tests (tiny budget, every out-of-core job scattered) side by side.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call1.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader; nproc; free -g | head -2
T0=$(date +%s); left() { echo $(( 585 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
bench() {  # name kinds timeout env...
  local name=$1 kinds=$2 t=$3; shift 3
  local s=$(date +%s%N)
  env "$@" timeout $t $C/gpu_bench --chunks yes --chunk-bytes 8Gi --gpus 1 \
    --kinds $kinds --budgets 1/8,1/256,smallest --repeat 3 \
    --json $OUT/chunks-$name.json > $OUT/chunks-$name.txt 2>&1
  echo "== $name ($*) rc=$? $(ms $s) ms"
  grep -E "budget (1/8|1/256|smallest)|round 1 (sort|copy in|copy out|round)" $OUT/chunks-$name.txt | sed 's/.*GiB //' | cut -c1-120
}
bench on u64 45 GPUSORT_SCATTER=on
bench off u64 45 GPUSORT_SCATTER=off
bench copytable u64 45 GPUSORT_SCATTER=on GPUSORT_SCATTER_TABLE=copy
bench conn32 u64 45 GPUSORT_SCATTER=on CUDA_DEVICE_MAX_CONNECTIONS=32
bench rest u64.stable,f64,f64.stable 120 GPUSORT_SCATTER=on
shard() {  # shard index
  local s=$(date +%s%N)
  GPUSORT_SCATTER=on GPUSORT_TEST_BUDGET=tiny GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$(($1-1)) \
    timeout $(( $(left) - 10 )) $C/gpu_executor_tests --gtest_brief=1 > $OUT/gpu_executor_tests.shard$1of4.txt 2>&1
  echo "== gpu_executor_tests shard $1/4 (tiny, scatter on) rc=$? $(ms $s) ms: $(tail -3 $OUT/gpu_executor_tests.shard$1of4.txt | tr '\n' ' ')"
}
shard 1 > $OUT/s1.log 2>&1 &
shard 2 > $OUT/s2.log 2>&1
wait; cat $OUT/s1.log $OUT/s2.log
grep -h -E "^\[  FAILED|Failure" -A4 $OUT/gpu_executor_tests*.txt | head -30
echo "elapsed $(( $(date +%s) - T0 )) s"
