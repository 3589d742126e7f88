#include "pipeline/lean/permute.hpp"

#include "core/checks.hpp"

#include <gpusort/error.hpp>

#include <algorithm>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <numeric>
#include <optional>
#include <thread>

namespace gpusort::detail::lean {

namespace {

constexpr std::int32_t no_bucket = -1;

/// The whole blocks of each bucket's place: [first, end) (end <= first: none).
struct target_blocks {
  std::vector<std::uint64_t> first;
  std::vector<std::uint64_t> end;

  target_blocks(const std::vector<bucket>& buckets, std::uint64_t b)
  {
    for (const bucket& bk : buckets) {
      first.push_back((bk.source + b - 1) / b);
      end.push_back(std::max((bk.source + bk.size) / b, first.back()));
    }
  }
  [[nodiscard]] std::uint64_t count(std::size_t k) const noexcept { return end[k] - first[k]; }
  /// The bucket whose place has block p among its whole blocks, or no_bucket. Places lie in
  /// bucket order (layout_buckets), so their blocks do too.
  [[nodiscard]] std::int32_t of(std::uint64_t p) const noexcept
  {
    const auto it = std::upper_bound(first.begin(), first.end(), p);
    if (it == first.begin()) return no_bucket;
    const auto k = static_cast<std::size_t>(it - first.begin() - 1);
    return p < end[k] ? static_cast<std::int32_t>(k) : no_bucket;
  }
};

/// Every piece of every bucket, by position: they cover [0, n) after round 1.
struct piece_index {
  struct entry {
    std::uint64_t x, length;
    std::int32_t bucket;
  };
  std::vector<entry> all;

