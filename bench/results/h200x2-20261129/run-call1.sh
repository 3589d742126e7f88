#!/bin/bash
# Two-H200 host, call 1: issue 39's 200 GiB in-place sort (the lean path, pinned), and issue
# 41's two ranks with one H200 each against one process on both (32 GiB of u64 in all).
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
cat $C/COMMIT; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; nproc
free -g | head -2; df -h /dev/shm | tail -1
echo "== lean 200 GiB (issue 39)"
timeout 290 $C/gpu_bench --lean yes --lean-bytes 200Gi --lean-memory pinned --repeat 1 2>&1 | tail -25
free -g | head -2
R=$C/ompi
export OPAL_PREFIX=$R LD_LIBRARY_PATH=$R/lib PATH=$R/bin:$PATH PMIX_MCA_pcompress_base_silence_warning=1
export OMPI_MCA_mca_base_component_show_load_errors=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
printf '#!/bin/bash\nexport CUDA_VISIBLE_DEVICES=$OMPI_COMM_WORLD_LOCAL_RANK\nexec "$@"\n' > $C/one_gpu.sh
chmod +x $C/one_gpu.sh
echo "== one process, both GPUs, 32 GiB (issue 41)"
timeout 100 mpirun -np 1 --bind-to none $C/mpi_bench --count-per-rank 4Gi --repeat 2 \
  --json /tmp/one.json > /tmp/one.txt 2>&1; tail -3 /tmp/one.txt; cat /tmp/one.json; echo
echo "== two ranks, one GPU each, 16 GiB each (issue 41)"
timeout 150 mpirun -np 2 --bind-to none $C/one_gpu.sh $C/mpi_bench --count-per-rank 2Gi \
  --repeat 2 --json /tmp/two.json > /tmp/two.txt 2>&1; tail -3 /tmp/two.txt; cat /tmp/two.json; echo
