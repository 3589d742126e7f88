// The lean job's permutation (issue 39; IPS4o's block permutation, Axtmann, Witt, Ferizovic
// and Sanders): between the rounds, every bucket's pieces move from the sorted chunks to the
// bucket's source place (buckets.hpp), in place, with memory for tables only.
//
// The shifted space is cut into blocks of b elements. A block that lies within one piece is
// *pure*; the few that hold a piece boundary (at most one per piece) are *mixed*:
//  1. evacuate: the mixed blocks' elements, and the pure blocks a bucket has beyond the whole
//     blocks of its place (two at most), are copied to the storage, the free end of the space;
//  2. permute: every pure block moves into a whole block of its bucket's place. A mover takes
//     a misplaced block of bucket k into an empty block of k's place, whose own block (now
//     free) it fills next with a block that belongs there, and so on; where no such pair is
//     left while blocks are misplaced (a cycle without a hole), it parks one in a spare block;
//  3. clean up: the storage's fragments fill what the blocks left of each place.
// Each element moves once, a mixed block's twice. Every move copies first and then records
// itself in the journal (journal.hpp), so a kill at any moment loses nothing.
#pragma once

#include "pipeline/device.hpp"
#include "pipeline/lean/buckets.hpp"
#include "pipeline/lean/journal.hpp"
#include "pipeline/lean/plan.hpp"
#include "pipeline/lean/space.hpp"

#include <cstdint>
#include <vector>

namespace gpusort::detail::lean {

/// Elements at x that round 1 left at `origin`: a bucket's part after the permutation.
struct placed {
  std::uint64_t origin{};
  std::uint64_t x{};
  std::uint64_t length{};
};

struct permutation_stats {
  std::uint64_t block{};       ///< the block size it chose
  std::uint64_t moves{};       ///< block moves
  std::uint64_t parked{};      ///< of them, into a spare block
  std::uint64_t evacuated{};   ///< elements copied to the storage
  double seconds{};
  double evacuate_seconds{};  ///< of `seconds`: step 1, the plan of the blocks and the copies
  double permute_seconds{};   ///< step 2, the block moves
  double cleanup_seconds{};   ///< step 3, the fragments into the places
};

/// Moves every bucket's elements to x in [source, source + size), given `storage`, the x from
/// which the end of the space is free (layout_buckets). With `parts`, fills parts[k] with
/// bucket k's pieces as they lie afterwards, for a stable round 2 to gather in input order.
/// `movers` threads; progress through ctx (add_done per element moved); throws cancelled.
permutation_stats permute(const plan& p, const space& s, const std::vector<bucket>& buckets,
                          std::uint64_t storage, journal& j, job_context& ctx,
                          unsigned movers, std::vector<std::vector<placed>>* parts);

}  // namespace gpusort::detail::lean
