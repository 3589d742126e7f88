#!/bin/bash
# Two-H200 host, session 15, call 2: the host's topology and huge pages; beside_bench on GPU 0
# alone (what slows round 2's sort beside the gather kernel: spread against compact slices,
# three kinds of host memory); the one-way rates of both GPUs at once from one registered array
# (gpu_bench --model at 8 GiB); then the executor tests with the tiny budget, shards 1 and 2 of
# 4, one a GPU side by side.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call2.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s); left() { echo $(( 570 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
{ nvidia-smi topo -m; lscpu | grep -iE "numa|model name|socket"; numactl -H 2>&1 | head -8
  echo "THP enabled: $(cat /sys/kernel/mm/transparent_hugepage/enabled) defrag: $(cat /sys/kernel/mm/transparent_hugepage/defrag)"
  grep -iE "hugepages_|AnonHuge|MemTotal|MemFree" /proc/meminfo; } > $OUT/topology.txt 2>&1
cat $OUT/topology.txt
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=0 timeout 150 $C/beside_bench > $OUT/beside.txt 2>&1
echo "== beside_bench (GPU 0) rc=$? $(ms $s) ms"; cat $OUT/beside.txt
s=$(date +%s%N)
timeout 120 $C/gpu_bench --model yes --chunk-bytes 8Gi --repeat 3 > $OUT/model.txt 2>&1
echo "== gpu_bench --model 8Gi rc=$? $(ms $s) ms"
grep -E "all 2 GPUs|measured|floor" $OUT/model.txt
shard() {  # GPU, shard index
  local s=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=$1 GPUSORT_TEST_BUDGET=tiny GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$(($2-1)) \
    timeout $(( $(left) - 10 )) $C/gpu_executor_tests --gtest_brief=1 > $OUT/gpu_executor_tests.shard$2of4.txt 2>&1
  echo "== gpu_executor_tests shard $2/4 (GPU $1, tiny) rc=$? $(ms $s) ms: $(tail -3 $OUT/gpu_executor_tests.shard$2of4.txt | tr '\n' ' ')"
}
shard 0 1 > $OUT/s1.log 2>&1 &
shard 1 2 > $OUT/s2.log 2>&1
wait; cat $OUT/s1.log $OUT/s2.log
grep -h -E "^\[  FAILED|Failure" -A4 $OUT/gpu_executor_tests*.txt | head -30
echo "elapsed $(( $(date +%s) - T0 )) s"
