#!/bin/bash
# One-H200 host, session 20, call 2 (issue 44), the bundle at 69dc36b (writes behind the store,
# the mover's blocks split): gpu-check.sh's executor and pipeline tests (--jobs 4, tiny budget);
# gpu_bench 8 GiB u64 at 1/8, 1/256 and the smallest budget with the writes behind off and on
# (pinned: should not move); e2e_bench at 8 GiB and 1/256 with both switches off (as before) and
# on (the default), the CLI at 32 MiB with the round-1 buffer pageable against pinned.
D=$PWD/dist; mkdir -p $D; tar xJf .gpucarry/dist.tar.xz -C $D
FINAL=$OUT; OUT=/tmp/w2; mkdir -p $OUT
trap 'tar czf $FINAL/call2.tar.gz -C $OUT .' EXIT
echo "commit $(cat $D/COMMIT)"
T0=$(date +%s); left() { echo $(( 570 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
s=$(date +%s%N)
timeout 200 env GPUSORT_BIN=$D scripts/gpu-check.sh $OUT/check --only gpu_executor,pipeline --jobs 4 \
  --skip-sanitizer --skip-bench > $OUT/check.log 2>&1
echo "== gpu-check executor+pipeline rc=$? $(ms $s) ms"; grep -v '^\[' $OUT/check.log | tail -22 | cut -c1-200
for wb in 0 1; do
  s=$(date +%s%N)
  GPUSORT_WRITE_BEHIND=$wb GPUSORT_MOVER_SPLIT=$wb timeout 80 $D/bench/gpu_bench --chunks yes --chunk-bytes 8Gi \
    --gpus 1 --kinds u64 --budgets 1/8,1/256,smallest --repeat 3 --json $OUT/chunks-wb$wb.json > $OUT/chunks-wb$wb.txt 2>&1
  echo "== gpu_bench wb=$wb rc=$? $(ms $s) ms"; grep -E "budget (1/8|1/256|smallest)" $OUT/chunks-wb$wb.txt | cut -c1-150
done
S=/dev/shm/s20; mkdir -p $S
$D/bin/gpusort gen --dtype u64 --dist uniform --count 1Gi --seed 9 --out $S/u.bin > /dev/null
cli() {  # name budget env...
  local name=$1 b=$2; shift 2
  printf 'devices: [0]\ndevice_memory_budget: %s\nlog_level: warn\n' $b > $S/c.yaml
  local s=$(date +%s%N)
  env "$@" timeout 60 $D/bin/gpusort sort $S/u.bin --dtype u64 --out $S/out.bin --local --config $S/c.yaml \
    --json --profile > $OUT/cli-$name.txt 2>&1
  local rc=$? w=$(ms $s)
  echo "== cli $name (budget $b $*) rc=$rc, $w ms: $(grep -o '"seconds":[0-9.]*,"wall_seconds":[0-9.]*,"peak_rss_bytes":[0-9]*' $OUT/cli-$name.txt)"
  $D/bin/gpusort verify $S/out.bin --dtype u64 2>&1 | tail -1
  rm -f $S/out.bin
}
for k in 1 2; do
  cli pinned-$k 33554432
  cli pageable-$k 33554432 GPUSORT_ROUND1_PINNED=0
  cli old-$k 33554432 GPUSORT_WRITE_BEHIND=0 GPUSORT_MOVER_SPLIT=0
done
cli smallest 23068672
cli smallest-old 23068672 GPUSORT_WRITE_BEHIND=0 GPUSORT_MOVER_SPLIT=0
cli 1G 1073741824
cli 1G-old 1073741824 GPUSORT_WRITE_BEHIND=0 GPUSORT_MOVER_SPLIT=0
rm -rf $S
for wb in 1 0; do
  l=$(( $(left) - 5 )); [ $l -lt 60 ] && break
  s=$(date +%s%N)
  GPUSORT_WRITE_BEHIND=$wb GPUSORT_MOVER_SPLIT=$wb timeout $l $D/bench/e2e_bench --bin $D/bin --dir /dev/shm --bytes 8Gi \
    --cpu-bytes 64Mi --budget 1/256 --skip-fit --repeat 2 --machine h200 --commit $(cat $D/COMMIT) \
    --json $OUT/e2e-wb$wb.json > $OUT/e2e-wb$wb.txt 2>&1
  echo "== e2e_bench wb=$wb rc=$? $(ms $s) ms"; grep -v "^gpusort: profile" $OUT/e2e-wb$wb.txt | grep -E "^  " | grep -v "#" | cut -c1-100
done
echo "elapsed $(( $(date +%s) - T0 )) s"
