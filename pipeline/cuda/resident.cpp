#include "pipeline/cuda/resident.hpp"

#include "core/checks.hpp"
#include "core/log.hpp"
#include "core/cuda/chunk_ops.cuh"
#include "core/cuda/merge_ops.cuh"
#include "core/cuda/ordered_keys.cuh"
#include "pipeline/cuda/resources.hpp"
#include "pipeline/cuda/stage_totals.hpp"
#include "pipeline/cuda/staging.hpp"

#include <gpusort/error.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <exception>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace gpusort::detail {

namespace {

/// How many times the final stage of an in-place job runs again after a failure before the job
/// fails: a transient error (an injected one, a copy that timed out) passes on the first.
constexpr int store_attempts = 2;

std::string message_of(const std::exception_ptr& e)
{
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
    return "an unknown exception";
  }
}

/// Rethrows `e` as its own type, one of `Error, Rest...`, with `note` after its message; any
/// other exception (a progress callback's own) as it was.
template <typename Error, typename... Rest>
[[noreturn]] void rethrow_noted(const std::exception_ptr& e, const std::string& note)
{
  try {
    std::rethrow_exception(e);
  } catch (const Error& x) {
    throw Error{x.what() + note};
  } catch (...) {
    if constexpr (sizeof...(Rest) == 0) {
      throw;
    } else {
      rethrow_noted<Rest...>(e, note);
    }
  }
}

/// Rethrows `e`, the first failure of a final stage that could not be done again (`why`), with
/// a note that the in-place arrays are torn. out_of_memory becomes a cuda_error: the engine
/// answers out_of_memory by sorting the arrays again in smaller chunks, which would sort the
/// torn arrays into a wrong result that verifies as sorted.
[[noreturn]] void rethrow_torn(const std::exception_ptr& e, const std::string& why)
{
  const std::string note = " (" + why +
                           ": the arrays sorted in place hold part of the sorted result and "
                           "part of the original, some pairs twice and some lost)";
  try {
    std::rethrow_exception(e);
  } catch (const out_of_memory& x) {
    throw cuda_error{x.what() + note};
  } catch (...) {
    rethrow_noted<cuda_error, io_error, cancelled, invalid_argument, config_error, logic_error>(
        e, note);
  }
}

/// Timing events around each stage's work on one GPU, for sort_options::profile.
class timeline {
 public:
  explicit timeline(bool on) : on_{on} {}

  /// At the job's start, with `s` idle: the event and the host clock mark the same moment.
  void origin(cudaStream_t s, const job_context& ctx)
  {
    if (!on_) return;
    origin_.record(s);
    origin_seconds_ = ctx.elapsed();
  }
  /// Runs `issue` (which queues work on `s`) between two timing events of `st`.
  template <typename F>
  void span(gpu_stage st, cudaStream_t s, std::uint64_t bytes, F&& issue)
  {
    if (!on_) {
      issue();
      return;
    }
    marks_.push_back({st, bytes, cuda::cuda_event{cuda::event_timing::enabled},
                      cuda::cuda_event{cuda::event_timing::enabled}});
    marks_.back().begin.record(s);
    issue();
    marks_.back().end.record(s);
    marks_.back().closed = true;
  }
  /// Once the GPU is idle: the stages' busy time and span, into the job's profile. A span that
  /// a failure cut short (its end never recorded) before the final stage ran again is left out.
  void report(job_context& ctx, const std::string& device) const
  {
    if (!on_) return;
    stage_totals totals;
    for (const mark& m : marks_)
      if (m.closed)
        totals.add(m.st, cuda::elapsed_ms(origin_, m.begin) / 1e3,
                   cuda::elapsed_ms(origin_, m.end) / 1e3, m.bytes);
    totals.report(ctx, device, 1, origin_seconds_);
  }

 private:
  struct mark {
    gpu_stage st;
    std::uint64_t bytes;
    cuda::cuda_event begin, end;
    bool closed{};
  };
  bool on_;
  cuda::cuda_event origin_{cuda::event_timing::enabled};
  double origin_seconds_{};
  std::vector<mark> marks_;
};

