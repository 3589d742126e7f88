#include "pipeline/rows/move_records.hpp"

#include "pipeline/host_memory.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>
#include <vector>

namespace gpusort::detail {

namespace {

constexpr std::uint64_t parallel_rows = 1u << 14;

/// Rows ahead whose records a gather asks for early: the reads are random, and waiting for
/// each in turn left the cores idle.
constexpr std::uint64_t prefetch_distance = 16;

/// The breakpoints: window w (rows [w m, (w + 1) m)) has one, at an offset a hash of w
/// chooses, so that no regular pattern of the permutation (a reversal, a stride) avoids them.
struct breakpoints {
  std::uint64_t count{};   ///< rows
  std::uint64_t window{};  ///< m

  [[nodiscard]] std::uint64_t windows() const noexcept { return (count + window - 1) / window; }
  [[nodiscard]] std::uint64_t at(std::uint64_t w) const noexcept
  {
    std::uint64_t h = (w + 1) * 0x9e3779b97f4a7c15ull;
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    return w * window + h % window;  // may lie beyond count in the last window: none there
  }
  [[nodiscard]] bool is(std::uint64_t row) const noexcept { return at(row / window) == row; }
};

/// A bit per row, set by several threads at once.
class bitmap {
 public:
  explicit bitmap(std::uint64_t bits) : words_((bits + 63) / 64) {}
  void set(std::uint64_t i) noexcept
  {
    words_[i / 64].fetch_or(std::uint64_t{1} << (i % 64), std::memory_order_relaxed);
  }
  [[nodiscard]] bool test(std::uint64_t i) const noexcept
  {
    return (words_[i / 64].load(std::memory_order_relaxed) >> (i % 64)) & 1;
  }

 private:
  std::vector<std::atomic<std::uint64_t>> words_;
};

}  // namespace

template <typename Index>
void gather_records(const unsigned char* records, std::uint64_t count,
                    std::uint32_t record_bytes, const Index* perm, unsigned char* out)
{
  const auto n = static_cast<std::int64_t>(count);
  const std::uint64_t r = record_bytes;
#pragma omp parallel for schedule(static) if (count >= parallel_rows)
  for (std::int64_t i = 0; i < n; ++i) {
    const auto u = static_cast<std::uint64_t>(i);
    if (u + prefetch_distance < count)
      __builtin_prefetch(records + std::uint64_t{perm[u + prefetch_distance]} * r);
    std::memcpy(out + u * r, records + std::uint64_t{perm[u]} * r, r);
  }
}

template <typename Index>
void permute_records(unsigned char* records, std::uint64_t count, std::uint32_t record_bytes,
                     const Index* perm, std::uint64_t saved_bytes)
{
  if (count < 2) return;
  const std::uint64_t r = record_bytes;
  const std::uint64_t saved_rows = std::clamp<std::uint64_t>(saved_bytes / r, 1, count);
  const breakpoints cut{count, (count + saved_rows - 1) / saved_rows};
  host_buffer saved{cut.windows() * r};
  auto* keep = saved.as<unsigned char>();
  bitmap moved{count};
  const auto row = [&](std::uint64_t i) { return records + i * r; };

  // Pass 1: from every breakpoint, walk its cycle backwards until the next breakpoint: each
  // row takes the record of the row it maps to, read before it is overwritten (every row but
  // a breakpoint is read and written by the one walk that reaches it). A walk that reaches a
  // breakpoint leaves its last row for the fix-up, from the breakpoint's saved record.
  std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>> fixups(
      static_cast<std::size_t>(omp_get_max_threads()));
  const auto windows = static_cast<std::int64_t>(cut.windows());
#pragma omp parallel for schedule(dynamic, 64) if (count >= parallel_rows)
  for (std::int64_t w = 0; w < windows; ++w) {
    const std::uint64_t b = cut.at(static_cast<std::uint64_t>(w));
    if (b >= count || perm[b] == b) continue;
    std::memcpy(keep + static_cast<std::uint64_t>(w) * r, row(b), r);
    auto& mine = fixups[static_cast<std::size_t>(omp_get_thread_num())];
    std::uint64_t pos = b;
    for (;;) {
      const std::uint64_t src = perm[pos];
      moved.set(pos);
      if (cut.is(src)) {
        mine.emplace_back(pos, src);
        break;
      }
      std::memcpy(row(pos), row(src), r);
      pos = src;
    }
  }
  for (const auto& mine : fixups)
    for (const auto& [pos, src] : mine) std::memcpy(row(pos), keep + src / cut.window * r, r);

  // Pass 2: the cycles no breakpoint cut (short ones, mostly: a reversal's pairs). Each is
  // rotated by the thread that finds its smallest row, which it learns by walking the cycle
  // without writing until it meets a smaller row or itself.
  const auto n = static_cast<std::int64_t>(count);
#pragma omp parallel if (count >= parallel_rows)
  {
    std::vector<unsigned char> hold(r);
#pragma omp for schedule(dynamic, 4096)
    for (std::int64_t i = 0; i < n; ++i) {
      const auto q = static_cast<std::uint64_t>(i);
      if (perm[q] == q || moved.test(q)) continue;
      std::uint64_t p = perm[q];
      while (p > q) p = perm[p];
      if (p != q) continue;
      std::memcpy(hold.data(), row(q), r);
      std::uint64_t pos = q;
      for (std::uint64_t src = perm[pos]; src != q; src = perm[pos]) {
        std::memcpy(row(pos), row(src), r);
        pos = src;
      }
      std::memcpy(row(pos), hold.data(), r);
    }
  }
}

template void gather_records(const unsigned char*, std::uint64_t, std::uint32_t,
                             const std::uint32_t*, unsigned char*);
template void gather_records(const unsigned char*, std::uint64_t, std::uint32_t,
                             const std::uint64_t*, unsigned char*);
template void permute_records(unsigned char*, std::uint64_t, std::uint32_t, const std::uint32_t*,
                              std::uint64_t);
template void permute_records(unsigned char*, std::uint64_t, std::uint32_t, const std::uint64_t*,
                              std::uint64_t);

}  // namespace gpusort::detail
