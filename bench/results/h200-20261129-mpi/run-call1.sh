#!/bin/bash
# One H200 host: the distributed sort's exchange against Open MPI's all-to-all on 16 real cores
# (1-16 ranks, the CPU engine), and ranks on the GPU engine sharing the one H200. Open MPI is
# Debian's 4.1.4, carried relocated (OPAL_PREFIX) with the binaries built on the VM.
set -x
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
R=$C/ompi
export OPAL_PREFIX=$R LD_LIBRARY_PATH=$R/lib PATH=$R/bin:$PATH
export OMPI_MCA_mca_base_component_show_load_errors=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cat $C/COMMIT; nvidia-smi -L; nproc; free -g; df -h /dev/shm
printf 'devices: cpu\n' > $OUT/cpu.yaml
for r in 1 2 4 8 16; do
  OMP_NUM_THREADS=$((16 / r)) timeout 120 mpirun -np $r --oversubscribe --bind-to none $C/mpi_bench \
    --count-per-rank $((512 * 1024 * 1024 / r)) --config $OUT/cpu.yaml --repeat 3 \
    --json $OUT/mpi-$r.json 2>&1 | grep -v "^$"
done
for r in 1 2 4; do
  OMP_NUM_THREADS=$((16 / r)) timeout 150 mpirun -np $r --oversubscribe --bind-to none $C/mpi_bench \
    --count-per-rank $((2048 * 1024 * 1024 / r)) --repeat 2 --json $OUT/gpu-mpi-$r.json 2>&1 | grep -v "^$"
done
# gpusort-mpi as a user runs it: 2 ranks on the GPU, 4 GiB of u64 each in /dev/shm, verified.
for r in 0 1; do $C/gpusort gen --dtype u64 --dist uniform --count 512Mi --seed $r --out /dev/shm/in.$r.bin --quiet; done
cat /dev/shm/in.0.bin /dev/shm/in.1.bin > /dev/shm/all-in.bin
OMP_NUM_THREADS=8 timeout 150 mpirun -np 2 --bind-to none $C/gpusort-mpi sort '/dev/shm/in.%r.bin' --dtype u64 \
  --out '/dev/shm/out.%r.bin' --json
cat /dev/shm/out.0.bin /dev/shm/out.1.bin > /dev/shm/all-out.bin; rm -f /dev/shm/in.*.bin /dev/shm/out.*.bin
$C/gpusort verify /dev/shm/all-out.bin --dtype u64 --original /dev/shm/all-in.bin
rm -f /dev/shm/all-*.bin