  explicit piece_index(const std::vector<bucket>& buckets)
  {
    for (std::size_t k = 0; k < buckets.size(); ++k)
      for (const piece& pc : buckets[k].pieces)
        all.push_back(entry{pc.x, pc.length, static_cast<std::int32_t>(k)});
    std::sort(all.begin(), all.end(), [](const entry& a, const entry& b) { return a.x < b.x; });
  }
  /// The bucket of the piece that holds x.
  [[nodiscard]] std::size_t bucket_at(std::uint64_t x) const
  {
    auto it = std::upper_bound(all.begin(), all.end(), x,
                               [](std::uint64_t v, const entry& e) { return v < e.x; });
    GPUSORT_EXPECTS(it != all.begin(), "a position before every piece");
    return static_cast<std::size_t>((it - 1)->bucket);
  }
  /// Calls f(entry, from, to) for the parts of pieces within [from, to).
  template <typename F>
  void within(std::uint64_t from, std::uint64_t to, F&& f) const
  {
    auto it = std::upper_bound(all.begin(), all.end(), from,
                               [](std::uint64_t x, const entry& e) { return x < e.x; });
    if (it != all.begin()) --it;
    for (; it != all.end() && it->x < to; ++it) {
      const std::uint64_t lo = std::max(from, it->x);
      const std::uint64_t hi = std::min(to, it->x + it->length);
      if (lo < hi) f(*it, lo, hi);
    }
  }
};

/// Elements of the storage a block size needs, and the blocks it has.
struct block_choice {
  std::uint64_t b{};
  std::vector<std::uint64_t> mixed;  ///< blocks holding a piece boundary (or the data's end)
  std::vector<std::uint64_t> pure;   ///< per bucket, its pure blocks
};

/// The largest block size (a power of two from the plan's up to one that divides the chunk)
/// whose mixed and surplus blocks fit the storage with spares for the movers.
block_choice choose_block(const plan& p, const std::vector<bucket>& buckets,
                          std::uint64_t storage, unsigned movers, std::uint64_t element_bytes)
{
  // Past 1 MiB a block copies no faster, and the storage fits fewer of them.
  const std::uint64_t largest =
      std::max(p.block, std::bit_floor(std::max<std::uint64_t>((1U << 20) / element_bytes, 1)));
  block_choice best;
  for (std::uint64_t b = p.block; b <= largest && p.chunk % b == 0; b *= 2) {
    block_choice c{.b = b};
    c.pure.assign(buckets.size(), 0);
    std::uint64_t last_mixed = ~std::uint64_t{0};
    const auto mark = [&](std::uint64_t x) {
      if (x % b == 0 || x / b == last_mixed) return;
      last_mixed = x / b;
      c.mixed.push_back(last_mixed);
    };
    piece_index index{buckets};
    for (const piece_index::entry& e : index.all) {
      mark(e.x);
      const std::uint64_t lo = (e.x + b - 1) / b;
      const std::uint64_t hi = (e.x + e.length) / b;
      if (hi > lo) c.pure[static_cast<std::size_t>(e.bucket)] += hi - lo;
    }
    mark(p.n);
    const target_blocks targets{buckets, b};
    std::uint64_t surplus = 0;
    for (std::size_t k = 0; k < buckets.size(); ++k)
      surplus += c.pure[k] > targets.count(k) ? c.pure[k] - targets.count(k) : 0;
    const std::uint64_t have = (p.n + p.room) / b - (storage + b - 1) / b;
    const std::uint64_t need = c.mixed.size() + surplus + 2 * std::uint64_t{movers} + 4;
    if (need > have) break;
    best = std::move(c);
  }
  GPUSORT_EXPECTS(best.b != 0, "the storage cannot take the plan's blocks");
  return best;
}

/// A fragment of a bucket in the storage: `length` elements at x that round 1 left at origin.
struct fragment {
  std::uint64_t origin, x, length;
};

/// Runs body(i) for i in [0, count) from every core; the first exception is rethrown.
template <typename F>
void parallel_each(std::uint64_t count, F&& body)
{
  std::exception_ptr failure;
#pragma omp parallel
  {
    bounce_buffer bounce;
#pragma omp for schedule(dynamic)
    for (std::int64_t i = 0; i < static_cast<std::int64_t>(count); ++i) {
      try {
        body(static_cast<std::uint64_t>(i), bounce);
      } catch (...) {
#pragma omp critical(lean_permute_failure)
        if (!failure) failure = std::current_exception();
      }
    }
  }
  if (failure) std::rethrow_exception(failure);
}

/// A bucket's blocks that are not yet in its place: the pure blocks round 1 left outside it,
/// in order, as ranges with a cursor.
struct block_sequence {
  std::vector<run> ranges;  ///< block indices [offset, offset + length)
  std::size_t at{};         ///< the range the cursor is in
  std::uint64_t done{};     ///< blocks of it the cursor passed
  [[nodiscard]] std::uint64_t size() const noexcept
  {
    std::uint64_t n = 0;
    for (const run& r : ranges) n += r.length;
    return n;
  }
  /// Drops the last `count` blocks (they go to the storage instead) and returns them.
  std::vector<std::uint64_t> drop_last(std::uint64_t count)
  {
    std::vector<std::uint64_t> dropped;
    while (count > 0 && !ranges.empty()) {
      run& r = ranges.back();
      const std::uint64_t take = std::min(count, r.length);
      for (std::uint64_t i = 0; i < take; ++i) dropped.push_back(r.offset + r.length - 1 - i);
      r.length -= take;
      count -= take;
      if (r.length == 0) ranges.pop_back();
    }
    return dropped;
  }
  std::optional<std::uint64_t> next()
  {
    while (at < ranges.size()) {
      if (done < ranges[at].length) return ranges[at].offset + done++;
      ++at;
      done = 0;
    }
    return std::nullopt;
  }
};

/// The movers' shared state (permute's step 2). Per block two bits, whether it holds live
/// elements (mirrored to the journal) and whether they are home; per bucket the cursor over its
/// misplaced blocks, the blocks it parked, and its place's empty blocks as they appear (a freed
/// block is most often filled at once by the mover that freed it, so the lists stay short).
class block_permutation {
 public:
  block_permutation(const space& s, journal& j, job_context& ctx, const target_blocks& targets,
                    const piece_index& pieces, std::vector<bool> live, std::vector<bool> home,
                    std::vector<block_sequence> sequences, std::vector<std::uint64_t> spares,
                    std::uint64_t spare_from, std::uint64_t b,
                    std::vector<std::vector<placed>>* parts)
      : s_{s},
        j_{j},
        ctx_{ctx},
        targets_{targets},
        pieces_{pieces},
        live_{std::move(live)},
        home_{std::move(home)},
        sequences_{std::move(sequences)},
        spares_{std::move(spares)},
        spare_from_{spare_from},
        b_{b},
        parts_{parts},
        holes_(targets.first.size()),
        parked_(targets.first.size())
  {
    for (std::size_t k = 0; k < holes_.size(); ++k) {
      for (std::uint64_t q = targets_.first[k]; q < targets_.end[k]; ++q)
        if (!live_[q]) holes_[k].push_back(q);
      left_ += sequences_[k].size();
      ready_.push_back(k);
    }
  }

