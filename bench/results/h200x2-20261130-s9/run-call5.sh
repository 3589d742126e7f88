#!/bin/bash
# Two-H200 host, call 5: the engine's choice of the radix sort where it gives far fewer chunks
# (issue 44): its GPU test, the budget and in-core-engine suites, and gpu_bench --chunks with
# the engine's own choice (call 3 ran 7094c12 the same way).
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
echo "commit $(cat $C/COMMIT)"; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
echo "== gpu_executor_tests"
s=$(date +%s%N)
timeout 170 $C/gpu_executor_tests --gtest_filter='*FarFewer*:*TheGpuHoldsNoMoreThanItsBudget*:*EveryInCoreEngineOutOfCoreAndInCore*:*ASmallJobAlwaysSorts*' 2>&1 | grep -E "FAILED|PASSED|Failure|tests ran|Expected|Which is|budget|sample " | head -30
echo "rc=$? $(ms $s) ms"
echo "== gpu_bench --chunks, the engine's choice, one H200"
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=0 timeout 110 $C/gpu_bench --chunks yes --chunk-bytes 8Gi --gpus 1 --repeat 1 \
  --machine h200x2 --commit $(cat $C/COMMIT) --json $OUT/chunks-auto.json > $OUT/chunks-auto.txt 2>&1
echo "rc=$? $(ms $s) ms"; grep -v "^    " $OUT/chunks-auto.txt | grep -E "budget" | head -14
grep -A14 "u64 on 1 GPU(s), budget 1/256" $OUT/chunks-auto.txt | head -15
