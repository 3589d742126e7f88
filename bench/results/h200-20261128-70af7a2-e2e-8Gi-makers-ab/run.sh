#!/usr/bin/env bash
# Call 2 (70af7a2): the output's page makers (GPUSORT_TMPFS_MAKERS, default 8 of 16 cores) and
# the staging's movers (GPUSORT_MOVERS, default 16) against the input's copy-in, for the CLI
# (--local) and the daemon with descriptors, 8 GiB, interleaved.
set -u
mkdir -p /tmp/d && tar xJf .devcarry/b.tar.xz -C /tmp/d
D=/tmp/d; C=$(cat $D/COMMIT); echo "commit $C"
prep() { sync; echo 3 > /proc/sys/vm/drop_caches; echo 1 > /proc/sys/vm/compact_memory; sleep 1; }
run() {  # name env...
  local name=$1; shift
  prep; s=$SECONDS
  env "$@" timeout 100 $D/bench/e2e_bench --bin $D/bin --dir /dev/shm --bytes 8Gi --cpu-bytes 64Mi \
    --machine h200 --commit $C --paths cli,daemon_fd --json $OUT/e2e-$name.json > $OUT/e2e-$name.txt 2>&1
  echo "== $name rc $? in $((SECONDS - s)) s"; grep -v "profile:" $OUT/e2e-$name.txt | grep -E "^  (ref|cli|daemon)"
}
for r in 1 2; do
  run m8_$r X=0
  run m4_$r GPUSORT_TMPFS_MAKERS=4
  run m16_$r GPUSORT_TMPFS_MAKERS=16
  run m4v12_$r GPUSORT_TMPFS_MAKERS=4 GPUSORT_MOVERS=12
done
cd $OUT && tar cJf e2e.tar.xz e2e-* && rm -f e2e-*
