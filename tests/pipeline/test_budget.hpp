// How the engine tests pick their configuration: GPUSORT_TEST_BUDGET=default sorts with the
// configuration a user gets (the direct CPU path), =tiny with a device budget so small that the
// sort runs out of core with many chunks (d >= 16 where the size allows).
#pragma once

#include <gpusort/gpusort.hpp>

#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace gpusort::test {

inline bool tiny_budget()
{
  const char* v = std::getenv("GPUSORT_TEST_BUDGET");
  return v != nullptr && std::string_view{v} == "tiny";
}

/// Capacity (elements) of the fixed tiny budget: sizes around it cross the in-core limit.
inline constexpr std::uint64_t tiny_capacity = 4096;

/// Budget bytes that give the host device `capacity` elements of `element_bytes`.
inline std::uint64_t host_budget_for(std::uint64_t capacity, std::uint64_t element_bytes)
{
  return capacity * 2 * element_bytes;  // host_device keeps two buffers per chunk
}

}  // namespace gpusort::test
