// Round 1 dealing (design.md section 3): element x of sorted chunk i goes to Bin[i][x mod g],
// the g bins laid out one after another, so every bin is a sorted run and every new chunk
// {Bin[0][j], ..., Bin[d-1][j]} is a regular sample of the whole input. The swap of the paper
// is a transpose of the run table: no data moves. DSPS deals into g = d bins; a plan with many
// chunks deals into fewer (chunk_plan::bins) so that round 2's d*g slices per final chunk stay
// long, down to g = 1 (no dealing: the candidates then come from every chunk).
#pragma once

#include "core/plan/chunk_plan.hpp"

#include <cstdint>
#include <vector>

namespace gpusort::detail {

/// A sorted run in the round-1 output, in elements from its start.
struct run {
  std::uint64_t offset{};
  std::uint64_t length{};
  friend bool operator==(const run&, const run&) = default;
};

/// Elements of bin j when m elements are dealt into d bins.
constexpr std::uint64_t bin_size(std::uint64_t m, std::uint64_t d, std::uint64_t j) noexcept
{
  return m / d + (j < m % d ? 1 : 0);
}

/// Where bin j starts when m elements are dealt into d bins.
constexpr std::uint64_t bin_offset(std::uint64_t m, std::uint64_t d, std::uint64_t j) noexcept
{
  return j * (m / d) + (j < m % d ? j : m % d);
}

/// Bin[i][j] of every chunk (j < g = plan.runs_per_chunk()), row-major: runs[i * g + j].
std::vector<run> make_run_table(const chunk_plan& plan);

/// The pointer-table transpose of d rows of g runs: result[j * d + i] = table[i * g + j], new
/// chunk j's runs one after another.
std::vector<run> transpose(const std::vector<run>& table, std::uint64_t d, std::uint64_t g);

/// Deals the m sorted elements of `in` into d bins at `out` (host reference implementation;
/// devices deal with their own kernels). Value arrays may be null.
template <typename K, typename V>
void deal(const K* in_keys, const V* in_values, std::uint64_t m, std::uint64_t d, K* out_keys,
          V* out_values);

}  // namespace gpusort::detail
