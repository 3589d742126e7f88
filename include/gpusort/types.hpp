// Key types, orders and the type-erased array views of the public API.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpusort {

/// The key types the product sorts. Floats sort by IEEE 754 totalOrder.
enum class dtype : std::uint8_t { u32, i32, u64, i64, f32, f64 };

enum class order : std::uint8_t { ascending, descending };

/// How float keys compare (integer keys ignore it).
///  - total: IEEE 754 totalOrder: -NaN before -inf, -0.0 before +0.0, NaNs by sign and payload.
///  - numpy: NumPy's order: every NaN after every number whatever its sign and payload (NaNs
///    last in both orders), NaNs equal among themselves, -0.0 equal to +0.0. A stable sort in
///    this order equals np.sort(a, kind="stable") byte for byte.
enum class float_order : std::uint8_t { total, numpy };

inline constexpr dtype all_dtypes[] = {dtype::u32, dtype::i32, dtype::u64,
                                       dtype::i64, dtype::f32, dtype::f64};

constexpr std::size_t size_of(dtype t) noexcept
{
  return (t == dtype::u32 || t == dtype::i32 || t == dtype::f32) ? 4 : 8;
}

constexpr bool is_float(dtype t) noexcept { return t == dtype::f32 || t == dtype::f64; }

constexpr std::string_view name_of(dtype t) noexcept
{
  switch (t) {
    case dtype::u32: return "u32";
    case dtype::i32: return "i32";
    case dtype::u64: return "u64";
    case dtype::i64: return "i64";
    case dtype::f32: return "f32";
    case dtype::f64: return "f64";
  }
  return "?";
}

/// Parses "u32", "i64", "f32", ...; nullopt for anything else.
std::optional<dtype> parse_dtype(std::string_view text) noexcept;

template <typename T>
struct dtype_of;
template <> struct dtype_of<std::uint32_t> { static constexpr dtype value = dtype::u32; };
template <> struct dtype_of<std::int32_t>  { static constexpr dtype value = dtype::i32; };
template <> struct dtype_of<std::uint64_t> { static constexpr dtype value = dtype::u64; };
template <> struct dtype_of<std::int64_t>  { static constexpr dtype value = dtype::i64; };
template <> struct dtype_of<float>         { static constexpr dtype value = dtype::f32; };
template <> struct dtype_of<double>        { static constexpr dtype value = dtype::f64; };
template <typename T>
inline constexpr dtype dtype_of_v = dtype_of<T>::value;

/// Keys of a type-erased sort: `count` elements of `type` at `data`.
struct key_array {
  void* data{};
  std::uint64_t count{};
  dtype type{dtype::u64};
};

/// Values travelling with the keys: `count` elements of `value_bytes` (4 or 8) each.
struct value_array {
  void* data{};
  std::uint64_t count{};
  std::uint32_t value_bytes{8};
};

}  // namespace gpusort
