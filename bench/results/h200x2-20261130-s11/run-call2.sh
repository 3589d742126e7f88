#!/bin/bash
# Two-H200 host, call 2: onesweep tiles for small chunks (issue 44). radix_tile_bench (us per
# radix sort by layout, size and tile, checked against std::stable_sort) on GPU 0 while GPU 1
# runs the radix and gather GPU tests (gpu-check's environment); then 8 GiB out of core on one
# H200 at 1/256 and the smallest budget with CUB's tiles (GPUSORT_RADIX_TILE=cub), 2k and 1k
# tiles, interleaved; then the CLI at 32 MiB with the round-1 buffer registered or not
# (GPUSORT_ROUND1_PINNED, last session's call 5, refused then).
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call2.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
T0=$(date +%s); left() { echo $(( T0 + 540 - $(date +%s) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
( s=$(date +%s%N); CUDA_VISIBLE_DEVICES=1 GPUSORT_TEST_BUDGET=tiny timeout 200 $C/gpu_tests \
    --gtest_filter='*radix*:*gather*' > $OUT/gpu_tests_radix_gather.txt 2>&1
  echo "gpu_tests radix+gather (GPU 1) rc=$? $(ms $s) ms" >> $OUT/summary.txt
  # call 1 ran lean_cli_tests without the GPU host's limit and kills (gpu-check.sh now sets them)
  s=$(date +%s%N); CUDA_VISIBLE_DEVICES=1 GPUSORT_LEAN_CLI_BUDGET=1Gi GPUSORT_LEAN_KILLS=40 \
    GPUSORT_TEST_CLI=$C/gpusort timeout 300 $C/lean_cli_tests > $OUT/lean_cli_tests.txt 2>&1
  echo "lean_cli_tests (GPU 1) rc=$? $(ms $s) ms" >> $OUT/summary.txt ) &
A=$!
s=$(date +%s%N); CUDA_VISIBLE_DEVICES=0 timeout 200 $C/radix_tile_bench > $OUT/radix_tile_bench.txt 2>&1
echo "radix_tile_bench (GPU 0) rc=$? $(ms $s) ms" >> $OUT/summary.txt
cat $OUT/summary.txt
grep -E "^\| (u64|u64\+u32) \| (262144|674000|1048576|4194304|134217728) " $OUT/radix_tile_bench.txt
grep -c WRONG $OUT/radix_tile_bench.txt
bench() {  # label env...
  local label=$1; shift; local l=$(left); [ $l -lt 30 ] && { echo "$label: no time left"; return; }
  s=$(date +%s%N)
  env CUDA_VISIBLE_DEVICES=0 "$@" timeout $(( l < 100 ? l : 100 )) $C/gpu_bench --chunks yes --repeat 1 \
    --chunk-bytes 8Gi --gpus 1 --kinds $KINDS --budgets 1/256,smallest > $OUT/bench-$label.txt 2>&1
  echo "== $label rc=$? $(ms $s) ms"
  grep -E "^8.00 GiB" $OUT/bench-$label.txt | tail -6
  grep -E "^    round (1 sort|2 sort)" $OUT/bench-$label.txt | tail -4
}
KINDS=u64
bench u64-cub GPUSORT_RADIX_TILE=cub; bench u64-2k GPUSORT_RADIX_TILE=2k; bench u64-1k GPUSORT_RADIX_TILE=1k
KINDS=f64.stable
bench f64s-2k GPUSORT_RADIX_TILE=2k; bench f64s-cub GPUSORT_RADIX_TILE=cub
tail -3 $OUT/gpu_tests_radix_gather.txt; grep -m3 -A8 "Failure$" $OUT/gpu_tests_radix_gather.txt
echo "== CLI: 8 GiB u64 in /dev/shm, 32 MiB budget, round-1 buffer registered or not"
D=/dev/shm/g44; mkdir -p $D
$C/gpusort gen --dtype u64 --dist uniform --count 1Gi --seed 5 --out $D/k.bin > /dev/null
printf 'devices: [0]\ndevice_memory_budget: 32MiB\n' > $D/small.yaml
n=0
for pin in 1 0 1 0; do
  l=$(left); [ $l -lt 15 ] && break
  n=$((n + 1)); s=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=0 GPUSORT_ROUND1_PINNED=$pin timeout $(( l < 25 ? l : 25 )) $C/gpusort sort $D/k.bin \
    --dtype u64 --local --config $D/small.yaml --out $D/s.bin --json --profile > $OUT/cli-$n-pinned$pin.txt 2>&1
  echo "pinned=$pin rc=$? $(ms $s) ms"
  grep -E '^\{' $OUT/cli-$n-pinned$pin.txt | cut -c1-160
  rm -f $D/s.bin
done
rm -rf $D
wait $A; cat $OUT/summary.txt; tail -3 $OUT/lean_cli_tests.txt; grep -m3 -A8 "Failure$" $OUT/lean_cli_tests.txt
