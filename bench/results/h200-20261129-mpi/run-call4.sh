#!/bin/bash
# The exchange with fair grants (every sender an equal share of the free blocks each round) at
# 2, 4, 8 and 16 ranks, CPU engine, 4 GiB in all, default 2 MiB blocks.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
R=$C/ompi
export OPAL_PREFIX=$R LD_LIBRARY_PATH=$R/lib PATH=$R/bin:$PATH PMIX_MCA_pcompress_base_silence_warning=1
export OMPI_MCA_mca_base_component_show_load_errors=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cat $C/COMMIT
printf 'devices: cpu\n' > /tmp/cpu.yaml
for r in 2 4 8 16; do for b in 2Mi 8Mi; do
  OMP_NUM_THREADS=$((16 / r)) timeout 100 mpirun -np $r --oversubscribe --bind-to none $C/mpi_bench \
    --count-per-rank $((512 * 1024 * 1024 / r)) --config /tmp/cpu.yaml --repeat 3 --block-bytes $b \
    --json /tmp/x.json > /dev/null 2>&1; echo "r=$r b=$b $(cat /tmp/x.json)"
done; done
