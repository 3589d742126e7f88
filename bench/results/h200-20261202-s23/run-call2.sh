#!/bin/bash
# One-H200 host, session 23, call 2, the bundle in dist/COMMIT: issue 44's "chunks." targets
# with HEAD's code (dealt cuts, sample behind, splitters selected, logging compiled apart):
# (1) gpu_bench --chunks, 8 GiB, every kind, at 1/8, 1/32 (d in the tens, g > 1: where the dealt
#     cuts replace most searches), 1/256 and the smallest budget, --repeat 3;
# (2) the same at 1/32 with GPUSORT_DEALT_CUTS=0 (every run searched), u64 and f64.stable;
# (3) gpu_bench --chunks, 32 GiB u64 and f64.stable at 1/8 and 1/256, --repeat 3.
D=$PWD/dist; mkdir -p $D; tar xJf .gpucarry/dist.tar.xz -C $D
FINAL=$OUT; OUT=/tmp/w2; mkdir -p $OUT
trap 'tar czf $FINAL/call2.tar.gz -C $OUT .' EXIT
echo "commit $(cat $D/COMMIT)"
T0=$(date +%s)
run() {  # name timeout args...
  local name=$1 t=$2; shift 2
  timeout $t $D/bench/gpu_bench --chunks yes --gpus 1 --repeat 3 "$@" \
    --json $OUT/$name.json > $OUT/$name.txt 2>&1
  echo "== $name rc=$? at $(( $(date +%s) - T0 )) s"
  grep -E '^\| chunks|median' $OUT/$name.txt | cut -c1-160
}
run chunks-8G 260 --chunk-bytes 8Gi --kinds u64,u64.stable,f64,f64.stable \
  --budgets 1/8,1/32,1/256,smallest
GPUSORT_DEALT_CUTS=0 run chunks-8G-searched 90 --chunk-bytes 8Gi --kinds u64,f64.stable \
  --budgets 1/32
run chunks-32G 200 --chunk-bytes 32Gi --kinds u64,f64.stable --budgets 1/8,1/256
echo "elapsed $(( $(date +%s) - T0 )) s"
