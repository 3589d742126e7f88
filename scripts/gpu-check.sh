#!/usr/bin/env bash
# The one-command GPU check: runs the GPU tests and the engine tests on this host's GPUs and
# the CPU benchmark, and writes what they printed to OUTDIR (default bench/results/<host-date>).
# Uses dist/ from scripts/bundle.sh when present, else build/release; GPUSORT_BIN overrides.
#   scripts/gpu-check.sh [OUTDIR] [bench count, default 1Gi]
set -uo pipefail
cd "$(dirname "$0")/.."
bin="${GPUSORT_BIN:-$( [ -d dist ] && echo dist || echo build/release )}"
out="${1:-bench/results/$(hostname)-$(date -u +%Y%m%d)}"
count="${2:-1Gi}"
mkdir -p "$out"
status=0
{
  echo "commit: $(cat "$bin/COMMIT" 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(hostname), $(nproc) cores"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || true
} | tee "$out/machine.txt"
for exe in "$bin"/tests/gpu/*_tests "$bin"/tests/pipeline/pipeline_tests "$bin"/tests/core/core_tests; do
  t=$(basename "$exe" _tests)
  [ -x "$exe" ] || { echo "gpu-check: missing $exe" >&2; status=1; continue; }
  echo "== ${t}_tests =="
  GPUSORT_TEST_BUDGET=tiny "$exe" --gtest_brief=1 > "$out/${t}_tests.txt" 2>&1
  rc=$?
  tail -n 3 "$out/${t}_tests.txt"
  [ $rc -eq 0 ] || status=1
done
echo "== cpu_bench --count $count =="
"$bin/bench/cpu_bench" --count "$count" --json "$out/cpu_bench.json" 2>&1 | tee "$out/cpu_bench.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status=1
exit $status
