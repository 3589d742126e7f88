// References for the stable sort, argsort and NumPy's float order, written from their
// definitions with std::stable_sort (never with gpusort's ordered bits), and the one contract
// every engine must meet, shared by the CPU engine tests and the GPU tests.
#pragma once

#include <gpusort/gpusort.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace gpusort::test {

template <typename K>
using bits_of = std::conditional_t<sizeof(K) == 4, std::uint32_t, std::uint64_t>;

/// The keys' bit patterns, so that results compare bit for bit (NaNs and signed zeros too).
template <typename K>
std::vector<bits_of<K>> raw_bits(std::span<const K> keys)
{
  std::vector<bits_of<K>> out(keys.size());
  std::transform(keys.begin(), keys.end(), out.begin(),
                 [](K k) { return std::bit_cast<bits_of<K>>(k); });
  return out;
}

/// a before b in the job's order: NumPy's (numbers by value, -0.0 == +0.0, every NaN after every
/// number and equal to every NaN, in both directions), or for floats in total order IEEE 754
/// totalOrder spelled out (sign, then magnitude; -NaN lowest).
template <typename K>
bool key_before(K a, K b, order dir, float_order floats)
{
  if constexpr (std::is_floating_point_v<K>) {
    if (floats == float_order::numpy) {
      if (std::isnan(a)) return false;
      if (std::isnan(b)) return true;
      return dir == order::ascending ? a < b : b < a;
    }
    // totalOrder: with the sign bit as the most significant key, magnitudes of negatives
    // reversed; -NaN below -inf and +NaN above +inf by their payloads, which the bits give.
    const auto total_less = [](K x, K y) {
      const auto bx = std::bit_cast<bits_of<K>>(x);
      const auto by = std::bit_cast<bits_of<K>>(y);
      const bool nx = std::signbit(x);
      const bool ny = std::signbit(y);
      if (nx != ny) return nx;
      return nx ? bx > by : bx < by;
    };
    return dir == order::ascending ? total_less(a, b) : total_less(b, a);
  } else {
    (void)floats;
    return dir == order::ascending ? a < b : b < a;
  }
}

/// np.argsort(a, kind="stable") in the job's order.
template <typename K>
std::vector<std::uint64_t> reference_argsort(const std::vector<K>& keys, order dir,
                                             float_order floats)
{
  std::vector<std::uint64_t> idx(keys.size());
  std::iota(idx.begin(), idx.end(), std::uint64_t{0});
  std::stable_sort(idx.begin(), idx.end(), [&](std::uint64_t a, std::uint64_t b) {
    return key_before(keys[a], keys[b], dir, floats);
  });
  return idx;
}

