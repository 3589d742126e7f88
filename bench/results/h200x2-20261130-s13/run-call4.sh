#!/bin/bash
# Two-H200 host, session 13, call 4 (issue 44): round 2's slices built eight final chunks at a
# time (a run's cuts of eight neighbours share a cache line) against d2390fb's one at a time,
# on the host's cores (plan_bench, interleaved); then 8 GiB u64 and f64 at 1/8, 1/256 and the
# smallest budget on one H200 with the new build.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call4.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT), old $(cat $C/old/COMMIT)"
T0=$(date +%s); left() { echo $(( 250 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
for b in new old new old; do
  bin=$C/plan_bench; [ $b = old ] && bin=$C/old/plan_bench
  s=$(date +%s%N)
  timeout 40 $bin --keys 1Gi --capacities 786432,520193 --repeat 3 > $OUT/plan-$b.txt 2>&1
  echo "== plan_bench $b rc=$? $(ms $s) ms"
  grep capacity $OUT/plan-$b.txt | grep -v only | sed 's/(.*slices:/:/'
done
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=0 timeout $(( $(left) - 10 )) $C/gpu_bench --chunks yes --chunk-bytes 8Gi --gpus 1 \
  --kinds u64,f64 --budgets 1/8,1/256,smallest --repeat 3 > $OUT/chunks.txt 2>&1
echo "== gpu_bench --chunks rc=$? $(ms $s) ms"
grep -E "budget|round 2 plan" $OUT/chunks.txt | cut -c1-130
echo "elapsed $(( $(date +%s) - T0 )) s"