/// A sorted run: a piece of a GPU's share, where it lies in the GPU's runs.
struct sorted_run {
  std::uint64_t offset;
  std::uint64_t length;
};

/// One GPU's share of the job, where its runs are, and the output ranges it merges and stores.
struct part {
  cuda_device* dev;
  resident_buffers* buf;
  std::uint64_t first;  ///< of the input share and of the output partition: the same ranks
  std::uint64_t count;
  std::vector<sorted_run> runs;
  timeline tl;
  cuda::cuda_event ready;  ///< hands a piece from the copy-in to the sort
  std::uint64_t range_elements{};  ///< of this job's ranges: a ring buffer holds one
  std::size_t first_bound{};       ///< the bound (resident_job::bounds_) its first range starts at
  std::size_t ranges{};
  std::vector<cuda::cuda_event> merged;  ///< per range: its merge is done
  std::uint64_t ring{};                  ///< range buffers in its ring
  std::vector<cuda::cuda_event> copied;  ///< per ring buffer: read out
  std::uint64_t reported{};  ///< elements of progress reported so far
};

/// Where one range's merged keys and values are copied out from, and the ring buffer that
/// holds them (none where they are read from a run itself).
struct range_result {
  const char* keys{};
  const char* values{};
  int ring{-1};
};

/// A sorted input of one merge level of a range: its keys and values, and its length.
struct merge_input {
  const char* keys;
  const char* values;
  std::uint64_t length;
};

class resident_job {
 public:
  resident_job(const job_arrays& a, const element_layout& layout, job_context& ctx)
      : a_{a}, layout_{layout}, ctx_{ctx}, kb_{layout.key_bytes}, vb_{layout.value_bytes}
  {
  }

  void run(const std::vector<cuda_device*>& gpus)
  {
    const std::uint64_t g = gpus.size();
    // Every GPU is cut as the largest share is (pieces, ranges), and holds buffers for it.
    most_ = std::max<std::uint64_t>((a_.n + g - 1) / g, 1);
    for (std::uint64_t j = 0; j < g; ++j) {
      const std::uint64_t first = a_.n * j / g, last = a_.n * (j + 1) / g;
      cuda_device* dev = gpus[j];
      // Events belong to the device current when they are made.
      const cuda::set_device_guard guard{dev->id()};
      parts_.push_back(part{.dev = dev,
                            .buf = &dev->resident(layout_, most_, g),
                            .first = first,
                            .count = last - first,
                            .runs = {},
                            .tl = timeline{ctx_.profiling()},
                            .ready = cuda::cuda_event{}});
    }
    for (part& p : parts_) p.dev->profile_made_buffers(ctx_, 1);
    bool storing = false;
    try {
      origin_ = ctx_.elapsed();
      for (part& p : parts_) {
        const cuda::set_device_guard guard{p.dev->id()};
        p.tl.origin(p.buf->h2d.value(), ctx_);
      }
      load_and_sort_pieces();
      timed_cut();
      ctx_.check();  // the last point at which an in-place input is untouched
      storing = true;  // a cancel from here on comes too late: the job finishes
      store(true);
    } catch (...) {
      // Nothing may still read or write the caller's arrays once the error leaves here.
      for (part& p : parts_) quiesce(p);
      if (!storing || !a_.in_place()) throw;
      store_again(std::current_exception());
    }
    for (part& p : parts_) {
      const cuda::set_device_guard guard{p.dev->id()};
      p.tl.report(ctx_, p.dev->name());
      progress(p, p.count - p.reported);
    }
  }

 private:
  char* keys(const part& p, std::uint64_t at) const
  {
    return p.buf->keys.data<char>() + at * kb_;
  }
  char* values(const part& p, std::uint64_t at) const
  {
    return vb_ == 0 ? nullptr : p.buf->values.data<char>() + at * vb_;
  }
  /// The work array: the piece sort's alternate, then ring buffer `ring`'s element `at`.
  char* work_keys(const part& p, std::uint64_t ring, std::uint64_t at) const
  {
    return p.buf->work_keys.data<char>() + (ring * p.range_elements + at) * kb_;
  }
  char* work_values(const part& p, std::uint64_t ring, std::uint64_t at) const
  {
    return vb_ == 0 ? nullptr
                    : p.buf->work_values.data<char>() + (ring * p.range_elements + at) * vb_;
  }

