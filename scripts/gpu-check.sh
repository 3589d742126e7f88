#!/usr/bin/env bash
# The one-command GPU check, run on a GPU host: the GPU tests, the engine tests with a tiny
# budget, compute-sanitizer memcheck, racecheck, synccheck and initcheck on a reduced set (their
# summary lines in OUTDIR/sanitizer_summary.txt), the GPU executor benchmark
# (issue 3), its compressed-runs mode (issue 21: gpu_bench --compress yes), the sample sort
# benchmark (issue 4), the codec benchmark and the CPU benchmark. Everything they print goes
# to OUTDIR, with each benchmark's JSON and Markdown table. Exit status 0 only when every test
# passed and every benchmark ran (a missed speed target is reported, not a failure).
# Uses dist/ from scripts/bundle.sh when present, else build/release; GPUSORT_BIN overrides.
#
#   scripts/gpu-check.sh OUTDIR [--sizes 1Gi,4Gi] [--cpu-count 1Gi] [--machine NAME]
#                               [--compress-bytes 8Gi,32Gi]
#                               [--skip-tests] [--skip-sanitizer] [--skip-bench]
#                               [--tools memcheck,racecheck,synccheck,initcheck]
#                               [--sanitize gpu_executor,gpu]
#                               [--only gpu_executor,gpu,gpu_fault,pipeline,core,lean,lean_cli]
#                               [--shard K/N] [--jobs W]
# (--tools and --sanitize pick the sanitizer runs, to split a check over several sessions.
# --only runs those test programs alone, --shard K/N the K-th of N parts of each (gtest's
# GTEST_TOTAL_SHARDS and GTEST_SHARD_INDEX): with the tiny budget gpu_executor_tests alone took
# more than the 470 s a 10-minute device call left it (h200x2-20261130-s10/call3), so a check can
# be split over calls, e.g. --only gpu_executor --shard 1/2, then 2/2, then the rest. --jobs W
# runs the test programs W at a time, the executor's in W shards, each with 1/W of the cores'
# OpenMP threads (the executor's four shards at 4 threads each took 94 s on the one-H200 host,
# h200-20261201-s19 call 3).)
set -uo pipefail
cd "$(dirname "$0")/.."
bin="${GPUSORT_BIN:-$( [ -d dist ] && echo dist || echo build/release )}"
out="${1:?usage: scripts/gpu-check.sh OUTDIR [options]}"
shift
sizes=1Gi,4Gi cpu_count=1Gi machine="$(hostname)" tests=1 sanitizer=1 bench=1
compress_bytes=8Gi
tools=memcheck,racecheck,synccheck,initcheck suites=
only= shard= width=1
while [ $# -gt 0 ]; do
  case "$1" in
    --sizes) sizes="$2"; shift 2 ;;
    --cpu-count) cpu_count="$2"; shift 2 ;;
    --compress-bytes) compress_bytes="$2"; shift 2 ;;
    --machine) machine="$2"; shift 2 ;;
    --skip-tests) tests=0; shift ;;
    --skip-sanitizer) sanitizer=0; shift ;;
    --skip-bench) bench=0; shift ;;
    --tools) tools="$2"; shift 2 ;;
    --sanitize) suites="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --jobs)
      [[ "$2" =~ ^[1-9][0-9]?$ ]] ||
        { echo "gpu-check: --jobs takes a count from 1 to 99" >&2; exit 64; }
      width="$2"; shift 2 ;;
    --shard)
      [[ "$2" =~ ^([0-9]+)/([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -ge 1 ] &&
        [ "${BASH_REMATCH[1]}" -le "${BASH_REMATCH[2]}" ] ||
        { echo "gpu-check: --shard takes K/N with 1 <= K <= N" >&2; exit 64; }
      shard="$2"; shift 2 ;;
    *) echo "gpu-check: unknown option $1" >&2; exit 64 ;;
  esac
done
# --only's names are the test programs' without _tests; anything else is a typo, not a skip.
for t in ${only//,/ }; do
  case "$t" in gpu_executor | gpu | gpu_fault | pipeline | core | lean | lean_cli) ;;
    *) echo "gpu-check: --only takes gpu_executor, gpu, gpu_fault, pipeline, core, lean," \
         "lean_cli, not $t" >&2; exit 64 ;;
  esac
done
wanted() { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; }
# Each shard's logs get a name of their own, so that the parts of a split check sit side by side.
part=
if [ -n "$shard" ]; then
  export GTEST_TOTAL_SHARDS="${shard#*/}" GTEST_SHARD_INDEX=$(( ${shard%/*} - 1 ))
  part=".shard${shard%/*}of${shard#*/}"
fi
mkdir -p "$out"
commit="$(cat "$bin/COMMIT" 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)"
status=0
{
  echo "commit: $commit"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(hostname), $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || true
  nvidia-smi topo -m 2>/dev/null | head -n 8 || true
} | tee "$out/machine.txt"

# One test program's run, its output in LOG and its exit status in LOG.rc; with --jobs W the
# runs go side by side, at most W at once, else one after another. Printed in start order.
started=()
run_test() {  # label log command...
  local label=$1 log=$2
  shift 2
  if [ "$width" -gt 1 ]; then
    while [ "$(jobs -rp | wc -l)" -ge "$width" ]; do wait -n; done
    { "$@" > "$log" 2>&1; echo $? > "$log.rc"; } &
  else
    echo "== $label =="
    "$@" > "$log" 2>&1
    echo $? > "$log.rc"
    tail -n 3 "$log"
  fi
  started+=("$label|$log")
}
finish_tests() {
  wait
  local entry label log
  for entry in "${started[@]}"; do
    label=${entry%%|*} log=${entry#*|}
    [ "$width" -gt 1 ] && { echo "== $label =="; tail -n 3 "$log"; }
    [ "$(cat "$log.rc" 2>/dev/null)" = 0 ] || status=1
    rm -f "$log.rc"
  done
}

if [ "$tests" = 1 ]; then
  # Side by side (--jobs W), each program's OpenMP takes its share of the cores: seven programs
  # at once with every core each did not end in 500 s on the one-H200 host, where four
  # executor shards at 4 threads each took 94 s (h200-20261201-s19, calls 2 and 3). The
  # executor's tests go in W shards of their own (unless --shard), without the two tests that
  # read the GPU's free memory, which the others move: they run alone at the end (s22 call 2:
  # the four-fifths job, in a shard, counted 13.6 GB of the others' as its own against a
  # budget of 2.0 GB).
  alone='*TheGpuHoldsNoMoreThanItsBudget*:*AJobOfFourFifthsOfTheBudget*'
  if [ "$width" -gt 1 ]; then
    export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(( $(nproc) / width > 2 ? $(nproc) / width : 2 ))}"
  fi
  # The lean path (issue 39) on the GPUs: its engine suites forced lean, and the CLI killed at
  # every kind of step and at random moments, then recovered. The longest runs start first.
  if wanted lean; then
    run_test "lean_tests (GPU)${shard:+ (shard $shard)}" "$out/lean_tests${part}.txt" \
      env GPUSORT_LEAN=1 GPUSORT_LEAN_TEST_GPUS=1 "$bin"/tests/pipeline/lean_tests --gtest_brief=1
  fi
  for exe in "$bin"/tests/gpu/*_tests "$bin"/tests/pipeline/pipeline_tests \
             "$bin"/tests/core/core_tests; do
    t=$(basename "$exe" _tests)
    wanted "$t" || continue
    [ -x "$exe" ] || { echo "gpu-check: missing $exe" >&2; status=1; continue; }
    if [ "$width" -gt 1 ] && [ "$t" = gpu_executor ] && [ -z "$shard" ]; then
      for k in $(seq 1 "$width"); do
        run_test "${t}_tests (shard $k/$width of --jobs)" "$out/${t}_tests.jobs${k}of${width}.txt" \
          env GPUSORT_TEST_BUDGET=tiny GTEST_TOTAL_SHARDS="$width" GTEST_SHARD_INDEX=$((k - 1)) \
          GTEST_FILTER="-$alone" "$exe" --gtest_brief=1
      done
      continue
    fi
    filter=()
    [ "$width" -gt 1 ] && [ "$t" = gpu_executor ] &&
      filter=(GTEST_FILTER="-$alone")
    run_test "${t}_tests${shard:+ (shard $shard)}" "$out/${t}_tests${part}.txt" \
      env GPUSORT_TEST_BUDGET=tiny "${filter[@]}" "$exe" --gtest_brief=1
  done
  if wanted lean_cli; then
    cli="$bin/bin/gpusort"; [ -x "$cli" ] || cli="$bin/client/gpusort"
    # A GPU's pinned staging alone takes more than the CPU's 3 MiB limit, and each killed run
    # starts CUDA: the limit and the kills of the GPU host (h200-20261129-lean).
    run_test "lean_cli_tests (GPU)${shard:+ (shard $shard)}" "$out/lean_cli_tests${part}.txt" \
      env GPUSORT_LEAN_CLI_BUDGET="${GPUSORT_LEAN_CLI_BUDGET:-1Gi}" \
      GPUSORT_LEAN_KILLS="${GPUSORT_LEAN_KILLS:-40}" GPUSORT_TEST_CLI="$(realpath "$cli")" \
      "$bin"/tests/client/lean_cli_tests --gtest_brief=1
  fi
  finish_tests
  if [ "$width" -gt 1 ] && wanted gpu_executor && [ -x "$bin/tests/gpu/gpu_executor_tests" ]; then
    started=()
    run_test "gpu_executor_tests' budget tests, alone${shard:+ (shard $shard)}" \
      "$out/gpu_executor_tests.budget${part}.txt" env GPUSORT_TEST_BUDGET=tiny \
      GTEST_FILTER="$alone" "$bin/tests/gpu/gpu_executor_tests" --gtest_brief=1
    finish_tests
  fi
fi

# compute-sanitizer's four tools on the GPU tests at small sizes (GPUSORT_TEST_SMALL for the
# executor's tests, GPUSORT_TEST_MAX_N for gpu_tests' capped and huge ones): memcheck
# (out-of-bounds and misaligned accesses, leaks of device memory, API errors), racecheck
# (shared-memory hazards), synccheck (barriers that not every thread reaches) and initcheck
# (reads of device memory never written). Each run's output goes to sanitizer_TOOL_SUITE.txt and its summary line, exit status
# and time to sanitizer_summary.txt; any error, hazard or failed test fails the check. The tools
# slow kernels 10-100 times, so the sets are cut to what covers every kernel at least once: the
# sort kernels see only ordered bits (u32 or u64 words whatever the key type), so the executor
# runs its every-distribution test for u32 and u64 (typed suites /0 and /2) and the resident sort
# with its merges, and gpu_tests' key-transform tests cover the conversions of every key type.
# Compressed runs (issue 21): the device's encode in round 1 and decode in round 2, u32 and u64
# words (GpuCompressedRuns /0 and /2), at the sizes GPUSORT_TEST_MAX_N leaves (1, 4095, 4097).
# On an H100 (commit 0b0bc35) memcheck took 43 s for gpu_tests and about 11 s per executor test;
# racecheck 51 s for its gpu_tests set and about 30 s per executor test.
sanitizer_bin=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ "$sanitizer" = 1 ] && [ -x "$sanitizer_bin" ]; then
  summary="$out/sanitizer_summary.txt"
  echo "$("$sanitizer_bin" --version | tail -n 1), commit $commit" > "$summary"
  for tool in ${tools//,/ }; do
    for exe in "$bin"/tests/gpu/*_tests; do
      t=$(basename "$exe" _tests)
      [ -z "$suites" ] || [[ ",$suites," == *",$t,"* ]] || continue
      case "$tool:$t" in
        # The fault sweep fails calls on purpose, hundreds of jobs; it runs unsanitized above.
        *:gpu_fault) continue ;;
        # Every kernel of the executor: out of core with compensation, in core, the resident
        # pieces and split merges (and the exchange where there are two GPUs). racecheck, the
        # slowest, takes the u64 words only; gpu_tests' sample sort set has both word sizes.
        racecheck:gpu_executor)
          filter='GpuEngineKeys/2.EveryDistributionAndOrder*:*ResidentSortMerges*:'
          filter+='GpuCompressedRuns/2.RoundOneEncodes*' ;;
        # And the copy-out straight into a tmpfs output's locked pages (TmpfsOutputs...).
        *:gpu_executor)
          filter='GpuEngineKeys/0.EveryDistributionAndOrder*:'
          filter+='GpuEngineKeys/2.EveryDistributionAndOrder*:*ResidentSortMerges*:'
          filter+='GpuCompressedRuns/0.*:GpuCompressedRuns/2.*:*TmpfsOutputs*' ;;
        # racecheck and synccheck watch shared memory and barriers, which only the sample sort's
        # kernels, the key transforms and the run codec use among gpu_tests; racecheck did not
        # finish the whole suite in 300 s on the H100. The sample sort's every-path test runs all its kernels at
        # the sizes capped below.
        racecheck:gpu|synccheck:gpu) filter='gpu_sample_sort_bits.small_sizes*:*ordered_keys*:*run_codec*' ;;
        # Left out: the four tests that provoke CUDA errors on purpose (absurd allocations,
        # registering twice, a bad device), which the sanitizer would report as the API errors
        # they are. The huge tests (300 M and 2^31 + 1 sample-sorted keys, 2^32 + 37 keys
        # transformed) skip themselves above GPUSORT_TEST_MAX_N: a filter of "*huge*" matched
        # none of their names, and initcheck, which tracks every byte, did not finish the 2^32
        # one (cc0a8fe). initcheck also leaves out the every-distribution suite at 1 M and 3 M
        # elements (some 700 sorts, most of the set's data), which memcheck runs: its paths at
        # one and two levels run in the boundary-size, seed and capped every-path tests.
        initcheck:gpu)
          filter='-*absurd*:*pinned_buffer_allocates*:*host_registration_pins*'
          filter+=':*rejects_bad_devices*:*gpu_sample_sort_dist.*' ;;
        *) filter='-*absurd*:*pinned_buffer_allocates*:*host_registration_pins*'
           filter+=':*rejects_bad_devices*' ;;
      esac
      log="$out/sanitizer_${tool}_${t}.txt"
      echo "== compute-sanitizer --tool $tool ${t}_tests (small sizes) =="
      start=$SECONDS
      # initcheck does not count the bytes a cudaMemcpyBatchAsync wrote as written (a probe of
      # three slices: 3000 reports batched, 0 a call each; h200-20261201-s21 call 1), and round
      # 2 gathers its pinned slices in batches: its runs copy them a call each.
      batch=1; [ "$tool" = initcheck ] && batch=0
      GPUSORT_TEST_SMALL=1 GPUSORT_TEST_MAX_N=16385 GPUSORT_COPY_BATCH=$batch \
        "$sanitizer_bin" --tool "$tool" --error-exitcode 99 \
        "$exe" --gtest_brief=1 --gtest_filter="$filter" > "$log" 2>&1
      rc=$?
      # The tool's last summary line: "ERROR SUMMARY: N errors", or racecheck's "RACECHECK
      # SUMMARY: N hazards displayed (E errors, W warnings)". A hazard racecheck calls a warning
      # does not change its exit status, so the line is read too: clean means 0 of everything.
      line=$(grep -E '(ERROR|RACECHECK) SUMMARY:' "$log" | tail -n 1 | sed 's/^=* *//')
      printf '%-9s %-18s %s (exit %d, %d s)\n' "$tool" "${t}_tests" "${line:-no summary line}" \
        "$rc" $((SECONDS - start)) | tee -a "$summary"
      tail -n 2 "$log"
      if [ $rc -ne 0 ] || ! [[ "$line" =~ SUMMARY:\ 0\ (error|hazard) ]] ||
         [[ "$line" =~ [1-9][0-9]*\ (error|warning) ]]; then
        echo "gpu-check: $tool found errors in ${t}_tests or its tests failed (exit $rc)"
        status=1
      fi
    done
  done
elif [ "$sanitizer" = 1 ]; then
  echo "gpu-check: compute-sanitizer not found, sanitizer runs skipped" | tee "$out/sanitizer.txt"
  status=1
fi

if [ "$bench" = 1 ]; then
  for b in gpu compress sample codec; do
    exe="$bin/bench/${b}_bench"
    [ "$b" = compress ] && exe="$bin/bench/gpu_bench"
    [ -x "$exe" ] || { echo "gpu-check: missing $exe" >&2; status=1; continue; }
    echo "== ${b}_bench =="
    args=(--json "$out/${b}_bench.json" --machine "$machine" --commit "$commit")
    [ "$b" = gpu ] && args+=(--sizes "$sizes" --cpu-count "$cpu_count")
    [ "$b" = compress ] && args+=(--compress yes --compress-bytes "$compress_bytes")
    "$exe" "${args[@]}" 2>&1 | grep -v '\[info\]' > "$out/${b}_bench.txt"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    # The Markdown table is the end of the output, from its header on.
    sed -n '/^| target/,$p' "$out/${b}_bench.txt" | tee "$out/${b}_bench.md"
  done
  echo "== cpu_bench --count $cpu_count =="
  "$bin/bench/cpu_bench" --count "$cpu_count" --json "$out/cpu_bench.json" > "$out/cpu_bench.txt" 2>&1
  [ $? -eq 0 ] || status=1
  tail -n 12 "$out/cpu_bench.txt"
fi
exit $status
