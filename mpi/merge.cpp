// The merge (phases.hpp): the runs a rank received, one per rank and each sorted, back into its
// shard without a second copy of it, on several threads. The output is cut at whole blocks, one
// stretch per thread; where each stretch begins in every run comes from a bisection of the key
// space (as select.cpp does across ranks), with equal keys taken in run order, so the output is
// ordered by (key bits, run) and a stable sort stays stable. Each thread merges its stretch with
// a heap of the runs' heads into output blocks taken from the free ones; an input block is given
// back once every thread that reads it is done with it. A permutation of the output blocks, one
// block copy or two each, then puts them in place.
#include "mpi/phases.hpp"

#include <gpusort/error.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <queue>
#include <thread>
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

/// The runs as sorted sequences of ordered bits, read through their blocks.
template <typename K>
class run_view {
 public:
  run_view(const block_space& space, const std::vector<run>& runs, const key_map<K>& map)
      : space_{space}, runs_{runs}, map_{map}
  {
  }
  [[nodiscard]] std::size_t runs() const noexcept { return runs_.size(); }
  [[nodiscard]] std::uint64_t length(std::size_t r) const noexcept { return runs_[r].length; }
  [[nodiscard]] std::uint64_t block_of(std::size_t r, std::uint64_t at) const noexcept
  {
    return runs_[r].blocks[at / space_.block()];
  }
  [[nodiscard]] K raw(std::size_t r, std::uint64_t at) const noexcept
  {
    return load<K>(space_.keys(block_of(r, at)) + at % space_.block() * sizeof(K));
  }
  [[nodiscard]] K bits(std::size_t r, std::uint64_t at) const noexcept { return map_(raw(r, at)); }
  /// Elements of run r with bits below v (`or_equal`: at most v).
  [[nodiscard]] std::uint64_t below(std::size_t r, K v, bool or_equal) const noexcept
  {
    std::uint64_t lo = 0, hi = runs_[r].length;
    while (lo < hi) {
      const std::uint64_t mid = lo + (hi - lo) / 2;
      const K k = bits(r, mid);
      if (or_equal ? k <= v : k < v)
        lo = mid + 1;
      else
        hi = mid;
    }
    return lo;
  }

 private:
  const block_space& space_;
  const std::vector<run>& runs_;
  const key_map<K>& map_;
};

/// Where output position `at` falls in each run: cuts summing to `at`, in (bits, run) order.
template <typename K>
std::vector<std::uint64_t> cut_at(const run_view<K>& view, std::uint64_t at)
{
  const std::size_t runs = view.runs();
  // The least v with more than `at` elements at most v (none: every run whole).
  K lo = 0, hi = std::numeric_limits<K>::max();
  std::uint64_t total = 0;
  for (std::size_t r = 0; r < runs; ++r) total += view.length(r);
  std::vector<std::uint64_t> cuts(runs);
  if (at >= total) {
    for (std::size_t r = 0; r < runs; ++r) cuts[r] = view.length(r);
    return cuts;
  }
  while (lo < hi) {
    const K mid = static_cast<K>(lo + (hi - lo) / 2);
    std::uint64_t n = 0;
    for (std::size_t r = 0; r < runs; ++r) n += view.below(r, mid, true);
    if (n > at)
      hi = mid;
    else
      lo = static_cast<K>(mid + 1);
  }
  // Below lo whole; the keys equal to lo from the first runs on, up to `at`.
  std::uint64_t taken = 0;
  for (std::size_t r = 0; r < runs; ++r) taken += cuts[r] = view.below(r, lo, false);
  for (std::size_t r = 0; r < runs && taken < at; ++r) {
    const std::uint64_t equal = view.below(r, lo, true) - cuts[r];
    const std::uint64_t more = std::min(equal, at - taken);
    cuts[r] += more;
    taken += more;
  }
  return cuts;
}

}  // namespace

std::uint64_t merge_threads(unsigned asked, std::uint64_t ranks_here)
{
  const std::uint64_t cores = std::max(1u, std::thread::hardware_concurrency());
  const std::uint64_t share =
      std::max<std::uint64_t>(1, cores / std::max<std::uint64_t>(1, ranks_here));
  return std::clamp<std::uint64_t>(asked == 0 ? std::min<std::uint64_t>(share, 16) : asked, 1,
                                   256);
}

