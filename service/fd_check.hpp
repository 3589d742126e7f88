// Checks a descriptor a client passed (SCM_RIGHTS) before the daemon touches its data.
//
// The daemon never opens a path a client names; it gets descriptors, and trusts nothing about
// them: the kind of file comes from fstat, the size from fstat (never from the request), the
// access from fcntl(F_GETFL), and the requested range is overflow-checked in 64 bits.
//
// SIGBUS. A shared mapping of a file that someone truncates raises SIGBUS on the next access to
// a page past the new end, which would kill the daemon and every client's job with it. So:
//  - shared memory (a memfd) is mapped only when it carries F_SEAL_SHRINK: then no one, not even
//    the client, can make it smaller than the size fstat reported, and the checked range stays
//    backed for as long as the mapping lives. A memfd without the seal is refused.
//  - plain files are never mapped: the engine reads and writes them with pread/pwrite through
//    its pinned staging (gpusort::file_array). A file truncated mid-job then makes a read come
//    up short, which is an io_error for that job alone.
// A tmpfs file (/dev/shm, a tmpfs /tmp) answers F_GET_SEALS like a memfd that cannot be sealed;
// it is told apart by its /proc/self/fd link (memfds read "/memfd:NAME (deleted)") and treated
// as a plain file.
#pragma once

#include "service/unique_fd.hpp"

#include <gpusort/error.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpusort::service {

enum class fd_error : std::uint8_t {
  not_regular,     ///< not a regular file (directory, pipe, socket, device) or not open at all
  too_small,       ///< offset + length past the end of the file
  bad_offset,      ///< offset past the end, or not a multiple of the element size
  overflow,        ///< offset + length does not fit in 64 bits
  not_multiple,    ///< length not a multiple of the element size
  not_readable,    ///< opened O_WRONLY or O_PATH
  not_writable,    ///< an output opened read-only or O_APPEND, or a write-sealed memfd
  unsealed_memfd,  ///< a memfd without F_SEAL_SHRINK
  map_failed,      ///< mmap refused the checked range
};

/// "not_regular", "too_small", ...: the names the protocol uses.
std::string_view name_of(fd_error e) noexcept;

/// A descriptor or range that failed a check; `reason()` is what the protocol reports.
class fd_check_error : public invalid_argument {
 public:
  fd_check_error(fd_error reason, const std::string& message);
  [[nodiscard]] fd_error reason() const noexcept { return reason_; }

 private:
  fd_error reason_;
};

enum class fd_access : std::uint8_t {
  read,        ///< an input
  read_write,  ///< an output, or an input sorted in place
};

struct fd_range {
  std::uint64_t offset{};
  /// Bytes from `offset`; nullopt: up to the end of the file as fstat reports it.
  std::optional<std::uint64_t> length{};
  std::uint64_t element_size{};  ///< bytes per element; must be positive
  fd_access access{fd_access::read};
};

enum class fd_kind : std::uint8_t {
  sealed_memory,  ///< shared memory with F_SEAL_SHRINK: may be mapped (map_region)
  plain_file,     ///< read and written by the engine (file_array), never mapped
};

/// A descriptor that passed check_fd, with the checked range. Borrows the descriptor: the
/// caller keeps it open while this is used.
struct checked_fd {
  int fd{-1};
  fd_kind kind{};
  fd_access access{};
  std::uint64_t file_size{};  ///< from fstat
  std::uint64_t offset{};
  std::uint64_t length{};
};

/// Throws fd_check_error naming the first check that failed.
checked_fd check_fd(int fd, const fd_range& range);

/// A shared mapping of exactly a checked range (mmap starts at the page below `offset`).
class mapped_region {
 public:
  mapped_region() = default;
  [[nodiscard]] std::byte* data() const noexcept { return data_; }
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
  [[nodiscard]] bool writable() const noexcept { return writable_; }

 private:
  friend mapped_region map_region(const checked_fd& checked);
  unique_mapping map_;
  std::byte* data_{};
  std::uint64_t size_{};
  bool writable_{};
};

/// Maps a checked range of shared memory (kind sealed_memory only: plain files are not mapped),
/// writable when it was checked for read_write. An empty range maps nothing. Throws
/// fd_check_error(map_failed).
mapped_region map_region(const checked_fd& checked);

}  // namespace gpusort::service
