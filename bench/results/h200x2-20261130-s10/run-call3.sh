#!/bin/bash
# Two-H200 host, call 3: the test part of scripts/gpu-check.sh at this session's last GPU
# commit (the same binaries, environment and GPUSORT_TEST_BUDGET=tiny), in two halves at once so
# that it fits one call: gpu_executor_tests on GPU 0 alone (its two-GPU tests skip there; they
# ran on both GPUs in call 2), every other suite on GPU 1; compute-sanitizer memcheck on the
# gather kernels; the out-of-core suites again with round 2's slices packed on the host
# (GPUSORT_GATHER=host, staging::pack_in) and 8 GiB u64 at 1/256 and the smallest budget with
# it against the default; then the CLI on an 8 GiB file at budgets 1/8 and 1/256 with --profile.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
# The call returns only a few files: everything is written to $W and packed into one at the end.
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call3.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
echo "host: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB"
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
( s=$(date +%s%N); CUDA_VISIBLE_DEVICES=0 GPUSORT_TEST_BUDGET=tiny timeout 470 \
    $C/gpu_executor_tests --gtest_brief=1 > $OUT/gpu_executor_tests.txt 2>&1
  echo "gpu_executor_tests (GPU 0) rc=$? $(ms $s) ms" >> $OUT/gpu_executor_tests.txt ) &
A=$!
export CUDA_VISIBLE_DEVICES=1
for t in gpu_tests gpu_fault_tests pipeline_tests core_tests; do
  echo "== $t (GPU 1)"; s=$(date +%s%N)
  GPUSORT_TEST_BUDGET=tiny timeout 200 $C/$t --gtest_brief=1 > $OUT/$t.txt 2>&1
  echo "rc=$? $(ms $s) ms"; tail -n 3 $OUT/$t.txt; grep -m3 -A6 "Failure" $OUT/$t.txt
done
echo "== lean_tests (GPU 1)"; s=$(date +%s%N)
GPUSORT_LEAN=1 GPUSORT_LEAN_TEST_GPUS=1 timeout 150 $C/lean_tests --gtest_brief=1 > $OUT/lean_tests.txt 2>&1
echo "rc=$? $(ms $s) ms"; tail -n 3 $OUT/lean_tests.txt
echo "== lean_cli_tests (GPU 1)"; s=$(date +%s%N)
GPUSORT_TEST_CLI=$C/gpusort timeout 150 $C/lean_cli_tests --gtest_brief=1 > $OUT/lean_cli_tests.txt 2>&1
echo "rc=$? $(ms $s) ms"; tail -n 3 $OUT/lean_cli_tests.txt
SAN=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
echo "== compute-sanitizer memcheck gpu_tests gather (GPU 1)"; s=$(date +%s%N)
GPUSORT_TEST_SMALL=1 GPUSORT_TEST_MAX_N=16385 timeout 120 $SAN --tool memcheck --error-exitcode 99 \
  $C/gpu_tests --gtest_brief=1 --gtest_filter='*gather*' > $OUT/memcheck_gather.txt 2>&1
echo "rc=$? $(ms $s) ms"; grep -E "ERROR SUMMARY|tests ran|PASSED|FAILED" $OUT/memcheck_gather.txt | tail -3
echo "== gpu_executor_tests out of core, GPUSORT_GATHER=host (GPU 1)"; s=$(date +%s%N)
GPUSORT_GATHER=host timeout 120 $C/gpu_executor_tests --gtest_brief=1 \
  --gtest_filter='*OutOfCore*:*TheGpuHoldsNoMoreThanItsBudget*:*Argsort*' > $OUT/exec_host_gather.txt 2>&1
echo "rc=$? $(ms $s) ms"; tail -n 3 $OUT/exec_host_gather.txt; grep -m3 -A6 "Failure" $OUT/exec_host_gather.txt
wait $A; echo "== gpu_executor_tests (GPU 0)"; tail -n 4 $OUT/gpu_executor_tests.txt
grep -m3 -A6 "Failure" $OUT/gpu_executor_tests.txt
for v in "GPUSORT_GATHER=auto" "GPUSORT_GATHER=host" "GPUSORT_GATHER=auto" "GPUSORT_GATHER=host"; do
  echo "== gpu_bench $v"; s=$(date +%s%N)
  env CUDA_VISIBLE_DEVICES=0 $v timeout 50 $C/gpu_bench --chunks yes --repeat 1 --chunk-bytes 8Gi --gpus 1 \
    --kinds u64 --budgets 1/256,smallest >> $OUT/bench.txt 2>&1
  echo "rc=$? $(ms $s) ms"; grep -E "^8.00 GiB" $OUT/bench.txt | tail -3
  grep -E "^    round (1 sort|2 plan  |2 copy in|2 sort|2 round)" $OUT/bench.txt | tail -10
done
echo "== CLI: 8 GiB u64 file in /dev/shm, one H200, budgets 1 GiB and 32 MiB, --profile"
D=/dev/shm/g44; mkdir -p $D
$C/gpusort gen --dtype u64 --dist uniform --count 1Gi --seed 5 --out $D/k.bin
printf 'devices: [0]\ndevice_memory_budget: 32MiB\n' > $D/small.yaml
printf 'devices: [0]\ndevice_memory_budget: 1GiB\n' > $D/eighth.yaml
for run in eighth small small host; do
  cfg=$run; [ $run = host ] && export GPUSORT_GATHER=host && cfg=small
  s=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=0 timeout 60 $C/gpusort sort $D/k.bin --dtype u64 --local --config $D/$cfg.yaml \
    --out $D/s.bin --json --profile > $OUT/cli-$run.txt 2>&1
  echo "$run rc=$? $(ms $s) ms"; grep -v '^ *$' $OUT/cli-$run.txt | head -25
  rm -f $D/s.bin
done
rm -rf $D
