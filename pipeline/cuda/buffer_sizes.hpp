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

/// Device bytes of one slice's entries in a ring slot's tables (round_state.hpp):
/// a decode entry (40 bytes) and a gather entry (24) for its keys, a gather entry for its values.
inline constexpr std::uint64_t table_entry_bytes = 40 + 2 * 24;

/// Device bytes of the tables' one array of bucket bounds (a scattering round's, which its
/// count kernel reads: from mapped host memory it waited behind the link's copies) for `entries`
/// entries a slot: a bound an entry.
[[nodiscard]] constexpr std::uint64_t table_bounds_bytes(std::uint64_t entries) noexcept
{
  return entries * sizeof(std::uint64_t);
}

/// Device bytes a budget keeps for the tables of a ring of `slots` slots whose tasks hold up to
/// c elements of `element_bytes`, in whole pages (one allocation serves every slot). A task of
/// round 2 gathers d * g slices; the planner keeps d at most max_chunks and otherwise slices of
/// min_slice_bytes on average (bins_for), so a task of c elements has at most
/// max(max_chunks, c * element_bytes / min_slice_bytes) of them: 1 MiB for three slots at
/// d = 4096, under 0.001 bytes per byte of capacity beyond. A scattering round takes at most
/// max_chunks buckets (core/plan/scatter_buckets.hpp), their bounds beside the tables.
[[nodiscard]] constexpr std::uint64_t ring_table_bytes(std::uint64_t element_bytes,
                                                       std::uint64_t c,
                                                       std::uint64_t slots) noexcept
{
  const std::uint64_t entries = std::max<std::uint64_t>(
      plan_tuning::max_chunks, c * element_bytes / plan_tuning::min_slice_bytes + 1);
  return device_pages(slots * entries * table_entry_bytes + table_bounds_bytes(entries));
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
/// Most tasks one slot of a GPU's ring takes, each sorted on a stream of its own beside the
/// others (round_state.hpp's sort lanes; GPUSORT_SORT_LANES lowers it).
inline constexpr unsigned gpu_max_sort_lanes = 4;
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
  /// The sizes `f(a.x, b.x)` of every buffer x.
  template <typename F>
  [[nodiscard]] static constexpr buffer_sizes each(const buffer_sizes& a, const buffer_sizes& b,
                                                   F&& f) noexcept
  {
    return {.keys = f(a.keys, b.keys), .values = f(a.values, b.values),
            .scratch = f(a.scratch, b.scratch)};
  }
  friend constexpr bool operator==(const buffer_sizes&, const buffer_sizes&) = default;
};

/// Range buffers in the resident sort's ring: one merged into, one merged from, one copying out.
inline constexpr unsigned resident_ring_ranges = 3;

/// Range buffers the resident sort's ring takes for a share of `share` elements on one of
/// `gpus` GPUs (resident_need).
[[nodiscard]] constexpr std::uint64_t resident_ring_buffers(std::uint64_t share,
                                                            const resident_tuning& tuning,
                                                            std::uint64_t gpus) noexcept
{
  if (share == 0) return 0;
  const std::uint64_t piece = tuning.piece_elements(share);
  const std::uint64_t range = tuning.range_elements(share);
  if (range < share) return resident_ring_ranges;
  return piece < share || gpus > 1 ? 2 : 1;
}

/// Bytes of the buffers the resident sort keeps (pipeline/cuda/resident.hpp): the runs (a
/// GPU's share, sorted piece by piece where it arrived, never written after) with the scratch
/// of a piece's sort or a range's merges, and one work array, the piece sort's alternate while
/// the pieces sort and the ring of range buffers after (the larger of a piece and the ring).
struct resident_sizes {
  buffer_sizes runs;
  buffer_sizes work;  ///< no scratch

  [[nodiscard]] constexpr bool covers(const resident_sizes& need) const noexcept
  {
    return runs.covers(need.runs) && work.covers(need.work);
  }
  /// Device bytes of the buffers, in whole pages.
  [[nodiscard]] constexpr std::uint64_t total() const noexcept
  {
    return runs.total(1) + work.total(1);
  }
  template <typename F>
  [[nodiscard]] static constexpr resident_sizes each(const resident_sizes& a,
                                                     const resident_sizes& b, F&& f) noexcept
  {
    return {.runs = buffer_sizes::each(a.runs, b.runs, f),
            .work = buffer_sizes::each(a.work, b.work, f)};
  }
  friend constexpr bool operator==(const resident_sizes&, const resident_sizes&) = default;
};

/// What the resident sort of a share of `share` elements needs, cut as `tuning` says, with
/// `scratch` bytes for its sort and merges, on one of `gpus` GPUs that share the job. The ring
/// takes three range buffers where the share has several ranges (one copying out while the
/// next merges in two); a lone range two (its merges), or one where it is a single run of a
/// single GPU (only its way back to raw bits).
[[nodiscard]] constexpr resident_sizes resident_need(std::uint64_t key_bytes,
                                                     std::uint64_t value_bytes,
                                                     std::uint64_t share, std::uint64_t scratch,
                                                     const resident_tuning& tuning,
                                                     std::uint64_t gpus) noexcept
{
  const std::uint64_t piece = tuning.piece_elements(share);
  const std::uint64_t range = tuning.range_elements(share);
  const std::uint64_t work = std::max(piece, resident_ring_buffers(share, tuning, gpus) * range);
  return {.runs = {.keys = share * key_bytes, .values = share * value_bytes, .scratch = scratch},
          .work = {.keys = work * key_bytes, .values = work * value_bytes, .scratch = 0}};
}

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
/// zero: none), with `room` bytes of the device's budget for them, `total` counting what a set
/// of sizes takes: each buffer grown ahead of need when that fits, else the larger of kept and
/// needed, else exactly what the job needs (which its capacity check proved fits).
template <typename Sizes, typename Total>
[[nodiscard]] constexpr Sizes grown_within(const Sizes& kept, const Sizes& need,
                                           std::uint64_t room, Total&& total) noexcept
{
  const Sizes ahead = Sizes::each(kept, need, grown_bytes);
  if (total(ahead) <= room) return ahead;
  const Sizes widest =
      Sizes::each(kept, need, [](std::uint64_t a, std::uint64_t b) { return std::max(a, b); });
  if (total(widest) <= room) return widest;
  return need;
}

/// grown_within for `copies` arrays of keys and of values (a ring's slots and alternates).
[[nodiscard]] constexpr buffer_sizes grown_sizes(const buffer_sizes& kept,
                                                 const buffer_sizes& need, unsigned copies,
                                                 std::uint64_t room) noexcept
{
  return grown_within(kept, need, room,
                      [copies](const buffer_sizes& s) { return s.total(copies); });
}

}  // namespace gpusort::detail
