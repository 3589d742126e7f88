// Pinned staging for host memory the engine did not pin: the host copies one piece while a
// copy engine moves another, so pageable arrays still stream at a good fraction of the link.
// Arrays in memory and in files (gpusort::file_array) pass through the pieces alike: copied or
// read straight into a piece, written out of one, by a piece_mover's threads that keep every
// piece busy (pipeline/file_window.hpp). The host's copies into and out of the
// pieces use streaming stores (core/stream_copy.hpp): at 8 GiB on the H200 host, a pageable
// fitting job went from 0.79-0.85 to 0.86-0.91 of the pinned reference's rate
// (bench/results/h200-20261128-1898a39-e2e-8Gi-ab.txt).
#pragma once

#include "core/checks.hpp"
#include "core/switches.hpp"
#include "pipeline/file_window.hpp"
#include "pipeline/host_memory.hpp"
#include "pipeline/cuda/resources.hpp"

#include <gpusort/error.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>
#include <vector>

namespace gpusort::detail {

/// Whether `p` lies in page-locked memory that the GPUs can copy from directly.
bool is_pinned(const void* p) noexcept;

/// Host memory allocated and registered with every GPU (portable, mapped), so that copies run
/// at full speed and kernels can read it directly. Unregistered when the buffer goes.
host_buffer pinned_host_buffer(std::size_t bytes);

/// Pinned pieces through which one direction stages memory the engine did not pin: the host
/// copies one piece while the copy engine moves another.
class staging {
 public:
  staging(std::uint64_t piece_bytes, unsigned pieces) : piece_bytes_{piece_bytes}
  {
    GPUSORT_CUDA_TRY(cudaGetDevice(&device_));
    // One registered range of huge pages, or (GPUSORT_STAGING_HOSTALLOC=1, the A/B) a
    // cudaHostAlloc per piece. The first job pays it, which for a one-shot CLI is its only
    // one: both directions' 256 MiB took 0.013-0.038 s registered against 0.095-0.166 s from
    // cudaHostAlloc (H200 host, 16 jobs, bench/results/h200-20261128-38b01cb-e2e-8Gi-ab/).
    if (switch_flag("GPUSORT_STAGING_HOSTALLOC", false)) {
      for (unsigned i = 0; i < pieces; ++i) {
        allocated_.emplace_back(piece_bytes, cudaHostAllocPortable);
        piece_data_.push_back(allocated_.back().data<char>());
      }
    } else {
      registered_ = pinned_host_buffer(piece_bytes * pieces);
      for (unsigned i = 0; i < pieces; ++i)
        piece_data_.push_back(static_cast<char*>(registered_.data()) + i * piece_bytes);
    }
    for (unsigned i = 0; i < pieces; ++i) {
      done_.emplace_back();
      in_use_.push_back(false);
    }
  }

  /// The pinned bytes of all its pieces.
  [[nodiscard]] std::uint64_t bytes() const noexcept { return piece_bytes_ * piece_data_.size(); }

  /// Host -> device through the pieces; returns once the last piece is queued.
  void copy_in(char* d_dst, const char* src, std::uint64_t bytes, cudaStream_t s)
  {
    if (memory_through_mover(true) || find_file_window(src)) {
      in_through_mover(d_dst, bytes, s, [&](const piece_mover::ring& r, const auto& hand_on,
                                            const auto& reusable) {
        mover().read(src, bytes, r, hand_on, reusable);
      });
      return;
    }
    // Memory only: files took the mover above.
    stage_in(d_dst, bytes, s, [&](char* piece, std::uint64_t off, std::uint64_t len) {
      host_read(piece, src + off, len);
    });
  }

