// The verifier must reject every kind of broken output and accept correct sorts. Correct sorts
// come from std::stable_sort with a totalOrder comparator written here (not from ordered bits).
#include "core/verify.hpp"

#include "core/generate.hpp"

#include <gpusort/error.hpp>

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace {

using gpusort::distribution;
using gpusort::dtype;
using gpusort::fingerprint;
using gpusort::order;

// ------------------------------------------------------------------------------------------
// Reference totalOrder

template <typename F>
int float_rank(F x)
{
  const bool negative = std::signbit(x);
  if (std::isnan(x)) return negative ? 0 : 7;
  if (std::isinf(x)) return negative ? 1 : 6;
  if (x == F{0}) return negative ? 3 : 4;
  return negative ? 2 : 5;
}

template <typename F>
auto significand_field(F x)
{
  using bits = std::conditional_t<sizeof(F) == 4, std::uint32_t, std::uint64_t>;
  constexpr bits mask = (bits{1} << (std::numeric_limits<F>::digits - 1)) - 1;
  return std::bit_cast<bits>(x) & mask;
}

template <typename K>
bool total_less(K a, K b)
{
  if constexpr (std::is_floating_point_v<K>) {
    const int ra = float_rank(a);
    const int rb = float_rank(b);
    if (ra != rb) return ra < rb;
    if (ra == 0) return significand_field(a) > significand_field(b);  // -NaN: larger is lower
    if (ra == 7) return significand_field(a) < significand_field(b);
    if (ra == 2 || ra == 5) return a < b;
    return false;
  } else {
    return a < b;
  }
}

template <typename K>
gpusort::key_array keys_of(std::vector<K>& v)
{
  return gpusort::key_array{v.data(), v.size(), gpusort::dtype_of_v<K>};
}

template <typename V>
gpusort::value_array values_of(std::vector<V>& v)
{
  return gpusort::value_array{v.data(), v.size(), static_cast<std::uint32_t>(sizeof(V))};
}

template <typename K>
std::vector<K> make(std::uint64_t n, distribution d, std::uint64_t seed)
{
  std::vector<K> v(n);
  gpusort::generate(std::span<K>{v}, d, seed);
  return v;
}

std::vector<std::uint64_t> make_values(std::uint64_t n, std::uint64_t seed)
{
  std::vector<std::uint64_t> v(n);
  gpusort::generate_values(gpusort::value_array{v.data(), n, 8}, seed);
  return v;
}

/// Reference sort of (key, value) pairs by key.
template <typename K, typename V>
void reference_sort(std::vector<K>& keys, std::vector<V>& values, order dir)
{
  std::vector<std::pair<K, V>> pairs(keys.size());
  for (std::size_t i = 0; i < keys.size(); ++i) pairs[i] = {keys[i], values[i]};
  std::stable_sort(pairs.begin(), pairs.end(), [dir](const auto& a, const auto& b) {
    return dir == order::ascending ? total_less(a.first, b.first) : total_less(b.first, a.first);
  });
  for (std::size_t i = 0; i < keys.size(); ++i) std::tie(keys[i], values[i]) = pairs[i];
}

template <typename K>
void reference_sort(std::vector<K>& keys, order dir)
{
  std::stable_sort(keys.begin(), keys.end(), [dir](K a, K b) {
    return dir == order::ascending ? total_less(a, b) : total_less(b, a);
  });
}

bool mentions(const std::string& text, const std::string& part)
{
  return text.find(part) != std::string::npos;
}

// ------------------------------------------------------------------------------------------
// Correct sorts pass

template <typename K>
void check_accepts_correct_sorts()
{
  constexpr dtype t = gpusort::dtype_of_v<K>;
  const std::uint64_t n = 3001;
  for (const distribution d : {distribution::uniform, distribution::fewunique,
                               distribution::nanmix, distribution::zero}) {
    if (!gpusort::applies_to(d, t)) continue;
    for (const order dir : {order::ascending, order::descending}) {
      auto keys = make<K>(n, d, 31);
      auto values = make_values(n, 32);
      const fingerprint with_values = gpusort::fingerprint_of(keys_of(keys), values_of(values));
      const fingerprint keys_only = gpusort::fingerprint_of(keys_of(keys));
      std::vector<K> sorted_keys = keys;
      reference_sort(sorted_keys, dir);
      reference_sort(keys, values, dir);
      const auto r1 = gpusort::verify(keys_of(keys), values_of(values), dir, with_values);
      EXPECT_TRUE(r1.ok) << gpusort::name_of(t) << " " << gpusort::name_of(d) << ": " << r1.message;
      EXPECT_TRUE(r1.message.empty());
      const auto r2 = gpusort::verify(keys_of(sorted_keys), std::nullopt, dir, keys_only);
      EXPECT_TRUE(r2.ok) << gpusort::name_of(t) << " " << gpusort::name_of(d) << ": " << r2.message;
      // The other direction fails unless all keys are equal.
      const order other = dir == order::ascending ? order::descending : order::ascending;
      EXPECT_EQ(gpusort::check_order(keys_of(sorted_keys), other).ok, d == distribution::zero);
    }
  }
}

TEST(Verify, AcceptsCorrectSortsU32) { check_accepts_correct_sorts<std::uint32_t>(); }
TEST(Verify, AcceptsCorrectSortsI32) { check_accepts_correct_sorts<std::int32_t>(); }
TEST(Verify, AcceptsCorrectSortsU64) { check_accepts_correct_sorts<std::uint64_t>(); }
TEST(Verify, AcceptsCorrectSortsI64) { check_accepts_correct_sorts<std::int64_t>(); }
TEST(Verify, AcceptsCorrectSortsF32) { check_accepts_correct_sorts<float>(); }
TEST(Verify, AcceptsCorrectSortsF64) { check_accepts_correct_sorts<double>(); }

TEST(Verify, EmptyAndSingleArrays)
{
  const fingerprint empty = gpusort::fingerprint_of(gpusort::key_array{nullptr, 0, dtype::f32});
  EXPECT_EQ(empty, (fingerprint{0, 0, 0}));
  for (const order dir : {order::ascending, order::descending}) {
    EXPECT_TRUE(gpusort::verify(gpusort::key_array{nullptr, 0, dtype::f32}, std::nullopt, dir,
                                empty)
                    .ok);
    EXPECT_TRUE(gpusort::verify(gpusort::key_array{nullptr, 0, dtype::u64},
                                gpusort::value_array{nullptr, 0, 4}, dir, empty)
                    .ok);
    std::vector<double> one{std::numeric_limits<double>::quiet_NaN()};
    std::vector<std::uint32_t> value{9};
    const fingerprint f = gpusort::fingerprint_of(keys_of(one), values_of(value));
    EXPECT_EQ(f.count, 1U);
    EXPECT_TRUE(gpusort::verify(keys_of(one), values_of(value), dir, f).ok);
    EXPECT_FALSE(gpusort::verify(keys_of(one), values_of(value), dir, empty).ok);
  }
}

// ------------------------------------------------------------------------------------------
// Broken outputs are caught

struct sorted_pairs {
  std::vector<std::uint64_t> keys;
  std::vector<std::uint64_t> values;
  fingerprint original;
};

/// 1000 uniform u64 keys sorted with their values: gaps between keys are huge, so +1 keeps order.
sorted_pairs sorted_input()
{
  sorted_pairs s{make<std::uint64_t>(1000, distribution::uniform, 41), make_values(1000, 42), {}};
  s.original = gpusort::fingerprint_of(keys_of(s.keys), values_of(s.values));
  reference_sort(s.keys, s.values, order::ascending);
  return s;
}

gpusort::verify_result verify_pairs(sorted_pairs& s)
{
  return gpusort::verify(keys_of(s.keys), values_of(s.values), order::ascending, s.original);
}

TEST(Verify, CatchesOneKeyChanged)
{
  sorted_pairs s = sorted_input();
  ASSERT_TRUE(verify_pairs(s).ok);
  ++s.keys[500];  // still sorted
  ASSERT_TRUE(gpusort::check_order(keys_of(s.keys), order::ascending).ok);
  const auto r = verify_pairs(s);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.message, "not a permutation of the input: fingerprint differs (count 1000 vs 1000)");
}

