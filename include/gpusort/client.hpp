// The C++ client of gpusortd (library gpusort::client): connect to the daemon's Unix socket,
// allocate shared buffers, sort them (or files the caller opened) and follow the jobs.
//
//   auto conn = gpusort::client::connection::connect("/run/gpusort/gpusort.sock");
//   auto keys = conn.allocate<std::uint64_t>(n);        // shared memory the daemon pinned once
//   std::copy(data.begin(), data.end(), keys.begin());  // fill it in place: no copy to the daemon
//   conn.sort(keys);                                    // blocking, in place, ascending
//
// No CUDA and no protobuf here: the wire protocol (proto/README.md) stays inside the library.
// Failures throw gpusort::client::error with the daemon's status and message.
#pragma once

#include <gpusort/types.hpp>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace gpusort::client {

/// The protocol's status codes (proto/gpusort.proto, StatusCode), plus connection_lost for a
/// daemon that went away (the socket closed or broke) before it answered.
enum class status_code : int {
  ok = 0,
  bad_request = 1,
  unsupported_version = 2,
  not_found = 3,
  too_large = 4,
  rejected_busy = 5,
  unauthorized = 6,
  cancelled = 7,
  internal = 8,
  bad_fd = 9,
  protocol_error = 10,
  failed_precondition = 11,
  out_of_memory = 12,
  shutting_down = 13,
  connection_lost = 1000,
};

/// "OK", "BAD_REQUEST", ... as the protocol names them; "CONNECTION_LOST"; "UNKNOWN_STATUS".
std::string_view name_of(status_code code) noexcept;

/// A request or job that failed: the status and the daemon's one-line message.
class error : public std::runtime_error {
 public:
  error(status_code code, const std::string& message);
  [[nodiscard]] status_code code() const noexcept { return code_; }

 private:
  status_code code_;
};

struct server_info {
  std::string server_version;
  std::uint32_t pid{};
  std::vector<std::string> devices;  ///< "cpu", "cuda:0", ...
  std::uint64_t max_buffer_bytes{};
  std::uint64_t pinned_pool_bytes{};
  std::uint16_t protocol_version{};  ///< negotiated
};

/// Progress events and reports are gpusort::progress_event (with the job's id and rate) and
/// gpusort::sort_report (with the time queued), as in the embedded engine.

enum class job_state : std::uint8_t { unknown, queued, running, succeeded, failed, cancelled };
std::string_view name_of(job_state state) noexcept;

struct job_info {
  std::uint64_t job_id{};
  job_state state{};
  std::optional<dtype> type;
  std::uint64_t count{};
  std::uint64_t bytes{};
  std::uint32_t queue_position{};
  int round{};
  std::uint64_t bytes_done{};
  std::uint64_t bytes_total{};
  double seconds{};
  std::uint32_t client_pid{};
  std::uint64_t host_memory{};  ///< what admission counts for it against host_memory_budget
  bool lean{};                  ///< it sorts in place on the lean path, within host_memory
};

struct device_status {
  std::string name;
  std::string model;
  std::uint64_t memory_total{};
  std::uint64_t memory_free{};
  std::uint64_t memory_budget{};  ///< 0: auto
  std::uint32_t running_jobs{};
};

struct daemon_totals {
  std::uint64_t jobs_submitted{};
  std::uint64_t jobs_succeeded{};
  std::uint64_t jobs_failed{};
  std::uint64_t jobs_cancelled{};
  std::uint64_t jobs_rejected{};
  std::uint64_t bytes_sorted{};
  std::uint64_t connections{};
};

struct daemon_status {
  std::string server_version;
  double uptime_seconds{};
  std::vector<device_status> devices;
  std::uint64_t host_memory_budget{};
  std::uint64_t host_memory_used{};
  std::uint64_t pinned_pool_bytes{};
  std::uint64_t pinned_pool_used{};
  std::uint32_t buffers{};
  std::uint32_t clients{};
  std::uint32_t queued_jobs{};
  std::uint32_t running_jobs{};
  std::vector<job_info> jobs;  ///< running, then queued in queue order
  daemon_totals totals;
};

/// The state behind a connection and behind a job, shared by the handles that refer to them
/// (defined in the library only).
struct connection_state;
struct job_state_box;