  /// Host -> device of the runs one after another into [d_dst, d_dst + their bytes): a round-2
  /// task's slices of memory the engine did not pin (a pageable round-1 buffer), packed into
  /// whole pieces by the mover's threads. Copied slice by slice, each slice of a few MiB took
  /// a piece of its own, one thread per MiB of it and a wait for its copy: round 2's copy-in of
  /// an 8 GiB job took 1.55 s against 0.18 s from pinned memory (d = 43, slices of 4.4 MiB,
  /// H200 host, bench/results/h200-20261128-9428482-e2e-8Gi.json, cli_round1_pageable).
  void gather_in(char* d_dst, const std::vector<piece_mover::source_run>& runs, cudaStream_t s)
  {
    std::uint64_t bytes = 0;
    for (const piece_mover::source_run& r : runs) bytes += r.bytes;
    in_through_mover(d_dst, bytes, s, [&](const piece_mover::ring& r, const auto& hand_on,
                                          const auto& reusable) {
      mover().gather(runs, r, hand_on, reusable);
    });
  }

  /// Device -> host through the pieces; returns once every byte is in `dst`.
  void copy_out(char* dst, const char* d_src, std::uint64_t bytes, cudaStream_t s)
  {
    finish(copy_out_behind(dst, d_src, bytes, s));
  }

  /// copy_out that, where the mover's threads write the pieces out (a file window, memory
  /// through the mover), returns once the last piece's copy is queued, with a ticket for
  /// finish: the writes go on behind, so that the next chunk's copies overlap them (issue 44).
  /// Else returns 0 once every byte is in `dst`.
  [[nodiscard]] std::uint64_t copy_out_behind(char* dst, const char* d_src, std::uint64_t bytes,
                                              cudaStream_t s)
  {
    if (memory_through_mover(false) || find_file_window(dst))
      return out_through_mover(dst, d_src, bytes, s);
    copy_out_here(dst, d_src, bytes, s);
    return 0;
  }

  /// Returns once the writes of copy_out_behind's `ticket` are done; rethrows their error.
  /// Callable from another thread than the one that copies.
  void finish(std::uint64_t ticket)
  {
    if (ticket != 0) mover_->finish(ticket);  // a ticket comes from the mover, made by then
  }

  /// Returns once no write behind touches the pieces or their destinations, dropping those
  /// not finished and their errors: after a failed round, whose releaser stopped early.
  void abandon_behind()
  {
    if (mover_) mover_->abandon();
  }

  /// Whether copies out write behind (GPUSORT_WRITE_BEHIND, the A/B: 0 waits for each chunk's
  /// writes before the next chunk's copies, as before).
  static bool writes_behind()
  {
    static const bool on = switch_flag("GPUSORT_WRITE_BEHIND", true);
    return on;
  }

  /// Host -> device of the runs one after another into [d_dst, d_dst + their bytes), runs of
  /// memory (not file windows): each piece packed by every core at once (an OpenMP team of
  /// the calling thread), its copy queued, and the next piece packed while it crosses; returns
  /// once the last copy is queued, so that the next task's packing overlaps it too. For
  /// round 2's thousands of short slices a task (GPUSORT_GATHER=host), where the mover's
  /// handing on of pieces between its threads cost more than the bytes: an 8 GiB job's round 2
  /// at d = 1594 copied in at 6.2 GB/s through gather_in (h200x2-20261130-s10/call1).
  void pack_in(char* d_dst, const std::vector<piece_mover::source_run>& runs, cudaStream_t s);

 private:
  /// Device -> host through the pieces on this thread, each written out here once its copy is
  /// in (arrays in memory, GPUSORT_MEMORY_MOVER=0 or `in`).
  void copy_out_here(char* dst, const char* d_src, std::uint64_t bytes, cudaStream_t s)
  {
    settle();
    const std::uint64_t count = (bytes + piece_bytes_ - 1) / piece_bytes_;
    const std::uint64_t ahead = std::min<std::uint64_t>(count, piece_data_.size());
    auto issue = [&](std::uint64_t p) {
      const std::uint64_t off = p * piece_bytes_;
      const unsigned i = static_cast<unsigned>(p % piece_data_.size());
      GPUSORT_CUDA_TRY(cudaMemcpyAsync(piece_data_[i], d_src + off,
                                       std::min(piece_bytes_, bytes - off),
                                       cudaMemcpyDeviceToHost, s));
      done_[i].record(s);
    };
    for (std::uint64_t p = 0; p < ahead; ++p) issue(p);
    for (std::uint64_t p = 0; p < count; ++p) {
      const unsigned i = static_cast<unsigned>(p % piece_data_.size());
      done_[i].synchronize();
      const std::uint64_t off = p * piece_bytes_;
      host_write(dst + off, piece_data_[i], std::min(piece_bytes_, bytes - off));
      if (p + ahead < count) issue(p + ahead);
    }
  }

