#!/bin/bash
# One-H200 host, session 20, call 1 (issue 44), the whole bundle (scripts/bundle.sh) at the commit
# in dist/COMMIT: the GPU test of s19's file-input round-1 size; gpu_bench 32 GiB, u64,
# u64.stable, f64, f64.stable at 1/8 and 1/256 (the 32 GiB targets on one H200); then
# e2e_bench at 8 GiB and a 1/256 budget (the CLI and the daemon as a user runs them, beside the
# engine on pinned memory, with peak RSS) in the time left.
D=$PWD/dist; mkdir -p $D; tar xJf .gpucarry/dist.tar.xz -C $D
FINAL=$OUT; OUT=/tmp/w1; mkdir -p $OUT
trap 'tar czf $FINAL/call1.tar.gz -C $OUT .' EXIT
echo "commit $(cat $D/COMMIT)"; df -h /dev/shm | tail -1; free -g | head -2; nproc
T0=$(date +%s); left() { echo $(( 570 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
s=$(date +%s%N)
timeout 60 $D/tests/gpu/gpu_executor_tests --gtest_filter='*AFileInputRunsDspsWithARoundOneBufferOfItsSize*' > $OUT/exec-fileinput.txt 2>&1
echo "== file-input test rc=$? $(ms $s) ms: $(grep -E '^\[  (PASSED|FAILED)|SKIPPED' $OUT/exec-fileinput.txt | tr '\n' ' ')"
grep -m3 -A8 "Failure$" $OUT/exec-fileinput.txt
s=$(date +%s%N)
timeout 340 $D/bench/gpu_bench --chunks yes --chunk-bytes 32Gi --gpus 1 \
  --kinds u64,u64.stable,f64,f64.stable --budgets 1/8,1/256 --repeat 3 \
  --json $OUT/chunks-32G.json > $OUT/chunks-32G.txt 2>&1
echo "== gpu_bench 32 GiB rc=$? $(ms $s) ms"
grep -E "budget (1/8|1/256)" $OUT/chunks-32G.txt | cut -c1-150
l=$(( $(left) - 10 )); echo "left $l s for e2e_bench"
s=$(date +%s%N)
timeout $l $D/bench/e2e_bench --bin $D/bin --dir /dev/shm --bytes 8Gi --cpu-bytes 64Mi --budget 1/256 \
  --skip-fit --repeat 2 --machine h200 --commit $(cat $D/COMMIT) --json $OUT/e2e-8G-1_256.json \
  > $OUT/e2e-8G-1_256.txt 2>&1
echo "== e2e_bench rc=$? $(ms $s) ms"; tail -25 $OUT/e2e-8G-1_256.txt | cut -c1-160
echo "elapsed $(( $(date +%s) - T0 )) s"
