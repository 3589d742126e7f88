#include "pipeline/rows/move_records.hpp"

#include "core/stream_copy.hpp"
#include "pipeline/host_memory.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>
#include <vector>

namespace gpusort::detail {

namespace {

constexpr std::uint64_t parallel_rows = 1u << 14;

/// Rows ahead whose records a gather asks for early, every line of each: the reads are random,
/// and waiting for each in turn left the cores idle.
constexpr std::uint64_t gather_distance = 32;

/// A gather's batch of records, assembled in the thread's cache and then streamed out with
/// stores that bypass it: plain stores read each line of the output before writing it.
constexpr std::uint64_t gather_batch_bytes = std::uint64_t{128} << 10;

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
};

/// Walks one thread of an in-place move advances side by side, a step of each in turn. A step
/// waits for the record and the index of the row it goes to, both random reads: one walk at a
/// time left each core waiting on one miss after another (400 ns a step on an H200 host). Each
/// step asks for what its walk's next step reads, so that the misses of all the thread's walks
/// are in flight together and have arrived by the walk's next turn. bench/permute_bench.cpp:
/// 8 to 24 ran alike on a 2-core VM, bound by its memory's random reads; on a 16-core H200
/// host, 8 GiB of 100-byte records, 8 took 10% longer than 16, 32 6% less, and 24 the same as
/// 16 for 32 GiB.
constexpr unsigned walks_per_thread = 16;

/// The most of a record a walk asks for ahead: the hardware's prefetcher follows the lines of a
/// longer record once its copy starts, and asking for all of them would only fill the queues.
constexpr std::uint64_t prefetched_bytes = 256;

/// The most bytes of records a thread's walks copy in a round of them: larger records take
/// fewer walks side by side (down to 4), whose copies are bound by the memory's throughput
/// anyway. 4-KiB records: 4 walks took 394 to 405 ns a row on the 2-core VM, 16 took 430 to
/// 495 (1-KiB records: 4 to 16 alike). It bounds pass 2's records held too, one per walk.
constexpr std::uint64_t round_bytes = std::uint64_t{16} << 10;

/// Walks side by side on a thread for records of `r` bytes: pass 1 (at least 4), pass 2 (at
/// least 1: each holds a record).
[[nodiscard]] unsigned walks_for(std::uint64_t r, std::uint64_t least) noexcept
{
  return static_cast<unsigned>(std::clamp<std::uint64_t>(round_bytes / r, least,
                                                          walks_per_thread));
}

/// Windows (pass 1) and rows (pass 2) a thread takes at a time from their shared counter: the
/// walks' lengths vary too much for a fixed share to keep every core busy to the end.
constexpr std::uint64_t windows_taken = 16;
constexpr std::uint64_t rows_taken = 4096;

/// The most rows pass 2 searches of a cycle for a smaller row. A cycle no breakpoint cut is
/// short unless breakpoints are few or the permutation avoids them; without a bound, a long
/// one in increasing order (a shift) cost a search of the rest of the cycle from every row.
/// Longer cycles are left to pass 3.
constexpr std::uint64_t search_rows = 4096;

/// The byte a row has in an in-place move, in place of a bitmap whose bits several threads set
/// with an atomic read-modify-write each (which kept a core from overlapping its misses). A
/// row's byte is written by one thread (the one whose walk reaches it), or in pass 2 by
/// several with the same value.
enum : unsigned char {
  untouched = 0,   ///< not moved yet, or a fixed point
  moved = 1,       ///< its record taken by a walk of pass 1 or rotated in pass 2 or 3
  breakpoint = 2,  ///< a breakpoint: its record saved, the walks that reach it stop there
  deferred = 3,    ///< in a cycle that no breakpoint cut, too long for pass 2: pass 3 rotates it
};

/// Asks for a line ahead of its use, into L2 (prefetcht1): on a 2-core VM pass 1 took 20 to
/// 30% less time so than with prefetcht0 or prefetchw, and alike on a 16-core H200 host. A
/// line asked for a whole round of walks ahead need not take an L1 fill buffer meanwhile.
/// Always inlined, as is every function here that asks for lines: GCC 12 found a function
/// that only prefetches to have no effect, and dropped the calls of those it did not inline
/// (pass 1 lost every prefetch of its steps so, and ran as slowly as before).
[[gnu::always_inline]] inline void prefetch(const void* p) noexcept
{
  __builtin_prefetch(p, 0, 2);
}

/// Asks for the lines of a record that a walk reads and then overwrites.
[[gnu::always_inline]] inline void prefetch_record(const unsigned char* p,
                                                   std::uint64_t bytes) noexcept
{
  const unsigned char* end = p + std::min(bytes, prefetched_bytes);
  for (const unsigned char* at = p; at < end; at += 64) prefetch(at);
  prefetch(end - 1);  // the last line, where the record does not start on one
}

/// What the walks of an in-place move share.
template <typename Index>
struct in_place {
  unsigned char* records;
  std::uint64_t count;
  std::uint64_t r;
  const Index* perm;
  unsigned char* state;  ///< a byte per row