  /// Host -> device of `bytes` piece by piece on this thread: `fill(piece, offset, length)`
  /// writes each piece once its last copy has left it, then its copy is queued; returns once
  /// the last copy is queued.
  template <class Fill>
  void stage_in(char* d_dst, std::uint64_t bytes, cudaStream_t s, Fill&& fill)
  {
    settle();
    for (std::uint64_t off = 0; off < bytes; off += piece_bytes_) {
      const std::uint64_t len = std::min(piece_bytes_, bytes - off);
      const auto i = static_cast<std::size_t>(next_++ % piece_data_.size());
      if (in_use_[i]) done_[i].synchronize();  // the piece's last copy has left it
      fill(piece_data_[i], off, len);
      GPUSORT_CUDA_TRY(
          cudaMemcpyAsync(d_dst + off, piece_data_[i], len, cudaMemcpyHostToDevice, s));
      done_[i].record(s);
      in_use_[i] = true;
    }
  }

  /// Whether arrays in memory go through the mover's threads as files do (else one parallel
  /// copy per piece on the calling thread), copying in or out. GPUSORT_MEMORY_MOVER is the A/B:
  /// 0 neither, `in` or `out` one direction, else both. The mover keeps up to the ring's pieces
  /// in flight where a parallel copy per piece joined its threads before each piece's copy was
  /// queued. Pageable out of core, interleaved runs on the H200 host: 8 GiB 0.63-0.65 s
  /// against 0.85-1.02 s (h200-20261128-c7e6318-e2e-8Gi-ab/), 16 GiB 1.28-1.39 against
  /// 1.42-1.47 s, fitting 16 GiB 0.80-0.83 against 0.77-0.81 s, one way alone no better
  /// (h200-20261128-c0add10-e2e-16Gi-mover-ab.txt).
  static bool memory_through_mover(bool in)
  {
    static const std::optional<std::string_view> how =
        switch_word("GPUSORT_MEMORY_MOVER", {"1", "0", "in", "out"});
    if (how == "0") return false;
    if (how == "in") return in;
    if (how == "out") return !in;
    return true;
  }

  /// The mover's threads read ahead (`move(ring, hand_on, reusable)`) into every piece whose
  /// last copy has left it, while this thread queues each piece's copy as soon as its bytes are
  /// in (pipeline/file_window.hpp says why this beats one parallel read per piece).
  template <class Move>
  void in_through_mover(char* d_dst, std::uint64_t bytes, cudaStream_t s, Move&& move)
  {
    const std::size_t first = static_cast<std::size_t>(next_ % piece_data_.size());
    const piece_mover::piece_fn hand_on = [&](std::size_t i, std::uint64_t off,
                                              std::uint64_t len) {
      GPUSORT_CUDA_TRY(
          cudaMemcpyAsync(d_dst + off, piece_data_[i], len, cudaMemcpyHostToDevice, s));
      done_[i].record(s);
      in_use_[i] = true;
    };
    // An event never recorded is complete: a piece no copy used yet is free at once.
    const piece_mover::buffer_fn reusable = [&](std::size_t i) { wait_for(i); };
    move(piece_mover::ring{.buffers = &piece_data_, .piece_bytes = piece_bytes_, .first = first},
         hand_on, reusable);
    next_ += (bytes + piece_bytes_ - 1) / piece_bytes_;
  }

