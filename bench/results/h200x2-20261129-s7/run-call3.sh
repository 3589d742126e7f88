#!/usr/bin/env bash
# Two-H200 host, call 3: the executor suite with the tiny budget after every device buffer is
# counted in whole pages (65c38bd; it holds the cudaMemGetInfo test), the time model with host
# DMA refitted (gpu_bench --model), and the rows' 64 GiB case on the CPU engine, profiled, to set
# beside call 1's GPU profile (its gather took 9.5 s).
set -u
D=/tmp/d; mkdir -p $D && tar xJf .gpucarry/bins.tar.xz -C $D
echo "commit $(cat $D/COMMIT)"
s=$SECONDS
GPUSORT_TEST_BUDGET=tiny timeout 340 $D/tests/gpu/gpu_executor_tests --gtest_brief=1 \
  > $OUT/gpu_executor_tests.txt 2>&1
echo "== gpu_executor_tests rc $? in $((SECONDS - s)) s"
grep -E -A6 "Failure" $OUT/gpu_executor_tests.txt | head -40; tail -n 3 $OUT/gpu_executor_tests.txt
echo "== gpu_bench --model, 8 and 32 GiB, 1 and 2 GPUs"
timeout 130 $D/bench/gpu_bench --model yes --chunk-bytes 8Gi,32Gi --repeat 1 --machine h200x2 \
  --commit $(cat $D/COMMIT) --json $OUT/model.json > $OUT/model.txt 2>&1; echo "rc $?"
grep -E "host memory|measured|\| multi" $OUT/model.txt
echo "== rows_bench 64 GiB on the CPU engine (no GPU visible), profiled"
CUDA_VISIBLE_DEVICES= timeout 100 $D/bench/rows_bench --records-bytes 64Gi --columns-bytes 0 \
  --profile yes --cpu no --repeat 1 2>&1 | grep -v "^| rows\.\|^| ---\|^| target"
