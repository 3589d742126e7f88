#!/bin/bash
# Two-H200 host, call 2 (issue 44): the warp-a-slice gather and the usual sample's splitters
# (cd3a509). The gather suite and the out-of-core suites on the GPU first, then 8 GiB u64 at
# 1/256 and the smallest budget with the warp kernel's grid at 16, 32 (default), 66 and 132
# blocks and with the block kernel as before (GPUSORT_GATHER_WARPS=0), then every kind at 8 GiB
# on one and two H200 and u64/f64 at 32 GiB. Everything goes to stdout and one log (the call
# returns few files).
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
echo "commit $(cat $C/COMMIT)"; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
L=$OUT/log.txt
echo "== gpu_tests gather and low bits"; s=$(date +%s%N)
timeout 60 $C/gpu_tests --gtest_filter='*gather*:*low_bits*' --gtest_brief=1 > $OUT/gpu_tests.txt 2>&1
echo "rc=$? $(ms $s) ms"; tail -3 $OUT/gpu_tests.txt; grep -m5 -A5 "Failure" $OUT/gpu_tests.txt
echo "== gpu_executor_tests out of core, budgets"; s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=0,1 timeout 150 $C/gpu_executor_tests --gtest_brief=1 \
  --gtest_filter='*OutOfCore*:*TheGpuHoldsNoMoreThanItsBudget*:*FarFewer*:*TwoGpus*:*Share*' > $OUT/gpu_executor_tests.txt 2>&1
echo "rc=$? $(ms $s) ms"; tail -3 $OUT/gpu_executor_tests.txt; grep -m5 -A5 "Failure" $OUT/gpu_executor_tests.txt
B="$C/gpu_bench --chunks yes --repeat 1 --machine h200x2 --commit $(cat $C/COMMIT)"
run() {  # name, timeout, env..., -- args
  local name=$1 t=$2; shift 2; local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  echo "== $name: ${envs[*]} $*" | tee -a $L; local s=$(date +%s%N)
  env "${envs[@]}" timeout $t stdbuf -oL $B "$@" >> $L 2>&1
  echo "rc=$? $(ms $s) ms" | tee -a $L
}
summ() { grep -E "budget|refused|wrong" $L | grep -v "^    \|^|" | tail -$1; }
prof() { grep -E "^    round (1 sort|2 plan|2 copy in|2 sort)" $L | tail -$1; }
run w32 50 CUDA_VISIBLE_DEVICES=0 -- --chunk-bytes 8Gi --gpus 1 --kinds u64 --budgets 1/256,smallest
summ 3; prof 16
run w16 40 CUDA_VISIBLE_DEVICES=0 GPUSORT_GATHER_BLOCKS=16 -- --chunk-bytes 8Gi --gpus 1 --kinds u64 --budgets 1/256
summ 2; prof 5
run w66 40 CUDA_VISIBLE_DEVICES=0 GPUSORT_GATHER_BLOCKS=66 -- --chunk-bytes 8Gi --gpus 1 --kinds u64 --budgets 1/256
summ 2; prof 5
run w132 40 CUDA_VISIBLE_DEVICES=0 GPUSORT_GATHER_BLOCKS=132 -- --chunk-bytes 8Gi --gpus 1 --kinds u64 --budgets 1/256
summ 2; prof 5
run blocks 40 CUDA_VISIBLE_DEVICES=0 GPUSORT_GATHER_WARPS=0 -- --chunk-bytes 8Gi --gpus 1 --kinds u64 --budgets 1/256
summ 2; prof 5
run all-1 90 CUDA_VISIBLE_DEVICES=0 -- --chunk-bytes 8Gi --gpus 1
summ 12
run all-2 70 X=1 -- --chunk-bytes 8Gi --gpus 2
summ 12
run big 150 X=1 -- --chunk-bytes 32Gi --gpus 1,2 --kinds u64,f64 --budgets 1/256
summ 8; prof 10
grep -E "^\| chunks" $L | sort -u | tail -40
