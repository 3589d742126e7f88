#!/usr/bin/env bash
# Issue 39, call 6: where a file's lean sort spends its time (the daemon's 75 GiB file took
# 15.9 s, 5 GB/s, against 100 GiB of registered memory in 5.7 s): 32 GiB of u64 in /dev/shm,
# `gpusort sort FILE --local` within 4 GiB, profiled, gathering and permuting, verified.
set -u
mkdir -p /tmp/d && tar xJf .gpucarry/bins.tar.xz -C /tmp/d
D=/tmp/d; echo "commit $(cat $D/COMMIT)"
F=/dev/shm/f.bin; s=$SECONDS
$D/gpusort gen --dtype u64 --dist uniform --count 4Gi --seed 3 --out /dev/shm/orig.bin --quiet
echo "generated in $((SECONDS - s)) s"
for mode in gather permute; do
  cp /dev/shm/orig.bin $F; s=$SECONDS
  GPUSORT_LEAN_ROUND2=$mode $D/gpusort sort $F --dtype u64 --local --host-memory-budget 4GiB \
    --profile --json --no-sync > $OUT/file-32Gi-$mode.json 2> $OUT/file-32Gi-$mode.profile
  echo "== $mode rc $? in $((SECONDS - s)) s"; cat $OUT/file-32Gi-$mode.json; echo
  grep -E "round|evic|block|wall|step" $OUT/file-32Gi-$mode.profile | head -30
done
$D/gpusort verify $F --dtype u64 --original /dev/shm/orig.bin; echo "verify rc $?"
