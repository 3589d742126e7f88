// engine::plan and the time model (issues 40 and 44): the model's properties on the H200's
// rates, its predictions against the H200 measurements of bench/results, and plan() against
// what sort() then does on the CPU engine, including budgets below the smallest that works.
#include "core/plan/chunk_plan.hpp"
#include "core/plan/scatter_buckets.hpp"
#include "core/plan/time_model.hpp"
#include "tests/support/scoped_env.hpp"

#include <gpusort/error.hpp>
#include <gpusort/gpusort.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace gpusort {
namespace {

using detail::model_job;
using detail::model_path;
using detail::scatter_tuning;

constexpr std::uint64_t gib = std::uint64_t{1} << 30;

/// A two-round job of n u64 keys in exactly the plan make_plan chooses for capacity `cap`.
model_job two_rounds(std::uint64_t n, std::uint64_t cap, std::uint32_t gpus = 1)
{
  const detail::chunk_plan p =
      detail::make_plan(n, detail::device_capacity{.elements = cap, .bytes_per_element = 32},
                        std::nullopt, 8);
  return model_job{.n = n,
                   .key_bytes = 8,
                   .path = model_path::two_rounds,
                   .d = p.d,
                   .g = p.runs_per_chunk(),
                   .candidates = p.d * p.s,
                   .devices = gpus};
}

model_job resident(std::uint64_t n, std::uint32_t gpus = 1)
{
  return model_job{.n = n,
                   .key_bytes = 8,
                   .path = model_path::resident,
                   .devices = detail::resident_share_gpus(n, 8, gpus)};
}

double seconds(const machine_model& m, const model_job& j) { return detail::predict(m, j).seconds; }

TEST(TimeModel, PhasesSumToTheTotalAndArePositive)
{
  const detail::model_prediction p =
      detail::predict(machine_model::h200(2), two_rounds(gib, gib / 8, 2));
  ASSERT_EQ(p.phases.size(), 3U);
  double sum = 0;
  for (const plan_phase& ph : p.phases) {
    EXPECT_GT(ph.seconds, 0) << ph.name;
    sum += ph.seconds;
  }
  EXPECT_DOUBLE_EQ(sum, p.seconds);
  EXPECT_EQ(detail::predict(machine_model::h200(), resident(0)).seconds, 0);
}

TEST(TimeModel, MonotoneInTheElements)
{
  for (const std::uint32_t gpus : {1U, 2U, 8U}) {
    const machine_model m = machine_model::h200(gpus);
    double last_resident = 0, last_two = 0;
    for (std::uint64_t n = gib / 64; n <= 8 * gib; n *= 2) {
      const double r = seconds(m, resident(n, gpus));
      const double t = seconds(m, two_rounds(n, std::max<std::uint64_t>(n / 8, 1 << 20), gpus));
      EXPECT_GT(r, last_resident) << n << " on " << gpus;
      EXPECT_GT(t, last_two) << n << " on " << gpus;
      last_resident = r;
      last_two = t;
    }
  }
}

TEST(TimeModel, TwoRoundsAreSlowerThanOneRoundTrip)
{
  for (const std::uint32_t gpus : {1U, 2U, 4U}) {
    const machine_model m = machine_model::h200(gpus);
    for (const std::uint64_t n : {gib / 8, gib, 4 * gib})
      EXPECT_GT(seconds(m, two_rounds(n, n / 8, gpus)), seconds(m, resident(n, gpus)))
          << n << " on " << gpus;
  }
}

TEST(TimeModel, MoreChunksAreNeverFasterBeyondTheFillAndDrainOptimum)
{
  // 32 GiB of u64 in d chunks, g = bins_for and the usual candidates (2^20 in all at most):
  // the ring's fill and drain (about T/d) favour more chunks up to an optimum of tens to a
  // few hundred; past it every chunk, slice and candidate costs, and no larger d is faster
  // again. (make_plan's own candidates can make a larger d faster: at the capacity where d =
  // 128 just fits, its bound needs 12.5M candidates, where d = 172 needs 1.4M.)
  const std::uint64_t n = 4 * gib;
  const machine_model m = machine_model::h200();
  std::vector<std::pair<std::uint64_t, double>> sweep;
  for (std::uint64_t d = 4; d <= 4096; d = d * 5 / 4 + 1) {
    const std::uint64_t g = detail::bins_for(n, d, 8);
    const std::uint64_t s = std::min(n / d / g, (std::uint64_t{1} << 20) / d);
    const model_job j{.n = n, .key_bytes = 8, .path = model_path::two_rounds, .d = d, .g = g,
                      .candidates = d * s, .devices = 1};
    sweep.emplace_back(d, seconds(m, j));
  }
  const auto best =
      std::min_element(sweep.begin(), sweep.end(),
                       [](const auto& a, const auto& b) { return a.second < b.second; });
  EXPECT_GT(best->first, 4U);
  EXPECT_LT(best->first, 512U);
  for (auto it = best + 1; it != sweep.end(); ++it)
    EXPECT_GE(it->second, (it - 1)->second) << "d " << it->first << " after d " << (it - 1)->first;
  EXPECT_GT(sweep.back().second, 1.3 * best->second);
  EXPECT_GT(sweep.front().second, best->second);
}

TEST(TimeModel, MoreGpusAreFasterUpToTheHostMemory)
{
  const std::uint64_t n = 4 * gib;  // 32 GiB of u64
  const double bytes = static_cast<double>(n) * 8;
  const double one_resident = seconds(machine_model::h200(1), resident(n, 1));
  // As pipeline_chunks does: about 16 chunks for each GPU.
  const double one_two = seconds(machine_model::h200(1), two_rounds(n, n / 16, 1));
  double last_resident = one_resident;
  for (const std::uint32_t gpus : {2U, 4U, 8U}) {
    const machine_model m = machine_model::h200(gpus);
    const double r = seconds(m, resident(n, gpus));
    const double t = seconds(m, two_rounds(n, n / (16 * gpus), gpus));
    EXPECT_LE(r, last_resident) << gpus;
    EXPECT_LT(t, one_two) << gpus;
    // Never faster than host memory moving every byte of every crossing: the resident path
    // crosses twice, the two rounds four times.
    const double host = m.host_dma * 1e9;
    EXPECT_GE(r, 2 * bytes / host) << gpus;
    EXPECT_GE(t, 4 * bytes / host) << gpus;
    last_resident = r;
  }
  EXPECT_LT(seconds(machine_model::h200(2), resident(n, 2)), 0.7 * one_resident);
  // Beyond two H200s the host memory, not the links, bounds the two rounds: four GPUs gain
  // little over two, where two gain a third over one.
  const double two = seconds(machine_model::h200(2), two_rounds(n, n / 32, 2));
  EXPECT_LT(two, 0.75 * one_two);
  EXPECT_GT(seconds(machine_model::h200(4), two_rounds(n, n / 64, 4)), 0.9 * two);
}

TEST(TimeModel, PageableIsNeverFasterThanPinned)
{
  for (const std::uint32_t gpus : {0U, 1U, 2U, 8U}) {
    machine_model pinned = gpus == 0 ? machine_model::host(2) : machine_model::h200(gpus);
    machine_model pageable = pinned;
    pageable.pinned = false;
    for (const model_job& j : {resident(gib, gpus), two_rounds(gib, gib / 8, gpus),
                               two_rounds(gib, gib / 256, gpus)})
      EXPECT_GE(seconds(pageable, j), seconds(pinned, j)) << gpus;
  }
  EXPECT_GT(seconds([] {
              machine_model m = machine_model::h200(1);
              m.pinned = false;
              return m;
            }(),
                    resident(gib)),
            1.05 * seconds(machine_model::h200(1), resident(gib)));
}

/// The H200 measurements the defaults come from (h200-20261129-chunks/call4/chunks.txt,
/// h200x2-20261130-s10, h200x2-20261130-s12 and the two-H200 runs): the model within
/// 15% of each. Measured numbers, not the model's own: a change of the model or of a rate that
/// drifts from them fails here.
TEST(TimeModel, WithinFifteenPercentOfTheH200Measurements)
{
  struct measured {
    const char* what;
    model_job job;
    std::uint32_t gpus;
    double seconds;
  };
  const std::uint64_t n8 = gib, n32 = 4 * gib;
  const auto at = [](std::uint64_t n, std::uint64_t d, std::uint64_t candidates,
                     std::uint32_t gpus, std::uint32_t lanes = 1) {
    return model_job{.n = n,
                     .key_bytes = 8,
                     .path = model_path::two_rounds,
                     .d = d,
                     .g = detail::bins_for(n, d, 8),
                     .candidates = candidates,
                     .devices = gpus,
                     .lanes = lanes};
  };
  const std::uint64_t usual = std::uint64_t{1} << 20;
  // The scattered rounds, with round-2 tasks of `task` elements (the ring DSPS's plan keeps:
  // two round-1 chunks at the smallest budget, a chunk and its bound's slack at 1/256).
  const auto scattered = [](std::uint64_t n, std::uint64_t d, std::uint64_t task,
                            std::uint32_t gpus) {
    const scatter_tuning tuning;
    const std::uint64_t samples = tuning.samples(n, task);
    return model_job{.n = n,
                     .key_bytes = 8,
                     .path = model_path::two_rounds,
                     .d = d,
                     .g = 1,
                     .candidates = samples,
                     .devices = gpus,
                     .buckets = tuning.buckets(n, task)};
  };
  const std::vector<measured> runs{
      // The resident sort in ranges (h200x2-20261130-s12/call1, gpu_bench --model).
      {"8 GiB fitting, 2 H200", resident(n8, 2), 2, 0.169},
      {"32 GiB fitting, 2 H200", resident(n32, 2), 2, 0.662},
      {"8 GiB fitting, 1 H200", resident(n8, 1), 1, 0.324},
      {"32 GiB fitting, 1 H200", resident(n32, 1), 1, 1.274},
      // Out of core at 1/8 (the same call; the ring's efficiency is fitted to s12's four runs).
      {"8 GiB 1/8, 1 H200 (d=41)", at(n8, 41, usual, 1), 1, 0.373},
      {"32 GiB 1/8, 1 H200 (d=40)", at(n32, 40, usual, 1), 1, 1.452},
      {"8 GiB 1/8, 2 H200 (d=41)", at(n8, 41, usual, 2), 2, 0.261},
      {"32 GiB 1/8, 2 H200 (d=40)", at(n32, 40, usual, 2), 2, 0.956},
      // Small budgets since the warp-a-slice gather and the usual sample's splitters
      // (h200x2-20261130-s10 calls 2 and 4; the middle of each pair of runs).
      {"8 GiB 1/256, 1 H200 (d=1594)", at(n8, 1594, usual, 1), 1, 0.657},
      {"8 GiB smallest, 1 H200 (d=4096)", at(n8, 4096, usual, 1), 1, 1.16},
      {"32 GiB 1/256, 1 H200 (d=1572)", at(n32, 1572, usual, 1), 1, 2.097},
      {"32 GiB 1/256, 2 H200 (d=1572)", at(n32, 1572, usual, 2), 2, 1.298},
      {"8 GiB 1/256, 2 H200 (d=1594)", at(n8, 1594, usual, 2), 2, 0.376},
      {"8 GiB smallest, 2 H200 (d=4096)", at(n8, 4096, usual, 2), 2, 0.70},
      // Two round-1 chunks a ring slot, sorted side by side (sort lanes; h200x2-20261130-s14
      // call 3, one H200 alone, and call 2, two).
      {"8 GiB smallest, 1 H200, lanes (d=4096)", at(n8, 4096, usual, 1, 2), 1, 1.004},
      {"8 GiB smallest, 2 H200, lanes (d=4096)", at(n8, 4096, usual, 2, 2), 2, 0.662},
      // The scattered rounds on one H200 with aligned bounds (h200-20261201-s19 call 1, the
      // store of scatter_lines on 16 blocks; round 1 is what scatter_seconds and scatter_rate
      // were fitted to).
      // Two H200 are not held to it: s17's store took 0.511 s at the smallest budget where
      // this model says 0.42 s, their round 1 at 163 us a chunk against one H200's 122
      // (h200x2-20261201-s17 call 2); not measured since.
      {"8 GiB smallest scattered, 1 H200 (d=4096)", scattered(n8, 4096, n8 / 2048, 1), 1,
       0.681},
      {"8 GiB 1/256 scattered, 1 H200 (d=1594)", scattered(n8, 1594, n8 / 1594 * 6 / 5, 1), 1,
       0.469},
      // Where DSPS gives way to them (h200-20261201-s19 call 4, DSPS, and call 5, scattered):
      // 1/32 and 1/128 of 8 GiB.
      {"8 GiB 1/32, 1 H200 (d=149)", at(n8, 149, usual, 1), 1, 0.378},
      {"8 GiB 1/128, 1 H200 (d=715)", at(n8, 715, usual, 1), 1, 0.561},
      {"8 GiB 1/128 scattered, 1 H200 (d=715)", scattered(n8, 715, n8 / 715 * 6 / 5, 1), 1,
       0.431},
  };
  for (const measured& r : runs) {
    const double predicted = seconds(machine_model::h200(r.gpus), r.job);
    EXPECT_NEAR(predicted / r.seconds, 1.0, 0.15)
        << r.what << ": predicted " << predicted << " s, measured " << r.seconds << " s";
  }
}

// ---- plan() against sort() on the CPU engine -------------------------------------------------

config cpu_config(std::optional<std::uint64_t> budget)
{
  config c;
  c.devices = device_selection::cpu;
  c.device_memory_budget = budget;
  return c;
}

std::vector<std::uint64_t> random_keys(std::uint64_t n)
{
  std::vector<std::uint64_t> keys(n);
  std::mt19937_64 rng{n};
  for (auto& k : keys) k = rng();
  return keys;
}

void expect_plan_is_sort(const job_plan& p, const sort_report& r, const char* what)
{
  EXPECT_EQ(p.path, r.path) << what;
  EXPECT_EQ(p.chunks, r.chunks) << what;
  EXPECT_EQ(p.rounds, r.rounds) << what;
  EXPECT_EQ(p.host_memory.fast_bytes, r.host_memory_bytes) << what;
  if (p.path != "none") {
    EXPECT_GT(p.seconds, 0) << what;
    EXPECT_FALSE(p.phases.empty()) << what;
  }
}

TEST(EnginePlan, SaysWhatTheSortThenDoes)
{
  for (const std::uint64_t n : {std::uint64_t{1000}, std::uint64_t{100000},
                                std::uint64_t{1} << 20}) {
    for (const std::optional<std::uint64_t> budget :
         {std::optional<std::uint64_t>{}, std::optional<std::uint64_t>{std::uint64_t{1} << 30},
          std::optional<std::uint64_t>{std::uint64_t{256} << 10},
          std::optional<std::uint64_t>{std::uint64_t{64} << 10}}) {
      engine e{cpu_config(budget)};
      const job_plan p =
          e.plan(sort_job{.keys = {nullptr, n, dtype::u64}});
      if (p.path == "none") continue;  // below the smallest budget: the next test's
      std::vector<std::uint64_t> keys = random_keys(n);
      const sort_report r = e.sort(std::span{keys});
      ASSERT_TRUE(std::is_sorted(keys.begin(), keys.end()));
      expect_plan_is_sort(p, r, (std::to_string(n) + " keys, budget " +
                                 std::to_string(budget.value_or(0)))
                                    .c_str());
    }
  }
  // Unbudgeted is direct, a large budget in core, a small one two rounds.
  EXPECT_EQ(engine{cpu_config({})}.plan(sort_job{.keys = {nullptr, 100000, dtype::u64}}).path,
            "direct");
  EXPECT_EQ(engine{cpu_config(gib)}.plan(sort_job{.keys = {nullptr, 100000, dtype::u64}}).path,
            "in core");
  const job_plan small =
      engine{cpu_config(std::uint64_t{256} << 10)}.plan(sort_job{.keys = {nullptr, 1 << 20,
                                                                           dtype::u64}});
  EXPECT_EQ(small.path, "two rounds");
  EXPECT_GT(small.chunks, 1U);
  EXPECT_GE(small.bins, 1U);
  EXPECT_GT(small.candidates, 0U);
}

TEST(EnginePlan, PairsAndStablePairsAgreeWithTheSort)
{
  const std::uint64_t n = 200000;
  engine e{cpu_config(std::uint64_t{256} << 10)};
  for (const bool stable : {false, true}) {
    std::vector<std::uint64_t> keys = random_keys(n);
    std::vector<std::uint32_t> values(n, 7);
    const sort_options o{.stable = stable};
    const job_plan p = e.plan(sort_job{.keys = {nullptr, n, dtype::u64},
                                       .values = value_array{nullptr, n, 4}},
                              o);
    const sort_report r = e.sort_pairs(std::span{keys}, std::span{values}, o);
    expect_plan_is_sort(p, r, stable ? "stable pairs" : "pairs");
  }
  std::vector<std::uint64_t> keys = random_keys(n);
  std::vector<std::uint32_t> indices(n);
  const argsort_job a{.keys = {keys.data(), n, dtype::u64}, .indices_out = indices.data(),
                      .index_bytes = 4};
  const job_plan p = e.plan(argsort_job{.keys = {nullptr, n, dtype::u64}, .index_bytes = 4});
  expect_plan_is_sort(p, e.argsort(a), "argsort");
}

TEST(EnginePlan, BelowTheSmallestBudgetSaysNoneAndTheSmallestStatedWorks)
{
  for (const std::uint64_t n : {std::uint64_t{20000}, std::uint64_t{1} << 18}) {
    // 64 bytes hold 4 elements of keys and scratch: more than 4096 chunks.
    const sort_job job{.keys = {nullptr, n, dtype::u64}};
    const job_plan refused = engine{cpu_config(64)}.plan(job);
    EXPECT_EQ(refused.path, "none") << n;
    EXPECT_NE(refused.refusal.find("smallest budget"), std::string::npos) << refused.refusal;
    EXPECT_EQ(refused.chunks, 0U);
    ASSERT_GT(refused.smallest_budget, 64U) << n;
    // The sort refuses too, naming the same budget.
    std::vector<std::uint64_t> keys = random_keys(n);
    try {
      engine{cpu_config(64)}.sort(std::span{keys});
      ADD_FAILURE() << "a sort below the smallest budget ran";
    } catch (const config_error& e) {
      EXPECT_NE(std::string{e.what()}.find(std::to_string(refused.smallest_budget)),
                std::string::npos)
          << e.what();
    }
    // At the smallest stated budget the plan exists and the sort runs as planned: the planner
    // refuses nothing that runs. One byte less has no plan.
    engine at{cpu_config(refused.smallest_budget)};
    const job_plan p = at.plan(job);
    EXPECT_EQ(p.path, "two rounds") << n;
    EXPECT_EQ(p.smallest_budget, refused.smallest_budget);
    const sort_report r = at.sort(std::span{keys});
    ASSERT_TRUE(std::is_sorted(keys.begin(), keys.end()));
    expect_plan_is_sort(p, r, "at the smallest budget");
    EXPECT_EQ(engine{cpu_config(refused.smallest_budget - 1)}.plan(job).path, "none") << n;
  }
}

TEST(EnginePlan, LeanWhereTheHostLimitAsksForIt)
{
  const std::uint64_t n = 1 << 20;
  engine e{cpu_config(std::uint64_t{1} << 20)};
  const sort_job job{.keys = {nullptr, n, dtype::u64}};
  const memory_estimate m = e.estimate_memory(job);
  ASSERT_GT(m.lean_bytes, 0U);
  ASSERT_LT(m.lean_bytes, m.fast_bytes);
  const sort_options o{.host_memory_limit = m.lean_bytes};
  const job_plan p = e.plan(job, o);
  EXPECT_EQ(p.path, "lean");
  EXPECT_EQ(p.host_memory.lean_bytes, m.lean_bytes);
  std::vector<std::uint64_t> keys = random_keys(n);
  const sort_report r = e.sort(std::span{keys}, o);
  ASSERT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  EXPECT_EQ(r.path, "lean");
  EXPECT_EQ(r.chunks, p.chunks);
  // Below the lean path's least, nothing runs and the plan says so.
  const job_plan none = e.plan(job, {.host_memory_limit = m.lean_bytes / 4});
  EXPECT_EQ(none.path, "none");
  EXPECT_FALSE(none.refusal.empty());
}

// The scattered rounds' regions take about 19% more host memory than DSPS's round-1 buffer: a
// job that fits the host memory limit only without them runs DSPS rather than lean, and the
// estimate, the plan and the report agree. (The host device takes them only when asked.)
TEST(EnginePlan, DspsWhereOnlyDspsFitsTheHostLimit)
{
  test::scoped_env scatter{"GPUSORT_SCATTER", "off"};
  const std::uint64_t n = 1 << 20;
  engine e{cpu_config(std::uint64_t{1} << 20)};
  const sort_job job{.keys = {nullptr, n, dtype::u64}};
  const memory_estimate dsps = e.estimate_memory(job);
  scatter.set("on");
  const memory_estimate scattered = e.estimate_memory(job);
  ASSERT_GE(scattered.fast_bytes, dsps.fast_bytes + n * 8 / 8);
  ASSERT_LT(scattered.lean_bytes, dsps.fast_bytes);

  const sort_options fits_dsps{.host_memory_limit = dsps.fast_bytes};
  EXPECT_EQ(e.estimate_memory(job, fits_dsps).fast_bytes, dsps.fast_bytes);
  const job_plan p = e.plan(job, fits_dsps);
  EXPECT_EQ(p.path, "two rounds");
  EXPECT_EQ(p.buckets, 0U);
  EXPECT_EQ(p.host_memory.fast_bytes, dsps.fast_bytes);
  std::vector<std::uint64_t> keys = random_keys(n);
  sort_report r = e.sort(std::span{keys}, fits_dsps);
  ASSERT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  EXPECT_EQ(r.path, "two rounds");
  EXPECT_EQ(r.scatter_buckets, 0U);
  EXPECT_EQ(r.host_memory_bytes, dsps.fast_bytes);

  // With room for the regions the same job takes the scattered rounds; without room for
  // DSPS's buffer either, the lean path.
  const sort_options fits_both{.host_memory_limit = scattered.fast_bytes};
  EXPECT_GT(e.plan(job, fits_both).buckets, 0U);
  keys = random_keys(n);
  r = e.sort(std::span{keys}, fits_both);
  ASSERT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  EXPECT_GT(r.scatter_buckets, 0U);
  EXPECT_EQ(e.plan(job, {.host_memory_limit = dsps.fast_bytes - 1}).path, "lean");
}

TEST(EnginePlan, AHypotheticalMachine)
{
  engine e{cpu_config({})};
  const sort_job job{.keys = {nullptr, 4 * gib, dtype::u64}};  // 32 GiB
  const job_plan two = e.plan(job, {}, machine_model::h200(2));
  EXPECT_EQ(two.path, "resident");
  EXPECT_EQ(two.devices, 2U);
  EXPECT_EQ(two.machine.gpus, 2U);
  const job_plan one = e.plan(job, {}, machine_model::h200(1));
  EXPECT_EQ(one.path, "resident");
  EXPECT_GT(one.seconds, two.seconds);
  engine budgeted{cpu_config(std::uint64_t{128} << 20)};  // 1/256 of the data
  const job_plan small = budgeted.plan(job, {}, machine_model::h200(1));
  EXPECT_EQ(small.path, "two rounds");
  EXPECT_GT(small.chunks, 1000U);
  EXPECT_GT(small.seconds, one.seconds);
  EXPECT_EQ(small.phases.size(), 3U);
  const job_plan tiny = engine{cpu_config(std::uint64_t{8} << 20)}.plan(job, {},
                                                                         machine_model::h200(1));
  EXPECT_EQ(tiny.path, "none");
  EXPECT_GT(tiny.smallest_budget, std::uint64_t{8} << 20);
  const job_plan at = engine{cpu_config(tiny.smallest_budget)}.plan(job, {},
                                                                     machine_model::h200(1));
  EXPECT_EQ(at.path, "two rounds");
}

}  // namespace
}  // namespace gpusort
