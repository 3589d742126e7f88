// One GPU's ring for the out-of-core rounds (cuda_device::process): the slots that chunks pass
// through and round_state, which owns the ring's device buffers, streams and tables and runs
// the three stages on a slot. Each stage has its file: round_load.cpp (copy-in),
// round_sort.cpp (compute), round_store.cpp (copy-out); round_state.cpp makes the ring and
// plans which tasks a slot takes.
#pragma once

#include "core/cuda/chunk_ops.cuh"
#include "core/run_codec.hpp"
#include "core/switches.hpp"
#include "pipeline/cuda/cuda_device.hpp"
#include "pipeline/cuda/resources.hpp"
#include "pipeline/cuda/stage_totals.hpp"
#include "pipeline/cuda/staging.hpp"

#include <cuda_runtime_api.h>

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

namespace gpusort::detail::gpu_ring {

/// Most slices one gather, decode or scatter launch takes (a grid's y dimension).
inline constexpr std::uint32_t max_slices_per_launch = 65535;

/// The runtime's view of `p` when it lies in page-locked host memory, else nullopt.
std::optional<cudaPointerAttributes> pinned_attributes(const void* p) noexcept;

/// Device address of mapped pinned host memory, or null when kernels cannot read it.
const char* mapped_address(const void* host) noexcept;

/// N events that can time (stage marks).
template <std::size_t... I>
std::array<cuda::cuda_event, sizeof...(I)> timing_events(std::index_sequence<I...>)
{
  return {((void)I, cuda::cuda_event{cuda::event_timing::enabled})...};
}

/// The scratch of a ring for chunks of c elements: the in-core sort's or the run codec's,
/// whichever is larger. One buffer serves both, as round 1 encodes on the compute stream after
/// the sort: a job loses no capacity to the codec where the sort's scratch is the larger (the
/// codec's is 13 bytes per 2048 keys and CUB's scan storage). Sized for as many runs as codec
/// blocks (a run adds at most one partial block); a task dealt into more grows it (encode).
std::uint64_t ring_scratch_bytes(const chunk_sorter& with, const element_layout& l,
                                 std::uint64_t c);

/// How round 2 gathers its slices from the pinned round-1 output. Copy engines move large
/// slices at the link's full rate without taking SMs from the sort of the next chunk; a kernel
/// reading mapped memory wins only where slices are so short that one copy call per slice costs
/// more than its bytes (design.md section 1). GPUSORT_GATHER=copy|kernel|host overrides the
/// choice, for measuring one against another: `host` packs short slices into the staging's
/// pieces on the host's cores (staging::pack_in) and copies whole pieces, which leaves every SM
/// to the sort (issue 44: round 2's sort beside a gather kernel took 1.7x round 1's) but fed the
/// link at 15-19 GB/s where the warp kernel gathers at 29-34 (h200x2-20261130-s10/call4).
enum class gather_mode : std::uint8_t { automatic, copy, kernel, host };

/// Most tasks one ring slot takes, each sorted on a lane (a stream) of its own beside the
/// others. A small budget's chunks are too small to fill an H200 with one sort (CUB's radix
/// sort takes about 95 us at 65K to 262K keys, eight passes of a launch and a look-back chain;
/// the sample sort's levels some 17 short launches), and its ring, sized for round 2's bound,
/// holds two of round 1's chunks (issue 44). GPUSORT_SORT_LANES=1 takes one task a slot, as
/// before, for the A/B.
inline constexpr unsigned max_sort_lanes = gpu_max_sort_lanes;
/// The lanes a slot has this round: max_sort_lanes, or GPUSORT_SORT_LANES (1 for the A/B).
unsigned sort_lanes_from_environment() noexcept;

/// One chunk's place in the ring: its device buffers, its gather tables and its events.
struct slot {
  cuda::device_buffer keys;
  cuda::device_buffer values;
  /// The key tables hold, for round 2 of a compressed job, a decode table (encoded_slice, one
  /// per slice) and behind it a gather table for the slices of chunks stored raw.
  cuda::pinned_buffer key_table_host;
  cuda::pinned_buffer value_table_host;
  /// The device tables, in round_state::tables.
  void* d_key_table{};
  void* d_value_table{};
  cuda::cuda_event loaded;
  cuda::cuda_event computed;
  /// The store's copies are done (store and store_scattered, which do not wait for them).
  cuda::cuda_event stored;
  /// The out staging's tickets for the store's writes behind (staging::copy_out_behind).
  std::vector<std::uint64_t> behind;
  /// Stage boundaries for sort_options::profile (begin and end of each gpu_stage), read back
  /// once the chunk has left the GPU; `ran` says which stages this chunk went through and
  /// `stage_bytes` what each moved or worked on.
  std::array<cuda::cuda_event, 2 * gpu_stage_count> marks{
      timing_events(std::make_index_sequence<2 * gpu_stage_count>{})};
  /// For a trace (round_profile): the count kernel's begin and end within the sort stage, and
  /// the storer's host times: the counts in, the slices placed, the writes queued, seen done.
  std::array<cuda::cuda_event, 2> count_marks{timing_events(std::make_index_sequence<2>{})};
  bool counted{};
  std::array<std::chrono::steady_clock::time_point, 4> host_marks{};
  std::array<bool, gpu_stage_count> ran{};
  std::array<std::uint64_t, gpu_stage_count> stage_bytes{};
  /// Round 1 of a compressed job: encoded_size's answer, read by the compute thread.
  cuda::pinned_buffer measured{sizeof(std::uint64_t)};
  /// Round 1 of a scattering job: each task's counts of keys below (and at most) each bucket
  /// bound, written by the count kernel (mapped), read by the store.
  cuda::pinned_buffer scatter_counts;
  /// What the compute stage made of an encode_target, for the store: when `encoded`, the keys
  /// buffer holds the chunk's index (index_bytes) and behind it its stream.
  encode_target::outcome outcome{};
  bool encoded{};
  std::uint64_t index_bytes{};
  /// The tasks the slot holds, in queue order, and where each begins in its buffers (elements):
  /// one, or several small ones where the buffers hold them all (round_state::batch_fits), which
  /// then sort side by side, one a lane.
  std::vector<const chunk_task*> tasks;
  std::vector<std::uint64_t> at;
  /// Where each task's gather tables begin (entries), as decided when the slot took it, and the
  /// end of the last one's: a task gathers with the kernel only within its share, since a
  /// source may be registered between then and its load (a round-1 buffer pinned by the copy
  /// of a chunk into it), which makes the kernel take a task judged to need no tables.
  std::vector<std::size_t> entry_at;
  std::size_t entry_end{};

