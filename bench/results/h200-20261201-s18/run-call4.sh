#!/bin/bash
# One-H200 host, session 18, call 4 (issue 44): the scattering store through scatter_lines.
# gpu_tests' gather and scatter_lines tests; beside_bench --writes (the gather kernel against
# scatter_lines on 4 to 32 blocks); gpu_bench 8 GiB u64, scattered with GPUSORT_SCATTER_BLOCKS
# 4, 8 (default, traced), 16, 32, and DSPS; the other kinds scattered at 1/256 and the smallest
# budget and DSPS at 1/8 (their baselines); then gpu_tests whole.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call4.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s); left() { echo $(( 585 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
s=$(date +%s%N)
timeout 60 $C/gpu_tests --gtest_filter='*scatter_lines*:*gpu_gather*' > $OUT/gpu_tests-scatter.txt 2>&1
echo "== gpu_tests scatter_lines and gather rc=$? $(ms $s) ms: $(grep -E '^\[  (PASSED|FAILED)' $OUT/gpu_tests-scatter.txt | tr '\n' ' ')"
s=$(date +%s%N)
timeout 100 $C/beside_bench --writes yes --json $OUT/writes.json > $OUT/writes.txt 2>&1
echo "== beside_bench --writes rc=$? $(ms $s) ms"; cat $OUT/writes.txt
bench() {  # name kinds budgets timeout env...
  local name=$1 kinds=$2 budgets=$3 t=$4; shift 4
  local s=$(date +%s%N)
  env "$@" timeout $t $C/gpu_bench --chunks yes \
    --chunk-bytes 8Gi --gpus 1 --kinds $kinds --budgets $budgets --repeat 3 \
    --json $OUT/chunks-$name.json > $OUT/chunks-$name.txt 2>&1
  echo "== $name ($*) rc=$? $(ms $s) ms"
  grep -E "budget (1/8|1/256|smallest)|round 1 (sort|copy in|copy out|round)" $OUT/chunks-$name.txt | sed 's/.*GiB //' | cut -c1-120
}
bench off u64 1/8,1/256,smallest 40 GPUSORT_SCATTER=off
bench b8 u64 1/8,1/256,smallest 40 GPUSORT_SCATTER=on GPUSORT_PROFILE_TRACE=$OUT/trace-b8.txt
bench b4 u64 1/256,smallest 30 GPUSORT_SCATTER=on GPUSORT_SCATTER_BLOCKS=4
bench b16 u64 1/256,smallest 30 GPUSORT_SCATTER=on GPUSORT_SCATTER_BLOCKS=16
bench b32 u64 1/256,smallest 30 GPUSORT_SCATTER=on GPUSORT_SCATTER_BLOCKS=32
bench rest-off u64.stable,f64,f64.stable 1/8 60 GPUSORT_SCATTER=off
bench rest-on u64.stable,f64,f64.stable 1/256,smallest 90 GPUSORT_SCATTER=on
s=$(date +%s%N)
timeout $(( $(left) - 5 )) $C/gpu_tests --gtest_brief=1 > $OUT/gpu_tests.txt 2>&1
echo "== gpu_tests rc=$? $(ms $s) ms: $(tail -3 $OUT/gpu_tests.txt | tr '\n' ' ')"
grep -h -E "^\[  FAILED|Failure" -A4 $OUT/gpu_tests*.txt | head -30
echo "elapsed $(( $(date +%s) - T0 )) s"
