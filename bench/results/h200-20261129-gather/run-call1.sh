#!/usr/bin/env bash
# Issue 39, call 1: the gathering round 2 (round 2 reads every bucket where round 1 left it, an
# evictor clears each place ahead of the devices) against the permutation between the rounds,
# 32 GiB in registered memory within 3.5 GiB, three runs each; the lean suites on the GPU; the
# executor's small-job test that the whole_jobs_only change fixed.
set -u
mkdir -p /tmp/d && tar xJf .gpucarry/bins.tar.xz -C /tmp/d
D=/tmp/d; C=$(cat $D/COMMIT); echo "commit $C"; nproc; free -g | head -2; df -h /dev/shm | tail -1
t() {  # exe timeout [env...] -- [args]
  local exe=$1 limit=$2; shift 2; local n=$(basename $exe) s=$SECONDS
  env "$@" timeout $limit $exe --gtest_brief=1 > $OUT/$n.txt 2>&1
  echo "== $n rc $? in $((SECONDS - s)) s"; tail -n 4 $OUT/$n.txt
}
b() {  # name, env, gpu_bench arguments...
  local n=$1 e=$2 s=$SECONDS; shift 2
  env $e timeout 200 $D/gpu_bench --lean yes --machine h200 --commit $C --json $OUT/$n.json "$@" \
    > $OUT/$n.txt 2>&1
  echo "== $n ($e) rc $? in $((SECONDS - s)) s"
  grep -E "^(host|PCIe|[0-9.]+ [GM]iB|\||    round 2 (evic|block|buck)|    round [23] (copy|round))" $OUT/$n.txt
}
b lean-32Gi-gather GPUSORT_LEAN_ROUND2=gather --lean-bytes 32Gi --lean-memory pinned --repeat 3
b lean-32Gi-permute GPUSORT_LEAN_ROUND2=permute --lean-bytes 32Gi --lean-memory pinned --repeat 3
t $D/lean_tests 120 GPUSORT_LEAN=1 GPUSORT_LEAN_TEST_GPUS=1
s=$SECONDS; GPUSORT_TEST_SMALL=1 timeout 60 $D/gpu_executor_tests --gtest_brief=1 \
  --gtest_filter='*ASmallJobAlwaysSortsAndTheNamedBudgetWorks*' > $OUT/small.txt 2>&1
echo "== small rc $? in $((SECONDS - s)) s"; tail -n 3 $OUT/small.txt
