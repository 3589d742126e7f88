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
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
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
/// in the same run: round 1's copy-in 0.344 -> 0.465 s, fitting 0.99 -> 1.16 s; not kept.
///
/// While a job runs, host_write into such a window waits until the fallocate thread has made
/// the pages it writes (a full tmpfs is then a clear io_error, not a SIGBUS) and copies with
/// every core. A file another process truncates meanwhile raises SIGBUS in the copy; a handler
/// turns it into an io_error for that copy only and passes every other SIGBUS on. Reads of the
/// window stay positioned reads.
class output_mappings {
 public:
  output_mappings() = default;
  /// Maps each (address, bytes) that is the start of a file window on tmpfs, opened for
  /// reading and writing, and starts making its pages; anything else is left to pwrite.
  explicit output_mappings(std::initializer_list<std::pair<const void*, std::uint64_t>> outputs);
  ~output_mappings();
  output_mappings(const output_mappings&) = delete;
  output_mappings& operator=(const output_mappings&) = delete;
  output_mappings(output_mappings&&) = delete;
  output_mappings& operator=(output_mappings&&) = delete;

  [[nodiscard]] std::size_t size() const noexcept { return bases_.size(); }

 private:
  std::vector<const void*> bases_;
};

/// The file behind `p`, or nullopt when `p` is ordinary memory.
std::optional<file_place> find_file_window(const void* p);

/// Copies `bytes` from `src` (memory or a file window) into memory at `dst`, with several
/// threads. Throws io_error when the file ends early or a read fails.
void host_read(void* dst, const void* src, std::uint64_t bytes);

/// Copies `bytes` from memory at `src` to `dst` (memory or a file window), with several threads.
/// Throws io_error when a write fails (a full disk: ENOSPC, EFBIG, EIO).
void host_write(void* dst, const void* src, std::uint64_t bytes);

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
