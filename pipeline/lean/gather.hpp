// The lean job's gathering round 2 (issue 39; docs/design.md, "The lean path"): no permutation
// between the rounds. Round 2 reads every bucket where round 1 left it, pieces of every chunk
// wherever round 1's blocks lie, and before it writes a bucket's sorted elements to their place
// only the blocks that lie there and still hold elements of unwritten buckets move out, into
// blocks whose elements are all written (the free end of the space at first). So:
//  - fewer elements move (a block in the place of bucket k holds elements of a lower bucket
//    about half the time: the others are read already), where the permutation moved every
//    one; a block goes to the lowest free block, below the places still to come as far as
//    there are such, but some move twice (measured: 0.66 N at 32 GiB, 0.86 N at 100 GiB);
//  - the moves run on the host beside the devices' round: an evictor clears the places of the
//    next buckets while the devices sort the current ones (as far ahead as the room allows:
//    bucket_limit is a quarter of it).
// Every move copies a whole block of round 1 and then records its new place in the journal
// (journal::set_where), so a kill at any moment loses nothing; a bucket is written only once its
// place holds nothing live, and after every earlier bucket whose reads lie there.
#pragma once

#include "pipeline/device.hpp"
#include "pipeline/lean/buckets.hpp"
#include "pipeline/lean/journal.hpp"
#include "pipeline/lean/plan.hpp"
#include "pipeline/lean/space.hpp"

#include <cstdint>
#include <vector>

namespace gpusort::detail::lean {

struct gather_stats {
  std::uint64_t moved_blocks{};  ///< blocks of round 1 moved out of a place
  std::uint64_t moved_elements{};
  double move_seconds{};  ///< the evictor's copies
  double wait_seconds{};  ///< the evictor waiting for free blocks
};

/// Round 2 of a gathering plan (plan::gather): sorts every bucket from where round 1 left its
/// pieces into the array at its `out`, the last bucket first, clearing each place ahead of the
/// devices with `movers` threads. The journal must hold the buckets (set_buckets); this records
/// their pieces and the phase. Throws what a device or a move threw (the caller restores).
gather_stats gather_round(const plan& p, const space& s, const std::vector<bucket>& buckets,
                          journal& j, const element_layout& layout,
                          const std::vector<device*>& devices, job_context& ctx,
                          std::uint64_t reserve, unsigned movers);

}  // namespace gpusort::detail::lean
