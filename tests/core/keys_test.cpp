// Ordered bits against a reference totalOrder written here from the IEEE 754 definition:
// classify sign, NaN, infinity, zero and payload explicitly, compare finite numbers as numbers.
#include "core/keys.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using gpusort::dtype;
using gpusort::order;
using gpusort::detail::from_ordered;
using gpusort::detail::raw_bits;
using gpusort::detail::sign_bit;
using gpusort::detail::to_ordered;

template <typename T>
int three_way(T a, T b)
{
  return a < b ? -1 : (b < a ? 1 : 0);
}

/// Position classes of IEEE 754 totalOrder, lowest first.
enum class float_class { neg_nan, neg_inf, neg_finite, neg_zero, pos_zero, pos_finite, pos_inf,
                         pos_nan };

template <typename F>
float_class classify(F x)
{
  const bool negative = std::signbit(x);
  if (std::isnan(x)) return negative ? float_class::neg_nan : float_class::pos_nan;
  if (std::isinf(x)) return negative ? float_class::neg_inf : float_class::pos_inf;
  if (x == F{0}) return negative ? float_class::neg_zero : float_class::pos_zero;
  return negative ? float_class::neg_finite : float_class::pos_finite;
}

template <typename F>
std::uint64_t nan_payload(F x)
{
  // Quiet bit included: with the IEEE 754-2008 recommended encoding, a quiet NaN orders above
  // a signaling NaN of the same sign, which is what comparing the whole significand field does.
  constexpr int digits = std::numeric_limits<F>::digits - 1;
  return static_cast<std::uint64_t>(raw_bits(x)) & ((std::uint64_t{1} << digits) - 1);
}

/// Reference totalOrder: -1, 0 or 1.
template <typename K>
int reference_compare(K a, K b)
{
  if constexpr (std::is_floating_point_v<K>) {
    const float_class ca = classify(a);
    const float_class cb = classify(b);
    if (ca != cb) return three_way(static_cast<int>(ca), static_cast<int>(cb));
    switch (ca) {
      case float_class::neg_nan: return three_way(nan_payload(b), nan_payload(a));
      case float_class::pos_nan: return three_way(nan_payload(a), nan_payload(b));
      case float_class::neg_finite:
      case float_class::pos_finite: return three_way(a, b);
      default: return 0;
    }
  } else {
    return three_way(a, b);
  }
}

template <typename F>
F float_from_bits(std::uint64_t bits)
{
  return std::bit_cast<F>(static_cast<gpusort::detail::bits_t<sizeof(F)>>(bits));
}

template <typename F>
std::vector<F> special_floats()
{
  using lim = std::numeric_limits<F>;
  constexpr int digits = lim::digits - 1;
  const std::uint64_t exponent = (sizeof(F) == 4) ? 0x7F800000ULL : 0x7FF0000000000000ULL;
  const std::uint64_t sign = (sizeof(F) == 4) ? 0x80000000ULL : 0x8000000000000000ULL;
  const std::uint64_t quiet = std::uint64_t{1} << (digits - 1);
  const std::uint64_t mantissa = (std::uint64_t{1} << digits) - 1;
  std::vector<F> out;
  for (const std::uint64_t payload : {quiet, quiet | 1, quiet | 0x1234, std::uint64_t{1},
                                      std::uint64_t{2}, mantissa, quiet - 1}) {
    out.push_back(float_from_bits<F>(exponent | payload));
    out.push_back(float_from_bits<F>(sign | exponent | payload));
  }
  for (const F x : {lim::infinity(), lim::max(), F{1}, F{0.5}, lim::min(), lim::denorm_min(),
                    float_from_bits<F>(mantissa),  // largest denormal
                    float_from_bits<F>(2),         // second smallest denormal
                    std::nextafter(F{1}, F{2}), std::nextafter(lim::min(), F{0})}) {
    out.push_back(x);
    out.push_back(-x);
  }
  out.push_back(F{0});
  out.push_back(-F{0});
  return out;
}