template <typename K, typename V>
void merge_runs(block_space& space, std::vector<run>& runs, std::uint64_t total,
                const key_map<K>& map, std::uint64_t threads)
{
  constexpr bool has_values = !std::is_same_v<V, no_value>;
  const std::uint64_t b = space.block();
  const std::uint64_t out_blocks = (total + b - 1) / b;
  const run_view<K> view{space, runs, map};
  const std::size_t nruns = runs.size();
  const std::uint64_t parts = std::max<std::uint64_t>(1, std::min(threads, out_blocks));
  // Part p writes output blocks [first[p], first[p + 1]) and reads from cuts[p] to cuts[p + 1].
  std::vector<std::uint64_t> first(parts + 1);
  std::vector<std::vector<std::uint64_t>> cuts(parts + 1);
  for (std::uint64_t p = 0; p <= parts; ++p) {
    first[p] = out_blocks * p / parts;
    cuts[p] = cut_at(view, std::min(first[p] * b, total));
  }

  // Elements each input block holds, and how many of them have been merged: the block is free
  // once all have (several parts may read one block).
  std::vector<std::uint64_t> holds(space.blocks(), 0);
  for (const run& r : runs)
    for (std::uint64_t j = 0; j < r.blocks.size(); ++j)
      holds[r.blocks[j]] = std::min(b, r.length - j * b);
  std::vector<std::atomic<std::uint64_t>> merged(space.blocks());
  std::vector<std::uint64_t> out(out_blocks);
  std::mutex pool;  // the block space's free list
  const auto take = [&] {
    const std::lock_guard lock{pool};
    return space.take();
  };
  const auto done_with = [&](std::uint64_t id, std::uint64_t n) {
    if (n == 0 || merged[id].fetch_add(n) + n != holds[id]) return;
    const std::lock_guard lock{pool};
    space.give(id);
  };

  const auto merge_part = [&](std::uint64_t p) {
    struct head {
      K bits;
      std::uint32_t run;
      bool operator>(const head& o) const noexcept
      {
        return bits != o.bits ? bits > o.bits : run > o.run;
      }
    };
    // A run's reading place: pointers into its current block, so that the inner loop does no
    // division to find an element (blocks are not powers of two).
    struct cursor {
      std::uint64_t at{}, end{};  ///< positions in the run
      std::uint64_t id{};         ///< the current block
      const K* key{};
      const V* value{};
      std::uint64_t left{};       ///< elements of the current block from `key` on, up to `end`
      std::uint64_t merged{};     ///< merged from the current block
    };
    std::vector<cursor> cur(nruns);
    const auto enter = [&](cursor& c, std::uint32_t r) {  // the block that holds c.at
      c.id = view.block_of(r, c.at);
      const std::uint64_t in = c.at % b;
      c.key = reinterpret_cast<const K*>(space.keys(c.id)) + in;
      if constexpr (has_values) c.value = reinterpret_cast<const V*>(space.values(c.id)) + in;
      c.left = std::min(b - in, c.end - c.at);
      c.merged = 0;
    };
    std::priority_queue<head, std::vector<head>, std::greater<>> heads;
    for (std::uint32_t r = 0; r < nruns; ++r) {
      cur[r].at = cuts[p][r];
      cur[r].end = cuts[p + 1][r];
      if (cur[r].at == cur[r].end) continue;
      enter(cur[r], r);
      heads.push(head{map(*cur[r].key), r});
    }
    std::uint64_t block = first[p];
    K* out_key = nullptr;
    V* out_value = nullptr;
    std::uint64_t room = 0;  // left in the open output block
    while (!heads.empty()) {
      const std::uint32_t r = heads.top().run;
      heads.pop();
      // Take the run's elements while they stay below every other head (whole stretches of
      // one run, the common case for a few runs, without a heap operation each).
      const bool alone = heads.empty();
      const head next = alone ? head{} : heads.top();
      cursor& c = cur[r];
      for (;;) {
        if (room == 0) {
          out[block] = take();
          out_key = reinterpret_cast<K*>(space.keys(out[block]));
          if constexpr (has_values) out_value = reinterpret_cast<V*>(space.values(out[block]));
          ++block;
          room = b;
        }
        *out_key++ = *c.key++;
        if constexpr (has_values) *out_value++ = *c.value++;
        --room;
        ++c.merged;
        ++c.at;
        if (--c.left == 0) {  // done with this block, as far as part p goes
          done_with(c.id, c.merged);
          if (c.at == c.end) break;
          enter(c, r);
        }
        if (!alone && head{map(*c.key), r} > next) break;
      }
      if (c.at < c.end) heads.push(head{map(*c.key), r});
    }
  };

  if (parts == 1) {
    merge_part(0);
  } else {
    std::vector<std::thread> workers;
    std::vector<std::exception_ptr> failed(parts);
    for (std::uint64_t p = 0; p < parts; ++p)
      workers.emplace_back([&, p] {
        try {
          merge_part(p);
        } catch (...) {
          failed[p] = std::current_exception();
        }
      });
    for (std::thread& w : workers) w.join();
    for (const std::exception_ptr& e : failed)
      if (e) std::rethrow_exception(e);
  }
  place(space, out, total / b, total % b);
}

#define GPUSORT_MPI_MERGE(K, V)                                                            \
  template void merge_runs<K, V>(block_space&, std::vector<run>&, std::uint64_t,          \
                                 const key_map<K>&, std::uint64_t);
GPUSORT_FOR_EACH_LAYOUT(GPUSORT_MPI_MERGE)
#undef GPUSORT_MPI_MERGE

}  // namespace gpusort::detail::mpi
