#!/usr/bin/env bash
# Issue 39, call 5: the final build (tasks write after only the earlier tasks that read in their
# place): the lean suites forced lean on the GPU, the CLI killed on the GPU, and 32 GiB in
# registered memory once more, gathering, three runs.
set -u
mkdir -p /tmp/d && tar xJf .gpucarry/bins.tar.xz -C /tmp/d
D=/tmp/d; C=$(cat $D/COMMIT); echo "commit $C"
t() {  # exe timeout [env...]
  local exe=$1 limit=$2; shift 2; local n=$(basename $exe) s=$SECONDS
  env "$@" timeout $limit $exe --gtest_brief=1 > $OUT/$n.txt 2>&1
  echo "== $n rc $? in $((SECONDS - s)) s"; tail -n 4 $OUT/$n.txt
}
t $D/lean_tests 120 GPUSORT_LEAN=1 GPUSORT_LEAN_TEST_GPUS=1
t $D/lean_cli_tests 130 GPUSORT_LEAN_KILLS=40 GPUSORT_TEST_CLI=$D/gpusort GPUSORT_LEAN_CLI_BUDGET=1Gi
s=$SECONDS
timeout 150 $D/gpu_bench --lean yes --machine h200 --commit $C --json $OUT/lean-32Gi-gather.json \
  --lean-bytes 32Gi --lean-memory pinned --repeat 3 > $OUT/lean-32Gi-gather.txt 2>&1
echo "== lean-32Gi-gather rc $? in $((SECONDS - s)) s"
grep -E "^([0-9.]+ [GM]iB|\||    round 2 (evic|copy|round))" $OUT/lean-32Gi-gather.txt
