#!/bin/bash
# Two-H200 host, call 5 (issue 40): the 56 GiB file into a new file in /dev/shm on one H200
# (call 4: copy-out 14.1 GB/s there against 32.5 in place, copy-in 20.6 against 40.7), with the
# output's page makers doubled (GPUSORT_TMPFS_MAKERS=16; the default is half the cores up to 8)
# and with the output's pages registered for the copy engines (GPUSORT_OUTPUT_LOCK=1), against
# the default, interleaved, --profile.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call5.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
D=/dev/shm/g40; mkdir -p $D; printf 'devices: [0]\n' > $D/one.yaml
s=$(date +%s%N); $C/gpusort gen --dtype u64 --dist uniform --count 7Gi --seed 7 --out $D/k.bin > /dev/null
echo "gen 56 GiB: $(ms $s) ms"
n=0
for v in default GPUSORT_TMPFS_MAKERS=16 GPUSORT_OUTPUT_LOCK=1 default GPUSORT_TMPFS_MAKERS=16 GPUSORT_OUTPUT_LOCK=1; do
  n=$((n + 1)); s=$(date +%s%N)
  env CUDA_VISIBLE_DEVICES=0 $([ $v != default ] && echo $v) timeout 60 $C/gpusort sort $D/k.bin \
    --out $D/s.bin --dtype u64 --local --config $D/one.yaml --json --profile > $OUT/$n-$v.txt 2>&1
  echo "== $v rc=$? $(ms $s) ms $(grep -o '"seconds":[0-9.]*,"wall_seconds":[0-9.]*' $OUT/$n-$v.txt)"
  grep -E "cuda:0 .*(copy in|copy out)" $OUT/$n-$v.txt | sed 's/gpusort: profile: round 1 //' | cut -c1-110
  rm -f $D/s.bin
done
rm -rf $D