  void progress(part& p, std::uint64_t elements)
  {
    p.reported += elements;
    ctx_.add_done(elements);
  }

  static void quiesce(part& p) noexcept
  {
    try {
      const cuda::set_device_guard guard{p.dev->id()};
      for (auto* s : {&p.buf->h2d, &p.buf->compute, &p.buf->d2h})
        GPUSORT_CUDA_ASSERT_OK(cudaStreamSynchronize(s->value()));
    } catch (...) {  // NOLINT(bugprone-empty-catch): already failing; the first error wins
    }
  }

  /// The final stage: every range merged and copied out. It never writes the runs it reads, so
  /// that it can run again from them when it fails part way, even where a failed call's work
  /// ran. `first`: the first time, which reports progress.
  void store(bool first)
  {
    // Each GPU's merges and copy-out from a thread of its own: a staged copy-out (a file, a
    // pageable array) blocks its caller, and one thread storing GPU after GPU left the second
    // GPU's link idle until the first had finished (96 GiB in place on two H200: cuda:0 copied
    // out in 3.83-4.82 s, cuda:1 in 4.83-5.82 s; h200x2-20261130-s11/call6). A failure stops
    // no other GPU: store_again runs the whole stage again once all are quiet.
    run_side_by_side(
        parts_.size(), [&](std::size_t i) { merge_and_store(parts_[i], first); }, [] {});
    for (part& p : parts_) {
      const cuda::set_device_guard guard{p.dev->id()};
      GPUSORT_CUDA_TRY(cudaStreamSynchronize(p.buf->d2h.value()));
    }
  }

  /// After `failure` escaped the final stage of an in-place job (every stream quiet): ranges
  /// already copied out hold sorted pairs and the rest the original ones, so some pairs are
  /// there twice and others lost. Every pair is still on the GPUs, in runs the final stage only
  /// reads: running it again completes the array, and the job succeeds. A lost device (a
  /// sticky error) has lost them: its failure stands, and so does one that repeats.
  void store_again(const std::exception_ptr& failure)
  {
    for (int attempt = 1; attempt <= store_attempts && !device_lost(); ++attempt) {
      detail::log(log_level::warn,
                  "{}; copying the sorted result out again ({} of {}): the array sorted in "
                  "place holds part of it",
                  message_of(failure), attempt, store_attempts);
      try {
        for (part& p : parts_) {
          const cuda::set_device_guard guard{p.dev->id()};
          cudaGetLastError();  // the failed call's error, not to be taken for a new one
        }
        store(false);
        return;
      } catch (...) {
        for (part& p : parts_) quiesce(p);
      }
    }
    rethrow_torn(failure, device_lost()
                              ? "a GPU is lost, and with it the sorted result"
                              : "the final merge and copy-out failed " +
                                    std::to_string(store_attempts + 1) + " times");
  }

  /// Copies every GPU's share in, piece by piece, sorting each piece once it has arrived. Pieces
  /// of all GPUs are issued in turn, so that each GPU's link is busy from the start.
  void load_and_sort_pieces()
  {
    const std::uint64_t piece = parts_.front().buf->tuning.resident.piece_elements(most_);
    for (std::uint64_t at = 0; at < most_; at += piece) {
      ctx_.check();
      for (part& p : parts_) {
        if (at >= p.count) continue;
        const std::uint64_t len = std::min(piece, p.count - at);
        const cuda::set_device_guard guard{p.dev->id()};
        load_piece(p, at, len);
        sort_piece(p, at, len);
        p.runs.push_back({at, len});
        // Progress while the job runs, not only at its end: a piece in counts half of its
        // elements, a range out the other half (a staged copy returns once its bytes moved).
        progress(p, len / 2);
      }
    }
  }

