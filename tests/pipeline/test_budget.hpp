// How the engine tests pick their configuration: GPUSORT_TEST_BUDGET=default sorts with the
// configuration a user gets (the direct CPU path), =tiny with a device budget so small that the
// sort runs out of core with many chunks (d >= 16 where the size allows).
#pragma once

#include "core/plan/chunk_plan.hpp"

#include <gpusort/error.hpp>
#include <gpusort/gpusort.hpp>

#include <algorithm>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

namespace gpusort::test {

inline bool tiny_budget()
{
  const char* v = std::getenv("GPUSORT_TEST_BUDGET");
  return v != nullptr && std::string_view{v} == "tiny";
}

/// GPUSORT_TEST_COMPRESS=on or auto: the tiny budget's jobs compress their round-1 runs
/// (compress_runs, issue 21), for the engine suites ctest runs a third time so.
inline run_compression compression()
{
  const char* v = std::getenv("GPUSORT_TEST_COMPRESS");
  if (v == nullptr) return run_compression::off;
  if (std::string_view{v} == "on") return run_compression::on;
  if (std::string_view{v} == "auto") return run_compression::automatic;
  return run_compression::off;
}

/// Whether two arrays hold the same bytes (bytes, not ==: NaN keys never compare equal to
/// themselves); empty arrays, whose data() may be null, are equal.
template <typename T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b)
{
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

/// Capacity (elements) of the fixed tiny budget: sizes around it cross the in-core limit.
inline constexpr std::uint64_t tiny_capacity = 4096;

/// Budget bytes that give the host device `capacity` elements of `element_bytes`.
inline std::uint64_t host_budget_for(std::uint64_t capacity, std::uint64_t element_bytes)
{
  return capacity * 2 * element_bytes;  // host_device keeps two buffers per chunk
}

/// Elements of a chunk of n elements in tiny mode: n/16.
inline std::uint64_t tiny_chunk(std::uint64_t n)
{
  return std::max<std::uint64_t>(1, (n + 15) / 16);
}

/// The device capacity (elements) of tiny mode for n elements: the smallest that takes chunks of
/// tiny_chunk(n) in two rounds. The planner only sizes the configuration here, the verifier
/// judges the result.
inline std::uint64_t tiny_capacity_for(std::uint64_t n)
{
  std::uint64_t cap = 16;
  for (;;) {
    try {
      const detail::chunk_plan plan =
          detail::make_plan(n, detail::device_capacity{.elements = cap}, tiny_chunk(n));
      if (plan.d >= 16 || plan.in_core() || cap >= n) break;
    } catch (const config_error&) {
    }
    cap += cap / 8 + 1;
  }
  return cap;
}

/// A configuration for sorting n elements of `element_bytes` on the CPU: the default one, or in
/// tiny mode a budget so small that the planner needs at least 16 chunks (where n allows it);
/// `at_tiny_capacity`: the fixed budget of tiny_capacity elements, for sizes around it.
inline config config_for(std::uint64_t n, std::uint64_t element_bytes,
                         bool at_tiny_capacity = false)
{
  config cfg;
  cfg.devices = device_selection::cpu;
  if (!test::tiny_budget()) return cfg;
  cfg.compress_runs = compression();
  if (at_tiny_capacity) {
    cfg.device_memory_budget = test::host_budget_for(test::tiny_capacity, element_bytes);
    return cfg;
  }
  cfg.chunk_bytes = tiny_chunk(n) * element_bytes;
  cfg.device_memory_budget = test::host_budget_for(tiny_capacity_for(n), element_bytes);
  return cfg;
}

}  // namespace gpusort::test
