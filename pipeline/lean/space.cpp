#include "pipeline/lean/space.hpp"

#include "core/sys_io.hpp"
#include "pipeline/file_window.hpp"

#include <gpusort/error.hpp>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <string>

namespace gpusort::detail::lean {

namespace {

/// Whether the kernel copied `bytes` between the two file places itself; false where it
/// cannot here (another file system, a kernel without it), and the caller copies instead.
bool kernel_copy(const file_place& to, const file_place& from, std::uint64_t bytes)
{
  auto in = static_cast<loff_t>(from.offset);
  auto out = static_cast<loff_t>(to.offset);
  std::uint64_t left = bytes;
  while (left > 0) {
    // A fault plan that fails writes fails this copy too, so the sweeps reach it.
    if (fault::hit(fault::site::write)) {
      errno = fault::error_for(fault::site::write);
      throw io_error{"cannot write " + to.name + ": " + std::strerror(errno)};
    }
    const ssize_t done = ::copy_file_range(from.fd, &in, to.fd, &out, left, 0);
    if (done > 0) {
      left -= static_cast<std::uint64_t>(done);
      continue;
    }
    if (done == 0) throw io_error{"cannot read " + from.name + ": the file ended early"};
    if (errno == EINTR) continue;
    if (left == bytes && (errno == EXDEV || errno == EINVAL || errno == EOPNOTSUPP ||
                          errno == ENOSYS || errno == EBADF))
      return false;
    throw io_error{"cannot copy within " + to.name + ": " + std::strerror(errno)};
  }
  return true;
}

void copy_bytes(char* to, const char* from, std::uint64_t bytes, bounce_buffer& bounce)
{
  if (bytes == 0) return;
  const std::optional<file_place> src = find_file_window(from);
  const std::optional<file_place> dst = find_file_window(to);
  if (!src && !dst) {
    std::memcpy(to, from, bytes);
    return;
  }
  if (src && dst && !dst->mapped && kernel_copy(*dst, *src, bytes)) return;
  constexpr std::uint64_t piece = bounce_bytes;
  bounce.resize(std::max<std::size_t>(bounce.size(), std::min(piece, bytes)));
  for (std::uint64_t at = 0; at < bytes; at += piece) {
    const std::uint64_t len = std::min(piece, bytes - at);
    host_read(bounce.data(), from + at, len);
    host_write(to + at, bounce.data(), len);
  }
}

}  // namespace

void copy_elements(const space& s, std::uint64_t to, std::uint64_t from, std::uint64_t length,
                   bounce_buffer& bounce)
{
  if (length == 0 || to == from) return;
  copy_bytes(s.key_at(to), s.key_at(from), length * s.key_bytes, bounce);
  if (s.value_bytes > 0)
    copy_bytes(s.value_at(to), s.value_at(from), length * s.value_bytes, bounce);
}

template <typename K>
K read_key(const space& s, std::uint64_t x)
{
  K k{};
  const char* at = s.key_at(x);
  if (find_file_window(at))
    host_read(&k, at, sizeof(K));
  else
    std::memcpy(&k, at, sizeof(K));
  return k;
}

template std::uint32_t read_key<std::uint32_t>(const space&, std::uint64_t);
template std::uint64_t read_key<std::uint64_t>(const space&, std::uint64_t);

}  // namespace gpusort::detail::lean
