#include <gpusort/types.hpp>

namespace gpusort {

std::optional<dtype> parse_dtype(std::string_view text) noexcept
{
  for (dtype t : all_dtypes)
    if (name_of(t) == text) return t;
  return std::nullopt;
}

}  // namespace gpusort
