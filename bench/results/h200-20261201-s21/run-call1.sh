#!/bin/bash
# One-H200 host, session 21, call 1, the bundle in dist/COMMIT:
# (1) s20's initcheck findings: compute-sanitizer initcheck on a four-line probe (3 slices from
#     pinned memory copied into device memory by one cudaMemcpyBatchAsync, or a cudaMemcpyAsync
#     each, then a kernel reads them) and gpu-check's initcheck set with GPUSORT_COPY_BATCH=1
#     (the default) and 0 (a copy call a slice), side by side;
#     (probes/*.cu, built here with nvcc -O2 -arch=sm_90 -cudart static);
# (1b) first, alone: copies spanning two adjacent registrations (probes/span_probe.cu) and
#     copies beside a registration on another thread (probes/reg_probe.cu), for registering
#     the round-1 buffer in slices behind round 1;
# (2) beside them, gpu_tests unsanitized (a87dc39's setup fix for gpu_gather);
# (3) alone afterwards, `gpusort sort --local` of 8 GiB u64 from /dev/shm into a new file at the
#     defaults (512 KiB read blocks, 1 MiB write blocks, writes behind): 32 MiB, the smallest
#     budget (22 MiB) and 1 GiB, with the 1 MiB read blocks as the A/B at the smallest.
D=$PWD/dist; mkdir -p $D; tar xJf .gpucarry/dist.tar.xz -C $D
FINAL=$OUT; OUT=/tmp/w1; mkdir -p $OUT
trap 'tar czf $FINAL/call1.tar.gz -C $OUT .' EXIT
echo "commit $(cat $D/COMMIT)"
T0=$(date +%s)
for p in span_probe reg_probe; do
  timeout 60 .gpucarry/$p > $OUT/$p.txt 2>&1; echo "== $p rc=$?"; cat $OUT/$p.txt
done
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
for m in batch single; do
  $CS --tool initcheck --print-limit 4 .gpucarry/batch_probe $m > $OUT/probe-$m.txt 2>&1
  echo "probe $m rc=$?: $(grep -E 'sum|ERROR SUMMARY' $OUT/probe-$m.txt | tr '\n' ' ')"
done
part() {  # name timeout env... -- args...
  local name=$1 t=$2; shift 2
  local envs=(); while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  local s=$(date +%s)
  OMP_NUM_THREADS=4 timeout $t env "${envs[@]}" GPUSORT_BIN=$D scripts/gpu-check.sh $OUT/$name "$@" \
    > $OUT/$name.log 2>&1
  echo "== $name rc=$? $(( $(date +%s) - s )) s"
}
part init-batch 300 GPUSORT_COPY_BATCH=1 -- --skip-tests --skip-bench --tools initcheck > $OUT/r1.log &
part init-single 300 GPUSORT_COPY_BATCH=0 -- --skip-tests --skip-bench --tools initcheck > $OUT/r2.log &
part gputests 300 X=1 -- --only gpu --skip-sanitizer --skip-bench > $OUT/r3.log &
wait; cat $OUT/r1.log $OUT/r2.log $OUT/r3.log
for n in init-batch init-single; do
  echo "-- $n"; cat $OUT/$n/sanitizer_summary.txt
  for f in $OUT/$n/sanitizer_initcheck_*.txt; do
    echo "$(basename $f): $(grep -c 'Uninitialized' $f) printed; kernels:"
    grep -E '^=+ +at ' $f | sed 's/(gpusort::.*//; s/^=* *at //' | sort | uniq -c | head
  done
done
grep -hE '^\[  (PASSED|FAILED)|SKIPPED \]|tests ran' $OUT/gputests/*.txt
echo "checks done at $(( $(date +%s) - T0 )) s"
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
S=/dev/shm/s21; mkdir -p $S
$D/bin/gpusort gen --dtype u64 --dist uniform --count 1Gi --seed 9 --out $S/u.bin > /dev/null
cli() {  # name budget verify env...
  local name=$1 b=$2 v=$3; shift 3
  printf 'devices: [0]\ndevice_memory_budget: %s\nlog_level: warn\n' $b > $S/c.yaml
  local s=$(date +%s%N)
  env "$@" timeout 60 $D/bin/gpusort sort $S/u.bin --dtype u64 --out $S/out.bin --local \
    --config $S/c.yaml --json --profile > $OUT/cli-$name.txt 2>&1
  local rc=$? w=$(ms $s)
  echo "== cli $name ($*) rc=$rc, $w ms: $(grep -o '"seconds":[0-9.]*' $OUT/cli-$name.txt | head -1)"
  [ $v = 1 ] && $D/bin/gpusort verify $S/out.bin --dtype u64 2>&1 | tail -1
  rm -f $S/out.bin
}
for k in 1 2 3; do
  cli b32M-$k 33554432 $(( k == 1 )) X=1
  cli bsmall-$k 23068672 $(( k == 1 )) X=1
  cli bsmall-m1024-$k 23068672 0 GPUSORT_MOVER_MIN_BLOCK=1024
  cli b1G-$k 1073741824 $(( k == 1 )) X=1
done
rm -rf $S
echo "elapsed $(( $(date +%s) - T0 )) s"
