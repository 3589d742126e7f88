#!/usr/bin/env bash
# Issue 44, call 5: the GPU suites after the planner's changes (fewer bins, more candidates,
# the 16 MiB margin): the executor suite with the tiny budget (about 240 s), the engine suites
# on the GPU engine, and the GPU fault sweep.
set -u
mkdir -p /tmp/d && tar xJf .gpucarry/bins.tar.xz -C /tmp/d
D=/tmp/d; echo "commit $(cat $D/COMMIT)"
t() {  # exe timeout [env...]
  local exe=$1 limit=$2; shift 2; local n=$(basename $exe) s=$SECONDS
  env "$@" timeout $limit $exe --gtest_brief=1 > $OUT/$n.txt 2>&1
  echo "== $n rc $? in $((SECONDS - s)) s"; tail -n 4 $OUT/$n.txt
}
t $D/gpu_executor_tests 380 GPUSORT_TEST_BUDGET=tiny
t $D/pipeline_tests 100 GPUSORT_TEST_BUDGET=tiny
t $D/gpu_fault_tests 40
