// Round 2's first sample read behind round 1 (pipeline/sample_behind.hpp): a reader thread fed
// by round 1's writes from any thread, stopped between groups of candidates by take() or by a
// failed round. Its own program so that the sanitizer subset runs it under ASan and TSan.
#include "core/plan/chunk_plan.hpp"
#include "core/plan/slicing.hpp"
#include "core/plan/splitters.hpp"
#include "pipeline/sample_behind.hpp"

#include <gpusort/error.hpp>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <numeric>
#include <thread>
#include <vector>

namespace gpusort::detail {
namespace {

/// Polls `done` for up to 60 s (a loaded machine schedules the reader late).
template <typename F>
bool eventually(F&& done)
{
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{60};
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds{1});
  }
  return true;
}

// Round 2's sample read behind round 1: the runs of chunks round 1 wrote are read as they come,
// from any thread, once each; the rest when round 1 has ended. Keys are their own positions
// times 3, so each candidate says where it was read, and after the reads behind every key grows
// by 1, so each says when: a run read behind keeps multiples of 3.
TEST(SampleBehind, ReadsTheWrittenChunksBehindAndTheRestWhenTaken)
{
  const std::uint64_t n = (std::uint64_t{1} << 22) + 15;
  for (const bool small_budget : {false, true}) {
    SCOPED_TRACE(small_budget ? "the usual sample, random places" : "piece ends");
    const std::uint64_t cap = small_budget ? min_feasible_capacity(n, 8) * 21 / 20 : n / 9;
    const chunk_plan plan =
        make_plan(n, device_capacity{.elements = cap, .bytes_per_element = 8}, std::nullopt, 8);
    ASSERT_GE(plan.d, 4U);
    ASSERT_EQ(first_places(plan) == candidate_places::random, small_budget);
    std::vector<std::uint64_t> keys(n);
    for (std::uint64_t p = 0; p < n; ++p) keys[p] = 3 * p;
    sample_behind<std::uint64_t> sample{plan, keys.data()};
    // The even chunks, from two threads, chunk 0 twice.
    std::uint64_t evens = 0;
    {
      std::jthread a{[&] {
        for (std::uint64_t i = 0; i < plan.d / 2; i += 2) sample.written(i);
      }};
      std::jthread b{[&] {
        for (std::uint64_t i = plan.d / 2 + plan.d / 2 % 2; i < plan.d; i += 2) sample.written(i);
        sample.written(0);
      }};
    }
    for (std::uint64_t i = 0; i < plan.d; i += 2) ++evens;
    ASSERT_TRUE(eventually([&] { return sample.read_behind() == evens; }))
        << sample.read_behind() << " of " << evens << " runs read behind";
    for (std::uint64_t& k : keys) ++k;
    const std::vector<std::uint64_t> c = sample.take();
    EXPECT_EQ(sample.read_behind(), evens) << "chunk 0 is read once";
    const std::uint64_t s = plan.first_s();
    ASSERT_EQ(c.size(), plan.d * s);
    for (std::uint64_t i = 0; i < plan.d; ++i) {
      const run r = sampled_run(plan, i);
      for (std::uint64_t x = 0; x < s; ++x) {
        const std::uint64_t v = c[i * s + x];
        ASSERT_EQ(v % 3, i % 2 == 0 ? 0U : 1U) << "run " << i << " read behind or at the end";
        const std::uint64_t at = v / 3 - r.offset;
        if (small_budget) {
          ASSERT_GE(at, x * r.length / s) << "run " << i << ", candidate " << x;
          ASSERT_LT(at, (x + 1) * r.length / s) << "run " << i << ", candidate " << x;
        } else {
          ASSERT_EQ(at, candidate_position(x, s, r.length)) << "run " << i << ", candidate " << x;
        }
      }
    }
  }
}

// Round 1's last chunks are written just before the plan takes the sample: take() stops the
// reader between two groups of a run and reads the rest of that run and of every other; whatever
// the moment, every candidate is the run's key at its place.
TEST(SampleBehind, TakenRightAfterTheLastWriteItHoldsEveryCandidate)
{
  const std::uint64_t n = std::uint64_t{1} << 23;
  const chunk_plan plan =
      make_plan(n, device_capacity{.elements = n / 6, .bytes_per_element = 8}, std::nullopt, 8);
  ASSERT_GE(plan.d, 6U);
  ASSERT_EQ(first_places(plan), candidate_places::piece_ends);
  ASSERT_GT(plan.first_s(), 2 * candidate_group) << "runs of several groups";
  std::vector<std::uint64_t> keys(n);
  std::iota(keys.begin(), keys.end(), std::uint64_t{0});
  for (int repeat = 0; repeat < 20; ++repeat) {
    sample_behind<std::uint64_t> sample{plan, keys.data()};
    for (std::uint64_t i = 0; i < plan.d; ++i) sample.written(i);
    if (repeat % 2 == 1) std::this_thread::sleep_for(std::chrono::microseconds{50 * repeat});
    const std::vector<std::uint64_t> c = sample.take();
    const std::uint64_t s = plan.first_s();
    for (std::uint64_t i = 0; i < plan.d; ++i) {
      const run r = sampled_run(plan, i);
      for (std::uint64_t x = 0; x < s; ++x)
        ASSERT_EQ(c[i * s + x], r.offset + candidate_position(x, s, r.length))
            << "repeat " << repeat << ", run " << i << ", candidate " << x;
    }
  }
}

// A round 1 that fails leaves its reads behind unfinished: the reader stops where it is, with
// chunks still queued, and nothing is read once the object is gone.
TEST(SampleBehind, StopsWithChunksQueuedWhenRoundOneFails)
{
  const std::uint64_t n = std::uint64_t{1} << 22;
  const chunk_plan plan =
      make_plan(n, device_capacity{.elements = n / 40, .bytes_per_element = 8}, std::nullopt, 8);
  ASSERT_GE(plan.d, 40U);
  for (int repeat = 0; repeat < 20; ++repeat) {
    auto keys = std::make_unique<std::vector<std::uint64_t>>(n);
    std::iota(keys->begin(), keys->end(), std::uint64_t{0});
    {
      sample_behind<std::uint64_t> sample{plan, keys->data()};
      for (std::uint64_t i = 0; i < plan.d; ++i) sample.written(i);
      EXPECT_THROW(sample.written(plan.d), logic_error);
    }
    keys.reset();  // freed: a reader still at work would read freed memory (ASan)
  }
}

}  // namespace
}  // namespace gpusort::detail
