#!/bin/bash
# Two-H200 host, call 5: the CLI at a small device budget with the round-1 buffer pinned
# (GPUSORT_ROUND1_PINNED=1) against --local's pageable default, interleaved, --profile.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call5.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
D=/dev/shm/g44; mkdir -p $D
$C/gpusort gen --dtype u64 --dist uniform --count 1Gi --seed 5 --out $D/k.bin > /dev/null
printf 'devices: [0]\ndevice_memory_budget: 32MiB\n' > $D/small.yaml
printf 'devices: [0]\ndevice_memory_budget: 1GiB\n' > $D/eighth.yaml
n=0
for run in small:1 small:0 small:1 small:0 eighth:1 eighth:0; do
  cfg=${run%:*}; pin=${run#*:}; n=$((n + 1)); s=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=0 GPUSORT_ROUND1_PINNED=$pin timeout 25 $C/gpusort sort $D/k.bin --dtype u64 \
    --local --config $D/$cfg.yaml --out $D/s.bin --json --profile > $OUT/cli-$n-$cfg-pinned$pin.txt 2>&1
  echo "$cfg pinned=$pin rc=$? $(ms $s) ms"
  grep -E '^\{' $OUT/cli-$n-$cfg-pinned$pin.txt | cut -c1-200
  grep -E "sorted$|round 1 .*(copy in|copy out|all round)|round 2 .*(copy in|copy out|all round)|buffer" \
    $OUT/cli-$n-$cfg-pinned$pin.txt | sed 's/gpusort: profile: //' | cut -c1-120
  rm -f $D/s.bin
done
rm -rf $D
