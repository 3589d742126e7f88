// The shape of a lean out-of-core job (issue 39; docs/design.md, "The lean path"): how large
// its chunks, its room and its blocks are, so that the host memory it takes beyond the array
// stays within a limit whatever the array's size.
#pragma once

#include "pipeline/device.hpp"

#include <cstdint>
#include <functional>

namespace gpusort::detail::lean {

/// Positions x of a lean job's shifted space: [0, room) is the room (memory or the journal
/// file), [room, room + n) the array. Round 1 writes chunk j, which the array holds at x in
/// [room + j * chunk, ...), to x in [j * chunk, ...): every chunk moves down by the room, so
/// that no chunk is written over one that is not yet safe elsewhere.
struct plan {
  std::uint64_t n{};             ///< elements
  std::uint64_t chunk{};         ///< m: elements of a round-1 chunk, a multiple of `block`
  std::uint64_t chunks{};        ///< d
  std::uint64_t room{};          ///< F: a multiple of `chunk`, at least 2 * bucket_limit
  std::uint64_t bucket_limit{};  ///< L: the most elements one bucket of round 2 holds (<= F/2)
  std::uint64_t samples{};       ///< s: sample candidates per chunk (fewer in a shorter chunk)
  std::uint64_t intervals{};     ///< B: splitter intervals
  std::uint64_t block{};         ///< b: elements of one block of the permutation
  std::uint64_t host_bytes{};    ///< host memory the job takes beyond its arrays
  /// Round 2 gathers each bucket where round 1 left it, moving only what lies in a bucket's
  /// place (gather.hpp), rather than after a permutation (permute.hpp).
  bool gather{};

  [[nodiscard]] std::uint64_t chunk_begin(std::uint64_t j) const noexcept { return j * chunk; }
  [[nodiscard]] std::uint64_t chunk_size(std::uint64_t j) const noexcept
  {
    return j + 1 < chunks ? chunk : n - j * chunk;
  }
  /// Candidates chunk j gives: s, or every key of a chunk shorter than that.
  [[nodiscard]] std::uint64_t samples_of(std::uint64_t j) const noexcept
  {
    return chunk_size(j) < samples ? chunk_size(j) : samples;
  }
  /// Blocks of the shifted space (the last one may be short).
  [[nodiscard]] std::uint64_t blocks() const noexcept { return (n + room + block - 1) / block; }
  /// Buckets there can be: an interval below each splitter and above the last, an equal-key
  /// bucket per splitter, and the equal-key buckets cut to bucket_limit.
  [[nodiscard]] std::uint64_t most_buckets() const noexcept
  {
    return 2 * intervals + n / bucket_limit + 2;
  }
};

/// What a plan must respect.
struct plan_request {
  std::uint64_t n{};
  element_layout layout{};
  /// Elements one device sorts at once (the smallest device's capacity).
  std::uint64_t capacity{};
  /// Devices that write round 1 side by side: the room holds a chunk for each.
  std::uint64_t devices{1};
  /// Host memory the job may take beyond its arrays, in bytes.
  std::uint64_t host_limit{};
  /// Host memory the devices take for tasks of at most `elements` elements and `slices`
  /// slices (device::host_bytes, summed over the devices).
  std::function<std::uint64_t(std::uint64_t elements, std::uint64_t slices)> device_host_bytes{};
  /// Threads that move blocks: each may hold a spare block while it breaks a cycle.
  std::uint64_t movers{16};
  /// plan::gather (GPUSORT_LEAN_ROUND2=permute turns it off, for measuring one against the
  /// other).
  bool gather{true};
};

/// Buckets per room: a bucket is at most room / rooms_per_bucket. The permutation's round 2
/// writes each bucket at most half the room above its source (2); the gathering round 2 needs
/// a bucket and a few blocks per chunk free below each place, and with a room of 4 buckets keeps
/// the places of about three cleared ahead of the devices (the planner prefers 4 and takes 2
/// where only that fits the limit).
inline constexpr std::uint64_t gather_buckets_per_room[] = {4, 2};

/// The plan with the largest chunks whose host memory fits request.host_limit. Throws
/// gpusort::config_error naming the smallest limit that works (least_host_bytes) when none does.
plan make_plan(const plan_request& request);

/// The smallest host_limit for which make_plan finds a plan; 0 when no limit does (an array
/// too large for the planner's tables).
std::uint64_t least_host_bytes(const plan_request& request);

}  // namespace gpusort::detail::lean
