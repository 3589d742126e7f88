// The CPU in-core sorter and its parallel passes, against std::sort and scalar references.
#include "core/cpu_sort.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
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

TYPED_TEST(CpuSortKeys, MatchesStdSortAcrossTheParallelThreshold)
{
  using K = TypeParam;
  for (const std::uint64_t n : {0ULL, 1ULL, 2ULL, 1000ULL, 65'535ULL, 65'536ULL, 300'007ULL})
    for (const unsigned threads : {1U, 2U, 0U}) {
      auto keys = random_keys<K>(n, n + threads, static_cast<K>(n / 3 + 2));
      auto expect = keys;
      std::sort(expect.begin(), expect.end());
      cpu_sort<K, no_value>(keys.data(), nullptr, n, nullptr, threads);
      EXPECT_EQ(keys, expect) << n << " " << threads;
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

TYPED_TEST(CpuSortPairs, ValuesStayWithTheirKeys)
{
  using K = typename TypeParam::first_type;
  using V = typename TypeParam::second_type;
  for (const std::uint64_t n : {0ULL, 1ULL, 777ULL, 200'003ULL}) {
    auto keys = random_keys<K>(n, n, static_cast<K>(n / 5 + 2));  // many equal keys
    std::vector<V> values(n);
    for (std::uint64_t i = 0; i < n; ++i) values[i] = static_cast<V>(i * 2654435761U);
    std::vector<std::pair<K, V>> expect(n);
    for (std::uint64_t i = 0; i < n; ++i) expect[i] = {keys[i], values[i]};
    std::vector<unsigned char> scratch(cpu_sort_scratch_bytes<K, V>(n));
    cpu_sort<K, V>(keys.data(), values.data(), n, scratch.data(), 2);
    ASSERT_TRUE(std::is_sorted(keys.begin(), keys.end()));
    // Same multiset of pairs: compare both sides fully sorted by (key, value).
    std::vector<std::pair<K, V>> got(n);
    for (std::uint64_t i = 0; i < n; ++i) got[i] = {keys[i], values[i]};
    std::sort(got.begin(), got.end());
    std::sort(expect.begin(), expect.end());
    EXPECT_EQ(got, expect);
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
