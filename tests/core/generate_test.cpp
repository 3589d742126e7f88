// Generators against their written definitions: block boundaries, sub-ranges and the unit -> key
// map are recomputed here from the definitions in core/generate.hpp and the README, and the
// statistical properties are checked with bounds far outside sampling noise.
#include "core/generate.hpp"

#include "core/keys.hpp"

#include <gpusort/error.hpp>

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <span>
#include <type_traits>
#include <vector>

namespace {

using gpusort::distribution;
using gpusort::dtype;

__extension__ using u128 = unsigned __int128;

constexpr std::uint64_t p = 240;

template <typename K>
std::vector<K> make(std::uint64_t n, distribution d, std::uint64_t seed)
{
  std::vector<K> v(n);
  gpusort::generate(std::span<K>{v}, d, seed);
  return v;
}

/// Position of a key within its type's generated range, in [0, 1): written independently of
/// the generator from the documented maps (unsigned: whole range; signed: most negative = 0;
/// floats: [-1, 1)).
template <typename K>
double fraction(K k)
{
  if constexpr (std::is_same_v<K, std::uint32_t>) {
    return static_cast<double>(k) / 4294967296.0;
  } else if constexpr (std::is_same_v<K, std::int32_t>) {
    return (static_cast<double>(k) + 2147483648.0) / 4294967296.0;
  } else if constexpr (std::is_same_v<K, std::uint64_t>) {
    return static_cast<double>(k >> 11) * 0x1p-53;
  } else if constexpr (std::is_same_v<K, std::int64_t>) {
    const std::uint64_t u = std::bit_cast<std::uint64_t>(k) + 0x8000000000000000ULL;
    return static_cast<double>(u >> 11) * 0x1p-53;
  } else {
    return (static_cast<double>(k) + 1.0) / 2.0;
  }
}

template <typename K>
bool same_bits(const std::vector<K>& a, const std::vector<K>& b)
{
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(K)) == 0);
}

/// Restores the OpenMP thread count when a test ends.
class thread_count_guard {
 public:
  thread_count_guard() : saved_{omp_get_max_threads()} {}
  ~thread_count_guard() { omp_set_num_threads(saved_); }
  thread_count_guard(const thread_count_guard&) = delete;
  thread_count_guard& operator=(const thread_count_guard&) = delete;

 private:
  int saved_;
};

// ------------------------------------------------------------------------------------------
// Names

TEST(Generate, NamesRoundTrip)
{
  const char* expected[] = {"uniform",  "gaussian", "bucket",   "staggered", "sorted",
                            "reverse",  "zero",     "detdupes", "fewunique", "nanmix"};
  std::size_t i = 0;
  for (const distribution d : gpusort::all_distributions) {
    EXPECT_EQ(gpusort::name_of(d), expected[i]);
    EXPECT_EQ(gpusort::parse_distribution(expected[i]), d);
    ++i;
  }
  EXPECT_EQ(i, 10U);
  EXPECT_FALSE(gpusort::parse_distribution("Uniform").has_value());
  EXPECT_FALSE(gpusort::parse_distribution("").has_value());
  EXPECT_FALSE(gpusort::parse_distribution("uniform ").has_value());
}

TEST(Generate, AppliesTo)
{
  for (const dtype t : gpusort::all_dtypes) {
    for (const distribution d : gpusort::all_distributions) {
      const bool expected = d != distribution::nanmix || t == dtype::f32 || t == dtype::f64;
      EXPECT_EQ(gpusort::applies_to(d, t), expected);
    }
  }
}

// ------------------------------------------------------------------------------------------
// Determinism

