#!/usr/bin/env bash
# Call 3 (1ed3040, the switches' one reader): the GPU tests with the tiny budget (core, gpu,
# gpu_fault, gpu_executor, pipeline), then e2e_bench at 8 GiB over every path.
set -u
mkdir -p /tmp/d && tar xJf .devcarry/b.tar.xz -C /tmp/d
D=/tmp/d; C=$(cat $D/COMMIT); echo "commit $C"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
t() {  # exe timeout
  local n=$(basename $1); s=$SECONDS
  GPUSORT_TEST_BUDGET=tiny timeout $2 $1 --gtest_brief=1 > $OUT/$n.txt 2>&1
  echo "== $n rc $? in $((SECONDS - s)) s"; tail -n 4 $OUT/$n.txt
}
t $D/tests/core/core_tests 45
t $D/tests/gpu/gpu_tests 120
t $D/tests/gpu/gpu_fault_tests 60
t $D/tests/pipeline/pipeline_tests 70
t $D/tests/gpu/gpu_executor_tests 300
# A switch's value it does not take: one warning, the default kept.
GPUSORT_TMPFS_MAKERS=lots $D/bin/gpusort gen --dtype u64 --count 1M --out /dev/shm/sw.bin > /dev/null 2>&1
GPUSORT_TMPFS_MAKERS=lots GPUSORT_COPY_NT=yes $D/bin/gpusort sort /dev/shm/sw.bin --dtype u64 --out /dev/shm/sw.out --local 2>&1 | head -5
rm -f /dev/shm/sw.bin /dev/shm/sw.out
sync; echo 3 > /proc/sys/vm/drop_caches; echo 1 > /proc/sys/vm/compact_memory; sleep 1; s=$SECONDS
left=$((575 - SECONDS)); echo "e2e gets $left s"; timeout $left $D/bench/e2e_bench --bin $D/bin --dir /dev/shm --bytes 8Gi --cpu-bytes 1Gi --machine h200 \
  --commit $C --json $OUT/e2e-8Gi.json > $OUT/e2e-8Gi.txt 2>&1
echo "== e2e 8Gi rc $? in $((SECONDS - s)) s"; grep -v "profile:" $OUT/e2e-8Gi.txt | tail -32
cd $OUT && tar cJf all.tar.xz *.txt *.json && rm -f *.txt *.json
