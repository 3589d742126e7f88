#!/bin/bash
# One-H200 host, session 22, call 2, the bundle in dist/COMMIT (the reader of the sample behind
# round 1 now stops between groups of 4096 candidates, and take() reads what is left on every
# core; the profile shows "plan: sample left";
# the splitters of few chunks selected from the candidates' sorted runs, not sorted):
# (1) gpu_bench's out-of-core target, 8 GiB u64 at 1/8 (d = 11), HEAD's plan (sample behind,
#     splitters selected) against s21's (GPUSORT_SAMPLE_BEHIND=0 GPUSORT_SPLITTER_SELECT=0),
#     interleaved, twice each, --repeat 5, with --log debug (how many runs were read behind);
# (2) gpu-check's tests: every GPU test program, the executor's engine suites at the tiny budget
#     in four shards (hundreds of chunks, the sample read behind from the GPU's releaser).
D=$PWD/dist; mkdir -p $D; tar xJf .gpucarry/dist.tar.xz -C $D
FINAL=$OUT; OUT=/tmp/w2; mkdir -p $OUT
trap 'tar czf $FINAL/call2.tar.gz -C $OUT .' EXIT
echo "commit $(cat $D/COMMIT)"
T0=$(date +%s)
for k in 1 2; do
  for b in 1 0; do
    GPUSORT_SAMPLE_BEHIND=$b GPUSORT_SPLITTER_SELECT=$b timeout 100 $D/bench/gpu_bench --sizes 1Gi --cpu-count 1Mi \
      --repeat 5 --log debug --json $OUT/target-b$b-$k.json > $OUT/target-b$b-$k.txt 2>&1
    echo "== target behind=$b pass $k rc=$? at $(( $(date +%s) - T0 )) s"
    grep -E 'out of core \(budget|round 2 plan|round 1 round|round 2 round|floor from|pinned 0' \
      $OUT/target-b$b-$k.txt | head -12
    grep -o "round 2's sample: .*" $OUT/target-b$b-$k.txt | sort | uniq -c
  done
done
GPUSORT_BIN=$D timeout 330 scripts/gpu-check.sh $OUT/check --jobs 4 --skip-sanitizer \
  --skip-bench > $OUT/check.log 2>&1
echo "== gpu-check tests rc=$? at $(( $(date +%s) - T0 )) s"
tail -25 $OUT/check.log
echo "elapsed $(( $(date +%s) - T0 )) s"
