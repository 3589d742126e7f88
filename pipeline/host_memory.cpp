#include "pipeline/host_memory.hpp"

#include <gpusort/error.hpp>
#include <gpusort/units.hpp>

#include <sys/mman.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace gpusort::detail {

host_buffer::host_buffer(std::size_t bytes) : bytes_{bytes}
{
  if (bytes == 0) return;
  // Anonymous mappings: page-aligned, no initialisation pass, returned to the system on free.
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    const int err = errno;
    throw out_of_memory{"cannot allocate " + format_bytes(bytes) + " of host memory: " +
                        std::strerror(err)};
  }
  data_ = p;
  // Huge pages where the kernel has them to give: the copy engines walk a tenth as many
  // translations, and the CPU passes over the buffer miss the TLB less. Only advice: without
  // them the buffer works the same.
  constexpr std::size_t huge_page = std::size_t{2} << 20;
  if (bytes >= huge_page) (void)::madvise(p, bytes, MADV_HUGEPAGE);
}

void host_buffer::release() noexcept
{
  if (data_ == nullptr) return;
  if (release_) release_(data_, bytes_);
  ::munmap(data_, bytes_);
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
