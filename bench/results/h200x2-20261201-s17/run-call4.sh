#!/bin/bash
# Two-H200 host, session 17, call 4: the scattered rounds with their bucket bounds in device
# memory. gpu_bench --chunks 8 GiB one H200 (GPU 0): u64 with GPUSORT_SCATTER=off and auto,
# then every other kind (auto); both H200: u64 and f64, off and auto; 32 GiB one H200 u64 at
# 1/8 and 1/256 (auto).
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call4.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s)
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
bench() {  # name gpus bytes kinds budgets timeout env...
  local name=$1 g=$2 b=$3 kinds=$4 budgets=$5 t=$6; shift 6
  local s=$(date +%s%N) vis=0; [ $g = 2 ] && vis=0,1
  env "$@" CUDA_VISIBLE_DEVICES=$vis timeout $t $C/gpu_bench --chunks yes --chunk-bytes $b --gpus $g \
    --kinds $kinds --budgets $budgets --repeat 3 \
    --json $OUT/chunks-$name.json > $OUT/chunks-$name.txt 2>&1
  echo "== $name ($*) rc=$? $(ms $s) ms"
  grep -E "budget (1/8|1/256|smallest)" $OUT/chunks-$name.txt | sed 's/.*GiB //' | cut -c1-110
}
bench g1-u64-auto 1 8Gi u64 1/8,1/256,smallest 40 GPUSORT_SCATTER=auto
bench g1-u64-off 1 8Gi u64 1/8,1/256,smallest 40 GPUSORT_SCATTER=off
bench g1-rest-auto 1 8Gi u64.stable,f64,f64.stable 1/8,1/256,smallest 90 GPUSORT_SCATTER=auto
bench g2-auto 2 8Gi u64,f64 1/8,1/256,smallest 50 GPUSORT_SCATTER=auto
bench g2-off 2 8Gi u64,f64 1/8,1/256,smallest 50 GPUSORT_SCATTER=off
bench g1-32Gi-auto 1 32Gi u64 1/8,1/256 90 GPUSORT_SCATTER=auto
echo "elapsed $(( $(date +%s) - T0 )) s"
