#!/bin/bash
# Two-H200 host, call 3 (7094c12): issue 44's gather kernel on a capped grid, checked (its GPU
# test, the executor's out-of-core suites) and measured against 9fcf467's in the same run
# (gpu_bench --chunks, 8 GiB, one H200), with the radix sort in place of the engine's choice,
# and the two in-core sorts at chunk sizes (sample_bench); issue 41's exchange against the
# all-to-all at 2-16 ranks (shards now made on every core) and two ranks with one GPU each.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
echo "commit $(cat $C/COMMIT)"; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
echo "== gpu_tests gather"
timeout 60 $C/gpu_tests --gtest_filter='*gather*' 2>&1 | tail -3
echo "== gpu_executor_tests out of core"
s=$(date +%s%N)
timeout 150 $C/gpu_executor_tests --gtest_filter='*EveryDistributionAndOrderOutOfCoreAndInCore*:*PairsTravelTogether*:*StableArgsort*:gpu_test.TwoGpusShareTheChunks:gpu_test.TheGpuHoldsNoMoreThanItsBudget:gpu_test.RowsMatch*' 2>&1 | grep -E "FAILED|PASSED|tests ran|Failure" | head -20
echo "rc=$? $(ms $s) ms"
export CUDA_VISIBLE_DEVICES=0
for b in gpu_bench_old gpu_bench; do
  echo "== $b --chunks 8 GiB, one H200"
  s=$(date +%s%N)
  timeout 110 $C/$b --chunks yes --chunk-bytes 8Gi --gpus 1 --repeat 1 --machine h200x2 \
    --commit $(cat $C/COMMIT) --json $OUT/chunks-$b.json > $OUT/chunks-$b.txt 2>&1
  echo "rc=$? $(ms $s) ms"; grep -v "^    " $OUT/chunks-$b.txt | grep -E "budget|target|chunks\." | head -30
done
echo "== gpu_bench --chunks --incore radix"
s=$(date +%s%N)
timeout 110 $C/gpu_bench --chunks yes --chunk-bytes 8Gi --gpus 1 --repeat 1 --incore radix \
  --machine h200x2 --commit $(cat $C/COMMIT) --json $OUT/chunks-radix.json > $OUT/chunks-radix.txt 2>&1
echo "rc=$? $(ms $s) ms"; grep -v "^    " $OUT/chunks-radix.txt | grep -E "budget" | head -30
echo "== sample_bench at chunk sizes"
timeout 60 $C/sample_bench --sizes 128Ki,256Ki,512Ki,1Mi,4Mi,16Mi --reps 5 --types u64,f64,pairs \
  --dists uniform 2>&1 | tail -25
unset CUDA_VISIBLE_DEVICES
R=$C/ompi
export OPAL_PREFIX=$R LD_LIBRARY_PATH=$R/lib PATH=$R/bin:$PATH PMIX_MCA_pcompress_base_silence_warning=1
export OMPI_MCA_mca_base_component_show_load_errors=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
printf '#!/bin/bash\nexport CUDA_VISIBLE_DEVICES=$OMPI_COMM_WORLD_LOCAL_RANK\nexec "$@"\n' > $C/one_gpu.sh
chmod +x $C/one_gpu.sh
cat > $C/cpu.yaml <<'Y'
devices: cpu
Y
for r in 2 4 8 16; do
  echo "== $r ranks, CPU engine, 4 GiB in all, best of 3"
  OMP_NUM_THREADS=$((32 / r)) timeout 60 mpirun -np $r --oversubscribe --bind-to none \
    -x OMP_NUM_THREADS $C/mpi_bench --count-per-rank $((512 / r))Mi --repeat 3 \
    --config $C/cpu.yaml 2>&1 | tail -1
done
echo "== 2 ranks, one GPU each, 16 GiB each, best of 2"
s=$(date +%s%N)
OMP_NUM_THREADS=16 timeout 120 mpirun -np 2 --bind-to none -x OMP_NUM_THREADS $C/one_gpu.sh \
  $C/mpi_bench --count-per-rank 2Gi --repeat 2 2>&1 | tail -1; echo "rc=$? $(ms $s) ms"
echo "== 1 rank, both GPUs, 32 GiB, best of 2"
s=$(date +%s%N)
timeout 100 mpirun -np 1 --bind-to none $C/mpi_bench --count-per-rank 4Gi --repeat 2 2>&1 | tail -1
echo "rc=$? $(ms $s) ms"
