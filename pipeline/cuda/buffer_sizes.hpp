// How a GPU sizes the device buffers it keeps from job to job (cuda_device.cpp). Sized exactly
// for each job, they were replaced whenever a job needed more of any one of them: a pairs job
// after a keys-only one, a wider key, another sorter's scratch. A mix of small jobs replaced
// them on most jobs (with the pinned staging they then held: about 60 ms a job on the H100,
// docs/reliability.md). Kept buffers now grow, each to the largest any job needed, ahead of
// need, within the device's budget. No CUDA here: tests/pipeline checks it on any machine.
#pragma once

#include "core/plan/tuning.hpp"

#include <algorithm>
#include <bit>
#include <cstdint>

namespace gpusort::detail {

/// What a device buffer takes of the GPU's memory and so of its budget, at most: cudaMalloc
/// maps a large buffer in whole pages of 2 MiB (a budget of 32 MiB holds four 4.2 MB buffers
/// in 24 MiB, not 16.6 MB), and a small one never takes more than a page. Counting small ones
/// by their bytes undercounted: on an H200, pairs at a budget of 4.58 MB held 6 MiB, and at
/// 91.6 MiB 92 MiB, by cudaMemGetInfo (h200x2-20261129-s7/call2/budget.txt).
inline constexpr std::uint64_t device_page_bytes = std::uint64_t{2} << 20;

/// The device bytes a buffer of `bytes` takes at most: whole pages (none for no bytes).
[[nodiscard]] constexpr std::uint64_t device_pages(std::uint64_t bytes) noexcept
{
  return (bytes + device_page_bytes - 1) / device_page_bytes * device_page_bytes;
}

/// Device bytes of one slice's entries in a ring slot's tables (cuda_device.cpp's round_state):
/// a decode entry (40 bytes) and a gather entry (24) for its keys, a gather entry for its values.
inline constexpr std::uint64_t table_entry_bytes = 40 + 2 * 24;

/// Device bytes a budget keeps for the tables of a ring of `slots` slots whose tasks hold up to
/// c elements of `element_bytes`, in whole pages (one allocation serves every slot). A task of
/// round 2 gathers d * g slices; the planner keeps d at most max_chunks and otherwise slices of
/// min_slice_bytes on average (bins_for), so a task of c elements has at most
/// max(max_chunks, c * element_bytes / min_slice_bytes) of them: 1 MiB for three slots at
/// d = 4096, under 0.001 bytes per byte of capacity beyond.
[[nodiscard]] constexpr std::uint64_t ring_table_bytes(std::uint64_t element_bytes,
                                                       std::uint64_t c,
                                                       std::uint64_t slots) noexcept
{
  const std::uint64_t entries = std::max<std::uint64_t>(
      plan_tuning::max_chunks, c * element_bytes / plan_tuning::min_slice_bytes + 1);
  return device_pages(slots * entries * table_entry_bytes);
}

/// Device memory a GPU's budget keeps besides what it counts buffer by buffer (the chunk
/// buffers, the sort's scratch and the gather tables, each in whole pages): one page, for what
/// no buffer of ours names (the runtime's own small allocations). It was 64, then 16 MiB,
/// standing in for the tables and the pages' rounding too: a device budget of 1/256 of 8 GiB
/// (32 MiB) lost half of itself to it, and 8 GiB was refused there (issue 44).
inline constexpr std::uint64_t gpu_budget_margin = device_page_bytes;
/// Chunk slots in a GPU's ring: one copying in, one sorting, one copying out.
inline constexpr unsigned gpu_ring_slots = 3;
/// Budget bytes per element of a ring's capacity: the slots plus the sort's alternate buffer.
inline constexpr unsigned gpu_ring_buffers_per_element = gpu_ring_slots + 1;
/// Jobs this small sort in core on any GPU, whatever its budget (a capacity no budget lowers).
inline constexpr std::uint64_t gpu_small_job_elements = 4096;

/// The largest element count c whose device bytes `need(c)` (growing with c, at least
/// `per_element` bytes an element) stay within `budget`, by bisection; 0 where none does.
template <typename Need>
[[nodiscard]] std::uint64_t largest_fitting(std::uint64_t budget, std::uint64_t per_element,
                                            Need&& need)
{
  std::uint64_t lo = 0, hi = budget / per_element + 1;
  while (lo + 1 < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    (need(mid) <= budget ? lo : hi) = mid;
  }
  return lo;
}

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
  /// Device bytes of the buffers with `copies` arrays of keys and of values, in whole pages.
  [[nodiscard]] constexpr std::uint64_t total(unsigned copies) const noexcept
  {
    return copies * (device_pages(keys) + device_pages(values)) + device_pages(scratch);
  }
  friend constexpr bool operator==(const buffer_sizes&, const buffer_sizes&) = default;
};

/// The budget a GPU's ring of `capacity` elements of `key_bytes` and `value_bytes` takes with
/// `scratch` bytes of the sort's scratch: the margin, its buffers and its tables, in pages.
[[nodiscard]] constexpr std::uint64_t ring_budget(std::uint64_t key_bytes,
                                                  std::uint64_t value_bytes,
                                                  std::uint64_t capacity,
                                                  std::uint64_t scratch) noexcept
{
  const buffer_sizes ring{.keys = capacity * key_bytes,
                          .values = capacity * value_bytes,
                          .scratch = scratch};
  return gpu_budget_margin + ring.total(gpu_ring_buffers_per_element) +
         ring_table_bytes(key_bytes + value_bytes, capacity, gpu_ring_slots);
}

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