TEST(Verify, CatchesTwoKeysSwapped)
{
  sorted_pairs s = sorted_input();
  std::swap(s.keys[100], s.keys[101]);
  auto r = verify_pairs(s);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(mentions(r.message, "not sorted ascending at index 100: ")) << r.message;
  std::swap(s.keys[100], s.keys[101]);
  std::swap(s.keys[300], s.keys[700]);
  const auto c = gpusort::check_order(keys_of(s.keys), order::ascending);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.first_violation, 300U);
  r = verify_pairs(s);
  EXPECT_TRUE(mentions(r.message, "at index 300: " + std::to_string(s.keys[300]) + " > " +
                                      std::to_string(s.keys[301])))
      << r.message;
}

TEST(Verify, CatchesTwoValuesSwapped)
{
  sorted_pairs s = sorted_input();
  const fingerprint keys_only = gpusort::fingerprint_of(keys_of(s.keys));
  std::swap(s.values[10], s.values[990]);
  const auto r = verify_pairs(s);
  EXPECT_FALSE(r.ok);
  EXPECT_TRUE(mentions(r.message, "not a permutation")) << r.message;
  // The keys alone are still fine: only the pairing broke.
  EXPECT_TRUE(gpusort::verify(keys_of(s.keys), std::nullopt, order::ascending, keys_only).ok);
}

