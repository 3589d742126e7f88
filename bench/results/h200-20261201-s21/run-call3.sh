#!/bin/bash
# One-H200 host, session 21, call 3: scripts/gpu-check.sh's benchmarks at the bundle in
# dist/COMMIT (tests and sanitizers ran in call 2); what ends within the call.
D=$PWD/dist; mkdir -p $D; tar xJf .gpucarry/dist.tar.xz -C $D
FINAL=$OUT; OUT=/tmp/w3; mkdir -p $OUT
trap 'tar czf $FINAL/call3.tar.gz -C $OUT .' EXIT
echo "commit $(cat $D/COMMIT)"
T0=$(date +%s)
timeout 560 env GPUSORT_BIN=$D scripts/gpu-check.sh $OUT/bench --skip-tests --skip-sanitizer > $OUT/bench.log 2>&1
echo "== bench rc=$? $(( $(date +%s) - T0 )) s"
grep -vE '^\s*$' $OUT/bench.log | tail -60
