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

/// Indices of `chunks` largest first, the order in which devices should take them.
std::vector<std::uint64_t> largest_first(const std::vector<final_chunk>& chunks);

}  // namespace gpusort::detail