  /// A mover's loop; `slot` is its journal slot. Never throws: the first failure stops every
  /// mover and waits in rethrow().
  void run(std::uint64_t slot) noexcept
  {
    try {
      run_moves(slot);
    } catch (...) {
      const std::lock_guard lock{mutex_};
      fail(std::current_exception());
    }
  }

  void rethrow() const
  {
    if (failure_) std::rethrow_exception(failure_);
  }
  [[nodiscard]] std::uint64_t moves() const noexcept { return moves_; }
  [[nodiscard]] std::uint64_t parks() const noexcept { return parks_; }
  [[nodiscard]] const std::vector<bool>& home() const noexcept { return home_; }

 private:
  /// A block that waits in a spare: where it is, and where round 1 left it.
  struct parked_block {
    std::uint64_t at, origin;
  };
  struct move {
    std::uint64_t from, to;
    std::size_t bucket;
    std::uint64_t origin;  ///< where round 1 left the block
    bool park;             ///< into a spare, not home
  };

  void run_moves(std::uint64_t slot)
  {
    bounce_buffer bounce;
    std::unique_lock lock{mutex_};
    std::optional<move> next;
    while (true) {
      if (!next) next = pick(lock);
      if (!next) return;
      const move mv = *next;
      ++in_flight_;
      lock.unlock();
      try {
        j_.set_slot(slot, move_slot{.from = mv.from, .to = mv.to, .state = 1});
        copy_elements(s_, mv.to * b_, mv.from * b_, b_, bounce);
        j_.set_slot(slot, move_slot{.from = mv.from, .to = mv.to, .state = 2});
      } catch (...) {
        lock.lock();
        --in_flight_;
        fail(std::current_exception());
        return;
      }
      ctx_.add_done(b_);
      lock.lock();
      next = apply(mv, slot);
    }
  }

  void fail(std::exception_ptr e)
  {
    if (!failure_) failure_ = std::move(e);
    stop_ = true;
    changed_.notify_all();
  }

  /// The next misplaced block of bucket k: a parked one first (it frees a spare), else the
  /// cursor's next that still waits where round 1 left it.
  std::optional<parked_block> take_source(std::size_t k)
  {
    if (!parked_[k].empty()) {
      const parked_block p = parked_[k].back();
      parked_[k].pop_back();
      return p;
    }
    while (const std::optional<std::uint64_t> p = sequences_[k].next())
      if (live_[*p] && !home_[*p]) return parked_block{*p, *p};
    return std::nullopt;
  }
  /// Puts a block take_source gave back: the cursor passed it, so it waits with the parked.
  void give_back(std::size_t k, const parked_block& p) { parked_[k].push_back(p); }

