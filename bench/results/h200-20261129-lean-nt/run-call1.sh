#!/usr/bin/env bash
# Issue 39, call 1 of this session: the permutation's block moves with streaming stores
# (GPUSORT_COPY_NT=1, the default now) against memcpy (=0), 32 GiB lean in registered memory,
# interleaved; host memory's room beside the link; 100 GiB registered once.
set -u
mkdir -p /tmp/d && tar xJf .gpucarry/bins.tar.xz -C /tmp/d
D=/tmp/d; C=$(cat $D/COMMIT); echo "commit $C"; nproc; free -g | head -2
b() {  # name, env, gpu_bench arguments...
  local n=$1 e=$2 s=$SECONDS; shift 2
  env $e timeout 280 $D/gpu_bench --lean yes --machine h200 --commit $C --json $OUT/$n.json "$@" \
    > $OUT/$n.txt 2>&1
  echo "== $n ($e) rc $? in $((SECONDS - s)) s"
  grep -E "^(host|PCIe|[0-9.]+ [GM]iB|\||    round 2 (evac|block|clean))" $OUT/$n.txt
}
b lean-32Gi-nt1 GPUSORT_COPY_NT=1 --lean-bytes 32Gi --lean-memory pinned --repeat 3
b lean-32Gi-nt0 GPUSORT_COPY_NT=0 --lean-bytes 32Gi --lean-memory pinned --repeat 3
b lean-100Gi-nt1 GPUSORT_COPY_NT=1 --lean-bytes 100Gi --lean-memory pinned --repeat 1