template <typename T>
bool equal_bytes(const std::vector<T>& a, const std::vector<T>& b)
{
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

/// Keys with many ties: about n/`distinct` copies of each of `distinct` values, and for floats
/// NaNs of both signs and several payloads, -0.0 and +0.0, +-inf mixed in.
template <typename K>
std::vector<K> tied_keys(std::uint64_t n, std::uint64_t distinct, std::uint64_t seed)
{
  std::mt19937_64 rng{seed};
  std::vector<K> keys(n);
  for (K& k : keys) {
    const auto v = static_cast<std::int64_t>(rng() % distinct) -
                   static_cast<std::int64_t>(distinct / 2);
    k = static_cast<K>(std::is_signed_v<K> ? v : static_cast<std::int64_t>(rng() % distinct));
  }
  if constexpr (std::is_floating_point_v<K>) {
    using B = bits_of<K>;
    constexpr B sign = B{1} << (sizeof(K) * 8 - 1);
    const B quiet = std::bit_cast<B>(std::numeric_limits<K>::quiet_NaN());
    const std::vector<K> specials{
        std::bit_cast<K>(quiet),           std::bit_cast<K>(B(quiet | sign)),
        std::bit_cast<K>(B(quiet | 1)),    std::bit_cast<K>(B(quiet | sign | 7)),
        std::bit_cast<K>(B(std::bit_cast<B>(std::numeric_limits<K>::infinity()) | 1)),
        K{-0.0},                           K{0.0},
        std::numeric_limits<K>::infinity(), -std::numeric_limits<K>::infinity(),
        K{0.5},                            K{-0.5}};
    for (K& k : keys)
      if (rng() % 4 == 0) k = specials[rng() % specials.size()];
  }
  return keys;
}

/// What an engine must do with `keys` in one order: argsort (8- and 4-byte indices, sorted keys
/// beside) equal to the reference, a stable sort of pairs whose keys and values are the
/// reference's bytes, and a stable sort of keys alone equal byte for byte, in place and into a
/// separate output. Keys alone unstable: NumPy's order by value (NaNs last) and the same multiset.
template <typename K>
void check_stable_contract(engine& eng, const std::vector<K>& keys, order dir,
                           float_order floats)
{
  const std::uint64_t n = keys.size();
  const std::vector<std::uint64_t> ref = reference_argsort(keys, dir, floats);
  std::vector<K> ref_keys(n);
  for (std::uint64_t i = 0; i < n; ++i) ref_keys[i] = keys[ref[i]];
  const sort_options options{.direction = dir, .floats = floats};
  const key_array view{const_cast<K*>(keys.data()), n, dtype_of_v<K>};

  {  // argsort, int64 indices and the sorted keys
    std::vector<std::int64_t> idx(n, -1);
    std::vector<K> sorted(n);
    eng.argsort(argsort_job{.keys = view, .indices_out = idx.data(), .index_bytes = 8,
                            .keys_out = sorted.data()},
                options);
    std::vector<std::int64_t> expected(ref.begin(), ref.end());
    EXPECT_EQ(idx, expected) << "argsort (int64)";
    EXPECT_TRUE(equal_bytes(sorted, ref_keys)) << "argsort's sorted keys";
  }
  {  // argsort, uint32 indices, no keys
    std::vector<std::uint32_t> idx(n);
    eng.argsort(argsort_job{.keys = view, .indices_out = idx.data(), .index_bytes = 4},
                options);
    std::vector<std::uint32_t> expected(ref.begin(), ref.end());
    EXPECT_EQ(idx, expected) << "argsort (uint32)";
  }
  {  // stable pairs, in place: values are the positions, so the result shows the permutation
    std::vector<K> k = keys;
    std::vector<std::uint64_t> v(n);
    std::iota(v.begin(), v.end(), std::uint64_t{0});
    sort_options stable = options;
    stable.stable = true;
    eng.sort_pairs(std::span<K>{k}, std::span<std::uint64_t>{v}, stable);
    EXPECT_EQ(v, ref) << "stable pairs: values";
    EXPECT_TRUE(equal_bytes(k, ref_keys)) << "stable pairs: keys";
  }
  {  // stable keys alone into a separate output, the input untouched
    std::vector<K> in = keys;
    std::vector<K> out(n);
    sort_options stable = options;
    stable.stable = true;
    eng.sort(sort_job{.keys = {in.data(), n, dtype_of_v<K>}, .keys_out = out.data()}, stable);
    EXPECT_TRUE(equal_bytes(out, ref_keys)) << "stable keys";
    EXPECT_TRUE(equal_bytes(in, keys)) << "stable keys: input changed";
    eng.sort(std::span<K>{in}, stable);
    EXPECT_TRUE(equal_bytes(in, ref_keys)) << "stable keys in place";
  }
  {  // unstable keys alone in place: ordered, and the same multiset of bits
    std::vector<K> k = keys;
    eng.sort(std::span<K>{k}, options);
    bool ordered = true;
    for (std::uint64_t i = 1; i < n && ordered; ++i)
      ordered = !key_before(k[i], k[i - 1], dir, floats);
    EXPECT_TRUE(ordered) << "unstable sort out of order";
    std::vector<bits_of<K>> a(n);
    std::vector<bits_of<K>> b(n);
    if (n > 0) {
      std::memcpy(a.data(), k.data(), n * sizeof(K));
      std::memcpy(b.data(), keys.data(), n * sizeof(K));
    }
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    EXPECT_EQ(a, b) << "unstable sort lost or changed keys";
  }
}

}  // namespace gpusort::test
