#!/bin/bash
# Two-H200 host, session 14, call 1 (issue 44): the residency A/B of round 2's sort beside the
# gather kernel, alone on GPU 0: 8 GiB of u64 and f64, one H200, at 1/8, 1/256 and the smallest
# budget, with the defaults, GPUSORT_SORT_SPARE_SMS=32 (9910afc), GPUSORT_GATHER_BLOCKS=8
# GPUSORT_GATHER_THREADS=1024 (30bb405) and both. First the GPU tests of both switches on
# GPU 1, and compute-sanitizer initcheck on the gather tests.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call1.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s); left() { echo $(( 570 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=1 timeout 100 $C/gpu_tests --gtest_filter='*spare*:*gather*:*Gather*' > $OUT/gpu_tests-switches.txt 2>&1
echo "== gpu_tests spare/gather (GPU 1) rc=$? $(ms $s) ms: $(grep -E '^\[  (PASSED|FAILED)' $OUT/gpu_tests-switches.txt | tr '\n' ' ')"
grep -E "Failure|FAILED" $OUT/gpu_tests-switches.txt | head -5
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
if [ -x "$CS" ]; then
  s=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=1 timeout 120 $CS --tool initcheck --error-exitcode 3 $C/gpu_tests \
    --gtest_filter='*gather*:*Gather*' > $OUT/initcheck-gather.txt 2>&1
  echo "== initcheck gather rc=$? $(ms $s) ms"; tail -4 $OUT/initcheck-gather.txt
else echo "no compute-sanitizer"; fi
run() {  # name, then environment assignments
  local name=$1; shift
  [ $(left) -lt 70 ] && { echo "no time for $name"; return; }
  local s=$(date +%s%N)
  env "$@" CUDA_VISIBLE_DEVICES=0 timeout $(( $(left) - 50 )) $C/gpu_bench --chunks yes \
    --chunk-bytes 8Gi --gpus 1 --kinds u64,f64 --repeat 3 > $OUT/$name.txt 2>&1
  echo "== $name ($*) rc=$? $(ms $s) ms"
  grep -E "budget|round 2 (sort|copy in|round) " $OUT/$name.txt | cut -c1-132
}
run default X=0
run spare32 GPUSORT_SORT_SPARE_SMS=32
run gather8x1024 GPUSORT_GATHER_BLOCKS=8 GPUSORT_GATHER_THREADS=1024
run both GPUSORT_SORT_SPARE_SMS=32 GPUSORT_GATHER_BLOCKS=8 GPUSORT_GATHER_THREADS=1024
run default-again X=0
echo "elapsed $(( $(date +%s) - T0 )) s"
