// The executor's scheduling over several devices, and its behaviour when a device fails.
#include "core/generate.hpp"
#include "core/plan/chunk_plan.hpp"
#include "core/plan/scatter_buckets.hpp"
#include "core/verify.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/host_device.hpp"
#include "tests/support/captured_log.hpp"
#include "tests/support/scoped_env.hpp"

#include <gpusort/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace gpusort::detail {
namespace {

/// A host device that counts the tasks it ran and can fail at its k-th task of a round. A
/// failing device raises `failed`; a device given `wait_for` holds back in round `hold_round`
/// until that flag is up (at most 60 s, for loaded machines), so that the failing device
/// reaches its k-th task however the threads are scheduled.
class probe_device final : public device {
 public:
  probe_device(std::uint64_t budget, int index, int fail_round = 0, int fail_at = -1,
               std::atomic<bool>* failed = nullptr, int hold_round = 0,
               const std::atomic<bool>* wait_for = nullptr)
      : inner_{budget, 1, index},
        fail_round_{fail_round},
        fail_at_{fail_at},
        failed_{failed},
        hold_round_{hold_round},
        wait_for_{wait_for}
  {
  }
  [[nodiscard]] std::string name() const override { return inner_.name(); }
  [[nodiscard]] device_capacity capacity(const element_layout& l) const override
  {
    return inner_.capacity(l);
  }
  [[nodiscard]] std::uint64_t host_bytes(const element_layout& l, std::uint64_t elements,
                                         std::uint64_t slices) const override
  {
    return inner_.host_bytes(l, elements, slices);
  }
  void process(const element_layout& layout, task_queue& queue, job_context& ctx) override
  {
    ++round_;
    if (round_ == hold_round_ && wait_for_ != nullptr) {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{60};
      while (!wait_for_->load() && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds{1});
    }
    int ran = 0;
    // Take one task at a time through a single-task queue so the failure lands mid-round.
    while (const chunk_task* t = queue.pop()) {
      if (round_ == fail_round_ && ran == fail_at_) {
        if (failed_ != nullptr) failed_->store(true);
        throw cuda_error{"injected device failure"};
      }
      std::vector<chunk_task> one{*t};
      task_queue single{std::move(one)};
      inner_.process(layout, single, ctx);
      ++ran;
      tasks_.fetch_add(1);
    }
  }
  [[nodiscard]] int tasks() const { return tasks_.load(); }

