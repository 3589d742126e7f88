#!/usr/bin/env bash
# Call 6: the executor's compressed-runs tests (round 1's encode, round 2's decode; u32 and u64
# words) under memcheck, round 1's encode under racecheck; small sizes as gpu-check.sh.
set -u
mkdir -p /tmp/d && tar xJf .devcarry/b.tar.xz -C /tmp/d
D=/tmp/d; C=$(cat $D/COMMIT); echo "commit $C"; S=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
san() {  # tool exe filter timeout
  local log=$OUT/sanitizer_$1_$(basename $2)_$5.txt; s=$SECONDS
  GPUSORT_TEST_SMALL=1 GPUSORT_TEST_MAX_N=16385 timeout $4 "$S" --tool $1 --error-exitcode 99 \
    $2 --gtest_brief=1 --gtest_filter="$3" > $log 2>&1
  local rc=$?
  echo "$1 $(basename $2) [$3]: $(grep -E '(ERROR|RACECHECK) SUMMARY:' $log | tail -n 1) (exit $rc, $((SECONDS - s)) s)"
  tail -n 3 $log | grep -E "PASSED|FAILED|tests ran"
}
san memcheck $D/tests/gpu/gpu_executor_tests 'GpuCompressedRuns/0.*:GpuCompressedRuns/2.*' 90 compressed
san racecheck $D/tests/gpu/gpu_executor_tests 'GpuCompressedRuns/2.RoundOneEncodes*' 50 encode
