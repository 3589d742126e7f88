// Key types, orders, the type-erased array views of the public API, and the vocabulary the
// embedded engine and the daemon's client share: progress events and reports.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpusort {

/// The key types the product sorts. Floats sort by IEEE 754 totalOrder.
enum class dtype : std::uint8_t { u32, i32, u64, i64, f32, f64 };

enum class order : std::uint8_t { ascending, descending };

/// How float keys compare (integer keys ignore it).
///  - total: IEEE 754 totalOrder: -NaN before -inf, -0.0 before +0.0, NaNs by sign and payload.
///  - numpy: NumPy's order: every NaN after every number whatever its sign and payload (NaNs
///    last in both orders), NaNs equal among themselves, -0.0 equal to +0.0. A stable sort in
///    this order equals np.sort(a, kind="stable") byte for byte.
enum class float_order : std::uint8_t { total, numpy };

inline constexpr dtype all_dtypes[] = {dtype::u32, dtype::i32, dtype::u64,
                                       dtype::i64, dtype::f32, dtype::f64};

constexpr std::size_t size_of(dtype t) noexcept
{
  return (t == dtype::u32 || t == dtype::i32 || t == dtype::f32) ? 4 : 8;
}

constexpr bool is_float(dtype t) noexcept { return t == dtype::f32 || t == dtype::f64; }

constexpr std::string_view name_of(dtype t) noexcept
{
  switch (t) {
    case dtype::u32: return "u32";
    case dtype::i32: return "i32";
    case dtype::u64: return "u64";
    case dtype::i64: return "i64";
    case dtype::f32: return "f32";
    case dtype::f64: return "f64";
  }
  return "?";
}

/// Parses "u32", "i64", "f32", ...; nullopt for anything else.
std::optional<dtype> parse_dtype(std::string_view text) noexcept;

template <typename T>
struct dtype_of;
template <> struct dtype_of<std::uint32_t> { static constexpr dtype value = dtype::u32; };
template <> struct dtype_of<std::int32_t>  { static constexpr dtype value = dtype::i32; };
template <> struct dtype_of<std::uint64_t> { static constexpr dtype value = dtype::u64; };
template <> struct dtype_of<std::int64_t>  { static constexpr dtype value = dtype::i64; };
template <> struct dtype_of<float>         { static constexpr dtype value = dtype::f32; };
template <> struct dtype_of<double>        { static constexpr dtype value = dtype::f64; };
template <typename T>
inline constexpr dtype dtype_of_v = dtype_of<T>::value;

/// Keys of a type-erased sort: `count` elements of `type` at `data`. Jobs only read them, except
/// an in-place sort (a job without outputs), which writes the sorted keys back over them.
struct key_array {
  const void* data{};
  std::uint64_t count{};
  dtype type{dtype::u64};
};

/// Values travelling with the keys: `count` elements of `value_bytes` (4 or 8) each; read-only
/// like key_array, except in place.
struct value_array {
  const void* data{};
  std::uint64_t count{};
  std::uint32_t value_bytes{8};
};

// ---- rows (include/gpusort/rows.hpp sorts them) ----

/// What a key of a row holds: the six key types, 128-bit integers (two's complement for i128,
/// in the machine's byte order like the others), and byte strings of a fixed length compared
/// as unsigned bytes (memcmp's order: the sort benchmark's keys, fixed-width text).
enum class column_type : std::uint8_t { u32, i32, u64, i64, f32, f64, u128, i128, bytes };

inline constexpr column_type all_column_types[] = {
    column_type::u32, column_type::i32, column_type::u64,  column_type::i64, column_type::f32,
    column_type::f64, column_type::u128, column_type::i128, column_type::bytes};

/// Bytes of a key of `t` (0 for bytes: its length says).
constexpr std::uint32_t size_of(column_type t) noexcept
{
  switch (t) {
    case column_type::u32:
    case column_type::i32:
    case column_type::f32: return 4;
    case column_type::u64:
    case column_type::i64:
    case column_type::f64: return 8;
    case column_type::u128:
    case column_type::i128: return 16;
    case column_type::bytes: return 0;
  }
  return 0;
}

std::string_view name_of(column_type t) noexcept;
/// "u32" ... "f64", "u128", "i128", "bytes"; nullopt for anything else.
std::optional<column_type> parse_column_type(std::string_view text) noexcept;

/// The column type of a key type.
constexpr column_type column_type_of(dtype t) noexcept
{
  switch (t) {
    case dtype::u32: return column_type::u32;
    case dtype::i32: return column_type::i32;
    case dtype::u64: return column_type::u64;
    case dtype::i64: return column_type::i64;
    case dtype::f32: return column_type::f32;
    case dtype::f64: return column_type::f64;
  }
  return column_type::u64;
}

