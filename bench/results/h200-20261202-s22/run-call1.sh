#!/bin/bash
# One-H200 host, session 22, call 1, the bundle in dist/COMMIT: round 2's first sample read
# behind round 1 (GPUSORT_SAMPLE_BEHIND=1, the new default) against read between the rounds (0),
# interleaved in one run:
# (1) gpu_bench's out-of-core target, 8 GiB u64 at budget 1/8 (d = 11), --repeat 5, four times;
# (2) gpu_bench --chunks, 8 GiB u64 and f64.stable at 1/8 and 1/256, --repeat 3, twice each;
# (3) `gpusort sort --local` of 8 GiB u64 from /dev/shm into a new file at 32 MiB and 1 GiB,
#     three passes each, verified once.
D=$PWD/dist; mkdir -p $D; tar xJf .gpucarry/dist.tar.xz -C $D
FINAL=$OUT; OUT=/tmp/w1; mkdir -p $OUT
trap 'tar czf $FINAL/call1.tar.gz -C $OUT .' EXIT
echo "commit $(cat $D/COMMIT)"
T0=$(date +%s)
for k in 1 2; do
  for b in 1 0; do
    GPUSORT_SAMPLE_BEHIND=$b timeout 120 $D/bench/gpu_bench --sizes 1Gi --cpu-count 1Mi \
      --repeat 5 --json $OUT/target-b$b-$k.json > $OUT/target-b$b-$k.txt 2>&1
    echo "== target behind=$b pass $k rc=$? at $(( $(date +%s) - T0 )) s"
    grep -E 'out of core \(budget|round 2 plan|round 1 round|round 2 round|floor from' \
      $OUT/target-b$b-$k.txt | head -12
  done
done
for k in 1 2; do
  for b in 1 0; do
    GPUSORT_SAMPLE_BEHIND=$b timeout 150 $D/bench/gpu_bench --chunks yes --chunk-bytes 8Gi \
      --gpus 1 --kinds u64,f64.stable --budgets 1/256 --repeat 3 \
      --json $OUT/chunks-b$b-$k.json > $OUT/chunks-b$b-$k.txt 2>&1
    echo "== chunks behind=$b pass $k rc=$? at $(( $(date +%s) - T0 )) s"
    grep -E 'median|round 2 plan' $OUT/chunks-b$b-$k.txt | head -20
  done
done
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
S=/dev/shm/s22; mkdir -p $S
$D/bin/gpusort gen --dtype u64 --dist uniform --count 1Gi --seed 9 --out $S/u.bin > /dev/null
cli() {  # name budget verify behind
  local name=$1 b=$2 v=$3 behind=$4
  printf 'devices: [0]\ndevice_memory_budget: %s\nlog_level: warn\n' $b > $S/c.yaml
  local s=$(date +%s%N)
  GPUSORT_SAMPLE_BEHIND=$behind timeout 60 $D/bin/gpusort sort $S/u.bin --dtype u64 \
    --out $S/out.bin --local --config $S/c.yaml --json --profile > $OUT/cli-$name.txt 2>&1
  local rc=$? w=$(ms $s)
  echo "== cli $name behind=$behind rc=$rc, $w ms: $(grep -o '"seconds":[0-9.]*' $OUT/cli-$name.txt | head -1)"
  [ $v = 1 ] && $D/bin/gpusort verify $S/out.bin --dtype u64 2>&1 | tail -1
  rm -f $S/out.bin
}
for k in 1 2 3; do
  for behind in 1 0; do
    cli b32M-b$behind-$k 33554432 $(( k == 1 )) $behind
    cli b1G-b$behind-$k 1073741824 $(( k == 1 )) $behind
  done
done
rm -rf $S
echo "elapsed $(( $(date +%s) - T0 )) s"
