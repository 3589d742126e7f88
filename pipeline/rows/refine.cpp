#include "pipeline/rows/refine.hpp"

#include "pipeline/host_memory.hpp"

#include <gpusort/error.hpp>
#include <gpusort/units.hpp>

#include <fmt/format.h>

#include <omp.h>

#include <algorithm>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

namespace gpusort::detail {

namespace {

constexpr std::uint64_t parallel_rows = 1u << 16;

/// Uninitialised (host_buffer): the words and permutations are written whole before they are
/// read, and zeroing gigabytes first would cost a pass of its own.
template <typename T>
struct scratch {
  explicit scratch(std::uint64_t n) : buffer{n * sizeof(T)} {}
  [[nodiscard]] T* get() const noexcept { return buffer.as<T>(); }
  T& operator[](std::int64_t i) const noexcept { return get()[i]; }
  void reset() { buffer = host_buffer{}; }
  host_buffer buffer;
};

/// A tied group: rows perm[first, first + count) agree on every word before `level`.
struct group {
  std::uint64_t first{};
  std::uint64_t count{};
  std::uint32_t level{};
};

template <typename Index>
class refiner {
 public:
  refiner(engine& engine, const row_words& words, const sort_options& options,
          const rows_tuning& tuning, host_stages& stages)
      : engine_{engine}, words_{words}, options_{options}, tuning_{tuning}, stages_{stages}
  {
  }

  sort_report run(std::uint64_t count, Index* perm)
  {
    // The sorted first words find the ties, and an argsort within a memory limit sorts in
    // them: taken even where every row is one word.
    sort_report report;
    scratch<std::uint64_t> sorted{count};
    // Its pages made on every core now, not one by one as the engine's copies first reach
    // them: the GPU's copy out of the sorted words and their order ran at 6.6 GB/s into fresh
    // pages (64 GiB of records on an H200, h200x2-20261129-s7/call1).
    stages_.run("rows: fresh pages of the sorted words", count * sizeof(std::uint64_t),
                [&] { sorted.buffer.populate(); });
    {
      scratch<std::uint64_t> first{count};
      const std::uint64_t bytes = count * sizeof(std::uint64_t);
      stages_.run("rows: first words", bytes, [&] { words_.words_of(0, count, 0, first.get()); });
      report = stages_.run("rows: order of the first words", bytes, [&] {
        return argsort(first.get(), count, perm, sorted.get(), 2 * bytes);
      });
    }
    std::vector<group> large;
    stages_.run("rows: ties", count * sizeof(std::uint64_t),
                [&] { take_groups(perm, sorted.get(), count, 0, 1, large); });
    sorted.reset();
    // Large groups one after another, each by the engine; they may leave large groups of
    // their own (all rows equal word after word), so this is a stack, not a recursion.
    stages_.run("rows: large ties", 0, [&] {
      while (!large.empty()) {
        const group g = large.back();
        large.pop_back();
        check_cancel();
        refine_large(perm, g, large);
      }
    });
    return report;
  }

 private:
  /// The engine's stable argsort of `keys` into `out`, `sorted` receiving them sorted, while
  /// this job holds `held` bytes of its own: the engine gets what the limit leaves.
  template <typename I>
  sort_report argsort(const std::uint64_t* keys, std::uint64_t n, I* out, std::uint64_t* sorted,
                      std::uint64_t held)
  {
    sort_options o = options_;
    if (o.host_memory_limit) {
      if (held > *o.host_memory_limit)
        throw config_error{fmt::format(
            "host_memory_limit: sorting {} rows by their keys needs {} of host memory for "
            "their words and order, more than the limit of {}",
            n, format_bytes(held), format_bytes(*o.host_memory_limit))};
      o.host_memory_limit = *o.host_memory_limit - held;
    }
    o.stable = true;
    o.direction = order::ascending;
    o.floats = float_order::total;
    return engine_.argsort(argsort_job{.keys = {keys, n, dtype::u64},
                                       .indices_out = out,
                                       .index_bytes = sizeof(I),
                                       .keys_out = sorted},
                           o);
  }

  void check_cancel() const
  {
    if (options_.cancel.cancelled()) throw cancelled{"the sort was cancelled"};
  }

