// The merge (phases.hpp): the runs a rank received, one per rank and each sorted, back into its
// shard without a second copy of it. A heap of the runs' heads, ordered by key bits and then
// run (equal keys keep the order (rank, position) a stable sort promises), writes whole output
// blocks into blocks the runs have freed; a permutation of the output blocks, one block copy or
// two each, then puts them in place.
#include "mpi/phases.hpp"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <queue>
#include <type_traits>

namespace gpusort::detail::mpi {

namespace {

template <typename T>
T load(const char* at) noexcept
{
  T v;
  std::memcpy(&v, at, sizeof v);
  return v;
}

/// Puts output block i at shard block i for every whole one, and the short last one (`tail`
/// elements) at the position after them.
void place(block_space& space, const std::vector<std::uint64_t>& out, std::uint64_t whole,
           std::uint64_t tail)
{
  constexpr std::uint64_t none = std::numeric_limits<std::uint64_t>::max();
  std::vector<std::uint64_t> where = out;  // output i is in block where[i]
  std::vector<std::uint64_t> holds(space.blocks(), none);
  for (std::uint64_t i = 0; i < where.size(); ++i) holds[where[i]] = i;
  for (std::uint64_t i = 0; i < whole; ++i) {
    if (where[i] == i) continue;
    if (const std::uint64_t j = holds[i]; j != none) {  // another output sits in i's place
      const std::uint64_t to = space.take();
      space.copy(i, to);
      where[j] = to;
      holds[to] = j;
    }
    space.claim(i);
    space.copy(where[i], i);
    holds[where[i]] = none;
    space.give(where[i]);
    holds[i] = i;
    where[i] = i;
  }
  if (tail == 0) return;
  // Right after the whole blocks: a free shard block (every output below it is in place)
  // or the buffers' tail, which no block covers.
  const std::uint64_t from = where[whole];
  const bool in_block = whole < space.shard_blocks();
  if (in_block && from == whole) return;  // (id `whole` past the shard's is a block of its own)
  std::memcpy(in_block ? space.keys(whole) : space.tail_keys(), space.keys(from),
              tail * space.key_bytes());
  if (space.value_bytes() > 0)
    std::memcpy(in_block ? space.values(whole) : space.tail_values(), space.values(from),
                tail * space.value_bytes());
}

}  // namespace

template <typename K, typename V>
void merge_runs(block_space& space, std::vector<run>& runs, std::uint64_t total,
                const key_map<K>& map)
{
  constexpr bool has_values = !std::is_same_v<V, no_value>;
  struct head {
    K bits;
    std::uint32_t run;
    bool operator>(const head& o) const noexcept
    {
      return bits != o.bits ? bits > o.bits : run > o.run;
    }
  };
  struct cursor {
    std::uint64_t block{};  ///< index into the run's blocks
    std::uint64_t at{};     ///< element within that block
    std::uint64_t left{};
  };
  const std::uint64_t b = space.block();
  std::vector<cursor> cur(runs.size());
  std::priority_queue<head, std::vector<head>, std::greater<>> heads;
  const auto key_of = [&](std::uint32_t r) {
    return load<K>(space.keys(runs[r].blocks[cur[r].block]) + cur[r].at * sizeof(K));
  };
  for (std::uint32_t r = 0; r < runs.size(); ++r) {
    cur[r].left = runs[r].length;
    if (cur[r].left > 0) heads.push(head{map(key_of(r)), r});
  }

  std::vector<std::uint64_t> out;
  std::uint64_t fill = b;  // elements in the last output block: none is open yet
  const auto emit = [&](std::uint32_t r) {
    if (fill == b) {
      out.push_back(space.take());
      fill = 0;
    }
    const std::uint64_t from = runs[r].blocks[cur[r].block];
    std::memcpy(space.keys(out.back()) + fill * sizeof(K), space.keys(from) + cur[r].at * sizeof(K),
                sizeof(K));
    if constexpr (has_values)
      std::memcpy(space.values(out.back()) + fill * sizeof(V),
                  space.values(from) + cur[r].at * sizeof(V), sizeof(V));
    ++fill;
    --cur[r].left;
    if (++cur[r].at == b || cur[r].left == 0) {  // the run is done with this block
      space.give(from);
      ++cur[r].block;
      cur[r].at = 0;
    }
  };
  while (!heads.empty()) {
    const std::uint32_t r = heads.top().run;
    heads.pop();
    // Take the run's elements while they stay below every other head (whole stretches of one
    // run, the common case for a few runs, without a heap operation each).
    const bool alone = heads.empty();
    const head next = alone ? head{} : heads.top();
    do {
      emit(r);
    } while (cur[r].left > 0 && (alone || !(head{map(key_of(r)), r} > next)));
    if (cur[r].left > 0) heads.push(head{map(key_of(r)), r});
  }
  place(space, out, total / b, total % b);
}

#define GPUSORT_MPI_MERGE(K, V)                                                            \
  template void merge_runs<K, V>(block_space&, std::vector<run>&, std::uint64_t,          \
                                 const key_map<K>&);
GPUSORT_FOR_EACH_LAYOUT(GPUSORT_MPI_MERGE)
#undef GPUSORT_MPI_MERGE

}  // namespace gpusort::detail::mpi
