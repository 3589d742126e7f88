#!/usr/bin/env bash
# A/B: gpusortd on the CPU engine, two jobs side by side (max_running_jobs 2) and one alone,
# with OpenMP's default wait policy and with OMP_WAIT_POLICY=passive in the daemon's environment.
set -euo pipefail
B=/work/main/build/release
bin=$B/client/gpusort; daemon=$B/service/gpusortd
w=/dev/shm/ompab; mkdir -p $w
count=${COUNT:-100M}
for i in 1 2; do [ -f $w/in$i.bin ] || $bin gen --dtype u64 --dist uniform --count $count --seed $i --out $w/in$i.bin; done
run() { # policy
  sock=$w/d.sock; rm -f $sock
  printf 'devices: cpu\nsocket: %s\nmax_running_jobs: 2\n' $sock > $w/d.yaml
  if [ "$1" = passive ]; then OMP_WAIT_POLICY=passive $daemon --config $w/d.yaml 2> $w/d.log & else $daemon --config $w/d.yaml 2> $w/d.log & fi
  pid=$!
  for _ in $(seq 300); do [ -S $sock ] && $bin status --socket $sock >/dev/null 2>&1 && break; sleep 0.1; done
  for rep in 1 2 3; do
    s=$(date +%s.%N); $bin sort $w/in1.bin --dtype u64 --out $w/o1.bin --socket $sock; e=$(date +%s.%N)
    one=$(echo "$e - $s" | bc)
    s=$(date +%s.%N)
    $bin sort $w/in1.bin --dtype u64 --out $w/o1.bin --socket $sock & p1=$!
    $bin sort $w/in2.bin --dtype u64 --out $w/o2.bin --socket $sock & p2=$!
    wait $p1; wait $p2; e=$(date +%s.%N)
    echo "$1 rep $rep: one job $one s, two jobs side by side $(echo "$e - $s" | bc) s"
  done
  $bin verify $w/o2.bin --dtype u64 --original $w/in2.bin > /dev/null && echo "$1 verified"
  kill -TERM $pid; wait $pid || true
}
run default; run passive; run default; run passive
rm -rf $w