  /// The groups of rows perm[base, base + n) tied on their words up to `level` - 1, found in
  /// `sorted` (their word level - 1, in perm's order): small ones are put in order here, on
  /// every core; large ones are left in `large`.
  void take_groups(Index* perm, const std::uint64_t* sorted, std::uint64_t n, std::uint64_t base,
                   std::uint32_t level, std::vector<group>& large)
  {
    if (level >= words_.words()) return;  // tied on every word: the positions decide
    std::mutex lock;
    const std::uint64_t parts =
        n < parallel_rows ? 1 : static_cast<std::uint64_t>(omp_get_max_threads()) * 8;
    const auto part_count = static_cast<std::int64_t>(parts);
#pragma omp parallel for schedule(dynamic) if (parts > 1)
    for (std::int64_t p = 0; p < part_count; ++p) {
      // A part takes the groups that start within it, wherever they end.
      const std::uint64_t begin = n * static_cast<std::uint64_t>(p) / parts;
      const std::uint64_t end = n * static_cast<std::uint64_t>(p + 1) / parts;
      std::uint64_t i = begin;
      while (i > 0 && i < end && sorted[i] == sorted[i - 1]) ++i;
      std::vector<std::pair<std::uint64_t, Index>> buffer;
      while (i < end) {
        std::uint64_t j = i + 1;
        while (j < n && sorted[j] == sorted[i]) ++j;
        if (j - i > 1) {
          if (j - i >= tuning_.engine_group_rows) {
            const std::scoped_lock guard{lock};
            large.push_back({base + i, j - i, level});
          } else {
            refine_small(perm + base + i, j - i, level, buffer);
          }
        }
        i = j;
      }
    }
  }

  /// Rows idx[0, n), tied on words before `level`, put in order on this thread: pairs of
  /// (word, row) sorted, and the ties among them again at the next word.
  void refine_small(Index* idx, std::uint64_t n, std::uint32_t level,
                    std::vector<std::pair<std::uint64_t, Index>>& buffer) const
  {
    std::vector<group> todo{{0, n, level}};
    while (!todo.empty()) {
      const group g = todo.back();
      todo.pop_back();
      Index* rows = idx + g.first;
      if (g.count == 2) {
        // The commonest tie: compare the two rows word by word.
        for (std::uint32_t w = g.level; w < words_.words(); ++w) {
          const std::uint64_t a = words_.word(rows[0], w);
          const std::uint64_t b = words_.word(rows[1], w);
          if (a != b) {
            if (a > b) std::swap(rows[0], rows[1]);
            break;
          }
        }
        continue;
      }
      buffer.resize(g.count);
      for (std::uint64_t k = 0; k < g.count; ++k)
        buffer[k] = {words_.word(rows[k], g.level), rows[k]};
      // (word, row): rows of one group arrive in input order and leave in it among equals.
      std::sort(buffer.begin(), buffer.end());
      for (std::uint64_t k = 0; k < g.count; ++k) rows[k] = buffer[k].second;
      if (g.level + 1 >= words_.words()) continue;
      for (std::uint64_t k = 0; k < g.count;) {
        std::uint64_t e = k + 1;
        while (e < g.count && buffer[e].first == buffer[k].first) ++e;
        if (e - k > 1) todo.push_back({g.first + k, e - k, g.level + 1});
        k = e;
      }
    }
  }

  /// A large tied group: its rows' word `level` argsorted by the engine, the rows permuted by
  /// that, and its own ties taken in turn.
  void refine_large(Index* perm, const group& g, std::vector<group>& large)
  {
    Index* rows = perm + g.first;
    scratch<std::uint64_t> keys{g.count};
    words_.words_of_rows(rows, g.count, g.level, keys.get());
    scratch<std::uint64_t> sorted{g.count};
    scratch<Index> order_of{g.count};
    argsort(keys.get(), g.count, order_of.get(), sorted.get(),
            g.count * (2 * sizeof(std::uint64_t) + sizeof(Index)));
    keys.reset();
    scratch<Index> moved{g.count};
    const auto n = static_cast<std::int64_t>(g.count);
#pragma omp parallel for schedule(static) if (g.count >= parallel_rows)
    for (std::int64_t k = 0; k < n; ++k) moved[k] = rows[order_of[k]];
    std::copy_n(moved.get(), g.count, rows);
    moved.reset();
    order_of.reset();
    take_groups(perm, sorted.get(), g.count, g.first, g.level + 1, large);
  }

  engine& engine_;
  const row_words& words_;
  sort_options options_;
  rows_tuning tuning_;
  host_stages& stages_;
};

}  // namespace

template <typename Index>
sort_report argsort_words(engine& engine, const row_words& words, std::uint64_t count,
                          Index* perm, const sort_options& options, const rows_tuning& tuning,
                          host_stages* stages)
{
  static_assert(std::is_same_v<Index, std::uint32_t> || std::is_same_v<Index, std::uint64_t>);
  if (std::is_same_v<Index, std::uint32_t> && count > 0xffffffffull)
    throw invalid_argument{"uint32 indices for 2^32 rows or more"};
  host_stages untimed{false};
  return refiner<Index>{engine, words, options, tuning, stages ? *stages : untimed}.run(count,
                                                                                       perm);
}

template sort_report argsort_words(engine&, const row_words&, std::uint64_t, std::uint32_t*,
                                   const sort_options&, const rows_tuning&, host_stages*);
template sort_report argsort_words(engine&, const row_words&, std::uint64_t, std::uint64_t*,
                                   const sort_options&, const rows_tuning&, host_stages*);

}  // namespace gpusort::detail
