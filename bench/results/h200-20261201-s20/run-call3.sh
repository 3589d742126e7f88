#!/bin/bash
# One-H200 host, session 20, call 3 (issue 44), the bundle at 8e16512: the mover's smallest block
# (GPUSORT_MOVER_MIN_BLOCK 64, 256, 512, 1024 KiB; 1024 = 1 MiB blocks as before s20) with the
# writes behind, and both off (as before s20), interleaved, `gpusort sort --local` of 8 GiB u64
# from /dev/shm into a new file at 32 MiB (1594 chunks of 5 MiB) and the smallest budget (22 MiB,
# 4096 chunks of 2 MiB), round 1 reading the file and round 2 writing it.
D=$PWD/dist; mkdir -p $D; tar xJf .gpucarry/dist.tar.xz -C $D
FINAL=$OUT; OUT=/tmp/w3; mkdir -p $OUT
trap 'tar czf $FINAL/call3.tar.gz -C $OUT .' EXIT
echo "commit $(cat $D/COMMIT)"
T0=$(date +%s)
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
S=/dev/shm/s20; mkdir -p $S
$D/bin/gpusort gen --dtype u64 --dist uniform --count 1Gi --seed 9 --out $S/u.bin > /dev/null
cli() {  # name budget verify env...
  local name=$1 b=$2 v=$3; shift 3
  printf 'devices: [0]\ndevice_memory_budget: %s\nlog_level: warn\n' $b > $S/c.yaml
  local s=$(date +%s%N)
  env "$@" timeout 60 $D/bin/gpusort sort $S/u.bin --dtype u64 --out $S/out.bin --local --config $S/c.yaml \
    --json --profile > $OUT/cli-$name.txt 2>&1
  local rc=$? w=$(ms $s)
  echo "== cli $name ($*) rc=$rc, $w ms: $(grep -o '"seconds":[0-9.]*' $OUT/cli-$name.txt | head -1)"
  [ $v = 1 ] && $D/bin/gpusort verify $S/out.bin --dtype u64 2>&1 | tail -1
  rm -f $S/out.bin
}
for k in 1 2 3; do
  for b in 33554432 23068672; do
    for m in 64 256 512 1024; do cli b$b-m$m-$k $b $(( k == 1 )) GPUSORT_MOVER_MIN_BLOCK=$m; done
    cli b$b-old-$k $b $(( k == 1 )) GPUSORT_MOVER_MIN_BLOCK=1024 GPUSORT_WRITE_BEHIND=0
  done
done
rm -rf $S
echo "elapsed $(( $(date +%s) - T0 )) s"
