#!/usr/bin/env bash
# Issue 39, call 4: the GPU suites after the executor's changes (tasks that take their slices
# when a device takes them, slices from two parts, the ready hook): the executor suite with the
# tiny budget, the engine suites on the GPU engine (tiny budget), the GPU fault sweep, and the
# CLI killed on the GPU with the fixed crash point.
set -u
mkdir -p /tmp/d && tar xJf .gpucarry/bins.tar.xz -C /tmp/d
D=/tmp/d; echo "commit $(cat $D/COMMIT)"
t() {  # exe timeout [env...]
  local exe=$1 limit=$2; shift 2; local n=$(basename $exe) s=$SECONDS
  env "$@" timeout $limit $exe --gtest_brief=1 > $OUT/$n.txt 2>&1
  echo "== $n rc $? in $((SECONDS - s)) s"; tail -n 4 $OUT/$n.txt
}
t $D/gpu_executor_tests 330 GPUSORT_TEST_BUDGET=tiny
t $D/lean_cli_tests 130 GPUSORT_LEAN_KILLS=40 GPUSORT_TEST_CLI=$D/gpusort GPUSORT_LEAN_CLI_BUDGET=1Gi
t $D/gpu_fault_tests 40
t $D/pipeline_tests 90 GPUSORT_TEST_BUDGET=tiny
