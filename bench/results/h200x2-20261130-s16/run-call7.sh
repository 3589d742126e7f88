#!/bin/bash
# Two-H200 host, session 16, call 7: beside_bench (now with the copy engine copying in beside
# the kernel writing to host memory) on GPU 0, then scatter_bench at 8 GiB (buckets planned
# 1.25 below their regions) and the engine's gpu_bench --chunks, u64, for the ratios.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call7.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s); left() { echo $(( 400 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=0 timeout 100 $C/beside_bench --json $OUT/beside.json > $OUT/beside.txt 2>&1
echo "== beside_bench (GPU 0) rc=$? $(ms $s) ms"; grep -E "writing|copy engine in|alone" $OUT/beside.txt | cut -c1-150
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=0 timeout 250 $C/scatter_bench --bytes 8Gi --divisors 8,256,372 --repeat 3 --json $OUT/scatter.json > $OUT/scatter.txt 2>&1
echo "== scatter_bench 8 GiB rc=$? $(ms $s) ms"; cat $OUT/scatter.txt
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=0 timeout $(( $(left) - 3 )) $C/gpu_bench --chunks yes --chunk-bytes 8Gi --gpus 1 --kinds u64 \
  --budgets 1/8,1/256,smallest --repeat 3 --json $OUT/chunks.json > $OUT/chunks.txt 2>&1
echo "== gpu_bench --chunks u64 rc=$? $(ms $s) ms"; grep -E "budget (1/8|1/256|smallest)" $OUT/chunks.txt | grep -v "plan:" | cut -c1-150
echo "elapsed $(( $(date +%s) - T0 )) s"
