// Key order: every key type maps to unsigned "ordered bits" whose unsigned order is the key
// order (IEEE 754 totalOrder for floats; descending is the bitwise complement). All sorting
// inside gpusort happens on ordered bits, so radix and comparison sorts agree and a comparison
// sort never meets a raw NaN.
#pragma once

#include <gpusort/types.hpp>

#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#if defined(__CUDACC__)
#define GPUSORT_HD __host__ __device__
#else
#define GPUSORT_HD
#endif

namespace gpusort::detail {

template <std::size_t Bytes>
using bits_t = std::conditional_t<Bytes == 4, std::uint32_t, std::uint64_t>;

template <typename Bits>
inline constexpr Bits sign_bit = Bits{1} << (sizeof(Bits) * 8 - 1);

/// Raw bits of a key of type `t` -> ordered bits for `dir`.
template <typename Bits>
GPUSORT_HD constexpr Bits to_ordered(Bits raw, dtype t, order dir) noexcept
{
  Bits o = raw;
  if (t == dtype::i32 || t == dtype::i64) {
    o = raw ^ sign_bit<Bits>;
  } else if (t == dtype::f32 || t == dtype::f64) {
    o = (raw & sign_bit<Bits>) ? Bits(~raw) : Bits(raw ^ sign_bit<Bits>);
  }
  return dir == order::descending ? Bits(~o) : o;
}

/// Inverse of to_ordered.
template <typename Bits>
GPUSORT_HD constexpr Bits from_ordered(Bits o, dtype t, order dir) noexcept
{
  if (dir == order::descending) o = Bits(~o);
  if (t == dtype::i32 || t == dtype::i64) return o ^ sign_bit<Bits>;
  if (t == dtype::f32 || t == dtype::f64)
    return (o & sign_bit<Bits>) ? Bits(o ^ sign_bit<Bits>) : Bits(~o);
  return o;
}

/// to_ordered or from_ordered as one conditional xor, x ^ (x's top bit ? set : clear), which is
/// the form of both for every type and order: kernels apply it in passing as they read raw keys
/// or write them back, instead of a transform pass of their own.
template <typename Bits>
struct sign_xor {
  Bits set{};
  Bits clear{};

  GPUSORT_HD constexpr Bits operator()(Bits x) const noexcept
  {
    return x ^ ((x & sign_bit<Bits>) != 0 ? set : clear);
  }
};

/// to_ordered (forward) or from_ordered of `t` and `dir` as a sign_xor: the masks are what the
/// transform does to a key with only its top bit set and to zero.
template <typename Bits>
GPUSORT_HD constexpr sign_xor<Bits> ordered_xor(dtype t, order dir, bool forward) noexcept
{
  const auto map = [&](Bits x) {
    return forward ? to_ordered<Bits>(x, t, dir) : from_ordered<Bits>(x, t, dir);
  };
  return {static_cast<Bits>(map(sign_bit<Bits>) ^ sign_bit<Bits>), map(Bits{0})};
}

/// True when ordered bits equal raw bits, so a transform pass can be skipped.
constexpr bool ordered_is_identity(dtype t, order dir) noexcept
{
  return dir == order::ascending && (t == dtype::u32 || t == dtype::u64);
}

/// Everything that decides how raw keys map to ordered bits. `canonical` (float_order::numpy
/// only) maps every NaN to one code and -0.0 to +0.0's code, so that keys NumPy calls equal are
/// equal bits: what a stable sort and an argsort in NumPy's order need. It loses the NaNs'
/// payloads and the zeros' signs; the engine puts them back (pipeline/stable.cpp).
struct key_order {
  dtype type{dtype::u64};
  order dir{order::ascending};
  float_order floats{float_order::total};
  bool canonical{false};
  [[nodiscard]] constexpr bool numpy_floats() const noexcept
  {
    return floats == float_order::numpy && is_float(type);
  }
};

/// NaN bit patterns of one sign: every nonzero mantissa.
template <typename Bits>
inline constexpr Bits nans_per_sign = (Bits{1} << (sizeof(Bits) == 4 ? 23 : 52)) - 1;

/// The general map between raw bits and ordered bits as a few integer operations, so that
/// kernels apply it in passing: y = sign_xor(x + pre) + post, then (canonical maps) the code
/// `zero_from` becomes `zero_to` and codes above `nan_code` become `nan_code`.
/// NumPy's order is totalOrder's ordered bits rotated down by the NaNs of the sign that
/// totalOrder puts first (a bijection): the NaNs of both signs then take the top codes, in
/// either direction, and every number keeps its relative order.
template <typename Bits>
struct key_map {
  sign_xor<Bits> xor_{};
  Bits pre{};
  Bits post{};
  Bits zero_from{};
  Bits zero_to{};
  Bits nan_code{static_cast<Bits>(~Bits{0})};

