// Tunables of the DSPS planner, in one place.
#pragma once

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
