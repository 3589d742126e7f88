#!/bin/bash
# Two-H200 host, call 2: issue 42's 64 GiB of records twice in one process (the first run makes
# the VM back memory it never had, the second reuses it), the CPU engine after it; issue 41's
# one rank on both GPUs with two jobs on one engine (call 1: one job of 8 GiB finished, the
# earlier hangs all ran two), then one process on both GPUs against two ranks with one each at
# 32 GiB in all. mpi_bench is 9fcf467's (its stack offsets resolve against that build).
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
echo "commit $(cat $C/COMMIT)"; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
nproc; free -g | head -2
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
echo "== rows_bench 64 GiB, one H200, two runs each, profiled"
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=0 timeout 240 $C/rows_bench --records-bytes 64Gi --columns-bytes 0 \
  --profile yes --cpu yes --gnu no --repeat 2 2>&1; echo "rc=$? $(ms $s) ms"
R=$C/ompi
export OPAL_PREFIX=$R LD_LIBRARY_PATH=$R/lib PATH=$R/bin:$PATH PMIX_MCA_pcompress_base_silence_warning=1
export OMPI_MCA_mca_base_component_show_load_errors=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
printf '#!/bin/bash\nexport CUDA_VISIBLE_DEVICES=$OMPI_COMM_WORLD_LOCAL_RANK\nexec "$@"\n' > $C/one_gpu.sh
chmod +x $C/one_gpu.sh
echo "== singleton, both GPUs, 8 GiB, two jobs, stacks at 45 s"
s=$(date +%s%N)
GPUSORT_BENCH_STACKS=45 timeout 60 $C/mpi_bench --count-per-rank 1Gi --repeat 2 \
  > $OUT/single-8g-r2.txt 2>&1; echo "rc=$? $(ms $s) ms"; head -c 14000 $OUT/single-8g-r2.txt; echo
echo "== mpirun -np 1, both GPUs, 32 GiB, one job"
s=$(date +%s%N)
timeout 150 mpirun -np 1 --bind-to none $C/mpi_bench --count-per-rank 4Gi --repeat 1 2>&1 | tail -3
echo "rc=$? $(ms $s) ms"
echo "== mpirun -np 2, one GPU each, 16 GiB each, one job"
s=$(date +%s%N)
OMP_NUM_THREADS=16 timeout 150 mpirun -np 2 --bind-to none -x OMP_NUM_THREADS $C/one_gpu.sh \
  $C/mpi_bench --count-per-rank 2Gi --repeat 1 2>&1 | tail -3
echo "rc=$? $(ms $s) ms"
