// Tunables of the DSPS planner, in one place.
#pragma once

#include <algorithm>
#include <cstdint>

namespace gpusort::detail {

struct plan_tuning {
  /// Sample candidates over all runs of the sampled chunk. More candidates tighten the
  /// final-chunk bound (about N/s above N/d) but cost a host sort of d*s keys; 2^20 keeps
  /// that sort in the low milliseconds while N/s stays below 0.1% of N for N up to 2^30 * d.
  static constexpr std::uint64_t max_total_candidates = std::uint64_t{1} << 20;
  /// Where a small device budget needs them for its bound, up to this many candidates: the
  /// bound is about N/d + N/s, so a capacity c needs d * s near (2N/c)^2 (issue 44: 8 GiB of
  /// u64 at a 142 MiB budget needs 2^20; 32 GiB at 128 MiB needs about 2^23.4). Reading and
  /// merging them costs about 10 ns each on 16 cores; a plan takes only as many as it needs.
  static constexpr std::uint64_t max_total_candidates_small_budget = std::uint64_t{1} << 24;
  /// Upper limit on d: the slice table holds d^2 g entries.
  static constexpr std::uint64_t max_chunks = 4096;
  /// Round 2's slices average at least this many bytes where d allows: below it round 1 deals
  /// each chunk into fewer than d runs (bins_for). 256 KiB: what a copy engine moves in about
  /// the few microseconds one copy call costs, the gather's own threshold (cuda_device_options::
  /// gather_copy_min_bytes).
  static constexpr std::uint64_t min_slice_bytes = std::uint64_t{256} << 10;
  /// Fewest chunks of an out-of-core plan: with d == 1 everything is one in-core sort.
  static constexpr std::uint64_t min_out_of_core_chunks = 2;
};

/// How the resident sort (pipeline/cuda/resident.hpp) cuts a GPU's share of a job that fits:
/// into up to max_pieces pieces of at least min_piece_elements, each sorted as it arrives
/// (enough pieces that the last one sorts quickly after it arrived; the piece sort's alternate
/// buffer is one piece), and an output in ranges of at least min_range_elements, up to
/// max_ranges of them, each merged from every run's part of it into one of a ring of range
/// buffers and copied out as the next one merges. The ring lives in the piece sort's alternate
/// once the pieces are sorted, so a GPU holds the share and the larger of a piece and three
/// ranges: 1.0625 times the share at 16 pieces and 48 ranges (issue 40: it held the share
/// twice, sorted runs and merge targets, so the largest job kept 47% of an H200's memory in
/// keys). Sixteen pieces rather than eight halve the last piece's sort, which follows the last
/// copy-in (14 ms for a 2 GiB piece); their merges, a level more, run beside the copy-out.
struct resident_tuning {
  std::uint64_t min_piece_elements{std::uint64_t{1} << 24};
  std::uint64_t max_pieces{16};
  std::uint64_t min_range_elements{std::uint64_t{1} << 22};
  std::uint64_t max_ranges{48};

  /// Elements of the largest piece of a share of `share` elements.
  [[nodiscard]] constexpr std::uint64_t piece_elements(std::uint64_t share) const noexcept
  {
    return share_cut(share, min_piece_elements, max_pieces);
  }
  /// Elements of the largest output range of a share of `share` elements.
  [[nodiscard]] constexpr std::uint64_t range_elements(std::uint64_t share) const noexcept
  {
    return share_cut(share, min_range_elements, max_ranges);
  }

 private:
  /// The size of the largest of up to `most` equal parts of at least `least` elements (one
  /// part where the share is smaller).
  static constexpr std::uint64_t share_cut(std::uint64_t share, std::uint64_t least,
                                           std::uint64_t most) noexcept
  {
    const std::uint64_t parts = std::clamp<std::uint64_t>(
        share / std::max<std::uint64_t>(least, 1), 1, std::max<std::uint64_t>(most, 1));
    return (share + parts - 1) / parts;
  }
};

static_assert(plan_tuning::max_total_candidates_small_budget >=
                  plan_tuning::max_total_candidates,
              "a small budget may take more candidates, never fewer");
static_assert(plan_tuning::max_total_candidates >= plan_tuning::max_chunks,
              "every chunk needs at least one candidate per run");
static_assert(plan_tuning::max_chunks * plan_tuning::max_chunks * plan_tuning::max_chunks <
                  (std::uint64_t{1} << 40),
              "the slice table must stay addressable");
static_assert(plan_tuning::min_out_of_core_chunks >= 2);

}  // namespace gpusort::detail