  /// The next move, waiting while other movers' moves may open one; nullopt when done.
  std::optional<move> pick(std::unique_lock<std::mutex>& lock)
  {
    for (;;) {
      if (stop_) return std::nullopt;
      try {
        ctx_.check();
      } catch (...) {
        fail(std::current_exception());
        return std::nullopt;
      }
      while (!ready_.empty()) {
        const std::size_t k = ready_.front();
        ready_.pop_front();
        if (holes_[k].empty()) continue;
        const std::optional<parked_block> from = take_source(k);
        if (!from) continue;
        const std::uint64_t to = holes_[k].back();
        holes_[k].pop_back();
        ready_.push_back(k);  // it may have more
        return move{from->at, to, k, from->origin, false};
      }
      if (left_ == 0 && in_flight_ == 0) {
        stop_ = true;
        changed_.notify_all();
        return std::nullopt;
      }
      if (in_flight_ > 0 || left_ == 0) {
        changed_.wait_for(lock, std::chrono::milliseconds{20});
        continue;
      }
      // Misplaced blocks and no empty block in their places, nothing in flight: a cycle. Park
      // a block that waits in the place of a bucket with misplaced blocks; its block becomes
      // that bucket's, and the chain that starts there ends by taking the parked block home.
      try {
        return park();
      } catch (...) {
        fail(std::current_exception());
        return std::nullopt;
      }
    }
  }

  move park()
  {
    for (std::size_t k = 0; k < holes_.size(); ++k) {
      const std::optional<parked_block> src = take_source(k);
      if (!src) continue;
      give_back(k, *src);
      for (std::uint64_t q = targets_.first[k]; q < targets_.end[k]; ++q) {
        if (!live_[q] || home_[q]) continue;
        GPUSORT_EXPECTS(!spares_.empty(), "the permutation ran out of spare blocks");
        const std::uint64_t spare = spares_.back();
        spares_.pop_back();
        ++parks_;
        // A block away from home is where round 1 left it, in its piece.
        return move{q, spare, pieces_.bucket_at(q * b_), q, true};
      }
    }
    throw logic_error{"the permutation found misplaced blocks and no way to move them"};
  }

  /// Records a finished move (the journal's map first, then the slot) and returns the move
  /// that fills the block it freed, where one exists.
  std::optional<move> apply(const move& mv, std::uint64_t slot)
  {
    live_[mv.to] = true;
    live_[mv.from] = false;
    j_.set_block_live(mv.to, true);
    j_.set_block_live(mv.from, false);
    j_.set_slot(slot, move_slot{.from = mv.from, .to = mv.to, .state = 0});
    --in_flight_;
    ++moves_;
    if (mv.park) {
      parked_[mv.bucket].push_back(parked_block{mv.to, mv.origin});
      ready_.push_back(mv.bucket);
    } else {
      home_[mv.to] = true;
      --left_;
      if (parts_ != nullptr)
        (*parts_)[mv.bucket].push_back(placed{mv.origin * b_, mv.to * b_, b_});
    }
    if (mv.from >= spare_from_) spares_.push_back(mv.from);
    changed_.notify_all();
    const std::int32_t t = targets_.of(mv.from);
    if (t == no_bucket) return std::nullopt;
    const auto k = static_cast<std::size_t>(t);
    if (!stop_)
      if (const std::optional<parked_block> fill = take_source(k))
        return move{fill->at, mv.from, k, fill->origin, false};
    holes_[k].push_back(mv.from);
    ready_.push_back(k);
    return std::nullopt;
  }

