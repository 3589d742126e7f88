#!/bin/bash
# One-H200 host, session 26, call 2, the bundle of call 1 (4b4cd4c): the trace of scattering
# stores, whose lines carry the storer's host marks ("host" and four times) while plain stores'
# lines carry none: gpu_bench --chunks, 8 GiB u64 at 1/256 (d = 1594, scattered by default),
# traced; then the 1 GiB u64 file of call 1 at a 32 MiB device budget with GPUSORT_SCATTER=on.
D=$PWD/dist; mkdir -p $D; tar xJf .gpucarry/dist.tar.xz -C $D
FINAL=$OUT; OUT=/tmp/w2; mkdir -p $OUT
trap 'tar czf $FINAL/call2.tar.gz -C $OUT .' EXIT
echo "commit $(cat $D/COMMIT)"
T0=$(date +%s)
count() {  # trace file
  echo "lines $(wc -l < $1) with host $(grep -c ' host ' $1) without $(grep -vc ' host ' $1)"
  for r in 1 2; do
    echo "  round $r: $(grep -c " round $r chunk" $1) lines, $(grep " round $r chunk" $1 |
      grep -c ' host ') with host"
  done
  grep ' host ' $1 | head -2 | cut -c1-300
  grep -v ' host ' $1 | head -2 | cut -c1-300
}
GPUSORT_PROFILE_TRACE=$OUT/trace-bench.txt timeout 90 $D/bench/gpu_bench --chunks yes --gpus 1 \
  --repeat 1 --chunk-bytes 8Gi --kinds u64 --budgets 1/256 --json $OUT/chunks.json \
  > $OUT/chunks.txt 2>&1
echo "== gpu_bench 1/256 traced rc=$? at $(( $(date +%s) - T0 )) s"
grep -E 'median' $OUT/chunks.txt | cut -c1-160
count $OUT/trace-bench.txt
gzip $OUT/trace-bench.txt
F=/dev/shm/trace-keys.u64
timeout 60 $D/bin/gpusort gen --dtype u64 --dist uniform --count 128Mi --out $F > /dev/null
printf 'device_memory_budget: 32Mi\n' > $OUT/small.yaml
GPUSORT_SCATTER=on GPUSORT_PROFILE_TRACE=$OUT/trace-file.txt timeout 60 $D/bin/gpusort sort \
  --local --profile --dtype u64 --config $OUT/small.yaml --out /dev/shm/trace-out.u64 $F \
  > $OUT/sort-file.txt 2>&1
echo "== file sort, scatter on, rc=$?"
tail -1 $OUT/sort-file.txt
count $OUT/trace-file.txt
timeout 60 $D/bin/gpusort verify --dtype u64 --original $F /dev/shm/trace-out.u64 2>&1 | tail -1
rm -f $F /dev/shm/trace-out.u64
echo "elapsed $(( $(date +%s) - T0 )) s"