  /// Takes task `t` at `element` of the buffers, with `entries` of the gather tables past the
  /// last task's (round_state::gather_entries, as judged when the slot took it).
  void take(const chunk_task& t, std::uint64_t element, std::size_t entries)
  {
    tasks.push_back(&t);
    at.push_back(element);
    entry_at.push_back(entry_end);
    entry_end += entries;
  }
  /// Holds no task, ready for the next ones.
  void clear() noexcept
  {
    counted = false;
    host_marks = {};
    tasks.clear();
    at.clear();
    entry_at.clear();
    entry_end = 0;
  }
};

/// Everything one round needs on one GPU. A device keeps it from round to round and job to job
/// (allocating a ring of chunk buffers costs milliseconds per round) and releases it only after
/// its streams are idle. Its staging is the GPU's (gpu_pinned), kept whatever the round.
struct round_state {
  /// Bytes of one slot's keys and values (also those of the sort's alternates) and scratch.
  buffer_sizes sizes;
  std::size_t table_entries{};
  cuda::cuda_stream h2d, compute, d2h;
  std::vector<slot> slots;
  cuda::device_buffer alt_keys, alt_values;
  cuda::device_buffer scratch;
  /// Every slot's device tables in one allocation: one each would take a page of the budget
  /// each (buffer_sizes.hpp), 12 MiB for six tables of a few KiB.
  cuda::device_buffer tables;
  staging& in_staging;
  staging& out_staging;
  chunk_sorter sorter;

