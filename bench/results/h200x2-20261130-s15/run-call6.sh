#!/bin/bash
# Two-H200 host, session 15, call 6 (the session's last device seconds): the host's packed share
# of round 2's short slices again, now that staging::pack_in spreads a piece's bytes over every
# thread. GpuSortLanes (30% and 90% packed among them) on GPU 1, then alone on GPU 0, 8 GiB u64
# and f64 at 1/256 with GPUSORT_GATHER_HOST_PERCENT 0, 25, 40, twice in turn.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call6.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s); left() { echo $(( 210 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=1 timeout 60 $C/gpu_executor_tests --gtest_filter='*SortLanes*' > $OUT/lanes-test.txt 2>&1
echo "== SortLanes tests (GPU 1) rc=$? $(ms $s) ms: $(grep -E '^\[  (PASSED|FAILED)' $OUT/lanes-test.txt | tr '\n' ' ')"
grep -E "Failure|FAILED|Which is|Expected" $OUT/lanes-test.txt | head -12
run() {  # name, percent
  local name=$1 pct=$2
  [ $(left) -lt 28 ] && { echo "no time for $name"; return; }
  local s=$(date +%s%N)
  GPUSORT_GATHER_HOST_PERCENT=$pct CUDA_VISIBLE_DEVICES=0 timeout $(( $(left) - 2 )) $C/gpu_bench --chunks yes \
    --chunk-bytes 8Gi --gpus 1 --kinds u64,f64 --budgets 1/256 --repeat 3 > $OUT/$name.txt 2>&1
  echo "== $name (host packs $pct%) rc=$? $(ms $s) ms"
  grep -E "budget 1/256|round 2 (sort|round|copy in) " $OUT/$name.txt | sed -n '/1\/256/,$p' | cut -c1-118
}
run p0-a 0
run p25-a 25
run p40-a 40
run p0-b 0
run p25-b 25
run p40-b 40
echo "elapsed $(( $(date +%s) - T0 )) s"
