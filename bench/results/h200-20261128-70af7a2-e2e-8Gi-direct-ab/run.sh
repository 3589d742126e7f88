#!/usr/bin/env bash
# Call 1 (70af7a2 + O_DIRECT twin and mover block switches): the host, io_bench on /dev/shm,
# then e2e_bench (daemon_fd, cli) with the input read buffered or O_DIRECT, 1 or 4 MiB blocks.
set -u
mkdir -p /tmp/d && tar xJf .devcarry/b.tar.xz -C /tmp/d
D=/tmp/d; C=$(cat $D/COMMIT); echo "commit $C"; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
uname -r; nproc; free -g | head -2; mount | grep -E " /dev/shm " ; cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/shmem_enabled /sys/kernel/mm/transparent_hugepage/defrag
lscpu | grep -E "Model name|Socket|NUMA node\(s\)|L3"
prep() { sync; echo 3 > /proc/sys/vm/drop_caches; echo 1 > /proc/sys/vm/compact_memory; sleep 1; }
prep; s=$SECONDS
timeout 100 $D/bench/io_bench --dir /dev/shm --bytes 2Gi --machine h200 --json $OUT/io-shm.json > $OUT/io-shm.txt 2>&1
echo "== io_bench rc $? in $((SECONDS - s)) s"; grep -E "read|memcpy" $OUT/io-shm.txt | head -20
run() {  # name env...
  local name=$1; shift
  prep; s=$SECONDS
  env "$@" timeout 100 $D/bench/e2e_bench --bin $D/bin --dir /dev/shm --bytes 8Gi --cpu-bytes 256Mi \
    --machine h200 --commit $C --paths cli,daemon_fd --json $OUT/e2e-$name.json > $OUT/e2e-$name.txt 2>&1
  echo "== $name rc $? in $((SECONDS - s)) s"; grep -v "profile:" $OUT/e2e-$name.txt | grep -E "^  (ref|page|cli|daemon)"
  grep "copy in" $OUT/e2e-$name.txt | grep "round 1" | head -8
}
run base1 X=0
run direct1 GPUSORT_TMPFS_DIRECT=1
run direct4M1 GPUSORT_TMPFS_DIRECT=1 GPUSORT_MOVER_BLOCK=4Mi
run block4M1 GPUSORT_MOVER_BLOCK=4Mi
run base2 X=0
run direct2 GPUSORT_TMPFS_DIRECT=1
run direct4M2 GPUSORT_TMPFS_DIRECT=1 GPUSORT_MOVER_BLOCK=4Mi
cd $OUT && tar cJf e2e.tar.xz e2e-* && rm -f e2e-*