  // Reused by batch_copies, so that a task allocates nothing.
  std::vector<void*> batch_dst;
  std::vector<const void*> batch_src;
  std::vector<std::size_t> batch_size;
  /// False where the driver lacks batches, or with GPUSORT_COPY_BATCH=0 (a copy call a slice):
  /// the A/B for s20's initcheck findings, reads of keys that only a batch had written.
  bool batch_supported{switch_flag("GPUSORT_COPY_BATCH", true)};
  /// Reused by load_array's gathers from memory the engine did not pin.
  std::vector<piece_mover::source_run> gather_runs;
  /// load_decoded_on_host's keys, in words so that they serve either key width, and where
  /// each slice's go.
  std::vector<std::uint64_t> decoded;
  std::vector<std::uint64_t> slice_at;

  // Per round:
  element_layout layout{};
  bool profiling{};
  gather_mode gather{gather_mode::automatic};
  cuda::gather_tuning gather_tuning;
  /// scatter_blocks_from_environment.
  unsigned scatter_blocks{};
  std::uint64_t gather_copy_min_bytes{};
  /// Most tasks a slot takes (sort_lanes_from_environment); the lanes past the first (which
  /// sorts on `compute`) run on `lanes`, forked from `compute` by `fork` and joined back by
  /// `joined`.
  unsigned sort_lanes{1};
  /// scatter_table_mapped_from_environment.
  bool scatter_table_mapped{true};
  std::vector<cuda::cuda_stream> lanes;
  cuda::cuda_event fork;
  std::vector<cuda::cuda_event> joined;
  /// A scattering round's bucket bounds past the first: in device memory behind the tables
  /// (d_bounds, table_entries of room), copied there through `scatter_probes` once a round, and
  /// the buckets they are of (reset each round: a later job's may lie at the same address).
  std::uint64_t* d_bounds{};
  cuda::pinned_buffer scatter_probes;
  const scatter_buckets* scatter_source{};
  /// Reused by store_scattered: a task's bucket counts and places.
  std::vector<std::uint64_t> scatter_lengths, scatter_places_at;

  /// The bytes of each buffer a round of `elements` needs.
  static buffer_sizes needed(const element_layout& l, std::uint64_t elements,
                             const chunk_sorter& with)
  {
    return {.keys = elements * l.key_bytes,
            .values = elements * l.value_bytes,
            .scratch = ring_scratch_bytes(with, l, elements)};
  }

  round_state(const buffer_sizes& s, std::size_t entries, const cuda_device_options& o,
              const chunk_sorter& with, gpu_pinned& pinned);

  /// Bytes of a slot's key table: a decode table and a gather table of table_entries each.
  [[nodiscard]] std::size_t decode_table_bytes() const noexcept
  {
    return table_entries * sizeof(codec::encoded_slice);
  }

  /// Gather tables for `entries` slices per task (the ring's streams are idle between rounds).
  void grow_tables(std::size_t entries);

  ~round_state();
  round_state(const round_state&) = delete;
  round_state& operator=(const round_state&) = delete;

  /// Marks where stage `st` of the chunk in `s` begins on `stream` (when profiling).
  void begin(slot& s, gpu_stage st, cudaStream_t stream) const
  {
    if (profiling) s.marks[2 * static_cast<unsigned>(st)].record(stream);
  }
  /// Marks where it ends, having moved or worked on `bytes`.
  void end(slot& s, gpu_stage st, cudaStream_t stream, std::uint64_t bytes) const
  {
    const auto i = static_cast<unsigned>(st);
    if (profiling) s.marks[2 * i + 1].record(stream);
    s.ran[i] = true;
    s.stage_bytes[i] = bytes;
  }

  // Which tasks a slot takes (round_state.cpp).