 private:
  host_device inner_;
  int fail_round_;
  int fail_at_;
  std::atomic<bool>* failed_;
  int hold_round_;
  const std::atomic<bool>* wait_for_;
  int round_{};
  std::atomic<int> tasks_{0};
};

TEST(Executor, SeveralDevicesShareTheChunks)
{
  const std::uint64_t n = 2'000'000;
  std::vector<std::uint64_t> keys(n);
  generate(std::span<std::uint64_t>{keys}, distribution::staggered, 9);
  const key_array view{keys.data(), n, dtype::u64};
  const fingerprint before = fingerprint_of(view);
  std::vector<std::unique_ptr<probe_device>> owned;
  std::vector<device*> devs;
  for (int i = 0; i < 3; ++i) {
    owned.push_back(std::make_unique<probe_device>(std::uint64_t{4} << 20, i));
    devs.push_back(owned.back().get());
  }
  const element_layout layout{.type = dtype::u64, .key_bytes = 8};
  const chunk_plan plan = make_plan(n, common_capacity(devs, layout));
  ASSERT_GE(plan.d, 8U);
  sort_options opt;
  job_context ctx{opt, 8};
  const execution_stats stats =
      execute(job_arrays{keys.data(), nullptr, keys.data(), nullptr, n}, layout, plan, devs, ctx);
  EXPECT_EQ(stats.rounds, 2);
  EXPECT_TRUE(verify(view, std::nullopt, order::ascending, before).ok);
  int total = 0;
  for (const auto& d : owned) total += d->tasks();
  EXPECT_EQ(total, static_cast<int>(2 * plan.d));
}

TEST(Executor, AProfiledJobReportsThePlanAndItsPartsInOrder)
{
  const std::uint64_t n = 1'000'003;
  std::vector<std::uint64_t> keys(n);
  generate(std::span<std::uint64_t>{keys}, distribution::uniform, 4);
  host_device dev{std::uint64_t{1} << 20, 1, 0};
  std::vector<device*> devs{&dev};
  const element_layout layout{.type = dtype::u64, .key_bytes = 8};
  const chunk_plan plan = make_plan(n, common_capacity(devs, layout));
  ASSERT_GE(plan.d, 8U);
  sort_options opt;
  opt.profile = true;
  job_context ctx{opt, 8};
  execute(job_arrays{keys.data(), nullptr, keys.data(), nullptr, n}, layout, plan, devs, ctx);
  ASSERT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  const std::vector<stage_profile> profile = ctx.take_profile();
  const auto find = [&](const std::string& stage) -> const stage_profile* {
    for (const stage_profile& p : profile)
      if (p.device == "host" && p.round == 2 && p.stage == stage) return &p;
    return nullptr;
  };
  const stage_profile* whole = find("plan");
  ASSERT_NE(whole, nullptr);
  double at = 0, parts = 0;
  for (const char* name : {"plan: splitters", "plan: cuts", "plan: tasks"}) {
    const stage_profile* p = find(name);
    ASSERT_NE(p, nullptr) << name;
    // One after another from the plan's start, each within the whole.
    EXPECT_GE(p->first_start, at) << name;
    EXPECT_GE(p->last_end, p->first_start) << name;
    EXPECT_LE(p->last_end, whole->last_end) << name;
    EXPECT_DOUBLE_EQ(p->busy_seconds, p->last_end - p->first_start) << name;
    EXPECT_EQ(p->chunks, whole->chunks) << name;
    at = p->last_end;
    parts += p->busy_seconds;
  }
  EXPECT_LE(parts, whole->busy_seconds + 1e-9);
  EXPECT_DOUBLE_EQ(at, whole->last_end);
}

// At a budget small enough that the plan's bound needs more than the usual 2^20 candidates,
// round 2 cuts with the usual sample where its final chunks keep the bound (issue 44): a job
// of uniform keys does, sorts, and reports it among its stats.
TEST(Executor, ASmallBudgetsJobCutsWithTheUsualSampleWhereItKeepsTheBound)
{
  const std::uint64_t n = (std::uint64_t{1} << 22) + 15;
  std::vector<std::uint64_t> keys(n);
  generate(std::span<std::uint64_t>{keys}, distribution::uniform, 44);
  const key_array view{keys.data(), n, dtype::u64};
  const fingerprint before = fingerprint_of(view);
  host_device dev{std::uint64_t{1} << 30, 1, 0};
  std::vector<device*> devs{&dev};
  const element_layout layout{.type = dtype::u64, .key_bytes = 8};
  const chunk_plan plan =
      make_plan(n, device_capacity{.elements = min_feasible_capacity(n, 8) * 21 / 20},
                std::nullopt, 8);
  ASSERT_GT(plan.s, plan.quick_s);
  sort_options opt;
  opt.profile = true;
  job_context ctx{opt, 8};
  const execution_stats stats =
      execute(job_arrays{keys.data(), nullptr, keys.data(), nullptr, n}, layout, plan, devs, ctx);
  EXPECT_TRUE(verify(view, std::nullopt, order::ascending, before).ok);
  EXPECT_EQ(stats.splitter_candidates, plan.d * plan.quick_s);
  EXPECT_EQ(stats.compensated_chunks, 0U);
  for (const stage_profile& p : ctx.take_profile())
    EXPECT_NE(p.stage, "plan: first sample") << "the usual sample was kept: nothing dropped";
}

TEST(Executor, AFailingDeviceFailsTheJobAndRestoresAnInPlaceInput)
{
  for (const bool scattered : {false, true})
  for (const int fail_round : {1, 2}) {
    SCOPED_TRACE(std::string{scattered ? "scattered" : "DSPS"} + ", round " +
                 std::to_string(fail_round));
    const std::uint64_t n = 1'000'000;
    std::vector<float> keys(n);
    generate(std::span<float>{keys}, distribution::uniform, 10);
    const std::vector<float> original = keys;
    const key_array view{keys.data(), n, dtype::f32};
    const fingerprint before = fingerprint_of(view);
    std::atomic<bool> failed{false};
    probe_device good{std::uint64_t{2} << 20, 0, 0, -1, nullptr, fail_round, &failed};
    probe_device bad{std::uint64_t{2} << 20, 1, fail_round, 1, &failed};
    std::vector<device*> devs{&good, &bad};
    const element_layout layout{.type = dtype::f32, .key_bytes = 4};
    chunk_plan plan = make_plan(n, common_capacity(devs, layout));
    // The scattered rounds restore from their buckets' regions.
    if (scattered)
      plan.scatter_elements = scatter_tuning{}.round1_elements(n, ring_reserve(plan));
    sort_options opt;
    job_context ctx{opt, 4};
    EXPECT_THROW(execute(job_arrays{keys.data(), nullptr, keys.data(), nullptr, n}, layout, plan,
                         devs, ctx),
                 cuda_error);
    if (fail_round == 1)
      EXPECT_EQ(keys, original) << "round 1 never writes the input";
    else
      EXPECT_EQ(fingerprint_of(view), before) << "round 2 failures restore the elements";
  }
}

/// The plan of n elements on `devs` with the scattered rounds (plan.scatter_elements), as
/// GPUSORT_SCATTER=on makes it.
chunk_plan scattered_plan(std::uint64_t n, const std::vector<device*>& devs,
                          const element_layout& layout)
{
  chunk_plan plan = make_plan(n, common_capacity(devs, layout), std::nullopt, layout.key_bytes);
  plan.scatter_elements = scatter_tuning{}.round1_elements(n, ring_reserve(plan));
  return plan;
}

// The scattered rounds on two devices: the chunks' slices land in their buckets in chunk order
// whichever device took them, so a stable sort of pairs keeps equal keys in input order.
TEST(Executor, TheScatteredRoundsSortPairsStablyOnTwoDevices)
{
  const std::uint64_t n = 1'000'003;
  std::vector<std::uint64_t> keys(n);
  generate(std::span<std::uint64_t>{keys}, distribution::uniform, 45);
  for (std::uint64_t& k : keys) k %= 5000;  // about 200 of each key
  std::vector<std::uint32_t> values(n);
  std::iota(values.begin(), values.end(), 0U);
  std::vector<std::pair<std::uint64_t, std::uint32_t>> expected(n);
  for (std::uint64_t i = 0; i < n; ++i) expected[i] = {keys[i], values[i]};
  std::sort(expected.begin(), expected.end());  // (key, position): the stable order
  host_device a{std::uint64_t{2} << 20, 1, 0}, b{std::uint64_t{2} << 20, 1, 1};
  std::vector<device*> devs{&a, &b};
  const element_layout layout{.type = dtype::u64, .key_bytes = 8, .value_bytes = 4,
                              .stable = true};
  const chunk_plan plan = scattered_plan(n, devs, layout);
  ASSERT_GE(plan.d, 16U);
  sort_options opt;
  job_context ctx{opt, layout.bytes()};
  const execution_stats stats =
      execute(job_arrays{keys.data(), values.data(), keys.data(), values.data(), n}, layout,
              plan, devs, ctx);
  EXPECT_EQ(stats.rounds, 2);
  EXPECT_GT(stats.scatter_buckets, 1U);
  for (std::uint64_t i = 0; i < n; ++i) {
    ASSERT_EQ(keys[i], expected[i].first) << i;
    ASSERT_EQ(values[i], expected[i].second) << i;
  }
}

// An input the sample misses: every key the sample reads lies far from the rest, which all fall
// between two of them, so one bucket takes nearly every key and outgrows its region in round 1.
// The job then runs as DSPS (round 1 wrote only its buffer) and still sorts, on one device and
// on two (whose round stops both through the job's abort, which DSPS must not inherit).
TEST(Executor, ABucketOutgrowingItsRegionSendsTheJobBackToDsps)
{
  const std::uint64_t n = std::uint64_t{1} << 20;
  for (const std::size_t count : {1U, 2U}) {
    SCOPED_TRACE(std::to_string(count) + " device(s)");
    host_device a{std::uint64_t{2} << 20, 1, 0}, b{std::uint64_t{2} << 20, 1, 1};
    std::vector<device*> devs{&a, &b};
    devs.resize(count);
    const element_layout layout{.type = dtype::u64, .key_bytes = 8};
    const chunk_plan plan = scattered_plan(n, devs, layout);
    const std::uint64_t m = scatter_tuning{}.samples(n, ring_reserve(plan));
    ASSERT_LT(m, n / 4);
    std::vector<std::uint64_t> keys(n, 0);
    std::vector<bool> sampled(n, false);
    for (std::uint64_t i = 0; i < m; ++i) {
      const std::uint64_t at = scatter_sample_position(n, i);
      sampled[at] = true;
      keys[at] = (i + 1) << 40;  // spread: a bucket every q of them
    }
    for (std::uint64_t i = 0; i < n; ++i)
      if (!sampled[i]) keys[i] = (std::uint64_t{5} << 40) + 1 + (i * 7919) % n;  // one gap
    const key_array view{keys.data(), n, dtype::u64};
    const fingerprint before = fingerprint_of(view);
    sort_options opt;
    job_context ctx{opt, 8};
    const test::captured_log log{log_level::info};
    const execution_stats stats = execute(
        job_arrays{keys.data(), nullptr, keys.data(), nullptr, n}, layout, plan, devs, ctx);
    EXPECT_TRUE(verify(view, std::nullopt, order::ascending, before).ok);
    EXPECT_EQ(stats.rounds, 2);
    EXPECT_EQ(stats.scatter_buckets, 0U) << "DSPS sorted it";
    EXPECT_GE(log.count("outgrew its region"), 1U) << "in round 1, not before it";
  }
}

/// Sorts (keys, values) in place on `devs` by `plan` in two rounds and checks every key against
/// `expected` (std::sort's pairs) and that each value, an input position, came with its own key
/// of `input`: equal keys may hold their values in any order.
void sort_pairs_checked(std::vector<std::uint64_t>& keys, std::vector<std::uint32_t>& values,
                        const std::vector<std::pair<std::uint64_t, std::uint32_t>>& expected,
                        const std::vector<std::uint64_t>& input, const element_layout& layout,
                        const chunk_plan& plan, const std::vector<device*>& devs,
                        run_compression mode, execution_stats& stats)
{
  const std::uint64_t n = keys.size();
  sort_options opt;
  job_context ctx{opt, layout.bytes()};
  stats = execute(job_arrays{keys.data(), values.data(), keys.data(), values.data(), n}, layout,
                  plan, devs, ctx, nullptr, mode);
  EXPECT_EQ(stats.rounds, 2);
  for (std::uint64_t i = 0; i < n; ++i) {
    ASSERT_EQ(keys[i], expected[i].first) << i;
    ASSERT_EQ(input[values[i]], keys[i]) << i;
  }
}

/// Sorted runs of these keys do not pay for compression: half near 0, half near 2^64, so every
/// run of one block has a delta of 64 bits and keeps (c - 1)/c of its bytes encoded.
std::vector<std::uint64_t> extreme_keys(std::uint64_t n)
{
  std::vector<std::uint64_t> keys(n);
  generate(std::span<std::uint64_t>{keys}, distribution::uniform, 21);
  for (std::uint64_t& k : keys) k = (k & 1) != 0 ? k % 1000 : ~std::uint64_t{0} - k % 1000;
  return keys;
}

TEST(Executor, CompressedRunsSortWhateverEachChunkStores)
{
  const std::uint64_t n = 200'003;
  enum class kind { uniform, extremes, few };
  for (const run_compression mode : {run_compression::on, run_compression::automatic}) {
    for (const kind k : {kind::uniform, kind::extremes, kind::few}) {
      const bool extremes = k == kind::extremes;
      SCOPED_TRACE(std::string{mode == run_compression::on ? "on" : "auto"} +
                   (extremes ? " extreme keys" : k == kind::few ? " few keys" : " uniform keys"));
      std::vector<std::uint64_t> keys = extremes ? extreme_keys(n) : std::vector<std::uint64_t>(n);
      if (!extremes) generate(std::span<std::uint64_t>{keys}, distribution::uniform, 22);
      if (k == kind::few)
        for (std::uint64_t& key : keys) key %= 8;
      std::vector<std::uint32_t> values(n);
      std::iota(values.begin(), values.end(), 0U);
      std::vector<std::pair<std::uint64_t, std::uint32_t>> expected(n);
      for (std::uint64_t i = 0; i < n; ++i) expected[i] = {keys[i], values[i]};
      std::sort(expected.begin(), expected.end());
      const std::vector<std::uint64_t> original = keys;

      host_device a{std::uint64_t{480} << 10, 1, 0};
      host_device b{std::uint64_t{480} << 10, 1, 1};
      const std::vector<device*> devs{&a, &b};
      const element_layout layout{.type = dtype::u64, .key_bytes = 8, .value_bytes = 4};
      const chunk_plan plan = make_plan(n, common_capacity(devs, layout));
      ASSERT_LE(n / plan.d / plan.d, codec::block_keys) << "extreme runs need one block each";
      execution_stats stats;
      sort_pairs_checked(keys, values, expected, original, layout, plan, devs, mode, stats);
      EXPECT_EQ(stats.round1_key_bytes, n * 8);
      if (mode == run_compression::automatic && k != kind::few) {
        // Uniform keys keep far more than auto_compress_percent of their bytes here.
        EXPECT_EQ(stats.encoded_chunks, 0U) << "auto stores raw what does not pay";
        EXPECT_EQ(stats.round1_stored_bytes, n * 8);
      } else {
        EXPECT_EQ(stats.encoded_chunks, plan.d);
        if (!extremes) { EXPECT_LT(stats.round1_stored_bytes, n * 8 * 9 / 10); }
        if (k == kind::few) { EXPECT_LT(stats.round1_stored_bytes, n * 8 / 10); }
      }
    }
  }
}

// Issue 44: round 1 deals into g bins, from d (DSPS) down to 1 (no dealing), raw and
// compressed, on two host devices; every (key, value) pair checked against std::sort.
TEST(Executor, EveryDealingWidthSortsPairs)
{
  const std::uint64_t n = 400'009;  // prime: chunks and bins of two sizes
  std::vector<std::uint64_t> input(n);
  generate(std::span<std::uint64_t>{input}, distribution::staggered, 31);
  for (std::uint64_t i = 0; i < n; i += 7) input[i] %= 16;  // duplicates across chunks
  std::vector<std::pair<std::uint64_t, std::uint32_t>> expected(n);
  for (std::uint64_t i = 0; i < n; ++i) expected[i] = {input[i], static_cast<std::uint32_t>(i)};
  std::sort(expected.begin(), expected.end());
  host_device a{std::uint64_t{1} << 20, 1, 0};
  host_device b{std::uint64_t{1} << 20, 1, 1};
  const std::vector<device*> devs{&a, &b};
  const element_layout layout{.type = dtype::u64, .key_bytes = 8, .value_bytes = 4};
  const chunk_plan dsps = make_plan(n, common_capacity(devs, layout));
  ASSERT_GE(dsps.d, 8U);
  for (const run_compression mode : {run_compression::off, run_compression::on}) {
    for (const std::uint64_t g : {dsps.d, std::uint64_t{1}, std::uint64_t{2}, dsps.d / 2 + 1}) {
      SCOPED_TRACE("g=" + std::to_string(g) + " of d=" + std::to_string(dsps.d) +
                   (mode == run_compression::on ? ", compressed" : ""));
      // The bound for these bins, with the candidates their runs allow.
      chunk_plan plan = dsps;
      plan.bins = g;
      plan.s = std::min(shortest_sampled_run(n, plan.d, g), plan.s);
      plan.bound = strict_interval_bound(n, plan.d, plan.s, g);
      plan.sampled_chunk = g - 1;
      ASSERT_LT(plan.bound, plan.capacity);
      std::vector<std::uint64_t> keys = input;
      std::vector<std::uint32_t> values(n);
      std::iota(values.begin(), values.end(), 0U);
      execution_stats stats;
      sort_pairs_checked(keys, values, expected, input, layout, plan, devs, mode, stats);
    }
  }
}

/// A host device that does not know compressed runs: it drops every task's encode_target.
class unaware_device final : public device {
 public:
  [[nodiscard]] std::string name() const override { return inner_.name(); }
  [[nodiscard]] device_capacity capacity(const element_layout& l) const override
  {
    return inner_.capacity(l);
  }
  [[nodiscard]] std::uint64_t host_bytes(const element_layout& l, std::uint64_t elements,
                                         std::uint64_t slices) const override
  {
    return inner_.host_bytes(l, elements, slices);
  }
  void process(const element_layout& layout, task_queue& queue, job_context& ctx) override
  {
    while (const chunk_task* t = queue.pop()) {
      std::vector<chunk_task> one{*t};
      one.front().encode = nullptr;
      task_queue single{std::move(one)};
      inner_.process(layout, single, ctx);
    }
  }

