#!/bin/bash
# Two-H200 host, call 1 (session of 2026-11-30): where one MPI rank on both GPUs stops (issue 41:
# 8 GiB never returned; every thread's stack at 40 s, singleton and under mpirun, one GPU beside
# it), and what fresh host memory costs on this host (issue 42: the records' copy made at
# 8.5 GB/s; mem_bench's small and huge pages, THP settings).
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
echo "commit $(cat $C/COMMIT)"; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
nproc; free -g | head -2; df -h /dev/shm | tail -1
for f in enabled defrag shmem_enabled khugepaged/defrag; do
  echo "thp $f: $(cat /sys/kernel/mm/transparent_hugepage/$f 2>&1)"; done
grep -i -E "AnonHuge|HugePages_T|MemFree" /proc/meminfo
R=$C/ompi
export OPAL_PREFIX=$R LD_LIBRARY_PATH=$R/lib PATH=$R/bin:$PATH PMIX_MCA_pcompress_base_silence_warning=1
export OMPI_MCA_mca_base_component_show_load_errors=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "== singleton, both GPUs, 8 GiB, stacks at 40 s"
s=$(date +%s%N)
GPUSORT_BENCH_STACKS=40 timeout 55 $C/mpi_bench --count-per-rank 1Gi --repeat 1 \
  > $OUT/single-8g.txt 2>&1; echo "rc=$? $(( ($(date +%s%N) - s) / 1000000 )) ms"
head -c 12000 $OUT/single-8g.txt; echo
echo "== mpirun -np 1, both GPUs, 8 GiB, stacks at 40 s"
s=$(date +%s%N)
GPUSORT_BENCH_STACKS=40 timeout 55 mpirun -np 1 --bind-to none -x GPUSORT_BENCH_STACKS \
  $C/mpi_bench --count-per-rank 1Gi --repeat 1 > $OUT/mpi-8g.txt 2>&1
echo "rc=$? $(( ($(date +%s%N) - s) / 1000000 )) ms"; head -c 3000 $OUT/mpi-8g.txt; echo
echo "== mpirun -np 1, one GPU, 8 GiB"
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=0 timeout 50 mpirun -np 1 --bind-to none -x CUDA_VISIBLE_DEVICES \
  $C/mpi_bench --count-per-rank 1Gi --repeat 1 2>&1 | tail -3
echo "rc=$? $(( ($(date +%s%N) - s) / 1000000 )) ms"
echo "== mem_bench 8 GiB, 32 threads"
timeout 110 $C/mem_bench --bytes 8Gi --threads 32 --machine h200x2 --commit $(cat $C/COMMIT) \
  --json $OUT/mem.json 2>&1 | tail -45