  const space& s_;
  journal& j_;
  job_context& ctx_;
  const target_blocks& targets_;
  const piece_index& pieces_;
  std::vector<bool> live_;
  std::vector<bool> home_;
  std::vector<block_sequence> sequences_;
  std::vector<std::uint64_t> spares_;
  std::uint64_t spare_from_;  ///< blocks from here are the storage's
  std::uint64_t b_;
  std::vector<std::vector<placed>>* parts_;
  std::vector<std::vector<std::uint64_t>> holes_;
  std::vector<std::vector<parked_block>> parked_;
  std::deque<std::size_t> ready_;
  std::uint64_t left_{};  ///< misplaced blocks not yet home
  std::uint64_t in_flight_{};
  std::uint64_t moves_{};
  std::uint64_t parks_{};
  bool stop_{};
  std::exception_ptr failure_;
  std::mutex mutex_;
  std::condition_variable changed_;
};

}  // namespace

permutation_stats permute(const plan& p, const space& s, const std::vector<bucket>& buckets,
                          std::uint64_t storage, journal& j, job_context& ctx, unsigned movers,
                          std::vector<std::vector<placed>>* parts)
{
  const auto start = std::chrono::steady_clock::now();
  movers = std::clamp<unsigned>(movers, 1, static_cast<unsigned>(j.movers()));
  const block_choice choice =
      choose_block(p, buckets, storage, movers, std::uint64_t{s.key_bytes} + s.value_bytes);
  const std::uint64_t b = choice.b;
  const std::uint64_t blocks = (p.n + p.room) / b;  // whole blocks; a short last one is unused
  const target_blocks targets{buckets, b};
  const piece_index index{buckets};
  permutation_stats stats{.block = b};
  if (parts != nullptr) parts->assign(buckets.size(), {});

  // 1. Each bucket's pure blocks: home where its place has them, else in its sequence; a
  //    bucket's surplus (blocks beyond its place's whole blocks) leaves its sequence's end for
  //    the storage, with the mixed blocks.
  std::vector<bool> live(blocks, false);
  std::vector<bool> home(blocks, false);
  std::vector<block_sequence> sequences(buckets.size());
  for (std::size_t k = 0; k < buckets.size(); ++k) {
    for (const piece& pc : buckets[k].pieces) {
      const std::uint64_t lo = (pc.x + b - 1) / b;
      const std::uint64_t hi = (pc.x + pc.length) / b;
      for (std::uint64_t q = lo; q < hi;) {
        const bool at_home = targets.of(q) == static_cast<std::int32_t>(k);
        std::uint64_t e = q + 1;
        while (e < hi && (targets.of(e) == static_cast<std::int32_t>(k)) == at_home) ++e;
        for (std::uint64_t x = q; x < e; ++x) live[x] = true;
        if (at_home) {
          for (std::uint64_t x = q; x < e; ++x) home[x] = true;
          if (parts != nullptr) (*parts)[k].push_back(placed{q * b, q * b, (e - q) * b});
        } else {
          sequences[k].ranges.push_back(run{q, e - q});
        }
        q = e;
      }
    }
  }
  std::vector<std::uint64_t> evacuate = choice.mixed;
  for (std::size_t k = 0; k < buckets.size(); ++k) {
    const std::uint64_t surplus =
        choice.pure[k] > targets.count(k) ? choice.pure[k] - targets.count(k) : 0;
    for (const std::uint64_t q : sequences[k].drop_last(surplus)) {
      evacuate.push_back(q);
      live[q] = false;
    }
  }
  std::sort(evacuate.begin(), evacuate.end());
  // The evacuated elements, bucket by bucket in origin order, packed into the storage.
  std::vector<std::vector<fragment>> frags(buckets.size());
  std::uint64_t used = 0;
  const std::uint64_t storage_begin = (storage + b - 1) / b * b;
  for (const std::uint64_t q : evacuate)
    index.within(q * b, std::min((q + 1) * b, p.n),
                 [&](const piece_index::entry& e, std::uint64_t lo, std::uint64_t hi) {
                   frags[static_cast<std::size_t>(e.bucket)].push_back(
                       fragment{lo, storage_begin + used, hi - lo});
                   used += hi - lo;
                 });
  std::vector<const fragment*> copies;
  for (const std::vector<fragment>& f : frags)
    for (const fragment& x : f) copies.push_back(&x);
  j.set_phase(phase::evacuating);
  parallel_each(copies.size(), [&](std::uint64_t i, bounce_buffer& bounce) {
    copy_elements(s, copies[i]->x, copies[i]->origin, copies[i]->length, bounce);
  });
  ctx.add_done(used);
  stats.evacuated = used;
  // The journal's map now, while it still counts the chunks as round 1 left them; the phase
  // makes it count.
  j.set_blocks(b, blocks);
  for (std::uint64_t q = 0; q < blocks; ++q) j.set_block_live(q, live[q]);
  j.set_storage(storage_begin, used);
  j.set_phase(phase::permuting);
  stats.evacuate_seconds = seconds_since(start);

  // 2. Whole blocks home.
  const std::uint64_t spare_from = (storage_begin + used + b - 1) / b;
  std::vector<std::uint64_t> spares;
  for (std::uint64_t q = blocks; q-- > spare_from;) spares.push_back(q);
  block_permutation perm{s,       j,        ctx,         targets, index, std::move(live),
                         std::move(home), std::move(sequences), std::move(spares),
                         spare_from, b, parts};
  {
    std::vector<std::jthread> threads;
    for (unsigned i = 1; i < movers; ++i) threads.emplace_back([&perm, i] { perm.run(i); });
    perm.run(0);
  }
  perm.rethrow();
  stats.moves = perm.moves();
  stats.parked = perm.parks();

  stats.permute_seconds = seconds_since(start) - stats.evacuate_seconds;

  // 3. The fragments fill what the blocks left of each place: its edges and empty blocks.
  j.set_phase(phase::cleaning);
  const std::vector<bool>& at_home = perm.home();
  parallel_each(buckets.size(), [&](std::uint64_t k, bounce_buffer& bounce) {
    const bucket& bk = buckets[k];
    std::vector<run> holes;
    const auto hole = [&](std::uint64_t from, std::uint64_t to) {
      if (to > from) holes.push_back(run{from, to - from});
    };
    const std::uint64_t end = bk.source + bk.size;
    if (targets.count(k) == 0) {
      hole(bk.source, end);
    } else {
      hole(bk.source, targets.first[k] * b);
      for (std::uint64_t q = targets.first[k]; q < targets.end[k]; ++q)
        if (!at_home[q]) hole(q * b, (q + 1) * b);
      hole(targets.end[k] * b, end);
    }
    std::vector<placed> here;
    std::size_t h = 0;
    std::uint64_t h_used = 0;
    for (const fragment& f : frags[k]) {
      std::uint64_t done = 0;
      while (done < f.length) {
        GPUSORT_EXPECTS(h < holes.size(), "a bucket's fragments exceed its place's holes");
        const std::uint64_t len = std::min(f.length - done, holes[h].length - h_used);
        const std::uint64_t to = holes[h].offset + h_used;
        copy_elements(s, to, f.x + done, len, bounce);
        here.push_back(placed{f.origin + done, to, len});
        done += len;
        h_used += len;
        if (h_used == holes[h].length) {
          ++h;
          h_used = 0;
        }
      }
    }
    GPUSORT_EXPECTS(h == holes.size(), "a bucket's place has holes its fragments do not fill");
    if (parts == nullptr) return;
    std::vector<placed>& out = (*parts)[k];
    out.insert(out.end(), here.begin(), here.end());
    std::sort(out.begin(), out.end(),
              [](const placed& a, const placed& c) { return a.origin < c.origin; });
    std::vector<placed> merged;
    for (const placed& pl : out) {
      if (!merged.empty() && merged.back().origin + merged.back().length == pl.origin &&
          merged.back().x + merged.back().length == pl.x)
        merged.back().length += pl.length;
      else
        merged.push_back(pl);
    }
    out = std::move(merged);
  });
  j.set_phase(phase::round2);
  stats.seconds = seconds_since(start);
  stats.cleanup_seconds = stats.seconds - stats.evacuate_seconds - stats.permute_seconds;
  return stats;
}

}  // namespace gpusort::detail::lean
