#!/bin/bash
# Two-H200 host, call 1 (issue 44): how round 2 should gather short slices at small budgets
# (the kernel on mapped memory beside the sort, its grid cap, the copy engines, or packed into
# the staging's pieces on the host), then the engine's default at 32 GiB on one and two H200
# and at 8 GiB on two; a file sorted by the CLI at 1/8 and 1/256 (its JSON has the peak memory).
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
echo "commit $(cat $C/COMMIT)"; nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
echo "shm: $(df -h /dev/shm | tail -1)"; nproc; free -g | head -2
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
B="$C/gpu_bench --chunks yes --repeat 1 --machine h200x2 --commit $(cat $C/COMMIT)"
run() {  # name, timeout, env..., -- args
  local name=$1 t=$2; shift 2; local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done; shift
  echo "== $name: ${envs[*]} $*"; local s=$(date +%s%N)
  env "${envs[@]}" timeout $t stdbuf -oL $B "$@" --json $OUT/$name.json > $OUT/$name.txt 2>&1
  echo "rc=$? $(ms $s) ms"; grep -E "budget|refused|wrong" $OUT/$name.txt | grep -v "^    " | head -8
  grep -E "^    round 2 (copy in|sort) |^    round 1 sort|plan  " $OUT/$name.txt | head -12
}
run g-auto 60 CUDA_VISIBLE_DEVICES=0 -- --chunk-bytes 8Gi --gpus 1 --kinds u64 --budgets 1/256,smallest
run g-host 60 CUDA_VISIBLE_DEVICES=0 GPUSORT_GATHER=host -- --chunk-bytes 8Gi --gpus 1 --kinds u64 --budgets 1/256,smallest
run g-host2m 60 CUDA_VISIBLE_DEVICES=0 GPUSORT_GATHER=host GPUSORT_STAGING=16x2 -- --chunk-bytes 8Gi --gpus 1 --kinds u64 --budgets 1/256,smallest
run g-k32 60 CUDA_VISIBLE_DEVICES=0 GPUSORT_GATHER_BLOCKS=32 -- --chunk-bytes 8Gi --gpus 1 --kinds u64 --budgets 1/256,smallest
run g-k8 60 CUDA_VISIBLE_DEVICES=0 GPUSORT_GATHER_BLOCKS=8 -- --chunk-bytes 8Gi --gpus 1 --kinds u64 --budgets 1/256
run g-copy 60 CUDA_VISIBLE_DEVICES=0 GPUSORT_GATHER=copy -- --chunk-bytes 8Gi --gpus 1 --kinds u64 --budgets 1/256
run two-8g 90 X=1 -- --chunk-bytes 8Gi --gpus 2 --kinds u64,f64 --budgets 1/256,smallest
run big-32g 200 X=1 -- --chunk-bytes 32Gi --gpus 1,2 --kinds u64,f64 --budgets 1/256
echo "== CLI: 8 GiB u64 file in /dev/shm, one H200, budget 32 MiB, into a new file, peak RSS"
D=/dev/shm/g44; mkdir -p $D
$C/gpusort gen --dtype u64 --dist uniform --count 1Gi --seed 5 --out $D/k.bin
printf 'devices: [0]\ndevice_memory_budget: 32MiB\n' > $D/small.yaml
printf 'devices: [0]\ndevice_memory_budget: 1GiB\n' > $D/eighth.yaml
for cfg in eighth small eighth small; do
  s=$(date +%s%N)
  timeout 60 $C/gpusort sort $D/k.bin --dtype u64 --local --config $D/$cfg.yaml --out $D/s.bin \
    --json 2>&1 | tail -3
  echo "$cfg rc=$? $(ms $s) ms"; rm -f $D/s.bin
done
rm -rf $D
