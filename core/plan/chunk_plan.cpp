#include "core/plan/chunk_plan.hpp"

#include "core/checks.hpp"
#include "core/plan/tuning.hpp"

#include <gpusort/error.hpp>
#include <gpusort/units.hpp>

#include <algorithm>
#include <string>

namespace gpusort::detail {

namespace {

constexpr std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) noexcept
{
  return a / b + (a % b != 0 ? 1 : 0);
}

constexpr std::uint64_t saturate(uint128 v) noexcept
{
  constexpr auto max = std::numeric_limits<std::uint64_t>::max();
  return v > max ? max : static_cast<std::uint64_t>(v);
}

/// Candidates per run for d chunks of g runs: as many as the shortest run and the sample cap
/// allow (`total`: the cap on all runs together).
std::uint64_t candidates_per_run(
    std::uint64_t n, std::uint64_t d, std::uint64_t g,
    std::uint64_t total = plan_tuning::max_total_candidates) noexcept
{
  return std::min(shortest_sampled_run(n, d, g), total / d);
}

/// The plan for exactly d chunks, or nullopt where its sample or its bound does not fit: the
/// usual candidates where their bound fits the capacity, else the fewest more (up to
/// max_total_candidates_small_budget) whose bound does.
std::optional<chunk_plan> plan_for(std::uint64_t n, std::uint64_t d, std::uint64_t capacity,
                                   std::uint64_t element_bytes) noexcept
{
  if (ceil_div(n, d) > capacity) return std::nullopt;
  const std::uint64_t g = bins_for(n, d, element_bytes);
  const std::uint64_t usual = candidates_per_run(n, d, g);
  std::uint64_t s = usual;
  if (s == 0) return std::nullopt;
  if (strict_interval_bound(n, d, s, g) >= capacity) {
    // The bound only falls as s grows: the least s in (s, most] that fits.
    std::uint64_t lo = s;
    std::uint64_t hi =
        candidates_per_run(n, d, g, plan_tuning::max_total_candidates_small_budget);
    if (strict_interval_bound(n, d, hi, g) >= capacity) return std::nullopt;
    while (lo + 1 < hi) {
      const std::uint64_t mid = lo + (hi - lo) / 2;
      (strict_interval_bound(n, d, mid, g) < capacity ? hi : lo) = mid;
    }
    s = hi;
  }
  return chunk_plan{.n = n, .capacity = capacity, .d = d, .bins = g, .s = s, .quick_s = usual,
                    .bound = strict_interval_bound(n, d, s, g), .sampled_chunk = g - 1};
}

}  // namespace

std::uint64_t shortest_sampled_run(std::uint64_t n, std::uint64_t d, std::uint64_t g) noexcept
{
  return d == 0 || g == 0 ? 0 : (n / d) / g;
}

std::uint64_t strict_interval_bound(std::uint64_t n, std::uint64_t d, std::uint64_t s,
                                    std::uint64_t g) noexcept
{
  if (d <= 1) return n;
  if (s == 0 || g == 0) return n;
  const std::uint64_t longest_run = ceil_div(ceil_div(n, d), g);
  const std::uint64_t gap = ceil_div(longest_run, s);
  // Elements of the sampled new chunk strictly inside one splitter interval.
  const uint128 in_sampled =
      static_cast<uint128>(s + d) * gap - std::min<uint128>(d, (s + d) * gap);
  return std::min(n, saturate(in_sampled * g + static_cast<uint128>(d) * (g - 1)));
}

std::uint64_t bins_for(std::uint64_t n, std::uint64_t d, std::uint64_t element_bytes) noexcept
{
  if (element_bytes == 0 || d == 0) return d;
  // Elements of one (chunk, final chunk) pair, which g runs share.
  const std::uint64_t pair = n / d / d;
  const std::uint64_t slice =
      std::max<std::uint64_t>(plan_tuning::min_slice_bytes / element_bytes, 1);
  return std::clamp<std::uint64_t>(pair / slice, 1, d);
}

chunk_plan make_plan(std::uint64_t n, const device_capacity& cap,
                     std::optional<std::uint64_t> max_chunk_elements, std::uint64_t element_bytes)
{
  GPUSORT_EXPECTS(cap.elements > 0, "a device must hold at least one element");
  const std::uint64_t chunk_limit =
      std::min(cap.elements, max_chunk_elements.value_or(cap.elements));
  GPUSORT_EXPECTS(chunk_limit > 0, "chunks must hold at least one element");
  if (n <= chunk_limit) return chunk_plan{.n = n, .capacity = cap.elements, .d = 1};

  // The fewest chunks that respect the chunk limit; where the limit asks for more chunks than
  // two rounds can sample (runs too short), the most chunks that still work.
  const std::uint64_t wanted_d =
      std::max(plan_tuning::min_out_of_core_chunks, ceil_div(n, chunk_limit));
  std::optional<chunk_plan> fallback;
  // A floor the budget does not afford takes no chunks: such a job sorts in core or not at all.
  for (std::uint64_t d = plan_tuning::min_out_of_core_chunks;
       d <= plan_tuning::max_chunks && !cap.whole_jobs_only; ++d) {
    // Runs only get shorter with more chunks.
    if (candidates_per_run(n, d, bins_for(n, d, element_bytes)) == 0) break;
    const std::optional<chunk_plan> plan = plan_for(n, d, cap.elements, element_bytes);
    if (!plan) continue;
    if (d >= wanted_d) return *plan;
    fallback = plan;
  }
  if (fallback) return *fallback;
  if (n <= cap.elements) return chunk_plan{.n = n, .capacity = cap.elements, .d = 1};
  const std::uint64_t least = smallest_budget(n, cap, element_bytes);
  throw config_error{"device_memory_budget: " + format_bytes(cap.budget_for(cap.elements)) +
                     " per device cannot sort " + std::to_string(n) +
                     " elements in two rounds; the smallest budget that works is " +
                     format_bytes(least) + " (" + std::to_string(least) + " bytes)"};
}

std::uint64_t smallest_budget(std::uint64_t n, const device_capacity& cap,
                              std::uint64_t element_bytes)
{
  // Below a floor the budget does not afford, the smallest budget must afford the floor too.
  const std::uint64_t least = min_feasible_capacity(n, element_bytes);
  return cap.budget_for(cap.whole_jobs_only ? std::max(least, cap.elements) : least);
}

std::uint64_t min_feasible_capacity(std::uint64_t n, std::uint64_t element_bytes)
{
  std::uint64_t best = std::max<std::uint64_t>(n, 1);
  for (std::uint64_t d = plan_tuning::min_out_of_core_chunks; d <= plan_tuning::max_chunks; ++d) {
    const std::uint64_t g = bins_for(n, d, element_bytes);
    const std::uint64_t s =
        candidates_per_run(n, d, g, plan_tuning::max_total_candidates_small_budget);
    if (s == 0) break;
    // Capacity c works for this d when the chunks fit and the bound (with the most candidates
    // plan_for may take) stays below c.
    const std::uint64_t need =
        std::max(ceil_div(n, d), strict_interval_bound(n, d, s, g) + 1);
    best = std::min(best, need);
  }
  return best;
}

}  // namespace gpusort::detail
