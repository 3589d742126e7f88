#!/bin/bash
# The exchange's block size against the transport at 4 and 16 ranks (CPU engine, 4 GiB), and
# the GPU ranks' two ways of ordering the received runs (engine sort or CPU merge), 16 GiB.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
R=$C/ompi
export OPAL_PREFIX=$R LD_LIBRARY_PATH=$R/lib PATH=$R/bin:$PATH PMIX_MCA_pcompress_base_silence_warning=1
export OMPI_MCA_mca_base_component_show_load_errors=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cat $C/COMMIT
printf 'devices: cpu\n' > $OUT/cpu.yaml
for r in 2 4 16; do for b in 2Mi 8Mi 32Mi; do
  OMP_NUM_THREADS=$((16 / r)) timeout 100 mpirun -np $r --oversubscribe --bind-to none $C/mpi_bench \
    --count-per-rank $((512 * 1024 * 1024 / r)) --config $OUT/cpu.yaml --repeat 3 --block-bytes $b \
    --json $OUT/cpu-r$r-b$b.json > /dev/null 2>&1; echo "r=$r b=$b $(cat $OUT/cpu-r$r-b$b.json)"
done; done
for m in cpu engine; do
  OMP_NUM_THREADS=8 timeout 120 mpirun -np 2 --oversubscribe --bind-to none $C/mpi_bench \
    --count-per-rank $((1024 * 1024 * 1024)) --repeat 2 --merge $m --block-bytes 8Mi \
    --json $OUT/gpu-r2-$m.json > /dev/null 2>&1; echo "gpu merge=$m $(cat $OUT/gpu-r2-$m.json)"
done
