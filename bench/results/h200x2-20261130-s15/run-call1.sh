#!/bin/bash
# Two-H200 host, session 15, call 1: the gather kernels' cache hints (issue 44) and the GPU
# suites that need both GPUs. GPU 1: the gather and count_below_runs tests (the new hints).
# GPU 0 alone: gpu_bench --chunks, 8 GiB u64 and f64, GPUSORT_GATHER_CACHE normal, loads and
# streaming, twice in turn. Then both GPUs: the executor's two-GPU tests and the resident sort's
# merges on 1-2 GPUs, then gpu_bench --model (issue 40: one-way rates of both GPUs at once and
# multi.fitting_vs_copy_floor).
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call1.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
T0=$(date +%s); left() { echo $(( 570 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=1 timeout 120 $C/gpu_tests --gtest_filter='*gather*:*Gather*:*CountBelow*' > $OUT/gather-tests.txt 2>&1
echo "== gather and count_below tests (GPU 1) rc=$? $(ms $s) ms: $(grep -E '^\[  (PASSED|FAILED)' $OUT/gather-tests.txt | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure" $OUT/gather-tests.txt | head -8
run() {  # name, cache hint
  local name=$1 cache=$2
  [ $(left) -lt 230 ] && { echo "no time for $name"; return; }
  local s=$(date +%s%N)
  GPUSORT_GATHER_CACHE=$cache CUDA_VISIBLE_DEVICES=0 timeout 90 $C/gpu_bench --chunks yes \
    --chunk-bytes 8Gi --gpus 1 --kinds u64,f64 --repeat 3 > $OUT/$name.txt 2>&1
  echo "== $name (cache $cache) rc=$? $(ms $s) ms"
  grep -E "budget|round [12] (sort|round|plan) " $OUT/$name.txt | grep -v "plan:" | cut -c1-118
}
run normal-a normal
run loads-a loads
run streaming-a streaming
run normal-b normal
run loads-b loads
run streaming-b streaming
s=$(date +%s%N)
timeout $(( $(left) - 80 )) $C/gpu_executor_tests --gtest_filter='*TwoGpus*:*ResidentSortMerges*' > $OUT/two-gpu-tests.txt 2>&1
echo "== two-GPU executor tests (both GPUs) rc=$? $(ms $s) ms: $(grep -E '^\[  (PASSED|FAILED|SKIPPED)' $OUT/two-gpu-tests.txt | tr '\n' ' ')"
grep -E "^\[  FAILED|Failure" $OUT/two-gpu-tests.txt | head -8
if [ $(left) -gt 75 ]; then
  s=$(date +%s%N)
  timeout $(( $(left) - 5 )) $C/gpu_bench --model yes --chunk-bytes 8Gi,32Gi --repeat 3 > $OUT/model.txt 2>&1
  echo "== gpu_bench --model rc=$? $(ms $s) ms"
  grep -E "measured|one-way|^\| multi" $OUT/model.txt
else echo "no time for --model"; fi
echo "elapsed $(( $(date +%s) - T0 )) s"
