#!/usr/bin/env bash
# Issue 39, call 3: the CLI killed at every kind of journal step and at random moments on the
# GPU with the gathering round 2, then recovered; 32 GiB in plain (pageable) memory, gathering
# against the permutation.
set -u
mkdir -p /tmp/d && tar xJf .gpucarry/bins.tar.xz -C /tmp/d
D=/tmp/d; C=$(cat $D/COMMIT); echo "commit $C"
s=$SECONDS
GPUSORT_LEAN_KILLS=40 GPUSORT_TEST_CLI=$D/gpusort GPUSORT_LEAN_CLI_BUDGET=1Gi timeout 250 \
  $D/lean_cli_tests --gtest_brief=1 > $OUT/lean_cli_tests.txt 2>&1
echo "== lean_cli_tests rc $? in $((SECONDS - s)) s"; tail -n 4 $OUT/lean_cli_tests.txt
b() {  # name, env, gpu_bench arguments...
  local n=$1 e=$2 s=$SECONDS; shift 2
  env $e timeout 150 $D/gpu_bench --lean yes --machine h200 --commit $C --json $OUT/$n.json "$@" \
    > $OUT/$n.txt 2>&1
  echo "== $n ($e) rc $? in $((SECONDS - s)) s"
  grep -E "^([0-9.]+ [GM]iB|\||    round 2 (evic|block)|    round [23] (copy|round))" $OUT/$n.txt
}
b lean-32Gi-pageable-gather GPUSORT_LEAN_ROUND2=gather --lean-bytes 32Gi --lean-memory pageable --repeat 2
b lean-32Gi-pageable-permute GPUSORT_LEAN_ROUND2=permute --lean-bytes 32Gi --lean-memory pageable --repeat 2
