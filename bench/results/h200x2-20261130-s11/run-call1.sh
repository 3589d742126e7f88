#!/bin/bash
# Two-H200 host, call 1 of session 11: what the last session's gpu-check left owed at its last
# GPU commit's successor (53d9c52: staging::stage_in shared by copy_in and pack_in): the whole of
# gpu_executor_tests in four gtest shards (GTEST_TOTAL_SHARDS/INDEX, as gpu-check.sh --shard),
# two at a time, one per GPU, then lean_tests, lean_cli_tests and compute-sanitizer memcheck of
# the gather kernels, with gpu-check.sh's environment (GPUSORT_TEST_BUDGET=tiny). Not brief, so
# that a part cut off by the call's limit still shows which tests finished.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call1.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
echo "host: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB"
T0=$(date +%s); left() { echo $(( T0 + 545 - $(date +%s) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
shard() {  # GPU K
  s=$(date +%s%N); l=$(left); [ $l -lt 10 ] && { echo "shard $2/4 not started" >> $OUT/summary.txt; return; }
  CUDA_VISIBLE_DEVICES=$1 GPUSORT_TEST_BUDGET=tiny GTEST_TOTAL_SHARDS=4 GTEST_SHARD_INDEX=$(( $2 - 1 )) \
    timeout $l $C/gpu_executor_tests > $OUT/gpu_executor_tests.shard$2of4.txt 2>&1
  echo "gpu_executor_tests shard $2/4 (GPU $1) rc=$? $(ms $s) ms" >> $OUT/summary.txt
}
( shard 0 1; shard 0 3
  s=$(date +%s%N); CUDA_VISIBLE_DEVICES=0 GPUSORT_LEAN=1 GPUSORT_LEAN_TEST_GPUS=1 timeout $(left) \
    $C/lean_tests > $OUT/lean_tests.txt 2>&1
  echo "lean_tests (GPU 0) rc=$? $(ms $s) ms" >> $OUT/summary.txt ) &
A=$!
( shard 1 2; shard 1 4
  s=$(date +%s%N); CUDA_VISIBLE_DEVICES=1 GPUSORT_TEST_CLI=$C/gpusort timeout $(left) \
    $C/lean_cli_tests > $OUT/lean_cli_tests.txt 2>&1
  echo "lean_cli_tests (GPU 1) rc=$? $(ms $s) ms" >> $OUT/summary.txt
  SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
  s=$(date +%s%N); CUDA_VISIBLE_DEVICES=1 GPUSORT_TEST_SMALL=1 GPUSORT_TEST_MAX_N=16385 timeout $(left) \
    $SAN --tool memcheck --error-exitcode 99 $C/gpu_tests --gtest_brief=1 --gtest_filter='*gather*' \
    > $OUT/memcheck_gather.txt 2>&1
  echo "memcheck gpu_tests *gather* (GPU 1) rc=$? $(ms $s) ms" >> $OUT/summary.txt ) &
B=$!
wait $A $B
cat $OUT/summary.txt
for f in $OUT/*.txt; do
  echo "== $(basename $f)"; grep -E "^\[==========\]|^\[  PASSED|^\[  FAILED|ERROR SUMMARY|YOU HAVE" $f | tail -4
  grep -m5 -B2 -A8 "Failure$" $f | head -40
done
