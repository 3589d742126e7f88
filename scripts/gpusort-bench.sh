#!/usr/bin/env bash
# The benchmark report (issue 24) in one command on a GPU host, from the bundle (dist/, made by
# scripts/bundle.sh) or build/release: on whatever GPUs the machine has, the physics (pinned H2D,
# D2H and both at once per GPU and summed, pageable H2D, host memcpy on one thread and all,
# registration), the baselines (copy in / CUB radix sort / copy out from pinned and pageable
# memory, CUB merge sort, the parallel CPU sort, std::sort), gpusort's in-core sorters per key
# type and distribution, the engine out of core (budget 1/8) and fitting on 1 GPU and on all, and
# every user path (CLI on files, daemon with descriptors and with a shared buffer, embedded on
# pageable memory, Python). Each step writes its output to OUTDIR/<step>.log and its results to
# OUTDIR/<step>*.json; bench/report.py then gathers them into OUTDIR/report.json and renders
# OUTDIR/report.md and the PNG plots (or says how to render them elsewhere, where matplotlib is
# missing). A failing step is logged and the others still run.
#
#   scripts/gpusort-bench.sh OUTDIR [--quick] [--machine NAME] [--max-bytes N] [--dir DIR]
#                                   [--only STEP,...] [--skip STEP,...]
#
# Steps: mem, pages, register, gpu, sample, cpu, e2e, python, report (machine.txt is always
# written; pages and register are A/Bs of the data path that report.py does not render).
# --quick (meant to take under 3 minutes on an H100 host; not yet timed): gpu_bench at 64 MiB
#   and 1 GiB of u64 keys, the CPU sorts at 128 MiB, sample_bench at 2^24 keys, mem_bench at
#   1 GiB, e2e at 1 GiB, Python at 64 MiB and 1 GiB of float64.
# Full: the engine at 64 MiB, 256 MiB, 1, 4, 16 and 32 GiB up to the largest power of two S with
#   4 S within the host's memory (gpu_bench holds up to three copies of the data), capped at
#   32 GiB (--max-bytes sets S); the user paths (e2e_bench holds about five) at 1, 4, 8
#   and 16 GiB up to S/2; Python at 64 MiB, 1 and 8 GiB up to S/4. On the 125 GiB H100 host
#   (S = 16 GiB) it took 11 minutes in two calls (--only splits it); --quick took 60 s.
# Exit status: 0 when every step ran, 1 when some step failed (OUTDIR/steps.tsv says which),
# 64 on a bad command line. A missed speed target is reported, not a failure.
set -uo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
usage() { sed -n '14,15p' "$0" | sed 's/^# *//' >&2; exit 64; }
help() { sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'; exit 0; }
case "${1:-}" in -h|--help) help ;; esac
out="${1:-}"
[ -n "$out" ] && [ "${out#-}" = "$out" ] || usage
shift
quick=0 machine="$(hostname -s)" max_bytes= dir=/dev/shm only= skip=
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1; shift ;;
    --machine) machine="${2:?}"; shift 2 ;;
    --max-bytes) max_bytes="${2:?}"; shift 2 ;;
    --dir) dir="${2:?}"; shift 2 ;;
    --only) only="${2:?}"; shift 2 ;;
    --skip) skip="${2:?}"; shift 2 ;;
    -h|--help) help ;;
    *) echo "gpusort-bench: unknown option $1" >&2; usage ;;
  esac
done
bin="${GPUSORT_BIN:-$( [ -d dist ] && echo dist || echo build/release )}"
# dist/ holds bin/ and bench/; a build tree holds client/, service/ and bench/.
if [ -x "$bin/bin/gpusort" ]; then cli_dir="$bin/bin"; daemon="$bin/bin/gpusortd"
else cli_dir="$bin/client"; daemon="$bin/service/gpusortd"; fi
mkdir -p "$out" || exit 1
out="$(cd "$out" && pwd)"
commit="$(cat "$bin/COMMIT" 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)"

bytes_of() {  # "64Mi" or "1073741824" -> bytes
  case "$1" in *[!0-9]*) numfmt --from=iec-i "$1" ;; *) echo "$1" ;; esac
}
gib=$((1 << 30))
mem_bytes=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) * 1024 ))
if [ -z "$max_bytes" ]; then
  max_bytes=$((32 * gib))
  while [ $((4 * max_bytes)) -gt "$mem_bytes" ] && [ "$max_bytes" -gt $((64 << 20)) ]; do
    max_bytes=$((max_bytes / 2))
  done
else
  max_bytes=$(bytes_of "$max_bytes") || usage
