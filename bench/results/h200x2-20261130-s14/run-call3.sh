#!/bin/bash
# Two-H200 host, session 14, call 3 (issue 44): the lanes' tests again (round 1's tasks now batch
# whatever gather tables the ring has), then alone on GPU 0 the A/B at 1/256 and the smallest
# budget (u64, f64) with lanes 4 and 1, twice in turn; then an Nsight Systems trace of u64 at
# 1/256 (every kernel's span) to see which of round 2's kernels slow down beside the gather.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call3.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s); left() { echo $(( 575 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=1 timeout 100 $C/gpu_executor_tests --gtest_filter='*SortLanes*' > $OUT/lanes-test.txt 2>&1
echo "== SortLanes tests rc=$? $(ms $s) ms: $(grep -E '^\[  (PASSED|FAILED)' $OUT/lanes-test.txt | tr '\n' ' ')"
grep -E "Failure|FAILED|Which is|Expected" $OUT/lanes-test.txt | head -12
run() {  # name, lanes
  local name=$1 lanes=$2
  [ $(left) -lt 200 ] && { echo "no time for $name"; return; }
  local s=$(date +%s%N)
  GPUSORT_SORT_LANES=$lanes CUDA_VISIBLE_DEVICES=0 timeout 90 $C/gpu_bench --chunks yes --log debug \
    --chunk-bytes 8Gi --gpus 1 --kinds u64,f64 --repeat 3 > $OUT/$name.txt 2>&1
  echo "== $name (lanes $lanes) rc=$? $(ms $s) ms; beside: $(grep -c 'beside another' $OUT/$name.txt)"
  grep 'beside another' $OUT/$name.txt | sort | uniq -c | head -6
  grep -E "budget|round [12] (sort|round|plan) " $OUT/$name.txt | grep -v "plan:" | cut -c1-118
}
run lanes4-a 4
run lanes1-a 1
run lanes4-b 4
run lanes1-b 1
NSYS=$(command -v nsys || ls /usr/local/cuda/bin/nsys /opt/nvidia/nsight-systems/*/bin/nsys /usr/local/cuda/nsight-systems*/bin/nsys 2>/dev/null | head -1)
echo "nsys: ${NSYS:-none}"
if [ -n "$NSYS" ] && [ $(left) -gt 120 ]; then
  s=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=0 timeout $(( $(left) - 60 )) $NSYS profile -t cuda -s none --cpuctxsw=none -o /tmp/r2 --force-overwrite true \
    $C/gpu_bench --chunks yes --chunk-bytes 8Gi --gpus 1 --kinds u64 --budgets 1/256 --repeat 1 > $OUT/nsys-bench.txt 2>&1
  echo "== nsys profile rc=$? $(ms $s) ms"; tail -3 $OUT/nsys-bench.txt
  s=$(date +%s%N)
  timeout $(( $(left) - 15 )) $NSYS stats -r cuda_gpu_trace -f csv -o /tmp/r2 /tmp/r2.nsys-rep > $OUT/nsys-stats.txt 2>&1
  echo "== nsys stats rc=$? $(ms $s) ms"; ls -la /tmp/r2* | head
  for f in /tmp/r2*.csv; do [ -f "$f" ] && gzip -c "$f" > $OUT/$(basename $f).gz; done
fi
echo "elapsed $(( $(date +%s) - T0 )) s"