/// A shared-memory buffer from the daemon, mapped read-write in this process. Released (the
/// daemon told, the mapping and descriptor closed) when destroyed; the daemon frees it anyway
/// when the connection closes. Move-only.
class shared_buffer {
 public:
  shared_buffer() = default;
  ~shared_buffer();
  shared_buffer(shared_buffer&& other) noexcept;
  shared_buffer& operator=(shared_buffer&& other) noexcept;
  shared_buffer(const shared_buffer&) = delete;
  shared_buffer& operator=(const shared_buffer&) = delete;

  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }
  [[nodiscard]] std::byte* data() const noexcept { return data_; }
  /// Bytes mapped: at least what was asked for (whole pages).
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
  [[nodiscard]] explicit operator bool() const noexcept { return data_ != nullptr; }
  /// Gives the buffer back now (the daemon's answer is not awaited). Idempotent.
  void release() noexcept;

 private:
  friend class connection;
  std::shared_ptr<connection_state> conn_;
  std::uint64_t id_{};
  std::byte* data_{};
  std::uint64_t size_{};
  int fd_{-1};
};

/// A typed, span-like view of `count` elements at the start of a shared buffer it owns.
template <typename T>
class buffer {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  using value_type = T;
  buffer() = default;
  buffer(shared_buffer raw, std::size_t count) : raw_{std::move(raw)}, count_{count} {}

  [[nodiscard]] T* data() const noexcept { return reinterpret_cast<T*>(raw_.data()); }
  [[nodiscard]] std::size_t size() const noexcept { return count_; }
  [[nodiscard]] T* begin() const noexcept { return data(); }
  [[nodiscard]] T* end() const noexcept { return data() + count_; }
  T& operator[](std::size_t i) const noexcept { return data()[i]; }
  [[nodiscard]] std::span<T> span() const noexcept { return {data(), count_}; }
  [[nodiscard]] const shared_buffer& raw() const noexcept { return raw_; }
  [[nodiscard]] shared_buffer& raw() noexcept { return raw_; }

 private:
  shared_buffer raw_;
  std::size_t count_{};
};

/// Where an array of a job lies: in a shared buffer of this connection, or in a file or memfd
/// the caller opened (read-only for an input, read-write for an output or an in-place input; a
/// memfd must carry F_SEAL_SHRINK). The daemon never opens a path: it gets the descriptor. The
/// descriptor is borrowed: it must stay open until submit() returns.
struct array_ref {
  static array_ref in(const shared_buffer& b, std::uint64_t offset = 0)
  {
    return array_ref{b.id(), -1, offset};
  }
  template <typename T>
  static array_ref in(const buffer<T>& b, std::uint64_t offset = 0)
  {
    return in(b.raw(), offset);
  }
  /// Throws error{bad_fd} for a negative `fd`, what a failed open() returns: here, where the
  /// mistake is, rather than at submit() as "buffer 0 is not a buffer of this connection".
  static array_ref of_fd(int fd, std::uint64_t offset = 0)
  {
    if (fd < 0)
      throw error{status_code::bad_fd, "array_ref::of_fd(" + std::to_string(fd) +
                                           "): not a descriptor (did the open() fail?)"};
    return array_ref{0, fd, offset};
  }

  std::uint64_t buffer_id{};  ///< when fd < 0
  int fd{-1};
  std::uint64_t offset{};     ///< bytes; a multiple of the element size
};

/// One sort. Without keys_out the arrays are sorted in place (replaced only once the sorted
/// result is complete); with keys_out (and values_out when there are values) the inputs are
/// never written.
struct sort_request {
  dtype type{dtype::u64};
  std::uint64_t count{};
  order direction{order::ascending};
  array_ref keys{};
  std::uint32_t value_bytes{};  ///< 0: keys only; else 4 or 8
  std::optional<array_ref> values{};
  std::optional<array_ref> keys_out{};
  std::optional<array_ref> values_out{};
  /// Equal keys keep their input order (gpusort::sort_options::stable).
  bool stable{false};
  float_order floats{float_order::total};
  /// Set: an argsort job (gpusort::argsort_job): `count` indices of index_bytes (8: int64, 4:
  /// uint32) go here, the keys are never written, keys_out (optional) gets the sorted keys;
  /// values must be absent.
  std::optional<array_ref> indices_out{};
  std::uint32_t index_bytes{8};
  /// The report's `profile` says where each device's time went (gpusort::sort_options::profile).
  bool profile{false};
  /// An in-place sort of files (keys, and values, of_fd) within the daemon's host memory
  /// budget: an empty file, open for reading and writing, beside the keys, for the job's
  /// journal (gpusort::sort_job::journal_fd). The files are then sorted where they lie; where
  /// the daemon dies meanwhile, restore_interrupted_sort (or `gpusort recover`) puts every
  /// element back from it.
  std::optional<array_ref> journal{};
  /// Nonzero: a job of records (include/gpusort/rows.hpp) instead of keys: `keys` holds `count`
  /// records of record_bytes each (1 B to 1 MiB, at any offset), compared by key_fields (1 to
  /// 64, the first the primary key, each in its own order; `floats` for float keys); sorted
  /// whole and stably in place or into keys_out, or with indices_out their stable sorting
  /// permutation. type, direction, stable, values and journal are for keys and must be left
  /// as they are.
  std::uint32_t record_bytes{0};
  std::vector<key_field> key_fields{};
};

