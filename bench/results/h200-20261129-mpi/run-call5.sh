#!/bin/bash
# Fair grants again, three runs each at 4, 8 and 16 ranks (CPU engine, 4 GiB, 2 MiB blocks):
# call 4's 8-rank 0.56 came with an unusually fast plain all-to-all.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
R=$C/ompi
export OPAL_PREFIX=$R LD_LIBRARY_PATH=$R/lib PATH=$R/bin:$PATH PMIX_MCA_pcompress_base_silence_warning=1
export OMPI_MCA_mca_base_component_show_load_errors=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cat $C/COMMIT
printf 'devices: cpu\n' > /tmp/cpu.yaml
for r in 4 8 16; do for i in 1 2 3; do
  OMP_NUM_THREADS=$((16 / r)) timeout 100 mpirun -np $r --oversubscribe --bind-to none $C/mpi_bench \
    --count-per-rank $((512 * 1024 * 1024 / r)) --config /tmp/cpu.yaml --repeat 3 \
    --json /tmp/x.json > /dev/null 2>&1; echo "r=$r run=$i $(cat /tmp/x.json)"
done; done
