// The merge (phases.hpp): the runs a rank received, one per rank and each sorted, into its
// shard. A heap of the runs' heads, ordered by key bits and then run, so that equal keys keep
// the order (rank, position) a stable sort promises.
#include "mpi/phases.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <queue>
#include <type_traits>

namespace gpusort::detail::mpi {

template <typename K, typename V>
void merge_runs(std::span<const K> keys, std::span<const V> values,
                std::span<const std::uint64_t> first, const key_map<K>& map, K* out_keys,
                V* out_values)
{
  struct head {
    K bits;
    std::uint32_t run;
    bool operator>(const head& o) const noexcept
    {
      return bits != o.bits ? bits > o.bits : run > o.run;
    }
  };
  const std::size_t runs = first.size() - 1;
  std::vector<std::uint64_t> at(first.begin(), first.end() - 1);
  std::priority_queue<head, std::vector<head>, std::greater<>> heads;
  for (std::size_t r = 0; r < runs; ++r)
    if (at[r] < first[r + 1]) heads.push(head{map(keys[at[r]]), static_cast<std::uint32_t>(r)});
  std::uint64_t out = 0;
  while (!heads.empty()) {
    const std::uint32_t r = heads.top().run;
    heads.pop();
    // Take the run's elements while they stay below every other head (whole stretches of one
    // run, the common case for a few runs, without a heap operation each).
    const bool alone = heads.empty();
    const head next = alone ? head{} : heads.top();
    std::uint64_t i = at[r];
    do {
      out_keys[out] = keys[i];
      if constexpr (!std::is_same_v<V, no_value>) out_values[out] = values[i];
      ++out;
      ++i;
    } while (i < first[r + 1] && (alone || !(head{map(keys[i]), r} > next)));
    at[r] = i;
    if (i < first[r + 1]) heads.push(head{map(keys[i]), r});
  }
}

#define GPUSORT_MPI_MERGE(K, V)                                                           \
  template void merge_runs<K, V>(std::span<const K>, std::span<const V>,                 \
                                 std::span<const std::uint64_t>, const key_map<K>&, K*, V*);
GPUSORT_FOR_EACH_LAYOUT(GPUSORT_MPI_MERGE)
#undef GPUSORT_MPI_MERGE

}  // namespace gpusort::detail::mpi
