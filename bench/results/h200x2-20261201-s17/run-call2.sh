#!/bin/bash
# Two-H200 host, session 17, call 2: the scattered rounds against DSPS, benchmarks alone (call
# 1's ran beside four test shards, whose host threads slowed every pipeline). gpu_bench --chunks
# 8 GiB: one H200 (GPU 0), every kind, 1/8, 1/256, smallest, GPUSORT_SCATTER=off then unset
# (auto: scattered from 256 chunks); then both H200, u64 and f64, the same budgets, both modes.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call2.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s)
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
bench() {  # gpus kinds mode timeout
  local s=$(date +%s%N)
  if [ $3 = off ]; then export GPUSORT_SCATTER=off; else unset GPUSORT_SCATTER; fi
  local vis=0; [ $1 = 2 ] && vis=0,1
  CUDA_VISIBLE_DEVICES=$vis timeout $4 $C/gpu_bench --chunks yes --chunk-bytes 8Gi --gpus $1 \
    --kinds $2 --budgets 1/8,1/256,smallest --repeat 3 \
    --json $OUT/chunks-g$1-$3.json > $OUT/chunks-g$1-$3.txt 2>&1
  echo "== gpu_bench --chunks 8Gi on $1 H200, scatter $3 rc=$? $(ms $s) ms"
  grep -E "budget (1/8|1/256|smallest)" $OUT/chunks-g$1-$3.txt | grep -v "plan:" | cut -c1-150
  unset GPUSORT_SCATTER
}
bench 1 u64,u64.stable,f64,f64.stable off 130
bench 1 u64,u64.stable,f64,f64.stable auto 130
bench 2 u64,f64 off 80
bench 2 u64,f64 auto 80
echo "elapsed $(( $(date +%s) - T0 )) s"
