#!/bin/bash
# One-H200 host (16 cores, 125 GiB), session 12, call 1 (the two-H200 kind was not lent):
# measurements for what comes next.
# Issue 44: the sample sort (an MSD sort whose buckets sort in shared memory) against CUB's
# radix sort at the small budgets' chunk sizes (65K to 4M keys; sample_bench), and the engine at
# 1/256 of 8 GiB with either in-core sort (gpu_bench --chunks --incore sample|radix).
# Issue 40: why the largest file's copy in read at 19.9 GB/s (two-H200 host, h200x2-20261130-s12
# call 3) where 16 GiB's second run read at
# 31.6: the shmem huge pages (/proc/meminfo) after gen and after each in-place sort.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call1.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
T0=$(date +%s); left() { echo $(( 280 - ($(date +%s) - T0) )); }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
s=$(date +%s%N)
CUDA_VISIBLE_DEVICES=0 timeout 90 $C/sample_bench --sizes 65536,262144,674000,1048576,4194304 --reps 5 \
  --types u64,f64,pairs --dists uniform,gaussian --json $OUT/sample-small.json > $OUT/sample-small.txt 2>&1
echo "== sample_bench rc=$? $(ms $s) ms"; grep -E "^\|" $OUT/sample-small.txt | head -40
for e in radix sample; do
  s=$(date +%s%N)
  CUDA_VISIBLE_DEVICES=0 timeout 60 $C/gpu_bench --chunks yes --chunk-bytes 8Gi --gpus 1 --incore $e \
    --kinds u64,f64 --budgets 1/8,1/256 --repeat 3 > $OUT/chunks-$e.txt 2>&1
  echo "== gpu_bench --chunks --incore $e rc=$? $(ms $s) ms"
  grep -E "^\|" $OUT/chunks-$e.txt | head -12
done
shm() { grep -E "^(Shmem|ShmemHugePages|ShmemPmdMapped|FilePmdMapped|MemFree|AnonHugePages):" /proc/meminfo | tr -s ' ' | tr '\n' ';'; echo; }
D=/dev/shm/g40; mkdir -p $D; printf 'devices: [0]\n' > $D/one.yaml
avail=$(( $(df --output=avail -B1 /dev/shm | tail -1) / 8 * 3 / 4 ))
big=$(( avail < 12884901888 ? avail : 12884901888 ))
df -h /dev/shm | tail -1; free -g | head -2
for job in 16G:2147483648 big:$big; do
  name=${job%%:*}; count=${job#*:}
  [ $(left) -lt 60 ] && { echo "no time for $name"; break; }
  s=$(date +%s%N); $C/gpusort gen --dtype u64 --dist uniform --count $count --seed 12 --out $D/$name.bin > /dev/null
  echo "gen $name ($count keys): $(ms $s) ms"; echo "  meminfo: $(shm)"
  for n in 1 2; do
    [ $(left) -lt 30 ] && break
    s=$(date +%s%N)
    timeout $(( $(left) - 15 )) $C/gpusort sort $D/$name.bin --dtype u64 --local --config $D/one.yaml --json --profile \
      > $OUT/inplace-$name-$n.txt 2>&1
    echo "== $name in place $n rc=$? $(ms $s) ms $(grep -o '"seconds":[0-9.]*,"wall_seconds":[0-9.]*' $OUT/inplace-$name-$n.txt)"
    grep -E "cuda:.*(copy in|copy out)" $OUT/inplace-$name-$n.txt | sed 's/gpusort: profile: round 1 //' | cut -c1-110
    echo "  meminfo: $(shm)"
  done
  rm -f $D/$name.bin
done
rm -rf $D
