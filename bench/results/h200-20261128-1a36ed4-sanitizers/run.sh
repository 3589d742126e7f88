#!/usr/bin/env bash
# Call 5: compute-sanitizer on the GPU run codec's kernels (added after the last sanitizer run,
# 051b7d1): gpu_tests' run codec tests under all four tools, and round 1's encode in the
# executor (GpuCompressedRuns/2.RoundOneEncodes*) under memcheck; small sizes as gpu-check.sh.
set -u
mkdir -p /tmp/d && tar xJf .devcarry/b.tar.xz -C /tmp/d
D=/tmp/d; C=$(cat $D/COMMIT); echo "commit $C"; S=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
"$S" --version | tail -n 1
san() {  # tool exe filter timeout
  local log=$OUT/sanitizer_$1_$(basename $2).txt; s=$SECONDS
  GPUSORT_TEST_SMALL=1 GPUSORT_TEST_MAX_N=16385 timeout $4 "$S" --tool $1 --error-exitcode 99 \
    $2 --gtest_brief=1 --gtest_filter="$3" > $log 2>&1
  local rc=$?
  echo "$1 $(basename $2) [$3]: $(grep -E '(ERROR|RACECHECK) SUMMARY:' $log | tail -n 1) (exit $rc, $((SECONDS - s)) s)"
  tail -n 3 $log | grep -E "PASSED|FAILED|tests ran" 
}
san memcheck $D/tests/gpu/gpu_tests '*run_codec*' 60
san racecheck $D/tests/gpu/gpu_tests '*run_codec*' 55
san synccheck $D/tests/gpu/gpu_tests '*run_codec*' 30
san initcheck $D/tests/gpu/gpu_tests '*run_codec*' 40
san memcheck $D/tests/gpu/gpu_executor_tests 'GpuCompressedRuns/2.RoundOneEncodes*' 40
