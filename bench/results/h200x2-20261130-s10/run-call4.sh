#!/bin/bash
# Two-H200 host, call 4 (issue 44; call 3 ran out of time before these): round 2's short slices
# packed on the host (GPUSORT_GATHER=host, staging::pack_in) against the default warp-a-slice
# kernel, interleaved, 8 GiB u64 at 1/256 and the smallest budget; the out-of-core suites with
# the packing; the CLI on an 8 GiB file at 1 GiB and 32 MiB budgets with --profile.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call4.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
for v in auto host auto host; do
  echo "== gpu_bench GPUSORT_GATHER=$v"; s=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=0 GPUSORT_GATHER=$v timeout 40 $C/gpu_bench --chunks yes --repeat 1 \
    --chunk-bytes 8Gi --gpus 1 --kinds u64 --budgets 1/256,smallest >> $OUT/bench-$v.txt 2>&1
  echo "rc=$? $(ms $s) ms"; grep -E "^8.00 GiB" $OUT/bench-$v.txt | tail -3
  grep -E "^    round (1 sort|2 plan  |2 copy in|2 sort|2 round)" $OUT/bench-$v.txt | tail -10
done
echo "== gpu_executor_tests out of core, GPUSORT_GATHER=host"; s=$(date +%s%N)
GPUSORT_GATHER=host timeout 80 $C/gpu_executor_tests --gtest_brief=1 \
  --gtest_filter='GpuEngineKeys*OutOfCore*:*TheGpuHoldsNoMoreThanItsBudget*' > $OUT/exec_host.txt 2>&1
echo "rc=$? $(ms $s) ms"; tail -n 3 $OUT/exec_host.txt; grep -m3 -A6 "Failure" $OUT/exec_host.txt
echo "== CLI: 8 GiB u64 file in /dev/shm, one H200, --profile"
D=/dev/shm/g44; mkdir -p $D
$C/gpusort gen --dtype u64 --dist uniform --count 1Gi --seed 5 --out $D/k.bin > /dev/null
printf 'devices: [0]\ndevice_memory_budget: 32MiB\n' > $D/small.yaml
printf 'devices: [0]\ndevice_memory_budget: 1GiB\n' > $D/eighth.yaml
for run in eighth small host; do
  cfg=$run; [ $run = host ] && export GPUSORT_GATHER=host && cfg=small
  s=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=0 timeout 30 $C/gpusort sort $D/k.bin --dtype u64 --local --config $D/$cfg.yaml \
    --out $D/s.bin --json --profile > $OUT/cli-$run.txt 2>&1
  echo "$run rc=$? $(ms $s) ms"; grep -v '^ *$' $OUT/cli-$run.txt | cut -c1-150 | head -22
  rm -f $D/s.bin
done
rm -rf $D
