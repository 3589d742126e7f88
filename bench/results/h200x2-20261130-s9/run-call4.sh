#!/bin/bash
# Two-H200 host, call 4: round 2's radix sort on the bits its chunk's splitters leave (issue 44):
# its GPU tests, the executor's out-of-core suites (the radix engine among them), and
# gpu_bench --chunks with the radix sort, against call 3's run of 7094c12.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
echo "commit $(cat $C/COMMIT)"; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
echo "== gpu_tests gather, low bits"
timeout 60 $C/gpu_tests --gtest_filter='*gather*:*low_bits*' 2>&1 | grep -E "FAILED|PASSED|Failure|tests ran" | head
echo "== gpu_executor_tests out of core"
s=$(date +%s%N)
timeout 170 $C/gpu_executor_tests --gtest_filter='*EveryInCoreEngineOutOfCoreAndInCore*:*EveryDistributionAndOrderOutOfCoreAndInCore*:*PairsTravelTogether*:*StableArgsort*:gpu_test.TwoGpusShareTheChunks' 2>&1 | grep -E "FAILED|PASSED|Failure|tests ran" | head -20
echo "rc=$? $(ms $s) ms"
echo "== gpu_bench --chunks --incore radix, one H200"
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=0 timeout 110 $C/gpu_bench --chunks yes --chunk-bytes 8Gi --gpus 1 --repeat 1 \
  --incore radix --machine h200x2 --commit $(cat $C/COMMIT) --json $OUT/chunks-radix.json \
  > $OUT/chunks-radix.txt 2>&1
echo "rc=$? $(ms $s) ms"; grep -v "^    " $OUT/chunks-radix.txt | grep -E "budget" | head -14
grep -A9 "u64 on 1 GPU(s), budget 1/256" $OUT/chunks-radix.txt | head -10
