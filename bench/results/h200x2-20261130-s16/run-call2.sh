#!/bin/bash
# Two-H200 host, session 16, call 2: beside_bench's green-context cases again, now with the
# entry points of CUDA 13.0 (call 1 asked for 12.4's and found none); gpu_bench --model 8Gi with
# the busy copies' clock started after the sorts are issued.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call2.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s); left() { echo $(( 330 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=0 timeout 150 $C/beside_bench --json $OUT/beside.json > $OUT/beside.txt 2>&1
echo "== beside_bench (GPU 0) rc=$? $(ms $s) ms"; cat $OUT/beside.txt | cut -c1-150
s=$(date +%s%N)
timeout $(( $(left) - 5 )) $C/gpu_bench --model yes --chunk-bytes 8Gi --json $OUT/model.json > $OUT/model.txt 2>&1
echo "== gpu_bench --model 8Gi rc=$? $(ms $s) ms"; cut -c1-150 $OUT/model.txt | tail -60
echo "elapsed $(( $(date +%s) - T0 )) s"
