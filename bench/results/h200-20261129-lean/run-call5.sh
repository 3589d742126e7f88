#!/usr/bin/env bash
# Call 5 (issue 39, after merging issue 43): the engine suites on the GPU with the tiny budget
# (the engine now estimates each job's host memory and may take the lean path), the GPU tests,
# the GPU fault sweep (the storer's ordered-write hook on every failing CUDA call), and the lean
# suites forced lean on the GPU once more.
set -u
mkdir -p /tmp/d && tar xJf .gpucarry/bins.tar.xz -C /tmp/d
D=/tmp/d; echo "commit $(cat $D/COMMIT)"
t() {  # exe timeout [env...]
  local exe=$1 limit=$2; shift 2; local n=$(basename $exe) s=$SECONDS
  env "$@" timeout $limit $exe --gtest_brief=1 > $OUT/$n.txt 2>&1
  echo "== $n rc $? in $((SECONDS - s)) s"; tail -n 4 $OUT/$n.txt
}
t $D/pipeline_tests 100 GPUSORT_TEST_BUDGET=tiny
t $D/gpu_tests 120 GPUSORT_TEST_BUDGET=tiny
t $D/gpu_fault_tests 60
t $D/lean_tests 100 GPUSORT_LEAN=1 GPUSORT_LEAN_TEST_GPUS=1