  void load_piece(part& p, std::uint64_t at, std::uint64_t len)
  {
    const cudaStream_t s = p.buf->h2d.value();
    const std::uint64_t src = p.first + at;
    p.tl.span(gpu_stage::copy_in, s, len * layout_.bytes(), [&] {
      copy_to_device(keys(p, at), static_cast<const char*>(a_.src_keys) + src * kb_, len * kb_,
                     s, p.buf->in_staging);
      if (layout_.positions)
        cuda::positions(values(p, at), len, src, vb_, s);
      else if (vb_ > 0)
        copy_to_device(values(p, at), static_cast<const char*>(a_.src_values) + src * vb_,
                       len * vb_, s, p.buf->in_staging);
    });
    p.ready.record(s);
  }

  /// Sorts a piece where it arrived, with the work array as the sort's alternate.
  void sort_piece(part& p, std::uint64_t at, std::uint64_t len)
  {
    const cudaStream_t s = p.buf->compute.value();
    p.ready.make_wait(s);
    GPUSORT_EXPECTS(len * kb_ <= p.buf->work_keys.size(), "a piece must fit the work array");
    char* alt_keys = p.buf->work_keys.data<char>();
    char* alt_values = vb_ == 0 ? nullptr : p.buf->work_values.data<char>();
    p.tl.span(gpu_stage::sort, s, len * layout_.bytes(), [&] {
      cuda::to_ordered(keys(p, at), len, layout_.keys(), s);
      const bool in_alt =
          p.buf->sorter.sort(keys(p, at), alt_keys, values(p, at), alt_values, len, kb_, vb_,
                             p.buf->scratch.data(), p.buf->scratch_capacity, s);
      if (in_alt) {  // the run belongs where its piece arrived (~1 ms per GiB)
        GPUSORT_CUDA_TRY(
            cudaMemcpyAsync(keys(p, at), alt_keys, len * kb_, cudaMemcpyDeviceToDevice, s));
        if (vb_ > 0)
          GPUSORT_CUDA_TRY(cudaMemcpyAsync(values(p, at), alt_values, len * vb_,
                                           cudaMemcpyDeviceToDevice, s));
      }
    });
  }

  std::uint64_t* device_words(part& p) const
  {
    void* d = nullptr;
    GPUSORT_CUDA_TRY(cudaHostGetDevicePointer(&d, p.buf->words.data(), 0));
    return static_cast<std::uint64_t*>(d);
  }

  /// cut_ranges, and with a profile its host stage "ranges cut" from the moment every piece
  /// is sorted (the GPUs' compute streams drained first, which the cut's first count waits
  /// for anyway) to its end: between the last copy-in and the first copy-out of a fitting job
  /// lie that sort, the cut and the first range's merge (issue 40), and only the GPU stages
  /// were timed.
  void timed_cut()
  {
    if (!ctx_.profiling()) {
      cut_ranges();
      return;
    }
    for (part& p : parts_) {
      const cuda::set_device_guard guard{p.dev->id()};
      GPUSORT_CUDA_TRY(cudaStreamSynchronize(p.buf->compute.value()));
    }
    const double from = ctx_.elapsed();
    cut_ranges();
    const double to = ctx_.elapsed();
    ctx_.add_profile(stage_profile{.device = "host",
                                   .round = 1,
                                   .stage = "ranges cut",
                                   .chunks = bounds_.size() - 1,
                                   .bytes = 0,
                                   .busy_seconds = to - from,
                                   .first_start = from - origin_,
                                   .last_end = to - origin_,
                                   .round_start = origin_});
  }

