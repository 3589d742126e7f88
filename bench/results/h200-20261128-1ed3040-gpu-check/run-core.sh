#!/usr/bin/env bash
# Call 4: core_tests on the GPU host (tiny budget), and a switch's value it does not take.
set -u
mkdir -p /tmp/d && tar xJf .devcarry/b.tar.xz -C /tmp/d
D=/tmp/d; C=$(cat $D/COMMIT); echo "commit $C"
s=$SECONDS; GPUSORT_TEST_BUDGET=tiny timeout 170 $D/tests/core/core_tests --gtest_brief=1 > $OUT/core_tests.txt 2>&1
echo "== core_tests rc $? in $((SECONDS - s)) s"; tail -n 4 $OUT/core_tests.txt
$D/bin/gpusort gen --dtype u64 --dist uniform --count 16M --out /dev/shm/sw.bin -q
GPUSORT_TMPFS_MAKERS=lots GPUSORT_COPY_NT=yes $D/bin/gpusort sort /dev/shm/sw.bin --dtype u64 --out /dev/shm/sw.out --local 2>&1 | tail -4
$D/bin/gpusort verify /dev/shm/sw.out --dtype u64 --original /dev/shm/sw.bin; rm -f /dev/shm/sw.*