  /// Entries of the slot's gather tables that load_array takes for `t`: its slices where the
  /// kernel gathers its keys or values, else none.
  [[nodiscard]] std::size_t gather_entries(const chunk_task& t) const;
  /// Whether the slices of `t` average under gather_copy_min_bytes of `element_bytes` each.
  [[nodiscard]] bool has_short_slices(const chunk_task& t, std::uint64_t element_bytes) const
  {
    const std::uint64_t average_bytes =
        t.slices.empty() ? 0 : t.count * element_bytes / t.slices.size();
    return average_bytes < gather_copy_min_bytes;
  }
  /// Whether the gather kernel reads an array at `mapped` (null: not mapped memory).
  [[nodiscard]] bool takes_gather_kernel(const char* mapped, bool short_slices) const noexcept
  {
    return mapped != nullptr && (gather == gather_mode::kernel ||
                                 (gather == gather_mode::automatic && short_slices));
  }
  /// Whether task `t`, which takes `entries` of the gather tables (gather_entries), may join the
  /// tasks slot `s` holds: a plain task (no encoding, no decoding, one source, no wait to write)
  /// where the slot's buffers, gather tables (past the entries its tasks took: slot::entry_end)
  /// and a lane's share of the scratch hold every task of the slot with it, on at most
  /// sort_lanes lanes.
  [[nodiscard]] bool batch_fits(const slot& s, const chunk_task& t, std::size_t entries) const;
  /// Where the next task of slot `s` would begin: past its last, at a multiple of 64 elements
  /// (256 bytes of 32-bit keys), where the sorts' vector loads align as in a buffer of its own.
  [[nodiscard]] static std::uint64_t next_at(const slot& s) noexcept
  {
    const std::uint64_t end = s.at.back() + s.tasks.back()->count;
    return (end + 63) / 64 * 64;
  }
  /// A lane's share of the scratch where `n` sort side by side.
  [[nodiscard]] std::size_t lane_scratch_bytes(std::size_t n) const noexcept
  {
    return sizes.scratch / n / 256 * 256;
  }

  // Copy-in stage (round_load.cpp).

  /// Copy-in stage of the slot's tasks, one after another into its buffers.
  void load(slot& s);

  /// One task into slot `s` at `at` elements, its gather tables past the first `entries`, at
  /// most `room` of them; returns the bytes it read.
  std::uint64_t load_task(slot& s, const chunk_task& t, std::uint64_t at, std::size_t entries,
                          std::size_t room);

  /// One array of a task (its keys, or `values`) onto the device: slice by slice through the
  /// copy engine (staged when the source is not pinned), or in one gather kernel over mapped
  /// memory for short slices. A task that reads two parts (chunk_task::from_alt) takes the copy
  /// engines: its slices are a block or more each. `entries` and `d_table`: where the gather
  /// kernel's table of the task's slices goes (pinned and device memory), `room` entries at
  /// most, else the copy engines take them.
  void load_array(const chunk_task& t, bool values, std::uint64_t element_bytes, char* d_out,
                  cuda::gather_slice* entries, cuda::gather_slice* d_table, std::size_t room);

  /// Gathers `count` slices tabled at d_entries (device memory) into d_out, one kernel launch
  /// per 65535 slices, on `stream` (round 2's loads: h2d).
  void gather_table(const cuda::gather_slice* d_entries, std::size_t count,
                    std::uint64_t longest, std::uint64_t element_bytes, char* d_out,
                    cudaStream_t stream);

  /// Gathers slices of mapped host memory at `base` (device address `d_base`) with one kernel
  /// launch per 65535 slices, through the slot's pinned and device tables.
  void gather_mapped(const std::vector<run>& slices, const char* d_base,
                     std::uint64_t element_bytes, char* d_out, cuda::gather_slice* entries,
                     cuda::gather_slice* d_table);

  /// All slices of pinned memory in one cudaMemcpyBatchAsync: a round-2 task has d^2 slices,
  /// and issuing one copy call each (about 5 us) held the copy engine back (measured: round 2
  /// at 34 GB/s against round 1's 51 GB/s with d = 32 on an H200). False where the driver lacks
  /// batches (the caller copies slice by slice).
  bool batch_copies(const chunk_task& t, bool values, std::uint64_t element_bytes, char* d_out);