  /// The output ranges and where each starts in every run. Every GPU's output partition is its
  /// input share's ranks, cut into ranges a ring buffer holds; a range takes from each run
  /// (of every GPU) the part that the merged order of all runs puts there: for each bound k,
  /// the smallest key value v with at least k keys at most v, found by a search on the values
  /// of all bounds at once (each step counts, on every GPU, each run's keys below and at most
  /// the candidates), then keys below v from every run and keys equal to v in run order (GPU by
  /// GPU, piece by piece: the input's order, so that equal keys keep it) until k are taken.
  void cut_ranges()
  {
    bounds_.clear();
    for (part& p : parts_) {
      p.range_elements = p.buf->tuning.resident.range_elements(most_);
      p.ring = resident_ring_buffers(most_, p.buf->tuning.resident, parts_.size());
      GPUSORT_EXPECTS(p.ring * p.range_elements * kb_ <= p.buf->work_keys.size(),
                      "the ring of ranges must fit the work array");
      p.first_bound = bounds_.size();
      p.ranges = p.count == 0 ? 0 : (p.count + p.range_elements - 1) / p.range_elements;
      for (std::size_t r = 0; r < p.ranges; ++r)
        bounds_.push_back(p.first + p.count * r / p.ranges);
      const cuda::set_device_guard guard{p.dev->id()};
      p.merged.clear();
      p.merged.resize(p.ranges);
      p.copied.clear();
      p.copied.resize(p.ring);
    }
    bounds_.push_back(a_.n);
    // Runs in the input's order: GPU by GPU, piece by piece.
    std::vector<std::pair<std::size_t, std::size_t>> order;
    for (std::size_t i = 0; i < parts_.size(); ++i)
      for (std::size_t q = 0; q < parts_[i].runs.size(); ++q) order.emplace_back(i, q);
    cuts_.assign(parts_.size(), {});
    for (std::size_t i = 0; i < parts_.size(); ++i) {
      cuts_[i].assign(parts_[i].runs.size(), std::vector<std::uint64_t>(bounds_.size(), 0));
      for (std::size_t q = 0; q < parts_[i].runs.size(); ++q)
        cuts_[i][q].back() = parts_[i].runs[q].length;
    }
    if (bounds_.size() <= 2) return;  // one range: every run whole
    const std::size_t probes = bounds_.size() - 2;
    std::size_t most_runs = 0;
    for (const part& p : parts_) most_runs = std::max(most_runs, p.runs.size());
    const std::size_t per_value = 1 + 2 * most_runs;  // a value, and two counts a run
    GPUSORT_EXPECTS(probes * per_value <= resident_buffers::word_count,
                    "too many ranges and runs for the splits' words");
    // Candidates a bound tries at each step, as many as the words hold up to 15: a step cuts a
    // bound's interval 16-fold instead of 2-fold, so that 64-bit keys take 16 steps, each a
    // round trip to every GPU, instead of 64 (about 60 us each with two GPUs of 16 runs).
    const std::size_t ways =
        std::clamp<std::size_t>(resident_buffers::word_count / per_value / probes, 1, 15);
    const std::uint64_t top = kb_ == 4 ? std::numeric_limits<std::uint32_t>::max()
                                       : std::numeric_limits<std::uint64_t>::max();
    std::vector<std::uint64_t> lo(probes, 0), hi(probes, top), candidates(probes * ways);
    std::vector<std::uint64_t> less, less_equal;
    std::vector<cuda::key_run> key_runs;
    // Counts of keys below and at most each value, summed over every run; with `each`, each
    // run's too, by GPU and run.
    using counts = std::vector<std::vector<std::vector<std::uint64_t>>>;
    auto count = [&](const std::vector<std::uint64_t>& values, counts* each) {
      const std::size_t v = values.size();
      less.assign(v, 0);
      less_equal.assign(v, 0);
      for (part& p : parts_) {
        const cuda::set_device_guard guard{p.dev->id()};
        std::copy(values.begin(), values.end(), p.buf->words.data<std::uint64_t>());
        std::uint64_t* d = device_words(p);
        // Run q's counts below the values at d + v (1 + 2q), at most them v words on.
        key_runs.clear();
        for (const sorted_run& r : p.runs) key_runs.push_back({keys(p, r.offset), r.length});
        cuda::count_below_runs(key_runs, kb_, d, d + v, 2 * v, static_cast<std::uint32_t>(v),
                               p.buf->compute.value());
      }
      for (std::size_t i = 0; i < parts_.size(); ++i) {
        part& p = parts_[i];
        const cuda::set_device_guard guard{p.dev->id()};
        GPUSORT_CUDA_TRY(cudaStreamSynchronize(p.buf->compute.value()));
        const auto* w = p.buf->words.data<std::uint64_t>();
        if (each != nullptr) (*each)[i].assign(p.runs.size(), {});
        for (std::size_t q = 0; q < p.runs.size(); ++q) {
          const std::uint64_t* below = w + v * (1 + 2 * q);
          for (std::size_t t = 0; t < v; ++t) {
            less[t] += below[t];
            less_equal[t] += below[v + t];
          }
          if (each != nullptr) (*each)[i][q].assign(below, below + 2 * v);
        }
      }
    };
    // For every bound k at once, the smallest value v with at least k keys at most v: the
    // bound's interval [lo, hi] always holds it; each step counts `ways` values spread over it
    // and keeps the part between the last one below the rank and the first one at it or above.
    for (;;) {
      bool open = false;
      for (std::size_t t = 0; t < probes; ++t) {
        const std::uint64_t width = hi[t] - lo[t];
        open = open || width > 0;
        for (std::size_t j = 0; j < ways; ++j)
          candidates[t * ways + j] =
              width <= ways ? lo[t] + std::min<std::uint64_t>(j, width == 0 ? 0 : width - 1)
                            : lo[t] + width / (ways + 1) * (j + 1);
      }
      if (!open) break;
      count(candidates, nullptr);
      for (std::size_t t = 0; t < probes; ++t) {
        if (lo[t] >= hi[t]) continue;
        std::size_t j = 0;
        while (j < ways && less_equal[t * ways + j] < bounds_[t + 1]) ++j;
        if (j < ways) hi[t] = candidates[t * ways + j];
        if (j > 0) lo[t] = candidates[t * ways + j - 1] + 1;
      }
    }
    counts each(parts_.size());
    count(lo, &each);
    for (std::size_t t = 0; t < probes; ++t) {
      GPUSORT_EXPECTS(less[t] < bounds_[t + 1] && bounds_[t + 1] <= less_equal[t],
                      "a range's bound value must hold its rank");
      std::uint64_t remaining = bounds_[t + 1] - less[t];  // keys equal to v_t before the bound
      for (const auto& [i, q] : order) {
        const std::uint64_t below = each[i][q][t], equal = each[i][q][probes + t] - below;
        const std::uint64_t take = std::min(equal, remaining);
        remaining -= take;
        cuts_[i][q][t + 1] = below + take;
      }
    }
  }

