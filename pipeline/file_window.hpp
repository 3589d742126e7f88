// Arrays that live in files, moved with positioned I/O instead of a mapping.
//
// A gpusort::file_array reserves an address range as large as the file range it stands for and
// never maps anything there (PROT_NONE). The engine's plans, tasks and slices compute addresses
// in it exactly as in memory; only the two places where host bytes move, host_read and
// host_write, look the address up and turn it into pread or pwrite at the matching file offset.
// A stray dereference faults at once instead of reading wrong data.
//
// Why not a mapping: a mapped input page-faults 4 KiB at a time on the hot path and raises
// SIGBUS when the file shrinks; a mapped output on tmpfs is bound by page creation in the fault
// handler (2.83 s for 16 GiB against 0.70 s on hugetlbfs, H100 host). Reads and writes of large
// blocks from several threads move the same bytes with one copy each, straight into or out of
// the pinned staging the copy engines use, and a file that changes size is an io_error.
#pragma once

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace gpusort::detail {

struct mapped_output;

/// Where an address inside a file window points: the file and the offset there, and how many
/// bytes of the window remain from it.
struct file_place {
  int fd{-1};
  std::uint64_t offset{};
  std::uint64_t remaining{};
  std::string name;  ///< for messages
  std::uint64_t into{};  ///< bytes from the window's first address
  std::shared_ptr<mapped_output> mapped;  ///< set while the window is written mapped
};

/// Outputs in tmpfs, written through a shared mapping whose pages a thread makes ahead.
///
/// Why: a new tmpfs file's pages are made one 4 KiB page at a time under the file's lock by
/// pwrite, and faulting them in through a mapping is no better; one fallocate makes them
/// several times faster, and copies into pages that exist run at memory speed. H100 host,
/// 8 GiB, 16 threads (bench/results/h100-20261125-f90a3d0-mem.json): pwrite of a new file
/// 3.24 s, mapped copies faulting new pages 1.82 s, fallocate 0.82 s, copies into existing
/// pages 0.11 s (pwrite into them: 2.20 s, the lock again). Mapping the made pages into the page
/// tables ahead of the copies (they fault once per 4 KiB: 8 GiB of round-2 copies take about
/// 0.77 s) did not pay: from 8 threads the out-of-core CLI went from 1.98 to 3.50 s, from the one
/// thread that made the pages from 2.08 to 2.78 s, fitting 2.41 to 4.11 s (it holds up the
/// registration of the round-1 buffer and the reads; bench/results/h100-20261125-efc544d-e2e.json,
/// -3df1942-map-ahead-e2e.json). Neither did the copying thread mapping its own 1 MiB piece in
/// one MADV_POPULATE_WRITE just before it copies: two runs of e2e_bench on the H100 host at 8 GiB
/// disagreed (out of core 2.59 -> 2.27 s, then 1.79 -> 2.33 s; fitting 1.99 -> 1.92, then 2.85 ->
/// 3.07 s; bench/results/h100-20261126-cc0a8fe-e2e-8Gi.json, -a2f6530-report/), so it is not kept.
///
/// Reading tmpfs inputs through a second descriptor opened with O_DIRECT, which io_bench found
/// twice as fast for 4 MiB reads (38.7 against 17.6 GB/s), made the engine's 1 MiB reads slower
/// in the same run: round 1's copy-in 0.344 -> 0.465 s, fitting 0.99 -> 1.16 s; not kept. Tried
/// again once the piece_mover read the inputs (H200 host, 70af7a2 with the twin and the mover's
/// block size as switches, 8 GiB, interleaved single runs,
/// bench/results/h200-20261128-70af7a2-e2e-8Gi-direct-ab/): io_bench there read 27.0 GB/s
/// buffered and 41.5 GB/s with O_DIRECT, but the daemon's round-1 copy-in from the file took
/// 0.46-0.51 s with the twin against 0.50-0.52 s without out of core and 0.41-0.42 against
/// 0.40-0.50 s fitting, the CLI's the same within its spread; 4 MiB blocks instead of 1 MiB
/// were slower with the twin (daemon 0.95 s out of core against 0.84-0.89) and without it
/// (pageable out of core 0.72 against 0.65 s). The copy-in shares the host's cores and memory
/// with the output's page makers (below); the read itself is not what bounds it. Not kept.
///
/// One file's 4 KiB pages are made one at a time under its locks: 16 threads making their own
/// files made 8 GiB in 0.22 s where one fallocate of one file took 0.94-1.80 s and 16 threads
/// faulting their parts of one file 1.80 s (mem_bench's make rows, H100 host,
/// bench/results/h100-20261126-40452f9-mem-chase.json). So the makers make every whole 2 MiB
/// page of the file as one huge folio instead (MADV_COLLAPSE of a range holding one populated
/// page: the locks once per 512 pages, and the copies later fault once per 2 MiB), from
/// tmpfs_page_making::makers threads, with fallocate for the parts before the first and after
/// the last huge page boundary and wherever the kernel cannot (mapped_output::huge_pages_made
/// in file_window.cpp says when it gives up). A new 2 GiB /dev/shm output made and filled:
/// 4.82 s with 4 KiB pages, 0.25-0.28 s with 2 MiB pages, on the 2-core VM with the H100 host's
/// kernel (6.18.44; bench/results/dev2core-20261127-d55ea25-io-pages-2Gi.json); not yet
/// measured on the H100 host. The thread starts as early as it can: file_array::prepare_output
/// lets the CLI start it before the engine (CUDA) does.
///
/// While a job runs, host_write into such a window waits until the page makers have made
/// every page of it, then copies with every core (a full tmpfs is a clear io_error, not a
/// SIGBUS). Copies that fault pages in while fallocate still runs slow both: in one run of
/// e2e_bench (8 GiB, 3 runs each, medians, H100 host at 15f0ad2) waiting for every page took
/// the CLI's fitting job from 2.26 to 1.67 s and its out-of-core job from 2.41 to 2.10 s, the
/// daemon's fitting job from 2.40 to 1.48-2.21 s (two runs), its out-of-core job from 1.81 to
/// 1.93-2.38 s (bench/results/h100-20261126-15f0ad2-e2e-8Gi{,-write-all}.json). mem_bench's
/// chase rows agree on the direction (fill_after against fill_behind). GPUSORT_TMPFS_WRITE=
/// behind makes each write wait only for its own pages, as before, for the A/B.
///
/// A file another process truncates meanwhile raises SIGBUS in the copy; a handler
/// turns it into an io_error for that copy only and passes every other SIGBUS on. Reads of the
/// window stay positioned reads.
///
/// With a page_locker (a GPU engine's), the copy engines write such an output straight into its
/// pages: a thread of the mapping locks each 64 MiB unit of it once the page makers made the
/// unit as 2 MiB pages (only those: registering 8 GiB of 4 KiB tmpfs pages took 2.1 s, of
/// 2 MiB pages 0.18-0.22 s from 1 to 16 threads, on the H100 host, bench/results/
/// h100-20261128-2157ea0-register.json), and locked_output_run tells the GPU's copy-out which
/// parts of a range it may write directly (the rest goes through the pinned staging and
/// host_write as before). A truncation meanwhile raises no signal in a DMA: check_sizes says so
/// instead. The engine hands one over only where GPUSORT_OUTPUT_LOCK=1 asks: when it was made,
/// the staged copy-out ran at 16-17 GB/s and the locked one at the link's speed; since the
/// staging's copies stream (core/stream_copy.hpp) and one mover waits per piece (piece_mover),
/// the staged copy-out runs at the link's speed too, and the registrations only slow the copy-in
/// beside them (design.md, "The data path", has the numbers).
class page_locker;
class output_mappings {
 public:
  output_mappings() = default;
  /// Maps each (address, bytes) that is the start of a file window on tmpfs, opened for
  /// reading and writing, and starts making its pages; anything else is left to pwrite. With
  /// `locker`, the pages of these windows (and of ones mapped already, by
  /// file_array::prepare_output) are locked as they are made, for the copy engines.
  explicit output_mappings(std::initializer_list<std::pair<const void*, std::uint64_t>> outputs,
                           std::shared_ptr<page_locker> locker = nullptr);
  ~output_mappings();
  output_mappings(const output_mappings&) = delete;
  output_mappings& operator=(const output_mappings&) = delete;
  output_mappings(output_mappings&&) = delete;
  output_mappings& operator=(output_mappings&&) = delete;

  [[nodiscard]] std::size_t size() const noexcept { return bases_.size(); }

  /// After the job's last write: an io_error where a window written through locked pages
  /// belongs to a file that is now shorter than the window (cut by another process while the
  /// copy engines wrote pages it no longer has).
  void check_sizes() const;

 private:
  std::vector<const void*> bases_;   ///< the windows this object mapped (and detaches)
  std::vector<const void*> locked_;  ///< the windows whose pages it had locked
};

/// Page-locks host memory for the copy engines and unlocks it: what a GPU engine hands
/// output_mappings (pipeline/cuda/page_locker.hpp), a test its own.
class page_locker {
 public:
  page_locker() = default;
  virtual ~page_locker() = default;
  page_locker(const page_locker&) = delete;
  page_locker& operator=(const page_locker&) = delete;
  page_locker(page_locker&&) = delete;
  page_locker& operator=(page_locker&&) = delete;
  /// False where the pages could not be locked: the copies then go through host_write.
  virtual bool lock(void* data, std::size_t bytes) noexcept = 0;
  /// Undoes one successful lock of exactly (data, bytes).
  virtual void unlock(void* data, std::size_t bytes) noexcept = 0;
};

/// What the copy engines may write of [dst, dst + bytes): its first `bytes` are at `mapped` in
/// locked pages of an output window, or (mapped null) are not, and go through host_write. A
/// run never spans two locks.
struct locked_run {
  char* mapped{};
  std::uint64_t bytes{};
};
locked_run locked_output_run(const void* dst, std::uint64_t bytes);

/// Bytes of output windows this process locked for the copy engines so far (tests, benches).
std::uint64_t tmpfs_locked_bytes() noexcept;

/// Waits until every output mapping that went is unlocked and unmapped: those happen on a
/// thread of their own (8 GiB: unregister 0.16 s, munmap 0.13 s on the H100 host), off a job's
/// path. For tests that count what a job left behind.
void wait_for_output_releases();

/// Maps the output window at `address` (its first `bytes`) and starts its page-making thread,
/// where it is a tmpfs file open for reading and writing and not mapped already: what
/// output_mappings does for a job, and file_array::prepare_output before one. False where the
/// window is left to pwrite.
bool start_output_mapping(const void* address, std::uint64_t bytes);

/// How the pages of new tmpfs outputs are made: `huge`, as 2 MiB folios where the kernel can
/// (MADV_COLLAPSE), by `makers` threads; else 4 KiB pages by one fallocate thread.
struct tmpfs_page_making {
  bool huge{true};
  unsigned makers{1};
  /// Huge pages made slower than this (GB/s, over all the makers' steps so far, judged past the
  /// first 64 MiB) stop the makers trying them for the rest of the file; 0: never.
  double give_up_below_gbps{0.5};
};
/// The environment's choice (GPUSORT_TMPFS_HUGE, GPUSORT_TMPFS_MAKERS) until replaced here, for
/// tests and same-run A/B measurements; returns the one it replaced. Outputs mapped afterwards
/// take it.
tmpfs_page_making set_tmpfs_page_making(tmpfs_page_making making);
tmpfs_page_making current_tmpfs_page_making();

/// Bytes of tmpfs outputs this process made as 2 MiB pages so far (the page makers' total, for
/// tests and measurements).
std::uint64_t tmpfs_huge_bytes_made() noexcept;

/// The file behind `p`, or nullopt when `p` is ordinary memory.
std::optional<file_place> find_file_window(const void* p);

/// Copies `bytes` from `src` (memory or a file window) into memory at `dst`, with several
/// threads. Throws io_error when the file ends early or a read fails.
void host_read(void* dst, const void* src, std::uint64_t bytes);

/// Copies `bytes` from memory at `src` to `dst` (memory or a file window), with several threads.
/// Throws io_error when a write fails (a full disk: ENOSPC, EFBIG, EIO).
void host_write(void* dst, const void* src, std::uint64_t bytes);

/// Moves a file window (or memory, or runs of either: gather) through a ring of buffers, a
/// piece at a time, with threads of its own that read ahead of (or write behind) the thread
/// that hands the pieces on: what the GPU staging does with arrays it did not pin
/// (pipeline/cuda/staging.hpp).
///
/// Why not one parallel read per piece (what the staging did before, through host_read): each
/// 32 MiB piece forked 16 threads for two 1 MiB reads each and joined them before its copy was
/// queued, so every piece waited for its slowest thread (one that shares its core with the
/// tmpfs output's fallocate thread or the driver's), no thread read the next piece meanwhile,
/// and a fitting job read its input at 7-10 GB/s where round 1 of the same file reached 18-23
/// and 16 threads of pread 37 GB/s (H100 host, bench/results/h100-20261126-cc0a8fe-e2e-8Gi.json,
/// -f90a3d0-mem.json). Here the threads take 1 MiB blocks in order from a shared counter and
/// wait only for the buffer they fill (reading) or the piece they write out (writing), so up to
/// the ring's size of pieces are in flight and a slow thread holds back its own block alone. A
/// read shorter than a block for every thread is cut into blocks of a thread's share (512 KiB
/// at least), and writes may go on behind the caller into the next range's call
/// (write_behind): a GPU's chunks of a few MiB each, at a small device budget (issue 44).
/// io_bench --staging measures the two schemes side by side without a GPU.
///
/// One thread waits at a piece's gate (the GPU staging's event synchronize, which spins) while
/// the others that took blocks of the piece sleep: with every thread at the gate, 16 threads
/// spun on the cores the copies needed, and an 8 GiB fitting job's staged copy-out into a tmpfs
/// output took 0.43 s (H100 host, e448fb7); with one waiter, 0.16 s with streaming stores and
/// 0.18 s without (H200 host, bench/results/h200-20261128-542df1b-e2e-8Gi-ab/, nolock and
/// nolock_nt0). The machines differ, and the waiter was not measured apart.
///
/// The blocks go through host_read and host_write: a file that shrinks is the same io_error, a
/// mapped tmpfs output keeps its SIGBUS guard, and the sys_io fault seams still apply.
class piece_mover {
 public:
  /// `threads`: how many move blocks (0: as many as OpenMP would use); started on first use.
  explicit piece_mover(unsigned threads = 0);
  ~piece_mover();
  piece_mover(const piece_mover&) = delete;
  piece_mover& operator=(const piece_mover&) = delete;
  piece_mover(piece_mover&&) = delete;
  piece_mover& operator=(piece_mover&&) = delete;

  /// The ring: `buffers[i]` holds `piece_bytes`; piece p of a call goes through buffer
  /// (first + p) % buffers.size().
  struct ring {
    const std::vector<char*>* buffers{};
    std::uint64_t piece_bytes{};
    std::size_t first{};
  };
  /// Called with the buffer's index, the piece's offset from the call's first byte, its length.
  using piece_fn = std::function<void(std::size_t buffer, std::uint64_t offset,
                                      std::uint64_t bytes)>;
  /// Called on a mover thread with a buffer's index (see read and write).
  using buffer_fn = std::function<void(std::size_t buffer)>;

  /// Reads [src, src + bytes) (a file window or memory) into the ring and calls `hand_on` on
  /// this thread for each piece, in order, once its bytes are in. Before a thread reads into a
  /// buffer it calls `reusable(buffer)`, which returns once what hand_on started from it (a
  /// copy) no longer needs it, or at once where nothing did. Returns once the last piece is
  /// handed on and no thread touches the buffers; the first error (a read's, hand_on's,
  /// reusable's) is rethrown then.
  void read(const void* src, std::uint64_t bytes, const ring& r, const piece_fn& hand_on,
            const buffer_fn& reusable);

  /// Writes [dst, dst + bytes) (a file window or memory) from the ring: `fill` on this thread
  /// starts filling each piece's buffer, in order, once the threads wrote the piece that was in
  /// it before; a thread calls `filled(buffer)`, which returns once the bytes are there, before
  /// it writes them out. Returns once every byte is in `dst`; errors as for read.
  void write(void* dst, std::uint64_t bytes, const ring& r, const piece_fn& fill,
             const buffer_fn& filled);

  /// write() that returns once `fill` has been called for every piece, the threads writing
  /// the last pieces out behind the caller; finish(ticket) waits for them. The next call's
  /// pieces wait only for the buffers they reuse, so its fills overlap these writes: a GPU
  /// storing chunks of a few MiB one after another into a file otherwise paid a wake-up, a
  /// copy and a write in turn for each (issue 44). `filled` is kept until the writes end;
  /// `dst` and the ring's buffers must outlive them. Ticket 0: nothing to wait for. An error
  /// is rethrown by finish, or by this call where it stopped the handing on of pieces.
  [[nodiscard]] std::uint64_t write_behind(void* dst, std::uint64_t bytes, const ring& r,
                                           const piece_fn& fill, const buffer_fn& filled);

  /// Returns once the write_behind of `ticket` has every byte in its `dst` (at once for 0 or a
  /// ticket already finished); rethrows its first error. Tickets may finish in any order and
  /// from another thread than the one that wrote.
  void finish(std::uint64_t ticket);

  /// Returns once no write behind touches the ring's buffers (written or stopped), for a
  /// caller about to use them itself; their errors stay for finish.
  void settle();

  /// settle(), then forgets the writes behind not finished, and their errors: for a caller
  /// whose job failed before it finished them.
  void abandon();

  /// Bytes at `data` (memory or a file window), one of the runs that gather reads.
  struct source_run {
    const char* data{};
    std::uint64_t bytes{};
  };
  /// read() of the runs one after another, as if they were one range as long as all of them:
  /// the slices of a round-2 task into the ring, so that a piece carries many slices and one
  /// copy, and the threads keep every piece busy however short the slices are. `runs` must
  /// outlive the call.
  void gather(const std::vector<source_run>& runs, const ring& r, const piece_fn& hand_on,
              const buffer_fn& reusable);

  [[nodiscard]] unsigned threads() const noexcept { return threads_; }

 private:
  struct job;
  /// Hands the job's pieces on (`step`); returns its ticket while its writes go on where
  /// `behind`, else once it is done (rethrowing its error).
  std::uint64_t run(const std::shared_ptr<job>& j, const piece_fn& step, bool behind);
  void work();
  void work_on(job& j, std::unique_lock<std::mutex>& lock);
  // Under mutex_:
  [[nodiscard]] std::uint64_t block_for(const job& j) const;
  [[nodiscard]] std::shared_ptr<job> next_job() const;
  [[nodiscard]] bool buffer_free(const job& j, std::size_t buffer) const;
  void end(const std::shared_ptr<job>& j, std::unique_lock<std::mutex>& lock);
  void settle(std::unique_lock<std::mutex>& lock);

  unsigned threads_;
  std::mutex mutex_;
  std::condition_variable changed_;  // a job came or ended, a piece advanced, a thread left
  std::deque<std::shared_ptr<job>> jobs_;  // under mutex_: in the order they came
  std::uint64_t tickets_{};                // under mutex_: one per job
  bool closing_{};                         // under mutex_
  std::vector<std::thread> workers_;
};

/// Writes n elements that `produce(out, first, count)` computes (elements [first, first +
/// count) of the result, into `out`) to `dst`: straight into memory, or a piece at a time
/// through a bounded buffer into a file window, so that results made on the host (a
/// compensated tail, a restored input) need no copy of their whole size.
template <typename T, typename Produce>
void produce_into(T* dst, std::uint64_t n, Produce&& produce)
{
  if (!find_file_window(dst)) {
    produce(dst, std::uint64_t{0}, n);
    return;
  }
  const std::uint64_t piece = std::min<std::uint64_t>(n, std::uint64_t{1} << 20);
  std::vector<T> buffer(piece);
  for (std::uint64_t at = 0; at < n; at += piece) {
    const std::uint64_t count = std::min(piece, n - at);
    produce(buffer.data(), at, count);
    host_write(dst + at, buffer.data(), count * sizeof(T));
  }
}

}  // namespace gpusort::detail
