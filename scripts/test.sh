#!/usr/bin/env bash
# The whole test suite, what CI runs (.ci/run): installs what it needs, then for each preset
# builds it and runs its ctest preset: the same unit and integration tests under each of
#   release  optimised, CUDA where nvcc exists; every engine test runs twice, with the default
#            configuration and with a tiny device budget that forces the out-of-core path; GPU
#            tests skip where there is no GPU
#   asan     AddressSanitizer (leaks included) + UndefinedBehaviorSanitizer, gcc
#   tsan     ThreadSanitizer, clang with LLVM's libomp and Archer (cmake/sanitizers.cmake says why)
# The sanitizer builds are CPU-only (GPUSORT_ENABLE_CUDA=OFF, CMakePresets.json): CI has no GPU,
# and the GPU code is checked by compute-sanitizer on the GPU machine (scripts/gpu-check.sh).
# Every test joins the sanitizer runs by itself, except those labelled no_sanitizer (each with
# its reason beside the label). A test too long for a sanitizer's slowdown runs a shorter variant
# where GPUSORT_TEST_SANITIZER is set (the sanitizer presets set it to their name; C++ tests can
# ask tests/support/sanitizer.hpp).
#
# The sanitizer presets send ASan, LSan and TSan reports to build/<preset>/sanitizer-logs/ rather
# than to stderr, because the tests start programs (gpusortd, the CLI) whose stderr a test may not
# show: a report of any process there fails the run here, even where the test itself passed.
# (UBSan's reports stay on stderr: GCC 12's runtime ignores log_path for them. They stop the
# program, -fno-sanitize-recover, so the test that ran it sees a crash.)
#
#   scripts/test.sh [PRESET...]      (default: release asan tsan; `scripts/test.sh release` for one)
#
# CI (.ci/run) runs the default, all three. From a clean clone on the shared 2-core machine
# (2026-11-26, a169c54, under a load of 6-12 from other builds) asan took 4150 s and tsan 1174 s,
# 91 CPU-minutes for both; CI's release run took 1063 s, so the three fit CI's 90 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
presets=("$@")
[ ${#presets[@]} -gt 0 ] || presets=(release asan tsan)
status=0
for preset in "${presets[@]}"; do
  start=$SECONDS
  echo "== test.sh: $preset =="
  scripts/build.sh "$preset"
  logs="build/$preset/sanitizer-logs"
  rm -rf "$logs"
  mkdir -p "$logs"
  ctest --preset "$preset" || status=1
  reports=("$logs"/*)
  if [ -e "${reports[0]}" ]; then
    for r in "${reports[@]}"; do echo "== test.sh: $r =="; cat "$r"; done
    echo "test.sh: $preset: ${#reports[@]} sanitizer report(s) in $logs (above)"
    status=1
  fi
  echo "== test.sh: $preset took $((SECONDS - start)) s =="
done
exit $status