  /// Copies `bytes` from `src` on GPU `src_dev` to `dst` on GPU `dst_dev` on stream `s`.
  static void copy_between(char* dst, int dst_dev, const char* src, int src_dev,
                           std::uint64_t bytes, cudaStream_t s)
  {
    if (dst_dev == src_dev) {
      GPUSORT_CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
    } else {
      GPUSORT_CUDA_TRY(cudaMemcpyPeerAsync(dst, dst_dev, src, src_dev, bytes, s));
    }
  }

  /// Every range of `p`'s output: merged on the compute stream into the ring, each copied out
  /// once the next one's merges are issued, so that a staged (blocking) copy-out never holds
  /// the next merge back.
  void merge_and_store(part& p, bool report_progress)
  {
    const cuda::set_device_guard guard{p.dev->id()};
    if (p.count == 0) return;
    std::vector<range_result> results(p.ranges);
    int previous = -1;  // the ring buffer holding the last range, perhaps still copying out
    for (std::size_t r = 0; r < p.ranges; ++r) {
      results[r] = merge_range(p, r, previous);
      if (results[r].ring >= 0) previous = results[r].ring;
      if (r > 0) copy_out(p, r - 1, results[r - 1], report_progress);
    }
    copy_out(p, p.ranges - 1, results.back(), report_progress);
  }

