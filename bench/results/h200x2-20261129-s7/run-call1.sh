#!/bin/bash
# Two-H200 host, call 1 (issues 41, 42, 40/44): where the rows' GPU path spends 19 s
# (rows_bench --profile), why one MPI rank on both GPUs never returns (every thread's stack
# after 25 s), and the time model against the same run's sorts (gpu_bench --model).
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
echo "commit $(cat $C/COMMIT)"; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
nproc; free -g | head -2; df -h /dev/shm | tail -1; command -v gdb || echo "no gdb on the host"
echo "== rows_bench 64 GiB, one H200 (CUDA_VISIBLE_DEVICES=0), profiled"
CUDA_VISIBLE_DEVICES=0 timeout 150 $C/rows_bench --records-bytes 64Gi --columns-bytes 0 \
  --profile yes --cpu no --repeat 1 2>&1
R=$C/ompi
export OPAL_PREFIX=$R LD_LIBRARY_PATH=$R/lib PATH=$R/bin:$PATH PMIX_MCA_pcompress_base_silence_warning=1
export OMPI_MCA_mca_base_component_show_load_errors=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
echo "== MPI one rank, both GPUs, 2 GiB, stacks at 20 s"
GPUSORT_BENCH_STACKS=20 timeout 40 mpirun -np 1 --bind-to none -x GPUSORT_BENCH_STACKS \
  $C/mpi_bench --count-per-rank 256Mi --repeat 1 > $OUT/mpi-one.txt 2>&1; echo rc=$?
grep -v "^ *$" $OUT/mpi-one.txt | head -c 6000; echo
echo "== the same as a singleton (no mpirun), stacks at 20 s"
GPUSORT_BENCH_STACKS=20 timeout 35 $C/mpi_bench --count-per-rank 256Mi --repeat 1 \
  > $OUT/mpi-singleton.txt 2>&1; echo rc=$?; head -c 1500 $OUT/mpi-singleton.txt; echo
echo "== one rank, one GPU (CUDA_VISIBLE_DEVICES=0), 2 GiB"
CUDA_VISIBLE_DEVICES=0 timeout 30 mpirun -np 1 --bind-to none -x CUDA_VISIBLE_DEVICES \
  $C/mpi_bench --count-per-rank 256Mi --repeat 1 2>&1 | tail -2; echo rc=$?
echo "== gdb, if the carried one starts here"
GDB=$(command -v gdb || echo $C/gdbkit/gdb)
LD_LIBRARY_PATH=$C/gdbkit/lib timeout 10 $GDB -nx -batch -ex 'echo gdb-ok\n' 2>&1 | tail -2
timeout 40 mpirun -np 1 --bind-to none $C/mpi_bench --count-per-rank 256Mi --repeat 1 \
  > /tmp/g.txt 2>&1 & sleep 20
P=$(pgrep -f "c/mpi_bench" | head -1); echo "pid $P"
[ -n "$P" ] && LD_LIBRARY_PATH=$C/gdbkit/lib timeout 30 $GDB -nx -batch -p $P \
  -ex 'thread apply all bt 25' > $OUT/mpi-gdb.txt 2>&1; grep -c "^Thread" $OUT/mpi-gdb.txt
wait
echo "== gpu_bench --model, 8 and 32 GiB, 1 and 2 GPUs"
timeout 200 $C/gpu_bench --model yes --chunk-bytes 8Gi,32Gi --repeat 1 --machine h200x2 \
  --commit $(cat $C/COMMIT) --json $OUT/model.json 2>&1 | tail -40
