#!/usr/bin/env bash
# Issue 44, call 3: more candidates for small budgets, the 16 MiB margin, galloping slices.
# gpu_bench --chunks at 8 GiB (1/8, 1/256, the smallest budget), then the GPU suites with the
# tiny budget (the margin and the undealt compressed runs on the GPU).
set -u
mkdir -p /tmp/d && tar xJf .gpucarry/bins.tar.xz -C /tmp/d
D=/tmp/d; C=$(cat $D/COMMIT); echo "commit $C"
s=$SECONDS
timeout 300 $D/gpu_bench --chunks yes --chunk-bytes 8Gi --gpus 1 --repeat 1 --machine h200 \
  --commit $C --json $OUT/chunks-8Gi.json > $OUT/chunks-8Gi.txt 2>&1
echo "== chunks 8Gi rc $? in $((SECONDS - s)) s"
grep -E "budget|round 2 (plan|copy in)|^\|" $OUT/chunks-8Gi.txt
t() {  # exe timeout [env...]
  local exe=$1 limit=$2; shift 2; local n=$(basename $exe) s=$SECONDS
  env "$@" timeout $limit $exe --gtest_brief=1 > $OUT/$n.txt 2>&1
  echo "== $n rc $? in $((SECONDS - s)) s"; tail -n 3 $OUT/$n.txt
}
t $D/gpu_executor_tests 150 GPUSORT_TEST_BUDGET=tiny
t $D/gpu_tests 100 GPUSORT_TEST_BUDGET=tiny