  GPUSORT_HD constexpr Bits operator()(Bits x) const noexcept
  {
    Bits y = static_cast<Bits>(xor_(static_cast<Bits>(x + pre)) + post);
    if (y == zero_from) y = zero_to;
    return y < nan_code ? y : nan_code;
  }
  [[nodiscard]] GPUSORT_HD constexpr bool identity() const noexcept
  {
    return xor_.set == 0 && xor_.clear == 0 && pre == 0 && post == 0 && zero_from == zero_to &&
           nan_code == static_cast<Bits>(~Bits{0});
  }
};

/// The key_map of `k`, forward (raw -> ordered) or back (ordered -> raw; a canonical map's
/// codes come back as +0.0 and one NaN). Built on the host; kernels get the map.
template <typename Bits>
constexpr key_map<Bits> ordered_map(const key_order& k, bool forward) noexcept
{
  key_map<Bits> m;
  m.xor_ = ordered_xor<Bits>(k.type, k.dir, forward);
  if (!k.numpy_floats()) return m;
  constexpr Bits r = nans_per_sign<Bits>;
  if (!forward) {
    m.pre = r;
    return m;
  }
  m.post = static_cast<Bits>(Bits{0} - r);
  if (k.canonical) {
    const Bits neg_zero = sign_bit<Bits>;
    m.zero_from = static_cast<Bits>(m.xor_(neg_zero) + m.post);
    m.zero_to = static_cast<Bits>(m.xor_(Bits{0}) + m.post);
    m.nan_code = static_cast<Bits>(Bits{0} - 2 * r);
  }
  return m;
}

template <typename Bits>
constexpr Bits to_ordered(Bits raw, const key_order& k) noexcept
{
  return ordered_map<Bits>(k, true)(raw);
}

template <typename Bits>
constexpr Bits from_ordered(Bits o, const key_order& k) noexcept
{
  return ordered_map<Bits>(k, false)(o);
}

constexpr bool ordered_is_identity(const key_order& k) noexcept
{
  return ordered_is_identity(k.type, k.dir) && !k.numpy_floats();
}

template <typename Key>
GPUSORT_HD constexpr auto raw_bits(Key k) noexcept
{
  return std::bit_cast<bits_t<sizeof(Key)>>(k);
}

/// Calls f.template operator()<Key>() with the C++ type of `t`.
template <typename F>
decltype(auto) visit_dtype(dtype t, F&& f)
{
  switch (t) {
    case dtype::u32: return std::forward<F>(f).template operator()<std::uint32_t>();
    case dtype::i32: return std::forward<F>(f).template operator()<std::int32_t>();
    case dtype::u64: return std::forward<F>(f).template operator()<std::uint64_t>();
    case dtype::i64: return std::forward<F>(f).template operator()<std::int64_t>();
    case dtype::f32: return std::forward<F>(f).template operator()<float>();
    case dtype::f64: return std::forward<F>(f).template operator()<double>();
  }
  return std::forward<F>(f).template operator()<std::uint64_t>();
}

/// Stands for "no values" where a value type is a template parameter.
struct no_value {};

/// Applies M(KeyBits, Value) to every layout visit_layout dispatches to, for explicit
/// instantiations that must match it.
#define GPUSORT_FOR_EACH_LAYOUT(M)                                              \
  M(std::uint32_t, ::gpusort::detail::no_value)                                 \
  M(std::uint32_t, std::uint32_t)                                               \
  M(std::uint32_t, std::uint64_t)                                               \
  M(std::uint64_t, ::gpusort::detail::no_value)                                 \
  M(std::uint64_t, std::uint32_t)                                               \
  M(std::uint64_t, std::uint64_t)

/// Calls f.template operator()<KeyBits, Value>() for key width `key_bytes` and value width
/// `value_bytes` (0: no values).
template <typename F>
decltype(auto) visit_layout(std::size_t key_bytes, std::size_t value_bytes, F&& f)
{
  auto with_key = [&]<typename K>() -> decltype(auto) {
    if (value_bytes == 4) return std::forward<F>(f).template operator()<K, std::uint32_t>();
    if (value_bytes == 8) return std::forward<F>(f).template operator()<K, std::uint64_t>();
    return std::forward<F>(f).template operator()<K, no_value>();
  };
  if (key_bytes == 4) return with_key.template operator()<std::uint32_t>();
  return with_key.template operator()<std::uint64_t>();
}

}  // namespace gpusort::detail