  /// Merges range `r` of `p` from every run's part of it into the ring (not into `busy`, the
  /// buffer of the range before, which may still be copying out).
  range_result merge_range(part& p, std::size_t r, int busy)
  {
    const cudaStream_t s = p.buf->compute.value();
    const std::size_t b = p.first_bound + r;
    const std::uint64_t k0 = bounds_[b], k1 = bounds_[b + 1];
    // Two buffers to merge in (a lone range of a lone run needs one: the ring has one then).
    std::array<int, 2> free{0, 0};
    for (int x = 0, n = 0; x < static_cast<int>(p.ring) && n < 2; ++x)
      if (x != busy) free[n++] = x;
    // A ring buffer is written only once the range that last left its result there is out.
    const auto take = [&](int x) { p.copied[x].make_wait(s); };
    const bool transform = a_.dst_keys != nullptr && !ordered_is_identity(layout_.keys());
    // Level 0: each run's part where it lies; parts on other GPUs come over first, into the
    // first free buffer at their place in the range.
    std::vector<merge_input> inputs;
    std::uint64_t at = 0;
    bool fetched = false;
    for (std::size_t i = 0; i < parts_.size(); ++i) {
      const part& src = parts_[i];
      for (std::size_t q = 0; q < src.runs.size(); ++q) {
        const std::uint64_t from = cuts_[i][q][b], to = cuts_[i][q][b + 1];
        GPUSORT_EXPECTS(from <= to && to <= src.runs[q].length, "range cuts out of order");
        const std::uint64_t len = to - from;
        if (len == 0) continue;
        const std::uint64_t in_run = src.runs[q].offset + from;
        if (&src == &p) {
          inputs.push_back({keys(p, in_run), values(p, in_run), len});
        } else {
          if (!fetched) take(free[0]);
          fetched = true;
          p.tl.span(gpu_stage::copy_in, s, 0, [&] {
            copy_between(work_keys(p, free[0], at), p.dev->id(), keys(src, in_run),
                         src.dev->id(), len * kb_, s);
            if (vb_ > 0)
              copy_between(work_values(p, free[0], at), p.dev->id(), values(src, in_run),
                           src.dev->id(), len * vb_, s);
          });
          inputs.push_back({work_keys(p, free[0], at), work_values(p, free[0], at), len});
        }
        at += len;
      }
    }
    GPUSORT_EXPECTS(at == k1 - k0, "a range's parts must fill it exactly");
    range_result result{.keys = inputs.front().keys, .values = inputs.front().values};
    if (inputs.size() == 1 && !fetched && !transform) {
      p.merged[r].record(s);
      return result;  // one run's part, copied out from where it is
    }
    p.tl.span(gpu_stage::sort, s, (k1 - k0) * layout_.bytes(), [&] {
      // Pairwise merges, level by level, alternating between the two free buffers; the first
      // level writes the buffer the fetched parts are not in.
      int level_to = inputs.size() == 1 ? free[0] : free[1];
      if (level_to != free[0] || !fetched) take(level_to);
      while (inputs.size() > 1) {
        std::vector<merge_input> next;
        std::uint64_t out = 0;
        for (std::size_t i = 0; i < inputs.size(); i += 2) {
          char* ok = work_keys(p, level_to, out);
          char* ov = work_values(p, level_to, out);
          if (i + 1 == inputs.size()) {  // the odd one out moves to where the level goes
            GPUSORT_CUDA_TRY(cudaMemcpyAsync(ok, inputs[i].keys, inputs[i].length * kb_,
                                             cudaMemcpyDeviceToDevice, s));
            if (vb_ > 0)
              GPUSORT_CUDA_TRY(cudaMemcpyAsync(ov, inputs[i].values, inputs[i].length * vb_,
                                               cudaMemcpyDeviceToDevice, s));
            next.push_back({ok, ov, inputs[i].length});
          } else {
            const merge_input& x = inputs[i];
            const merge_input& y = inputs[i + 1];
            cuda::merge(x.keys, x.values, x.length, y.keys, y.values, y.length, ok, ov, kb_,
                        vb_, p.buf->scratch.data(), p.buf->scratch_capacity, s);
            next.push_back({ok, ov, x.length + y.length});
          }
          out += next.back().length;
        }
        inputs = std::move(next);
        result.ring = level_to;
        level_to = level_to == free[0] ? free[1] : free[0];
        if (inputs.size() > 1) take(level_to);
      }
      if (result.ring < 0) result.ring = free[0];  // one fetched part: where it came
      result.keys = inputs.front().keys;
      result.values = inputs.front().values;
      if (transform) {
        // Back to raw bits in the ring; a run's own part is read, never written.
        char* raw = work_keys(p, result.ring, 0);
        if (result.keys != raw) take(result.ring);
        cuda::from_ordered(result.keys, raw, k1 - k0, layout_.keys(), s);
        result.keys = raw;
      }
    });
    p.merged[r].record(s);
    return result;
  }

