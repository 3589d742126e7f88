#!/usr/bin/env bash
# The main job: generate 200 million u64 keys, sort them with the local engine (progress bar
# on a terminal), verify the result against the input, and print the rate.
#   scripts/main-job.sh [count]      (default 200M; work files in build/release/main-job/)
set -euo pipefail
cd "$(dirname "$0")/.."
count="${1:-200M}"
scripts/build.sh release
bin=build/release/client/gpusort
work=build/release/main-job
mkdir -p "$work"
echo "main job: generating $count u64 keys"
"$bin" gen --dtype u64 --dist uniform --count "$count" --seed 1 --out "$work/data.bin"
echo "main job: sorting with the local engine"
"$bin" sort "$work/data.bin" --dtype u64 --out "$work/sorted.bin" --local
echo "main job: verifying"
"$bin" verify "$work/sorted.bin" --dtype u64 --original "$work/data.bin"
rm -f "$work/data.bin" "$work/sorted.bin"