TEST(Verify, CatchesAValueChanged)
{
  sorted_pairs s = sorted_input();
  s.values[777] ^= std::uint64_t{1} << 63;
  EXPECT_FALSE(verify_pairs(s).ok);
  s.values[777] ^= std::uint64_t{1} << 63;
  EXPECT_TRUE(verify_pairs(s).ok);
  s.values[0] += 1;
  EXPECT_FALSE(verify_pairs(s).ok);
}

TEST(Verify, CatchesOneDropped)
{
  sorted_pairs s = sorted_input();
  s.keys.erase(s.keys.begin() + 400);
  s.values.erase(s.values.begin() + 400);
  const auto r = verify_pairs(s);
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.message, "not a permutation of the input: fingerprint differs (count 999 vs 1000)");
}

TEST(Verify, CatchesOneDuplicatedReplacingAnother)
{
  sorted_pairs s = sorted_input();
  s.keys[601] = s.keys[600];
  s.values[601] = s.values[600];
  EXPECT_TRUE(gpusort::check_order(keys_of(s.keys), order::ascending).ok);
  EXPECT_FALSE(verify_pairs(s).ok);
  // Keys only as well.
  sorted_pairs t = sorted_input();
  const fingerprint keys_only = gpusort::fingerprint_of(keys_of(t.keys));
  t.keys[0] = t.keys[1];
  EXPECT_FALSE(gpusort::verify(keys_of(t.keys), std::nullopt, order::ascending, keys_only).ok);
}

