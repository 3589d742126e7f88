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

/// A sorted run in one of a GPU's two buffers.
struct sorted_run {
  unsigned buffer;
  std::uint64_t offset;
  std::uint64_t length;
};

/// One GPU's share of the job and where its runs are.
struct part {
  cuda_device* dev;
  resident_buffers* buf;
  std::uint64_t first;  ///< of the input share, and (several GPUs) of the output partition
  std::uint64_t count;
  std::vector<sorted_run> runs;
  timeline tl;
  cuda::cuda_event ready;  ///< hands work from one stream to the next
  std::vector<cuda::cuda_event> ranges;
  std::uint64_t reported{};  ///< elements of progress reported so far
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
    for (std::uint64_t j = 0; j < g; ++j) {
      const std::uint64_t first = a_.n * j / g, last = a_.n * (j + 1) / g;
      cuda_device* dev = gpus[j];
      // Events belong to the device current when they are made.
      const cuda::set_device_guard guard{dev->id()};
      parts_.push_back(part{.dev = dev,
                            .buf = &dev->resident(layout_, last - first),
                            .first = first,
                            .count = last - first,
                            .runs = {},
                            .tl = timeline{ctx_.profiling()},
                            .ready = cuda::cuda_event{},
                            .ranges = {}});
    }
    for (part& p : parts_) p.dev->profile_made_buffers(ctx_, 1);
    bool storing = false;
    try {
      for (part& p : parts_) {
        const cuda::set_device_guard guard{p.dev->id()};
        p.tl.origin(p.buf->h2d.value(), ctx_);
      }
      load_and_sort_pieces();
      if (parts_.size() > 1) {
        for (part& p : parts_) merge_down(p, 1);
        synchronize(&resident_buffers::compute);
        ctx_.check();
        exchange(choose_splits());
      }
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
  char* keys(part& p, unsigned b, std::uint64_t at) const
  {
    return p.buf->keys[b].data<char>() + at * kb_;
  }
  char* values(part& p, unsigned b, std::uint64_t at) const
  {
    return vb_ == 0 ? nullptr : p.buf->values[b].data<char>() + at * vb_;
  }

  void progress(part& p, std::uint64_t elements)
  {
    p.reported += elements;
    ctx_.add_done(elements);
  }

  void synchronize(cuda::cuda_stream resident_buffers::*stream)
  {
    for (part& p : parts_) {
      const cuda::set_device_guard guard{p.dev->id()};
      GPUSORT_CUDA_TRY(cudaStreamSynchronize((p.buf->*stream).value()));
    }
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

  /// The final stage: the last merges and the copy-out. It never writes the buffer that holds
  /// the runs it reads (merge_down moves a part's runs on only once a level is issued), so that
  /// it can run again from the runs it left when it fails part way, even where a failed call's
  /// work ran. `first`: the first time, which reports progress.
  void store(bool first)
  {
    for (part& p : parts_) merge_down(p, 2);
    // Each GPU's last merges and copy-out from a thread of its own: a staged copy-out (a file,
    // a pageable array) blocks its caller, and one thread storing GPU after GPU left the second
    // GPU's link idle until the first had finished (96 GiB in place on two H200: cuda:0 copied
    // out in 3.83-4.82 s, cuda:1 in 4.83-5.82 s; h200x2-20261130-s11/call6). A failure stops
    // no other GPU: store_again runs the whole stage again once all are quiet.
    run_side_by_side(
        parts_.size(), [&](std::size_t i) { merge_and_store(parts_[i], first); }, [] {});
    synchronize(&resident_buffers::d2h);
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
    std::uint64_t most = 0;
    for (const part& p : parts_) most = std::max(most, p.count);
    const std::uint64_t piece = resident_buffers::piece_elements(
        std::max<std::uint64_t>(most, 1), parts_.front().buf->tuning);
    for (std::uint64_t at = 0; at < most; at += piece) {
      ctx_.check();
      for (part& p : parts_) {
        if (at >= p.count) continue;
        const std::uint64_t len = std::min(piece, p.count - at);
        const cuda::set_device_guard guard{p.dev->id()};
        load_piece(p, at, len);
        sort_piece(p, at, len);
        p.runs.push_back({0, at, len});
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
      copy_to_device(keys(p, 0, at), static_cast<const char*>(a_.src_keys) + src * kb_,
                     len * kb_, s, p.buf->in_staging);
      if (layout_.positions)
        cuda::positions(values(p, 0, at), len, src, vb_, s);
      else if (vb_ > 0)
        copy_to_device(values(p, 0, at), static_cast<const char*>(a_.src_values) + src * vb_,
                       len * vb_, s, p.buf->in_staging);
    });
    p.ready.record(s);
  }

  void sort_piece(part& p, std::uint64_t at, std::uint64_t len)
  {
    const cudaStream_t s = p.buf->compute.value();
    p.ready.make_wait(s);
    p.tl.span(gpu_stage::sort, s, len * layout_.bytes(), [&] {
      cuda::to_ordered(keys(p, 0, at), len, layout_.keys(), s);
      const bool in_alt = p.buf->sorter.sort(keys(p, 0, at), keys(p, 1, at), values(p, 0, at),
                                             values(p, 1, at), len, kb_, vb_,
                                             p.buf->scratch.data(), p.buf->scratch_capacity, s);
      if (in_alt) {  // runs of one merge level share a buffer: bring it home (~1 ms per GiB)
        GPUSORT_CUDA_TRY(cudaMemcpyAsync(keys(p, 0, at), keys(p, 1, at), len * kb_,
                                         cudaMemcpyDeviceToDevice, s));
        if (vb_ > 0)
          GPUSORT_CUDA_TRY(cudaMemcpyAsync(values(p, 0, at), values(p, 1, at), len * vb_,
                                           cudaMemcpyDeviceToDevice, s));
      }
    });
  }

  /// Merges neighbouring runs pairwise, level by level, until at most `target` remain.
  void merge_down(part& p, std::size_t target)
  {
    const cuda::set_device_guard guard{p.dev->id()};
    const cudaStream_t s = p.buf->compute.value();
    while (p.runs.size() > target) {
      std::vector<sorted_run> next;
      for (std::size_t i = 0; i < p.runs.size(); i += 2) {
        const sorted_run r1 = p.runs[i];
        const unsigned to = 1 - r1.buffer;
        if (i + 1 == p.runs.size()) {  // the odd one out moves to where the level goes
          p.tl.span(gpu_stage::sort, s, 0, [&] {
            GPUSORT_CUDA_TRY(cudaMemcpyAsync(keys(p, to, r1.offset), keys(p, r1.buffer, r1.offset),
                                             r1.length * kb_, cudaMemcpyDeviceToDevice, s));
            if (vb_ > 0)
              GPUSORT_CUDA_TRY(cudaMemcpyAsync(values(p, to, r1.offset),
                                               values(p, r1.buffer, r1.offset), r1.length * vb_,
                                               cudaMemcpyDeviceToDevice, s));
          });
          next.push_back({to, r1.offset, r1.length});
          continue;
        }
        const sorted_run r2 = p.runs[i + 1];
        p.tl.span(gpu_stage::sort, s, (r1.length + r2.length) * layout_.bytes(), [&] {
          cuda::merge(keys(p, r1.buffer, r1.offset), values(p, r1.buffer, r1.offset), r1.length,
                      keys(p, r2.buffer, r2.offset), values(p, r2.buffer, r2.offset), r2.length,
                      keys(p, to, r1.offset), values(p, to, r1.offset), kb_, vb_,
                      p.buf->scratch.data(), p.buf->scratch_capacity, s);
        });
        next.push_back({to, r1.offset, r1.length + r2.length});
      }
      p.runs = std::move(next);
    }
  }

  std::uint64_t* device_words(part& p) const
  {
    void* d = nullptr;
    GPUSORT_CUDA_TRY(cudaHostGetDevicePointer(&d, p.buf->words.data(), 0));
    return static_cast<std::uint64_t*>(d);
  }

  /// For every GPU i and every output partition t (0..g), where partition t starts in GPU i's
  /// run: exact ranks t*n/g, ties between equal keys broken by GPU order.
  std::vector<std::vector<std::uint64_t>> choose_splits()
  {
    const std::size_t g = parts_.size();
    const std::size_t probes = g - 1;
    GPUSORT_EXPECTS(3 * probes <= resident_buffers::word_count, "too many GPUs for the splits");
    std::vector<std::uint64_t> rank(probes), lo(probes, 0), hi(probes);
    const std::uint64_t top = kb_ == 4 ? std::numeric_limits<std::uint32_t>::max()
                                       : std::numeric_limits<std::uint64_t>::max();
    for (std::size_t t = 0; t < probes; ++t) {
      rank[t] = a_.n * (t + 1) / g;
      hi[t] = top;
    }
    std::vector<std::uint64_t> less(probes), less_equal(probes);
    // Counts, summed over the GPUs, of keys below and at most each probe value.
    auto count = [&](const std::vector<std::uint64_t>& values,
                   std::vector<std::vector<std::uint64_t>>* each) {
      std::fill(less.begin(), less.end(), 0);
      std::fill(less_equal.begin(), less_equal.end(), 0);
      for (part& p : parts_) {
        const cuda::set_device_guard guard{p.dev->id()};
        auto* w = p.buf->words.data<std::uint64_t>();
        std::copy(values.begin(), values.end(), w);
        std::uint64_t* d = device_words(p);
        const sorted_run& r = p.runs.front();
        cuda::count_below(keys(p, r.buffer, r.offset), r.length, kb_, d, d + probes,
                          d + 2 * probes, static_cast<std::uint32_t>(probes),
                          p.buf->compute.value());
      }
      for (part& p : parts_) {
        const cuda::set_device_guard guard{p.dev->id()};
        GPUSORT_CUDA_TRY(cudaStreamSynchronize(p.buf->compute.value()));
        const auto* w = p.buf->words.data<std::uint64_t>();
        for (std::size_t t = 0; t < probes; ++t) {
          less[t] += w[probes + t];
          less_equal[t] += w[2 * probes + t];
          if (each != nullptr) {
            (*each)[&p - parts_.data()][2 * t] = w[probes + t];
            (*each)[&p - parts_.data()][2 * t + 1] = w[2 * probes + t];
          }
        }
      }
    };
    // The smallest key value v_t with at least rank[t] keys at most it, for all t at once.
    std::vector<std::uint64_t> mid(probes);
    for (;;) {
      bool open = false;
      for (std::size_t t = 0; t < probes; ++t) {
        mid[t] = lo[t] + (hi[t] - lo[t]) / 2;
        open = open || lo[t] < hi[t];
      }
      if (!open) break;
      count(mid, nullptr);
      for (std::size_t t = 0; t < probes; ++t) {
        if (lo[t] >= hi[t]) continue;
        if (less_equal[t] >= rank[t]) {
          hi[t] = mid[t];
        } else {
          lo[t] = mid[t] + 1;
        }
      }
    }
    std::vector<std::vector<std::uint64_t>> each(g, std::vector<std::uint64_t>(2 * probes));
    count(lo, &each);
    std::vector<std::vector<std::uint64_t>> split(g, std::vector<std::uint64_t>(g + 1, 0));
    for (std::size_t i = 0; i < g; ++i) split[i][g] = parts_[i].count;
    for (std::size_t t = 0; t < probes; ++t) {
      std::uint64_t remaining = rank[t] - less[t];  // keys equal to v_t that partition t+1 skips
      for (std::size_t i = 0; i < g; ++i) {
        const std::uint64_t equal = each[i][2 * t + 1] - each[i][2 * t];
        const std::uint64_t take = std::min(equal, remaining);
        remaining -= take;
        split[i][t + 1] = each[i][2 * t] + take;
      }
    }
    return split;
  }

  /// GPU j receives partition j from every GPU's run, into its free buffer, one segment after
  /// another; then each GPU's runs are the segments it received.
  void exchange(const std::vector<std::vector<std::uint64_t>>& split)
  {
    const std::size_t g = parts_.size();
    std::vector<sorted_run> own;  // each GPU's run, before its runs become what it received
    for (const part& p : parts_) own.push_back(p.runs.front());
    for (std::size_t j = 0; j < g; ++j) {
      part& dst = parts_[j];
      const cuda::set_device_guard guard{dst.dev->id()};
      const cudaStream_t s = dst.buf->compute.value();
      const unsigned to = 1 - own[j].buffer;
      std::vector<sorted_run> received;
      std::uint64_t at = 0;
      for (std::size_t i = 0; i < g; ++i) {
        part& src = parts_[i];
        const sorted_run& r = own[i];
        GPUSORT_EXPECTS(split[i][j] <= split[i][j + 1] && split[i][j + 1] <= r.length,
                        "splitters out of order");
        const std::uint64_t from = split[i][j], len = split[i][j + 1] - split[i][j];
        if (len == 0) continue;
        auto copy = [&](char* d, int dd, const char* sp, int sd, std::uint64_t bytes) {
          if (dd == sd) {
            GPUSORT_CUDA_TRY(cudaMemcpyAsync(d, sp, bytes, cudaMemcpyDeviceToDevice, s));
          } else {
            GPUSORT_CUDA_TRY(cudaMemcpyPeerAsync(d, dd, sp, sd, bytes, s));
          }
        };
        dst.tl.span(gpu_stage::copy_in, s, 0, [&] {
          copy(keys(dst, to, at), dst.dev->id(), keys(src, r.buffer, r.offset + from),
               src.dev->id(), len * kb_);
          if (vb_ > 0)
            copy(values(dst, to, at), dst.dev->id(), values(src, r.buffer, r.offset + from),
                 src.dev->id(), len * vb_);
        });
        received.push_back({to, at, len});
        at += len;
      }
      GPUSORT_EXPECTS(at == dst.count, "the exchange must fill each partition exactly");
      dst.runs = std::move(received);
    }
    // Every GPU's old run is read by the others: nobody merges over it before all copies end.
    synchronize(&resident_buffers::compute);
  }

  /// The last merge (or the one run left), in ranges copied out as each is done. Never writes
  /// the runs it reads, so that it can run again after a failure: two runs merge into the
  /// other buffer; one run's keys go back to raw bits into the other buffer, its values are
  /// copied out from where they are.
  void merge_and_store(part& p, bool report_progress)
  {
    const cuda::set_device_guard guard{p.dev->id()};
    const cudaStream_t s = p.buf->compute.value(), out = p.buf->d2h.value();
    if (p.count == 0) return;
    const cuda_device_options& o = p.buf->tuning;
    const std::uint64_t wanted = std::clamp<std::uint64_t>(
        p.count / std::max<std::uint64_t>(o.resident_min_range_elements, 1), 1,
        std::clamp<std::uint64_t>(o.resident_max_ranges, 1, resident_buffers::word_count / 2 - 1));
    std::vector<std::uint64_t> bounds(wanted + 1), run1(wanted + 1);
    for (std::uint64_t r = 0; r <= wanted; ++r) bounds[r] = p.count * r / wanted;
    // Where each range's keys and values are copied out from.
    unsigned keys_from = p.runs.front().buffer, values_from = keys_from;
    if (p.runs.size() == 2) {
      const sorted_run r1 = p.runs[0], r2 = p.runs[1];
      auto* w = p.buf->words.data<std::uint64_t>();
      std::copy(bounds.begin(), bounds.end(), w);
      std::uint64_t* d = device_words(p);
      cuda::merge_path(keys(p, r1.buffer, r1.offset), r1.length, keys(p, r2.buffer, r2.offset),
                       r2.length, kb_, d, d + wanted + 1, static_cast<std::uint32_t>(wanted + 1),
                       s);
      GPUSORT_CUDA_TRY(cudaStreamSynchronize(s));
      std::copy(w + wanted + 1, w + 2 * (wanted + 1), run1.begin());
      keys_from = values_from = 1 - r1.buffer;
    } else {
      const sorted_run& r = p.runs.front();
      GPUSORT_EXPECTS(r.offset == 0 && r.length == p.count, "one run must hold the whole share");
    }
    // Two runs merge where the keys are copied out from, and their keys go back to raw bits
    // there; one run's keys go back to raw bits in the other buffer, read where they are
    // (nothing to do where the ordered bits are the raw bits).
    const bool transform = a_.dst_keys != nullptr && !ordered_is_identity(layout_.keys());
    const unsigned transformed_from = keys_from;
    if (p.runs.size() == 1 && transform) keys_from = 1 - keys_from;
    p.ranges.resize(wanted);
    for (std::uint64_t r = 0; r < wanted; ++r) {
      const std::uint64_t k0 = bounds[r], k1 = bounds[r + 1];
      p.tl.span(gpu_stage::sort, s, (k1 - k0) * layout_.bytes(), [&] {
        if (p.runs.size() == 2) {
          const sorted_run r1 = p.runs[0], r2 = p.runs[1];
          const std::uint64_t a0 = run1[r], a1 = run1[r + 1];
          // A bad split would send the merge far outside the runs: fail here instead.
          GPUSORT_EXPECTS(a0 <= a1 && a1 <= r1.length && a0 <= k0 && a1 <= k1 &&
                              k0 - a0 <= k1 - a1 && k1 - a1 <= r2.length,
                          "merge path split out of order");
          cuda::merge(keys(p, r1.buffer, r1.offset + a0), values(p, r1.buffer, r1.offset + a0),
                      a1 - a0, keys(p, r2.buffer, r2.offset + k0 - a0),
                      values(p, r2.buffer, r2.offset + k0 - a0), (k1 - a1) - (k0 - a0),
                      keys(p, keys_from, k0), values(p, values_from, k0), kb_, vb_,
                      p.buf->scratch.data(), p.buf->scratch_capacity, s);
        }
        if (transform)
          cuda::from_ordered(keys(p, transformed_from, k0), keys(p, keys_from, k0), k1 - k0,
                             layout_.keys(), s);
      });
      p.ranges[r].record(s);
    }
    // Issued after every merge, so that a staged (blocking) copy-out never holds the next
    // merge back.
    for (std::uint64_t r = 0; r < wanted; ++r) {
      const std::uint64_t k0 = bounds[r], k1 = bounds[r + 1];
      p.ranges[r].make_wait(out);
      const std::uint64_t dst = p.first + k0;
      p.tl.span(gpu_stage::copy_out, out, (k1 - k0) * layout_.bytes(), [&] {
        // An argsort without its sorted keys wants the positions alone.
        if (a_.dst_keys != nullptr)
          copy_to_host(static_cast<char*>(a_.dst_keys) + dst * kb_, keys(p, keys_from, k0),
                       (k1 - k0) * kb_, out, p.buf->out_staging);
        if (vb_ > 0)
          copy_to_host(static_cast<char*>(a_.dst_values) + dst * vb_,
                       values(p, values_from, k0), (k1 - k0) * vb_, out, p.buf->out_staging);
      });
      if (report_progress) progress(p, (k1 - k0) / 2);
    }
  }

  const job_arrays& a_;
  const element_layout& layout_;
  job_context& ctx_;
  unsigned kb_, vb_;
  std::vector<part> parts_;
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
    if (share > d->resident_capacity(layout)) return {};
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
