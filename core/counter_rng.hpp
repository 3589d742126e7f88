// The generators' random numbers (core/generate.cpp, core/records.cpp): counter-based, so that
// element i's value depends on (seed, stream, i) alone, never on which thread makes it.
#pragma once

#include <cstdint>

namespace gpusort::detail {

inline constexpr std::uint64_t golden = 0x9E3779B97F4A7C15ULL;

/// The splitmix64 finalizer (a bijection with full avalanche).
constexpr std::uint64_t mix64(std::uint64_t z) noexcept
{
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/// The index-th output of splitmix64 seeded from (seed, stream). Stream: any enum of the
/// caller's independent streams (a generator numbers its own apart from the others').
class counter_rng {
 public:
  template <typename Stream>
  counter_rng(std::uint64_t seed, Stream s) noexcept
      : base_{mix64(seed ^ mix64(static_cast<std::uint64_t>(s) * golden))}
  {
  }
  std::uint64_t operator()(std::uint64_t index) const noexcept
  {
    return mix64(base_ + (index + 1) * golden);
  }

 private:
  std::uint64_t base_;
};

}  // namespace gpusort::detail
