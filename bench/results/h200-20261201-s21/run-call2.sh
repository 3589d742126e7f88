#!/bin/bash
# One-H200 host, session 21, call 2: scripts/gpu-check.sh at the bundle in dist/COMMIT, its tests
# (--jobs 4, tiny budget, four OpenMP threads each) beside its four compute-sanitizer tools
# (initcheck now copying round 2's slices a call each: GPUSORT_COPY_BATCH=0), benchmarks
# skipped; what ends within the call.
D=$PWD/dist; mkdir -p $D; tar xJf .gpucarry/dist.tar.xz -C $D
FINAL=$OUT; OUT=/tmp/w2; mkdir -p $OUT
trap 'tar czf $FINAL/call2.tar.gz -C $OUT .' EXIT
echo "commit $(cat $D/COMMIT)"
T0=$(date +%s)
part() {  # name timeout args...
  local name=$1 t=$2; shift 2
  local s=$(date +%s)
  OMP_NUM_THREADS=4 timeout $t env GPUSORT_BIN=$D scripts/gpu-check.sh $OUT/$name "$@" > $OUT/$name.log 2>&1
  echo "== $name rc=$? $(( $(date +%s) - s )) s"
}
part tests 560 --jobs 4 --skip-sanitizer --skip-bench > $OUT/r1.log &
part sanitizers 560 --skip-tests --skip-bench --tools initcheck,memcheck,synccheck,racecheck > $OUT/r2.log &
wait; cat $OUT/r1.log $OUT/r2.log
for f in $OUT/tests/*.txt; do echo "$(basename $f): $(grep -E '^\[  (PASSED|FAILED)|SKIPPED \]|tests ran' $f | tr '\n' ' ')"; done
grep -h -B2 -A6 "Failure$" $OUT/tests/*.txt | head -40
cat $OUT/sanitizers/sanitizer_summary.txt
echo "elapsed $(( $(date +%s) - T0 )) s"
