// Seeded, parallel, deterministic input generators (sample sort paper, section 6).
#pragma once

#include <gpusort/types.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

namespace gpusort {

enum class distribution : std::uint8_t {
  uniform,     ///< uniform over the key type's range (floats: [-1, 1))
  gaussian,    ///< mean of 4 uniform values
  bucket,      ///< p blocks, each with n/p^2 elements from each of p consecutive sub-ranges
  staggered,   ///< p blocks, block i holds values from one sub-range, interleaved order
  sorted,      ///< ascending, spread over the range
  reverse,     ///< descending, spread over the range
  zero,        ///< all keys equal
  detdupes,    ///< deterministic duplicates: p/2 blocks of log n, p/4 of log(n/2), ...
  fewunique,   ///< 16 distinct values
  nanmix,      ///< floats only: uniform with 1% NaN (both signs), infinities and both zeros
};

inline constexpr distribution all_distributions[] = {
    distribution::uniform, distribution::gaussian, distribution::bucket,
    distribution::staggered, distribution::sorted, distribution::reverse,
    distribution::zero, distribution::detdupes, distribution::fewunique,
    distribution::nanmix};

std::string_view name_of(distribution d) noexcept;
std::optional<distribution> parse_distribution(std::string_view text) noexcept;

/// Whether `d` is defined for keys of type `t` (nanmix only for floats).
constexpr bool applies_to(distribution d, dtype t) noexcept
{
  return d != distribution::nanmix || is_float(t);
}

/// Fills `keys` (count elements of type `t`) with distribution `d` from `seed`. The result
/// depends only on (t, d, count, seed), never on the number of threads.
/// Throws gpusort::invalid_argument when `d` does not apply to `t`.
void generate(key_array keys, distribution d, std::uint64_t seed);

/// Values for key-value tests: value i is a hash of (seed, i), so that a misplaced value is
/// visible, written with `values.value_bytes` bytes each.
void generate_values(value_array values, std::uint64_t seed);

template <typename K>
void generate(std::span<K> keys, distribution d, std::uint64_t seed)
{
  generate(key_array{keys.data(), keys.size(), dtype_of_v<K>}, d, seed);
}

}  // namespace gpusort
