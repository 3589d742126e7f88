// Round-2 slicing (design.md section 2): every run is sorted, so cutting it by the splitters is
// a binary search per run and splitter on the host; no data moves. Final chunk k gathers, from
// every run, the slice of keys in (splitter[k-1], splitter[k]].
#pragma once

#include "core/plan/dealing.hpp"
#include "core/plan/splitters.hpp"

#include <cstdint>
#include <span>
#include <vector>

namespace gpusort::detail {

/// A piece of a run: `length` elements from `offset` of the round-1 output.
using slice = run;

struct final_chunk {
  std::uint64_t index{};       ///< k: position in key order
  std::uint64_t size{};        ///< elements
  std::uint64_t out_offset{};  ///< where its sorted elements start in the output
  std::vector<slice> slices;   ///< non-empty slices, at most one per run
};

/// Final chunks 0..d-1 of the runs of `source` (run_source.hpp) cut by `splitters` (d - 1).
template <typename Source>
std::vector<final_chunk> slice_runs(const Source& source, std::span<const run> runs,
                                    const splitter_set<typename Source::key_type>& splitters);

/// slice_runs on round 1's dealt output, `runs` = make_run_table(plan) (checked): bin j of a
/// chunk holds its sorted positions j, j + g, ..., so one search in bin 0 and log2 g keys of
/// the other bins cut the whole chunk (d (d - 1) searches in all instead of d^2 g). The same
/// final chunks.
template <typename Source>
std::vector<final_chunk> slice_dealt_runs(const Source& source, const chunk_plan& plan,
                                          std::span<const run> runs,
                                          const splitter_set<typename Source::key_type>& splitters);

/// Round 2's splitters and final chunks, and what choosing them took.
template <typename K>
struct round2_cuts {
  splitter_set<K> splitters;
  std::vector<final_chunk> finals;
  std::uint64_t s{};  ///< candidates per run the splitters came from
  /// Seconds spent on the usual sample where its final chunks broke the bound (0: kept, or
  /// not tried), then on the splitters and the cuts that stand.
  double dropped_seconds{};
  double splitters_seconds{};
  double cuts_seconds{};
};

/// The splitters of `plan` from the runs `sampled` (one new chunk's), and `runs`
/// (make_run_table(plan)) cut by them (slice_dealt_runs; GPUSORT_DEALT_CUTS=0: slice_runs).
/// The bound holds with plan.s candidates a run, which a small budget raises to about (2N/c)^2
/// in all (7.45M for 8 GiB of u64 at 32 MiB, d = 1594): reading and sorting them was most of
/// the host's plan between the rounds (0.098 of 0.133 s on an H200 host, issue 44). Splitters
/// from the usual sample (plan.quick_s a run, 2^20 in all at most, each candidate at a random
/// place of its piece of the run: random_candidate_position) cut keys that are not
/// adversarial as evenly, so they are tried first and kept where every final chunk they give
/// keeps what the bound promises (at most final_bound() elements, or at most `bound` below its
/// upper splitter, the rest equal to it for compensation); else the splitters are chosen again
/// from plan.s candidates a run, whose bound holds whatever the keys.
/// `first_candidates`, where not empty: the first sample's candidates already read (d times
/// plan.first_s(), placed as first_places(plan) says; pipeline/sample_behind.hpp reads them
/// while round 1 runs), which this call takes its splitters from rather than reads.
template <typename Source>
round2_cuts<typename Source::key_type> cut_runs(
    const Source& source, const chunk_plan& plan, std::span<const run> runs,
    std::span<const run> sampled, std::vector<typename Source::key_type> first_candidates = {});

/// Where round 2's first sample takes its candidates (cut_runs): at random places where it is
/// the usual sample tried before the bound's, at the pieces' ends where it is the bound's.
inline candidate_places first_places(const chunk_plan& plan) noexcept
{
  return plan.first_s() < plan.s ? candidate_places::random : candidate_places::piece_ends;
}

/// Run i of round 2's sampled new chunk (plan.sampled_chunk): bin sampled_chunk of chunk i's
/// dealt output, the same run as transpose(make_run_table(plan), ...)[sampled_chunk * d + i].
run sampled_run(const chunk_plan& plan, std::uint64_t i) noexcept;

/// The sampled new chunk's d runs (sampled_run), without transposing the whole run table.
std::vector<run> sampled_chunk_runs(const chunk_plan& plan);

/// Indices of `chunks` largest first, the order in which devices should take them.
std::vector<std::uint64_t> largest_first(const std::vector<final_chunk>& chunks);

}  // namespace gpusort::detail
