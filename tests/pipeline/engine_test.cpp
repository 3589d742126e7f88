// The engine's contract on every key type, order, distribution and size, checked by the
// order-plus-fingerprint verifier. Run twice by ctest: with the default configuration and with
// a tiny device budget that forces the two-round out-of-core path (see test_budget.hpp).
#include "test_budget.hpp"
#include "tests/support/sanitizer.hpp"

#include "core/generate.hpp"
#include "core/plan/chunk_plan.hpp"
#include "core/verify.hpp"
#include "pipeline/gpu_probe.hpp"

#include <gpusort/error.hpp>
#include <gpusort/gpusort.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace gpusort {
namespace {

enum class size_kind { plain, chunk_boundary };
struct test_size {
  std::uint64_t n;
  size_kind kind;
};

// 0, 1, 2, 3, 1000, primes near 200K and 1M, chunk size - 1 / + 0 / + 1, several million.
const std::vector<test_size> sizes{
    {0, size_kind::plain},
    {1, size_kind::plain},
    {2, size_kind::plain},
    {3, size_kind::plain},
    {1000, size_kind::plain},
    {199'999, size_kind::plain},
    {999'983, size_kind::plain},
    {test::tiny_capacity - 1, size_kind::chunk_boundary},
    {test::tiny_capacity, size_kind::chunk_boundary},
    {test::tiny_capacity + 1, size_kind::chunk_boundary},
    {3'000'017, size_kind::plain},
};

config config_for(std::uint64_t n, std::uint64_t element_bytes, size_kind kind)
{
  return test::config_for(n, element_bytes, kind == size_kind::chunk_boundary);
}

/// Whether the tiny budget must compensate sorted keys: every copy of a key (by its bits) lands
/// in one final chunk, so a key with more copies than the device holds overflows one whatever the
/// splitters are (all-equal keys always; detdupes and 16 distinct values at some sizes).
template <typename K>
bool must_compensate(const K* sorted, std::uint64_t n)
{
  const std::uint64_t capacity = test::tiny_capacity_for(n);
  std::uint64_t run = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    run = i > 0 && std::memcmp(&sorted[i], &sorted[i - 1], sizeof(K)) == 0 ? run + 1 : 1;
    if (run > capacity) return true;
  }
  return false;
}

/// What a job's report says of its round-1 runs: under GPUSORT_TEST_COMPRESS every two-round
/// job compressed (`on` encodes every chunk: its stream never exceeds the raw keys); otherwise
/// none did.
void expect_compression_reported(const sort_report& r, std::uint64_t key_bytes)
{
  if (r.rounds == 2 && test::compression() != run_compression::off) {
    EXPECT_EQ(r.round1_key_bytes, key_bytes);
    EXPECT_GT(r.round1_stored_bytes, 0U);
    if (test::compression() == run_compression::on) {
      // Streams never exceed the raw keys; each chunk's index adds 24 bytes per block.
      EXPECT_LE(r.round1_stored_bytes,
                key_bytes + r.chunks * (r.chunks + key_bytes / 8 / 2048 + 1) * 24);
    }
  } else {
    EXPECT_EQ(r.round1_key_bytes, 0U);
    EXPECT_EQ(r.round1_stored_bytes, 0U);
  }
}

template <typename K>
class EngineKeys : public ::testing::Test {};
using key_types = ::testing::Types<std::uint32_t, std::int32_t, std::uint64_t, std::int64_t,
                                   float, double>;
TYPED_TEST_SUITE(EngineKeys, key_types);

TYPED_TEST(EngineKeys, EveryDistributionOrderAndSizeSortsInPlace)
{
  using K = TypeParam;
  for (const distribution dist : all_distributions) {
    if (!applies_to(dist, dtype_of_v<K>)) continue;
    for (const order dir : {order::ascending, order::descending}) {
      for (const test_size& sz : sizes) {
        // Under a sanitizer (TSan: 6-7 times the time) the sizes above 200K are left out: they
        // were 19/20 of the elements here (the suite's longest tests under TSan, 3 minutes
        // each), and the prime near 200K still takes every path in both budgets, compensation
        // of few unique values included.
        if (sz.n > 200'000 && test_support::under_sanitizer()) continue;
        // The compressed pass (GPUSORT_TEST_COMPRESS) leaves out the largest size too: the
        // prime near 1M already gives runs of several blocks, and 3M took half its time.
        if (sz.n > 1'000'000 && test::compression() != run_compression::off) continue;
        SCOPED_TRACE(std::string{name_of(dist)} + (dir == order::ascending ? " asc" : " desc") +
                     " n=" + std::to_string(sz.n));
        std::vector<K> keys(sz.n);
        generate(std::span<K>{keys}, dist, sz.n + 7);
        const key_array view{keys.data(), keys.size(), dtype_of_v<K>};
        const fingerprint before = fingerprint_of(view);
        const sort_report r = engine{config_for(sz.n, sizeof(K), sz.kind)}.sort(
            sort_job{.keys = view}, sort_options{.direction = dir});
        const verify_result v = verify(view, std::nullopt, dir, before);
        ASSERT_TRUE(v.ok) << v.message << " (engine " << r.engine << ", d=" << r.chunks << ")";
        EXPECT_EQ(r.elements, sz.n);
        if (test::tiny_budget() && sz.kind == size_kind::plain && sz.n >= 1000) {
          EXPECT_EQ(r.rounds, 2);
          EXPECT_GE(r.chunks, 16U);
          // DSPS compensates a final chunk of too many equal keys; the scattered rounds
          // give such a key a bucket of its own (GPUSORT_SCATTER=on).
          const std::uint64_t heavy = r.compensated_chunks + r.equal_buckets;
          if (must_compensate(keys.data(), sz.n)) { EXPECT_GT(heavy, 0U); }
          if (dist == distribution::zero) { EXPECT_GT(heavy, 0U); }
        }
        if (test::tiny_budget() && sz.kind == size_kind::chunk_boundary) {
          EXPECT_EQ(r.rounds, sz.n <= test::tiny_capacity ? 1 : 2);
        }
        if (dist == distribution::uniform || dist == distribution::sorted) {
          EXPECT_EQ(r.compensated_chunks, 0U);
        }
        expect_compression_reported(r, sz.n * sizeof(K));
      }
    }
  }
}

TYPED_TEST(EngineKeys, SeparateOutputLeavesTheInputAlone)
{
  using K = TypeParam;
  for (const std::uint64_t n : {std::uint64_t{0}, std::uint64_t{5}, std::uint64_t{200'003}}) {
    std::vector<K> keys(n);
    generate(std::span<K>{keys}, distribution::uniform, 3);
    const std::vector<K> original = keys;
    std::vector<K> out(n);
    const key_array view{keys.data(), n, dtype_of_v<K>};
    engine{config_for(n, sizeof(K), size_kind::plain)}.sort(
        sort_job{.keys = view, .keys_out = out.data()},
        sort_options{.direction = order::descending});
    EXPECT_TRUE(test::same_bytes(keys, original));
    const verify_result v = verify(key_array{out.data(), n, dtype_of_v<K>}, std::nullopt,
                                   order::descending, fingerprint_of(view));
    EXPECT_TRUE(v.ok) << v.message;
  }
}

template <typename K>
class EnginePairs : public ::testing::Test {};
TYPED_TEST_SUITE(EnginePairs, key_types);

template <typename K, typename V>
void check_pairs(distribution dist, order dir, std::uint64_t n, bool separate)
{
  SCOPED_TRACE(std::string{name_of(dist)} + " n=" + std::to_string(n) + " value bytes " +
               std::to_string(sizeof(V)) + (separate ? " separate" : " in place"));
  std::vector<K> keys(n);
  std::vector<V> values(n);
  generate(std::span<K>{keys}, dist, n * 3 + 1);
  generate_values(value_array{values.data(), n, sizeof(V)}, 11);
  const std::vector<K> original_keys = keys;
  const std::vector<V> original_values = values;
  const key_array kview{keys.data(), n, dtype_of_v<K>};
  const value_array vview{values.data(), n, sizeof(V)};
  const fingerprint before = fingerprint_of(kview, vview);
  std::vector<K> kout(separate ? n : 0);
  std::vector<V> vout(separate ? n : 0);
  sort_job job{.keys = kview, .values = vview};
  if (separate) {
    job.keys_out = kout.data();
    job.values_out = vout.data();
  }
  const sort_report r = engine{config_for(n, sizeof(K) + sizeof(V), size_kind::plain)}.sort(
      job, sort_options{.direction = dir});
  const key_array result_keys{separate ? kout.data() : keys.data(), n, dtype_of_v<K>};
  const value_array result_values{separate ? vout.data() : values.data(), n, sizeof(V)};
  const verify_result v = verify(result_keys, result_values, dir, before);
  ASSERT_TRUE(v.ok) << v.message << " (engine " << r.engine << ", d=" << r.chunks << ")";
  if (separate) {
    EXPECT_TRUE(test::same_bytes(keys, original_keys));
    EXPECT_EQ(values, original_values);
  }
  if (test::tiny_budget() && n >= 1000 &&
      must_compensate(static_cast<const K*>(result_keys.data), n)) {
    EXPECT_GT(r.compensated_chunks + r.equal_buckets, 0U);
  }
  expect_compression_reported(r, n * sizeof(K));
}

TYPED_TEST(EnginePairs, ValuesTravelWithTheirKeys)
{
  using K = TypeParam;
  for (const distribution dist : all_distributions) {
    if (!applies_to(dist, dtype_of_v<K>)) continue;
    for (const std::uint64_t n : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{4099},
                                  std::uint64_t{300'007}}) {
      check_pairs<K, std::uint32_t>(dist, order::ascending, n, false);
      check_pairs<K, std::uint64_t>(dist, order::descending, n, true);
    }
  }
}

TEST(Engine, RejectsMalformedJobs)
{
  engine e{config{.devices = device_selection::cpu}};
  std::vector<std::uint64_t> keys(10);
  std::vector<std::uint32_t> values(9);
  const key_array kv{keys.data(), keys.size(), dtype::u64};
  EXPECT_THROW(e.sort(sort_job{.keys = kv, .values = value_array{values.data(), 9, 4}}),
               invalid_argument);
  EXPECT_THROW(e.sort(sort_job{.keys = kv, .values = value_array{values.data(), 10, 2}}),
               invalid_argument);
  EXPECT_THROW(e.sort(sort_job{.keys = key_array{nullptr, 5, dtype::u64}}), invalid_argument);
  std::vector<std::uint64_t> out(10);
  EXPECT_THROW(e.sort(sort_job{.keys = kv, .values = value_array{values.data(), 10, 4},
                               .keys_out = out.data()}),
               invalid_argument);
  EXPECT_THROW(e.sort(sort_job{.keys = kv, .values_out = out.data()}), invalid_argument);
}

TEST(Engine, TooSmallABudgetIsAConfigErrorNamingTheSmallestThatWorks)
{
  std::vector<std::uint64_t> keys(1'000'000);
  generate(std::span<std::uint64_t>{keys}, distribution::uniform, 1);
  const std::vector<std::uint64_t> original = keys;
  // 512 bytes: 32 keys a chunk, below n / max_chunks. (A small budget samples as many
  // candidates as its bound needs, up to every key of a job of 2^24 or fewer: 64 KiB, the
  // configuration's least, sorts these keys since issue 44.)
  config cfg{.devices = device_selection::cpu, .device_memory_budget = 512};
  try {
    engine{cfg}.sort(std::span<std::uint64_t>{keys});
    FAIL() << "a 512-byte budget cannot sort 1M u64 keys in two rounds";
  } catch (const config_error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("smallest budget that works is"), std::string::npos) << msg;
    // The named budget really works.
    const auto at = msg.find('(', msg.find("smallest budget"));
    const std::uint64_t named = std::stoull(msg.substr(at + 1));
    cfg.device_memory_budget = named;
    EXPECT_EQ(keys, original) << "a refused job must not touch its input";
    const sort_report r = engine{cfg}.sort(std::span<std::uint64_t>{keys});
    EXPECT_EQ(r.rounds, 2);
    EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  }
}

TEST(Engine, TheNamedBudgetWorksForEveryKeyTypeAndPairs)
{
  const std::uint64_t n = 300'007;
  for (const dtype t : {dtype::u32, dtype::i32, dtype::f32, dtype::u64, dtype::i64, dtype::f64}) {
    for (const std::uint32_t value_bytes : {0U, 8U}) {
      SCOPED_TRACE(std::string{name_of(t)} + " values " + std::to_string(value_bytes));
      std::vector<char> keys(n * size_of(t));
      std::vector<char> values(n * value_bytes);
      const key_array k{keys.data(), n, t};
      generate(k, distribution::uniform, 9);
      std::optional<value_array> v;
      if (value_bytes > 0) {
        v = value_array{values.data(), n, value_bytes};
        generate_values(*v, 9);
      }
      const fingerprint before = fingerprint_of(k, v);
      config cfg{.devices = device_selection::cpu, .device_memory_budget = 512};
      const sort_job job{.keys = k, .values = v};
      try {
        engine{cfg}.sort(job);
        FAIL() << "512 bytes cannot sort 300007 elements in two rounds";
      } catch (const config_error& e) {
        const std::string msg = e.what();
        const auto at = msg.find('(', msg.find("smallest budget that works is"));
        ASSERT_NE(at, std::string::npos) << msg;
        cfg.device_memory_budget = std::stoull(msg.substr(at + 1));
      }
      EXPECT_EQ(engine{cfg}.sort(job).rounds, 2);
      EXPECT_TRUE(verify(k, v, order::ascending, before).ok);
      // And a job of two elements sorts with the smallest budget the configuration takes.
      cfg.device_memory_budget = 64 * 1024;
      const key_array two{keys.data(), 2, t};
      const sort_job small{.keys = two,
                           .values = v ? std::optional<value_array>{value_array{
                                             values.data(), 2, value_bytes}}
                                       : std::nullopt};
      EXPECT_NO_THROW(engine{cfg}.sort(small));
    }
  }
}

TEST(Engine, ReportsProgressPerRound)
{
  std::vector<std::uint64_t> keys(200'000);
  generate(std::span<std::uint64_t>{keys}, distribution::uniform, 2);
  config cfg{.devices = device_selection::cpu, .device_memory_budget = 1 << 20};
  std::vector<progress_event> events;
  const sort_report r = engine{cfg}.sort(
      std::span<std::uint64_t>{keys},
      sort_options{.on_progress = [&](const progress_event& e) { events.push_back(e); }});
  ASSERT_EQ(r.rounds, 2);
  ASSERT_FALSE(events.empty());
  std::uint64_t last_done[3] = {0, 0, 0};
  bool finished[3] = {false, false, false};
  for (const progress_event& e : events) {
    ASSERT_TRUE(e.round == 1 || e.round == 2);
    EXPECT_EQ(e.rounds, 2) << "every event says the job has two rounds";
    EXPECT_EQ(e.bytes_total, keys.size() * 8);
    EXPECT_GE(e.bytes_done, last_done[e.round]);
    last_done[e.round] = e.bytes_done;
    if (e.bytes_done == e.bytes_total) finished[e.round] = true;
  }
  EXPECT_TRUE(finished[1]);
  EXPECT_TRUE(finished[2]);
  EXPECT_EQ(events.front().round, 1);
  EXPECT_EQ(events.back().round, 2);

  // In core: one round, and the events say so.
  events.clear();
  engine{config{.devices = device_selection::cpu}}.sort(
      std::span<std::uint64_t>{keys},
      sort_options{.on_progress = [&](const progress_event& e) { events.push_back(e); }});
  ASSERT_FALSE(events.empty());
  for (const progress_event& e : events) EXPECT_EQ(e.rounds, 1);
  EXPECT_EQ(events.back().bytes_done, events.back().bytes_total);
}

TEST(Engine, CancelledBeforeStartChangesNothing)
{
  std::vector<std::uint64_t> keys(100'000);
  generate(std::span<std::uint64_t>{keys}, distribution::uniform, 4);
  const std::vector<std::uint64_t> original = keys;
  sort_options opt;
  opt.cancel.cancel();
  for (const std::optional<std::uint64_t> budget :
       {std::optional<std::uint64_t>{}, std::optional<std::uint64_t>{1 << 20}}) {
    engine e{config{.devices = device_selection::cpu, .device_memory_budget = budget}};
    EXPECT_THROW(e.sort(std::span<std::uint64_t>{keys}, opt), cancelled);
    EXPECT_EQ(keys, original);
  }
}

TEST(Engine, CancelInRoundTwoLeavesAnInPlaceInputHoldingItsElements)
{
  for (const bool with_values : {false, true}) {
    std::vector<double> keys(300'000);
    std::vector<std::uint64_t> values(keys.size());
    generate(std::span<double>{keys}, distribution::nanmix, 5);
    generate_values(value_array{values.data(), values.size(), 8}, 6);
    const key_array kv{keys.data(), keys.size(), dtype::f64};
    const value_array vv{values.data(), values.size(), 8};
    const fingerprint before = with_values ? fingerprint_of(kv, vv) : fingerprint_of(kv);
    sort_options opt{.direction = order::descending};
    int round2_events = 0;
    opt.on_progress = [&](const progress_event& e) {
      // Cancel once round 2 has written some final chunks over the input.
      if (e.round == 2 && ++round2_events == 3) opt.cancel.cancel();
    };
    // Under GPUSORT_TEST_COMPRESS the restore decodes the compressed round-1 output.
    engine e{config{.devices = device_selection::cpu,
                    .device_memory_budget = 1 << 20,
                    .compress_runs = test::compression()}};
    sort_job job{.keys = kv};
    if (with_values) job.values = vv;
    EXPECT_THROW(e.sort(job, opt), cancelled);
    EXPECT_GE(round2_events, 3);
    const fingerprint after = with_values ? fingerprint_of(kv, vv) : fingerprint_of(kv);
    EXPECT_EQ(after, before) << "the input must hold exactly its original (key, value) pairs";
  }
}

TEST(Engine, ChunkBytesAloneSelectsTheOutOfCorePath)
{
  std::vector<std::int32_t> keys(100'000);
  generate(std::span<std::int32_t>{keys}, distribution::gaussian, 8);
  const fingerprint before = fingerprint_of(key_array{keys.data(), keys.size(), dtype::i32});
  config cfg{.devices = device_selection::cpu, .chunk_bytes = 40'000};
  const sort_report r = engine{cfg}.sort(std::span<std::int32_t>{keys});
  EXPECT_EQ(r.rounds, 2);
  EXPECT_GE(r.chunks, 10U);
  EXPECT_TRUE(
      verify(key_array{keys.data(), keys.size(), dtype::i32}, std::nullopt, order::ascending,
             before)
          .ok);
}

TEST(Engine, RegisteringHostMemoryOnTheCpuEngineIsEmpty)
{
  engine e{config{.devices = device_selection::cpu}};
  std::vector<std::uint64_t> keys(1000);
  EXPECT_FALSE(e.register_host(keys.data(), keys.size() * 8).pinned());
  EXPECT_FALSE(e.register_host(nullptr, 0).pinned());
}

TEST(Engine, SortsFromSeveralThreadsAtOnce)
{
  // The daemon runs CPU jobs of different clients side by side on one engine: direct and
  // out-of-core, keys and pairs.
  for (const bool out_of_core : {false, true}) {
    config cfg{.devices = device_selection::cpu};
    if (out_of_core) cfg.chunk_bytes = 64 * 1024;
    engine e{cfg};
    constexpr int threads = 6;
    std::vector<std::vector<std::uint64_t>> keys(threads);
    std::vector<std::vector<std::uint32_t>> values(threads);
    std::vector<fingerprint> before(threads);
    for (int t = 0; t < threads; ++t) {
      const std::size_t n = 200'000 + 7919 * static_cast<std::size_t>(t);
      keys[t].resize(n);
      values[t].resize(n);
      generate(std::span<std::uint64_t>{keys[t]}, distribution::staggered, 40 + t);
      std::iota(values[t].begin(), values[t].end(), 0U);
      before[t] = fingerprint_of(key_array{keys[t].data(), n, dtype::u64},
                                 value_array{values[t].data(), n, 4});
    }
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        if (t % 2 == 0) {
          e.sort_pairs(std::span<std::uint64_t>{keys[t]}, std::span<std::uint32_t>{values[t]});
        } else {
          e.sort_pairs(std::span<std::uint64_t>{keys[t]}, std::span<std::uint32_t>{values[t]},
                       {.direction = order::descending});
        }
      });
    }
    for (std::thread& w : workers) w.join();
    for (int t = 0; t < threads; ++t) {
      const std::size_t n = keys[t].size();
      EXPECT_TRUE(verify(key_array{keys[t].data(), n, dtype::u64},
                         value_array{values[t].data(), n, 4},
                         t % 2 == 0 ? order::ascending : order::descending, before[t])
                      .ok)
          << "thread " << t << (out_of_core ? " out of core" : " direct");
    }
  }
}

// `devices: auto` takes every usable GPU, and the host only where there is none.
TEST(Engine, DevicesAutoTakesTheGpusElseTheCpu)
{
  engine e{config{}};
  const auto devs = e.devices();
  ASSERT_FALSE(devs.empty());
  const std::size_t gpus = detail::probe_gpus().gpus.size();
  if (gpus == 0) {
    EXPECT_EQ(devs, std::vector<std::string>{"cpu"});
    return;
  }
  ASSERT_EQ(devs.size(), gpus);
  for (const std::string& d : devs) EXPECT_TRUE(d.starts_with("cuda:")) << d;
}

}  // namespace
}  // namespace gpusort
