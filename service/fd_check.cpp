#include "service/fd_check.hpp"

#include "core/checks.hpp"
#include "core/sys_io.hpp"

#include <gpusort/units.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>

namespace gpusort::service {

namespace sys = detail::sys;

namespace {

[[noreturn]] void fail(fd_error reason, const std::string& message)
{
  throw fd_check_error{reason, "descriptor rejected (" + std::string{name_of(reason)} + "): " +
                                   message};
}

std::string errno_text(int err) { return std::strerror(err); }

// A memfd's /proc/self/fd link reads "/memfd:NAME (deleted)"; a tmpfs file's is its path.
// When /proc cannot tell (not mounted), the answer is "memfd": refusing is the safe side.
bool is_memfd(int fd)
{
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  std::array<char, 16> buf{};
  const ssize_t n = ::readlink(link.c_str(), buf.data(), buf.size());
  if (n < 0) return true;
  constexpr std::string_view prefix{"/memfd:"};
  return std::string_view{buf.data(), static_cast<std::size_t>(n)}.starts_with(prefix);
}

}  // namespace

std::string_view name_of(fd_error e) noexcept
{
  switch (e) {
    case fd_error::not_regular: return "not_regular";
    case fd_error::too_small: return "too_small";
    case fd_error::bad_offset: return "bad_offset";
    case fd_error::overflow: return "overflow";
    case fd_error::not_multiple: return "not_multiple";
    case fd_error::not_readable: return "not_readable";
    case fd_error::not_writable: return "not_writable";
    case fd_error::unsealed_memfd: return "unsealed_memfd";
    case fd_error::map_failed: return "map_failed";
  }
  return "unknown";
}

fd_check_error::fd_check_error(fd_error reason, const std::string& message)
    : invalid_argument{message}, reason_{reason}
{
}

checked_fd check_fd(int fd, const fd_range& range)
{
  GPUSORT_EXPECTS(range.element_size > 0, "element size of a descriptor check must be positive");
  const bool output = range.access == fd_access::read_write;

  struct stat st {};
  if (sys::fstat(fd, &st) != 0) fail(fd_error::not_regular, "fstat failed: " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) {
    const char* what = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a pipe"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                                              : "not a regular file";
    fail(fd_error::not_regular, std::string{"the descriptor is "} + what);
  }

  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) fail(fd_error::not_readable, "F_GETFL failed: " + errno_text(errno));
  // O_PATH descriptors report O_RDONLY (0) in their access bits but allow no I/O at all.
  if ((flags & O_PATH) != 0) fail(fd_error::not_readable, "the descriptor was opened O_PATH");
  const int mode = flags & O_ACCMODE;
  if (mode == O_WRONLY) fail(fd_error::not_readable, "the descriptor was opened write-only");
  if (output && mode != O_RDWR)
    fail(fd_error::not_writable, "an output must be opened read-write; this one is read-only");
  // pwrite on an O_APPEND descriptor ignores its offset and appends.
  if (output && (flags & O_APPEND) != 0)
    fail(fd_error::not_writable, "an output must not be opened O_APPEND");

  fd_kind kind = fd_kind::plain_file;
  if (const int seals = ::fcntl(fd, F_GET_SEALS); seals >= 0) {
    if ((seals & F_SEAL_SHRINK) != 0) {
      kind = fd_kind::sealed_memory;
      int write_seals = F_SEAL_WRITE;
#ifdef F_SEAL_FUTURE_WRITE
      write_seals |= F_SEAL_FUTURE_WRITE;
#endif
      if (output && (seals & write_seals) != 0)
        fail(fd_error::not_writable, "an output memfd carries a write seal");
    } else if (is_memfd(fd)) {
      fail(fd_error::unsealed_memfd,
           "a memfd must carry F_SEAL_SHRINK (memfd_create with MFD_ALLOW_SEALING, then "
           "fcntl(F_ADD_SEALS, F_SEAL_SHRINK)), else it could shrink under the daemon's mapping");
    }
    // else: a tmpfs file, which cannot be sealed: staged like any plain file.
  }

  const auto size = static_cast<std::uint64_t>(st.st_size);
  const std::uint64_t esize = range.element_size;
  const std::uint64_t offset = range.offset;
  if (range.length && *range.length > std::numeric_limits<std::uint64_t>::max() - offset)
    fail(fd_error::overflow, "offset " + std::to_string(offset) + " + length " +
                                 std::to_string(*range.length) + " overflows 64 bits");
  if (offset > size)
    fail(fd_error::bad_offset, "offset " + std::to_string(offset) + " is past the end of the " +
                                   std::to_string(size) + "-byte file");
  if (offset % esize != 0)
    fail(fd_error::bad_offset, "offset " + std::to_string(offset) +
                                   " is not a multiple of the element size " +
                                   std::to_string(esize));
  const std::uint64_t length = range.length.value_or(size - offset);
  if (length > size - offset)
    fail(fd_error::too_small, "offset " + std::to_string(offset) + " + length " +
                                  std::to_string(length) + " is past the end of the " +
                                  std::to_string(size) + "-byte file");
  if (length % esize != 0)
    fail(fd_error::not_multiple, "length " + std::to_string(length) +
                                     " is not a multiple of the element size " +
                                     std::to_string(esize));
  return checked_fd{.fd = fd,
                    .kind = kind,
                    .access = range.access,
                    .file_size = size,
                    .offset = offset,
                    .length = length};
}

mapped_region map_region(const checked_fd& checked)
{
  GPUSORT_EXPECTS(checked.kind == fd_kind::sealed_memory,
                  "only shrink-sealed shared memory is mapped; plain files are staged");
  mapped_region region;
  region.writable_ = checked.access == fd_access::read_write;
  if (checked.length == 0) return region;
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::uint64_t start = checked.offset / page * page;
  const std::uint64_t lead = checked.offset - start;
  // check_fd bounded offset + length by the file size, which fits in off_t.
  const std::uint64_t span = lead + checked.length;
  if (span > std::numeric_limits<std::size_t>::max())
    fail(fd_error::map_failed, "the range does not fit in the address space");
  const int prot = PROT_READ | (region.writable_ ? PROT_WRITE : 0);
  void* p = sys::mmap(nullptr, span, prot, MAP_SHARED, checked.fd, static_cast<off_t>(start));
  if (p == MAP_FAILED)
    fail(fd_error::map_failed, "mmap of " + format_bytes(span) + " failed: " + errno_text(errno));
  region.map_ = unique_mapping{p, span};
  region.data_ = static_cast<std::byte*>(p) + lead;
  region.size_ = checked.length;
  return region;
}

}  // namespace gpusort::service
