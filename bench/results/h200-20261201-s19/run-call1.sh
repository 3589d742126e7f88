#!/bin/bash
# One-H200 host, session 19, call 1 (issue 44), the whole bundle (scripts/bundle.sh) at the commit
# in dist/COMMIT: the radix-from-begin_bit and scatter_lines GPU tests; gpu_bench 8 GiB, u64,
# u64.stable, f64, f64.stable at 1/8, 1/256 and the smallest budget, as built (16 blocks) and
# with the aligned bounds (GPUSORT_SCATTER_PREFIX=1) in one run; the CLI as a user runs it
# (`gpusort sort --local` of files in /dev/shm into new files, wall time and peak RSS): 8 GiB u64
# at 1 GiB, 32 MiB and the smallest budget, and the issue's own cases, f64 --stable 2 GiB at
# 96 MiB and 16 GiB at 256 MiB, each beside 1/8 of its data; then gpu_executor_tests' engine
# suites with the aligned bounds and every out-of-core job scattered (tiny budget) in the time left.
D=$PWD/dist; mkdir -p $D; tar xJf .gpucarry/dist.tar.xz -C $D
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call1.tar.gz -C $OUT .' EXIT
echo "commit $(cat $D/COMMIT)"; df -h /dev/shm | tail -1; free -g | head -2
T0=$(date +%s); left() { echo $(( 560 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
s=$(date +%s%N)
timeout 60 $D/tests/gpu/gpu_tests --gtest_filter='*low_bits*:*scatter_lines*:*radix*' > $OUT/gpu_tests-radix.txt 2>&1
echo "== gpu_tests radix/scatter rc=$? $(ms $s) ms: $(grep -E '^\[  (PASSED|FAILED)' $OUT/gpu_tests-radix.txt | tr '\n' ' ')"
grep -m3 -A8 "Failure$" $OUT/gpu_tests-radix.txt
bench() {  # name env...
  local name=$1; shift
  local s=$(date +%s%N)
  env "$@" timeout 150 $D/bench/gpu_bench --chunks yes --chunk-bytes 8Gi --gpus 1 \
    --kinds u64,u64.stable,f64,f64.stable --budgets 1/8,1/256,smallest --repeat 3 \
    --json $OUT/chunks-$name.json > $OUT/chunks-$name.txt 2>&1
  echo "== $name ($*) rc=$? $(ms $s) ms"
  grep -E "budget (1/8|1/256|smallest)" $OUT/chunks-$name.txt | cut -c1-150
}
bench default
bench prefix GPUSORT_SCATTER_PREFIX=1
S=/dev/shm/s19; mkdir -p $S
cli() {  # name dtype in budget-bytes extra...
  local name=$1 t=$2 in=$3 b=$4; shift 4
  printf 'devices: [0]\ndevice_memory_budget: %s\nlog_level: warn\n' $b > $S/c.yaml
  local s=$(date +%s%N)
  timeout 120 $D/bin/gpusort sort $in --dtype $t --out $S/out.bin --local --config $S/c.yaml \
    --json --profile "$@" > $OUT/cli-$name.txt 2>&1
  local rc=$? w=$(ms $s)
  echo "== cli $name ($t, budget $b $*) rc=$rc, $w ms start to exit: $(grep -o '"seconds":[0-9.]*,"wall_seconds":[0-9.]*,"peak_rss_bytes":[0-9]*' $OUT/cli-$name.txt)"
  $D/bin/gpusort verify $S/out.bin --dtype $t 2>&1 | tail -1
  rm -f $S/out.bin
}
s=$(date +%s%N); $D/bin/gpusort gen --dtype u64 --dist uniform --count 1Gi --seed 9 --out $S/u.bin > /dev/null
echo "gen 8 GiB u64: $(ms $s) ms"
small=$($D/bin/gpusort plan --count 1Gi --dtype u64 --device-budget 1Gi --json | grep -o '"smallest_budget": *[0-9]*' | grep -o '[0-9]*$')
echo "smallest budget for 8 GiB u64: $small"
cli u64-1G u64 $S/u.bin 1073741824
cli u64-32M u64 $S/u.bin 33554432
cli u64-smallest u64 $S/u.bin $small
cli u64-32M-b u64 $S/u.bin 33554432
cli u64-1G-b u64 $S/u.bin 1073741824
rm -f $S/u.bin
$D/bin/gpusort gen --dtype f64 --dist uniform --count 256Mi --seed 9 --out $S/f2.bin > /dev/null
cli f64s-2G-256M f64 $S/f2.bin 268435456 --stable
cli f64s-2G-96M f64 $S/f2.bin 100663296 --stable
cli f64-2G-96M f64 $S/f2.bin 100663296
rm -f $S/f2.bin
s=$(date +%s%N); $D/bin/gpusort gen --dtype f64 --dist uniform --count 2Gi --seed 9 --out $S/f16.bin > /dev/null
echo "gen 16 GiB f64: $(ms $s) ms"
cli f64s-16G-2G f64 $S/f16.bin 2147483648 --stable
cli f64s-16G-256M f64 $S/f16.bin 268435456 --stable
rm -rf $S
echo "left $(left) s for the executor's engine suites (aligned bounds, scattered, tiny)"
shard() {
  local s=$(date +%s%N) l=$(left)
  GPUSORT_SCATTER=on GPUSORT_SCATTER_PREFIX=1 GPUSORT_TEST_BUDGET=tiny GTEST_TOTAL_SHARDS=2 GTEST_SHARD_INDEX=$(($1-1)) \
    timeout $l $D/tests/gpu/gpu_executor_tests --gtest_brief=1 --gtest_filter='GpuEngineKeys*:GpuSortLanes*:-*TheGpuHoldsNoMoreThanItsBudget*' > $OUT/exec-prefix.shard$1.txt 2>&1
  echo "== gpu_executor_tests engine suites shard $1/2 (prefix, scatter on, tiny) rc=$? $(ms $s) ms: $(tail -3 $OUT/exec-prefix.shard$1.txt | tr '\n' ' ')"
}
shard 1 > $OUT/p1.log 2>&1 & shard 2 > $OUT/p2.log 2>&1 & wait; cat $OUT/p1.log $OUT/p2.log
grep -h -E "^\[  FAILED|Failure" -A4 $OUT/exec-prefix.shard*.txt | head -30
echo "elapsed $(( $(date +%s) - T0 )) s"
