// The lean path (issue 39) on the host device: every key type, order, distribution, pairs,
// stable sorts and argsorts, in place and into separate outputs, within host memory limits
// that leave no room for the fast path; checked against std::stable_sort references
// (tests/support/stable_reference.hpp), never against the code under test. Also the planner's
// promises, the refusals, a failure and a cancellation that restore the array, and the peak
// memory of a large array within a small limit.
#include "tests/support/sanitizer.hpp"
#include "tests/support/stable_reference.hpp"

#include "core/fault.hpp"
#include "core/generate.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/host_device.hpp"
#include "pipeline/lean/lean.hpp"
#include "pipeline/lean/plan.hpp"

#include <gpusort/error.hpp>
#include <gpusort/gpusort.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

namespace gpusort {
namespace {

/// GPUSORT_LEAN_TEST_GPUS=1 (scripts/gpu-check.sh, with GPUSORT_LEAN=1): the same suites on
/// the GPUs, whose fast path takes less host memory than the lean path at these sizes, so the
/// switch takes them lean.
bool on_gpus()
{
  const char* v = std::getenv("GPUSORT_LEAN_TEST_GPUS");
  return v != nullptr && std::string{v} == "1";
}

config cpu_config()
{
  config cfg;
  cfg.devices = on_gpus() ? device_selection::automatic : device_selection::cpu;
  return cfg;
}

/// The least limit the lean path takes for `job`, checked to be below the fast path's, so that
/// a job with it runs lean.
template <typename Job>
std::uint64_t lean_limit(const engine& eng, const Job& job, const sort_options& options)
{
  const memory_estimate e = eng.estimate_memory(job, options);
  EXPECT_GT(e.lean_bytes, 0U) << e.lean_refusal;
  if (!on_gpus()) {
    EXPECT_LT(e.lean_bytes, e.fast_bytes);
  }
  return e.lean_bytes;
}

template <typename K>
std::vector<test::bits_of<K>> sorted_bits(const std::vector<K>& keys)
{
  std::vector<test::bits_of<K>> b(keys.size());
  if (!keys.empty()) std::memcpy(b.data(), keys.data(), keys.size() * sizeof(K));
  std::sort(b.begin(), b.end());
  return b;
}

template <typename K>
std::vector<K> reference_keys(const std::vector<K>& keys, order dir, float_order floats)
{
  const std::vector<std::uint64_t> ref = test::reference_argsort(keys, dir, floats);
  std::vector<K> out(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) out[i] = keys[ref[i]];
  return out;
}

template <typename K>
bool ordered(const std::vector<K>& k, order dir, float_order floats)
{
  for (std::size_t i = 1; i < k.size(); ++i)
    if (test::key_before(k[i], k[i - 1], dir, floats)) return false;
  return true;
}

template <typename K>
class LeanKeys : public ::testing::Test {};
using key_types = ::testing::Types<std::uint32_t, std::int32_t, std::uint64_t, std::int64_t,
                                   float, double>;
TYPED_TEST_SUITE(LeanKeys, key_types);

// Sizes: a prime, one a little past a power of two, and (outside the sanitizers) a few million.
std::vector<std::uint64_t> lean_sizes()
{
  if (test_support::under_sanitizer()) return {200'003};
  return {200'003, 1'048'583, 3'000'017};
}

TYPED_TEST(LeanKeys, EveryDistributionAndOrderInPlaceMatchesTheReference)
{
  using K = TypeParam;
  engine eng{cpu_config()};
  for (const std::uint64_t n : lean_sizes()) {
    for (const distribution d : all_distributions) {
      if (!applies_to(d, dtype_of_v<K>)) continue;
      for (const order dir : {order::ascending, order::descending}) {
        std::vector<K> keys(n);
        generate(std::span<K>{keys}, d, n + static_cast<std::uint64_t>(d));
        const std::vector<K> expected = reference_keys(keys, dir, float_order::total);
        sort_options options{.direction = dir};
        const sort_job job{.keys = {keys.data(), n, dtype_of_v<K>}};
        options.host_memory_limit = lean_limit(eng, job, options);
        const sort_report r = eng.sort(job, options);
        EXPECT_EQ(r.path, "lean");
        EXPECT_LE(r.host_memory_bytes, *options.host_memory_limit);
        EXPECT_TRUE(test::equal_bytes(keys, expected))
            << "n " << n << ", " << name_of(d) << ", " << (dir == order::ascending ? "asc" : "desc");
      }
    }
  }
}

TYPED_TEST(LeanKeys, PairsKeepEachValueWithItsKeyAndSeparateOutputsLeaveTheInput)
{
  using K = TypeParam;
  engine eng{cpu_config()};
  const std::uint64_t n = 500'009;
  for (const distribution d : {distribution::uniform, distribution::fewunique,
                               distribution::zero, distribution::sorted}) {
    std::vector<K> keys(n);
    generate(std::span<K>{keys}, d, 7);
    const std::vector<K> original = keys;
    std::vector<std::uint64_t> values(n);
    std::iota(values.begin(), values.end(), std::uint64_t{0});
    sort_options options;
    const sort_job job{.keys = {keys.data(), n, dtype_of_v<K>},
                       .values = value_array{values.data(), n, 8}};
    options.host_memory_limit = lean_limit(eng, job, options);
    EXPECT_EQ(eng.sort(job, options).path, "lean");
    EXPECT_TRUE(test::equal_bytes(keys, reference_keys(original, order::ascending,
                                                       float_order::total)));
    std::vector<std::uint64_t> seen = values;
    std::sort(seen.begin(), seen.end());
    for (std::uint64_t i = 0; i < n; ++i) ASSERT_EQ(seen[i], i) << "values lost";
    for (std::uint64_t i = 0; i < n; ++i)
      ASSERT_EQ(std::memcmp(&keys[i], &original[values[i]], sizeof(K)), 0) << "pair torn at " << i;

    // Into separate outputs: the input stays as it was.
    std::vector<K> in = original;
    std::vector<std::uint32_t> vin(n);
    std::iota(vin.begin(), vin.end(), 0U);
    std::vector<K> out(n);
    std::vector<std::uint32_t> vout(n);
    const sort_job separate{.keys = {in.data(), n, dtype_of_v<K>},
                            .values = value_array{vin.data(), n, 4},
                            .keys_out = out.data(),
                            .values_out = vout.data()};
    sort_options o2{.direction = order::descending};
    o2.host_memory_limit = lean_limit(eng, separate, o2);
    EXPECT_EQ(eng.sort(separate, o2).path, "lean");
    EXPECT_TRUE(test::equal_bytes(in, original)) << "the input changed";
    EXPECT_TRUE(ordered(out, order::descending, float_order::total));
    for (std::uint64_t i = 0; i < n; ++i)
      ASSERT_EQ(std::memcmp(&out[i], &original[vout[i]], sizeof(K)), 0) << "pair torn at " << i;
  }
}

TYPED_TEST(LeanKeys, StableSortsAndArgsortsMatchTheReferenceInBothFloatOrders)
{
  using K = TypeParam;
  engine eng{cpu_config()};
  const std::uint64_t n = test_support::under_sanitizer() ? 200'003 : 600'011;
  for (const std::uint64_t distinct : {std::uint64_t{7}, std::uint64_t{5000}}) {
    const std::vector<K> keys = test::tied_keys<K>(n, distinct, distinct);
    for (const float_order floats : {float_order::total, float_order::numpy}) {
      for (const order dir : {order::ascending, order::descending}) {
        const std::vector<std::uint64_t> ref = test::reference_argsort(keys, dir, floats);
        std::vector<K> ref_keys(n);
        for (std::uint64_t i = 0; i < n; ++i) ref_keys[i] = keys[ref[i]];
        const std::string what = std::string{floats == float_order::numpy ? "numpy" : "total"} +
                                 (dir == order::ascending ? " asc" : " desc") + ", " +
                                 std::to_string(distinct) + " distinct";
        {  // stable pairs in place: the values are the positions
          std::vector<K> k = keys;
          std::vector<std::uint64_t> v(n);
          std::iota(v.begin(), v.end(), std::uint64_t{0});
          sort_options o{.direction = dir, .stable = true, .floats = floats};
          const sort_job job{.keys = {k.data(), n, dtype_of_v<K>},
                             .values = value_array{v.data(), n, 8}};
          o.host_memory_limit = lean_limit(eng, job, o) * 2;
          const sort_report r = eng.sort(job, o);
          EXPECT_EQ(r.path, "lean") << what;
          EXPECT_EQ(v, ref) << "stable pairs: values, " << what;
          EXPECT_TRUE(test::equal_bytes(k, ref_keys)) << "stable pairs: keys, " << what;
        }
        {  // stable keys alone: NumPy's equal floats of other bits wait aside, in input order
          std::vector<K> k = keys;
          sort_options o{.direction = dir, .stable = true, .floats = floats};
          const sort_job job{.keys = {k.data(), n, dtype_of_v<K>}};
          std::uint64_t aside = 0;
          if constexpr (std::is_floating_point_v<K>)
            if (floats == float_order::numpy)
              for (const K key : keys) aside += (std::isnan(key) || key == K{0}) ? sizeof(K) : 0;
          o.host_memory_limit = lean_limit(eng, job, o) + aside;
          EXPECT_EQ(eng.sort(job, o).path, "lean") << what;
          EXPECT_TRUE(test::equal_bytes(k, ref_keys)) << "stable keys, " << what;
        }
        {  // argsort with the sorted keys beside
          std::vector<std::int64_t> idx(n, -1);
          std::vector<K> sorted(n);
          sort_options o{.direction = dir, .floats = floats};
          const argsort_job job{.keys = {const_cast<K*>(keys.data()), n, dtype_of_v<K>},
                                .indices_out = idx.data(),
                                .index_bytes = 8,
                                .keys_out = sorted.data()};
          o.host_memory_limit = lean_limit(eng, job, o);
          EXPECT_EQ(eng.argsort(job, o).path, "lean") << what;
          EXPECT_EQ(idx, std::vector<std::int64_t>(ref.begin(), ref.end())) << "argsort, " << what;
          EXPECT_TRUE(test::equal_bytes(sorted, ref_keys)) << "argsort keys, " << what;
        }
      }
    }
  }
}

TEST(Lean, AJobThatCannotRunWithinItsLimitIsRefusedNamingTheBytesItNeeds)
{
  if (on_gpus()) GTEST_SKIP() << "the GPUs' fast path fits these limits";
  engine eng{cpu_config()};
  const std::uint64_t n = 1'000'000;
  std::vector<std::uint64_t> keys(n);
  generate(std::span<std::uint64_t>{keys}, distribution::uniform, 3);
  const std::vector<std::uint64_t> original = keys;
  const sort_job job{.keys = {keys.data(), n, dtype::u64}};
  const memory_estimate e = eng.estimate_memory(job);
  sort_options options;
  options.host_memory_limit = e.lean_bytes - 1;
  try {
    eng.sort(job, options);
    FAIL() << "a job over its limit ran";
  } catch (const config_error& err) {
    const std::string text = err.what();
    EXPECT_NE(text.find("smallest limit that works is"), std::string::npos) << text;
    EXPECT_NE(text.find(std::to_string(e.lean_bytes)), std::string::npos) << text;
  }
  EXPECT_EQ(keys, original) << "a refused job touched its array";

  // An argsort without keys_out has nowhere to sort lean.
  std::vector<std::int64_t> idx(n);
  const argsort_job a{.keys = {keys.data(), n, dtype::u64}, .indices_out = idx.data()};
  options.host_memory_limit = e.lean_bytes;
  try {
    eng.argsort(a, options);
    FAIL() << "an argsort over its limit ran";
  } catch (const config_error& err) {
    EXPECT_NE(std::string{err.what()}.find("keys_out"), std::string::npos) << err.what();
  }
}

TEST(Lean, AFailureOrACancellationLeavesThePairsOfTheInput)
{
  engine eng{cpu_config()};
  const std::uint64_t n = 800'011;
  std::vector<std::uint64_t> original(n);
  generate(std::span<std::uint64_t>{original}, distribution::uniform, 11);
  const auto check_pairs = [&](const std::vector<std::uint64_t>& k,
                               const std::vector<std::uint64_t>& v, const std::string& what) {
    std::vector<std::uint64_t> seen = v;
    std::sort(seen.begin(), seen.end());
    for (std::uint64_t i = 0; i < n; ++i) ASSERT_EQ(seen[i], i) << what << ": values lost";
    for (std::uint64_t i = 0; i < n; ++i)
      ASSERT_EQ(k[i], original[v[i]]) << what << ": pair torn at " << i;
  };
  // The input's pairs (the values are the positions) as a lean job within its least limit.
  struct pairs_job {
    std::vector<std::uint64_t> k, v;
    sort_options options;
    sort_job job;
  };
  const auto make = [&] {
    auto p = std::make_unique<pairs_job>();
    p->k = original;
    p->v.resize(n);
    std::iota(p->v.begin(), p->v.end(), std::uint64_t{0});
    p->job = sort_job{.keys = {p->k.data(), n, dtype::u64},
                      .values = value_array{p->v.data(), n, 8}};
    p->options.host_memory_limit = lean_limit(eng, p->job, p->options);
    return p;
  };
  // Cancelled in each of its rounds (progress reports them: 1 and 2, and with the permutation
  // between them, GPUSORT_LEAN_ROUND2=permute, 1, 2 the permutation and 3).
  const char* round2 = std::getenv("GPUSORT_LEAN_ROUND2");
  const bool permuting = round2 != nullptr && std::string{round2} == "permute";
  for (const int round : permuting ? std::vector<int>{1, 2, 3} : std::vector<int>{1, 2}) {
    const auto p = make();
    p->options.on_progress = [round, token = p->options.cancel](const progress_event& e) {
      if (e.round == round && e.bytes_done > 0) token.cancel();
    };
    EXPECT_THROW(eng.sort(p->job, p->options), cancelled) << "round " << round;
    check_pairs(p->k, p->v, "cancelled in round " + std::to_string(round));
  }
  // A device failure at its first, third and twelfth sort (round 1, and round 2's buckets).
  for (const std::uint64_t at : {std::uint64_t{1}, std::uint64_t{3}, std::uint64_t{12}}) {
    const auto p = make();
    detail::fault::arm(detail::fault::plan{
        .group = detail::fault::scope::one, .target = detail::fault::site::launch, .nth = at});
    EXPECT_ANY_THROW(eng.sort(p->job, p->options)) << "a failure at launch " << at;
    EXPECT_EQ(detail::fault::injected(), 1U);
    detail::fault::disarm();
    check_pairs(p->k, p->v, "a failure at launch " + std::to_string(at));
  }
}

TEST(LeanPlan, ItsHostMemoryStaysWithinTheLimitAndItsBucketsWithinTheRoom)
{
  for (const std::uint64_t n : {std::uint64_t{1} << 20, std::uint64_t{1} << 27,
                                (std::uint64_t{100} << 30) / 8}) {
    for (const std::uint64_t limit : {std::uint64_t{8} << 20, std::uint64_t{64} << 20,
                                      std::uint64_t{4} << 30}) {
      detail::lean::plan_request r{.n = n,
                                   .layout = {.type = dtype::u64, .key_bytes = 8},
                                   .capacity = std::uint64_t{1} << 40,
                                   .devices = 1,
                                   .host_limit = limit,
                                   .device_host_bytes = [](std::uint64_t e, std::uint64_t) {
                                     return 2 * e * 8;
                                   }};
      try {
        const detail::lean::plan p = detail::lean::make_plan(r);
        EXPECT_LE(p.host_bytes, limit);
        EXPECT_GE(p.room, 2 * p.bucket_limit);
        // Gathering: below each place room for a bucket's blocks and two per chunk and end.
        if (p.gather) { EXPECT_GE(p.room - p.bucket_limit, 2 * (p.chunks + 4) * p.block); }
        EXPECT_EQ(p.chunk % p.block, 0U);
        EXPECT_EQ(p.room % p.chunk, 0U);
        EXPECT_LT(p.room, n);
      } catch (const config_error& e) {
        EXPECT_GT(detail::lean::least_host_bytes(r), limit) << e.what();
      }
    }
  }
}

// Two devices take round 2's buckets side by side, each writing once its place is cleared and
// the buckets read there are written, whichever device holds them: gathering and permuting,
// stable or not, every (key, value) pair checked against std::stable_sort.
TEST(Lean, TwoDevicesSortInPlaceWithEitherRound2)
{
  const std::uint64_t n = test_support::under_sanitizer() ? 100'003 : 1'000'003;  // primes
  std::vector<std::uint64_t> input(n);
  generate(std::span<std::uint64_t>{input}, distribution::staggered, 5);
  for (std::uint64_t i = 0; i < n; i += 5) input[i] %= 64;  // equal keys across chunks
  std::vector<std::pair<std::uint64_t, std::uint64_t>> expected(n);
  for (std::uint64_t i = 0; i < n; ++i) expected[i] = {input[i], i};
  std::stable_sort(expected.begin(), expected.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const bool gather : {true, false}) {
    for (const bool stable : {false, true}) {
      SCOPED_TRACE(std::string{gather ? "gathering" : "permuting"} + (stable ? ", stable" : ""));
      std::vector<std::uint64_t> keys = input;
      std::vector<std::uint64_t> values(n);
      std::iota(values.begin(), values.end(), std::uint64_t{0});
      // Devices of n / 64 elements (two buffers of 16-byte elements): some 60 chunks, and
      // buckets of a few hundred to a few thousand.
      const std::uint64_t budget = n / 64 * 2 * 16;
      detail::host_device a{budget, 1, 0};
      detail::host_device b{budget, 1, 1};
      const std::vector<detail::device*> devs{&a, &b};
      const detail::element_layout layout{
          .type = dtype::u64, .key_bytes = 8, .value_bytes = 8, .stable = stable};
      const detail::lean::plan p = detail::lean::make_plan(detail::lean::plan_request{
          .n = n,
          .layout = layout,
          .capacity = detail::common_capacity(devs, layout).elements,
          .devices = 2,
          .host_limit = std::uint64_t{1} << 30,
          .device_host_bytes = [](std::uint64_t e, std::uint64_t) { return 2 * 2 * e * 16; },
          .movers = 2,
          .gather = gather});
      ASSERT_EQ(p.gather, gather);
      ASSERT_GE(p.chunks, 16U);
      const detail::job_arrays arrays{.src_keys = keys.data(),
                                      .src_values = values.data(),
                                      .dst_keys = keys.data(),
                                      .dst_values = values.data(),
                                      .n = n};
      const sort_options options;  // the context keeps a reference
      detail::job_context ctx{options, layout.bytes()};
      const detail::lean::lean_stats stats =
          detail::lean::sort_lean(arrays, layout, p, devs, ctx, nullptr, 2);
      EXPECT_GT(stats.buckets, 8U);
      if (gather) { EXPECT_GT(stats.moves, 0U) << "no block moved out of a place"; }
      std::vector<bool> seen(n, false);
      for (std::uint64_t i = 0; i < n; ++i) {
        ASSERT_EQ(keys[i], expected[i].first) << "key at " << i;
        if (stable) { ASSERT_EQ(values[i], expected[i].second) << "input order at " << i; }
        ASSERT_LT(values[i], n);
        ASSERT_FALSE(seen[values[i]]) << "value " << values[i] << " twice";
        seen[values[i]] = true;
        ASSERT_EQ(input[values[i]], keys[i]) << "the pair at " << i << " is torn";
      }
    }
  }
}

/// Resident memory now and at its peak since the last reset, from /proc/self/status.
std::uint64_t status_kib(const std::string& field)
{
  std::ifstream in{"/proc/self/status"};
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1));
  return 0;
}

TEST(Lean, AOneGibArraySortsWithin64MibBeyondIt)
{
  if (test_support::under_sanitizer()) GTEST_SKIP() << "the sanitizers' own memory has no bound";
  if (on_gpus()) GTEST_SKIP() << "a GPU's pinned staging alone is 256 MiB (gpu_bench --lean)";
  const std::uint64_t n = (std::uint64_t{1} << 30) / 8;
  std::vector<std::uint64_t> keys(n);
  generate(std::span<std::uint64_t>{keys}, distribution::uniform, 5);
  std::uint64_t sum = 0;
  for (const std::uint64_t k : keys) sum += k;
  engine eng{cpu_config()};
  sort_options options;
  options.host_memory_limit = std::uint64_t{64} << 20;
  // Reset the peak: the array is resident, everything past it is the job's.
  { std::ofstream{"/proc/self/clear_refs"} << "5"; }
  const std::uint64_t before = status_kib("VmRSS");
  const sort_report r = eng.sort(std::span<std::uint64_t>{keys}, options);
  const std::uint64_t peak = status_kib("VmHWM");
  EXPECT_EQ(r.path, "lean");
  EXPECT_LE(r.host_memory_bytes, *options.host_memory_limit);
  EXPECT_LE(peak - before, (std::uint64_t{64} << 20) / 1024)
      << "peak " << peak << " KiB, " << before << " KiB before the sort";
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  std::uint64_t after = 0;
  for (const std::uint64_t k : keys) after += k;
  EXPECT_EQ(after, sum);
}

}  // namespace
}  // namespace gpusort
