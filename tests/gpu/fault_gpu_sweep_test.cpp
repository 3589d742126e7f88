// The GPU variant of the fault sweep (issue 25, item 1), for the GPU machine: the CUDA calls of
// one in-core (resident) and one out-of-core GPU job fail in turn (sampled by a seeded stride:
// such a job makes hundreds of calls), each a clean error or a verified success, nothing left
// on the device or pinned, the input as promised, and the engine sorts the next job. Then a
// sticky CUDA error (the context lost) is a cuda_error that marks the devices lost. Skips
// without a GPU.
#include "core/cuda/chunk_ops.cuh"
#include "core/cuda/sample_sort.cuh"
#include "core/fault.hpp"
#include "pipeline/cuda/cuda_device.hpp"
#include "tests/gpu/gpu_test_support.hpp"
#include "tests/support/engine_sweep.hpp"

#include <cstdlib>
#include <gpusort/gpusort.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <numeric>
#include <string>

namespace gpusort::test_support {
namespace {

using detail::fault::plan;
using detail::fault::scope;
using detail::fault::site;

constexpr std::uint64_t n = std::uint64_t{1} << 20;

/// GPU 0 alone; out of core: chunks of n/16 pairs and a budget for n/4 of them (64 MiB that
/// cuda_device reserves, the larger sorter's scratch and its ring of chunk buffers), as
/// executor_test's forced_out_of_core sizes it, so that the planner needs two rounds.
config gpu_config(bool out_of_core)
{
  config cfg;
  cfg.devices = device_selection::listed;
  cfg.gpu_ids = {0};
  if (out_of_core) {
    constexpr std::uint64_t pair_bytes = 16, capacity = n / 4;
    cfg.chunk_bytes = n / 16 * pair_bytes;
    const std::uint64_t scratch = std::max(cuda::radix_sort_scratch_bytes(capacity, 8, 8),
                                           cuda::sample_sort_scratch_bytes(capacity, 8, 8));
    cfg.device_memory_budget = (std::uint64_t{64} << 20) + scratch +
                               detail::cuda_device::buffers_per_element * pair_bytes * capacity;
  }
  return cfg;
}

class GpuFaultSweep : public test::gpu_test,
                      public ::testing::WithParamInterface<bool /*out of core*/> {};

TEST_P(GpuFaultSweep, EveryCudaCallFailingOnceIsACleanErrorOrASuccess)
{
  const bool out_of_core = GetParam();
  engine eng{gpu_config(out_of_core)};
  // In place, pairs in pageable memory: the staging, the copies and, out of core, round 2's
  // writes over the input and their restoration on failure.
  sweep_job job{{out_of_core ? "GpuOutOfCoreInPlacePairs" : "GpuInCoreInPlacePairs", n, true,
                 false, true}};
  const std::vector<std::uint64_t> per_site = count_calls(eng, job);
  const plan cuda_calls{.group = scope::cuda};
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < per_site.size(); ++i)
    if (detail::fault::is_cuda(static_cast<site>(i))) total += per_site[i];
  ASSERT_GT(total, 0U);
  RecordProperty("calls_per_class", detail::fault::summary());
  std::cout << "CUDA calls of a clean run: " << detail::fault::summary() << "\n";
  sweep_tally tally;
  for (const std::uint64_t call : sweep_points(total, 150, 25)) {
    plan p = cuda_calls;
    p.nth = call;
    run_with_fault(eng, job, p, tally, false, /*engine_caches=*/true);
  }
  std::cout << tally.runs << " runs: " << tally.failed << " failed cleanly, " << tally.succeeded
            << " succeeded\n";
  EXPECT_GT(tally.failed, 0U);
  EXPECT_FALSE(detail::device_lost()) << "a plain injected error marked the device lost";
}

TEST_P(GpuFaultSweep, FilesToASeparateOutput)
{
  const bool out_of_core = GetParam();
  engine eng{gpu_config(out_of_core)};
  sweep_job job{{out_of_core ? "GpuOutOfCoreFilesSeparateKeys" : "GpuInCoreFilesSeparateKeys",
                 n, false, true, false}};
  const std::vector<std::uint64_t> per_site = count_calls(eng, job);
  const std::uint64_t total =
      std::accumulate(per_site.begin(), per_site.end(), std::uint64_t{0});
  sweep_tally tally;
  for (const std::uint64_t call : sweep_points(total, 60, 26))
    run_with_fault(eng, job, plan{.group = scope::all, .nth = call}, tally, false, true);
  EXPECT_GT(tally.failed, 0U);
}

std::string core_name(const ::testing::TestParamInfo<bool>& p)
{
  return p.param ? "OutOfCore" : "InCore";
}

INSTANTIATE_TEST_SUITE_P(Gpu, GpuFaultSweep, ::testing::Values(false, true), core_name);

// A sticky error (cudaErrorIllegalAddress from a kernel launch on): the job fails with a
// cuda_error, the in-place input keeps its pairs, and the process knows its devices are lost,
// which makes gpusortd exit for a restart (tests/service/fault_daemon_test.cpp).
class GpuDeviceLost : public test::gpu_test {};

/// The sticky-error job, run in a death test's child; exits 0 when every expectation held.
[[noreturn]] void run_sticky_job()
{
  engine eng{gpu_config(true)};
  sweep_job job{{"GpuOutOfCoreInPlacePairs", n, true, false, true}};
  job.reset();
  const held_resources before = held_resources::now();
  {
    const detail::fault::armed armed{
        plan{.group = scope::one, .target = site::launch, .nth = 3, .sticky = true}};
    EXPECT_THROW(job.run(eng), cuda_error);
  }
  EXPECT_TRUE(detail::device_lost());
  job.expect_input_kept("sticky launch failure");
  EXPECT_EQ(held_resources::now().fds, before.fds);
  std::exit(::testing::Test::HasFailure() ? 1 : 0);
}

TEST_F(GpuDeviceLost, AStickyErrorFailsTheJobAndMarksTheDevicesLost)
{
  // In a child process: the mark is the process's for good (a real lost context does not come
  // back), and the sweeps that run after this test in the same binary check that plain errors
  // leave it unset (they all failed that check when this test ran first in their process).
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(run_sticky_job(), ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace gpusort::test_support
