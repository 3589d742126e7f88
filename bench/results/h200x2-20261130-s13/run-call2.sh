#!/bin/bash
# Two-H200 host, session 13, call 2. Call 1's A/B ran beside two gpu_executor_tests shards on
# GPU 1, whose host threads and allocations confounded it (and failed a test that reads the
# GPU's free memory); this one measures alone first, then tests.
# Issue 44, GPU 0 alone: GPUSORT_SAMPLE_SCRATCH_HERE=1 with the sample sort against CUB's radix
# sort (the default), 8 GiB u64 and f64 at 1/8, 1/256 and the smallest budget; =0 at 1/256.
# Issue 40: gpu_bench --model with the refitted ring efficiency and the resident profile (its
# ranges' cut as a host stage); mem_bench --only register (what registering a file's pages
# costs on this host). Then tests with the switch set: TheGpuHoldsNoMoreThanItsBudget alone
# (both settings), gpu_executor_tests shards 3 and 4 of 4, one per GPU.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call2.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s); left() { echo $(( 560 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
for v in here1 radix here0; do
  e=sample; h=1; k=u64,f64; b=1/8,1/256,smallest
  [ $v = radix ] && { e=radix; h=0; }
  [ $v = here0 ] && { h=0; k=u64; b=1/8,1/256; }
  s=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=0 GPUSORT_SAMPLE_SCRATCH_HERE=$h timeout 100 $C/gpu_bench --chunks yes --chunk-bytes 8Gi \
    --gpus 1 --incore $e --kinds $k --budgets $b --repeat 3 > $OUT/chunks-$v.txt 2>&1
  echo "== gpu_bench --chunks --incore $e here=$h rc=$? $(ms $s) ms"
  grep -E "budget|round [12] (sort|copy in|copy out|round|plan) " $OUT/chunks-$v.txt | cut -c1-132
done
s=$(date +%s%N)
timeout 100 $C/gpu_bench --model yes --chunk-bytes 8Gi,32Gi --repeat 3 --json $OUT/model.json > $OUT/model.txt 2>&1
echo "== gpu_bench --model rc=$? $(ms $s) ms"
grep -E "measured|^\| multi" $OUT/model.txt
grep -E "profiled run|round 1 (copy in|sort|copy out|ranges cut)" $OUT/model.txt | head -40
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=0 timeout 60 $C/mem_bench --only register --bytes 8Gi --dir /dev/shm --json $OUT/register.json > $OUT/register.txt 2>&1
echo "== mem_bench --only register rc=$? $(ms $s) ms"; cat $OUT/register.txt | head -50
for h in 1 0; do
  s=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=0 GPUSORT_SAMPLE_SCRATCH_HERE=$h GPUSORT_TEST_BUDGET=tiny timeout 90 $C/gpu_executor_tests \
    --gtest_filter='*TheGpuHoldsNoMoreThanItsBudget*' > $OUT/holds-here$h.txt 2>&1
  echo "== TheGpuHoldsNoMoreThanItsBudget here=$h rc=$? $(ms $s) ms"; grep -E "Failure|held|OK|FAILED" $OUT/holds-here$h.txt | head -8
done
L=$(left); echo "left for shards: $L s"
for k in 3 4; do
  ( s=$(date +%s%N)
    CUDA_VISIBLE_DEVICES=$((k-3)) GPUSORT_SAMPLE_SCRATCH_HERE=1 GPUSORT_TEST_BUDGET=tiny GTEST_TOTAL_SHARDS=4 \
      GTEST_SHARD_INDEX=$((k-1)) timeout $(( L - 10 )) $C/gpu_executor_tests --gtest_brief=1 \
      > $OUT/gpu_executor_tests.shard${k}of4.txt 2>&1
    echo "== gpu_executor_tests shard $k/4 (GPU $((k-3)), scratch here) rc=$? $(ms $s) ms: $(tail -3 $OUT/gpu_executor_tests.shard${k}of4.txt | tr '\n' ' ')" > $OUT/shard$k.rc ) &
done
wait
cat $OUT/shard*.rc
echo "elapsed $(( $(date +%s) - T0 )) s"