template <typename K>
void check_deterministic(std::uint64_t n)
{
  thread_count_guard guard;
  for (const distribution d : gpusort::all_distributions) {
    if (!gpusort::applies_to(d, gpusort::dtype_of_v<K>)) continue;
    omp_set_num_threads(1);
    const auto one = make<K>(n, d, 99);
    omp_set_num_threads(2);
    const auto two = make<K>(n, d, 99);
    omp_set_num_threads(3);
    const auto three = make<K>(n, d, 99);
    const auto again = make<K>(n, d, 99);
    EXPECT_TRUE(same_bits(one, two)) << gpusort::name_of(d);
    EXPECT_TRUE(same_bits(one, three)) << gpusort::name_of(d);
    EXPECT_TRUE(same_bits(three, again)) << gpusort::name_of(d);
  }
}

// Several OpenMP work items, and a size that is no multiple of anything.
TEST(Generate, DeterministicAcrossThreadCountsU64) { check_deterministic<std::uint64_t>(200'003); }
TEST(Generate, DeterministicAcrossThreadCountsF32) { check_deterministic<float>(200'003); }
TEST(Generate, DeterministicAcrossThreadCountsI32) { check_deterministic<std::int32_t>(70'001); }

TEST(Generate, ValuesDeterministicAcrossThreadCounts)
{
  thread_count_guard guard;
  const std::uint64_t n = 150'001;
  std::vector<std::uint64_t> a(n);
  std::vector<std::uint64_t> b(n);
  omp_set_num_threads(1);
  gpusort::generate_values(gpusort::value_array{a.data(), n, 8}, 5);
  omp_set_num_threads(3);
  gpusort::generate_values(gpusort::value_array{b.data(), n, 8}, 5);
  EXPECT_TRUE(same_bits(a, b));
}

TEST(Generate, DifferentSeedsDiffer)
{
  const std::uint64_t n = 10'000;
  for (const distribution d :
       {distribution::uniform, distribution::gaussian, distribution::bucket,
        distribution::staggered, distribution::fewunique, distribution::nanmix}) {
    const auto a = make<double>(n, d, 1);
    const auto b = make<double>(n, d, 2);
    std::uint64_t differing = 0;
    for (std::uint64_t i = 0; i < n; ++i)
      differing += std::bit_cast<std::uint64_t>(a[i]) != std::bit_cast<std::uint64_t>(b[i]);
    EXPECT_GT(differing, n / 2) << gpusort::name_of(d);
  }
  const auto a = make<std::uint32_t>(n, distribution::uniform, 1);
  const auto b = make<std::uint32_t>(n, distribution::uniform, 1ULL << 40);  // high seed bits
  EXPECT_FALSE(same_bits(a, b));
}

TEST(Generate, SeedIndependentDistributions)
{
  // sorted, reverse, zero and detdupes are fixed patterns: the seed does not matter.
  for (const distribution d : {distribution::sorted, distribution::reverse, distribution::zero,
                               distribution::detdupes})
    EXPECT_TRUE(same_bits(make<float>(1000, d, 1), make<float>(1000, d, 777)));
}

// ------------------------------------------------------------------------------------------
// Sizes and types

template <typename K>
void check_sizes()
{
  constexpr dtype t = gpusort::dtype_of_v<K>;
  for (const std::uint64_t n : {0ULL, 1ULL, 2ULL, 3ULL, 239ULL, 240ULL, 241ULL, 7919ULL}) {
    for (const distribution d : gpusort::all_distributions) {
      if (!gpusort::applies_to(d, t)) continue;
      // Sentinels on both sides catch writes out of bounds.
      std::vector<K> buffer(n + 2, K{7});
      gpusort::generate(std::span<K>{buffer.data() + 1, n}, d, 3);
      EXPECT_EQ(buffer.front(), K{7}) << gpusort::name_of(d) << " n=" << n;
      EXPECT_EQ(buffer.back(), K{7}) << gpusort::name_of(d) << " n=" << n;
      if (d == distribution::sorted || d == distribution::reverse) {
        for (std::uint64_t i = 1; i + 1 < n; ++i) {
          const K a = buffer[i];
          const K b = buffer[i + 1];
          if (d == distribution::sorted ? b < a : a < b)
            FAIL() << gpusort::name_of(d) << " n=" << n << " i=" << i;
        }
      }
    }
  }
}

TEST(Generate, SmallAndPrimeSizesU32) { check_sizes<std::uint32_t>(); }
TEST(Generate, SmallAndPrimeSizesI32) { check_sizes<std::int32_t>(); }
TEST(Generate, SmallAndPrimeSizesU64) { check_sizes<std::uint64_t>(); }
TEST(Generate, SmallAndPrimeSizesI64) { check_sizes<std::int64_t>(); }
TEST(Generate, SmallAndPrimeSizesF32) { check_sizes<float>(); }
TEST(Generate, SmallAndPrimeSizesF64) { check_sizes<double>(); }

TEST(Generate, EmptyArrayNeedsNoData)
{
  for (const dtype t : gpusort::all_dtypes)
    EXPECT_NO_THROW(gpusort::generate(gpusort::key_array{nullptr, 0, t},
                                      distribution::uniform, 1));
  EXPECT_NO_THROW(gpusort::generate_values(gpusort::value_array{nullptr, 0, 4}, 1));
}

TEST(Generate, NanmixOnIntegersThrows)
{
  std::vector<std::uint64_t> buffer(16);
  for (const dtype t : {dtype::u32, dtype::i32, dtype::u64, dtype::i64}) {
    EXPECT_THROW(gpusort::generate(gpusort::key_array{buffer.data(), 16, t},
                                   distribution::nanmix, 1),
                 gpusort::invalid_argument);
    EXPECT_THROW(gpusort::generate(gpusort::key_array{nullptr, 0, t}, distribution::nanmix, 1),
                 gpusort::invalid_argument);
  }
}

// ------------------------------------------------------------------------------------------
// Distributions

template <typename K>
void check_uniform()
{
  const std::uint64_t n = 64'000;
  const auto v = make<K>(n, distribution::uniform, 11);
  double sum = 0;
  double lowest = 1;
  double highest = 0;
  std::vector<std::uint64_t> histogram(16);
  for (const K k : v) {
    const double f = fraction(k);
    ASSERT_GE(f, 0.0);
    ASSERT_LT(f, 1.0);
    sum += f;
    lowest = std::min(lowest, f);
    highest = std::max(highest, f);
    ++histogram[static_cast<std::size_t>(f * 16)];
  }
  EXPECT_NEAR(sum / static_cast<double>(n), 0.5, 0.01);
  EXPECT_LT(lowest, 0.001);
  EXPECT_GT(highest, 0.999);
  for (const std::uint64_t count : histogram) {
    EXPECT_GT(count, n / 16 * 9 / 10);
    EXPECT_LT(count, n / 16 * 11 / 10);
  }
  if constexpr (std::is_signed_v<K>) {
    EXPECT_TRUE(std::any_of(v.begin(), v.end(), [](K k) { return k < K{0}; }));
    EXPECT_TRUE(std::any_of(v.begin(), v.end(), [](K k) { return k > K{0}; }));
  }
}

TEST(Generate, UniformCoversTheRangeU32) { check_uniform<std::uint32_t>(); }
TEST(Generate, UniformCoversTheRangeI32) { check_uniform<std::int32_t>(); }
TEST(Generate, UniformCoversTheRangeU64) { check_uniform<std::uint64_t>(); }
TEST(Generate, UniformCoversTheRangeI64) { check_uniform<std::int64_t>(); }
TEST(Generate, UniformCoversTheRangeF32) { check_uniform<float>(); }
TEST(Generate, UniformCoversTheRangeF64) { check_uniform<double>(); }

template <typename K>
void check_gaussian()
{
  const std::uint64_t n = 64'000;
  const auto v = make<K>(n, distribution::gaussian, 12);
  double sum = 0;
  double sum_sq = 0;
  std::uint64_t middle = 0;
  for (const K k : v) {
    const double f = fraction(k);
    sum += f;
    sum_sq += f * f;
    middle += f >= 0.25 && f < 0.75;
  }
  const double mean = sum / static_cast<double>(n);
  const double sd = std::sqrt(sum_sq / static_cast<double>(n) - mean * mean);
  EXPECT_NEAR(mean, 0.5, 0.01);
  // Mean of 4 uniforms: sd = sqrt(1/48) = 0.144 (uniform: 0.289); P(middle half) = 11/12.
  EXPECT_NEAR(sd, 0.1443, 0.01);
  EXPECT_NEAR(static_cast<double>(middle) / static_cast<double>(n), 11.0 / 12.0, 0.01);
}

TEST(Generate, GaussianConcentratedU32) { check_gaussian<std::uint32_t>(); }
TEST(Generate, GaussianConcentratedI64) { check_gaussian<std::int64_t>(); }
TEST(Generate, GaussianConcentratedF32) { check_gaussian<float>(); }
TEST(Generate, GaussianConcentratedF64) { check_gaussian<double>(); }

/// Documented block of element i: floor(i * 240 / n).
std::uint64_t block_of(std::uint64_t i, std::uint64_t n)
{
  return static_cast<std::uint64_t>(u128{i} * p / n);
}

// Sub-range j of 240 covers fractions [j/240, (j+1)/240); float rounding may step below by one
// float ulp of the fraction.
constexpr double slack = 1e-6;

template <typename K>
void check_staggered()
{
  const std::uint64_t n = 240 * 100 + 77;
  const auto v = make<K>(n, distribution::staggered, 13);
  std::vector<double> lo(p, 1.0);
  std::vector<double> hi(p, 0.0);
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint64_t b = block_of(i, n);
    const std::uint64_t s = b < p / 2 ? 2 * b + 1 : 2 * (b - p / 2);
    const double f = fraction(v[i]);
    ASSERT_GE(f, static_cast<double>(s) / p - slack) << "i=" << i;
    ASSERT_LT(f, static_cast<double>(s + 1) / p + slack) << "i=" << i;
    lo[b] = std::min(lo[b], f);
    hi[b] = std::max(hi[b], f);
  }
  // Random within the sub-range, not a constant: each block of ~100 spans most of it.
  for (std::uint64_t b = 0; b < p; ++b) EXPECT_GT(hi[b] - lo[b], 0.8 / p) << "block " << b;
}

TEST(Generate, StaggeredU32) { check_staggered<std::uint32_t>(); }
TEST(Generate, StaggeredI32) { check_staggered<std::int32_t>(); }
TEST(Generate, StaggeredU64) { check_staggered<std::uint64_t>(); }
TEST(Generate, StaggeredF32) { check_staggered<float>(); }
TEST(Generate, StaggeredF64) { check_staggered<double>(); }

template <typename K>
void check_bucket()
{
  const std::uint64_t n = 240 * 240 * 2 + 131;
  const auto v = make<K>(n, distribution::bucket, 14);
  std::vector<std::uint64_t> parts_seen(p * p);
  for (std::uint64_t i = 0; i < n; ++i) {
    const std::uint64_t b = block_of(i, n);
    // First element of block b: ceil(b * n / 240).
    const auto start = static_cast<std::uint64_t>((u128{b} * n + p - 1) / p);
    const auto end = static_cast<std::uint64_t>((u128{b + 1} * n + p - 1) / p);
    const std::uint64_t j = block_of(i - start, end - start);
    const double f = fraction(v[i]);
    ASSERT_GE(f, static_cast<double>(j) / p - slack) << "i=" << i;
    ASSERT_LT(f, static_cast<double>(j + 1) / p + slack) << "i=" << i;
    ++parts_seen[b * p + j];
  }
  // Each block holds about n/p^2 elements of each sub-range, in ascending sub-range order.
  for (const std::uint64_t count : parts_seen) {
    EXPECT_GE(count, 2U);
    EXPECT_LE(count, 3U);
  }
}

TEST(Generate, BucketU32) { check_bucket<std::uint32_t>(); }
TEST(Generate, BucketI64) { check_bucket<std::int64_t>(); }
TEST(Generate, BucketF32) { check_bucket<float>(); }
TEST(Generate, BucketF64) { check_bucket<double>(); }

template <typename K>
void check_sorted()
{
  const std::uint64_t n = 100'003;
  const auto up = make<K>(n, distribution::sorted, 15);
  const auto down = make<K>(n, distribution::reverse, 15);
  for (std::uint64_t i = 0; i + 1 < n; ++i) {
    if (up[i + 1] < up[i]) FAIL() << "sorted decreases at " << i;
    if (down[i] < down[i + 1]) FAIL() << "reverse increases at " << i;
  }
  for (std::uint64_t i = 0; i < n; ++i)
    if (down[i] != up[n - 1 - i]) FAIL() << "reverse is not sorted backwards at " << i;
  // Spread over the whole range, evenly.
  EXPECT_LT(fraction(up.front()), 1e-6);
  EXPECT_GT(fraction(up.back()), 1 - 1e-6);
  EXPECT_NEAR(fraction(up[n / 4]), 0.25, 1e-4);
  EXPECT_NEAR(fraction(up[n / 2]), 0.5, 1e-4);
  std::set<K> distinct(up.begin(), up.end());
  EXPECT_GT(distinct.size(), n * 99 / 100);
  if constexpr (std::is_same_v<K, std::uint64_t>) {
    // The documented positions: floor(i * (2^64 - 1) / (n - 1)).
    for (std::uint64_t i = 0; i < n; i += 997) {
      const auto expected =
          static_cast<std::uint64_t>(u128{i} * std::numeric_limits<std::uint64_t>::max() / (n - 1));
      EXPECT_EQ(up[i], expected);
    }
    EXPECT_EQ(up.back(), std::numeric_limits<std::uint64_t>::max());
  }
  if constexpr (std::is_signed_v<K> && std::is_integral_v<K>) {
    EXPECT_EQ(up.front(), std::numeric_limits<K>::min());
    EXPECT_EQ(up.back(), std::numeric_limits<K>::max());
  }
  if constexpr (std::is_floating_point_v<K>) {
    EXPECT_EQ(up.front(), K{-1});
    EXPECT_LT(up.back(), K{1});
  }
}

TEST(Generate, SortedAndReverseU32) { check_sorted<std::uint32_t>(); }
TEST(Generate, SortedAndReverseI32) { check_sorted<std::int32_t>(); }
TEST(Generate, SortedAndReverseU64) { check_sorted<std::uint64_t>(); }
TEST(Generate, SortedAndReverseI64) { check_sorted<std::int64_t>(); }
TEST(Generate, SortedAndReverseF32) { check_sorted<float>(); }
TEST(Generate, SortedAndReverseF64) { check_sorted<double>(); }

TEST(Generate, SortedSingleElementIsTheBottom)
{
  EXPECT_EQ(make<std::uint32_t>(1, distribution::sorted, 1)[0], 0U);
  EXPECT_EQ(make<std::int32_t>(1, distribution::reverse, 1)[0],
            std::numeric_limits<std::int32_t>::min());
  EXPECT_EQ(make<double>(1, distribution::sorted, 1)[0], -1.0);
}

template <typename K>
void check_zero()
{
  const auto v = make<K>(70'001, distribution::zero, 16);
  using bits = gpusort::detail::bits_t<sizeof(K)>;
  for (const K k : v)
    if (std::bit_cast<bits>(k) != 0) FAIL() << "not the key 0 (+0.0 for floats)";
}

TEST(Generate, ZeroAllEqual)
{
  check_zero<std::uint32_t>();
  check_zero<std::int32_t>();
  check_zero<std::uint64_t>();
  check_zero<std::int64_t>();
  check_zero<float>();
  check_zero<double>();
}

template <typename K>
void check_detdupes(std::uint64_t n)
{
  const auto v = make<K>(n, distribution::detdupes, 17);
  // Groups of blocks: each group takes half of the remaining blocks, rounded up (120, 60, 30,
  // 15, 8, 4, 2, 1); group g holds floor(log2(n)) - g, never below 0.
  std::vector<int> group_of_block(p);
  std::uint64_t start = 0;
  for (int g = 0; start < p; ++g) {
    const std::uint64_t size = (p - start + 1) / 2;
    for (std::uint64_t b = start; b < start + size; ++b) group_of_block[b] = g;
    start += size;
  }
  int log_n = 0;
  while ((std::uint64_t{2} << log_n) <= n) ++log_n;
  for (std::uint64_t i = 0; i < n; ++i) {
    const int expected = std::max(0, log_n - group_of_block[block_of(i, n)]);
    if (v[i] != static_cast<K>(expected))
      FAIL() << "n=" << n << " i=" << i << " expected " << expected;
  }
}

TEST(Generate, DetdupesAreTheDocumentedLogs)
{
  for (const std::uint64_t n : {1ULL, 2ULL, 7ULL, 239ULL, 240ULL, 1000ULL, 100'003ULL}) {
    check_detdupes<std::uint32_t>(n);
    check_detdupes<std::int64_t>(n);
    check_detdupes<float>(n);
    check_detdupes<double>(n);
  }
  check_detdupes<std::int32_t>(65'536);
  check_detdupes<std::uint64_t>(65'537);
  // Written out: n = 100003 has floor(log2 n) = 16; half of it is 16, then 15, ..., 9.
  const auto v = make<float>(100'003, distribution::detdupes, 1);
  std::map<float, std::uint64_t> counts;
  for (const float k : v) ++counts[k];
  ASSERT_EQ(counts.size(), 8U);
  EXPECT_EQ(counts.begin()->first, 9.0F);
  EXPECT_EQ(counts.rbegin()->first, 16.0F);
  EXPECT_NEAR(static_cast<double>(counts[16.0F]), 100'003 / 2.0, 1.0);
  EXPECT_NEAR(static_cast<double>(counts[15.0F]), 100'003 / 4.0, 1.0);
}

template <typename K>
void check_fewunique()
{
  const std::uint64_t n = 50'000;
  const auto v = make<K>(n, distribution::fewunique, 18);
  std::map<K, std::uint64_t> counts;
  for (const K k : v) ++counts[k];
  // Exactly 16 distinct keys, each picked about equally often.
  EXPECT_EQ(counts.size(), 16U);
  for (const auto& [key, count] : counts) {
    EXPECT_GT(count, n / 16 * 8 / 10);
    EXPECT_LT(count, n / 16 * 12 / 10);
  }
  EXPECT_EQ(make<K>(1, distribution::fewunique, 18).size(), 1U);
  // The values themselves come from the seed.
  const auto w = make<K>(n, distribution::fewunique, 19);
  std::set<K> other(w.begin(), w.end());
  std::uint64_t shared = 0;
  for (const auto& [key, count] : counts) shared += other.count(key);
  EXPECT_LT(shared, 4U);
}

TEST(Generate, FewuniqueU32) { check_fewunique<std::uint32_t>(); }
TEST(Generate, FewuniqueI32) { check_fewunique<std::int32_t>(); }
TEST(Generate, FewuniqueU64) { check_fewunique<std::uint64_t>(); }
TEST(Generate, FewuniqueI64) { check_fewunique<std::int64_t>(); }
TEST(Generate, FewuniqueF32) { check_fewunique<float>(); }
TEST(Generate, FewuniqueF64) { check_fewunique<double>(); }

template <typename F>
void check_nanmix()
{
  using bits = gpusort::detail::bits_t<sizeof(F)>;
  const std::uint64_t n = 200'000;
  const auto v = make<F>(n, distribution::nanmix, 20);
  std::uint64_t nan_pos = 0;
  std::uint64_t nan_neg = 0;
  std::uint64_t inf_pos = 0;
  std::uint64_t inf_neg = 0;
  std::uint64_t zero_pos = 0;
  std::uint64_t zero_neg = 0;
  std::uint64_t ordinary = 0;
  std::set<bits> nan_patterns;
  for (const F x : v) {
    if (std::isnan(x)) {
      (std::signbit(x) ? nan_neg : nan_pos)++;
      nan_patterns.insert(std::bit_cast<bits>(x));
    } else if (std::isinf(x)) {
      (std::signbit(x) ? inf_neg : inf_pos)++;
    } else if (x == F{0}) {
      (std::signbit(x) ? zero_neg : zero_pos)++;
    } else {
      ASSERT_GE(x, F{-1});
      ASSERT_LT(x, F{1});
      ++ordinary;
    }
  }
  const auto share = [&](std::uint64_t count) {
    return static_cast<double>(count) / static_cast<double>(n);
  };
  EXPECT_NEAR(share(nan_pos + nan_neg), 0.01, 0.0015);
  EXPECT_NEAR(share(inf_pos + inf_neg), 0.005, 0.001);
  EXPECT_NEAR(share(zero_pos + zero_neg), 0.005, 0.001);
  for (const std::uint64_t count : {nan_pos, nan_neg, inf_pos, inf_neg, zero_pos, zero_neg})
    EXPECT_GT(count, 200U);
  EXPECT_GT(nan_patterns.size(), 1000U);  // varied payloads
  // Both quiet and signaling NaNs (top significand bit set or clear).
  const bits quiet = bits{1} << (std::numeric_limits<F>::digits - 2);
  EXPECT_TRUE(std::any_of(nan_patterns.begin(), nan_patterns.end(),
                          [&](bits b) { return (b & quiet) != 0; }));
  EXPECT_TRUE(std::any_of(nan_patterns.begin(), nan_patterns.end(),
                          [&](bits b) { return (b & quiet) == 0; }));
  EXPECT_GT(ordinary, n * 97 / 100);
}

TEST(Generate, NanmixF32) { check_nanmix<float>(); }
TEST(Generate, NanmixF64) { check_nanmix<double>(); }

// ------------------------------------------------------------------------------------------
// Values

TEST(Generate, ValuesAreDistinctAndTruncated)
{
  const std::uint64_t n = 100'000;
  std::vector<std::uint64_t> wide(n);
  std::vector<std::uint32_t> narrow(n);
  gpusort::generate_values(gpusort::value_array{wide.data(), n, 8}, 21);
  gpusort::generate_values(gpusort::value_array{narrow.data(), n, 4}, 21);
  for (std::uint64_t i = 0; i < n; ++i)
    if (narrow[i] != static_cast<std::uint32_t>(wide[i])) FAIL() << "i=" << i;
  EXPECT_EQ(std::set<std::uint64_t>(wide.begin(), wide.end()).size(), n);
  EXPECT_GT(std::set<std::uint32_t>(narrow.begin(), narrow.end()).size(), n - 10);
  std::vector<std::uint64_t> other(n);
  gpusort::generate_values(gpusort::value_array{other.data(), n, 8}, 22);
  EXPECT_FALSE(same_bits(wide, other));
  // Values are not the uniform keys of the same seed.
  EXPECT_FALSE(same_bits(wide, make<std::uint64_t>(n, distribution::uniform, 21)));
}

TEST(Generate, ValuesWidthMustBe4Or8)
{
  std::vector<std::uint64_t> buffer(4);
  for (const std::uint32_t width : {0U, 1U, 2U, 3U, 5U, 16U})
    EXPECT_THROW(gpusort::generate_values(gpusort::value_array{buffer.data(), 4, width}, 1),
                 gpusort::invalid_argument);
}

}  // namespace
