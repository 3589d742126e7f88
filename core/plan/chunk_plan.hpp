// The chunk plan of the two-round DSPS sort (design.md section 2): how many chunks d, how many
// sample candidates s per run, and the bound every final chunk keeps.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>

namespace gpusort::detail {

/// 128-bit products of 64-bit sizes, free of overflow.
__extension__ typedef unsigned __int128 uint128;

/// What a device can hold for one chunk, in elements, and how budget bytes map to that.
struct device_capacity {
  std::uint64_t elements{std::numeric_limits<std::uint64_t>::max()};  ///< Theta
  std::uint64_t bytes_per_element{};  ///< budget bytes per element of capacity
  std::uint64_t fixed_bytes{};        ///< budget bytes the device needs besides its chunks
  /// The device's own answer where what it needs besides its chunks grows with them (a GPU's
  /// sort scratch): the smallest budget whose capacity is at least the argument. Without it,
  /// fixed_bytes + capacity * bytes_per_element.
  std::function<std::uint64_t(std::uint64_t)> exact_budget{};
  /// `elements` is a floor the device grants small jobs whatever the budget (a GPU's budget
  /// below its margin), not what the budget affords: a job of more elements is refused rather
  /// than cut into thousands of chunks beyond the budget.
  bool whole_jobs_only{false};
  [[nodiscard]] std::uint64_t budget_for(std::uint64_t capacity) const
  {
    if (exact_budget) return exact_budget(capacity);
    return fixed_bytes + capacity * bytes_per_element;
  }
};

struct chunk_plan {
  std::uint64_t n{};         ///< elements to sort
  std::uint64_t capacity{};  ///< Theta: elements one device sorts at once
  std::uint64_t d{1};        ///< chunks; 1 means one in-core sort
  /// g: runs round 1 deals each chunk into; 0 means d. Round 2 gathers d * g slices per final
  /// chunk, n / (d^2 g) elements each on average: fewer bins keep them long where d is large.
  std::uint64_t bins{};
  std::uint64_t s{};         ///< sample candidates per run of the sampled chunk
  /// Candidates per run of the usual sample (plan_tuning::max_total_candidates in all), which
  /// round 2 tries before s where the bound needs more (cut_runs, slicing.hpp); 0: s alone.
  std::uint64_t quick_s{};
  std::uint64_t bound{};     ///< elements strictly between two splitters, at most
  std::uint64_t sampled_chunk{};  ///< the new chunk j < g whose runs give the candidates
  /// > 0: the job takes the scattered rounds (core/plan/scatter_buckets.hpp; issue 44), its
  /// round-1 buffer this many elements of bucket regions; 0: DSPS's rounds. A job whose input
  /// is a file, whose runs are compressed or whose sample needs larger regions runs as DSPS.
  std::uint64_t scatter_elements{};

  [[nodiscard]] bool in_core() const noexcept { return d == 1; }
  /// g: the runs of each chunk (bins, or d where bins is 0).
  [[nodiscard]] std::uint64_t runs_per_chunk() const noexcept { return bins == 0 ? d : bins; }
  [[nodiscard]] std::uint64_t chunk_begin(std::uint64_t i) const noexcept
  {
    return i * (n / d) + (i < n % d ? i : n % d);
  }
  [[nodiscard]] std::uint64_t chunk_size(std::uint64_t i) const noexcept
  {
    return n / d + (i < n % d ? 1 : 0);
  }
  /// Candidates per run round 2 cuts with first: the usual sample where the bound needs more
  /// (cut_runs then keeps it or cuts again with s), else s.
  [[nodiscard]] std::uint64_t first_s() const noexcept
  {
    return quick_s > 0 && quick_s < s ? quick_s : s;
  }
  /// Largest final chunk on input without duplicate keys: the bound plus the one element
  /// equal to the upper splitter.
  [[nodiscard]] std::uint64_t final_bound() const noexcept { return bound + 1; }
};

/// Upper bound on the elements of the whole input strictly between two consecutive splitters
/// (or below the first, above the last), for n elements in d chunks dealt into g runs each
/// (g = d: DSPS's dealing) with s candidates per run of one new chunk.
/// Derivation: in the sampled new chunk (d runs, one per chunk), a run of length L with
/// candidates every ceil(L/s) positions holds at most (c+1)*ceil(L/s) - 1 elements of an open
/// splitter interval that contains c of its candidates; the d runs hold at most s such
/// candidates together. Dealing makes every other new chunk hold at most one element more per
/// sorted chunk, whatever g is (the bins of one chunk take its elements in turn).
std::uint64_t strict_interval_bound(std::uint64_t n, std::uint64_t d, std::uint64_t s,
                                    std::uint64_t g) noexcept;
inline std::uint64_t strict_interval_bound(std::uint64_t n, std::uint64_t d,
                                           std::uint64_t s) noexcept
{
  return strict_interval_bound(n, d, s, d);
}

/// Shortest run of the sampled new chunk (j = g - 1): every run must give s candidates.
std::uint64_t shortest_sampled_run(std::uint64_t n, std::uint64_t d, std::uint64_t g) noexcept;
inline std::uint64_t shortest_sampled_run(std::uint64_t n, std::uint64_t d) noexcept
{
  return shortest_sampled_run(n, d, d);
}

/// g for n elements in d chunks: d (every new chunk a regular sample, the fewest candidate
/// reads), or fewer where round 2's slices would average below plan_tuning::min_slice_bytes of
/// `element_bytes` elements (0: always d). A slice crosses PCIe in one copy or one gather
/// block; below a few hundred KiB each one's cost outgrows its bytes (issue 44: d = 377 with
/// g = d gathered 40-byte slices at 0.3 GB/s).
std::uint64_t bins_for(std::uint64_t n, std::uint64_t d, std::uint64_t element_bytes) noexcept;

/// Chooses d, g and s for n elements on devices of capacity `cap`: the fewest chunks such that
/// a chunk fits, the sample fits every run and the final-chunk bound fits the capacity; g by
/// bins_for(n, d, element_bytes).
/// `max_chunk_elements` (from chunk_bytes) caps the chunk size where two rounds allow it; where
/// it asks for chunks too small to sample, the smallest chunks that work are used instead.
/// Throws gpusort::config_error naming the smallest budget that works when no plan exists.
chunk_plan make_plan(std::uint64_t n, const device_capacity& cap,
                     std::optional<std::uint64_t> max_chunk_elements = std::nullopt,
                     std::uint64_t element_bytes = 0);

/// The smallest device budget (bytes) with which make_plan plans n elements on devices like
/// `cap`: the figure make_plan's refusal names.
std::uint64_t smallest_budget(std::uint64_t n, const device_capacity& cap,
                              std::uint64_t element_bytes = 0);

/// The smallest capacity (elements) for which make_plan succeeds on n elements.
std::uint64_t min_feasible_capacity(std::uint64_t n, std::uint64_t element_bytes = 0);

}  // namespace gpusort::detail
