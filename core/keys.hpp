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