  /// Round 2 of a compressed job: the keys of the task's slices decoded straight from the
  /// mapped round-1 buffer into the slot, the slices of chunks stored raw gathered beside them,
  /// in one decode launch and one gather launch (per 65535 slices). The compressed bytes cross
  /// the link once, read by the decoding SMs; copying them into device memory first would need
  /// a device buffer as large as the compressed chunk, which the capacity does not hold.
  /// Returns the bytes read from host memory, or nullopt when the round-1 buffer is not mapped
  /// or a stream not 8-byte aligned (load_decoded_on_host then serves the task).
  std::optional<std::uint64_t> load_encoded_keys(slot& s, const chunk_task& t);

  /// Round 2 of a compressed job whose round-1 buffer is not mapped (GPUSORT_ROUND1_PINNED=0,
  /// a measuring aid, or an index kept outside it): the keys decoded on the host by the
  /// reference codec, slices on every core, then copied in through the staging like any
  /// pageable array. Returns the bytes copied in.
  std::uint64_t load_decoded_on_host(slot& s, const chunk_task& t);

  // Compute stage (round_sort.cpp).

  /// Compute stage: each task's ordered bits, sort, deal or tail, raw bits again (or, for round
  /// 1 of a compressed job, the encoding); the tasks of a slot that holds several side by side,
  /// one a lane, each with its share of the scratch.
  void sort(slot& s);

  /// One task's ordered bits, sort, deal and raw bits again (without encoding), at `at`
  /// elements of slot `s` and of the alternates, on `st` with `scratch_bytes` of scratch at
  /// `d_scratch`; true when its result lies in the alternates.
  bool sort_task(slot& s, const chunk_task& t, std::uint64_t at, cudaStream_t st,
                 void* d_scratch, std::size_t scratch_bytes);

  /// Round 1 of a compressed job, on the compute stream after the deal: measures the stream
  /// (one read of the keys, and a wait for its 8 bytes), then, where it pays and fits, encodes
  /// into the sort's alternate buffer, the index ahead of the stream, which becomes the slot's.
  /// The wait costs the compute stream a round trip per chunk; in exchange the index needs no
  /// device memory of its own (a chunk's index is 0.3% of its u32 keys: 3 slots of it would take
  /// capacity from every job), and the store knows every size before it copies.
  void encode(slot& s, const chunk_task& t);

  /// Round 1 of a scattering job, after the sort on `st`: each sorted task's count of keys below
  /// every bucket bound (one binary search a bound), into the slot's mapped counts.
  void count_buckets(slot& s, cudaStream_t st);

  // Copy-out stage (round_store.cpp).

  /// Copy-out stage. Returns with the copies queued and, where the staging's mover writes
  /// them (files, memory the engine did not pin), the writes going on behind: finish_store
  /// waits for them, while the storer queues the next slot's copies. With chunks of a few MiB
  /// each copy, wake-up and write came in turn, and round 2 of 8 GiB into a file took 0.73 s in
  /// 1594 chunks against 0.35 s in 37 (h200-20261201-s19/call1, issue 44). Round 1 of a
  /// compressed job (its encode_target's result) and GPUSORT_WRITE_BEHIND=0 return once the
  /// tasks are in host memory.
  void store(slot& s);

  /// Copy-out stage of a scattering round: once the slot's counts are in, each task's places
  /// (in chunk order: scatter_places), then every bucket's slice written there, by a kernel
  /// writing to the mapped round-1 buffer (cuda::scatter_lines), or, where the buffer is not
  /// mapped, slice by slice through the copy engine. `check`: the job's, while a place waits.
  /// Returns with the writes queued, `stored` recorded behind them: the storer places the next
  /// slot's slices while these are written (finish_store waits for them), where waiting
  /// here left the link idle for a wake-up, a place and a launch at every chunk.
  void store_scattered(slot& s, const std::function<void()>& check);

  /// One array of a scattering task (its keys or values, `element_bytes` each, sorted at
  /// `d_src`) to the places scatter_lengths and scatter_places_at give, in `dst` (elements).
  void scatter_array(const chunk_task& t, const char* d_src, void* dst,
                     std::uint64_t element_bytes, cuda::gather_slice* entries,
                     cuda::gather_slice* d_table);

  /// Waits for the writes that store or store_scattered left behind for `s`: then its tasks
  /// lie in host memory.
  void finish_store(slot& s);
};

}  // namespace gpusort::detail::gpu_ring
