#include "service/buffer_pool.hpp"
#include "core/sys_io.hpp"

#include <gpusort/error.hpp>
#include <gpusort/units.hpp>

#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <string>
#include <system_error>
#include <utility>

namespace gpusort::service {

namespace sys = detail::sys;

struct buffer_pool::buffer {
  std::uint64_t id{};
  unique_fd fd;
  unique_mapping map;
  std::uint64_t size{};
  bool pinned{};
  std::uint32_t uid{};
  std::uint64_t session{};
  bool held{};                // a client holds it under `id`
  std::uint32_t leases{};     // jobs (or an allocation being finished) using it
  std::uint64_t released_at{};  // tick of its return to the cache, for oldest-first eviction

  [[nodiscard]] bool cached() const noexcept { return !held && leases == 0; }
  [[nodiscard]] std::byte* data() const noexcept { return static_cast<std::byte*>(map.base()); }
};

namespace {

[[noreturn]] void throw_errno(int err, const std::string& what, std::uint64_t bytes)
{
  const std::string msg = "buffer pool: " + what + " for a buffer of " + format_bytes(bytes) +
                          ": " + std::strerror(err);
  if (err == ENOMEM || err == ENOSPC) throw out_of_memory{msg};
  throw std::system_error{err, std::generic_category(), msg};
}

/// How many buffers may be open at once: half of the descriptors RLIMIT_NOFILE allows now.
std::uint64_t descriptor_share()
{
  rlimit r{};
  if (::getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY)
    return std::uint64_t{1} << 20;
  return std::max<std::uint64_t>(8, static_cast<std::uint64_t>(r.rlim_cur) / 2);
}

unique_fd make_memfd(std::uint64_t bytes)
{
  // MFD_NOEXEC_SEAL (Linux 6.3) also seals the buffer against ever becoming executable; older
  // kernels reject the flag with EINVAL and get a plain sealable memfd.
  constexpr unsigned base_flags = MFD_CLOEXEC | MFD_ALLOW_SEALING;
#ifdef MFD_NOEXEC_SEAL
  int fd = sys::memfd_create("gpusort-buffer", base_flags | MFD_NOEXEC_SEAL);
  if (fd < 0 && errno == EINVAL) fd = sys::memfd_create("gpusort-buffer", base_flags);
#else
  int fd = sys::memfd_create("gpusort-buffer", base_flags);
#endif
  if (fd < 0) throw_errno(errno, "memfd_create failed", bytes);
  return unique_fd{fd};
}

// Zeroing a reused buffer runs at memory bandwidth on every core: it is on the client's
// allocation path.
void parallel_zero(std::byte* data, std::uint64_t bytes)
{
  constexpr std::uint64_t piece = std::uint64_t{1} << 22;
  if (bytes <= piece) {
    std::memset(data, 0, bytes);
    return;
  }
  const auto pieces = static_cast<std::int64_t>((bytes + piece - 1) / piece);
#pragma omp parallel for schedule(static)
  for (std::int64_t p = 0; p < pieces; ++p) {
    const std::uint64_t off = static_cast<std::uint64_t>(p) * piece;
    std::memset(data + off, 0, std::min(piece, bytes - off));
  }
}

}  // namespace

// ---- buffer_lease ----------------------------------------------------------------------------

buffer_lease::~buffer_lease() { reset(); }

buffer_lease::buffer_lease(buffer_lease&& other) noexcept
    : pool_{std::exchange(other.pool_, nullptr)},
      id_{other.id_},
      data_{std::exchange(other.data_, nullptr)},
      size_{std::exchange(other.size_, 0)}
{
}

buffer_lease& buffer_lease::operator=(buffer_lease&& other) noexcept
{
  if (this != &other) {
    reset();
    pool_ = std::exchange(other.pool_, nullptr);
    id_ = other.id_;
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void buffer_lease::reset() noexcept
{
  if (pool_ != nullptr) std::exchange(pool_, nullptr)->end_lease(id_);
  data_ = nullptr;
  size_ = 0;
}

// ---- buffer_pool -----------------------------------------------------------------------------

buffer_pool::buffer_pool(std::uint64_t capacity_bytes, pin_hooks hooks)
    : capacity_{capacity_bytes},
      page_{static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE))},
      hooks_{std::move(hooks)}
{
  totals_.capacity = capacity_;
}

buffer_pool::~buffer_pool()
{
  std::vector<std::unique_ptr<buffer>> all;
  {
    const std::lock_guard lock{mutex_};
    for (auto& [id, b] : buffers_) {
      if (b->leases != 0) {
        try {
          spdlog::error("buffer pool destroyed while buffer {} still has {} lease(s)", id,
                        b->leases);
        } catch (...) {  // logging must not throw out of a destructor
        }
      }
      all.push_back(std::move(b));
    }
    buffers_.clear();
  }
  destroy_all(std::move(all));
}

std::unique_ptr<buffer_pool::buffer> buffer_pool::create(std::uint64_t size)
{
  auto b = std::make_unique<buffer>();
  b->size = size;
  b->fd = make_memfd(size);
  const int fd = b->fd.get();
  if (sys::ftruncate(fd, static_cast<off_t>(size)) != 0)
    throw_errno(errno, "ftruncate failed", size);
  // Allocating every page now turns a shortage of memory into an error here rather than a
  // SIGBUS or an OOM kill when someone first touches the page.
  if (const int err = sys::posix_fallocate(fd, 0, static_cast<off_t>(size)); err != 0)
    throw_errno(err, "cannot allocate memory", size);
  void* p = sys::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) throw_errno(errno, "mmap failed", size);
  b->map = unique_mapping{p, size};
  // After these seals nobody (client or daemon) can change the size, so neither side's mapping
  // can lose its pages (SIGBUS), and no one can take the seals off again.
  if (::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
    throw_errno(errno, "sealing failed", size);
  if (hooks_.pin) {
    hooks_.pin(p, size);
    b->pinned = true;
  }
  return b;
}

void buffer_pool::destroy(std::unique_ptr<buffer> b) noexcept
{
  if (!b) return;
  if (b->pinned && hooks_.unpin) {
    try {
      hooks_.unpin(b->map.base(), b->map.length());
    } catch (const std::exception& e) {
      try {
        spdlog::error("buffer pool: unpinning {} failed: {}", format_bytes(b->size), e.what());
      } catch (...) {  // logging must not throw out of a destructor
      }
    }
  }
  // unique_mapping and unique_fd unmap and close.
}

void buffer_pool::destroy_all(std::vector<std::unique_ptr<buffer>> dying) noexcept
{
  for (auto& b : dying) destroy(std::move(b));
}

std::vector<std::unique_ptr<buffer_pool::buffer>> buffer_pool::evict_for(std::uint64_t need,
                                                                        std::uint64_t buffers)
{
  std::vector<std::unique_ptr<buffer>> out;
  const std::uint64_t used = bytes_in_use_ + bytes_cached_ + bytes_in_flight_;
  const std::uint64_t excess =  // need <= capacity_
      used <= capacity_ && need <= capacity_ - used ? 0 : used - std::min(used, capacity_ - need);
  if (excess > bytes_cached_) return out;  // evicting everything would not make room
  if (excess == 0 && buffers == 0) return out;

  std::vector<buffer*> cached;
  for (auto& [id, b] : buffers_)
    if (b->cached()) cached.push_back(b.get());
  std::sort(cached.begin(), cached.end(),
            [](const buffer* a, const buffer* b) { return a->released_at < b->released_at; });
  std::uint64_t freed = 0;
  for (buffer* b : cached) {
    if (freed >= excess && out.size() >= buffers) break;
    freed += b->size;
    bytes_cached_ -= b->size;
    bytes_in_flight_ += b->size;
    auto node = buffers_.extract(b->id);
    out.push_back(std::move(node.mapped()));
    ++totals_.evicted;
  }
  return out;
}

void buffer_pool::return_to_cache(buffer& b)
{
  bytes_in_use_ -= b.size;
  bytes_cached_ += b.size;
  b.released_at = ++tick_;
}

buffer_grant buffer_pool::allocate(std::uint64_t bytes, const buffer_owner& owner)
{
  if (bytes == 0) throw invalid_argument{"buffer pool: cannot allocate a buffer of 0 bytes"};
  const auto too_large = [&] {
    return invalid_argument{"buffer pool: a buffer of " + format_bytes(bytes) +
                            " does not fit in pinned_pool_bytes (" + format_bytes(capacity_) +
                            ")"};
  };
  if (bytes > capacity_ || bytes > std::numeric_limits<std::uint64_t>::max() - page_)
    throw too_large();
  const std::uint64_t need = (bytes + page_ - 1) / page_ * page_;
  if (need > capacity_) throw too_large();

  buffer* chosen = nullptr;
  std::uint64_t id = 0;
  bool reused = false;
  {
    std::unique_lock lock{mutex_};
    // Best fit among this user's cached buffers, but never more than twice the need: a small
    // request must not tie up a large buffer.
    for (auto& [bid, b] : buffers_) {
      if (b->cached() && b->uid == owner.uid && b->size >= need && b->size / 2 <= need &&
          (chosen == nullptr || b->size < chosen->size))
        chosen = b.get();
    }
    if (chosen != nullptr) {
      auto node = buffers_.extract(chosen->id);
      id = next_id_++;
      node.key() = id;
      buffers_.insert(std::move(node));
      bytes_cached_ -= chosen->size;
      bytes_in_use_ += chosen->size;
      ++totals_.reused;
      reused = true;
    } else {
      // Descriptors first: 65536 one-page buffers fit a 256 MiB pool, and held the daemon's
      // every descriptor (its accept and the clients' memfds then failed with EMFILE:
      // hostile_test ThousandsOfTinyBuffersDoNotExhaustTheDaemonsDescriptors).
      std::uint64_t cached_count = 0;
      for (const auto& [bid, b] : buffers_) cached_count += b->cached() ? 1 : 0;
      const std::uint64_t most = descriptor_share();
      if (buffers_.size() - cached_count + buffers_creating_ + 1 > most) {
        ++totals_.refused;
        throw out_of_memory{"buffer pool: " + std::to_string(most) +
                            " buffers are open, as many as the daemon's descriptors allow (half "
                            "of RLIMIT_NOFILE): release some"};
      }
      const std::uint64_t open = buffers_.size() + buffers_creating_;
      auto dying = evict_for(need, open + 1 > most ? open + 1 - most : 0);
      std::uint64_t dying_bytes = 0;
      for (const auto& d : dying) dying_bytes += d->size;
      // What we evicted is destroyed before we create: its bytes make our room.
      const std::uint64_t used = bytes_in_use_ + bytes_cached_ + bytes_in_flight_ - dying_bytes;
      if (used > capacity_ || need > capacity_ - used) {
        ++totals_.refused;
        throw out_of_memory{"buffer pool: no room for a buffer of " + format_bytes(need) + ": " +
                            format_bytes(bytes_in_use_ + bytes_in_flight_) + " in use of " +
                            format_bytes(capacity_) + " (pinned_pool_bytes)"};
      }
      bytes_in_flight_ += need;
      ++buffers_creating_;
      lock.unlock();

      destroy_all(std::move(dying));
      std::unique_ptr<buffer> fresh;
      try {
        fresh = create(need);
      } catch (...) {
        lock.lock();
        bytes_in_flight_ -= need + dying_bytes;
        --buffers_creating_;
        throw;
      }
      lock.lock();
      bytes_in_flight_ -= need + dying_bytes;
      --buffers_creating_;
      bytes_in_use_ += need;
      ++totals_.created;
      id = next_id_++;
      fresh->id = id;
      chosen = fresh.get();
      buffers_.emplace(id, std::move(fresh));
    }
    chosen->id = id;
    chosen->uid = owner.uid;
    chosen->session = owner.session;
    chosen->held = true;
    // The lease keeps the buffer ours while it is zeroed and its descriptor duplicated outside
    // the lock, even if the session disconnects meanwhile.
    ++chosen->leases;
  }
  buffer_lease guard{this, id, chosen->data(), chosen->size};

  const int dup = ::fcntl(chosen->fd.get(), F_DUPFD_CLOEXEC, 0);
  if (dup < 0) {
    const int err = errno;
    try {
      release(id, owner.session);
    } catch (const invalid_argument&) {  // the session was released meanwhile: nothing to undo
    }
    throw_errno(err, "cannot duplicate the descriptor", guard.size());
  }
  buffer_grant grant{.id = id,
                     .client_fd = unique_fd{dup},
                     .data = guard.data(),
                     .size = guard.size(),
                     .reused = reused};
  if (reused) parallel_zero(grant.data, grant.size);
  return grant;
}

void buffer_pool::release(std::uint64_t id, std::uint64_t session)
{
  const std::lock_guard lock{mutex_};
  const auto it = buffers_.find(id);
  if (it == buffers_.end() || !it->second->held || it->second->session != session)
    throw invalid_argument{"buffer pool: this session holds no buffer " + std::to_string(id)};
  buffer& b = *it->second;
  b.held = false;
  if (b.leases == 0) return_to_cache(b);
}

std::uint64_t buffer_pool::release_all(std::uint64_t session)
{
  const std::lock_guard lock{mutex_};
  std::uint64_t n = 0;
  for (auto& [id, b] : buffers_) {
    if (!b->held || b->session != session) continue;
    b->held = false;
    if (b->leases == 0) return_to_cache(*b);
    ++n;
  }
  return n;
}

buffer_lease buffer_pool::lease(std::uint64_t id, std::uint64_t session)
{
  const std::lock_guard lock{mutex_};
  const auto it = buffers_.find(id);
  if (it == buffers_.end() || !it->second->held || it->second->session != session)
    throw invalid_argument{"buffer pool: this session holds no buffer " + std::to_string(id)};
  buffer& b = *it->second;
  ++b.leases;
  return buffer_lease{this, id, b.data(), b.size};
}

void buffer_pool::end_lease(std::uint64_t id) noexcept
{
  const std::lock_guard lock{mutex_};
  const auto it = buffers_.find(id);
  if (it == buffers_.end()) return;  // cannot happen: a leased buffer is never evicted
  buffer& b = *it->second;
  if (--b.leases == 0 && !b.held) return_to_cache(b);
}

std::uint64_t buffer_pool::trim()
{
  std::vector<std::unique_ptr<buffer>> dying;
  std::uint64_t bytes = 0;
  {
    const std::lock_guard lock{mutex_};
    for (auto it = buffers_.begin(); it != buffers_.end();) {
      if (it->second->cached()) {
        bytes += it->second->size;
        ++totals_.evicted;
        dying.push_back(std::move(it->second));
        it = buffers_.erase(it);
      } else {
        ++it;
      }
    }
    bytes_cached_ -= bytes;
    bytes_in_flight_ += bytes;
  }
  destroy_all(std::move(dying));
  const std::lock_guard lock{mutex_};
  bytes_in_flight_ -= bytes;
  return bytes;
}

pool_stats buffer_pool::stats() const
{
  const std::lock_guard lock{mutex_};
  pool_stats s = totals_;
  s.bytes_in_use = bytes_in_use_;
  s.bytes_cached = bytes_cached_;
  for (const auto& [id, b] : buffers_) (b->cached() ? s.buffers_cached : s.buffers_in_use) += 1;
  return s;
}

}  // namespace gpusort::service
