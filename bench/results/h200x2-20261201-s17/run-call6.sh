#!/bin/bash
# Two-H200 host, session 17, call 6 (the session's last device seconds): the profile test call 5
# failed (steps a slot, not a chunk) with every job scattered, and one more 8 GiB u64 run of
# the engine's default (scattered at the smallest budget only) on one H200.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call6.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s)
CUDA_VISIBLE_DEVICES=0 GPUSORT_SCATTER=on GPUSORT_TEST_BUDGET=tiny timeout 30 $C/gpu_executor_tests \
  --gtest_filter='*ProfileTellsWhereEachStageSpentItsTime*' > $OUT/profile-test.txt 2>&1
echo "== profile test (scatter on) rc=$?: $(grep -E '^\[  (PASSED|FAILED)' $OUT/profile-test.txt | tr '\n' ' ')"
CUDA_VISIBLE_DEVICES=0 timeout 40 $C/gpu_bench --chunks yes --chunk-bytes 8Gi --gpus 1 --kinds u64 \
  --budgets 1/8,1/256,smallest --repeat 3 > $OUT/chunks-default.txt 2>&1
echo "== gpu_bench --chunks u64 default rc=$?"
grep -E "budget (1/8|1/256|smallest)" $OUT/chunks-default.txt | sed 's/.*GiB //' | cut -c1-110
echo "elapsed $(( $(date +%s) - T0 )) s"
