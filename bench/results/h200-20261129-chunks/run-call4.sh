#!/usr/bin/env bash
# Issue 44, call 4: the final chunks assembled in parallel. gpu_bench --chunks at 8 GiB (the
# smallest budget again) and 32 GiB (1/8 and 1/256), then the GPU executor suite with the tiny
# budget (it needs about 240 s).
set -u
mkdir -p /tmp/d && tar xJf .gpucarry/bins.tar.xz -C /tmp/d
D=/tmp/d; C=$(cat $D/COMMIT); echo "commit $C"
s=$SECONDS
timeout 330 $D/gpu_bench --chunks yes --chunk-bytes 8Gi,32Gi --gpus 1 --repeat 1 --machine h200 \
  --commit $C --json $OUT/chunks.json > $OUT/chunks.txt 2>&1
echo "== chunks rc $? in $((SECONDS - s)) s"
grep -E "budget|round 2 (plan|copy in)|^\|" $OUT/chunks.txt
s=$SECONDS
GPUSORT_TEST_BUDGET=tiny timeout 250 $D/gpu_executor_tests --gtest_brief=1 > $OUT/gpu_executor_tests.txt 2>&1
echo "== gpu_executor_tests rc $? in $((SECONDS - s)) s"; tail -n 4 $OUT/gpu_executor_tests.txt
