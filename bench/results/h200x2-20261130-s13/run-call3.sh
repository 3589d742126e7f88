#!/bin/bash
# Two-H200 host, session 13, call 3 (issue 44): the engine's own choice (incore auto) since
# d2390fb (the sample sort's scratch for the GPU's policy, float keys to the radix sort out of
# core), alone on the host: 8 GiB at 1/8, 1/256 and the smallest budget, every kind, on one
# H200 and on two; 32 GiB at 1/8 and 1/256 (u64, f64) on one and two. Then the GPU tests of
# the choice and gpu_tests, one GPU each.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call3.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s); left() { echo $(( 560 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
bench() {  # name, the GPUs it may see, then gpu_bench's arguments
  local name=$1 devs=$2; shift 2
  [ $(left) -lt 150 ] && { echo "no time for $name"; return; }
  local s=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=$devs timeout $(( $(left) - 130 )) $C/gpu_bench --chunks yes --repeat 3 "$@" > $OUT/$name.txt 2>&1
  echo "== $name rc=$? $(ms $s) ms"
  grep -E "budget|round [12] (sort|round|plan) " $OUT/$name.txt | cut -c1-132
  grep -E "^\| chunks" $OUT/$name.txt | sort -u
}
bench chunks-8G-1gpu 0 --chunk-bytes 8Gi --gpus 1
bench chunks-8G-2gpu 0,1 --chunk-bytes 8Gi --gpus 2
bench chunks-32G 0,1 --chunk-bytes 32Gi --gpus 1,2 --kinds u64,f64 --budgets 1/8,1/256
L=$(left); echo "left for tests: $L s"
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=0 timeout $(( L - 10 )) $C/gpu_executor_tests \
  --gtest_filter='*OutOfCoreFloat*:*AtASmallBudget*:*EveryInCoreEngine*:*TheGpuHoldsNoMore*' \
  > $OUT/exec-choice.txt 2>&1 &
P=$!
CUDA_VISIBLE_DEVICES=1 timeout $(( L - 10 )) $C/gpu_tests --gtest_brief=1 > $OUT/gpu_tests.txt 2>&1
echo "== gpu_tests (GPU 1) rc=$? $(ms $s) ms: $(tail -3 $OUT/gpu_tests.txt | tr '\n' ' ')"
wait $P; echo "== gpu_executor_tests choice (GPU 0) rc=$? $(ms $s) ms"
grep -E "^\[  (PASSED|FAILED|SKIPPED|  OK)|Failure" -A3 $OUT/exec-choice.txt | head -40
echo "elapsed $(( $(date +%s) - T0 )) s"
