#!/bin/bash
# Two-H200 host, session 12, call 3 (issue 40): the time model's check with the new resident sort
# and with ba1bfc2's (two arrays of the share) in one run (gpu_bench --model, fitting and 1/8 on
# one and two H200), then a user's file of the largest one-round size on one H200 sorted in
# place with gpusort sort --local (twice), against 16 GiB the same way, each verified.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call3.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT), old $(cat $C/old/COMMIT)"
T0=$(date +%s); left() { echo $(( 560 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
df -h /dev/shm | tail -1
for b in new old; do
  bin=$C/gpu_bench; [ $b = old ] && bin=$C/old/gpu_bench
  s=$(date +%s%N)
  timeout 120 $bin --model yes --chunk-bytes 8Gi,32Gi --repeat 3 --json $OUT/model-$b.json \
    > $OUT/model-$b.txt 2>&1
  echo "== gpu_bench --model $b rc=$? $(ms $s) ms"
  grep -E "measured" $OUT/model-$b.txt
done
D=/dev/shm/g40; mkdir -p $D; printf 'devices: [0]\n' > $D/one.yaml
L=$($C/gpusort plan --largest --dtype u64 --config $D/one.yaml --json | grep -o '"elements":[0-9]*' | cut -d: -f2)
avail=$(( $(df --output=avail -B1 /dev/shm | tail -1) / 8 - (2 << 27) ))
[ $L -gt $avail ] && { echo "largest $L keys, /dev/shm holds $avail: taking that"; L=$avail; }
echo "largest one-round u64 job on one H200: $L keys ($(( L * 8 >> 30 )) GiB)"
for job in 16G:2147483648 big:$L; do
  name=${job%%:*}; count=${job#*:}
  [ $(left) -lt 90 ] && { echo "no time for $name"; break; }
  s=$(date +%s%N); $C/gpusort gen --dtype u64 --dist uniform --count $count --seed 12 --out $D/$name.bin > /dev/null
  echo "gen $name ($count keys): $(ms $s) ms"
  for n in 1 2; do
    [ $(left) -lt 40 ] && break
    s=$(date +%s%N)
    timeout $(( $(left) - 20 )) $C/gpusort sort $D/$name.bin --dtype u64 --local --config $D/one.yaml --json --profile \
      > $OUT/inplace-$name-$n.txt 2>&1
    echo "== $name in place $n rc=$? $(ms $s) ms $(grep -o '"seconds":[0-9.]*,"wall_seconds":[0-9.]*' $OUT/inplace-$name-$n.txt) $(grep -o '"path":"[a-z ]*"' $OUT/inplace-$name-$n.txt | head -1) $(grep -o '"peak_rss_bytes":[0-9]*' $OUT/inplace-$name-$n.txt)"
    grep -E "cuda:.*(copy in|copy out|sort)|all round" $OUT/inplace-$name-$n.txt | sed 's/gpusort: profile: round 1 //' | cut -c1-120
  done
  [ $(left) -gt 30 ] && timeout $(( $(left) - 10 )) $C/gpusort verify $D/$name.bin --dtype u64 2>&1 | tail -1
  rm -f $D/$name.bin
done
rm -rf $D
