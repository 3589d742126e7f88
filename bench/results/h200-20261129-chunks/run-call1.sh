#!/usr/bin/env bash
# Issue 44, call 1: where the time goes as the chunks multiply. gpu_bench's chunk sweep (2 GiB
# u64, registered round-1 buffer, budget 1/8 with at least d chunks), round 2's gather by copies
# against the kernel at d=256, and the CLI case (2 GiB f64 in /dev/shm, device budget
# 96 MiB, stable and not), each with its profile.
set -u
mkdir -p /tmp/d && tar xJf .gpucarry/bins.tar.xz -C /tmp/d
D=/tmp/d; C=$(cat $D/COMMIT); echo "commit $C"
s=$SECONDS
timeout 200 $D/gpu_bench --sizes 256Mi --cpu-count 16Mi --repeat 1 --sweep-chunks 32,64,128,256 \
  --machine h200 --commit $C --json $OUT/sweep.json > $OUT/sweep.txt 2>&1
echo "== sweep rc $? in $((SECONDS - s)) s"; grep -E "gpusort|profiled|round 2 (copy|sort|gather)|round 1 (copy|sort)" $OUT/sweep.txt | head -80
$D/gpusort gen --dtype f64 --dist uniform --count 256Mi --out /dev/shm/a.f64 --quiet
printf 'device_memory_budget: 96MiB\n' > /tmp/small.yaml
for st in "" "--stable"; do
  cp /dev/shm/a.f64 /dev/shm/b.f64
  s=$SECONDS
  timeout 100 $D/gpusort sort /dev/shm/b.f64 --dtype f64 --local --config /tmp/small.yaml $st --profile --json > $OUT/cli$st.txt 2>&1
  echo "== cli $st rc $? in $((SECONDS - s)) s"; head -c 3000 $OUT/cli$st.txt; echo
done
