#include "pipeline/lean/gather.hpp"

#include "core/checks.hpp"
#include "pipeline/executor.hpp"

#include <gpusort/error.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <limits>
#include <mutex>
#include <queue>
#include <thread>

namespace gpusort::detail::lean {

namespace {

constexpr std::uint64_t nobody = std::numeric_limits<std::uint64_t>::max();

/// The blocks of round 1 and the blocks of the space, shared by the evictor, the devices'
/// prepare and ready hooks and the written hook. Task t is bucket count - 1 - t.
///
/// Blocks: round 1's output [0, n) is cut into blocks o of `b` elements (the last may be
/// short), each lying at a block q of the space (where_[o], initially o); the space's blocks
/// at and above `frontier_` are reserved for the places being written (cleared ones, and the
/// one being cleared); a block below it whose occupant's elements are all written is free.
class gatherer {
 public:
  gatherer(const plan& p, const space& s, const std::vector<bucket>& buckets, journal& j,
           job_context& ctx, unsigned movers)
      : p_{p},
        s_{s},
        buckets_{buckets},
        j_{j},
        ctx_{ctx},
        movers_{std::max(movers, 1U)},
        b_{p.block},
        blocks_{(p.n + p.block - 1) / p.block},
        space_blocks_{(p.n + p.room) / p.block},
        where_(blocks_),
        occupant_(space_blocks_ + 1, nobody),
        lowest_(blocks_, nobody),
        cleared_{buckets.size()},
        reads_(buckets.size()),
        written_(buckets.size(), false)
  {
    GPUSORT_EXPECTS(p.room % b_ == 0, "the room is a whole number of blocks");
    for (std::uint64_t o = 0; o < blocks_; ++o) {
      where_[o] = o;
      occupant_[o] = o;
    }
    // Each block's lowest bucket: its elements are all written once that one is.
    for (std::uint64_t k = 0; k < buckets.size(); ++k)
      for (const piece& pc : buckets[k].pieces)
        for_each_block_run(run{pc.x, pc.length}, b_,
                           [&](std::uint64_t o, std::uint64_t, std::uint64_t) {
                             lowest_[o] = std::min(lowest_[o], k);
                           });
    by_lowest_first_.assign(buckets.size() + 1, 0);
    for (std::uint64_t o = 0; o < blocks_; ++o) {
      GPUSORT_EXPECTS(lowest_[o] < buckets.size(), "a block of round 1 in no bucket");
      ++by_lowest_first_[lowest_[o] + 1];
    }
    for (std::size_t k = 0; k < buckets.size(); ++k) by_lowest_first_[k + 1] += by_lowest_first_[k];
    by_lowest_.resize(blocks_);
    std::vector<std::uint64_t> at(by_lowest_first_.begin(), by_lowest_first_.end() - 1);
    for (std::uint64_t o = 0; o < blocks_; ++o) by_lowest_[at[lowest_[o]]++] = o;
    // Free at first: the whole blocks beyond round 1's output (the top of the space: the room
    // that round 1 moved every chunk down by).
    for (std::uint64_t q = blocks_; q < space_blocks_; ++q) free_.push(q);
    frontier_ = space_blocks_ + 1;
  }

  /// The evictor: clears the places of the buckets from the last down, each once enough free
  /// blocks lie below it. Returns when every place is cleared or stop() was called.
  void evict_all()
  {
    for (std::uint64_t k = buckets_.size(); k-- > 0;) {
      if (!clear(k)) return;
    }
  }

  /// prepare(t): bucket k's slices where its pieces lie now, once every place above it is
  /// cleared (so none of them lies where an earlier task writes); the task writes after the
  /// earlier ones that read in its place (all of them written: task_queue's prefix), which on
  /// one device is at once and on several lets a device write while another still reads
  /// elsewhere.
  void prepare(std::size_t t, chunk_task& task)
  {
    const std::uint64_t k = buckets_.size() - 1 - t;
    std::unique_lock lock{m_};
    wait(lock, [&] { return cleared_ <= k + 1; });
    task.slices.clear();
    task.from_alt.clear();
    std::vector<run>& reads = reads_[t];
    std::uint64_t last_end = nobody;
    for (const piece& pc : buckets_[k].pieces)
      for_each_block_run(run{pc.x, pc.length}, b_,
                         [&](std::uint64_t o, std::uint64_t from, std::uint64_t length) {
                           const std::uint64_t x = where_[o] * b_ + from;
                           const std::uint8_t alt = x < s_.room ? 1 : 0;
                           if (x == last_end && task.from_alt.back() == alt) {
                             task.slices.back().length += length;
                             reads.back().length += length;
                           } else {
                             task.slices.push_back(run{s_.offset_in_part(x), length});
                             task.from_alt.push_back(alt);
                             reads.push_back(run{x, length});
                           }
                           last_end = x + length;
                         });
    const std::uint64_t begin = s_.room + buckets_[k].out;
    const std::uint64_t end = begin + buckets_[k].size;
    task.write_after = 0;
    for (std::size_t e = t; e-- > written_prefix_;) {
      if (written_[e]) continue;
      const bool meets = std::any_of(reads_[e].begin(), reads_[e].end(), [&](const run& r) {
        return r.offset < end && begin < r.offset + r.length;
      });
      if (meets) {
        task.write_after = e + 1;
        break;
      }
    }
  }