  [[nodiscard]] unsigned char* row(std::uint64_t i) const noexcept { return records + i * r; }

  /// One record, of a size known only at run time: copies of 100 and 8 bytes known at compile
  /// time ran no faster on the 2-core VM, whose steps wait on memory.
  void copy(unsigned char* to, const unsigned char* from) const noexcept
  {
    std::memcpy(to, from, r);
  }

  /// What the next step of a walk that reached `src` reads: its record (copied into the row
  /// before it), its index (the row after it) and its byte.
  [[gnu::always_inline]] void ask_for(std::uint64_t src) const noexcept
  {
    prefetch_record(row(src), r);
    ask_for_index(src);
  }

  /// What the next step of a search (or of a walk that marks rows) reads.
  [[gnu::always_inline]] void ask_for_index(std::uint64_t src) const noexcept
  {
    prefetch(perm + src);
    prefetch(state + src);
  }

  /// A row's byte in pass 2, where threads read bytes that others write: relaxed loads and
  /// stores of a byte are plain moves, and make those reads well defined.
  [[nodiscard]] std::atomic_ref<unsigned char> shared(std::uint64_t i) const noexcept
  {
    return std::atomic_ref<unsigned char>{state[i]};
  }
};

/// Pass 1 on one thread: a walk from the breakpoint of each window it takes from
/// `next_window`, along its cycle to the next breakpoint, walks_for(r, 4) of them side by side.
/// Every row but a breakpoint lies in the piece of exactly one walk, so that no two walks, of
/// one thread or of two, read or write the same row.
template <typename Index>
void walk_pieces(const in_place<Index>& m, const breakpoints& cut, const unsigned char* keep,
                 std::atomic<std::uint64_t>& next_window)
{
  struct walk {
    std::uint64_t pos;  ///< the row the next step writes
    std::uint64_t src;  ///< perm[pos]: the row whose record it takes
  };
  walk walks[walks_per_thread];
  const std::uint64_t windows = cut.windows();
  std::uint64_t w = 0;
  std::uint64_t w_end = 0;
  const auto start = [&](walk& s) {
    for (;;) {
      if (w == w_end) {
        w = next_window.fetch_add(windows_taken, std::memory_order_relaxed);
        if (w >= windows) {
          w_end = w;  // and so for every later call
          return false;
        }
        w_end = std::min(w + windows_taken, windows);
      }
      const std::uint64_t b = cut.at(w++);
      if (w < w_end) {  // the first reads of the walk after this one
        const std::uint64_t after = cut.at(w);
        if (after < m.count) {
          prefetch(m.perm + after);
          prefetch_record(m.row(after), m.r);
        }
      }
      if (b >= m.count || m.perm[b] == b) continue;
      s = {b, m.perm[b]};
      m.ask_for(s.src);
      return true;
    }
  };
  const unsigned most = walks_for(m.r, 4);
  unsigned active = 0;
  while (active < most && start(walks[active])) ++active;
  while (active > 0) {
    for (unsigned i = 0; i < active;) {
      walk& s = walks[i];
      if (m.state[s.src] == breakpoint) {
        // The piece's end: the breakpoint's record was saved before any walk began.
        m.copy(m.row(s.pos), keep + s.src / cut.window * m.r);
        if (!start(s)) {
          s = walks[--active];
          continue;
        }
      } else {
        m.copy(m.row(s.pos), m.row(s.src));
        m.state[s.src] = moved;
        s.pos = s.src;
        s.src = m.perm[s.pos];
        m.ask_for(s.src);
      }
      ++i;
    }
  }
}

/// Pass 2 on one thread: the cycles no breakpoint cut (their rows still untouched), each
/// rotated by the walk that starts from its smallest row. A walk learns that its row is the
/// smallest by searching the cycle without writing until it meets a smaller row or a row with
/// a byte set (another walk's cycle, here or on another thread) or itself, which takes at most
/// search_rows steps in a cycle that short. A search that goes on longer marks the rows it
/// searched deferred, so that the searches from them stop at once, and leaves the cycle to
/// pass 3: no walk of pass 2 rotates it. Candidates come from the rows the thread takes from
/// `next_row`. `hold` has room for the first record of each walk. Returns whether any cycle
/// was deferred.
template <typename Index>
bool rotate_short_cycles(const in_place<Index>& m, std::atomic<std::uint64_t>& next_row,
                         std::vector<unsigned char>& hold)
{
  enum class phase : unsigned char { searching, deferring, rotating };
  struct walk {
    std::uint64_t first;  ///< the candidate, the smallest row of its cycle if none is smaller
    std::uint64_t pos;    ///< deferring: the row to mark; rotating: the row the step writes
    std::uint64_t src;    ///< searching: the row reached; rotating: perm[pos]
    std::uint64_t left;   ///< searching, deferring: the rows it may still search or mark
    phase now;
    unsigned char* held;  ///< rotating: the first row's record
  };
  walk walks[walks_per_thread];
  const auto slots = static_cast<unsigned>(hold.size() / m.r);
  for (unsigned i = 0; i < slots; ++i) walks[i].held = hold.data() + i * m.r;
  bool any_deferred = false;
  std::uint64_t q = 0;
  std::uint64_t q_end = 0;
  const auto start = [&](walk& s) {
    for (;;) {
      if (q == q_end) {
        q = next_row.fetch_add(rows_taken, std::memory_order_relaxed);
        if (q >= m.count) {
          q_end = q;  // and so for every later call
          return false;
        }
        q_end = std::min(q + rows_taken, m.count);
      }
      const std::uint64_t c = q++;
      // A row that maps to a smaller one is not its cycle's smallest: no search needed.
      const std::uint64_t p = m.perm[c];
      if (p <= c || m.shared(c).load(std::memory_order_relaxed) != untouched) continue;
      s.first = c;
      s.src = p;
      s.left = search_rows;
      s.now = phase::searching;
      // Most cycles left here are short (a reversal's pairs): their first two records are
      // asked for now, so that a pair is rotated in the walk's next turn.
      m.ask_for_index(p);
      prefetch_record(m.row(c), m.r);
      prefetch_record(m.row(p), m.r);
      return true;
    }
  };
  // One step of a rotation: the row at pos takes the record of the row it maps to.
  const auto rotate = [&](walk& s) {
    m.copy(m.row(s.pos), m.row(s.src));
    m.shared(s.src).store(moved, std::memory_order_relaxed);
    s.pos = s.src;
    s.src = m.perm[s.pos];
  };
  unsigned active = 0;
  while (active < slots && start(walks[active])) ++active;
  while (active > 0) {
    for (unsigned i = 0; i < active;) {
      walk& s = walks[i];
      bool ended = false;
      switch (s.now) {
        case phase::searching: {
          if (s.src < s.first || m.shared(s.src).load(std::memory_order_relaxed) != untouched) {
            ended = true;
            break;
          }
          const std::uint64_t after = m.perm[s.src];
          if (after == s.first) {
            // The cycle closes: no row of it is smaller, and this walk rotates it. Its first
            // two records were asked for when the walk started, and its first step takes them.
            m.copy(s.held, m.row(s.first));
            m.shared(s.first).store(moved, std::memory_order_relaxed);
            s.pos = s.first;
            s.src = m.perm[s.first];
            s.now = phase::rotating;
            rotate(s);
            if (s.src == s.first) {  // a pair: done in this turn
              m.copy(m.row(s.pos), s.held);
              ended = true;
            } else {
              m.ask_for(s.src);
            }
          } else if (--s.left == 0) {
            s.pos = s.first;
            s.left = search_rows;
            s.now = phase::deferring;
            any_deferred = true;
          } else {
            s.src = after;
            m.ask_for_index(after);
          }
          break;
        }
        case phase::deferring:
          // Every walk that marks a row of this cycle marks it deferred: the stores agree.
          m.shared(s.pos).store(deferred, std::memory_order_relaxed);
          if (--s.left == 0) {
            ended = true;
          } else {
            s.pos = m.perm[s.pos];
            m.ask_for_index(s.pos);
          }
          break;
        case phase::rotating:
          if (s.src == s.first) {
            m.copy(m.row(s.pos), s.held);
            ended = true;
          } else {
            rotate(s);
            m.ask_for(s.src);
          }
          break;
      }
      if (ended && !start(s)) {
        std::swap(s, walks[--active]);  // its room for a record goes with it
        continue;
      }
      ++i;
    }
  }
  return any_deferred;
}

/// Pass 3, on one thread: the cycles longer than search_rows that no breakpoint cut (only
/// where breakpoints are few, or the permutation avoids them), each rotated from the first of
/// its rows met, one after another: each is one walk anyway.
template <typename Index>
void rotate_long_cycles(const in_place<Index>& m)
{
  std::vector<unsigned char> hold(m.r);
  for (std::uint64_t q = 0; q < m.count; ++q) {
    if (m.state[q] == moved || m.state[q] == breakpoint || m.perm[q] == q) continue;
    m.copy(hold.data(), m.row(q));
    std::uint64_t pos = q;
    for (std::uint64_t src = m.perm[pos]; src != q; src = m.perm[pos]) {
      m.ask_for(m.perm[src]);  // the step after this one's: its miss overlaps this copy
      m.copy(m.row(pos), m.row(src));
      m.state[src] = moved;
      pos = src;
    }
    m.copy(m.row(pos), hold.data());
    m.state[q] = moved;
  }
}

}  // namespace

