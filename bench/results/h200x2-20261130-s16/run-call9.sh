#!/bin/bash
# Two-H200 host, session 16, call 9: scatter_bench with its three-stream pipeline, round 1
# partitioning, 3 and 2 slots, at 1/8, 1/256 and 1/372 of 8 GiB, and the engine's
# gpu_bench --chunks u64 beside it (GPU 0), for the ratios.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call9.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s)
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=0 timeout 200 $C/scatter_bench --bytes 8Gi --divisors 8,256,372 --slots 3,2 --round1 partition \
  --repeat 3 --json $OUT/scatter.json > $OUT/scatter.txt 2>&1
echo "== scatter_bench 8 GiB rc=$? $(ms $s) ms"; cat $OUT/scatter.txt
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=0 timeout 60 $C/gpu_bench --chunks yes --chunk-bytes 8Gi --gpus 1 --kinds u64 \
  --budgets 1/8,1/256,smallest --repeat 3 --json $OUT/chunks.json > $OUT/chunks.txt 2>&1
echo "== gpu_bench --chunks u64 rc=$? $(ms $s) ms"; grep -E "budget (1/8|1/256|smallest)" $OUT/chunks.txt | grep -v "plan:" | cut -c1-150
echo "elapsed $(( $(date +%s) - T0 )) s"
