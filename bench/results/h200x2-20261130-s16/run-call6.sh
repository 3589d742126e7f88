#!/bin/bash
# Two-H200 host, session 16, call 6: scatter_bench again (round 1 ordering each chunk by a
# sort or by a partition; the sample sorted on every core) on GPU 0: a small sanity run, then
# 8 GiB u64 at budgets 1/8, 1/256 and 1/372 (22 MiB, the engine's smallest for 8 GiB); then the
# engine itself on GPU 0 (gpu_bench --chunks, u64, 1/8, 1/256, smallest) for the ratios.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call6.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s); left() { echo $(( 400 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=0 timeout 60 $C/scatter_bench --bytes 64Mi --divisors 8,64 --repeat 1 > $OUT/scatter-small.txt 2>&1
echo "== scatter_bench 64 MiB rc=$? $(ms $s) ms"; cat $OUT/scatter-small.txt
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=0 timeout 250 $C/scatter_bench --bytes 8Gi --divisors 8,256,372 --repeat 3 --json $OUT/scatter.json > $OUT/scatter.txt 2>&1
echo "== scatter_bench 8 GiB rc=$? $(ms $s) ms"; cat $OUT/scatter.txt
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=0 timeout $(( $(left) - 3 )) $C/gpu_bench --chunks yes --chunk-bytes 8Gi --gpus 1 --kinds u64 \
  --budgets 1/8,1/256,smallest --repeat 3 --json $OUT/chunks.json > $OUT/chunks.txt 2>&1
echo "== gpu_bench --chunks u64 rc=$? $(ms $s) ms"; grep -E "budget (1/8|1/256|smallest)" $OUT/chunks.txt | grep -v "plan:" | cut -c1-150
echo "elapsed $(( $(date +%s) - T0 )) s"
