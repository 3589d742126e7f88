// The CPU in-core sorter and its parallel passes, against std::sort and scalar references.
#include "core/cpu_sort.hpp"

#include "core/generate.hpp"
#include "tests/support/sanitizer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace gpusort::detail {
namespace {

template <typename K>
std::vector<K> random_keys(std::uint64_t n, std::uint64_t seed, K modulo)
{
  std::mt19937_64 rng{seed};
  std::vector<K> v(n);
  for (auto& x : v) x = static_cast<K>(rng() % modulo);
  return v;
}

template <typename K>
class CpuSortKeys : public ::testing::Test {};
using bit_types = ::testing::Types<std::uint32_t, std::uint64_t>;
TYPED_TEST_SUITE(CpuSortKeys, bit_types);

/// Key patterns that take each branch of the radix sort: full-width random keys, few distinct
/// values, keys that differ only in their top byte, all equal, sorted, reversed, one bucket
/// holding nine keys in ten (a parallel pass must sort it with every thread), narrow keys but
/// for one wide key that the parallel pass's sample misses (it must count again on the right
/// digit), half the keys equal to one value (a bucket of its own amid balanced ones), and keys
/// that vary in the top bit and the low 20 bits only (in cache, two long runs of keys equal in
/// their top varying bits, which must be sorted again on the bits below), and keys descending
/// with runs of equal ones (not to be reversed: equal keys keep their order).
template <typename K>
std::vector<K> keys_of(int pattern, std::uint64_t n, std::uint64_t seed)
{
  constexpr K all = static_cast<K>(~K{0});
  std::vector<K> v = random_keys<K>(n, seed, all);
  switch (pattern) {
    case 1: for (K& k : v) k %= 5; break;
    case 2: for (K& k : v) k = static_cast<K>(k << (8 * (sizeof(K) - 1))); break;
    case 3: std::fill(v.begin(), v.end(), K{42}); break;
    case 4: std::sort(v.begin(), v.end()); break;
    case 5: std::sort(v.begin(), v.end(), std::greater<K>{}); break;
    case 6:
      for (std::uint64_t i = 0; i < n; ++i)
        if (i % 10 != 0) v[i] = static_cast<K>((K{3} << (8 * sizeof(K) - 4)) | (v[i] >> 8));
      break;
    case 7:
      for (K& k : v) k = static_cast<K>(k >> (8 * sizeof(K) - 20));
      if (n > 1) v[1] = static_cast<K>(v[1] | (K{1} << (8 * sizeof(K) - 1)));
      break;
    case 8:
      for (std::uint64_t i = 0; i < n; i += 2) v[i] = static_cast<K>(all / 3);
      break;
    case 9:
      for (K& k : v) k = static_cast<K>(k & ((K{1} << (8 * sizeof(K) - 1)) | K{0xFFFFF}));
      break;
    case 10:
      for (K& k : v) k = static_cast<K>(k % 1000);
      std::sort(v.begin(), v.end(), std::greater<K>{});
      break;
    default: break;
  }
  return v;
}

constexpr int max_pattern = 10;

// Sizes around insertion sort (32), the one-thread LSD limit (2^14), the parallel limit (2^17)
// and well past them.
const std::vector<std::uint64_t> radix_sizes{0,      1,      2,      31,      32,      33,
                                             1000,   16'383, 16'384, 16'385,  131'071, 131'072,
                                             131'073, 300'007, 1'000'003};

TYPED_TEST(CpuSortKeys, MatchesStdSortAcrossEveryThresholdAndPattern)
{
  using K = TypeParam;
  for (const std::uint64_t n : radix_sizes)
    for (int pattern = 0; pattern <= max_pattern; ++pattern)
      for (const unsigned threads : {1U, 3U, 16U, 0U}) {
        auto keys = keys_of<K>(pattern, n, n * 7 + static_cast<std::uint64_t>(pattern));
        auto expect = keys;
        std::sort(expect.begin(), expect.end());
        std::vector<K> scratch(n);
        cpu_sort<K, no_value>(keys.data(), nullptr, n, scratch.data(), threads);
        ASSERT_EQ(keys, expect) << "n " << n << " pattern " << pattern << " threads " << threads;
      }
}

/// Every combination of cpu_sort_tuning's choices, the line-buffered scatter on every parallel
/// pass (1 byte and up), so that the paths only benchmarks choose stay correct too.
std::vector<std::pair<std::string, cpu_sort_tuning>> every_tuning()
{
  std::vector<std::pair<std::string, cpu_sort_tuning>> all;
  for (const bool fitted : {false, true})
    for (const bool lazy : {false, true})
      for (const std::uint64_t stream : {std::uint64_t{0}, std::uint64_t{1}})
        all.emplace_back(std::string{fitted ? "fitted" : "8-bit"} + (lazy ? " lazy" : " noted") +
                             (stream ? " stream" : ""),
                         cpu_sort_tuning{.stream_min_bytes = stream,
                                         .fitted_digits = fitted,
                                         .lazy_vary = lazy});
  return all;
}

// Every tuning on every pattern, at sizes around the fitted digit's widths (the narrowest just
// past the in-cache limit of 2^14, a bit wider past each doubling, 8 bits past 2^21 for every
// type) and the parallel limit (2^17), on one thread and on several (the parallel pass's
// buckets and their line buffers, whose shares start and end inside cache lines: 3 and 16
// threads).
TYPED_TEST(CpuSortKeys, EveryTuningMatchesStdSort)
{
  using K = TypeParam;
  std::vector<std::uint64_t> sizes{16'385, 32'768, 32'769, 131'073, 300'007, 2'200'001};
  if (test_support::under_sanitizer()) sizes = {16'385, 32'769, 131'073};
  for (const std::uint64_t n : sizes)
    for (int pattern = 0; pattern <= max_pattern; ++pattern) {
      // The largest size on full-width keys and on one bucket holding nine keys in ten only.
      if (n > 1'000'000 && pattern != 0 && pattern != 6) continue;
      const auto input = keys_of<K>(pattern, n, n * 5 + static_cast<std::uint64_t>(pattern));
      auto expect = input;
      std::sort(expect.begin(), expect.end());
      std::vector<K> scratch(n);
      for (const auto& [name, tuning] : every_tuning())
        for (const unsigned threads : {1U, 3U, 16U}) {
          auto keys = input;
          cpu_sort<K, no_value>(keys.data(), nullptr, n, scratch.data(), threads, tuning);
          ASSERT_EQ(keys, expect) << name << " n " << n << " pattern " << pattern << " threads "
                                  << threads;
        }
    }
}

// Every key type of the width, both orders and every distribution the generators make, as the
// engine hands them over (ordered bits): floats' exponents spread their top bits unevenly, the
// case the parallel pass's sampled digit is for.
TYPED_TEST(CpuSortKeys, MatchesStdSortForEveryTypeOrderAndDistribution)
{
  using K = TypeParam;
  for (const dtype t : all_dtypes) {
    if (size_of(t) != sizeof(K)) continue;
    for (const distribution d : all_distributions) {
      if (!applies_to(d, t)) continue;
      for (const std::uint64_t n : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{97},
                                    std::uint64_t{16'385}, std::uint64_t{131'073},
                                    std::uint64_t{400'009}})
        for (const order dir : {order::ascending, order::descending}) {
          std::vector<K> keys(n);
          generate(key_array{keys.data(), n, t}, d, n + 5);
          to_ordered_bits<K>(keys.data(), keys.data(), n, t, dir);
          auto expect = keys;
          std::sort(expect.begin(), expect.end());
          std::vector<K> scratch(n);
          cpu_sort<K, no_value>(keys.data(), nullptr, n, scratch.data(), 3);
          ASSERT_EQ(keys, expect) << name_of(t) << " " << name_of(d) << " n " << n << " "
                                  << (dir == order::ascending ? "ascending" : "descending");
        }
    }
  }
}

/// What the sort with its maps fused must give: each key through the map to ordered bits, a
/// stable sort on those bits, and each key back through the scalar maps (std::stable_sort, not
/// the code under test).
template <typename K, typename V>
void expect_raw_sort(std::vector<K> keys, std::vector<V> values, const key_order& k,
                     bool keys_ordered, unsigned threads, const std::string& what)
{
  const std::uint64_t n = keys.size();
  std::vector<std::pair<K, std::uint64_t>> expect(n);
  for (std::uint64_t i = 0; i < n; ++i)
    expect[i] = {keys_ordered ? keys[i] : ordered_map<K>(k, true)(keys[i]), i};
  std::stable_sort(expect.begin(), expect.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  const std::vector<V> values_before = values;
  std::vector<std::uint64_t> scratch((cpu_sort_scratch_bytes<K, V>(n) + 7) / 8 + 1);
  V* v = values.empty() ? nullptr : values.data();
  cpu_sort<K, V>(keys.data(), v, n, scratch.data(), threads, k, keys_ordered);
  for (std::uint64_t i = 0; i < n; ++i) {
    ASSERT_EQ(keys[i], ordered_map<K>(k, false)(expect[i].first)) << what << " at " << i;
    if constexpr (!std::is_same_v<V, no_value>) {
      ASSERT_EQ(values[i], values_before[expect[i].second]) << what << " at " << i;
    }
  }
}

// Raw keys in, raw keys out, the maps fused into the first and last passes: every key type of
// the width, both orders, both float orders (NumPy's puts NaNs last either way) with and
// without canonical zeros and NaNs, every distribution, keys raw or ordered already; sizes
// around the in-cache limit (2^14), the parallel limit (2^17) and a 2 MiB huge page of keys
// (under a sanitizer, whose slowdown would make it minutes, one size on each side of the
// parallel limit).
TYPED_TEST(CpuSortKeys, FusedMapsMatchMapSortMapForEveryTypeOrderAndDistribution)
{
  using K = TypeParam;
  const std::uint64_t huge_page_keys = (std::uint64_t{2} << 20) / sizeof(K);
  std::vector<std::uint64_t> sizes{0, 1, 33, 16'385, 131'071, 131'073, huge_page_keys + 1};
  if (test_support::under_sanitizer()) sizes = {0, 1, 33, 16'385, 131'073};
  for (const dtype t : all_dtypes) {
    if (size_of(t) != sizeof(K)) continue;
    for (const distribution d : all_distributions) {
      if (!applies_to(d, t)) continue;
      for (const std::uint64_t n : sizes)
        for (const order dir : {order::ascending, order::descending})
          for (const float_order floats : {float_order::total, float_order::numpy})
            for (const bool canonical : {false, true}) {
              if (!is_float(t) && (floats != float_order::total || canonical)) continue;
              const key_order k{.type = t, .dir = dir, .floats = floats, .canonical = canonical};
              std::vector<K> keys(n);
              generate(key_array{keys.data(), n, t}, d, n + 3);
              const std::string what = std::string{name_of(t)} + " " +
                                       std::string{name_of(d)} + " n " + std::to_string(n) +
                                       (dir == order::ascending ? " asc" : " desc") +
                                       (floats == float_order::numpy ? " numpy" : "") +
                                       (canonical ? " canonical" : "");
              expect_raw_sort<K, no_value>(keys, {}, k, false, 3, what);
              if (n == 131'073 && d == distribution::uniform) {
                // Ordered already (the copy that maps them did it), and on one thread.
                std::vector<K> ordered(n);
                to_ordered_bits<K>(keys.data(), ordered.data(), n, k);
                expect_raw_sort<K, no_value>(ordered, {}, k, true, 3, what + " ordered");
                expect_raw_sort<K, no_value>(keys, {}, k, false, 1, what + " 1 thread");
              }
            }
    }
  }
}

TYPED_TEST(CpuSortKeys, SmallRadixSortMatchesStdSortAtItsBounds)
{
  using K = TypeParam;
  for (const std::uint64_t n : {small_radix_min - 1, small_radix_min, std::uint64_t{1000},
                                std::uint64_t{131'072}, small_radix_max,
                                small_radix_max + 1}) {
    // Narrow keys (most digits equal, skipped), wide keys, and keys equal but in one digit.
    for (const K modulo : {K{7}, static_cast<K>(~K{0}), K{256}}) {
      auto keys = random_keys<K>(n, n * 3 + modulo, modulo);
      if (modulo == K{256})
        for (K& k : keys) k = static_cast<K>(k << (8 * (sizeof(K) - 1)));  // top digit only
      auto expect = keys;
      std::sort(expect.begin(), expect.end());
      std::vector<unsigned char> scratch(small_radix_scratch_bytes<K>(n));
      const bool sorted = small_radix_sort<K>(keys.data(), n, scratch.data());
      EXPECT_EQ(sorted, n >= small_radix_min && n <= small_radix_max) << n;
      if (sorted) {
        EXPECT_EQ(keys, expect) << n << " " << +modulo;
      }
    }
  }
}

template <typename KV>
class CpuSortPairs : public ::testing::Test {};
using pair_types = ::testing::Types<std::pair<std::uint32_t, std::uint32_t>,
                                    std::pair<std::uint32_t, std::uint64_t>,
                                    std::pair<std::uint64_t, std::uint32_t>,
                                    std::pair<std::uint64_t, std::uint64_t>>;
TYPED_TEST_SUITE(CpuSortPairs, pair_types);

// Stable: equal keys keep their input order, so the result equals std::stable_sort's exactly.
TYPED_TEST(CpuSortPairs, ValuesTravelWithTheirKeysInInputOrder)
{
  using K = typename TypeParam::first_type;
  using V = typename TypeParam::second_type;
  for (const std::uint64_t n : radix_sizes)
    for (const int pattern : {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10}) {
      auto keys = keys_of<K>(pattern, n, n + 11);
      std::vector<V> values(n);
      for (std::uint64_t i = 0; i < n; ++i) values[i] = static_cast<V>(i);
      std::vector<std::pair<K, V>> expect(n);
      for (std::uint64_t i = 0; i < n; ++i) expect[i] = {keys[i], values[i]};
      std::stable_sort(expect.begin(), expect.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      std::vector<std::uint64_t> scratch((cpu_sort_scratch_bytes<K, V>(n) + 7) / 8);
      cpu_sort<K, V>(keys.data(), values.data(), n, scratch.data(), 3);
      for (std::uint64_t i = 0; i < n; ++i)
        ASSERT_EQ((std::pair<K, V>{keys[i], values[i]}), expect[i])
            << "n " << n << " pattern " << pattern << " at " << i;
    }
}

// Every tuning with values beside the keys (their own line buffers, of another width than the
// keys' where the types differ), equal keys in input order.
TYPED_TEST(CpuSortPairs, EveryTuningKeepsValuesWithTheirKeysInInputOrder)
{
  using K = typename TypeParam::first_type;
  using V = typename TypeParam::second_type;
  std::vector<std::uint64_t> sizes{32'769, 300'007};
  if (test_support::under_sanitizer()) sizes = {32'769, 131'073};
  for (const std::uint64_t n : sizes)
    for (const int pattern : {0, 1, 6, 9}) {
      const auto input = keys_of<K>(pattern, n, n + 13);
      std::vector<std::pair<K, V>> expect(n);
      for (std::uint64_t i = 0; i < n; ++i) expect[i] = {input[i], static_cast<V>(i)};
      std::stable_sort(expect.begin(), expect.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      std::vector<std::uint64_t> scratch((cpu_sort_scratch_bytes<K, V>(n) + 7) / 8);
      for (const auto& [name, tuning] : every_tuning())
        for (const unsigned threads : {1U, 3U}) {
          auto keys = input;
          std::vector<V> values(n);
          for (std::uint64_t i = 0; i < n; ++i) values[i] = static_cast<V>(i);
          cpu_sort<K, V>(keys.data(), values.data(), n, scratch.data(), threads, tuning);
          for (std::uint64_t i = 0; i < n; ++i)
            ASSERT_EQ((std::pair<K, V>{keys[i], values[i]}), expect[i])
                << name << " n " << n << " pattern " << pattern << " threads " << threads
                << " at " << i;
        }
    }
}

// Pairs with the maps fused: values follow their keys, equal keys (few unique, NaNs of a
// canonical order, -0.0 and +0.0) keep their input order, on one thread and on several.
TYPED_TEST(CpuSortPairs, FusedMapsKeepValuesWithTheirKeysInInputOrder)
{
  using K = typename TypeParam::first_type;
  using V = typename TypeParam::second_type;
  const dtype float_type = sizeof(K) == 4 ? dtype::f32 : dtype::f64;
  const dtype signed_type = sizeof(K) == 4 ? dtype::i32 : dtype::i64;
  std::vector<std::uint64_t> sizes{2, 16'385, 131'073, 300'007};
  if (test_support::under_sanitizer()) sizes.pop_back();
  for (const std::uint64_t n : sizes)
    for (const distribution d :
         {distribution::uniform, distribution::fewunique, distribution::nanmix,
          distribution::zero, distribution::reverse})
      for (const key_order& k :
           {key_order{.type = float_type, .dir = order::descending},
            key_order{.type = float_type, .dir = order::ascending,
                      .floats = float_order::numpy, .canonical = true},
            key_order{.type = signed_type, .dir = order::ascending}})
        for (const unsigned threads : {1U, 3U}) {
          if (!applies_to(d, k.type)) continue;
          std::vector<K> keys(n);
          generate(key_array{keys.data(), n, k.type}, d, n + 9);
          std::vector<V> values(n);
          for (std::uint64_t i = 0; i < n; ++i) values[i] = static_cast<V>(i);
          expect_raw_sort<K, V>(keys, values, k, false, threads,
                                std::string{name_of(k.type)} + " " + std::string{name_of(d)} +
                                    " n " + std::to_string(n) + " threads " +
                                    std::to_string(threads));
        }
}

TEST(CpuSort, OrderedBitsPassesMatchTheScalarTransform)
{
  const auto raw = random_keys<std::uint64_t>(100'003, 7, ~std::uint64_t{0});
  for (const dtype t : {dtype::u64, dtype::i64, dtype::f64})
    for (const order dir : {order::ascending, order::descending}) {
      std::vector<std::uint64_t> ordered(raw.size());
      to_ordered_bits<std::uint64_t>(raw.data(), ordered.data(), raw.size(), t, dir);
      for (std::size_t i = 0; i < raw.size(); ++i)
        ASSERT_EQ(ordered[i], to_ordered<std::uint64_t>(raw[i], t, dir));
      from_ordered_bits<std::uint64_t>(ordered.data(), ordered.data(), raw.size(), t, dir);
      EXPECT_EQ(ordered, raw);
    }
}

TEST(CpuSort, ParallelCopyCopiesEveryByte)
{
  for (const std::size_t bytes : {std::size_t{0}, std::size_t{1}, std::size_t{4} << 20,
                                  (std::size_t{9} << 20) + 3}) {
    std::vector<unsigned char> src(bytes), dst(bytes, 0xAB);
    for (std::size_t i = 0; i < bytes; ++i) src[i] = static_cast<unsigned char>(i * 31 + 7);
    parallel_copy(dst.data(), src.data(), bytes);
    EXPECT_EQ(dst, src) << bytes;
  }
}

}  // namespace
}  // namespace gpusort::detail
