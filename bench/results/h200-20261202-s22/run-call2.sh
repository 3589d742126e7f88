#!/bin/bash
# One-H200 host, session 22, call 2, the bundle in dist/COMMIT: gpu-check's tests (every GPU
# test program, the executor's engine suites at the tiny budget in four shards: hundreds of
# chunks, round 2's sample read behind round 1 from the GPU's releaser thread), then the
# compressed-runs benchmark that s21's call 3 did not reach, with what time is left.
D=$PWD/dist; mkdir -p $D; tar xJf .gpucarry/dist.tar.xz -C $D
FINAL=$OUT; OUT=/tmp/w2; mkdir -p $OUT
trap 'tar czf $FINAL/call2.tar.gz -C $OUT .' EXIT
echo "commit $(cat $D/COMMIT)"
T0=$(date +%s)
GPUSORT_BIN=$D timeout 330 scripts/gpu-check.sh $OUT/check --jobs 4 --skip-sanitizer \
  --skip-bench > $OUT/check.log 2>&1
echo "== gpu-check tests rc=$? at $(( $(date +%s) - T0 )) s"
tail -25 $OUT/check.log
grep -hE '^\[  (PASSED|FAILED)|tests ran' $OUT/check/*.txt 2>/dev/null | sort | uniq -c
left=$(( 560 - ($(date +%s) - T0) ))
echo "compress_bench with $left s"
[ $left -gt 30 ] && timeout $left $D/bench/gpu_bench --compress yes --compress-bytes 8Gi \
  --repeat 3 --json $OUT/compress.json > $OUT/compress.txt 2>&1
echo "== compress rc=$? at $(( $(date +%s) - T0 )) s"
grep -vE '^    ' $OUT/compress.txt | tail -40
