// How a GPU sizes the device buffers it keeps from job to job (cuda_device.cpp). Sized exactly
// for each job, they were replaced whenever a job needed more of any one of them: a pairs job
// after a keys-only one, a wider key, another sorter's scratch. A mix of small jobs replaced
// them on most jobs (with the pinned staging they then held: about 60 ms a job on the H100,
// docs/reliability.md). Kept buffers now grow, each to the largest any job needed, ahead of
// need, within the device's budget. No CUDA here: tests/pipeline checks it on any machine.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>

namespace gpusort::detail {

/// Bytes of each kind of buffer a GPU keeps: `copies` arrays of keys and as many of values (a
/// resident sort's runs and merge targets; a ring's slots and the sort's alternates), and one
/// scratch for the sort or merge.
struct buffer_sizes {
  std::uint64_t keys{};
  std::uint64_t values{};
  std::uint64_t scratch{};

  /// Whether buffers of these sizes serve a job that needs `need`.
  [[nodiscard]] constexpr bool covers(const buffer_sizes& need) const noexcept
  {
    return need.keys <= keys && need.values <= values && need.scratch <= scratch;
  }
  /// Device bytes of the buffers with `copies` arrays of keys and of values.
  [[nodiscard]] constexpr std::uint64_t total(unsigned copies) const noexcept
  {
    return copies * (keys + values) + scratch;
  }
  friend constexpr bool operator==(const buffer_sizes&, const buffer_sizes&) = default;
};

/// The least a kept buffer grows to: small jobs of any size up to it then share one allocation
/// instead of growing it step by step (a few MiB are nothing beside a GPU's memory).
inline constexpr std::uint64_t min_grown_bytes = std::uint64_t{8} << 20;

/// One buffer of `kept` bytes for a job that needs `need`: kept when large enough, else the
/// next power of two (at least min_grown_bytes), so that a run of growing jobs reallocates a
/// logarithmic number of times.
[[nodiscard]] constexpr std::uint64_t grown_bytes(std::uint64_t kept, std::uint64_t need) noexcept
{
  if (need <= kept) return kept;
  if (need > (std::uint64_t{1} << 62)) return need;  // no power of two above it
  return std::max(std::bit_ceil(need), min_grown_bytes);
}

/// The sizes to allocate for a job that needs `need` where buffers of `kept` are held now (all
/// zero: none), with `room` bytes of the device's budget for them: each buffer grown ahead of
/// need when that fits, else the larger of kept and needed, else exactly what the job needs
/// (which its capacity check proved fits).
[[nodiscard]] constexpr buffer_sizes grown_sizes(const buffer_sizes& kept,
                                                 const buffer_sizes& need, unsigned copies,
                                                 std::uint64_t room) noexcept
{
  const buffer_sizes ahead{.keys = grown_bytes(kept.keys, need.keys),
                           .values = grown_bytes(kept.values, need.values),
                           .scratch = grown_bytes(kept.scratch, need.scratch)};
  if (ahead.total(copies) <= room) return ahead;
  const buffer_sizes widest{.keys = std::max(kept.keys, need.keys),
                            .values = std::max(kept.values, need.values),
                            .scratch = std::max(kept.scratch, need.scratch)};
  if (widest.total(copies) <= room) return widest;
  return need;
}

}  // namespace gpusort::detail
