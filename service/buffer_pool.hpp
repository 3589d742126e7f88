// The daemon's pool of shared-memory buffers (issue 5, item 3).
//
// `allocate` hands a client a memfd the daemon created, sized, mapped, sealed against shrinking
// and growing, and pinned once through a hook (cudaHostRegister where GPUs exist). The client
// maps the same memory, fills it and submits it by id: no copy and no per-job pinning. Released
// buffers stay mapped and pinned in a cache for later allocations, under a byte budget
// (`pinned_pool_bytes`).
//
// Reuse and privacy. A client keeps whatever descriptor and mapping it was given after it
// releases a buffer, or even after it disconnects, and nothing can revoke them. So a buffer is
// handed again only to an owner with the same uid as the one that released it (a user cannot
// gain access to another user's data, now or later), and it is zeroed before being handed on, so
// that not even a different program of the same user sees what the last one left there.
#pragma once

#include "service/unique_fd.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace gpusort::service {

/// Who holds a buffer: the session (one client connection) and its peer uid from SO_PEERCRED.
struct buffer_owner {
  std::uint64_t session{};
  std::uint32_t uid{};
};

/// Page-locks a buffer once when it is created and unlocks it once before it is unmapped. The
/// daemon binds them to cudaHostRegister / cudaHostUnregister where GPUs exist. `pin` may throw
/// (the allocation then fails and nothing leaks); an exception from `unpin` is logged.
struct pin_hooks {
  std::function<void(void*, std::size_t)> pin;
  std::function<void(void*, std::size_t)> unpin;
};

/// What `allocate` gives: a new buffer id, a descriptor for the client (a close-on-exec
/// duplicate of the daemon's, to pass with SCM_RIGHTS), the daemon's view of the memory and its
/// size: the request rounded up to whole pages, or more when a cached buffer was reused (at most
/// twice the rounded request). A new buffer reads as zeros; a reused one has been zeroed.
struct buffer_grant {
  std::uint64_t id{};
  unique_fd client_fd;
  std::byte* data{};
  std::uint64_t size{};
  bool reused{};
};

struct pool_stats {
  std::uint64_t capacity{};         ///< pinned_pool_bytes
  std::uint64_t bytes_in_use{};     ///< held by clients or by running jobs
  std::uint64_t bytes_cached{};     ///< released, kept mapped and pinned for reuse
  std::uint64_t buffers_in_use{};
  std::uint64_t buffers_cached{};
  std::uint64_t created{};          ///< totals since the pool was made
  std::uint64_t reused{};
  std::uint64_t evicted{};
  std::uint64_t refused{};          ///< allocations that failed for want of room
};

class buffer_pool;

/// Keeps a buffer alive and out of the cache while a job reads or writes it, even if its
/// client releases it or disconnects meanwhile. The pool must outlive its leases.
class buffer_lease {
 public:
  buffer_lease() = default;
  ~buffer_lease();
  buffer_lease(buffer_lease&& other) noexcept;
  buffer_lease& operator=(buffer_lease&& other) noexcept;
  buffer_lease(const buffer_lease&) = delete;
  buffer_lease& operator=(const buffer_lease&) = delete;

  [[nodiscard]] std::byte* data() const noexcept { return data_; }
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }
  [[nodiscard]] explicit operator bool() const noexcept { return pool_ != nullptr; }

 private:
  friend class buffer_pool;
  buffer_lease(buffer_pool* pool, std::uint64_t id, std::byte* data, std::uint64_t size) noexcept
      : pool_{pool}, id_{id}, data_{data}, size_{size}
  {
  }
  void reset() noexcept;

  buffer_pool* pool_{};
  std::uint64_t id_{};
  std::byte* data_{};
  std::uint64_t size_{};
};

/// Every buffer, held or cached, keeps a descriptor open in the daemon: besides the byte budget,
/// the buffers may take half of the descriptors RLIMIT_NOFILE allows (read at each allocation),
/// cached ones evicted first; the other half serves connections and the descriptors clients
/// pass with their jobs.
///
/// Thread-safe. Creating, zeroing and destroying buffers (memfd, mmap, pin, memset, unpin) run
/// outside the pool's lock, so one large allocation does not hold up the other sessions.
class buffer_pool {
 public:
  explicit buffer_pool(std::uint64_t capacity_bytes, pin_hooks hooks = {});
  ~buffer_pool();
  buffer_pool(const buffer_pool&) = delete;
  buffer_pool& operator=(const buffer_pool&) = delete;

  /// Throws gpusort::invalid_argument for 0 bytes or more than the whole budget (waiting cannot
  /// help), gpusort::out_of_memory when the buffers in use leave no room even after evicting
  /// every cached one (waiting may help), std::system_error when the kernel refuses.
  buffer_grant allocate(std::uint64_t bytes, const buffer_owner& owner);

  /// Gives a buffer back. Throws gpusort::invalid_argument when `session` holds no buffer `id`.
  void release(std::uint64_t id, std::uint64_t session);

  /// Gives back every buffer of a session (it disconnected); returns how many.
  std::uint64_t release_all(std::uint64_t session);

  /// For a job on buffer `id` of `session`; throws gpusort::invalid_argument like `release`.
  buffer_lease lease(std::uint64_t id, std::uint64_t session);

  /// Frees every cached buffer; returns the bytes freed.
  std::uint64_t trim();

  [[nodiscard]] pool_stats stats() const;
  [[nodiscard]] std::uint64_t capacity() const noexcept { return capacity_; }

 private:
  struct buffer;
  friend class buffer_lease;
  void end_lease(std::uint64_t id) noexcept;
  std::unique_ptr<buffer> create(std::uint64_t size);
  void destroy(std::unique_ptr<buffer> b) noexcept;
  void destroy_all(std::vector<std::unique_ptr<buffer>> dying) noexcept;
  // Takes cached buffers out, oldest first, until `need` bytes fit and at least `buffers` of
  // them are out; under the lock.
  std::vector<std::unique_ptr<buffer>> evict_for(std::uint64_t need, std::uint64_t buffers);
  void return_to_cache(buffer& b);  // under the lock

  const std::uint64_t capacity_;
  const std::uint64_t page_;
  const pin_hooks hooks_;

  mutable std::mutex mutex_;
  std::unordered_map<std::uint64_t, std::unique_ptr<buffer>> buffers_;  // every live buffer
  std::uint64_t next_id_{1};
  std::uint64_t tick_{0};
  std::uint64_t bytes_in_use_{0};
  std::uint64_t bytes_cached_{0};
  // Being created or destroyed outside the lock: counted against the budget, so that the memory
  // pinned never exceeds it, even for a moment.
  std::uint64_t bytes_in_flight_{0};
  std::uint64_t buffers_creating_{0};  ///< created outside the lock now: their descriptors count
  pool_stats totals_{};
};

}  // namespace gpusort::service