  /// ready(t): bucket k's place is cleared.
  void ready(std::size_t t)
  {
    const std::uint64_t k = buckets_.size() - 1 - t;
    std::unique_lock lock{m_};
    wait(lock, [&] { return cleared_ <= k; });
  }

  /// written(t): bucket k is in its place. Once every bucket above it is too (devices may write
  /// out of order), the blocks whose lowest bucket it is are free.
  void written(std::size_t t)
  {
    j_.bucket_written(buckets_.size() - 1 - t);
    {
      const std::lock_guard lock{m_};
      written_[t] = true;
      std::vector<run>().swap(reads_[t]);
      for (; written_prefix_ < written_.size() && written_[written_prefix_]; ++written_prefix_) {
        const std::uint64_t k = buckets_.size() - 1 - written_prefix_;
        for (std::uint64_t i = by_lowest_first_[k]; i < by_lowest_first_[k + 1]; ++i) {
          const std::uint64_t q = where_[by_lowest_[i]];
          occupant_[q] = nobody;
          if (q < frontier_ && q < space_blocks_) free_.push(q);
        }
      }
    }
    changed_.notify_all();
  }

  /// Wakes every wait to stop (a device or the evictor failed).
  void stop()
  {
    {
      const std::lock_guard lock{m_};
      stopped_ = true;
    }
    changed_.notify_all();
  }

  [[nodiscard]] const gather_stats& stats() const noexcept { return stats_; }

 private:
  struct move {
    std::uint64_t o, from, to;
  };

  /// Waits under `lock` until `done()`, checking for cancellation and stop() every 20 ms. The
  /// lock is held whenever it returns or throws: a caller that catches may read the state
  /// (clear() asks stopped_ whether the wait ended for a stop; a cancellation thrown by the
  /// check below had left the lock released, and that read raced stop(): tsan, lean_sanitized).
  template <typename F>
  void wait(std::unique_lock<std::mutex>& lock, F&& done)
  {
    while (!done()) {
      if (stopped_) throw cancelled{"the sort was stopped because another part of it failed"};
      changed_.wait_for(lock, std::chrono::milliseconds{20});
      if (stopped_) throw cancelled{"the sort was stopped because another part of it failed"};
      lock.unlock();
      try {
        ctx_.check();
      } catch (...) {
        lock.lock();
        throw;
      }
      lock.lock();
    }
  }

  /// Elements of round 1's block o.
  [[nodiscard]] std::uint64_t length_of(std::uint64_t o) const noexcept
  {
    return std::min(b_, p_.n - o * b_);
  }

  /// Clears bucket k's place: every block there whose elements are not all read moves to the
  /// lowest free block below it. False when stopped.
  bool clear(std::uint64_t k)
  {
    const bucket& bk = buckets_[k];
    const std::uint64_t begin = s_.room + bk.out;
    const std::uint64_t qa = begin / b_;
    const std::uint64_t qz = std::min((begin + bk.size + b_ - 1) / b_, space_blocks_ + 1);
    std::vector<move> pending;
    {
      std::unique_lock lock{m_};
      frontier_ = std::min(frontier_, qa);
      for (std::uint64_t q = qa; q < qz; ++q) {
        const std::uint64_t o = occupant_[q];
        // A block whose lowest bucket is above k is read (or being read by an earlier task,
        // which writes before this one): it may be written over.
        if (o != nobody && lowest_[o] <= k) pending.push_back(move{o, q, nobody});
      }
    }
    std::size_t done = 0;
    while (done < pending.size()) {
      // Targets for as many as there are free blocks below the place, then their copies.
      std::size_t batch_end = done;
      {
        std::unique_lock lock{m_};
        const auto start = std::chrono::steady_clock::now();
        try {
          wait(lock, [&] {
            while (!free_.empty() && free_.top() >= frontier_) free_.pop();
            return !free_.empty();
          });
        } catch (const cancelled&) {
          if (stopped_) return false;
          throw;
        }
        stats_.wait_seconds += seconds_since(start);
        while (batch_end < pending.size() && !free_.empty()) {
          const std::uint64_t q = free_.top();
          free_.pop();
          if (q >= frontier_) continue;
          pending[batch_end].to = q;
          occupant_[q] = pending[batch_end].o;
          ++batch_end;
        }
      }
      copy_moves(pending, done, batch_end);
      {
        const std::lock_guard lock{m_};
        for (std::size_t i = done; i < batch_end; ++i) {
          const move& mv = pending[i];
          j_.set_where(mv.o, mv.to);
          where_[mv.o] = mv.to;
          occupant_[mv.from] = nobody;
          stats_.moved_elements += length_of(mv.o);
        }
        stats_.moved_blocks += batch_end - done;
      }
      done = batch_end;
    }
    {
      const std::lock_guard lock{m_};
      cleared_ = k;
    }
    changed_.notify_all();
    return true;
  }

