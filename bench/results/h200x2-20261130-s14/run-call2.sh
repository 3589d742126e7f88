#!/bin/bash
# Two-H200 host, session 14, call 2 (issue 44): small tasks sharing ring slots, sorted side by
# side on lanes (GPUSORT_SORT_LANES, default 4; 1: one task a slot as before). First the lanes'
# GPU tests on GPU 1 (both settings), then alone on GPU 0: 8 GiB of every kind on one H200 at
# 1/8, 1/256 and the smallest budget with lanes 4, 1, and 4 again; then two H200 with lanes.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call2.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s); left() { echo $(( 575 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
for l in 4 1; do
  s=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=1 GPUSORT_SORT_LANES=$l timeout 100 $C/gpu_executor_tests --gtest_filter='*SortLanes*' > $OUT/lanes-test-$l.txt 2>&1
  echo "== SortLanes tests lanes=$l rc=$? $(ms $s) ms: $(grep -E '^\[  (PASSED|FAILED)' $OUT/lanes-test-$l.txt | tr '\n' ' ')"
  grep -E "Failure|FAILED|Which is|Expected" $OUT/lanes-test-$l.txt | head -12
done
run() {  # name, GPUs, lanes, then gpu_bench arguments
  local name=$1 devs=$2 lanes=$3; shift 3
  [ $(left) -lt 90 ] && { echo "no time for $name"; return; }
  local s=$(date +%s%N)
  GPUSORT_SORT_LANES=$lanes CUDA_VISIBLE_DEVICES=$devs timeout $(( $(left) - 60 )) $C/gpu_bench --chunks yes \
    --chunk-bytes 8Gi --repeat 3 "$@" > $OUT/$name.txt 2>&1
  echo "== $name (lanes $lanes) rc=$? $(ms $s) ms"
  grep -E "budget|round [12] (sort|copy in|round|plan) " $OUT/$name.txt | cut -c1-132
  grep -E "^\| chunks" $OUT/$name.txt | sort -u
}
run lanes4 0 4 --gpus 1
run lanes1 0 1 --gpus 1
run lanes4-again 0 4 --gpus 1
run lanes4-2gpu 0,1 4 --gpus 2
echo "elapsed $(( $(date +%s) - T0 )) s"
