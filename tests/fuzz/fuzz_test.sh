#!/bin/sh
# ctest's fuzz.* tests (tests/fuzz/CMakeLists.txt).
#   fuzz_test.sh build <fuzz source dir> <build dir> <cmake>
#   fuzz_test.sh run   <fuzz source dir> <build dir> <target>
# Exits 77 (skip) when clang++ or its libFuzzer runtime is missing.
set -eu
mode=$1 src=$2 build=$3

case $mode in
build)
  cmake=$4
  command -v clang++ >/dev/null || { echo "fuzz: no clang++: skipped"; exit 77; }
  # libclang_rt.fuzzer comes in libclang-rt-<version>-dev, apart from clang itself: try to
  # link a fuzzer rather than guess where the runtime lives.
  probe=$(mktemp -d "${TMPDIR:-/tmp}/gpusort-fuzz-probe.XXXXXX")
  trap 'rm -rf "$probe"' EXIT
  printf 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }\n' \
    >"$probe/probe.cpp"
  clang++ -fsanitize=fuzzer "$probe/probe.cpp" -o "$probe/probe" 2>/dev/null ||
    { echo "fuzz: clang++ cannot link libFuzzer (libclang-rt-14-dev missing?): skipped"; exit 77; }
  # A configured folder is reused: reconfiguring with another compiler would be refused.
  [ -f "$build/CMakeCache.txt" ] ||
    CC=clang CXX=clang++ "$cmake" -S "$src" -B "$build" -DCMAKE_BUILD_TYPE= >/dev/null
  "$cmake" --build "$build" -j "${GPUSORT_FUZZ_JOBS:-2}"
  ;;
run)
  target=$4
  exe=$build/fuzz_$target
  [ -x "$exe" ] || { echo "fuzz: $exe not built (fuzz.build skipped): skipped"; exit 77; }
  seconds=${GPUSORT_FUZZ_SECONDS:-60}
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/gpusort-fuzz-$target.XXXXXX")
  trap 'rm -rf "$scratch"' EXIT
  cp -r "$src/corpus/$target" "$scratch/corpus"
  # Findings are kept in the build tree, never in the repository: minimise one with
  # fuzz_<target> -minimize_crash=1 <input> and add it to fuzz/corpus/ by hand with the fix.
  findings=$build/findings/$target
  mkdir -p "$findings"
  # libFuzzer exits 77 on a finding by default: the skip code. Findings must fail.
  "$exe" -max_total_time="$seconds" -timeout=10 -print_final_stats=1 -error_exitcode=1 \
    -timeout_exitcode=1 \
    -artifact_prefix="$findings/" "$scratch/corpus"
  ;;
*)
  echo "usage: fuzz_test.sh build|run ..." >&2
  exit 2
  ;;
esac
