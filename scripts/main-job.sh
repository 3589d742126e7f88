#!/usr/bin/env bash
# The main job, through the service: start gpusortd with a default configuration (every GPU
# found, else the CPU) on a temporary socket, generate 200 million u64 keys, sort them through the
# daemon with the CLI (the CLI opens the files and passes descriptors; progress bar on a
# terminal), show the daemon's status, verify the result against the input, stop the daemon with
# SIGTERM and check that it drained and exited cleanly.
#   scripts/main-job.sh [count]      (default 200M; work files in build/release/main-job/)
set -euo pipefail
cd "$(dirname "$0")/.."
count="${1:-200M}"
scripts/build.sh release
bin=build/release/client/gpusort
daemon=build/release/service/gpusortd
work=build/release/main-job
mkdir -p "$work"
run_dir=$(mktemp -d /tmp/gpusort-main-job-XXXXXX)
socket="$run_dir/gpusortd.sock"
cat > "$run_dir/gpusortd.yaml" <<EOF
# The main job's daemon: defaults, except a socket of its own.
devices: auto
socket: $socket
EOF
"$daemon" --config "$run_dir/gpusortd.yaml" --check-config > /dev/null
"$daemon" --config "$run_dir/gpusortd.yaml" 2> "$run_dir/gpusortd.log" &
daemon_pid=$!
stop_daemon() {
  if kill -0 "$daemon_pid" 2> /dev/null; then
    kill -TERM "$daemon_pid"
    wait "$daemon_pid" || true
  fi
  rm -rf "$run_dir"
}
trap stop_daemon EXIT
for _ in $(seq 1 300); do  # until it listens (GPU initialisation can take seconds)
  [ -S "$socket" ] && "$bin" status --socket "$socket" > /dev/null 2>&1 && break
  kill -0 "$daemon_pid" 2> /dev/null || { cat "$run_dir/gpusortd.log" >&2; exit 70; }
  sleep 0.1
done
echo "main job: gpusortd (pid $daemon_pid) listens on $socket"
echo "main job: generating $count u64 keys"
"$bin" gen --dtype u64 --dist uniform --count "$count" --seed 1 --out "$work/data.bin"
echo "main job: sorting through the daemon"
"$bin" sort "$work/data.bin" --dtype u64 --out "$work/sorted.bin" --socket "$socket"
"$bin" status --socket "$socket"
echo "main job: verifying"
"$bin" verify "$work/sorted.bin" --dtype u64 --original "$work/data.bin"
rm -f "$work/data.bin" "$work/sorted.bin"
kill -TERM "$daemon_pid"
if wait "$daemon_pid"; then
  echo "main job: gpusortd stopped cleanly on SIGTERM"
else
  rc=$?
  echo "main job: gpusortd exited with status $rc on SIGTERM" >&2
  cat "$run_dir/gpusortd.log" >&2
  exit 70
fi