  /// Copies moves [first, last) from every mover.
  void copy_moves(const std::vector<move>& moves, std::size_t first, std::size_t last)
  {
    const auto start = std::chrono::steady_clock::now();
    std::exception_ptr failure;
    const auto count = static_cast<std::int64_t>(last - first);
#pragma omp parallel num_threads(movers_) if (count > 1)
    {
      bounce_buffer bounce;
#pragma omp for schedule(dynamic)
      for (std::int64_t i = 0; i < count; ++i) {
        try {
          const move& mv = moves[first + static_cast<std::size_t>(i)];
          copy_elements(s_, mv.to * b_, mv.from * b_, length_of(mv.o), bounce);
        } catch (...) {
#pragma omp critical(lean_gather_failure)
          if (!failure) failure = std::current_exception();
        }
      }
    }
    if (failure) std::rethrow_exception(failure);
    stats_.move_seconds += seconds_since(start);
  }

  const plan& p_;
  const space& s_;
  const std::vector<bucket>& buckets_;
  journal& j_;
  job_context& ctx_;
  unsigned movers_;
  std::uint64_t b_;
  std::uint64_t blocks_;        ///< round 1's blocks
  std::uint64_t space_blocks_;  ///< whole blocks of the space (a short last one is never free)

  std::mutex m_;
  std::condition_variable changed_;
  std::vector<std::uint64_t> where_;     ///< round 1's block o lies at block where_[o]
  std::vector<std::uint64_t> occupant_;  ///< the block of round 1 at block q, or nobody
  std::vector<std::uint64_t> lowest_;    ///< the lowest bucket with elements in block o
  std::vector<std::uint64_t> by_lowest_first_, by_lowest_;  ///< blocks by lowest bucket
  std::priority_queue<std::uint64_t, std::vector<std::uint64_t>, std::greater<>> free_;
  std::uint64_t frontier_{};
  std::uint64_t cleared_;  ///< places of buckets [cleared_, count) are cleared
  std::vector<std::vector<run>> reads_;  ///< x ranges each task reads, until it is written
  std::vector<bool> written_;            ///< tasks written
  std::size_t written_prefix_{};         ///< tasks [0, this) are written
  bool stopped_{};
  gather_stats stats_;
};

}  // namespace

gather_stats gather_round(const plan& p, const space& s, const std::vector<bucket>& buckets,
                          journal& j, const element_layout& layout,
                          const std::vector<device*>& devices, job_context& ctx,
                          std::uint64_t reserve, unsigned movers)
{
  // The journal's record of the pieces, then the phase that makes its block places count.
  std::vector<run> pieces;
  std::vector<std::uint64_t> first{0};
  for (const bucket& b : buckets) {
    for (const piece& pc : b.pieces) pieces.push_back(run{pc.x, pc.length});
    first.push_back(pieces.size());
  }
  j.set_pieces(pieces, first);
  std::vector<run>().swap(pieces);
  j.start_gathering();

  gatherer g{p, s, buckets, j, ctx, movers};
  // One task per bucket, the last first; its slices come when a device takes it.
  std::vector<chunk_task> tasks(buckets.size());
  std::size_t most_slices = 1;
  for (std::size_t t = 0; t < tasks.size(); ++t) {
    const bucket& b = buckets[buckets.size() - 1 - t];
    chunk_task& task = tasks[t];
    task.src_keys = s.keys;
    task.src_values = s.value_bytes == 0 ? nullptr : s.values;
    task.alt_src_keys = s.room_keys;
    task.alt_src_values = s.value_bytes == 0 ? nullptr : s.room_values;
    task.count = b.size;
    task.dst_keys = s.keys + b.out * s.key_bytes;
    task.dst_values = s.value_bytes == 0 ? nullptr : s.values + b.out * s.value_bytes;
    // Each of its pieces' blocks may lie apart: a slice per block, and one more per piece.
    most_slices = std::max<std::size_t>(most_slices,
                                        b.size / p.block + 2 * b.pieces.size() + 2);
  }

  std::exception_ptr evictor_failure;
  std::jthread evictor{[&] {
    try {
      g.evict_all();
    } catch (const cancelled&) {
      g.stop();  // the job was cancelled or a device failed: that one says why
    } catch (...) {
      evictor_failure = std::current_exception();
      g.stop();
      ctx.abort();
    }
  }};
  try {
    run_round(2, 2, std::move(tasks), layout, devices, ctx, reserve,
              task_hooks{.written = [&g](std::size_t t) { g.written(t); },
                         .prepare = [&g](std::size_t t, chunk_task& task) { g.prepare(t, task); },
                         .ready = [&g](std::size_t t) { g.ready(t); },
                         .most_slices = most_slices});
  } catch (...) {
    g.stop();
    evictor.join();
    if (evictor_failure) std::rethrow_exception(evictor_failure);
    throw;
  }
  evictor.join();
  if (evictor_failure) std::rethrow_exception(evictor_failure);
  return g.stats();
}

}  // namespace gpusort::detail::lean
