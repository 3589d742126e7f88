#!/usr/bin/env bash
# The test command of README.md, what CI runs (.ci/run): installs what it needs, then builds and
# runs, preset by preset:
#   release  every test: the unit and integration tests, label `long` too; every engine test
#            runs twice, with the default configuration and with a tiny device budget that
#            forces the out-of-core path; GPU tests skip where there is no GPU
#   asan     AddressSanitizer (leaks included) + UndefinedBehaviorSanitizer, gcc, and
#   tsan     ThreadSanitizer, clang with LLVM's libomp and Archer (cmake/sanitizers.cmake says why),
#            each on the sanitizer subset: the programs whose tests exercise concurrency, memory
#            ownership and parsing (ctest label `sanitizer_subset`, tests/CMakeLists.txt says
#            which and why), and the presets' own canaries (label `sanitizer`), building only
#            what those need (the target `sanitizer_subset`)
#
#   scripts/test.sh                 release in full, asan and tsan on the subset (the default)
#   scripts/test.sh --full          release, asan and tsan, every test of each
#   scripts/test.sh [--full] PRESET...   those presets; a sanitizer preset on the subset unless
#                                        --full (release and the others always run in full)
#
# Why two commands (issue 43): the three presets in full took 71 minutes on CI's 2-core machine
# after a 9-minute release build (asan alone 40 minutes with its build), too close to CI's 90
# and longer than a newcomer waits. The subset keeps the sanitizers on the code where their
# findings live; `--full` still runs every test under them and belongs before a release and
# after changes to the engine's memory handling (docs/reliability.md records its last run).
#
# The ctest presets (CMakePresets.json) run three tests at a time with OMP_WAIT_POLICY=passive.
# The engine's tests sort with OpenMP teams as wide as the machine, and by default libgomp's (and
# libomp's) idle threads spin after each parallel region; with two test programs on two cores the
# spinning threads of one hold the cores the other's working threads wait for. Passive threads
# sleep instead, and the cores then have room for a third test while others wait on a daemon or a
# child: the release tests took 779 s before and 403 s after on the 2-core machine
# (docs/reliability.md, beside "The test command's time", has the steps between and the
# sanitizers' figures).
#
# The sanitizer builds are CPU-only (GPUSORT_ENABLE_CUDA=OFF, CMakePresets.json): CI has no GPU,
# and the GPU code is checked by compute-sanitizer on the GPU machine (scripts/gpu-check.sh).
# Tests labelled no_sanitizer (each with its reason beside the label) never run there. A test
# too long for a sanitizer's slowdown runs a shorter variant where GPUSORT_TEST_SANITIZER is set
# (the sanitizer presets set it to their name; C++ tests can ask tests/support/sanitizer.hpp).
#
# The sanitizer presets send ASan, LSan and TSan reports to build/<preset>/sanitizer-logs/ rather
# than to stderr, because the tests start programs (gpusortd, the CLI) whose stderr a test may not
# show: a report of any process there fails the run here, even where the test itself passed.
# (UBSan's reports stay on stderr: GCC 12's runtime ignores log_path for them. They stop the
# program, -fno-sanitize-recover, so the test that ran it sees a crash.)
set -euo pipefail
cd "$(dirname "$0")/.."
full=0
presets=()
for arg in "$@"; do
  case "$arg" in
    --full) full=1 ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "test.sh: unknown option $arg (--full, --help)" >&2; exit 64 ;;
    *) presets+=("$arg") ;;
  esac
done
[ ${#presets[@]} -gt 0 ] || presets=(release asan tsan)
status=0
all_start=$SECONDS
summary=()
for preset in "${presets[@]}"; do
  start=$SECONDS
  build=()
  run=()
  what="every test"
  if [ "$full" = 0 ] && { [ "$preset" = asan ] || [ "$preset" = tsan ]; }; then
    build=(--target sanitizer_subset)
    run=(-L '^sanitizer')  # sanitizer_subset, and the canaries' label sanitizer
    what="the sanitizer subset"
  fi
  echo "== test.sh: $preset, $what =="
  scripts/build.sh "$preset" "${build[@]}"
  built=$((SECONDS - start))
  logs="build/$preset/sanitizer-logs"
  rm -rf "$logs"
  mkdir -p "$logs"
  failed=""
  if ! ctest --preset "$preset" "${run[@]}"; then
    status=1
    # Named again in the closing lines: CI keeps only the tail of a long log.
    failed_log="build/$preset/Testing/Temporary/LastTestsFailed.log"
    failed="; FAILED: $(sed 's/^[0-9]*://' "$failed_log" 2>/dev/null | tr '\n' ' ')"
  fi
  reports=("$logs"/*)
  if [ -e "${reports[0]}" ]; then
    for r in "${reports[@]}"; do echo "== test.sh: $r =="; cat "$r"; done
    echo "test.sh: $preset: ${#reports[@]} sanitizer report(s) in $logs (above)"
    failed="$failed; sanitizer reports: $(for r in "${reports[@]}"; do
      printf '%s (%s) ' "$(basename "$r")" "$(grep -m1 -E 'ERROR|WARNING' "$r" | cut -c1-120)"
    done)"
    status=1
  fi
  summary+=("$preset ($what): build $built s, tests $((SECONDS - start - built)) s$failed")
  echo "== test.sh: $preset took $((SECONDS - start)) s =="
done
for line in "${summary[@]}"; do echo "test.sh: $line"; done
echo "test.sh: $((SECONDS - all_start)) s in all, $([ $status = 0 ] && echo passed || echo FAILED)"
exit $status
