// The GPU variant of the fault sweep (issue 25, item 1), for the GPU machine: the CUDA calls of
// one in-core (resident) and one out-of-core GPU job fail in turn (sampled by a seeded stride:
// such a job makes hundreds of calls), each a clean error or a verified success, nothing left
// on the device or pinned, the input as promised, and the engine sorts the next job. The
// resident sort alone, on GPUs of small pieces: every call failing in turn leaves an in-place
// array its pairs, and a failed copy-out is done again. Then a sticky CUDA error (the context
// lost) is a cuda_error that marks the devices lost. Skips without a GPU.
#include "core/cuda/chunk_ops.cuh"
#include "core/cuda/sample_sort.cuh"
#include "core/fault.hpp"
#include "pipeline/cuda/cuda_device.hpp"
#include "pipeline/cuda/resident.hpp"
#include "pipeline/host_memory.hpp"
#include "tests/gpu/gpu_test_support.hpp"
#include "tests/gpu/resident_gpus.hpp"
#include "tests/support/captured_log.hpp"
#include "tests/support/engine_sweep.hpp"

#include <cstdlib>
#include <gpusort/gpusort.hpp>
#include <gpusort/log.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <iostream>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace gpusort::test_support {
namespace {

using detail::fault::plan;
using detail::fault::scope;
using detail::fault::site;

constexpr std::uint64_t n = std::uint64_t{1} << 20;

/// GPU 0 alone; out of core: chunks of n/16 pairs and a budget for n/4 of them (the margin that
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
    cfg.device_memory_budget = detail::ring_budget(8, 8, capacity, scratch);
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

// ---- the resident sort's final stage (issue 25): a failed copy-out of an in-place job ----

/// An in-place job of the resident sort alone (detail::sort_resident): i64 keys in descending
/// order, so that the keys go back from ordered bits on their way out (a stage that ran twice
/// over the same keys would show), with u64 values, in pinned or pageable memory. Checked
/// against std::sort and std::is_sorted, not the engine's verifier.
class resident_pairs_job {
 public:
  resident_pairs_job(std::uint64_t count, bool pinned)
      : n_{count},
        memory_{pinned ? detail::pinned_host_buffer(count * 16) : detail::host_buffer{count * 16}}
  {
    std::mt19937_64 rng{count};
    keys_.resize(count);
    values_.resize(count);
    const auto spread = static_cast<std::int64_t>(count / 2 + 1);
    for (std::uint64_t i = 0; i < count; ++i) {
      // Duplicates and negative keys: equal keys from different pieces, the sign bit flipped.
      keys_[i] = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(spread)) - spread / 2;
      values_[i] = i * 7919;
    }
    original_ = pairs(keys_.data(), values_.data());
  }

  void reset()
  {
    std::memcpy(keys(), keys_.data(), n_ * 8);
    std::memcpy(values(), values_.data(), n_ * 8);
  }

  void run(const std::vector<detail::cuda_device*>& gpus)
  {
    const detail::job_arrays a{.src_keys = keys(), .src_values = values(), .dst_keys = keys(),
                               .dst_values = values(), .n = n_};
    const detail::element_layout layout{.type = dtype::i64, .direction = order::descending,
                                        .key_bytes = 8, .value_bytes = 8};
    const sort_options options{.direction = order::descending};
    detail::job_context ctx{options, layout.bytes()};
    detail::sort_resident(a, layout, gpus, ctx);
  }

  /// The arrays hold the input's (key, value) pairs, as a multiset.
  [[nodiscard]] bool same_pairs() const { return pairs(keys(), values()) == original_; }
  [[nodiscard]] bool descending() const
  {
    return std::is_sorted(keys(), keys() + n_, std::greater<>{});
  }

 private:
  [[nodiscard]] std::int64_t* keys() const { return memory_.as<std::int64_t>(); }
  [[nodiscard]] std::uint64_t* values() const
  {
    return reinterpret_cast<std::uint64_t*>(memory_.as<std::int64_t>() + n_);
  }
  [[nodiscard]] std::vector<std::pair<std::int64_t, std::uint64_t>> pairs(
      const std::int64_t* k, const std::uint64_t* v) const
  {
    std::vector<std::pair<std::int64_t, std::uint64_t>> p(n_);
    for (std::uint64_t i = 0; i < n_; ++i) p[i] = {k[i], v[i]};
    std::sort(p.begin(), p.end());
    return p;
  }

