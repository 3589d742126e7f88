#!/usr/bin/env bash
# Call 3 (issue 39): where the lean path's time goes at 100 GiB (a profiled run), 32 GiB forced
# lean (the last call's 32 GiB jobs fit the GPU and took one round trip), then the GPU
# executor's suites with the tiny budget (the binaries rebuilt whole: call 1's crashed at once,
# built from objects that a concurrent build had compiled against the old device.hpp).
set -u
mkdir -p /tmp/d && tar xJf .gpucarry/bins.tar.xz -C /tmp/d
D=/tmp/d; C=$(cat $D/COMMIT); echo "commit $C"
b() {  # name, gpu_bench arguments...
  local n=$1 s=$SECONDS; shift
  timeout 230 $D/gpu_bench --lean yes --machine h200 --commit $C --json $OUT/$n.json "$@" \
    > $OUT/$n.txt 2>&1
  echo "== $n rc $? in $((SECONDS - s)) s"; grep -E "^(PCIe|[0-9.]+ [GM]iB|\||    round)" $OUT/$n.txt
}
b lean-100Gi --lean-bytes 100Gi --lean-memory pageable --repeat 1
b lean-32Gi --lean-bytes 32Gi --lean-memory pageable,pinned --repeat 3
s=$SECONDS; left=$((580 - SECONDS)); echo "executor tests get $left s"
GPUSORT_TEST_BUDGET=tiny timeout $left $D/gpu_executor_tests --gtest_brief=1 > $OUT/gpu_executor_tests.txt 2>&1
echo "== gpu_executor_tests rc $? in $((SECONDS - s)) s"; tail -n 4 $OUT/gpu_executor_tests.txt
