#!/bin/bash
# One-H200 host, session 25/26, call 1, the bundle in dist/COMMIT (4b4cd4c: cuda_device.cpp split
# into round_state/round_load/round_sort/round_store, a plain store's trace marks):
# (1) gpu-check's tests: every GPU test program, the executor's engine suites at the tiny budget
#     in four shards, the free-memory tests alone;
# (2) issue 44's chunks targets at 8 GiB, u64 and f64.stable, at 1/8, 1/256 and the smallest
#     budget, --repeat 3 (s23's figures at 44f00cf to compare);
# (3) the trace: `gpusort sort --local --profile` of a 1 GiB u64 file fitting (plain stores) and at
#     a 32 MiB device budget (out of core), GPUSORT_PROFILE_TRACE set; each trace's lines with
#     and without host marks counted, the first few kept.
D=$PWD/dist; mkdir -p $D; tar xJf .gpucarry/dist.tar.xz -C $D
FINAL=$OUT; OUT=/tmp/w1; mkdir -p $OUT
trap 'tar czf $FINAL/call1.tar.gz -C $OUT .' EXIT
echo "commit $(cat $D/COMMIT)"
T0=$(date +%s)
GPUSORT_BIN=$D timeout 330 scripts/gpu-check.sh $OUT/check --jobs 4 --skip-sanitizer \
  --skip-bench > $OUT/check.log 2>&1
echo "== gpu-check tests rc=$? at $(( $(date +%s) - T0 )) s"
tail -22 $OUT/check.log
timeout 150 $D/bench/gpu_bench --chunks yes --gpus 1 --repeat 3 --chunk-bytes 8Gi \
  --kinds u64,f64.stable --budgets 1/8,1/256,smallest --json $OUT/chunks-8G.json \
  > $OUT/chunks-8G.txt 2>&1
echo "== chunks-8G rc=$? at $(( $(date +%s) - T0 )) s"
grep -E '^\| chunks|median' $OUT/chunks-8G.txt | cut -c1-160
F=/dev/shm/trace-keys.u64
timeout 60 $D/bin/gpusort gen --dtype u64 --dist uniform --count 128Mi --out $F > $OUT/gen.txt 2>&1
echo "== gen rc=$?"; cat $OUT/gen.txt | tail -2
printf 'device_memory_budget: 32Mi\n' > $OUT/small.yaml
for m in fit small; do
  cfg=(); [ $m = small ] && cfg=(--config $OUT/small.yaml)
  GPUSORT_PROFILE_TRACE=$OUT/trace-$m.txt timeout 60 $D/bin/gpusort sort --local --profile \
    --dtype u64 "${cfg[@]}" --out /dev/shm/trace-out.u64 $F > $OUT/sort-$m.txt 2>&1
  echo "== sort $m rc=$? lines $(wc -l < $OUT/trace-$m.txt)" \
    "with host $(grep -c ' host ' $OUT/trace-$m.txt)" \
    "without $(grep -vc ' host ' $OUT/trace-$m.txt)"
  head -3 $OUT/trace-$m.txt | cut -c1-300
  grep ' host ' $OUT/trace-$m.txt | head -2 | cut -c1-300
  timeout 60 $D/bin/gpusort verify --dtype u64 --original $F /dev/shm/trace-out.u64 2>&1 | tail -1
  rm -f /dev/shm/trace-out.u64
done
rm -f $F
echo "elapsed $(( $(date +%s) - T0 )) s"
