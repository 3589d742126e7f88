#!/bin/bash
# Two-H200 host, call 7 (issue 40): the resident sort's copy-outs on two GPUs from a thread each
# (call 6 saw them one after the other for a file). Both GPUs: the resident fault sweep (an
# in-place job whose copy-out fails is stored again, pageable and pinned, one and two GPUs) and
# the executor's resident tests; then 32 GiB of u64 in /dev/shm sorted in place on both H200
# twice with --profile, its order verified.
C=/tmp/c; mkdir -p $C; tar xJf .gpucarry/bins.tar.xz -C $C
FINAL=$OUT; OUT=/tmp/w; mkdir -p $OUT
trap 'tar czf $FINAL/call7.tar.gz -C $OUT .' EXIT
echo "commit $(cat $C/COMMIT)"
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
s=$(date +%s%N); GPUSORT_TEST_BUDGET=tiny timeout 90 $C/gpu_fault_tests --gtest_filter='GpuResidentFault*' \
  > $OUT/fault_resident.txt 2>&1
echo "gpu_fault_tests GpuResidentFault rc=$? $(ms $s) ms"; tail -2 $OUT/fault_resident.txt
grep -m3 -A8 "Failure$" $OUT/fault_resident.txt
s=$(date +%s%N); timeout 60 $C/gpu_executor_tests \
  --gtest_filter='*TwoGpusSortAJobThatFitsInOneRoundTrip*:*ResidentSortMerges*:*ArgsortThatFitsRunsResident*' \
  > $OUT/exec_resident.txt 2>&1
echo "gpu_executor_tests resident rc=$? $(ms $s) ms"; tail -2 $OUT/exec_resident.txt
grep -m3 -A8 "Failure$" $OUT/exec_resident.txt
D=/dev/shm/g40; mkdir -p $D; printf 'devices: [0, 1]\n' > $D/two.yaml
s=$(date +%s%N); $C/gpusort gen --dtype u64 --dist uniform --count 4Gi --seed 9 --out $D/k.bin > /dev/null
echo "gen 32 GiB: $(ms $s) ms"
for n in 1 2; do
  s=$(date +%s%N)
  timeout 60 $C/gpusort sort $D/k.bin --dtype u64 --local --config $D/two.yaml --json --profile \
    > $OUT/inplace-32GiB-$n.txt 2>&1
  echo "== in place $n rc=$? $(ms $s) ms $(grep -o '"seconds":[0-9.]*,"wall_seconds":[0-9.]*' $OUT/inplace-32GiB-$n.txt)"
  grep -E "cuda:.*(copy in|copy out)|all round" $OUT/inplace-32GiB-$n.txt | sed 's/gpusort: profile: round 1 //' | cut -c1-110
done
$C/gpusort verify $D/k.bin --dtype u64 2>&1 | tail -1
rm -rf $D