  /// The other way: each copy out is queued as soon as the mover's threads have written out
  /// what its piece held before (this call's or an earlier one's), and they write each piece
  /// once it arrived; returns the mover's ticket once the last copy is queued.
  std::uint64_t out_through_mover(char* dst, const char* d_src, std::uint64_t bytes,
                                  cudaStream_t s)
  {
    const std::size_t first = static_cast<std::size_t>(next_ % piece_data_.size());
    const std::uint64_t ticket = mover().write_behind(
        dst, bytes, {.buffers = &piece_data_, .piece_bytes = piece_bytes_, .first = first},
        [&](std::size_t i, std::uint64_t off, std::uint64_t len) {
          GPUSORT_CUDA_TRY(
              cudaMemcpyAsync(piece_data_[i], d_src + off, len, cudaMemcpyDeviceToHost, s));
          done_[i].record(s);
          in_use_[i] = true;
        },
        [this](std::size_t i) { wait_for(i); });  // kept by the mover: nothing of this frame
    next_ += (bytes + piece_bytes_ - 1) / piece_bytes_;
    return ticket;
  }

  /// On a mover's thread: waits for piece i's last copy, on this staging's GPU (a thread of
  /// its own has no current device, and the runtime would make device 0's current).
  void wait_for(std::size_t i) const
  {
    const cuda::set_device_guard guard{device_};
    done_[i].synchronize();
  }

  /// Before this thread uses the pieces itself: the mover's writes behind are out of them.
  void settle()
  {
    if (mover_) mover_->settle();
  }

  /// Started on first use.
  piece_mover& mover()
  {
    if (!mover_) mover_ = std::make_unique<piece_mover>();
    return *mover_;
  }

  std::uint64_t piece_bytes_;
  int device_{};  ///< the GPU current when the pieces were pinned: the one whose copies use them
  host_buffer registered_;                      ///< the pieces, one after another
  std::vector<cuda::pinned_buffer> allocated_;  ///< or each piece apart
  std::vector<char*> piece_data_;               ///< the pieces, as the mover's ring
  std::vector<cuda::cuda_event> done_;
  std::vector<bool> in_use_;
  std::uint64_t next_{};
  std::vector<std::uint64_t> pack_at_;  ///< pack_in's run starts, kept from call to call
  std::unique_ptr<piece_mover> mover_;  ///< after the pieces: its threads stop before they go
};

/// Host -> device: queued on `s` when `src` is pinned, else staged through `st` (returns once
/// the last piece is queued).
inline void copy_to_device(char* d_dst, const void* src, std::uint64_t bytes, cudaStream_t s,
                           staging& st)
{
  if (bytes == 0) return;
  if (is_pinned(src))
    GPUSORT_CUDA_TRY(cudaMemcpyAsync(d_dst, src, bytes, cudaMemcpyHostToDevice, s));
  else
    st.copy_in(d_dst, static_cast<const char*>(src), bytes, s);
}

/// Device -> host: queued on `s` when `dst` is pinned, and for the parts of an output window
/// whose pages are locked (pipeline/file_window.hpp: locked_output_run), straight into them;
/// the rest staged through `st`. Where `behind` is given, the staged parts that the mover
/// writes are left to it, their tickets appended there (staging::finish waits for them);
/// else the call returns once those bytes are in `dst`.
inline void copy_to_host(void* dst, const char* d_src, std::uint64_t bytes, cudaStream_t s,
                         staging& st, std::vector<std::uint64_t>* behind = nullptr)
{
  if (bytes == 0) return;
  if (is_pinned(dst)) {
    GPUSORT_CUDA_TRY(cudaMemcpyAsync(dst, d_src, bytes, cudaMemcpyDeviceToHost, s));
    return;
  }
  char* const out = static_cast<char*>(dst);
  for (std::uint64_t at = 0; at < bytes;) {
    const locked_run run = locked_output_run(out + at, bytes - at);
    if (run.mapped != nullptr) {
      GPUSORT_CUDA_TRY(
          cudaMemcpyAsync(run.mapped, d_src + at, run.bytes, cudaMemcpyDeviceToHost, s));
    } else if (behind != nullptr) {
      if (const std::uint64_t ticket = st.copy_out_behind(out + at, d_src + at, run.bytes, s))
        behind->push_back(ticket);
    } else {
      st.copy_out(out + at, d_src + at, run.bytes, s);
    }
    at += run.bytes;
  }
}

}  // namespace gpusort::detail
