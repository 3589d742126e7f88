#include <gpusort/types.hpp>

namespace gpusort {

std::optional<dtype> parse_dtype(std::string_view text) noexcept
{
  for (dtype t : all_dtypes)
    if (name_of(t) == text) return t;
  return std::nullopt;
}

std::string_view name_of(column_type t) noexcept
{
  switch (t) {
    case column_type::u32: return "u32";
    case column_type::i32: return "i32";
    case column_type::u64: return "u64";
    case column_type::i64: return "i64";
    case column_type::f32: return "f32";
    case column_type::f64: return "f64";
    case column_type::u128: return "u128";
    case column_type::i128: return "i128";
    case column_type::bytes: return "bytes";
  }
  return "?";
}

std::optional<column_type> parse_column_type(std::string_view text) noexcept
{
  for (column_type t : all_column_types)
    if (name_of(t) == text) return t;
  return std::nullopt;
}

}  // namespace gpusort
