#!/bin/bash
# One-H200 host, session 23, call 1, the bundle in dist/COMMIT (round 2's cuts of a chunk's
# dealt bins from one search in bin 0 and log2 g keys of the others, slice_dealt_runs):
# (1) gpu-check's tests: every GPU test program, the executor's engine suites at the tiny budget
#     in four shards (hundreds of chunks, every one cut by slice_dealt_runs), then the two
#     free-memory tests alone;
# (2) gpu_bench's out-of-core target, 8 GiB u64 at 1/8 (d = 11), the dealt cuts against every
#     run searched (GPUSORT_DEALT_CUTS=0), interleaved, --repeat 5.
D=$PWD/dist; mkdir -p $D; tar xJf .gpucarry/dist.tar.xz -C $D
FINAL=$OUT; OUT=/tmp/w1; mkdir -p $OUT
trap 'tar czf $FINAL/call1.tar.gz -C $OUT .' EXIT
echo "commit $(cat $D/COMMIT)"
T0=$(date +%s)
GPUSORT_BIN=$D timeout 360 scripts/gpu-check.sh $OUT/check --jobs 4 --skip-sanitizer \
  --skip-bench > $OUT/check.log 2>&1
echo "== gpu-check tests rc=$? at $(( $(date +%s) - T0 )) s"
tail -25 $OUT/check.log
for c in 1 0; do
  GPUSORT_DEALT_CUTS=$c timeout 100 $D/bench/gpu_bench --sizes 1Gi --cpu-count 1Mi \
    --repeat 5 --json $OUT/target-c$c.json > $OUT/target-c$c.txt 2>&1
  echo "== target dealt=$c rc=$? at $(( $(date +%s) - T0 )) s"
  grep -E 'out of core \(budget|round 2 plan|plan: |round 1 round|round 2 round|floor from' \
    $OUT/target-c$c.txt | head -14
done
echo "elapsed $(( $(date +%s) - T0 )) s"