template <typename I>
std::vector<I> special_ints()
{
  using lim = std::numeric_limits<I>;
  std::vector<I> out{lim::min(), static_cast<I>(lim::min() + 1), I{0}, I{1}, I{2},
                     static_cast<I>(lim::max() - 1), lim::max(), static_cast<I>(lim::max() / 2),
                     static_cast<I>(lim::max() / 2 + 1)};
  if constexpr (std::is_signed_v<I>) {
    out.push_back(I{-1});
    out.push_back(I{-2});
    out.push_back(static_cast<I>(lim::min() / 2));
  }
  return out;
}

/// Special values plus random bit patterns (many of them NaNs for floats: the exponent is random).
template <typename K>
std::vector<K> samples()
{
  std::vector<K> out;
  if constexpr (std::is_floating_point_v<K>)
    out = special_floats<K>();
  else
    out = special_ints<K>();
  std::mt19937_64 rng{12345};
  using bits = gpusort::detail::bits_t<sizeof(K)>;
  for (int i = 0; i < 300; ++i) out.push_back(std::bit_cast<K>(static_cast<bits>(rng())));
  if constexpr (std::is_floating_point_v<K>) {
    // Random NaNs and random numbers with the top exponent bits set, so NaN payloads meet.
    for (int i = 0; i < 100; ++i) {
      const auto r = static_cast<bits>(rng());
      const bits exp_mask = std::bit_cast<bits>(std::numeric_limits<K>::infinity());
      out.push_back(std::bit_cast<K>(static_cast<bits>(r | exp_mask)));
    }
  }
  return out;
}

template <typename K>
void check_type()
{
  constexpr dtype t = gpusort::dtype_of_v<K>;
  const std::vector<K> values = samples<K>();
  for (const order dir : {order::ascending, order::descending}) {
    for (const K a : values) {
      const auto oa = to_ordered(raw_bits(a), t, dir);
      if (from_ordered(oa, t, dir) != raw_bits(a)) FAIL() << "round trip of " << raw_bits(a);
      for (const K b : values) {
        const auto ob = to_ordered(raw_bits(b), t, dir);
        const int expected =
            dir == order::ascending ? reference_compare(a, b) : reference_compare(b, a);
        if (three_way(oa, ob) != expected) {
          FAIL() << gpusort::name_of(t) << (dir == order::ascending ? " asc" : " desc")
                 << " bits " << std::hex << raw_bits(a) << " vs " << raw_bits(b)
                 << ": expected " << expected;
        }
      }
    }
  }
}

TEST(Keys, OrderedBitsFollowTotalOrderU32) { check_type<std::uint32_t>(); }
TEST(Keys, OrderedBitsFollowTotalOrderI32) { check_type<std::int32_t>(); }
TEST(Keys, OrderedBitsFollowTotalOrderU64) { check_type<std::uint64_t>(); }
TEST(Keys, OrderedBitsFollowTotalOrderI64) { check_type<std::int64_t>(); }
TEST(Keys, OrderedBitsFollowTotalOrderF32) { check_type<float>(); }
TEST(Keys, OrderedBitsFollowTotalOrderF64) { check_type<double>(); }

TEST(Keys, DescendingIsBitwiseComplement)
{
  for (const std::uint64_t raw : {0ULL, 1ULL, 0x8000000000000000ULL, 0x7FF8000000000001ULL,
                                  0xFFFFFFFFFFFFFFFFULL}) {
    for (const dtype t : {dtype::u64, dtype::i64, dtype::f64})
      EXPECT_EQ(to_ordered(raw, t, order::descending), ~to_ordered(raw, t, order::ascending));
  }
}

TEST(Keys, KnownOrderedValues)
{
  // Written out by hand: most negative maps to 0, most positive to all ones.
  EXPECT_EQ(to_ordered<std::uint32_t>(0x80000000U, dtype::i32, order::ascending), 0U);
  EXPECT_EQ(to_ordered<std::uint32_t>(0x7FFFFFFFU, dtype::i32, order::ascending), 0xFFFFFFFFU);
  EXPECT_EQ(to_ordered<std::uint32_t>(0xFFFFFFFFU, dtype::f32, order::ascending), 0U);  // -NaN
  EXPECT_EQ(to_ordered<std::uint32_t>(0x7FFFFFFFU, dtype::f32, order::ascending), 0xFFFFFFFFU);
  EXPECT_EQ(to_ordered<std::uint32_t>(0x80000000U, dtype::f32, order::ascending), 0x7FFFFFFFU);
  EXPECT_EQ(to_ordered<std::uint32_t>(0x00000000U, dtype::f32, order::ascending), 0x80000000U);
  EXPECT_EQ(to_ordered<std::uint64_t>(5, dtype::u64, order::ascending), 5U);
}

