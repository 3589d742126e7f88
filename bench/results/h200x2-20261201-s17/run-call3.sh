#!/bin/bash
# Two-H200 host, session 17, call 3: why the scattered rounds' round 1 sorts at half speed
# (call 2: u64 at 1/256 sort stage 0.347 s busy against DSPS's 0.163 s). One H200 (GPU 0),
# 8 GiB u64 at 1/8, 1/256 and the smallest budget, the scatter kernel's grid in turn (default:
# 32 blocks of 256 threads a warp a slice), and DSPS; then every kind with the default (lanes
# for the smallest budget's small chunks, new in 943f13e).
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call3.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s)
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
bench() {  # name kinds timeout env...
  local name=$1 kinds=$2 t=$3; shift 3
  local s=$(date +%s%N)
  env "$@" CUDA_VISIBLE_DEVICES=0 timeout $t $C/gpu_bench --chunks yes --chunk-bytes 8Gi --gpus 1 \
    --kinds $kinds --budgets 1/8,1/256,smallest --repeat 3 \
    --json $OUT/chunks-$name.json > $OUT/chunks-$name.txt 2>&1
  echo "== $name ($*) rc=$? $(ms $s) ms"
  grep -E "budget (1/256|smallest)|round 1 (sort|copy out|round)" $OUT/chunks-$name.txt | cut -c1-120
}
bench default u64 40 GPUSORT_SCATTER=auto
bench dsps u64 40 GPUSORT_SCATTER=off
bench blocks8 u64 40 GPUSORT_GATHER_BLOCKS=8
bench blocks8x1024 u64 40 GPUSORT_GATHER_BLOCKS=8 GPUSORT_GATHER_THREADS=1024
bench blocks132 u64 40 GPUSORT_GATHER_BLOCKS=132
bench blockkernel u64 40 GPUSORT_GATHER_WARPS=0
bench lanes1 u64 40 GPUSORT_SORT_LANES=1
bench all u64.stable,f64,f64.stable 110 GPUSORT_SCATTER=auto
echo "elapsed $(( $(date +%s) - T0 )) s"
