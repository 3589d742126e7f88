#!/bin/bash
# One-H200 host, session 20, call 4: scripts/gpu-check.sh at the commit in dist/COMMIT (the code
# of 9f97769), its tests (--jobs 3, tiny budget, four OpenMP threads each) beside its four
# compute-sanitizer tools (four OpenMP threads), benchmarks skipped; what ends within the call.
D=$PWD/dist; mkdir -p $D; tar xJf .gpucarry/dist.tar.xz -C $D
FINAL=$OUT; OUT=/tmp/w4; mkdir -p $OUT
trap 'tar czf $FINAL/call4.tar.gz -C $OUT .' EXIT
echo "commit $(cat $D/COMMIT)"
T0=$(date +%s)
part() {  # name timeout args...
  local name=$1 t=$2; shift 2
  local s=$(date +%s)
  OMP_NUM_THREADS=4 timeout $t env GPUSORT_BIN=$D scripts/gpu-check.sh $OUT/$name "$@" > $OUT/$name.log 2>&1
  echo "== $name rc=$? $(( $(date +%s) - s )) s"
}
part tests 545 --jobs 3 --skip-sanitizer --skip-bench > $OUT/r1.log &
part sanitizers 545 --skip-tests --skip-bench --tools memcheck,synccheck,racecheck,initcheck > $OUT/r2.log &
wait; cat $OUT/r1.log $OUT/r2.log
for f in $OUT/tests/*.txt; do echo "$(basename $f): $(grep -E '^\[  (PASSED|FAILED)|SKIPPED \]|tests ran' $f | tr '\n' ' ')"; done
grep -h -B2 -A6 "Failure$" $OUT/tests/*.txt | head -40
cat $OUT/sanitizers/sanitizer_summary.txt
echo "elapsed $(( $(date +%s) - T0 )) s"