  /// Copies range `r` of `p` out once merged; the ring buffer it is in is free again after.
  void copy_out(part& p, std::size_t r, const range_result& res, bool report_progress)
  {
    const cudaStream_t out = p.buf->d2h.value();
    const std::uint64_t k0 = bounds_[p.first_bound + r], k1 = bounds_[p.first_bound + r + 1];
    p.merged[r].make_wait(out);
    p.tl.span(gpu_stage::copy_out, out, (k1 - k0) * layout_.bytes(), [&] {
      // An argsort without its sorted keys wants the positions alone.
      if (a_.dst_keys != nullptr)
        copy_to_host(static_cast<char*>(a_.dst_keys) + k0 * kb_, res.keys, (k1 - k0) * kb_, out,
                     p.buf->out_staging);
      if (vb_ > 0)
        copy_to_host(static_cast<char*>(a_.dst_values) + k0 * vb_, res.values,
                     (k1 - k0) * vb_, out, p.buf->out_staging);
    });
    if (res.ring >= 0) p.copied[res.ring].record(out);
    if (report_progress) progress(p, (k1 - k0) / 2);
  }

  const job_arrays& a_;
  const element_layout& layout_;
  job_context& ctx_;
  unsigned kb_, vb_;
  std::vector<part> parts_;
  std::uint64_t most_{};  ///< elements of the largest share
  double origin_{};       ///< the job's clock when the GPUs' timelines began (profiles)
  /// The output ranks the ranges start at, GPU by GPU, then n.
  std::vector<std::uint64_t> bounds_;
  /// cuts_[i][q][b]: where bound b falls in GPU i's run q.
  std::vector<std::vector<std::vector<std::uint64_t>>> cuts_;
};

void enable_peer_access(const std::vector<cuda_device*>& gpus)
{
  for (cuda_device* a : gpus) {
    const cuda::set_device_guard guard{a->id()};
    for (cuda_device* b : gpus) {
      if (a == b) continue;
      int can = 0;
      GPUSORT_CUDA_TRY(cudaDeviceCanAccessPeer(&can, a->id(), b->id()));
      if (can == 0) continue;  // cudaMemcpyPeerAsync still works, through host memory
      const cudaError_t e = GPUSORT_CUDA_CALL(cuda_other, cudaDeviceEnablePeerAccess(b->id(), 0));
      if (e == cudaErrorPeerAccessAlreadyEnabled) {
        cudaGetLastError();
      } else {
        GPUSORT_CUDA_TRY(e);
      }
    }
  }
}

}  // namespace

std::vector<cuda_device*> resident_gpus(std::uint64_t n, const element_layout& layout,
                                        const std::vector<cuda_device*>& gpus)
{
  const std::uint64_t worth = std::max<std::uint64_t>(
      1, min_resident_share_bytes / std::max<std::uint64_t>(layout.bytes(), 1));
  const std::size_t g = static_cast<std::size_t>(
      std::clamp<std::uint64_t>(n / worth, 1, gpus.size()));
  const std::vector<cuda_device*> use(gpus.begin(), gpus.begin() + static_cast<std::ptrdiff_t>(g));
  const std::uint64_t share = (n + g - 1) / g;
  for (const cuda_device* d : use)
    if (!d->resident_fits(layout, share, g)) return {};
  return use;
}

execution_stats sort_resident(const job_arrays& a, const element_layout& layout,
                              const std::vector<cuda_device*>& gpus, job_context& ctx)
{
  GPUSORT_EXPECTS(!gpus.empty(), "a resident sort needs a GPU");
  ctx.begin_round(1, a.n, 1);
  const auto start = std::chrono::steady_clock::now();
  if (gpus.size() > 1) enable_peer_access(gpus);
  resident_job{a, layout, ctx}.run(gpus);
  if (ctx.profiling())
    ctx.add_round_profile(1, gpus.size(), a.n * layout.bytes(), seconds_since(start));
  return execution_stats{.chunks = 1, .rounds = 1};
}

}  // namespace gpusort::detail