template <typename F>
void check_nan_payload_and_zero_sign()
{
  using bits = std::conditional_t<sizeof(F) == 4, std::uint32_t, std::uint64_t>;
  const bits exponent = std::bit_cast<bits>(std::numeric_limits<F>::infinity());
  const F nan1 = std::bit_cast<F>(static_cast<bits>(exponent | 1));
  const F nan2 = std::bit_cast<F>(static_cast<bits>(exponent | 2));
  const F neg_nan = std::bit_cast<F>(static_cast<bits>(~bits{0}));
  // Sorted before and after the change: only the fingerprint can tell.
  std::vector<F> keys{neg_nan, F{-1}, -F{0}, F{0}, F{1}, nan1};
  const fingerprint original = gpusort::fingerprint_of(keys_of(keys));
  ASSERT_TRUE(gpusort::verify(keys_of(keys), std::nullopt, order::ascending, original).ok);
  keys[5] = nan2;
  ASSERT_TRUE(gpusort::check_order(keys_of(keys), order::ascending).ok);
  EXPECT_FALSE(gpusort::verify(keys_of(keys), std::nullopt, order::ascending, original).ok);
  keys[5] = nan1;
  keys[2] = F{0};  // -0.0 -> +0.0
  ASSERT_TRUE(gpusort::check_order(keys_of(keys), order::ascending).ok);
  EXPECT_FALSE(gpusort::verify(keys_of(keys), std::nullopt, order::ascending, original).ok);
  // +0.0 before -0.0, and a NaN of the other sign, are order violations.
  std::vector<F> zeros{F{0}, -F{0}};
  const auto r = gpusort::verify(keys_of(zeros), std::nullopt, order::ascending,
                                 gpusort::fingerprint_of(keys_of(zeros)));
  EXPECT_EQ(r.message, "not sorted ascending at index 0: 0 > -0");
  std::vector<F> nans{nan1, F{1}};
  const auto c = gpusort::check_order(keys_of(nans), order::ascending);
  EXPECT_FALSE(c.ok);
  std::vector<F> neg_first{neg_nan, -std::numeric_limits<F>::infinity()};
  EXPECT_TRUE(gpusort::check_order(keys_of(neg_first), order::ascending).ok);
  const auto d = gpusort::verify(keys_of(nans), std::nullopt, order::ascending,
                                 gpusort::fingerprint_of(keys_of(nans)));
  EXPECT_TRUE(mentions(d.message, "nan (bits 0x")) << d.message;
}

TEST(Verify, CatchesNanPayloadAndZeroSignF32) { check_nan_payload_and_zero_sign<float>(); }
TEST(Verify, CatchesNanPayloadAndZeroSignF64) { check_nan_payload_and_zero_sign<double>(); }

TEST(Verify, NanPayloadChangeInsideSortedNanmix)
{
  auto keys = make<float>(5000, distribution::nanmix, 43);
  const fingerprint original = gpusort::fingerprint_of(keys_of(keys));
  reference_sort(keys, order::ascending);
  ASSERT_TRUE(gpusort::verify(keys_of(keys), std::nullopt, order::ascending, original).ok);
  // The last key is the +NaN with the largest payload; flip one payload bit.
  ASSERT_TRUE(std::isnan(keys.back()));
  keys.back() = std::bit_cast<float>(std::bit_cast<std::uint32_t>(keys.back()) ^ 1U);
  EXPECT_FALSE(gpusort::verify(keys_of(keys), std::nullopt, order::ascending, original).ok);
}

TEST(Verify, MessageNamesIndexAndKeys)
{
  std::vector<std::uint32_t> keys(100, 0);
  keys[41] = 17;
  keys[42] = 3;
  for (std::size_t i = 43; i < keys.size(); ++i) keys[i] = 100;
  const auto r = gpusort::verify(keys_of(keys), std::nullopt, order::ascending,
                                 gpusort::fingerprint_of(keys_of(keys)));
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.message, "not sorted ascending at index 41: 17 > 3");
  std::vector<std::int64_t> down{5, 4, -3, -2, -9};
  const auto d = gpusort::verify(keys_of(down), std::nullopt, order::descending,
                                 gpusort::fingerprint_of(keys_of(down)));
  EXPECT_EQ(d.message, "not sorted descending at index 2: -3 < -2");
}

// ------------------------------------------------------------------------------------------
// Order check