template <typename Bits>
void check_xor_form(std::mt19937_64& rng)
{
  std::vector<Bits> values = {0, 1, sign_bit<Bits>, static_cast<Bits>(sign_bit<Bits> - 1),
                              static_cast<Bits>(sign_bit<Bits> + 1), static_cast<Bits>(~Bits{0})};
  for (int i = 0; i < 1000; ++i) values.push_back(static_cast<Bits>(rng()));
  for (const dtype t : gpusort::all_dtypes) {
    if (gpusort::size_of(t) != sizeof(Bits)) continue;
    for (const order dir : {order::ascending, order::descending}) {
      const auto to = gpusort::detail::ordered_xor<Bits>(t, dir, true);
      const auto from = gpusort::detail::ordered_xor<Bits>(t, dir, false);
      for (const Bits x : values) {
        ASSERT_EQ(to(x), to_ordered(x, t, dir)) << gpusort::name_of(t) << " " << x;
        ASSERT_EQ(from(x), from_ordered(x, t, dir)) << gpusort::name_of(t) << " " << x;
      }
    }
  }
}

TEST(Keys, XorFormEqualsTheTransforms)
{
  std::mt19937_64 rng{42};
  check_xor_form<std::uint32_t>(rng);
  check_xor_form<std::uint64_t>(rng);
  // identity where the ordered bits are the raw bits
  const auto id = gpusort::detail::ordered_xor<std::uint64_t>(dtype::u64, order::ascending, true);
  EXPECT_EQ(id.set, 0U);
  EXPECT_EQ(id.clear, 0U);
}

TEST(Keys, OrderedIsIdentity)
{
  for (const dtype t : gpusort::all_dtypes) {
    for (const order dir : {order::ascending, order::descending}) {
      const bool expected = dir == order::ascending && (t == dtype::u32 || t == dtype::u64);
      EXPECT_EQ(gpusort::detail::ordered_is_identity(t, dir), expected) << gpusort::name_of(t);
      // The claim must hold for actual bits: identity everywhere, or some bits that change.
      bool all_same = true;
      for (const std::uint64_t raw : {0ULL, 1ULL, 0x7FFFFFFFULL, 0x80000000ULL, 0xFFFFFFFFULL})
        if (size_of(t) == 4) {
          const auto r32 = static_cast<std::uint32_t>(raw);
          all_same = all_same && to_ordered(r32, t, dir) == r32;
        } else {
          all_same = all_same && to_ordered(raw, t, dir) == raw;
        }
      EXPECT_EQ(all_same, expected) << gpusort::name_of(t);
    }
  }
}

TEST(Keys, VisitDtypeDispatchesTheRightType)
{
  for (const dtype t : gpusort::all_dtypes) {
    const dtype seen = gpusort::detail::visit_dtype(t, []<typename K>() {
      return gpusort::dtype_of_v<K>;
    });
    EXPECT_EQ(seen, t);
    const std::size_t bytes = gpusort::detail::visit_dtype(t, []<typename K>() {
      return sizeof(K);
    });
    EXPECT_EQ(bytes, gpusort::size_of(t));
  }
  const bool f = gpusort::detail::visit_dtype(dtype::f32, []<typename K>() {
    return std::is_same_v<K, float>;
  });
  EXPECT_TRUE(f);
  const bool i = gpusort::detail::visit_dtype(dtype::i64, []<typename K>() {
    return std::is_same_v<K, std::int64_t>;
  });
  EXPECT_TRUE(i);
}

TEST(Keys, VisitLayoutDispatchesKeyAndValueWidths)
{
  struct seen {
    std::size_t key_bytes;
    std::size_t value_bytes;  // 0: no_value
    bool key_unsigned;
  };
  auto probe = []<typename K, typename V>() {
    std::size_t vb = 0;
    if constexpr (!std::is_same_v<V, gpusort::detail::no_value>) vb = sizeof(V);
    return seen{sizeof(K), vb, std::is_unsigned_v<K>};
  };
  for (const std::size_t kb : {std::size_t{4}, std::size_t{8}}) {
    for (const std::size_t vb : {std::size_t{0}, std::size_t{4}, std::size_t{8}}) {
      const seen s = gpusort::detail::visit_layout(kb, vb, probe);
      EXPECT_EQ(s.key_bytes, kb);
      EXPECT_EQ(s.value_bytes, vb);
      EXPECT_TRUE(s.key_unsigned);
    }
  }
}

