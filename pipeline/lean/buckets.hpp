// The lean job's buckets (issue 39): after round 1 every chunk is sorted at x in [chunk_begin,
// + chunk_size) of the shifted space. Regular samples of the sorted chunks give the splitters;
// a binary search per chunk and splitter cuts every chunk into pieces; the pieces of one key
// range, in chunk order (the input's order among equal keys), make a bucket.
//
// Buckets alternate between the keys strictly between two splitters (at most plan.bucket_limit
// by the regular sample's bound, plan.cpp) and the keys equal to a splitter, which need no
// sorting and so may be cut anywhere: an equal-key bucket larger than the limit becomes
// several. No bucket ever needs the compensation of the two-round path.
#pragma once

#include "core/keys.hpp"
#include "pipeline/lean/journal.hpp"
#include "pipeline/lean/plan.hpp"
#include "pipeline/lean/space.hpp"

#include <cstdint>
#include <vector>

namespace gpusort::detail::lean {

/// A piece of a bucket: `length` elements at x (as round 1 left them).
struct piece {
  std::uint64_t x{};
  std::uint64_t length{};
};

struct bucket {
  std::uint64_t size{};
  std::uint64_t out{};     ///< where its sorted elements start in the array
  std::uint64_t source{};  ///< x of its place for round 2 (layout_buckets)
  bool equal{};            ///< every key equal (no sorting needed)
  std::vector<piece> pieces;  ///< in chunk order
};

/// The buckets of the sorted chunks, in key order, with their `out` offsets. `k`: the order
/// the devices sorted by. Reads s candidates per chunk and two binary searches per chunk and
/// splitter, from every core.
template <typename K>
std::vector<bucket> make_buckets(const plan& p, const space& s, const key_order& k);

/// Places every bucket's `source` so that round 2, taking the buckets from the last to the
/// first, writes each over sources it already read (bucket k's source is its output moved
/// down by the room, except that the bucket the room's end falls in, and those after it, are
/// moved down less, so that no source spans the room and the array). Returns the x where the
/// storage begins: the end of the shifted space is free from there in both layouts.
std::uint64_t layout_buckets(const plan& p, std::vector<bucket>& buckets);

/// The journal's record of `buckets`.
std::vector<bucket_place> places_of(const std::vector<bucket>& buckets);

}  // namespace gpusort::detail::lean
