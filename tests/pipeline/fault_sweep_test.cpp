// Fault sweeps of the embedded engine on the host device (issue 25, item 1): for each
// representative job (in core and out of core through a tiny budget; in place and to a separate
// output; memory and file arrays; keys and pairs), every call a clean run makes is made to fail
// once (sampled by a seeded stride where there are many: test_support::sweep_points), and every
// class is made to fail for good from its first call. tests/support/engine_sweep.hpp says what
// each run must hold.
#include "core/fault.hpp"
#include "tests/support/engine_sweep.hpp"

#include <gpusort/gpusort.hpp>

#include <gtest/gtest.h>

#include <cerrno>
#include <numeric>

namespace gpusort::test_support {
namespace {

using detail::fault::plan;
using detail::fault::scope;
using detail::fault::site;

struct sweep_case {
  sweep_shape shape;
  bool out_of_core;
  /// Round 1 compresses its runs (compress_runs: on): a failed round 2 restores by decoding.
  bool compressed{};
};

/// The host device with a budget of about 2048 pairs: 20,000 pairs take ~10 chunks out of core.
config cpu_config(const sweep_case& c)
{
  config cfg{.devices = device_selection::cpu, .host_threads = 2};
  if (c.out_of_core) cfg.device_memory_budget = std::uint64_t{2048} * 2 * 16;
  if (c.compressed) cfg.compress_runs = run_compression::on;
  return cfg;
}

void PrintTo(const sweep_case& c, std::ostream* os) { *os << c.shape.name; }

std::string case_name(const ::testing::TestParamInfo<sweep_case>& info)
{
  return info.param.shape.name;
}

class EngineFaultSweep : public ::testing::TestWithParam<sweep_case> {};

// Each call of the clean run fails once: a clean error or a success, nothing leaked, the input
// as promised, and the engine sorts the next job.
TEST_P(EngineFaultSweep, EveryCallFailingOnceIsACleanErrorOrASuccess)
{
  const sweep_case& c = GetParam();
  engine eng{cpu_config(c)};
  sweep_job job{c.shape};
  const std::vector<std::uint64_t> per_site = count_calls(eng, job);
  RecordProperty("calls_per_class", detail::fault::summary());
  const std::uint64_t total = std::accumulate(per_site.begin(), per_site.end(), std::uint64_t{0});
  ASSERT_GT(total, 0U) << "the job made no call through a seam";
  sweep_tally tally;
  for (const std::uint64_t n : sweep_points(total, 80, 25))
    run_with_fault(eng, job, plan{.group = scope::all, .nth = n}, tally);
  EXPECT_EQ(tally.injected, tally.runs) << "every run had its one failure";
  EXPECT_GT(tally.failed, 0U);
  RecordProperty("calls", std::to_string(total));
  RecordProperty("failed_runs", std::to_string(tally.failed));
}

// Each class that the job calls fails for good from its first call (a disk or device that
// stays broken): a clean error every time, and the engine recovers once it heals.
TEST_P(EngineFaultSweep, EachClassFailingForGoodIsACleanError)
{
  const sweep_case& c = GetParam();
  engine eng{cpu_config(c)};
  sweep_job job{c.shape};
  const std::vector<std::uint64_t> per_site = count_calls(eng, job);
  sweep_tally tally;
  for (std::size_t i = 0; i < per_site.size(); ++i) {
    if (per_site[i] == 0) continue;
    const auto s = static_cast<site>(i);
    // The host device's launch seam with a plain CUDA error (cudaErrorInvalidValue): a sticky
    // one would mark this test process's devices lost, which is the daemon test's business.
    const int error = detail::fault::is_cuda(s) ? 1 : 0;
    for (const std::uint64_t n : {std::uint64_t{1}, (per_site[i] + 1) / 2})
      run_with_fault(eng, job,
                     plan{.group = scope::one, .target = s, .nth = n, .sticky = true,
                          .error = error},
                     tally);
  }
  EXPECT_EQ(tally.failed, tally.runs) << "a class failing for good fails the job";
}

// EINTR is not an error: every read and write retries it, so the job succeeds.
TEST_P(EngineFaultSweep, AnInterruptedReadOrWriteIsRetried)
{
  const sweep_case& c = GetParam();
  if (!c.shape.files) GTEST_SKIP() << "memory arrays make no read or write calls";
  engine eng{cpu_config(c)};
  sweep_job job{c.shape};
  const std::vector<std::uint64_t> per_site = count_calls(eng, job);
  sweep_tally tally;
  for (const site s : {site::read, site::write})
    for (const std::uint64_t n :
         sweep_points(per_site[static_cast<std::size_t>(s)], 16, 7))
      run_with_fault(eng, job, plan{.group = scope::one, .target = s, .nth = n, .error = EINTR},
                     tally, /*must_succeed=*/true);
  EXPECT_EQ(tally.succeeded, tally.runs);
}

constexpr std::uint64_t n = 20'000;

INSTANTIATE_TEST_SUITE_P(
    HostDevice, EngineFaultSweep,
    ::testing::Values(
        sweep_case{{"InCoreInPlacePairs", n, true, false, true}, false},
        sweep_case{{"InCoreSeparateKeys", n, false, false, false}, false},
        sweep_case{{"InCoreFilesSeparatePairs", n, false, true, true}, false},
        sweep_case{{"OutOfCoreInPlacePairs", n, true, false, true}, true},
        sweep_case{{"OutOfCoreSeparatePairs", n, false, false, true}, true},
        sweep_case{{"OutOfCoreFilesInPlacePairs", n, true, true, true}, true},
        sweep_case{{"OutOfCoreFilesSeparateKeys", n, false, true, false}, true},
        sweep_case{{"OutOfCoreCompressedInPlacePairs", n, true, false, true}, true, true}),
    case_name);

}  // namespace
}  // namespace gpusort::test_support