TEST(Verify, DescendingCheck)
{
  std::vector<std::int32_t> keys{9, 7, 7, 0, -1, -1, std::numeric_limits<std::int32_t>::min()};
  EXPECT_TRUE(gpusort::check_order(keys_of(keys), order::descending).ok);
  const auto asc = gpusort::check_order(keys_of(keys), order::ascending);
  EXPECT_FALSE(asc.ok);
  EXPECT_EQ(asc.first_violation, 0U);
  keys[5] = 3;
  const auto desc = gpusort::check_order(keys_of(keys), order::descending);
  EXPECT_FALSE(desc.ok);
  EXPECT_EQ(desc.first_violation, 4U);
  std::vector<double> f{std::numeric_limits<double>::quiet_NaN(),
                        std::numeric_limits<double>::infinity(), 2.5, 0.0, -0.0, -1e-310,
                        -std::numeric_limits<double>::infinity(),
                        -std::numeric_limits<double>::quiet_NaN()};
  EXPECT_TRUE(gpusort::check_order(keys_of(f), order::descending).ok);
  std::reverse(f.begin(), f.end());
  EXPECT_TRUE(gpusort::check_order(keys_of(f), order::ascending).ok);
}

TEST(Verify, ReportsTheSmallestViolationAcrossWorkItems)
{
  const std::uint64_t n = 300'000;
  std::vector<std::uint32_t> keys(n);
  for (std::uint64_t i = 0; i < n; ++i) keys[i] = static_cast<std::uint32_t>(i);
  EXPECT_TRUE(gpusort::check_order(keys_of(keys), order::ascending).ok);
  // A violation exactly across a boundary of 2^16 elements.
  keys[65'535] = 70'000;
  auto c = gpusort::check_order(keys_of(keys), order::ascending);
  EXPECT_FALSE(c.ok);
  EXPECT_EQ(c.first_violation, 65'535U);
  keys[250'000] = 0;
  keys[1'000] = 5;
  c = gpusort::check_order(keys_of(keys), order::ascending);
  EXPECT_EQ(c.first_violation, 999U);
  keys[n - 1] = 0;  // last pair
  keys[1'000] = 1'000;
  keys[65'535] = 65'535;
  keys[250'000] = 250'000;
  c = gpusort::check_order(keys_of(keys), order::ascending);
  EXPECT_EQ(c.first_violation, n - 2);
}

// ------------------------------------------------------------------------------------------
// Fingerprint

TEST(Verify, FingerprintIsOrderIndependent)
{
  const std::uint64_t n = 20'000;
  auto keys = make<double>(n, distribution::nanmix, 51);
  auto values = make_values(n, 52);
  const fingerprint a = gpusort::fingerprint_of(keys_of(keys), values_of(values));
  const fingerprint k = gpusort::fingerprint_of(keys_of(keys));
  std::vector<std::size_t> perm(n);
  for (std::size_t i = 0; i < n; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64{53});
  std::vector<double> keys2(n);
  std::vector<std::uint64_t> values2(n);
  for (std::size_t i = 0; i < n; ++i) {
    keys2[i] = keys[perm[i]];
    values2[i] = values[perm[i]];
  }
  EXPECT_EQ(gpusort::fingerprint_of(keys_of(keys2), values_of(values2)), a);
  EXPECT_EQ(gpusort::fingerprint_of(keys_of(keys2)), k);
  EXPECT_EQ(a.count, n);
  EXPECT_NE(a.lo, k.lo);
  EXPECT_NE(a.hi, k.hi);
  EXPECT_NE(a.lo, a.hi);
}

TEST(Verify, FingerprintOfRawBits)
{
  // Values count as their bits zero-extended, and "no values" as values of 0.
  std::vector<std::uint32_t> keys{1, 2, 3, 0xFFFFFFFF};
  std::vector<std::uint32_t> narrow{7, 0, 0xFFFFFFFF, 9};
  std::vector<std::uint64_t> wide{7, 0, 0xFFFFFFFF, 9};
  std::vector<std::uint64_t> zeros(4, 0);
  EXPECT_EQ(gpusort::fingerprint_of(keys_of(keys), values_of(narrow)),
            gpusort::fingerprint_of(keys_of(keys), values_of(wide)));
  EXPECT_EQ(gpusort::fingerprint_of(keys_of(keys), values_of(zeros)),
            gpusort::fingerprint_of(keys_of(keys)));
  // Keys hash by bits: float 1.0f and its bit pattern as u32 agree, -0.0 and +0.0 do not.
  std::vector<float> f{1.0F, -0.0F};
  std::vector<std::uint32_t> u{0x3F800000U, 0x80000000U};
  EXPECT_EQ(gpusort::fingerprint_of(keys_of(f)), gpusort::fingerprint_of(keys_of(u)));
  std::vector<float> g{1.0F, 0.0F};
  EXPECT_NE(gpusort::fingerprint_of(keys_of(f)), gpusort::fingerprint_of(keys_of(g)));
}

TEST(Verify, FingerprintSeparatesNearbyMultisets)
{
  // Every single-bit change of every key of a small set moves both sums.
  std::vector<std::uint64_t> keys{0, 1, 2, 3, 0xDEADBEEF, ~std::uint64_t{0}};
  const fingerprint f = gpusort::fingerprint_of(keys_of(keys));
  for (std::size_t i = 0; i < keys.size(); ++i) {
    for (int bit = 0; bit < 64; ++bit) {
      std::vector<std::uint64_t> changed = keys;
      changed[i] ^= std::uint64_t{1} << bit;
      const fingerprint g = gpusort::fingerprint_of(keys_of(changed));
      ASSERT_NE(g.lo, f.lo) << i << " " << bit;
      ASSERT_NE(g.hi, f.hi) << i << " " << bit;
    }
  }
}

TEST(Verify, FingerprintIndependentOfThreadCount)
{
  const int saved = omp_get_max_threads();
  const std::uint64_t n = 300'001;
  auto keys = make<std::int64_t>(n, distribution::uniform, 61);
  auto values = make_values(n, 62);
  omp_set_num_threads(1);
  const fingerprint one = gpusort::fingerprint_of(keys_of(keys), values_of(values));
  const auto c1 = gpusort::check_order(keys_of(keys), order::ascending);
  omp_set_num_threads(3);
  const fingerprint three = gpusort::fingerprint_of(keys_of(keys), values_of(values));
  const auto c3 = gpusort::check_order(keys_of(keys), order::ascending);
  omp_set_num_threads(saved);
  EXPECT_EQ(one, three);
  EXPECT_EQ(c1.first_violation, c3.first_violation);
  // A serial reference for the first violation.
  std::uint64_t first = 0;
  while (keys[first] <= keys[first + 1]) ++first;
  EXPECT_EQ(c1.first_violation, first);
}

// ------------------------------------------------------------------------------------------
// Bad arguments

TEST(Verify, ValueCountMustMatch)
{
  std::vector<std::uint32_t> keys{1, 2, 3};
  std::vector<std::uint64_t> values{1, 2};
  EXPECT_THROW(gpusort::fingerprint_of(keys_of(keys), values_of(values)),
               gpusort::invalid_argument);
  EXPECT_THROW(gpusort::verify(keys_of(keys), values_of(values), order::ascending, {}),
               gpusort::invalid_argument);
  std::vector<std::uint64_t> three{1, 2, 3};
  EXPECT_THROW(
      gpusort::fingerprint_of(keys_of(keys), gpusort::value_array{three.data(), 3, 2}),
      gpusort::invalid_argument);
  EXPECT_THROW(gpusort::fingerprint_of(gpusort::key_array{nullptr, 3, dtype::u32}),
               gpusort::invalid_argument);
}

}  // namespace
