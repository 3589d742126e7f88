#!/bin/bash
# One-H200 host, session 19, call 4, the bundle of calls 2-3 (b674e91): gpu-check.sh's core_tests
# beside its memcheck and synccheck runs (OpenMP 8 threads each); then its benchmarks; then
# gpu_bench 8 GiB u64 and f64.stable at 1/8, 1/32, 1/128 with the scattered rounds off and on
# (where should min_chunks, 1024, lie), as time allows.
D=$PWD/dist; mkdir -p $D; tar xJf .gpucarry/dist.tar.xz -C $D
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call4.tar.gz -C $OUT .' EXIT
echo "commit $(cat $D/COMMIT)"
T0=$(date +%s); left() { echo $(( 430 - ($(date +%s) - T0) )); }
part() {  # name timeout args...
  local name=$1 t=$2; shift 2
  local s=$(date +%s)
  OMP_NUM_THREADS=8 timeout $t env GPUSORT_BIN=$D scripts/gpu-check.sh $OUT/$name "$@" > $OUT/$name.log 2>&1
  echo "== $name rc=$? $(( $(date +%s) - s )) s: $(grep -v '^\[' $OUT/$name.log | tail -4 | tr '\n' ' ' | cut -c1-300)"
}
part core 200 --only core --skip-sanitizer --skip-bench > $OUT/r1.log &
part memcheck 200 --skip-tests --skip-bench --tools memcheck,synccheck > $OUT/r2.log &
wait; cat $OUT/r?.log; cat $OUT/memcheck/sanitizer_summary.txt
part bench $(( $(left) - 60 )) --skip-tests --skip-sanitizer
cat $OUT/bench/gpu_bench.md 2>/dev/null | head -30
for sc in off on; do
  l=$(left); [ $l -lt 15 ] && break
  GPUSORT_SCATTER=$sc timeout $l $D/bench/gpu_bench --chunks yes --chunk-bytes 8Gi --gpus 1 --kinds u64,f64.stable \
    --budgets 1/32,1/128 --repeat 3 --json $OUT/chunks-mid-$sc.json > $OUT/chunks-mid-$sc.txt 2>&1
  echo "== scatter $sc rc=$?"; grep -E "budget 1/" $OUT/chunks-mid-$sc.txt | cut -c1-150
done
echo "elapsed $(( $(date +%s) - T0 )) s"
