#!/bin/bash
# Two-H200 host, session 13, call 1.
# Issue 44: the sample sort's scratch sized for the policy the GPU runs (GPUSORT_SAMPLE_SCRATCH_HERE=1)
# against the largest of every policy built (=0, the default at cff3b6e), through the engine at
# 1/8, 1/256 and the smallest budget of 8 GiB on one H200 (GPU 0), with CUB's radix sort in the
# same run; then gpu_tests with the switch set. GPU 1 at the same time: gpu_executor_tests shards
# 1 and 2 of 4 (tiny budget) with the switch set, the check owed on this commit.
# Issue 40: gpusort plan --largest on the real GPUs (resident sort at 1.0625 N).
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call1.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
T0=$(date +%s); left() { echo $(( 555 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
for k in 1 2; do
  ( s=$(date +%s%N)
    CUDA_VISIBLE_DEVICES=1 GPUSORT_SAMPLE_SCRATCH_HERE=1 GPUSORT_TEST_BUDGET=tiny GTEST_TOTAL_SHARDS=4 \
      GTEST_SHARD_INDEX=$((k-1)) timeout 530 $C/gpu_executor_tests --gtest_brief=1 \
      > $OUT/gpu_executor_tests.shard${k}of4.txt 2>&1
    echo "== gpu_executor_tests shard $k/4 (GPU 1, scratch here) rc=$? $(ms $s) ms: $(tail -3 $OUT/gpu_executor_tests.shard${k}of4.txt | tr '\n' ' ')" > $OUT/shard$k.rc ) &
done
for v in here0 here1 radix; do
  [ $(left) -lt 200 ] && { echo "no time for $v"; break; }
  e=sample; h=0; [ $v = here1 ] && h=1; [ $v = radix ] && e=radix
  s=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=0 GPUSORT_SAMPLE_SCRATCH_HERE=$h timeout 150 $C/gpu_bench --chunks yes --chunk-bytes 8Gi \
    --gpus 1 --incore $e --kinds u64,f64,u64.stable,f64.stable --budgets 1/8,1/256,smallest --repeat 3 \
    > $OUT/chunks-$v.txt 2>&1
  echo "== gpu_bench --chunks --incore $e here=$h rc=$? $(ms $s) ms"
  grep -E "budget|round [12] sort  " $OUT/chunks-$v.txt | grep -v "copy" | cut -c1-150
  grep -E "^\| chunks" $OUT/chunks-$v.txt
done
D=/dev/shm/g; mkdir -p $D
for g in "[0]" "[0, 1]"; do
  printf "devices: $g\n" > $D/c.yaml
  for t in u64 u32 f64; do
    echo "plan --largest $t on $g: $($C/gpusort plan --largest --dtype $t --config $D/c.yaml --json 2>&1 | grep -o '"elements":[0-9]*\|"bytes":[0-9]*\|"path":"[a-z ]*"' | tr '\n' ' ')"
  done
done
rm -rf $D
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=0 GPUSORT_SAMPLE_SCRATCH_HERE=1 timeout $(( $(left) - 60 > 30 ? $(left) - 60 : 30 )) $C/gpu_tests --gtest_brief=1 > $OUT/gpu_tests-here1.txt 2>&1
echo "== gpu_tests (GPU 0, scratch here) rc=$? $(ms $s) ms: $(tail -3 $OUT/gpu_tests-here1.txt | tr '\n' ' ')"
if [ $(left) -gt 70 ] && { command -v compute-sanitizer >/dev/null || [ -x /usr/local/cuda/bin/compute-sanitizer ]; }; then
  CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  for tool in racecheck synccheck; do
    [ $(left) -lt 40 ] && break
    s=$(date +%s%N)
    CUDA_VISIBLE_DEVICES=0 timeout $(( $(left) - 25 )) $CS --tool $tool --error-exitcode 9 $C/gpu_tests \
      --gtest_filter='*gather*' --gtest_brief=1 > $OUT/$tool-gather.txt 2>&1
    echo "== $tool on *gather* rc=$? $(ms $s) ms: $(grep -E 'ERROR SUMMARY|PASSED|FAILED' $OUT/$tool-gather.txt | tail -3 | tr '\n' ' ')"
  done
fi
wait
cat $OUT/shard*.rc
echo "elapsed $(( $(date +%s) - T0 )) s"
