#!/usr/bin/env bash
# Call 1 (issue 39): the GPU executor's suites with the tiny budget (the store now waits for the
# lean path's ordered writes), the lean suites forced lean on the GPU, and the CLI killed at
# every kind of step and at random moments on the GPU, then recovered.
set -u
mkdir -p /tmp/d && tar xJf .gpucarry/bins.tar.xz -C /tmp/d
D=/tmp/d; echo "commit $(cat $D/COMMIT)"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nproc; free -g | head -2; df -h /dev/shm /tmp | tail -2
t() {  # exe timeout [env...]
  local exe=$1 limit=$2; shift 2; local n=$(basename $exe) s=$SECONDS
  env "$@" timeout $limit $exe --gtest_brief=1 > $OUT/$n.txt 2>&1
  echo "== $n rc $? in $((SECONDS - s)) s"; tail -n 4 $OUT/$n.txt
}
t $D/lean_tests 120 GPUSORT_LEAN=1 GPUSORT_LEAN_TEST_GPUS=1
t $D/lean_cli_tests 200 GPUSORT_LEAN_KILLS=40 GPUSORT_TEST_CLI=$D/gpusort
t $D/gpu_executor_tests 270 GPUSORT_TEST_BUDGET=tiny
