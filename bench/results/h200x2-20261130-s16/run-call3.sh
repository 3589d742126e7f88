#!/bin/bash
# Two-H200 host, session 16, call 3: gpu_bench --model 8Gi, whose one-way copies of both GPUs
# now also run beside peer fetches (copy engines, then a gather kernel): what slows a fitting
# job's copy-out to 51 GB/s a GPU.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call3.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s)
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
for i in 1 2; do
  s=$(date +%s%N)
  timeout 150 $C/gpu_bench --model yes --chunk-bytes 8Gi --json $OUT/model$i.json > $OUT/model$i.txt 2>&1
  echo "== gpu_bench --model 8Gi ($i) rc=$? $(ms $s) ms"; head -12 $OUT/model$i.txt | cut -c1-160
  grep -E "^\| multi" $OUT/model$i.txt
done
echo "elapsed $(( $(date +%s) - T0 )) s"
