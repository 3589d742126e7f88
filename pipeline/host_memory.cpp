#include "pipeline/host_memory.hpp"

#include "core/switches.hpp"
#include "core/sys_io.hpp"

#include <gpusort/error.hpp>
#include <gpusort/units.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>

namespace gpusort::detail {

std::uint64_t physical_memory_half() noexcept
{
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return std::uint64_t{1} << 30;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) / 2;
}

host_buffer::host_buffer(std::size_t bytes) : bytes_{bytes}
{
  if (bytes == 0) return;
  // Anonymous mappings: page-aligned, no initialisation pass, returned to the system on free.
  void* p = sys::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    throw out_of_memory{"cannot allocate " + format_bytes(bytes) + " of host memory: " +
                        std::strerror(err)};
  }
  data_ = p;
  count_held(held::host, static_cast<std::int64_t>(bytes));
  // Huge pages where the kernel has them to give: the copy engines walk a tenth as many
  // translations, and the CPU passes over the buffer miss the TLB less. Only advice: without
  // them the buffer works the same. GPUSORT_HOST_HUGE=0 leaves the advice out, for the A/B. On
  // the 2-core VM (a microVM that reports its free pages to its host) a first sort after a pause
  // is slow with or without it (1 GiB in place: 3.3-4.4 s advised, 3.0-3.3 s not), and the
  // advice wins the runs that follow (0.83-2.11 s against 1.30-2.11 s;
  // h200x2-20261130-s11/notes.md): the host backing reported memory again costs, not the THP.
  constexpr std::size_t huge_page = std::size_t{2} << 20;
  static const bool advise = switch_flag("GPUSORT_HOST_HUGE", true);
  if (bytes >= huge_page && advise) (void)::madvise(p, bytes, MADV_HUGEPAGE);
}

void host_buffer::populate() { populate_pages(data_, bytes_, page_contents::fresh); }

void populate_pages(void* data, std::size_t bytes, page_contents contents)
{
#ifndef MADV_POPULATE_WRITE
  constexpr int MADV_POPULATE_WRITE = 23;  // Linux 5.14; older kernels say EINVAL
#endif
  if (bytes == 0) return;
  // madvise takes whole pages: a caller's array (a std::vector, a NumPy array) seldom starts
  // on one, and the advice then failed with EINVAL for every piece, so the fallback below
  // wrote a zero into each page of the caller's data (gpu_test.RegisteredHostMemory... found
  // it). The pages around the array's ends are the same mapping's: faulting them in changes
  // nothing.
  const auto page = static_cast<std::uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto first = reinterpret_cast<std::uintptr_t>(data) / page * page;
  const auto end = (reinterpret_cast<std::uintptr_t>(data) + bytes + page - 1) / page * page;
  // 2 MiB pieces, one huge page each: 4096 of them for 8 GiB spread evenly over the cores.
  constexpr std::uintptr_t piece = std::uintptr_t{2} << 20;
  const auto pieces = static_cast<std::int64_t>((end - first + piece - 1) / piece);
#pragma omp parallel for schedule(static) if (pieces > 1)
  for (std::int64_t i = 0; i < pieces; ++i) {
    const std::uintptr_t at = first + static_cast<std::uintptr_t>(i) * piece;
    const std::uintptr_t len = std::min(piece, end - at);
    // The advice faults without writing. Where the kernel lacks it, a write per page does it,
    // but only in fresh memory: the caller's data stays as it is, and the driver faults its
    // pages in when it pins them.
    if (::madvise(reinterpret_cast<void*>(at), len, MADV_POPULATE_WRITE) == 0 ||
        contents != page_contents::fresh)
      continue;
    char* const base = static_cast<char*>(data);
    const std::uintptr_t lo = std::max(at, reinterpret_cast<std::uintptr_t>(data));
    const std::uintptr_t hi = std::min(at + len, reinterpret_cast<std::uintptr_t>(data) + bytes);
    for (std::uintptr_t b = lo; b < hi; b += page)
      base[b - reinterpret_cast<std::uintptr_t>(data)] = 0;
  }
}

void host_buffer::release() noexcept
{
  if (data_ == nullptr) return;
  if (release_) release_(data_, bytes_);
  ::munmap(data_, bytes_);
  count_held(held::host, -static_cast<std::int64_t>(bytes_));
  data_ = nullptr;
  bytes_ = 0;
  release_ = nullptr;
}

host_buffer::~host_buffer() { release(); }

host_buffer::host_buffer(host_buffer&& other) noexcept
    : data_{std::exchange(other.data_, nullptr)},
      bytes_{std::exchange(other.bytes_, 0)},
      release_{std::exchange(other.release_, nullptr)}
{
}

host_buffer& host_buffer::operator=(host_buffer&& other) noexcept
{
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    release_ = std::exchange(other.release_, nullptr);
  }
  return *this;
}

}  // namespace gpusort::detail
