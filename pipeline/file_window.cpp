#include "pipeline/file_window.hpp"

#include "core/cpu_sort.hpp"

#include <gpusort/error.hpp>
#include <gpusort/gpusort.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <utility>

namespace gpusort {

namespace detail {

namespace {

struct window {
  std::uint64_t bytes{};
  int fd{-1};
  std::uint64_t offset{};
  std::string name;
};

/// Every live window by its first address. Looked up once per staged piece (tens of MiB), so a
/// shared lock and a map are far below the cost of the bytes moved.
class window_registry {
 public:
  void add(std::uintptr_t base, window w)
  {
    const std::unique_lock lock{mutex_};
    windows_.emplace(base, std::move(w));
  }
  void remove(std::uintptr_t base)
  {
    const std::unique_lock lock{mutex_};
    windows_.erase(base);
  }
  std::optional<file_place> find(std::uintptr_t p) const
  {
    const std::shared_lock lock{mutex_};
    auto it = windows_.upper_bound(p);
    if (it == windows_.begin()) return std::nullopt;
    --it;
    const std::uint64_t into = p - it->first;
    // A window of zero bytes still owns its first address (one reserved page).
    if (into > it->second.bytes || (into == it->second.bytes && it->second.bytes > 0))
      return std::nullopt;
    return file_place{.fd = it->second.fd,
                      .offset = it->second.offset + into,
                      .remaining = it->second.bytes - into,
                      .name = it->second.name};
  }

 private:
  mutable std::shared_mutex mutex_;
  std::map<std::uintptr_t, window> windows_;
};

window_registry& registry()
{
  static window_registry r;
  return r;
}

/// Blocks of 1 MiB: a 32 MiB staging piece keeps 16 threads busy, and a syscall per MiB costs
/// well under 1% of its copy.
constexpr std::uint64_t io_block = std::uint64_t{1} << 20;

enum class direction : std::uint8_t { read, write };

/// Moves `bytes` between memory and the file at `place` in blocks, several threads at once.
/// Buffered reads of one file scale with threads (the page cache is read under no lock);
/// buffered writes of one file take the inode's lock, so their threads mostly queue, but cost
/// nothing over one thread and let O_DIRECT-capable or networked files go in parallel.
void move_blocks(direction dir, const file_place& place, char* memory, std::uint64_t bytes)
{
  if (bytes > place.remaining)
    throw logic_error{"file window overrun: " + std::to_string(bytes) + " bytes at offset " +
                      std::to_string(place.offset) + " of " + place.name + " with " +
                      std::to_string(place.remaining) + " left"};
  const auto blocks = static_cast<std::int64_t>((bytes + io_block - 1) / io_block);
  std::atomic<int> failure{0};
  std::atomic<std::uint64_t> short_at{UINT64_MAX};
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (std::int64_t b = 0; b < blocks; ++b) {
    if (failure.load(std::memory_order_relaxed) != 0) continue;
    std::uint64_t done = static_cast<std::uint64_t>(b) * io_block;
    const std::uint64_t end = std::min(bytes, done + io_block);
    while (done < end) {
      const auto at = static_cast<off_t>(place.offset + done);
      const std::size_t len = end - done;
      const ssize_t got = dir == direction::read ? ::pread(place.fd, memory + done, len, at)
                                                 : ::pwrite(place.fd, memory + done, len, at);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        int expected = 0;
        failure.compare_exchange_strong(expected, errno);
        break;
      }
      if (got == 0) {  // a read at the end of the file: it is shorter than the window
        const std::uint64_t end_at = place.offset + done;
        std::uint64_t seen = short_at.load();
        while (end_at < seen && !short_at.compare_exchange_weak(seen, end_at)) {
        }
        int expected = 0;
        failure.compare_exchange_strong(expected, -1);
        break;
      }
      done += static_cast<std::uint64_t>(got);
    }
  }
  const int err = failure.load();
  if (err == 0) return;
  if (err == -1)
    throw io_error{place.name + " ends at byte " + std::to_string(short_at.load()) +
                   ", before the " + std::to_string(place.offset + bytes) +
                   " bytes it had when the job began: it shrank while it was read"};
  throw io_error{std::string{"cannot "} + (dir == direction::read ? "read " : "write ") +
                 place.name + " at byte " + std::to_string(place.offset) + ": " +
                 std::strerror(err)};
}

}  // namespace

std::optional<file_place> find_file_window(const void* p)
{
  return registry().find(reinterpret_cast<std::uintptr_t>(p));
}

void host_read(void* dst, const void* src, std::uint64_t bytes)
{
  if (bytes == 0) return;
  if (const std::optional<file_place> place = find_file_window(src))
    move_blocks(direction::read, *place, static_cast<char*>(dst), bytes);
  else
    parallel_copy(dst, src, bytes);
}

void host_write(void* dst, const void* src, std::uint64_t bytes)
{
  if (bytes == 0) return;
  if (const std::optional<file_place> place = find_file_window(dst))
    move_blocks(direction::write, *place, const_cast<char*>(static_cast<const char*>(src)),
                bytes);
  else
    parallel_copy(dst, src, bytes);
}

}  // namespace detail

file_array::file_array(int fd, std::uint64_t offset, std::uint64_t bytes, std::string name)
    : bytes_{bytes}
{
  if (fd < 0) throw invalid_argument{"file_array: " + name + ": no open descriptor"};
  if (offset > static_cast<std::uint64_t>(INT64_MAX) ||
      bytes > static_cast<std::uint64_t>(INT64_MAX) - offset)
    throw invalid_argument{"file_array: " + name + ": offset " + std::to_string(offset) + " + " +
                           std::to_string(bytes) + " bytes is past any file's end"};
  // Address space only: PROT_NONE and MAP_NORESERVE commit no memory, whatever the size.
  const std::size_t reserve = std::max<std::uint64_t>(bytes, 1);
  void* p = ::mmap(nullptr, reserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
                   0);
  if (p == MAP_FAILED) {
    const int err = errno;
    throw out_of_memory{"file_array: cannot reserve " + std::to_string(bytes) +
                        " bytes of address space for " + name + ": " + std::strerror(err)};
  }
  base_ = p;
  detail::registry().add(reinterpret_cast<std::uintptr_t>(p),
                         detail::window{.bytes = bytes, .fd = fd, .offset = offset,
                                        .name = std::move(name)});
}

void file_array::release() noexcept
{
  if (base_ == nullptr) return;
  detail::registry().remove(reinterpret_cast<std::uintptr_t>(base_));
  ::munmap(base_, std::max<std::uint64_t>(bytes_, 1));
  base_ = nullptr;
  bytes_ = 0;
}

file_array::~file_array() { release(); }

file_array::file_array(file_array&& other) noexcept
    : base_{std::exchange(other.base_, nullptr)}, bytes_{std::exchange(other.bytes_, 0)}
{
}

file_array& file_array::operator=(file_array&& other) noexcept
{
  if (this != &other) {
    release();
    base_ = std::exchange(other.base_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

}  // namespace gpusort