  std::uint64_t n_;
  detail::host_buffer memory_;
  std::vector<std::int64_t> keys_;
  std::vector<std::uint64_t> values_;
  std::vector<std::pair<std::int64_t, std::uint64_t>> original_;
};

class GpuResidentFault : public test::gpu_test {};

TEST_F(GpuResidentFault, AnInPlaceJobKeepsItsPairsAndAFailedCopyOutIsDoneAgain)
{
  test::captured_log warnings;  // the sweep makes hundreds
  for (const std::size_t count : {std::size_t{1}, std::size_t{2}}) {
    if (test::probed_gpus().gpus.size() < count) continue;
    const auto owned = test::small_piece_gpus(count);
    std::vector<detail::cuda_device*> gpus;
    for (const auto& g : owned) gpus.push_back(g.get());
    // 1999: one piece per GPU (on one GPU a single run, whose keys go back to raw bits out of
    // place, in two ranges); 7919: seven pieces, two runs merged in five ranges.
    for (const std::uint64_t elements : {std::uint64_t{1999}, std::uint64_t{7919}}) {
      for (const bool pinned : {false, true}) {
        const std::string shape = std::to_string(count) + " GPU(s), n=" +
                                  std::to_string(elements) + (pinned ? ", pinned" : ", pageable");
        resident_pairs_job job{elements, pinned};
        // A clean run's CUDA calls, and its copies, once the GPUs hold their buffers (a
        // failure may make them allocate again: counted again before the last check).
        const auto clean_run = [&] {
          job.reset();
          const detail::fault::armed counting{plan{}};
          job.run(gpus);
          std::uint64_t cuda_calls = 0;
          for (std::size_t i = 0; i < detail::fault::site_count; ++i)
            if (detail::fault::is_cuda(static_cast<site>(i)))
              cuda_calls += detail::fault::calls(static_cast<site>(i));
          return std::pair{cuda_calls, detail::fault::calls(site::copy)};
        };
        clean_run();
        auto [total, copies] = clean_run();
        ASSERT_TRUE(job.descending() && job.same_pairs()) << shape << ": the clean run";
        ASSERT_GT(copies, 0U);
        std::uint64_t failed = 0;
        for (const std::uint64_t call : sweep_points(total, 400, 28)) {
          const std::string context = shape + ", CUDA call " + std::to_string(call);
          job.reset();
          std::string error;
          {
            const detail::fault::armed armed{plan{.group = scope::cuda, .nth = call}};
            try {
              job.run(gpus);
            } catch (const logic_error& e) {
              ADD_FAILURE() << context << ": an internal check failed: " << e.what();
            } catch (const std::exception& e) {
              error = e.what();
              ++failed;
            }
          }
          EXPECT_TRUE(job.same_pairs())
              << context << (error.empty() ? " (the job succeeded)" : ": " + error)
              << ": the in-place arrays lost or duplicated pairs";
          if (error.empty()) {
            EXPECT_TRUE(job.descending()) << context << ": succeeded unsorted";
          }
        }
        EXPECT_GT(failed, 0U) << shape;
        // The last copy of a clean run is the values' copy-out, past the point of no return:
        // it is done again, with one warning, and the job succeeds.
        std::tie(total, copies) = clean_run();
        warnings.clear();
        job.reset();
        {
          const detail::fault::armed armed{
              plan{.group = scope::one, .target = site::copy, .nth = copies}};
          EXPECT_NO_THROW(job.run(gpus)) << shape;
          EXPECT_EQ(detail::fault::injected(), 1U) << shape;
        }
        EXPECT_TRUE(job.descending()) << shape << ": the copy-out done again";
        EXPECT_TRUE(job.same_pairs()) << shape << ": the copy-out done again";
        EXPECT_EQ(warnings.count("copying the sorted result out again"), 1U) << shape;
      }
    }
  }
  EXPECT_FALSE(detail::device_lost()) << "a plain injected error marked the device lost";
}

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