template <typename Index>
void gather_records(const unsigned char* records, std::uint64_t count,
                    std::uint32_t record_bytes, const Index* perm, unsigned char* out)
{
  const std::uint64_t r = record_bytes;
  // A small job's batch holds the job: no 128 KiB per thread for a few rows.
  const std::uint64_t batch =
      std::clamp<std::uint64_t>(gather_batch_bytes / r, 1, std::max<std::uint64_t>(count, 1));
  const auto batches = static_cast<std::int64_t>((count + batch - 1) / batch);
#pragma omp parallel if (count >= parallel_rows)
  {
    host_buffer held{batch * r};
    auto* local = held.as<unsigned char>();
#pragma omp for schedule(static)
    for (std::int64_t b = 0; b < batches; ++b) {
      const std::uint64_t first = static_cast<std::uint64_t>(b) * batch;
      const std::uint64_t rows = std::min(batch, count - first);
      for (std::uint64_t i = 0; i < rows; ++i) {
        const std::uint64_t u = first + i;
        if (u + gather_distance < count)
          prefetch_record(records + std::uint64_t{perm[u + gather_distance]} * r, r);
        std::memcpy(local + i * r, records + std::uint64_t{perm[u]} * r, r);
      }
      stream_copy(out + first * r, local, rows * r);
    }
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
  host_buffer bytes{count};  // fresh pages are zeros: every row untouched
  const in_place<Index> m{records, count, r, perm, bytes.as<unsigned char>()};
  const bool parallel = count >= parallel_rows;

  // The breakpoints' records, saved before any walk starts: a walk that reaches a breakpoint
  // ends its piece from the saved record at once, whether or not the breakpoint's own walk
  // has overwritten the row, and no list of pieces' ends waits for a serial fix-up.
  const auto windows = static_cast<std::int64_t>(cut.windows());
#pragma omp parallel for schedule(static) if (parallel)
  for (std::int64_t w = 0; w < windows; ++w) {
    const std::uint64_t b = cut.at(static_cast<std::uint64_t>(w));
    if (b >= count) continue;
    m.state[b] = breakpoint;
    if (perm[b] != b) m.copy(keep + static_cast<std::uint64_t>(w) * r, m.row(b));
  }

  // Pass 1: from every breakpoint, walk its cycle backwards until the next breakpoint: each
  // row takes the record of the row it maps to, read before it is overwritten (every row but
  // a breakpoint is read and written by the one walk that reaches it), and the piece's last
  // row takes the saved record of the breakpoint that ends it.
  std::atomic<std::uint64_t> next{0};
#pragma omp parallel if (parallel)
  walk_pieces(m, cut, keep, next);

  // Pass 2: the cycles no breakpoint cut (short ones, mostly: a reversal's pairs).
  next = 0;
  bool any_deferred = false;
#pragma omp parallel if (parallel) reduction(|| : any_deferred)
  {
    std::vector<unsigned char> hold(walks_for(r, 1) * r);
    any_deferred = rotate_short_cycles(m, next, hold);
  }
  // Pass 3: the long ones pass 2 left.
  if (any_deferred) rotate_long_cycles(m);
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