/// A submitted job. wait() returns its report or throws its error; cancel() asks the daemon to
/// stop it (wait() then throws error{cancelled}, unless it completed first). Move-only; a job
/// that is destroyed unwaited goes on in the daemon.
class job {
 public:
  job() = default;
  ~job();
  job(job&&) noexcept;
  job& operator=(job&&) noexcept;
  job(const job&) = delete;
  job& operator=(const job&) = delete;

  [[nodiscard]] std::uint64_t id() const noexcept;
  /// 0: it started at once; k: k jobs were ahead of it.
  [[nodiscard]] std::uint32_t queue_position() const noexcept;
  sort_report wait();
  /// True when the job finished within `timeout` (wait() then returns at once).
  bool wait_for(std::chrono::milliseconds timeout);
  [[nodiscard]] bool done() const;
  void cancel();
  /// JOB_STATUS: throws error{not_found} once the job has finished.
  job_info status();

 private:
  friend class connection;
  std::shared_ptr<connection_state> conn_;
  std::shared_ptr<job_state_box> state_;
};

class connection {
 public:
  /// Connects and negotiates the protocol version. Throws error: connection_lost when nothing
  /// listens on `socket_path`, unauthorized when the daemon refuses this user or the socket's
  /// permissions do (the message says to join the daemon's group), ...
  static connection connect(const std::string& socket_path,
                            const std::string& client_name = "gpusort-client");

  connection() = default;
  ~connection();
  connection(connection&&) noexcept;
  connection& operator=(connection&&) noexcept;
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  [[nodiscard]] const server_info& server() const;

  /// A shared buffer of at least `bytes`, mapped read-write, zeroed.
  shared_buffer allocate_bytes(std::uint64_t bytes);
  template <typename T>
  buffer<T> allocate(std::size_t count)
  {
    return buffer<T>{allocate_bytes(std::max<std::uint64_t>(1, count * sizeof(T))), count};
  }

  /// Submits a job; progress events go to `on_progress` on the connection's reader thread:
  /// keep it short, and do not wait on the connection from inside it.
  job submit(const sort_request& request, progress_callback on_progress = {});
  /// submit() and wait().
  sort_report sort(const sort_request& request, progress_callback on_progress = {});

  /// Sorts a buffer of keys in place.
  template <typename K>
  sort_report sort(const buffer<K>& keys, order direction = order::ascending,
                   progress_callback on_progress = {})
  {
    return sort(sort_request{.type = dtype_of_v<K>,
                             .count = keys.size(),
                             .direction = direction,
                             .keys = array_ref::in(keys)},
                std::move(on_progress));
  }

  /// Sorts keys and values (paired by index) in place.
  template <typename K, typename V>
  sort_report sort_pairs(const buffer<K>& keys, const buffer<V>& values,
                         order direction = order::ascending, progress_callback on_progress = {})
  {
    static_assert(sizeof(V) == 4 || sizeof(V) == 8, "values must be 4 or 8 bytes");
    return sort(sort_request{.type = dtype_of_v<K>,
                             .count = keys.size(),
                             .direction = direction,
                             .keys = array_ref::in(keys),
                             .value_bytes = sizeof(V),
                             .values = array_ref::in(values)},
                std::move(on_progress));
  }

  /// Sorts `count` records of `record_bytes` at the start of a shared buffer in place by
  /// `fields` (stably; sort_request::record_bytes).
  sort_report sort_records(const shared_buffer& records, std::uint64_t count,
                           std::uint32_t record_bytes, std::vector<key_field> fields,
                           float_order floats = float_order::total,
                           progress_callback on_progress = {})
  {
    return sort(sort_request{.count = count,
                             .keys = array_ref::in(records),
                             .floats = floats,
                             .record_bytes = record_bytes,
                             .key_fields = std::move(fields)},
                std::move(on_progress));
  }

  void cancel(std::uint64_t job_id);
  job_info job_status(std::uint64_t job_id);
  daemon_status status();

  /// Closes the connection: the daemon cancels its jobs and frees its buffers; pending waits
  /// end with connection_lost.
  void close();
  [[nodiscard]] bool is_open() const noexcept;

 private:
  std::shared_ptr<connection_state> state_;
};

}  // namespace gpusort::client
