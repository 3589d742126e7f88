#!/usr/bin/env bash
# Call 4 (issue 39): the room kept and pinned; 32 GiB lean (plain and registered memory) against
# the two-round path, and 100 GiB in registered memory (as a daemon's shared buffers are), with
# the host's memory copy rate measured beside the PCIe floor.
set -u
mkdir -p /tmp/d && tar xJf .gpucarry/bins.tar.xz -C /tmp/d
D=/tmp/d; C=$(cat $D/COMMIT); echo "commit $C"
b() {  # name, gpu_bench arguments...
  local n=$1 s=$SECONDS; shift
  timeout 260 $D/gpu_bench --lean yes --machine h200 --commit $C --json $OUT/$n.json "$@" \
    > $OUT/$n.txt 2>&1
  echo "== $n rc $? in $((SECONDS - s)) s"; grep -E "^(host|PCIe|[0-9.]+ [GM]iB|\||    round)" $OUT/$n.txt
}
b lean-32Gi --lean-bytes 32Gi --lean-memory pinned,pageable --repeat 3
b lean-100Gi-pinned --lean-bytes 100Gi --lean-memory pinned --repeat 1
