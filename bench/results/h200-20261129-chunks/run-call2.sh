#!/usr/bin/env bash
# Issue 44, call 2: after dealing into fewer bins. The CLI case of call 1 again (2 GiB f64 in
# /dev/shm, device budget 96 MiB, stable and not), then gpu_bench --chunks at 8 GiB on one GPU.
set -u
mkdir -p /tmp/d && tar xJf .gpucarry/bins.tar.xz -C /tmp/d
D=/tmp/d; C=$(cat $D/COMMIT); echo "commit $C"
$D/gpusort gen --dtype f64 --dist uniform --count 256Mi --out /dev/shm/a.f64 --quiet
printf 'device_memory_budget: 96MiB\n' > /tmp/small.yaml
for st in "" "--stable"; do
  cp /dev/shm/a.f64 /dev/shm/b.f64
  s=$SECONDS
  timeout 100 $D/gpusort sort /dev/shm/b.f64 --dtype f64 --local --config /tmp/small.yaml $st --profile > $OUT/cli$st.txt 2>&1
  echo "== cli $st rc $? in $((SECONDS - s)) s"; grep -E "sorted|round (1|2)" $OUT/cli$st.txt | grep -v "made\|buffer"
  $D/gpusort verify /dev/shm/b.f64 --dtype f64 --original /dev/shm/a.f64 2>&1 | tail -1
done
rm -f /dev/shm/*.f64
s=$SECONDS
timeout 400 $D/gpu_bench --chunks yes --chunk-bytes 8Gi --gpus 1 --repeat 1 --machine h200 \
  --commit $C --json $OUT/chunks-8Gi.json > $OUT/chunks-8Gi.txt 2>&1
echo "== chunks 8Gi rc $? in $((SECONDS - s)) s"
grep -E "budget|round 2 (plan|copy in)|^\|" $OUT/chunks-8Gi.txt
