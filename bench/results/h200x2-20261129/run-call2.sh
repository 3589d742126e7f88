#!/bin/bash
# Two-H200 host, call 2: issue 42's rows on one H200 (records in place from host memory against
# the best CPU sorts, two u64 columns against one u128; the CLI on a file of records in
# /dev/shm; the Python client against NumPy), the rows GPU test on both GPUs, and issue 41's
# one process on both GPUs against two ranks with one GPU each at 8 GiB.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
cat $C/COMMIT; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader; nproc
echo "== rows GPU test, both GPUs"
timeout 60 $C/gpu_executor_tests --gtest_filter='*Rows*' 2>&1 | tail -2
echo "== rows_bench 64 GiB, one H200"
CUDA_VISIBLE_DEVICES=0 timeout 200 $C/rows_bench --records-bytes 64Gi --columns-bytes 8Gi \
  --repeat 1 2>&1
echo "== CLI: 32 GiB of gensort records in /dev/shm, in place, one H200"
$C/gpusort gen --records --count 343597383 --out /dev/shm/r.bin
cp /dev/shm/r.bin /dev/shm/orig.bin 2>/dev/null
CUDA_VISIBLE_DEVICES=0 timeout 120 $C/gpusort sort /dev/shm/r.bin --local --record-bytes 100 \
  --key 0:10:bytes --json --no-sync 2>&1 | tail -2
timeout 60 $C/gpusort verify /dev/shm/r.bin --records --original /dev/shm/orig.bin 2>&1 | tail -1
rm -f /dev/shm/r.bin /dev/shm/orig.bin
echo "== Python rows against NumPy, one H200"
printf 'socket: /tmp/gs.sock\n' > /tmp/gs.yaml
CUDA_VISIBLE_DEVICES=0 $C/gpusortd --config /tmp/gs.yaml > /tmp/gs.log 2>&1 &
for i in $(seq 50); do [ -S /tmp/gs.sock ] && break; sleep 0.2; done
PY=$(for p in python3 /usr/bin/python3 /opt/*/bin/python3 /opt/*/.venv/bin/python3; do
  $p -c 'import numpy, google.protobuf' 2>/dev/null && echo $p && break; done)
echo "python: $PY $($PY -c 'import numpy; print(numpy.__version__)')"
PYTHONPATH=$PWD/python timeout 150 $PY bench/rows_python_bench.py --socket /tmp/gs.sock \
  --rows 4M,32M --repeat 3 --commit "$(cat $C/COMMIT)" --machine h200x2 --out /tmp/rp.json 2>&1 | tail -12
kill %1 2>/dev/null; wait 2>/dev/null
R=$C/ompi
export OPAL_PREFIX=$R LD_LIBRARY_PATH=$R/lib PATH=$R/bin:$PATH PMIX_MCA_pcompress_base_silence_warning=1
export OMPI_MCA_mca_base_component_show_load_errors=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
printf '#!/bin/bash\nexport CUDA_VISIBLE_DEVICES=$OMPI_COMM_WORLD_LOCAL_RANK\nexec "$@"\n' > $C/one_gpu.sh
chmod +x $C/one_gpu.sh
echo "== MPI one process, both GPUs, 8 GiB"
timeout 60 mpirun -np 1 --bind-to none $C/mpi_bench --count-per-rank 1Gi --repeat 2 \
  --json /tmp/one.json > /tmp/one.txt 2>&1; echo rc=$?; tail -3 /tmp/one.txt; cat /tmp/one.json; echo
echo "== MPI two ranks, one GPU each, 4 GiB each"
timeout 60 mpirun -np 2 --bind-to none $C/one_gpu.sh $C/mpi_bench --count-per-rank 512Mi \
  --repeat 2 --json /tmp/two.json > /tmp/two.txt 2>&1; echo rc=$?; tail -3 /tmp/two.txt; cat /tmp/two.json; echo