 private:
  host_device inner_{std::uint64_t{1} << 20, 1};
};

TEST(Executor, ADeviceThatIgnoresItsEncodeTargetFailsTheJobBeforeRoundTwo)
{
  const std::uint64_t n = 300'007;
  std::vector<std::uint64_t> keys(n);
  generate(std::span<std::uint64_t>{keys}, distribution::uniform, 25);
  const std::vector<std::uint64_t> original = keys;
  unaware_device dev;
  const std::vector<device*> devs{&dev};
  const element_layout layout{.type = dtype::u64, .key_bytes = 8};
  const chunk_plan plan = make_plan(n, common_capacity(devs, layout));
  ASSERT_FALSE(plan.in_core());
  sort_options opt;
  job_context ctx{opt, 8};
  EXPECT_THROW(execute(job_arrays{keys.data(), nullptr, keys.data(), nullptr, n}, layout, plan,
                       devs, ctx, nullptr, run_compression::on),
               logic_error);
  EXPECT_EQ(keys, original) << "round 1 never writes the input";
}

TEST(Executor, ACompressedJobFailingInRoundTwoRestoresItsInPlaceInput)
{
  const std::uint64_t n = 1'000'000;
  std::vector<std::int32_t> keys(n);
  std::vector<std::uint64_t> values(n);
  generate(std::span<std::int32_t>{keys}, distribution::fewunique, 23);
  generate_values(value_array{values.data(), n, 8}, 24);
  const key_array kv{keys.data(), n, dtype::i32};
  const value_array vv{values.data(), n, 8};
  const fingerprint before = fingerprint_of(kv, vv);
  std::atomic<bool> failed{false};
  probe_device good{std::uint64_t{6} << 20, 0, 0, -1, nullptr, 2, &failed};
  probe_device bad{std::uint64_t{6} << 20, 1, 2, 1, &failed};
  std::vector<device*> devs{&good, &bad};
  const element_layout layout{.type = dtype::i32, .key_bytes = 4, .value_bytes = 8};
  const chunk_plan plan = make_plan(n, common_capacity(devs, layout));
  ASSERT_FALSE(plan.in_core());
  sort_options opt;
  job_context ctx{opt, layout.bytes()};
  EXPECT_THROW(execute(job_arrays{keys.data(), values.data(), keys.data(), values.data(), n},
                       layout, plan, devs, ctx, nullptr, run_compression::on),
               cuda_error);
  EXPECT_EQ(fingerprint_of(kv, vv), before) << "the decoded round-1 output restores the pairs";
}

/// A GPU takes the next tasks into one ring slot while they fit (task_queue::pop_if): the next
/// task only, never one further on, and none where the round has hooks (the lean path's tasks
/// go one at a time, in order). Devices popping side by side take every task once.
// The executor passes round 1's chunks to the sample as they are written and cuts round 2 with
// it: the same job sorts alike with GPUSORT_SAMPLE_BEHIND=0 (the sample read between the
// rounds), pairs stably (about 15 of each key), at 1/9 and at a budget whose first sample is the
// usual one.
TEST(Executor, RoundTwosSampleReadBehindRoundOneSortsAsReadBetweenTheRounds)
{
  const std::uint64_t n = 1'500'007;
  for (const bool small_budget : {false, true})
  for (const char* behind : {"1", "0"}) {
    SCOPED_TRACE(std::string{small_budget ? "small budget" : "1/9"} + ", behind " + behind);
    const test::scoped_env sw{"GPUSORT_SAMPLE_BEHIND", behind};
    std::vector<std::uint64_t> keys(n);
    generate(std::span<std::uint64_t>{keys}, distribution::uniform, 17);
    for (std::uint64_t& k : keys) k %= 100'000;
    std::vector<std::uint32_t> values(n);
    std::iota(values.begin(), values.end(), 0U);
    const std::vector<std::uint64_t> original = keys;
    host_device a{std::uint64_t{1} << 30, 1, 0};
    host_device b{std::uint64_t{1} << 30, 1, 1};
    std::vector<device*> devs{&a, &b};
    const element_layout layout{.type = dtype::u64, .key_bytes = 8, .value_bytes = 4,
                                .stable = true};
    const std::uint64_t cap = small_budget ? min_feasible_capacity(n, 12) * 21 / 20 : n / 9;
    const chunk_plan plan =
        make_plan(n, device_capacity{.elements = cap, .bytes_per_element = 12}, std::nullopt, 12);
    ASSERT_GE(plan.d, 9U);
    sort_options opt;
    job_context ctx{opt, layout.bytes()};
    std::vector<std::uint64_t> out(n);
    std::vector<std::uint32_t> out_values(n);
    const execution_stats stats = execute(
        job_arrays{keys.data(), values.data(), out.data(), out_values.data(), n}, layout, plan,
        devs, ctx);
    EXPECT_EQ(stats.rounds, 2);
    if (std::string{behind} == "0") {
      EXPECT_EQ(stats.sample_runs_behind, 0U);
    }
    EXPECT_LE(stats.sample_runs_behind, plan.d);
    // Against std::stable_sort of (key, index): keys in order, equal keys in input order.
    std::vector<std::uint32_t> order(n);
    std::iota(order.begin(), order.end(), 0U);
    std::stable_sort(order.begin(), order.end(),
                     [&](std::uint32_t x, std::uint32_t y) { return original[x] < original[y]; });
    for (std::uint64_t i = 0; i < n; ++i) {
      ASSERT_EQ(out[i], original[order[i]]) << i;
      ASSERT_EQ(out_values[i], order[i]) << i;
    }
  }
}

TEST(TaskQueue, PopIfTakesTheNextTaskOnlyWhereItFits)
{
  const auto tasks_of = [](std::initializer_list<std::uint64_t> counts) {
    std::vector<chunk_task> tasks;
    for (const std::uint64_t c : counts) tasks.push_back(chunk_task{.count = c});
    return tasks;
  };
  const auto small = [](const chunk_task& t) { return t.count < 10; };
  task_queue queue{tasks_of({5, 50, 3, 4})};
  ASSERT_EQ(queue.pop_if(small)->count, 5U);
  EXPECT_EQ(queue.pop_if(small), nullptr) << "the next task does not fit: none is taken";
  ASSERT_EQ(queue.pop()->count, 50U);
  ASSERT_EQ(queue.pop_if(small)->count, 3U);
  ASSERT_EQ(queue.pop_if(small)->count, 4U);
  EXPECT_EQ(queue.pop_if(small), nullptr);
  EXPECT_EQ(queue.pop(), nullptr);

  task_queue hooked{tasks_of({1, 2}), 0, task_hooks{.written = [](std::size_t) {}}};
  EXPECT_EQ(hooked.pop_if(small), nullptr) << "a round with hooks takes tasks one at a time";
  ASSERT_EQ(hooked.pop()->count, 1U);

  std::vector<chunk_task> many(20'000, chunk_task{.count = 1});
  task_queue shared{std::move(many)};
  std::atomic<std::uint64_t> taken{0}, judged_another{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      // The task pop_if returns is the one its predicate last looked at (what the predicate
      // judged serves the caller), even where another thread took the one it looked at first.
      const chunk_task* seen = nullptr;
      const auto look = [&](const chunk_task& c) {
        seen = &c;
        return small(c);
      };
      // A task taken twice would count twice, one never taken not at all.
      while (const chunk_task* t = i % 2 == 0 ? shared.pop() : shared.pop_if(look)) {
        taken += t->count;
        if (i % 2 == 1 && t != seen) ++judged_another;
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(taken.load(), 20'000U) << "every task taken once";
  EXPECT_EQ(judged_another.load(), 0U);
}

}  // namespace
}  // namespace gpusort::detail
