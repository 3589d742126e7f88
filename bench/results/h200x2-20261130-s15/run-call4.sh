#!/bin/bash
# Two-H200 host, session 15, call 4 (issue 44): the host packing a share of round 2's short
# slices beside the gather kernel. GpuSortLanes on GPU 1 (30% and 90% packed among them); then
# alone on GPU 0, 8 GiB u64 and f64 at 1/256 with GPUSORT_GATHER_HOST_PERCENT 0, 30, 50, 70,
# 0, 50, and the smallest budget with 0 and 50.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call4.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s); left() { echo $(( 570 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=1 timeout 150 $C/gpu_executor_tests --gtest_filter='*SortLanes*' > $OUT/lanes-test.txt 2>&1
echo "== SortLanes tests (GPU 1) rc=$? $(ms $s) ms: $(grep -E '^\[  (PASSED|FAILED)' $OUT/lanes-test.txt | tr '\n' ' ')"
grep -E "Failure|FAILED|Which is|Expected" $OUT/lanes-test.txt | head -12
run() {  # name, percent, budgets
  local name=$1 pct=$2 budgets=$3
  [ $(left) -lt 60 ] && { echo "no time for $name"; return; }
  local s=$(date +%s%N)
  GPUSORT_GATHER_HOST_PERCENT=$pct CUDA_VISIBLE_DEVICES=0 timeout 90 $C/gpu_bench --chunks yes \
    --chunk-bytes 8Gi --gpus 1 --kinds u64,f64 --budgets $budgets --repeat 3 > $OUT/$name.txt 2>&1
  echo "== $name (host packs $pct%) rc=$? $(ms $s) ms"
  grep -E "budget|round 2 (sort|round|copy in) " $OUT/$name.txt | grep -v "plan:" | cut -c1-118
}
run p0-a 0 1/256
run p30 30 1/256
run p50-a 50 1/256
run p70 70 1/256
run p0-b 0 1/256
run p50-b 50 1/256
run small-p0 0 smallest
run small-p50 50 smallest
echo "elapsed $(( $(date +%s) - T0 )) s"