fi
# Sizes in bytes of u64 keys, the ones up to max_bytes (and e2e's up to half of it).
pick() {  # pick LIMIT SIZE... : the sizes (with Mi/Gi suffixes) not above LIMIT bytes
  local limit=$1 s b list=; shift
  for s in "$@"; do
    b=$(bytes_of "$s")
    [ "$b" -le "$limit" ] && list+="${list:+,}$s"
  done
  echo "$list"
}
to_keys() {  # byte sizes "64Mi,1Gi" -> counts of u64 keys "8388608,134217728"
  local s list=
  for s in ${1//,/ }; do
    list+="${list:+,}$(( $(bytes_of "$s") / 8 ))"
  done
  echo "$list"
}
if [ "$quick" = 1 ]; then
  engine_sizes=$(pick "$max_bytes" 64Mi 1Gi) e2e_sizes=$(pick "$max_bytes" 1Gi)
  python_sizes=$(pick "$max_bytes" 64Mi 1Gi) python_dtypes=float64
  mem_size=1Gi cpu_count=16Mi cpu_sort_count=16Mi sample_sizes=16Mi repeat=3
  sample_dists=uniform,sorted,zero,detdupes step_limit=150
else
  engine_sizes=$(pick "$max_bytes" 64Mi 256Mi 1Gi 4Gi 16Gi 32Gi)
  # e2e's out-of-core rows give the device 1/8 of the data: 256 MiB would ask for 32 MiB, under
  # the smallest budget that sorts in two rounds (about 70 MiB), so the user paths start at 1 GiB.
  e2e_sizes=$(pick $((max_bytes / 2)) 1Gi 4Gi 8Gi 16Gi)
  python_sizes=$(pick $((max_bytes / 4)) 64Mi 1Gi 8Gi) python_dtypes=float64,int64
  mem_size=8Gi cpu_count=512Mi cpu_sort_count=256Mi sample_sizes=64Mi,512Mi repeat=5
  sample_dists=uniform,gaussian,staggered,sorted,zero,detdupes step_limit=900
fi
# A small --max-bytes still measures the user paths, at the largest size allowed.
[ -n "$e2e_sizes" ] || e2e_sizes=$((max_bytes / 2))

wanted() {  # wanted STEP: whether --only / --skip let it run
  { [ -z "$only" ] || [[ ",$only," == *",$1,"* ]]; } && [[ ",$skip," != *",$1,"* ]]
}
status=0
: > "$out/steps.tsv"
# run_step NAME CMD...: runs CMD (a program, or a function of this script) with its output in
# OUTDIR/NAME.log and a time limit over its whole process group, records "NAME rc seconds" in
# steps.tsv; a failure marks the run failed and the next step goes on.
run_step() {
  local name=$1; shift
  local t0=$SECONDS rc why
  echo "== $name: $*" | tee -a "$out/run.log"
  if [ "$(type -t "$1")" = function ]; then
    timeout --kill-after=20 "$step_limit" bash -c "$(declare -f "$1"); $(printf '%q ' "$@")" \
      > "$out/$name.log" 2>&1
  else
    timeout --kill-after=20 "$step_limit" "$@" > "$out/$name.log" 2>&1
  fi
  rc=$?
  printf '%s\t%s\t%s\n' "$name" "$rc" $((SECONDS - t0)) >> "$out/steps.tsv"
  if [ $rc -ne 0 ]; then
    status=1
    why="exit status $rc"
    [ $rc -eq 124 ] || [ $rc -eq 137 ] && why="killed after ${step_limit} s"
    echo "gpusort-bench: step $name failed ($why); the end of its log:" | tee -a "$out/run.log"
    tail -n 5 "$out/$name.log" | tee -a "$out/run.log"
  fi
  return 0
}

{
  echo "commit: $commit"
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(hostname), $(nproc) cores, $((mem_bytes / gib)) GiB"
  echo "mode: $([ "$quick" = 1 ] && echo quick || echo full)," \
       "largest size $(numfmt --to=iec-i "$max_bytes")B"
  echo "binaries: $bin"
  if command -v nvidia-smi > /dev/null; then
    fields=index,name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max
    nvidia-smi --query-gpu="$fields" --format=csv,noheader 2>&1
  else
    echo "nvidia-smi: not found"
  fi
} > "$out/machine.txt"
cat "$out/machine.txt"
common=(--machine "$machine" --commit "$commit")

wanted mem && run_step mem "$bin/bench/mem_bench" --bytes "$mem_size" --dir "$dir" \
  --json "$out/mem.json" "${common[@]}"
# How a new output's pages are made in --dir (4 KiB by fallocate against 2 MiB from 1, 2, 4, ...
# threads) and a file's pages registered for the copy engines (issue 18): A/Bs for the data path.
wanted pages && run_step pages "$bin/bench/io_bench" --pages --bytes "$mem_size" --dir "$dir" \
  --json "$out/pages.json" --machine "$machine"
wanted register && run_step register "$bin/bench/mem_bench" --only register \
  --bytes "$mem_size" --dir "$dir" --json "$out/register.json" "${common[@]}"
wanted gpu && run_step gpu "$bin/bench/gpu_bench" --sizes "$(to_keys "$engine_sizes")" \
  --cpu-count "$cpu_count" --repeat "$repeat" --json "$out/gpu.json" "${common[@]}"
wanted sample && run_step sample "$bin/bench/sample_bench" --sizes "$sample_sizes" \
  --dists "$sample_dists" --json "$out/sample.json" "${common[@]}"
wanted cpu && run_step cpu "$bin/bench/cpu_bench" --count "$cpu_sort_count" \
  --json "$out/cpu.json" "${common[@]}"
if wanted e2e; then
  # e2e_bench wants gpusort and gpusortd in one folder, as in dist/bin.
  links=$(mktemp -d /tmp/gpusort-bench-bin-XXXXXX)
  ln -s "$(realpath "$cli_dir/gpusort")" "$links/gpusort"
  ln -s "$(realpath "$daemon")" "$links/gpusortd"
  for s in ${e2e_sizes//,/ }; do
    run_step "e2e-$s" "$bin/bench/e2e_bench" --bin "$links" --dir "$dir" \
      --bytes "$s" --cpu-bytes $(( $(bytes_of "$s") / 4 )) \
      --json "$out/e2e-$s.json" "${common[@]}"
  done
  rm -rf "$links"
fi

# Python: /opt/torch/.venv's interpreter on the GPU hosts (numpy there), else python3.
python_step() {
  local py run_dir socket pid rc
  for py in /opt/torch/.venv/bin/python3 python3 /usr/bin/python3; do
    command -v "$py" > /dev/null && "$py" -c 'import numpy' 2> /dev/null && break
    py=
  done
  if [ -z "$py" ]; then echo "no python3 with numpy: Python path not measured"; return 0; fi
  run_dir=$(mktemp -d /tmp/gpusort-bench-XXXXXX) || return 1
  trap 'kill -TERM $pid 2> /dev/null; rm -rf "$run_dir"' TERM
  socket="$run_dir/gpusortd.sock"
  printf 'devices: auto\nsocket: %s\nlog_level: warn\n' "$socket" > "$run_dir/gpusortd.yaml"
  "$daemon" --config "$run_dir/gpusortd.yaml" 2> "$run_dir/gpusortd.log" &
  pid=$!
  for _ in $(seq 1 300); do  # until it listens (GPU initialisation can take seconds)
    [ -S "$socket" ] && break
    kill -0 "$pid" 2> /dev/null || break
    sleep 0.1
  done
  "$py" bench/python_bench.py --socket "$socket" --sizes "$python_sizes" \
    --dtypes "$python_dtypes" --out "$out/python.json" --machine "$machine" --commit "$commit"
  rc=$?
  kill -TERM "$pid" 2> /dev/null
  wait "$pid" || { echo "gpusortd: exit status $? on SIGTERM"; cat "$run_dir/gpusortd.log"; rc=1; }
  rm -rf "$run_dir"
  return $rc
}
export daemon out python_sizes python_dtypes machine commit
wanted python && run_step python python_step

# The report: report.json gathers every result; the plots need matplotlib, which a GPU host may
# lack: then the Markdown is written without them and the lead renders from report.json.
if wanted report; then
  renderer=
  for py in python3 /usr/bin/python3 /opt/torch/.venv/bin/python3; do
    command -v "$py" > /dev/null && "$py" -c 'import matplotlib' 2> /dev/null &&
      renderer=$py && break
  done
  if [ -n "$renderer" ]; then
    run_step report "$renderer" bench/report.py "$out" --out "$out"
  else
    run_step report python3 bench/report.py "$out" --out "$out" --no-plots
    echo "gpusort-bench: no matplotlib here; render elsewhere with" \
         "bench/report.py $out/report.json --out DIR" | tee -a "$out/run.log"
  fi
fi
echo "gpusort-bench: steps (name, exit status, seconds):"
cat "$out/steps.tsv"
exit $status
