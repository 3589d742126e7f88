#!/bin/bash
# Two-H200 host, call 4 (issue 40, "the largest job that fits"): where a user's large file
# loses its rate. `gpusort sort --local` of u64 files in /dev/shm on one H200 (devices [0]):
# 16 GiB and 56 GiB into a new file, 56 GiB in place, each with --profile and --json (the
# last sessions measured 1.36 s for 16 GiB and 12.4 s for 56 GiB into a new file).
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call4.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"; df -h /dev/shm | tail -1; free -g | head -2
grep -E "^(shmem_enabled|)" /sys/kernel/mm/transparent_hugepage/shmem_enabled 2>/dev/null
mount | grep /dev/shm
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
D=/dev/shm/g40; mkdir -p $D; printf 'devices: [0]\n' > $D/one.yaml
run() {  # label args...
  local label=$1; shift; s=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=0 timeout 120 $C/gpusort sort "$@" --dtype u64 --local --config $D/one.yaml \
    --json --profile > $OUT/$label.txt 2>&1
  echo "== $label rc=$? $(ms $s) ms"
  grep -o '"seconds":[0-9.]*,"wall_seconds":[0-9.]*,"peak_rss_bytes":[0-9]*' $OUT/$label.txt
  grep -v '^{' $OUT/$label.txt | grep -E "profile|timeline|stage" | cut -c1-150 | head -40
}
for g in 16 56; do
  s=$(date +%s%N); $C/gpusort gen --dtype u64 --dist uniform --count $((g * 128))Mi --seed 7 \
    --out $D/k.bin > /dev/null; echo "gen ${g} GiB: $(ms $s) ms"; free -g | sed -n 2p
  run new-${g}GiB $D/k.bin --out $D/s.bin
  rm -f $D/s.bin
  [ $g = 56 ] && run inplace-${g}GiB $D/k.bin
  rm -f $D/k.bin
done
rm -rf $D