/// A key inside a record: its type, where it starts, its length (for bytes; 0 or the type's
/// size for the others) and its order.
struct key_field {
  column_type type{column_type::u64};
  std::uint32_t offset{};
  std::uint32_t length{};
  order direction{order::ascending};
  /// The key's bytes: `length` for bytes, the type's size otherwise.
  [[nodiscard]] constexpr std::uint32_t bytes() const noexcept
  {
    return type == column_type::bytes ? length : size_of(type);
  }
};

/// `count` records of `record_bytes` (1 byte to 1 MiB) each at `data`.
struct record_array {
  const void* data{};
  std::uint64_t count{};
  std::uint32_t record_bytes{};
};

/// Progress of a running sort, in the embedded engine and from the daemon alike. Round 0 is a
/// direct in-core sort; rounds 1 and 2 are DSPS's two passes over the data. Callbacks may come
/// from worker threads (the client's reader thread), one at a time: keep them short.
struct progress_event {
  int round{};
  std::uint64_t bytes_done{};   ///< of this round
  std::uint64_t bytes_total{};  ///< of this round
  int rounds{};                 ///< rounds of the whole job: 1 in one round trip, 2 out of core
  double rate{};                ///< bytes per second since the job started
  std::uint64_t job_id{};       ///< the daemon's job id; 0 in the embedded engine
};
using progress_callback = std::function<void(const progress_event&)>;

/// One stage of one device in one round (sort_options::profile). Times are seconds from the
/// start of the round; busy is the sum over chunks, so busy / (last_end - first_start) says how
/// much of its span the stage kept its engine (a copy engine, the SMs) working.
struct stage_profile {
  std::string device;  ///< "cuda:0 (...)", or "all" for the round as the host saw it
  int round{};         ///< 0 in core (one round trip), 1 and 2 out of core
  std::string stage;   ///< "copy in", "sort", "copy out", or "round" (device "all")
  std::uint64_t chunks{};
  std::uint64_t bytes{};  ///< moved by a copy stage, sorted by "sort"
  double busy_seconds{};
  double first_start{};
  double last_end{};
  /// Seconds from the job's start to the start of the round, the origin of first_start,
  /// last_end and steps, so that every device and round of a job share one clock (0 for the
  /// host's stages).
  double round_start{};
  /// A GPU stage's pieces of work (each ring slot's copy in, sort, copy out: one chunk's, or
  /// several small chunks' that shared the slot), [start, end] seconds timed by CUDA events: the
  /// lanes of a copy-engine timeline. Empty for the host's stages.
  std::vector<std::pair<double, double>> steps;
};

/// What a sort did, in the embedded engine and from the daemon alike (the numbers of
/// `gpusort sort --json`).
struct sort_report {
  std::uint64_t elements{};
  std::uint64_t bytes{};  ///< keys plus values
  double seconds{};       ///< sorting, without any time queued
  std::string engine;     ///< "cpu-direct", "cpu-dsps", "gpu-dsps", ...
  std::vector<std::string> devices;
  std::uint64_t chunks{};  ///< d of the DSPS plan; 1 for an in-core sort
  int rounds{};            ///< 0 none, 1 in core, 2 out of core
  std::uint64_t compensated_chunks{};
  /// A job that compressed its round-1 runs (config compress_runs): its keys' bytes raw, and
  /// the bytes round 1 kept for them in host memory (streams and index of the chunks it
  /// encoded, the keys of those it left raw); both 0 for a job that did not compress. Embedded
  /// only: the daemon's protocol does not carry them.
  std::uint64_t round1_key_bytes{};
  std::uint64_t round1_stored_bytes{};
  /// A job that took the scattered rounds (buckets chosen from a sample before round 1): its
  /// buckets, and of them those of a single key, which need no sort (where DSPS compensates
  /// final chunks); both 0 for other jobs. Embedded only, like the round-1 bytes.
  std::uint64_t scatter_buckets{};
  std::uint64_t equal_buckets{};
  /// How it ran: "in core", "resident" (fits the GPUs: one round trip), "two rounds" (the
  /// round-1 buffer), "direct" (the CPU in place), "lean" (in place within a host memory
  /// limit), or "" for an empty job.
  std::string path;
  /// The host memory limit it ran within (0: none), and the host memory its path takes beyond
  /// the arrays, as planned (buffers, staging, tables).
  std::uint64_t host_memory_limit{};
  std::uint64_t host_memory_bytes{};
  double queue_seconds{};              ///< waiting in the daemon's queue; 0 embedded
  std::vector<stage_profile> profile;  ///< when sort_options::profile was set (embedded)
  [[nodiscard]] double rate_bytes_per_second() const noexcept
  {
    return seconds > 0 ? static_cast<double>(bytes) / seconds : 0.0;
  }
};

}  // namespace gpusort