/// NumPy's order from its definition: numbers by value (-0.0 == +0.0), every NaN after every
/// number and equal to every other NaN, in both directions; -1, 0, 1 like three_way.
template <typename F>
int numpy_three_way(F a, F b, order dir)
{
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) - std::isnan(b);
  return dir == order::ascending ? three_way(a, b) : three_way(b, a);
}

template <typename F>
std::vector<F> numpy_probe_values()
{
  using B = gpusort::detail::bits_t<sizeof(F)>;
  const B quiet = raw_bits(std::numeric_limits<F>::quiet_NaN());
  const B max_payload = static_cast<B>(~B{0} >> 1);  // exponent all ones, every mantissa bit
  std::vector<F> v{F{0.0}, F{-0.0}, F{1.5}, F{-1.5}, std::numeric_limits<F>::infinity(),
                   -std::numeric_limits<F>::infinity(), std::numeric_limits<F>::max(),
                   std::numeric_limits<F>::lowest(), std::numeric_limits<F>::denorm_min(),
                   -std::numeric_limits<F>::denorm_min(), std::bit_cast<F>(quiet),
                   std::bit_cast<F>(static_cast<B>(quiet | sign_bit<B>)),
                   std::bit_cast<F>(
                       static_cast<B>(raw_bits(std::numeric_limits<F>::infinity()) | 1)),
                   std::bit_cast<F>(max_payload),
                   std::bit_cast<F>(static_cast<B>(max_payload | sign_bit<B>))};
  std::mt19937_64 rng{11};
  for (int i = 0; i < 200; ++i) v.push_back(std::bit_cast<F>(static_cast<B>(rng())));
  return v;
}

template <typename F>
void check_numpy_order()
{
  using B = gpusort::detail::bits_t<sizeof(F)>;
  const std::vector<F> values = numpy_probe_values<F>();
  for (const order dir : {order::ascending, order::descending}) {
    const gpusort::detail::key_order plain{.type = gpusort::dtype_of_v<F>, .dir = dir,
                                           .floats = gpusort::float_order::numpy};
    gpusort::detail::key_order canonical = plain;
    canonical.canonical = true;
    for (const F a : values) {
      const B raw_a = raw_bits(a);
      // The plain map is a bijection: back to the very bits.
      EXPECT_EQ(from_ordered<B>(to_ordered<B>(raw_a, plain), plain), raw_a);
      for (const F b : values) {
        const B raw_b = raw_bits(b);
        const int want = numpy_three_way(a, b, dir);
        // Canonical codes follow NumPy's order exactly, ties included.
        EXPECT_EQ(three_way(to_ordered<B>(raw_a, canonical), to_ordered<B>(raw_b, canonical)),
                  want)
            << std::hex << raw_a << " vs " << raw_b;
        // The plain map refines it: never against it, and distinct bits stay distinct.
        const int got = three_way(to_ordered<B>(raw_a, plain), to_ordered<B>(raw_b, plain));
        if (want != 0) {
          EXPECT_EQ(got, want) << std::hex << raw_a << " vs " << raw_b;
        }
        EXPECT_EQ(got == 0, raw_a == raw_b);
      }
    }
  }
}

TEST(Keys, NumpyOrderF32) { check_numpy_order<float>(); }
TEST(Keys, NumpyOrderF64) { check_numpy_order<double>(); }

TEST(Keys, NumpyOrderLeavesIntegersAlone)
{
  const gpusort::detail::key_order k{.type = dtype::i64, .dir = order::descending,
                                     .floats = gpusort::float_order::numpy, .canonical = true};
  for (const std::uint64_t x : {std::uint64_t{0}, std::uint64_t{1} << 63, ~std::uint64_t{0}})
    EXPECT_EQ(to_ordered<std::uint64_t>(x, k), to_ordered<std::uint64_t>(x, dtype::i64,
                                                                        order::descending));
}

}  // namespace
