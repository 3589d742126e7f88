#!/bin/bash
# Two-H200 host, call 6 (issue 40): the new default of 16 page makers on the run that call 5
# found slow (the first sort after a 56 GiB input was written, one H200), then the largest file
# the host holds twice: 96 GiB of u64 on both H200 (resident: call 3 puts up to 130.7 GiB in
# one round there), into a new file and in place. --local, --profile, one run each.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call6.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
D=/dev/shm/g40; mkdir -p $D; printf 'devices: [0]\n' > $D/one.yaml; printf 'devices: [0, 1]\n' > $D/two.yaml
run() {  # label cfg args...
  local label=$1 cfg=$2; shift 2; s=$(date +%s%N)
  timeout 100 $C/gpusort sort "$@" --dtype u64 --local --config $D/$cfg.yaml --json --profile \
    > $OUT/$label.txt 2>&1
  echo "== $label rc=$? $(ms $s) ms $(grep -o '"seconds":[0-9.]*,"wall_seconds":[0-9.]*,"peak_rss_bytes":[0-9]*' $OUT/$label.txt)"
  grep -E "cuda:.*(copy in|copy out|sort|exchange)|all round|path" $OUT/$label.txt | sed 's/gpusort: profile: round 1 //' | cut -c1-120
  free -g | sed -n 2p
}
s=$(date +%s%N); $C/gpusort gen --dtype u64 --dist uniform --count 7Gi --seed 7 --out $D/k.bin > /dev/null
echo "gen 56 GiB: $(ms $s) ms"
run first-56GiB one $D/k.bin --out $D/s.bin; rm -f $D/s.bin
run second-56GiB one $D/k.bin --out $D/s.bin; rm -f $D/s.bin $D/k.bin
s=$(date +%s%N); $C/gpusort gen --dtype u64 --dist uniform --count 12Gi --seed 9 --out $D/k.bin > /dev/null
echo "gen 96 GiB: $(ms $s) ms"; df -h /dev/shm | tail -1
run new-96GiB-two two $D/k.bin --out $D/s.bin; rm -f $D/s.bin
run inplace-96GiB-two two $D/k.bin
s=$(date +%s%N); $C/gpusort verify $D/k.bin --dtype u64 > $OUT/verify.txt 2>&1; echo "verify rc=$? $(ms $s) ms"; tail -2 $OUT/verify.txt
rm -rf $D
