// The exact splitters (phases.hpp): a selection over the sorted shards, one bisection of the
// key space per rank boundary, all boundaries in one MPI_Allreduce per step, then ties shared
// out in rank order (MPI_Exscan), so that every rank receives exactly as many elements as it
// is to hold, whatever the duplicates (one rank with everything, every key equal).
#include "mpi/phases.hpp"

#include <algorithm>
#include <limits>
#include <numeric>

namespace gpusort::detail::mpi {

namespace {

/// Elements of the sorted shard whose ordered bits are below v (`or_equal`: at most v).
template <typename K>
std::uint64_t count_below(std::span<const K> shard, const key_map<K>& map, K v, bool or_equal)
{
  const auto at = or_equal ? std::upper_bound(shard.begin(), shard.end(), v,
                                              [&](K value, K raw) { return value < map(raw); })
                           : std::lower_bound(shard.begin(), shard.end(), v,
                                              [&](K raw, K value) { return map(raw) < value; });
  return static_cast<std::uint64_t>(at - shard.begin());
}

}  // namespace

template <typename K>
std::vector<std::uint64_t> select_cuts(const group& g, std::span<const K> shard,
                                       const key_map<K>& map,
                                       std::span<const std::uint64_t> targets)
{
  const auto boundaries = static_cast<std::size_t>(g.ranks - 1);
  std::vector<std::uint64_t> cuts(static_cast<std::size_t>(g.ranks) + 1, 0);
  cuts.back() = shard.size();
  if (boundaries == 0) return cuts;
  const std::uint64_t total = std::accumulate(targets.begin(), targets.end(), std::uint64_t{0});
  // Boundary i (between ranks i and i + 1) lies at global position target[i].
  std::vector<std::uint64_t> target(boundaries);
  std::uint64_t prefix = 0;
  for (std::size_t i = 0; i < boundaries; ++i) target[i] = prefix += targets[i];

  // The key at each target: the least v with more than target[i] elements at most v. The key
  // space halves every step: as many steps as K has bits.
  std::vector<K> lo(boundaries, K{0});
  std::vector<K> hi(boundaries, std::numeric_limits<K>::max());
  std::vector<std::uint64_t> local(boundaries), global(boundaries);
  for (std::size_t step = 0; step < 8 * sizeof(K); ++step) {
    for (std::size_t i = 0; i < boundaries; ++i) {
      const K mid = static_cast<K>(lo[i] + (hi[i] - lo[i]) / 2);
      local[i] = lo[i] < hi[i] ? count_below(shard, map, mid, true) : 0;
    }
    allreduce(g, local.data(), global.data(), static_cast<int>(boundaries), MPI_UINT64_T,
              MPI_SUM, "MPI_Allreduce (the splitters' counts)");
    for (std::size_t i = 0; i < boundaries; ++i) {
      if (lo[i] >= hi[i]) continue;
      const K mid = static_cast<K>(lo[i] + (hi[i] - lo[i]) / 2);
      if (global[i] > target[i])
        hi[i] = mid;
      else
        lo[i] = static_cast<K>(mid + 1);
    }
  }

  // The keys equal to a boundary's key are shared out in rank order: the ranks below take
  // theirs first, so equal keys keep the order (rank, position).
  std::vector<std::uint64_t> less(boundaries), equal(boundaries), equal_below(boundaries, 0);
  for (std::size_t i = 0; i < boundaries; ++i) {
    local[i] = count_below(shard, map, lo[i], false);
    equal[i] = count_below(shard, map, lo[i], true) - local[i];
  }
  allreduce(g, local.data(), less.data(), static_cast<int>(boundaries), MPI_UINT64_T, MPI_SUM,
            "MPI_Allreduce (the keys below the splitters)");
  exscan_sum(g, equal.data(), equal_below.data(), static_cast<int>(boundaries),
             "MPI_Exscan (the keys equal to the splitters)");
  for (std::size_t i = 0; i < boundaries; ++i) {
    if (target[i] >= total) {  // every rank above holds nothing: all of this one goes below
      cuts[i + 1] = shard.size();
      continue;
    }
    const std::uint64_t before = less[i] + equal_below[i];
    const std::uint64_t take = target[i] > before ? std::min(target[i] - before, equal[i]) : 0;
    cuts[i + 1] = local[i] + take;
  }
  return cuts;
}

template std::vector<std::uint64_t> select_cuts<std::uint32_t>(
    const group&, std::span<const std::uint32_t>, const key_map<std::uint32_t>&,
    std::span<const std::uint64_t>);
template std::vector<std::uint64_t> select_cuts<std::uint64_t>(
    const group&, std::span<const std::uint64_t>, const key_map<std::uint64_t>&,
    std::span<const std::uint64_t>);

}  // namespace gpusort::detail::mpi
