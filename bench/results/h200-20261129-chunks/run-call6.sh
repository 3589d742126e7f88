#!/usr/bin/env bash
# Issue 44, call 6 (the session's last device seconds): the GPU test that call 5 failed, after
# whole_jobs_only (a budget below the GPU's margin refuses a job that needs chunks).
set -u
mkdir -p /tmp/d && tar xJf .gpucarry/bins.tar.xz -C /tmp/d
D=/tmp/d; echo "commit $(cat $D/COMMIT)"
GPUSORT_TEST_SMALL=1 timeout 25 $D/gpu_executor_tests --gtest_brief=1 \
  --gtest_filter='gpu_test.ASmallJobAlwaysSortsAndTheNamedBudgetWorks' > $OUT/small_job.txt 2>&1
echo "== rc $?"; tail -n 4 $OUT/small_job.txt
