#include "pipeline/cuda/cuda_device.hpp"

#include "core/checks.hpp"
#include "core/cpu_sort.hpp"
#include "core/cuda/chunk_ops.cuh"
#include "core/cuda/merge_ops.cuh"
#include "core/cuda/ordered_keys.cuh"
#include "core/cuda/run_codec.cuh"
#include "core/log.hpp"
#include "core/run_codec.hpp"
#include "core/switches.hpp"
#include "pipeline/cuda/resources.hpp"
#include "pipeline/cuda/stage_queue.hpp"
#include "pipeline/cuda/stage_totals.hpp"
#include "pipeline/cuda/staging.hpp"

#include <gpusort/error.hpp>
#include <gpusort/units.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <span>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace gpusort::detail {

namespace {

constexpr std::uint32_t max_slices_per_launch = 65535;

/// The runtime's view of `p` when it lies in page-locked host memory, else nullopt.
std::optional<cudaPointerAttributes> pinned_attributes(const void* p) noexcept
{
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    cudaGetLastError();
    return std::nullopt;
  }
  if (a.type != cudaMemoryTypeHost) return std::nullopt;
  return a;
}

/// N events that can time (stage marks).
template <std::size_t... I>
std::array<cuda::cuda_event, sizeof...(I)> timing_events(std::index_sequence<I...>)
{
  return {((void)I, cuda::cuda_event{cuda::event_timing::enabled})...};
}

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

/// GPUSORT_PROFILE_TRACE=FILE (a measurement switch, with sort_options::profile): every chunk's
/// stage marks, one line a chunk appended to FILE, for the waits that a profile's busy sums
/// cannot order (issue 44: which of a scattering round's stages holds the next one up).
std::optional<std::string> profile_trace_path()
{
  static const std::optional<std::string> path = switch_text("GPUSORT_PROFILE_TRACE");
  return path;
}

/// Where a device's stages spent one round, from the slots' timing events.
class round_profile {
 public:
  /// At the round's start, with `s` idle: the event and the host clock mark the same moment.
  void begin(cudaStream_t s, const job_context& ctx)
  {
    start_.record(s);
    origin_ = ctx.elapsed();
    host_origin_ = std::chrono::steady_clock::now();
    tracing_ = profile_trace_path().has_value();
  }
  /// Adds a finished chunk: its marks hold (begin, end) of each stage it ran.
  void add(const slot& sl)
  {
    std::string line;
    const auto us = [&](const cuda::cuda_event& e) {
      return std::to_string(std::lround(cuda::elapsed_ms(start_, e) * 1e3));
    };
    for (unsigned st = 0; st < gpu_stage_count; ++st) {
      if (!sl.ran[st]) continue;
      totals_.add(static_cast<gpu_stage>(st), cuda::elapsed_ms(start_, sl.marks[2 * st]) / 1e3,
                  cuda::elapsed_ms(start_, sl.marks[2 * st + 1]) / 1e3, sl.stage_bytes[st],
                  sl.tasks.size());
      if (!tracing_) continue;
      std::string name = stage_name(static_cast<gpu_stage>(st));
      std::replace(name.begin(), name.end(), ' ', '_');
      line += " " + name + " " + us(sl.marks[2 * st]) + " " + us(sl.marks[2 * st + 1]);
    }
    if (!tracing_) return;
    if (sl.counted) line += " count " + us(sl.count_marks[0]) + " " + us(sl.count_marks[1]);
    if (sl.host_marks.back() != std::chrono::steady_clock::time_point{}) {
      line += " host";
      for (const auto& t : sl.host_marks)
        line += " " + std::to_string(std::chrono::duration_cast<std::chrono::microseconds>(
                                         t - host_origin_)
                                         .count());
    }
    trace_.push_back("chunk " + std::to_string(trace_.size()) + " tasks " +
                     std::to_string(sl.tasks.size()) + line);
  }
  void report(job_context& ctx, const std::string& device, int round) const
  {
    totals_.report(ctx, device, round, origin_);
    if (!tracing_ || trace_.empty()) return;
    std::FILE* f = std::fopen(profile_trace_path()->c_str(), "a");
    if (f == nullptr) return;  // a measurement aid: the sort goes on without it
    for (const std::string& l : trace_)
      std::fprintf(f, "%s round %d %s\n", device.c_str(), round, l.c_str());
    std::fclose(f);
  }

 private:
  cuda::cuda_event start_{cuda::event_timing::enabled};
  double origin_{};
  std::chrono::steady_clock::time_point host_origin_{};
  bool tracing_{};
  std::vector<std::string> trace_;
  stage_totals totals_;
};

/// Device address of mapped pinned host memory, or null when kernels cannot read it.
const char* mapped_address(const void* host) noexcept
{
  const std::optional<cudaPointerAttributes> a = pinned_attributes(host);
  return a ? static_cast<const char*>(a->devicePointer) : nullptr;
}

/// The offset from host to device addresses that holds for both ends of a range a kernel reads
/// (`low` and `high`, in mapped pinned memory), or nullopt where either is not mapped or they
/// map apart: round 2 translates the addresses of its encoded slices, up to d^2 per task, with
/// one lookup for each end instead of one each (they all lie in the round-1 buffer).
std::optional<std::uintptr_t> common_mapping(std::uintptr_t low, std::uintptr_t high) noexcept
{
  const char* d_low = mapped_address(reinterpret_cast<const void*>(low));
  const char* d_high = mapped_address(reinterpret_cast<const void*>(high));
  if (d_low == nullptr || d_high == nullptr) return std::nullopt;
  const std::uintptr_t shift = reinterpret_cast<std::uintptr_t>(d_low) - low;
  if (reinterpret_cast<std::uintptr_t>(d_high) - high != shift) return std::nullopt;
  return shift;
}

/// What the decode kernel reads of one encoded slice (core/cuda/run_codec/kernels.cuh): its
/// blocks' index entries and, of its stream, every block's words up to the slice's last key.
struct slice_reads {
  std::uint64_t blocks{};
  std::uint64_t stream_bytes{};
};

slice_reads reads_of(const codec::encoded_slice& e)
{
  if (e.last <= e.first) return {};
  const std::uint64_t first_block = e.first / codec::block_keys;
  const std::uint64_t blocks = (e.last - 1) / codec::block_keys - first_block + 1;
  const codec::run_block& last = e.index[blocks - 1];
  const auto keys_to = static_cast<std::uint32_t>(
      e.last - (first_block + blocks - 1) * codec::block_keys);  // in the last block
  return {blocks, last.byte_offset - e.index[0].byte_offset + codec::block_bytes(last.width,
                                                                                  keys_to)};
}

/// The scratch of a ring for chunks of c elements: the in-core sort's or the run codec's,
/// whichever is larger. One buffer serves both, as round 1 encodes on the compute stream after
/// the sort: a job loses no capacity to the codec where the sort's scratch is the larger (the
/// codec's is 13 bytes per 2048 keys and CUB's scan storage). Sized for as many runs as codec
/// blocks (a run adds at most one partial block); a task dealt into more grows it (encode).
std::uint64_t ring_scratch_bytes(const chunk_sorter& with, const element_layout& l,
                                 std::uint64_t c)
{
  return std::max<std::uint64_t>(
      with.scratch_bytes(c, l.key_bytes, l.value_bytes),
      cuda::run_codec_scratch_bytes(c, std::max<std::uint64_t>(codec::blocks_of(c), 1)));
}

static_assert(table_entry_bytes == sizeof(codec::encoded_slice) + 2 * sizeof(cuda::gather_slice),
              "buffer_sizes.hpp counts a slice's table entries as round_state lays them out");

/// How round 2 gathers its slices from the pinned round-1 output. Copy engines move large
/// slices at the link's full rate without taking SMs from the sort of the next chunk; a kernel
/// reading mapped memory wins only where slices are so short that one copy call per slice costs
/// more than its bytes (design.md section 1). GPUSORT_GATHER=copy|kernel|host overrides the
/// choice, for measuring one against another: `host` packs short slices into the staging's
/// pieces on the host's cores (staging::pack_in) and copies whole pieces, which leaves every SM
/// to the sort (issue 44: round 2's sort beside a gather kernel took 1.7x round 1's) but fed the
/// link at 15-19 GB/s where the warp kernel gathers at 29-34 (h200x2-20261130-s10/call4).
enum class gather_mode : std::uint8_t { automatic, copy, kernel, host };

gather_mode gather_mode_from_environment() noexcept
{
  const std::optional<std::string_view> s =
      switch_word("GPUSORT_GATHER", {"auto", "copy", "kernel", "host"});
  return s == "copy"     ? gather_mode::copy
         : s == "kernel" ? gather_mode::kernel
         : s == "host"   ? gather_mode::host
                         : gather_mode::automatic;
}

/// The gather kernels' tuning, for measuring one choice against another: GPUSORT_GATHER_BLOCKS
/// replaces both grid caps (the blocks that walk a table of short slices beside the sort),
/// GPUSORT_GATHER_THREADS the threads a block (32 to 1024; 8 blocks of 1024 keep as many loads
/// in flight as 32 of 256 on a quarter of the SMs, which a sort beside them then has whole),
/// and GPUSORT_GATHER_WARPS=0 sends short slices to the block-a-slice kernel as before.
cuda::gather_tuning gather_tuning_from_environment() noexcept
{
  cuda::gather_tuning tuning;
  if (const std::optional<std::uint64_t> blocks = switch_count("GPUSORT_GATHER_BLOCKS", 1, 65535))
    tuning.max_blocks = tuning.max_warp_blocks = static_cast<std::uint32_t>(*blocks);
  if (const std::optional<std::uint64_t> threads = switch_count("GPUSORT_GATHER_THREADS", 32, 1024))
    tuning.threads_per_block = static_cast<std::uint32_t>(*threads);
  if (!switch_flag("GPUSORT_GATHER_WARPS", true)) tuning.warp_slice_elements = 0;
  return tuning;
}

/// Blocks of a scattering store's kernel (cuda::scatter_lines), GPUSORT_SCATTER_BLOCKS for the
/// A/B: fewer leave the sort beside it faster and the copy-in fuller, too few starve the writes.
/// 8 GiB u64 on one H200 (h200-20261201-s18/call4), 4 / 8 / 16 / 32 blocks: 1/256 0.619 /
/// 0.533 / 0.532 / 0.549 s, the smallest budget 1.118 / 0.821 / 0.698 / 0.688 s.
unsigned scatter_blocks_from_environment() noexcept
{
  return static_cast<unsigned>(switch_count("GPUSORT_SCATTER_BLOCKS", 1, 1024).value_or(16));
}

/// Most tasks one ring slot takes, each sorted on a lane (a stream) of its own beside the
/// others. A small budget's chunks are too small to fill an H200 with one sort (CUB's radix
/// sort takes about 95 us at 65K to 262K keys, eight passes of a launch and a look-back chain;
/// the sample sort's levels some 17 short launches), and its ring, sized for round 2's bound,
/// holds two of round 1's chunks (issue 44). GPUSORT_SORT_LANES=1 takes one task a slot, as
/// before, for the A/B.
constexpr unsigned max_sort_lanes = gpu_max_sort_lanes;

/// How a scattering store's kernel gets its table of slices. Copied, the table crossed to
/// device memory on the copy engine that brings the next chunks in, behind them: each store
/// waited for a chunk's copy-in before its writes began, and round 1 ran at the pace of both
/// one after the other (issue 44). Mapped, the kernel reads its few KiB of entries from the
/// pinned table itself. GPUSORT_SCATTER_TABLE=copy for the A/B.
bool scatter_table_mapped_from_environment() noexcept
{
  return switch_word("GPUSORT_SCATTER_TABLE", {"mapped", "copy"}) != "copy";
}

unsigned sort_lanes_from_environment() noexcept
{
  return static_cast<unsigned>(
      switch_count("GPUSORT_SORT_LANES", 1, max_sort_lanes).value_or(max_sort_lanes));
}

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
              const chunk_sorter& with, gpu_pinned& pinned)
      // In whole pages: the budget counts each buffer so (buffer_sizes.hpp), and the slack
      // lets a slot take one more small task and a lane's share of the scratch fit.
      : sizes{.keys = device_pages(s.keys),
              .values = device_pages(s.values),
              .scratch = device_pages(s.scratch)},
        table_entries{std::max<std::size_t>(entries, 1)},
        in_staging{pinned.in},
        out_staging{pinned.out},
        sorter{with},
        gather{gather_mode_from_environment()},
        gather_tuning{gather_tuning_from_environment()},
        scatter_blocks{scatter_blocks_from_environment()},
        gather_copy_min_bytes{o.gather_copy_min_bytes},
        sort_lanes{sort_lanes_from_environment()},
        scatter_table_mapped{scatter_table_mapped_from_environment()}
  {
    for (unsigned i = 1; i < sort_lanes; ++i) {
      lanes.emplace_back();
      joined.emplace_back();
    }
    for (unsigned i = 0; i < cuda_device::ring_slots; ++i) {
      slot& sl = slots.emplace_back();
      sl.keys = cuda::device_buffer{sizes.keys};
      sl.values = cuda::device_buffer{sizes.values};
    }
    grow_tables(table_entries);
    alt_keys = cuda::device_buffer{sizes.keys};
    alt_values = cuda::device_buffer{sizes.values};
    scratch = cuda::device_buffer{sizes.scratch};
  }

  /// Bytes of a slot's key table: a decode table and a gather table of table_entries each.
  [[nodiscard]] std::size_t decode_table_bytes() const noexcept
  {
    return table_entries * sizeof(codec::encoded_slice);
  }

  /// Gather tables for `entries` slices per task (the ring's streams are idle between rounds).
  void grow_tables(std::size_t entries)
  {
    table_entries = std::max<std::size_t>(entries, 1);
    const std::size_t table_bytes = table_entries * sizeof(cuda::gather_slice);
    const std::size_t key_bytes = decode_table_bytes() + table_bytes;
    tables = cuda::device_buffer{};  // first, so that its pages are free for the new one
    tables = cuda::device_buffer{slots.size() * (key_bytes + table_bytes) +
                                 table_bounds_bytes(table_entries)};
    char* d_at = tables.data<char>();
    d_bounds = reinterpret_cast<std::uint64_t*>(d_at + slots.size() * (key_bytes + table_bytes));
    scatter_source = nullptr;  // the bounds' copy went with the old tables
    for (slot& sl : slots) {
      sl.key_table_host = cuda::pinned_buffer{key_bytes};
      sl.value_table_host = cuda::pinned_buffer{table_bytes};
      sl.d_key_table = d_at;
      sl.d_value_table = d_at + key_bytes;
      d_at += key_bytes + table_bytes;
    }
  }

  ~round_state()
  {
    // No buffer may go while a copy or kernel still uses it.
    GPUSORT_CUDA_ASSERT_OK(cudaStreamSynchronize(h2d.value()));
    GPUSORT_CUDA_ASSERT_OK(cudaStreamSynchronize(compute.value()));
    GPUSORT_CUDA_ASSERT_OK(cudaStreamSynchronize(d2h.value()));
    for (const cuda::cuda_stream& lane : lanes)
      GPUSORT_CUDA_ASSERT_OK(cudaStreamSynchronize(lane.value()));
  }
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

  /// Gathers `count` slices tabled at d_entries (device memory) into d_out, one kernel launch
  /// per 65535 slices, on `stream` (round 2's loads: h2d).
  void gather_table(const cuda::gather_slice* d_entries, std::size_t count,
                    std::uint64_t longest, std::uint64_t element_bytes, char* d_out,
                    cudaStream_t stream)
  {
    for (std::size_t first = 0; first < count; first += max_slices_per_launch) {
      const auto group =
          static_cast<std::uint32_t>(std::min<std::size_t>(max_slices_per_launch, count - first));
      cuda::gather(d_entries + first, group, longest, d_out,
                   static_cast<unsigned>(element_bytes), stream, gather_tuning);
    }
  }

  /// Gathers slices of mapped host memory at `base` (device address `d_base`) with one kernel
  /// launch per 65535 slices, through the slot's pinned and device tables.
  void gather_mapped(const std::vector<run>& slices, const char* d_base,
                     std::uint64_t element_bytes, char* d_out, cuda::gather_slice* entries,
                     cuda::gather_slice* d_table)
  {
    std::uint64_t at = 0, longest = 0;
    for (std::size_t i = 0; i < slices.size(); ++i) {
      entries[i] = {d_base + slices[i].offset * element_bytes, slices[i].length, at};
      at += slices[i].length;
      longest = std::max(longest, slices[i].length);
    }
    GPUSORT_CUDA_TRY(cudaMemcpyAsync(d_table, entries,
                                     slices.size() * sizeof(cuda::gather_slice),
                                     cudaMemcpyHostToDevice, h2d.value()));
    gather_table(d_table, slices.size(), longest, element_bytes, d_out, h2d.value());
  }

  /// One array of a task (its keys, or `values`) onto the device: slice by slice through the
  /// copy engine (staged when the source is not pinned), or in one gather kernel over mapped
  /// memory for short slices. A task that reads two parts (chunk_task::from_alt) takes the copy
  /// engines: its slices are a block or more each. `entries` and `d_table`: where the gather
  /// kernel's table of the task's slices goes (pinned and device memory), `room` entries at
  /// most, else the copy engines take them.
  void load_array(const chunk_task& t, bool values, std::uint64_t element_bytes, char* d_out,
                  cuda::gather_slice* entries, cuda::gather_slice* d_table, std::size_t room)
  {
    const void* src = values ? t.src_values : t.src_keys;
    const bool two_parts = !t.from_alt.empty();
    const char* mapped = t.src_ordered && !two_parts ? mapped_address(src) : nullptr;
    const bool short_slices = has_short_slices(t, element_bytes);
    if (takes_gather_kernel(mapped, short_slices) && t.slices.size() <= room) {
      gather_mapped(t.slices, mapped, element_bytes, d_out, entries, d_table);
      return;
    }
    // Packed on the host where the kernel would gather (short slices of memory: pack_in reads
    // no file window); long ones cross whole.
    const bool packed =
        gather == gather_mode::host && short_slices && !find_file_window(src).has_value();
    if (t.slices.size() > 1 && mapped != nullptr && !packed &&
        batch_copies(t, values, element_bytes, d_out))
      return;
    const bool pinned =
        is_pinned(src) && (!two_parts || is_pinned(values ? t.alt_src_values : t.alt_src_keys));
    // A pageable round-1 buffer (or GPUSORT_GATHER=host): packed pieces.
    if (t.slices.size() > 1 && (!pinned || packed)) {
      gather_runs.clear();
      for (std::size_t i = 0; i < t.slices.size(); ++i)
        if (t.slices[i].length > 0)
          gather_runs.push_back({.data = t.slice_source(i, values, element_bytes),
                                 .bytes = t.slices[i].length * element_bytes});
      if (packed)
        in_staging.pack_in(d_out, gather_runs, h2d.value());
      else
        in_staging.gather_in(d_out, gather_runs, h2d.value());
      return;
    }
    std::uint64_t at = 0;
    for (std::size_t i = 0; i < t.slices.size(); ++i) {
      copy_to_device(d_out + at * element_bytes, t.slice_source(i, values, element_bytes),
                     t.slices[i].length * element_bytes, h2d.value(), in_staging);
      at += t.slices[i].length;
    }
  }

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
  /// Entries of the slot's gather tables that load_array takes for `t`: its slices where the
  /// kernel gathers its keys or values, else none.
  [[nodiscard]] std::size_t gather_entries(const chunk_task& t) const
  {
    // A scattering chunk's store tables a slice a bucket.
    if (t.scatter != nullptr) return t.scatter->buckets->count();
    if (!t.src_ordered || !t.from_alt.empty()) return 0;
    const auto kernel = [&](const void* src, std::uint64_t element_bytes) {
      return element_bytes > 0 &&
             takes_gather_kernel(mapped_address(src), has_short_slices(t, element_bytes));
    };
    return kernel(t.src_keys, layout.key_bytes) || kernel(t.src_values, layout.value_bytes)
               ? t.slices.size()
               : 0;
  }

  /// All slices of pinned memory in one cudaMemcpyBatchAsync: a round-2 task has d^2 slices,
  /// and issuing one copy call each (about 5 us) held the copy engine back (measured: round 2
  /// at 34 GB/s against round 1's 51 GB/s with d = 32 on an H200). False where the driver lacks
  /// batches (the caller copies slice by slice).
  bool batch_copies(const chunk_task& t, bool values, std::uint64_t element_bytes, char* d_out)
  {
    if (!batch_supported) return false;
    batch_dst.clear();
    batch_src.clear();
    batch_size.clear();
    std::uint64_t at = 0;
    for (std::size_t i = 0; i < t.slices.size(); ++i) {
      const std::uint64_t length = t.slices[i].length;
      if (length == 0) continue;
      batch_dst.push_back(d_out + at * element_bytes);
      batch_src.push_back(t.slice_source(i, values, element_bytes));
      batch_size.push_back(length * element_bytes);
      at += length;
    }
    if (batch_dst.empty()) return true;
    cudaMemcpyAttributes attributes{};
    attributes.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    std::size_t first_index = 0;
    const cudaError_t e = GPUSORT_CUDA_CALL(
        copy, cudaMemcpyBatchAsync(batch_dst.data(), batch_src.data(), batch_size.data(),
                                   batch_dst.size(), &attributes, &first_index, 1, h2d.value()));
    if (e == cudaErrorNotSupported || e == cudaErrorCallRequiresNewerDriver) {
      cudaGetLastError();
      batch_supported = false;
      return false;
    }
    GPUSORT_CUDA_TRY(e);
    return true;
  }

  /// Round 2 of a compressed job: the keys of the task's slices decoded straight from the
  /// mapped round-1 buffer into the slot, the slices of chunks stored raw gathered beside them,
  /// in one decode launch and one gather launch (per 65535 slices). The compressed bytes cross
  /// the link once, read by the decoding SMs; copying them into device memory first would need
  /// a device buffer as large as the compressed chunk, which the capacity does not hold.
  /// Returns the bytes read from host memory, or nullopt when the round-1 buffer is not mapped
  /// or a stream not 8-byte aligned (load_decoded_on_host then serves the task).
  std::optional<std::uint64_t> load_encoded_keys(slot& s, const chunk_task& t)
  {
    const std::uint64_t kb = layout.key_bytes;
    // The lowest and highest addresses the kernels read, of each kind, to translate them all
    // with one lookup per end.
    std::uintptr_t index_low = UINTPTR_MAX, index_high = 0, stream_low = UINTPTR_MAX,
                   stream_high = 0;
    std::uint64_t most_blocks = 0, read_bytes = 0, longest_raw = 0;
    std::size_t encoded_count = 0, raw_count = 0;
    // The kernel reads the index and the stream as 8-byte words (the format's alignment, which
    // both codecs' encoders demand of a stream): anything else is decoded on the host.
    bool aligned = true;
    for (std::size_t i = 0; i < t.slices.size(); ++i) {
      const codec::encoded_slice& e = t.encoded[i];
      if (e.index == nullptr) {
        ++raw_count;
        longest_raw = std::max(longest_raw, t.slices[i].length);
        read_bytes += t.slices[i].length * kb;
        continue;
      }
      GPUSORT_EXPECTS(e.last - e.first == t.slices[i].length,
                      "an encoded slice covers as many keys as its slice");
      const slice_reads r = reads_of(e);
      if (r.blocks == 0) continue;
      ++encoded_count;
      most_blocks = std::max(most_blocks, r.blocks);
      read_bytes += r.blocks * sizeof(codec::run_block) + r.stream_bytes;
      const auto index_at = reinterpret_cast<std::uintptr_t>(e.index);
      const auto stream_at = reinterpret_cast<std::uintptr_t>(e.stream);
      index_low = std::min(index_low, index_at);
      index_high = std::max(index_high, index_at + r.blocks * sizeof(codec::run_block) - 1);
      aligned = aligned && index_at % 8 == 0;
      // A stream of no bytes (equal keys) is never read, wherever it points.
      if (r.stream_bytes == 0) continue;
      aligned = aligned && stream_at % 8 == 0;
      stream_low = std::min(stream_low, stream_at);
      stream_high = std::max(stream_high, stream_at + r.stream_bytes - 1);
    }
    std::optional<std::uintptr_t> index_shift{0}, stream_shift{0};
    if (encoded_count > 0) index_shift = common_mapping(index_low, index_high);
    if (stream_high > 0) stream_shift = common_mapping(stream_low, stream_high);
    const char* d_src = raw_count > 0 ? mapped_address(t.src_keys) : nullptr;
    if (!aligned || !index_shift || !stream_shift || (raw_count > 0 && d_src == nullptr))
      return std::nullopt;

    auto* decode_host = s.key_table_host.data<codec::encoded_slice>();
    auto* gather_host = reinterpret_cast<cuda::gather_slice*>(s.key_table_host.data<char>() +
                                                              decode_table_bytes());
    std::size_t next_encoded = 0, next_raw = 0;
    std::uint64_t at = 0;
    for (std::size_t i = 0; i < t.slices.size(); ++i) {
      const codec::encoded_slice& e = t.encoded[i];
      const std::uint64_t length = t.slices[i].length;
      if (e.index == nullptr) {
        gather_host[next_raw++] = {d_src + t.slices[i].offset * kb, length, at};
      } else if (length > 0) {
        GPUSORT_EXPECTS(e.dst_offset == at,
                        "an encoded slice's dst_offset is where its keys lie in the task");
        decode_host[next_encoded++] = {
            reinterpret_cast<const codec::run_block*>(reinterpret_cast<std::uintptr_t>(e.index) +
                                                      *index_shift),
            reinterpret_cast<const std::byte*>(reinterpret_cast<std::uintptr_t>(e.stream) +
                                               *stream_shift),
            e.first, e.last, at};
      }
      at += length;
    }
    char* d_out = s.keys.data<char>();
    const cudaStream_t st = h2d.value();
    if (encoded_count > 0) {
      GPUSORT_CUDA_TRY(cudaMemcpyAsync(s.d_key_table, decode_host,
                                       encoded_count * sizeof(codec::encoded_slice),
                                       cudaMemcpyHostToDevice, st));
      const auto* d_decode = static_cast<const codec::encoded_slice*>(s.d_key_table);
      for (std::size_t first = 0; first < encoded_count; first += max_slices_per_launch) {
        const auto group = static_cast<std::uint32_t>(
            std::min<std::size_t>(max_slices_per_launch, encoded_count - first));
        cuda::decode_slices(d_decode + first, group, most_blocks, d_out,
                            static_cast<unsigned>(kb), st);
      }
    }
    if (raw_count > 0) {
      auto* d_gather = reinterpret_cast<cuda::gather_slice*>(static_cast<char*>(s.d_key_table) +
                                                             decode_table_bytes());
      GPUSORT_CUDA_TRY(cudaMemcpyAsync(d_gather, gather_host,
                                       raw_count * sizeof(cuda::gather_slice),
                                       cudaMemcpyHostToDevice, st));
      gather_table(d_gather, raw_count, longest_raw, kb, d_out, h2d.value());
    }
    return read_bytes;
  }

  /// Round 2 of a compressed job whose round-1 buffer is not mapped (GPUSORT_ROUND1_PINNED=0,
  /// a measuring aid, or an index kept outside it): the keys decoded on the host by the
  /// reference codec, slices on every core, then copied in through the staging like any
  /// pageable array. Returns the bytes copied in.
  std::uint64_t load_decoded_on_host(slot& s, const chunk_task& t)
  {
    log(log_level::debug,
        "round 2 decodes {} slices ({} keys) on the host: the round-1 buffer or its index is "
        "not mapped pinned memory, or a stream is not 8-byte aligned",
        t.slices.size(), t.count);
    const std::uint64_t kb = layout.key_bytes;
    // Checked here: the decoding below runs in parallel, where nothing may throw.
    slice_at.resize(t.slices.size());
    std::uint64_t at = 0;
    for (std::size_t i = 0; i < t.slices.size(); ++i) {
      const codec::encoded_slice& e = t.encoded[i];
      const std::uint64_t length = t.slices[i].length;
      GPUSORT_EXPECTS(at + length <= t.count, "a task's slices hold `count` elements");
      GPUSORT_EXPECTS(e.index == nullptr || length == 0 ||
                          (e.dst_offset == at && e.last - e.first == length),
                      "an encoded slice matches its slice");
      slice_at[i] = at;
      at += length;
    }
    decoded.resize((t.count * kb + 7) / 8);
    auto decode_all = [&]<typename K>() {
      const std::span<K> out{reinterpret_cast<K*>(decoded.data()), t.count};
      const auto slices = static_cast<std::int64_t>(t.slices.size());
#pragma omp parallel for schedule(dynamic, 16)
      for (std::int64_t i = 0; i < slices; ++i) {
        const codec::encoded_slice& e = t.encoded[static_cast<std::size_t>(i)];
        const run& sl = t.slices[static_cast<std::size_t>(i)];
        if (sl.length == 0) continue;
        if (e.index == nullptr)
          std::memcpy(out.data() + slice_at[static_cast<std::size_t>(i)],
                      static_cast<const char*>(t.src_keys) + sl.offset * kb, sl.length * kb);
        else
          codec::decode<K>(e, out);
      }
    };
    if (kb == 4) decode_all.template operator()<std::uint32_t>();
    else decode_all.template operator()<std::uint64_t>();
    copy_to_device(s.keys.data<char>(), decoded.data(), t.count * kb, h2d.value(), in_staging);
    return t.count * kb;
  }

  /// Whether task `t`, which takes `entries` of the gather tables (gather_entries), may join the
  /// tasks slot `s` holds: a plain task (no encoding, no decoding, one source, no wait to write)
  /// where the slot's buffers, gather tables (past the entries its tasks took: slot::entry_end)
  /// and a lane's share of the scratch hold every task of the slot with it, on at most
  /// sort_lanes lanes.
  [[nodiscard]] bool batch_fits(const slot& s, const chunk_task& t, std::size_t entries) const
  {
    const auto plain = [](const chunk_task& c) {
      return c.encode == nullptr && c.encoded.empty() && c.from_alt.empty() &&
             c.write_after == 0;
    };
    const std::size_t n = s.tasks.size() + 1;
    if (n > sort_lanes || !plain(t) || !plain(*s.tasks.front())) return false;
    const std::uint64_t end = next_at(s) + t.count;
    if (end * layout.key_bytes > sizes.keys || end * layout.value_bytes > sizes.values)
      return false;
    if (s.entry_end + entries > table_entries) return false;
    const std::size_t part = lane_scratch_bytes(n);
    const auto scratch_fits = [&](const chunk_task& c) {
      return sorter.scratch_bytes(c.count, layout.key_bytes, layout.value_bytes) <= part;
    };
    return scratch_fits(t) && std::ranges::all_of(s.tasks, [&](const chunk_task* c) {
             return scratch_fits(*c);
           });
  }
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

  /// Copy-in stage of the slot's tasks, one after another into its buffers.
  void load(slot& s)
  {
    // The slot's last chunk may have been encoded (the ring serves both rounds): only this
    // chunk's compute stage may say so of this one.
    s.ran = {};
    s.stage_bytes = {};
    s.outcome = {};
    s.encoded = false;
    s.index_bytes = 0;
    const cudaStream_t st = h2d.value();
    begin(s, gpu_stage::copy_in, st);
    std::uint64_t in_bytes = 0;
    for (std::size_t i = 0; i < s.tasks.size(); ++i) {
      const std::size_t end = i + 1 < s.tasks.size() ? s.entry_at[i + 1] : table_entries;
      in_bytes += load_task(s, *s.tasks[i], s.at[i], s.entry_at[i],
                            end > s.entry_at[i] ? end - s.entry_at[i] : 0);
    }
    end(s, gpu_stage::copy_in, st, in_bytes);
    s.loaded.record(st);
  }

  /// One task into slot `s` at `at` elements, its gather tables past the first `entries`, at
  /// most `room` of them; returns the bytes it read.
  std::uint64_t load_task(slot& s, const chunk_task& t, std::uint64_t at, std::size_t entries,
                          std::size_t room)
  {
    const std::uint64_t kb = layout.key_bytes, vb = layout.value_bytes;
    const cudaStream_t st = h2d.value();
    std::uint64_t in_bytes = t.count * vb;
    // Every chunk stored raw (auto found nothing worth encoding): copied as without compression,
    // by the copy engines where the slices are long, rather than gathered by a kernel.
    const bool decode =
        std::any_of(t.encoded.begin(), t.encoded.end(),
                    [](const codec::encoded_slice& e) { return e.index != nullptr; });
    if (!decode) {
      load_array(t, false, kb, s.keys.data<char>() + at * kb,
                 s.key_table_host.data<cuda::gather_slice>() + entries,
                 static_cast<cuda::gather_slice*>(s.d_key_table) + entries, room);
      in_bytes += t.count * kb;
    } else {
      GPUSORT_EXPECTS(t.encoded.size() == t.slices.size(), "one encoded entry per slice");
      GPUSORT_EXPECTS(s.tasks.size() == 1, "a task that decodes has its slot to itself");
      begin(s, gpu_stage::decode, st);
      std::optional<std::uint64_t> read = load_encoded_keys(s, t);
      if (!read) read = load_decoded_on_host(s, t);
      end(s, gpu_stage::decode, st, *read);
      in_bytes += *read;
    }
    if (vb > 0)
      load_array(t, true, vb, s.values.data<char>() + at * vb,
                 s.value_table_host.data<cuda::gather_slice>() + entries,
                 static_cast<cuda::gather_slice*>(s.d_value_table) + entries, room);
    return in_bytes;
  }

  /// Round 1 of a compressed job, on the compute stream after the deal: measures the stream
  /// (one read of the keys, and a wait for its 8 bytes), then, where it pays and fits, encodes
  /// into the sort's alternate buffer, the index ahead of the stream, which becomes the slot's.
  /// The wait costs the compute stream a round trip per chunk; in exchange the index needs no
  /// device memory of its own (a chunk's index is 0.3% of its u32 keys: 3 slots of it would take
  /// capacity from every job), and the store knows every size before it copies.
  void encode(slot& s, const chunk_task& t)
  {
    const encode_target& target = *t.encode;
    GPUSORT_EXPECTS(target.index != nullptr && target.result != nullptr,
                    "an encode target has an index and a result");
    s.outcome = {.stream_bytes = 0, .raw = t.count > 0};
    s.encoded = false;
    s.index_bytes = 0;
    if (t.count == 0) return;  // no blocks: an empty stream and index
    const cudaStream_t st = compute.value();
    const unsigned kb = layout.key_bytes;
    const std::uint64_t runs = std::max<std::uint64_t>(t.deal_bins, 1);
    const std::size_t need = cuda::run_codec_scratch_bytes(t.count, runs);
    if (need > sizes.scratch) {
      // More runs than ring_scratch_bytes planned for: rare, and only between chunks.
      GPUSORT_CUDA_TRY(cudaStreamSynchronize(st));
      scratch = cuda::device_buffer{};
      scratch = cuda::device_buffer{need};
      sizes.scratch = need;
    }
    begin(s, gpu_stage::encode, st);
    auto* measured = s.measured.data<std::uint64_t>();
    cuda::encoded_size(s.keys.data(), t.count, runs, kb, measured, scratch.data(), sizes.scratch,
                       st);
    GPUSORT_CUDA_TRY(cudaStreamSynchronize(st));
    const std::uint64_t stream_bytes = *measured;
    const std::uint64_t index_bytes =
        codec::dealt_blocks(t.count, runs) * sizeof(codec::run_block);
    // A stream that does not fit beside its index is one of keys that barely compress (its
    // index is 0.3% of u32 keys): not worth decoding whatever the target says.
    const bool fits = index_bytes <= sizes.keys && stream_bytes <= sizes.keys - index_bytes;
    if (stream_bytes <= target.raw_above && fits) {
      char* base = alt_keys.data<char>();
      cuda::encode_runs(s.keys.data(), t.count, runs, kb,
                        reinterpret_cast<codec::run_block*>(base), base + index_bytes,
                        sizes.keys - index_bytes, nullptr, scratch.data(), sizes.scratch, st);
      std::swap(s.keys, alt_keys);
      s.outcome = {.stream_bytes = stream_bytes, .raw = false};
      s.encoded = true;
      s.index_bytes = index_bytes;
    }
    end(s, gpu_stage::encode, st, t.count * kb);
  }

  /// One task's ordered bits, sort, deal and raw bits again (without encoding), at `at`
  /// elements of slot `s` and of the alternates, on `st` with `scratch_bytes` of scratch at
  /// `d_scratch`; true when its result lies in the alternates.
  bool sort_task(slot& s, const chunk_task& t, std::uint64_t at, cudaStream_t st,
                 void* d_scratch, std::size_t scratch_bytes)
  {
    const unsigned kb = layout.key_bytes, vb = layout.value_bytes;
    char* keys[2] = {s.keys.data<char>() + at * kb, alt_keys.data<char>() + at * kb};
    char* values[2] = {vb > 0 ? s.values.data<char>() + at * vb : nullptr,
                       vb > 0 ? alt_values.data<char>() + at * vb : nullptr};
    int in = 0;  // where the task's elements lie: 0 the slot's buffers, 1 the alternates
    if (!t.src_ordered) cuda::to_ordered(keys[0], t.count, layout.keys(), st);
    // A scattering round whose bounds are aligned needs its chunks in order of their top bits
    // alone: CUB's radix sort on those, where its scratch fits (whatever the in-core sort).
    const bool top_bits =
        t.begin_bit > 0 && cuda::radix_sort_scratch_bytes(t.count, kb, vb) <= scratch_bytes;
    if (top_bits ? cuda::radix_sort(keys[0], keys[1], values[0], values[1], t.count, kb, vb,
                                    d_scratch, scratch_bytes, st, 0, t.begin_bit)
                 : sorter.sort(keys[0], keys[1], values[0], values[1], t.count, kb, vb,
                               d_scratch, scratch_bytes, st, t.key_bits))
      in = 1;
    if (t.deal_bins > 1) {
      cuda::deal(keys[in], values[in], t.count, t.deal_bins, keys[1 - in], values[1 - in], kb,
                 vb, st);
      in = 1 - in;
    }
    if (t.encode == nullptr && !t.dst_ordered)
      cuda::from_ordered(keys[in], t.count, layout.keys(), st);
    return in == 1;
  }

  /// Compute stage: each task's ordered bits, sort, deal or tail, raw bits again (or, for round
  /// 1 of a compressed job, the encoding); the tasks of a slot that holds several side by side,
  /// one a lane, each with its share of the scratch.
  void sort(slot& s)
  {
    const cudaStream_t st = compute.value();
    s.loaded.make_wait(st);
    begin(s, gpu_stage::sort, st);
    std::uint64_t bytes = 0;
    for (const chunk_task* t : s.tasks) bytes += t->count * layout.bytes();
    const std::size_t n = s.tasks.size();
    bool to_alt = false;
    if (n == 1) {
      to_alt = sort_task(s, *s.tasks.front(), 0, st, scratch.data(), sizes.scratch);
    } else {
      fork.record(st);
      const std::size_t part = lane_scratch_bytes(n);
      std::array<bool, max_sort_lanes> in_alt{};
      for (std::size_t i = 0; i < n; ++i) {
        const cudaStream_t lane = i == 0 ? st : lanes[i - 1].value();
        if (i > 0) fork.make_wait(lane);
        in_alt[i] = sort_task(s, *s.tasks[i], s.at[i], lane, scratch.data<char>() + i * part,
                              part);
        if (i > 0) joined[i - 1].record(lane);
      }
      for (std::size_t i = 1; i < n; ++i) joined[i - 1].make_wait(st);
      // The lanes' results lie where their sorts and deals left them: those in the minority
      // cross over in device memory (microseconds), so that one buffer holds them all.
      const auto alts = std::count(in_alt.begin(), in_alt.begin() + static_cast<std::ptrdiff_t>(n),
                                   true);
      to_alt = 2 * static_cast<std::size_t>(alts) > n;
      // Task i's elements of `width` bytes each, from its place in one of `mine` (the slot's)
      // and `alt` to its place in the other.
      const auto cross = [&](std::size_t i, const cuda::device_buffer& mine,
                             const cuda::device_buffer& alt, unsigned width) {
        const std::uint64_t from = s.at[i] * width, count = s.tasks[i]->count * width;
        char* const src = (to_alt ? mine : alt).data<char>() + from;
        char* const dst = (to_alt ? alt : mine).data<char>() + from;
        GPUSORT_CUDA_TRY(cudaMemcpyAsync(dst, src, count, cudaMemcpyDeviceToDevice, st));
      };
      for (std::size_t i = 0; i < n; ++i) {
        if (in_alt[i] == to_alt) continue;
        cross(i, s.keys, alt_keys, layout.key_bytes);
        if (layout.value_bytes > 0) cross(i, s.values, alt_values, layout.value_bytes);
      }
    }
    if (to_alt) {
      std::swap(s.keys, alt_keys);
      std::swap(s.values, alt_values);
    }
    if (s.tasks.front()->scatter != nullptr) count_buckets(s, st);
    end(s, gpu_stage::sort, st, bytes);
    const chunk_task& first = *s.tasks.front();
    if (first.encode != nullptr) {
      encode(s, first);
      if (!s.encoded && !first.dst_ordered)
        cuda::from_ordered(s.keys.data(), first.count, layout.keys(), st);
    }
    s.computed.record(st);
  }

  /// Round 1 of a scattering job, after the sort on `st`: each sorted task's count of keys below
  /// every bucket bound (one binary search a bound), into the slot's mapped counts.
  void count_buckets(slot& s, cudaStream_t st)
  {
    const scatter_buckets& buckets = *s.tasks.front()->scatter->buckets;
    const std::span<const std::uint64_t> probes = buckets.probes();
    if (probes.empty()) return;  // one bucket: the whole chunk
    GPUSORT_EXPECTS(probes.size() <= table_entries, "the tables hold a bound a bucket");
    if (scatter_source != &buckets) {
      // Once a round, in stream order before the first count: the count kernel's reads of
      // mapped host memory waited behind the link's copies (issue 44).
      if (scatter_probes.size() < probes.size_bytes())
        scatter_probes = cuda::pinned_buffer{probes.size_bytes()};
      GPUSORT_CUDA_TRY(cudaStreamSynchronize(st));  // the staging's last copy is done
      std::memcpy(scatter_probes.data(), probes.data(), probes.size_bytes());
      GPUSORT_CUDA_TRY(cudaMemcpyAsync(d_bounds, scatter_probes.data(), probes.size_bytes(),
                                       cudaMemcpyHostToDevice, st));
      scatter_source = &buckets;
    }
    const std::uint64_t per_task = 2 * probes.size();
    const std::uint64_t need = per_task * s.tasks.size() * sizeof(std::uint64_t);
    if (s.scatter_counts.size() < need)
      s.scatter_counts = cuda::pinned_buffer{need, cudaHostAllocPortable | cudaHostAllocMapped};
    auto* d_counts = reinterpret_cast<std::uint64_t*>(
        const_cast<char*>(mapped_address(s.scatter_counts.data())));
    GPUSORT_EXPECTS(d_counts != nullptr, "the scatter's counts are mapped pinned memory");
    if (profiling) s.count_marks[0].record(st);
    for (std::size_t i = 0; i < s.tasks.size(); ++i) {
      const cuda::key_run r{s.keys.data<char>() + s.at[i] * layout.key_bytes, s.tasks[i]->count};
      cuda::count_below_runs({&r, 1}, layout.key_bytes, d_bounds, d_counts + i * per_task,
                             per_task, static_cast<std::uint32_t>(probes.size()), st);
    }
    if (profiling) s.count_marks[1].record(st);
    s.counted = profiling;
  }

  /// Copy-out stage of a scattering round: once the slot's counts are in, each task's places
  /// (in chunk order: scatter_places), then every bucket's slice written there, by a kernel
  /// writing to the mapped round-1 buffer (cuda::scatter_lines), or, where the buffer is not
  /// mapped, slice by slice through the copy engine. `check`: the job's, while a place waits.
  /// Returns with the writes queued, `stored` recorded behind them: the storer places the next
  /// slot's slices while these are written (finish_store waits for them), where waiting
  /// here left the link idle for a wake-up, a place and a launch at every chunk.
  void store_scattered(slot& s, const std::function<void()>& check)
  {
    const cudaStream_t st = d2h.value();
    GPUSORT_CUDA_TRY(cudaEventSynchronize(s.computed.value()));
    if (profiling) s.host_marks[0] = std::chrono::steady_clock::now();
    begin(s, gpu_stage::copy_out, st);
    const std::uint64_t kb = layout.key_bytes, vb = layout.value_bytes;
    std::uint64_t out_bytes = 0;
    const auto* counts = s.scatter_counts.data<std::uint64_t>();
    for (std::size_t i = 0; i < s.tasks.size(); ++i) {
      const chunk_task& t = *s.tasks[i];
      const scatter_target& target = *t.scatter;
      const std::uint64_t buckets = target.buckets->count();
      const std::uint64_t bounds = buckets - 1;
      const std::uint64_t* below = counts + i * 2 * bounds;
      scatter_lengths.resize(buckets);
      scatter_places_at.resize(buckets);
      std::uint64_t from = 0;
      for (std::uint64_t b = 0; b < buckets; ++b) {
        const std::uint64_t to = b < bounds ? below[b] : t.count;
        GPUSORT_EXPECTS(to >= from && to <= t.count, "a bucket's count within its chunk");
        scatter_lengths[b] = to - from;
        from = to;
      }
      target.places->place(target.chunk, scatter_lengths, scatter_places_at, check);
      if (profiling) s.host_marks[1] = std::chrono::steady_clock::now();
      out_bytes += t.count * layout.bytes();
      const char* d_keys = s.keys.data<char>() + s.at[i] * kb;
      const char* d_values = vb > 0 ? s.values.data<char>() + s.at[i] * vb : nullptr;
      scatter_array(t, d_keys, t.dst_keys, kb, s.key_table_host.data<cuda::gather_slice>() +
                    s.entry_at[i], static_cast<cuda::gather_slice*>(s.d_key_table) + s.entry_at[i]);
      if (vb > 0)
        scatter_array(t, d_values, t.dst_values, vb,
                      s.value_table_host.data<cuda::gather_slice>() + s.entry_at[i],
                      static_cast<cuda::gather_slice*>(s.d_value_table) + s.entry_at[i]);
    }
    end(s, gpu_stage::copy_out, st, out_bytes);
    s.stored.record(st);
    if (profiling) s.host_marks[2] = std::chrono::steady_clock::now();
  }

  /// Waits for the writes that store or store_scattered left behind for `s`: then its tasks
  /// lie in host memory.
  void finish_store(slot& s)
  {
    s.stored.synchronize();
    for (const std::uint64_t ticket : s.behind) out_staging.finish(ticket);
    s.behind.clear();
    if (profiling) s.host_marks[3] = std::chrono::steady_clock::now();
  }

  /// One array of a scattering task (its keys or values, `element_bytes` each, sorted at
  /// `d_src`) to the places scatter_lengths and scatter_places_at give, in `dst` (elements).
  void scatter_array(const chunk_task& t, const char* d_src, void* dst,
                     std::uint64_t element_bytes, cuda::gather_slice* entries,
                     cuda::gather_slice* d_table)
  {
    const cudaStream_t st = d2h.value();
    const char* mapped = mapped_address(dst);
    std::uint64_t from = 0;
    std::size_t used = 0;
    for (std::size_t b = 0; b < scatter_lengths.size(); ++b) {
      const std::uint64_t length = scatter_lengths[b];
      if (length > 0 && mapped != nullptr) {
        // scatter_lines reads each slice from the sorted chunk and writes it to the round-1
        // buffer at its place.
        entries[used++] = {d_src + from * element_bytes, length, scatter_places_at[b]};
      } else if (length > 0) {
        copy_to_host(static_cast<char*>(dst) + scatter_places_at[b] * element_bytes,
                     d_src + from * element_bytes, length * element_bytes, st, out_staging);
      }
      from += length;
    }
    GPUSORT_EXPECTS(from == t.count, "a task's buckets hold its keys");
    if (used == 0) return;
    const auto* d_entries =
        scatter_table_mapped
            ? reinterpret_cast<const cuda::gather_slice*>(mapped_address(entries))
            : nullptr;
    if (d_entries == nullptr) {
      GPUSORT_CUDA_TRY(cudaMemcpyAsync(d_table, entries, used * sizeof(cuda::gather_slice),
                                       cudaMemcpyHostToDevice, st));
      d_entries = d_table;
    }
    for (std::size_t first = 0; first < used; first += max_slices_per_launch)
      cuda::scatter_lines(d_entries + first,
                          static_cast<std::uint32_t>(
                              std::min<std::size_t>(max_slices_per_launch, used - first)),
                          const_cast<char*>(mapped), static_cast<unsigned>(element_bytes),
                          scatter_blocks, st);
  }

  /// Copy-out stage. Returns with the copies queued and, where the staging's mover writes
  /// them (files, memory the engine did not pin), the writes going on behind: finish_store
  /// waits for them, while the storer queues the next slot's copies. With chunks of a few MiB
  /// each copy, wake-up and write came in turn, and round 2 of 8 GiB into a file took 0.73 s in
  /// 1594 chunks against 0.35 s in 37 (h200-20261201-s19/call1, issue 44). Round 1 of a
  /// compressed job (its encode_target's result) and GPUSORT_WRITE_BEHIND=0 return once the
  /// tasks are in host memory.
  void store(slot& s)
  {
    const cudaStream_t st = d2h.value();
    s.computed.make_wait(st);
    begin(s, gpu_stage::copy_out, st);
    const std::uint64_t kb = layout.key_bytes, vb = layout.value_bytes;
    const chunk_task& first = *s.tasks.front();
    std::vector<std::uint64_t>* const behind =
        first.encode == nullptr && staging::writes_behind() ? &s.behind : nullptr;
    std::uint64_t out_bytes = 0;
    for (std::size_t i = 0; i < s.tasks.size(); ++i) {
      const chunk_task& t = *s.tasks[i];
      const std::uint64_t at = s.at[i];
      out_bytes += t.count * vb;
      if (s.encoded) {
        copy_to_host(t.encode->index, s.keys.data<char>(), s.index_bytes, st, out_staging);
        void* const stream = t.encode->stream != nullptr ? t.encode->stream : t.dst_keys;
        copy_to_host(stream, s.keys.data<char>() + s.index_bytes, s.outcome.stream_bytes, st,
                     out_staging);
        out_bytes += s.index_bytes + s.outcome.stream_bytes;
      } else {
        copy_to_host(t.dst_keys, s.keys.data<char>() + at * kb, t.count * kb, st, out_staging,
                     behind);
        out_bytes += t.count * kb;
      }
      if (vb > 0)
        copy_to_host(t.dst_values, s.values.data<char>() + at * vb, t.count * vb, st,
                     out_staging, behind);
    }
    end(s, gpu_stage::copy_out, st, out_bytes);
    for (const chunk_task* t : s.tasks) write_equal_tail(*t, layout);  // overlaps the copies
    s.stored.record(st);
    if (behind != nullptr) return;
    finish_store(s);
    if (first.encode != nullptr) *first.encode->result = s.outcome;
  }
};

/// Collects the first failure of the stage threads and stops the others.
class failure_latch {
 public:
  explicit failure_latch(job_context& ctx) : ctx_{ctx} {}
  template <typename F>
  void run(F&& body, std::initializer_list<std::function<void()>> on_failure)
  {
    try {
      body();
    } catch (...) {
      {
        const std::lock_guard lock{mutex_};
        if (!first_) first_ = std::current_exception();
      }
      ctx_.abort();
      for (const auto& f : on_failure) f();
    }
  }
  void rethrow() const
  {
    if (first_) std::rethrow_exception(first_);
  }

 private:
  job_context& ctx_;
  std::mutex mutex_;
  std::exception_ptr first_;
};

}  // namespace

/// What largest_fitting found for one layout and budget (cuda_device::capacity): asked for
/// every job, and a bisection of about 34 steps (an 80 GB budget), each asking CUB for the
/// sort's scratch.
struct fitting_memo {
  std::uint32_t key_bytes{}, value_bytes{};
  bool sample{};
  std::uint64_t budget{};
  std::uint64_t elements{};
};

struct cuda_device_state {
  // Declared first, so that it goes last: the buffers below refer to its staging.
  std::unique_ptr<gpu_pinned> pinned;
  std::unique_ptr<round_state> round;
  std::unique_ptr<resident_buffers> resident;
  std::mutex memo_mutex;
  std::vector<fitting_memo> memo;

  /// largest_fitting's answer for the key, from the memo or from `compute`.
  template <typename Compute>
  std::uint64_t fitting(fitting_memo key, Compute&& compute)
  {
    const auto same = [&](const fitting_memo& m) {
      return m.key_bytes == key.key_bytes &&
             m.value_bytes == key.value_bytes && m.sample == key.sample &&
             m.budget == key.budget;
    };
    {
      const std::lock_guard lock{memo_mutex};
      const auto it = std::find_if(memo.begin(), memo.end(), same);
      if (it != memo.end()) return it->elements;
    }
    key.elements = compute();
    const std::lock_guard lock{memo_mutex};
    // Layouts are few (key and value widths, two sorters); a shrunk budget starts afresh.
    std::erase_if(memo, [&](const fitting_memo& m) { return m.budget != key.budget; });
    memo.push_back(key);
    return key.elements;
  }
};

// ---- gpu_pinned and resident_buffers ----

gpu_pinned::gpu_pinned(const cuda_device_options& options)
    : in{options.staging_piece_bytes, options.staging_pieces},
      out{options.staging_piece_bytes, options.staging_pieces},
      words{resident_buffers::word_count * sizeof(std::uint64_t),
            cudaHostAllocPortable | cudaHostAllocMapped}
{
}

std::size_t resident_buffers::scratch_bytes(const element_layout& layout, std::uint64_t elements,
                                            const cuda_device_options& options,
                                            const chunk_sorter& sorter)
{
  return std::max(sorter.scratch_bytes(options.resident.piece_elements(elements),
                                       layout.key_bytes, layout.value_bytes),
                  cuda::merge_scratch_bytes(options.resident.range_elements(elements),
                                            layout.key_bytes, layout.value_bytes));
}

resident_sizes resident_buffers::needed(const element_layout& layout, std::uint64_t elements,
                                        std::uint64_t gpus, const cuda_device_options& options,
                                        const chunk_sorter& sorter)
{
  return resident_need(layout.key_bytes, layout.value_bytes, elements,
                       scratch_bytes(layout, elements, options, sorter), options.resident, gpus);
}

resident_buffers::resident_buffers(const resident_sizes& s, const cuda_device_options& options,
                                   const chunk_sorter& with, gpu_pinned& pinned)
    : tuning{options},
      sorter{with},
      sizes{s},
      scratch_capacity{s.runs.scratch},
      keys{s.runs.keys},
      values{s.runs.values},
      work_keys{s.work.keys},
      work_values{s.work.values},
      scratch{s.runs.scratch},
      in_staging{pinned.in},
      out_staging{pinned.out},
      words{pinned.words}
{
}

resident_buffers::~resident_buffers()
{
  GPUSORT_CUDA_ASSERT_OK(cudaStreamSynchronize(h2d.value()));
  GPUSORT_CUDA_ASSERT_OK(cudaStreamSynchronize(compute.value()));
  GPUSORT_CUDA_ASSERT_OK(cudaStreamSynchronize(d2h.value()));
}

cuda_device::cuda_device(cuda_device_options options)
    : options_{std::move(options)}, state_{std::make_unique<cuda_device_state>()}
{
  const cuda::set_device_guard guard{options_.id};
  cudaDeviceProp prop{};
  GPUSORT_CUDA_TRY(cudaGetDeviceProperties(&prop, options_.id));
  name_ = "cuda:" + std::to_string(options_.id) + " (" + prop.name + ")";
  sm_major_ = prop.major;
  if (options_.budget) {
    budget_bytes_ = *options_.budget;
  } else {
    std::size_t free_bytes = 0, total = 0;
    GPUSORT_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total));
    budget_bytes_ = free_bytes > options_.reserve_bytes ? free_bytes - options_.reserve_bytes : 0;
  }
}

cuda_device::~cuda_device()
{
  const cuda::set_device_guard guard{options_.id};
  state_.reset();
}

std::string cuda_device::name() const { return name_; }

void cuda_device::shrink_budget() noexcept
{
  {
    // Device memory only: the pinned staging is host memory, and stays.
    const cuda::set_device_guard guard{options_.id};
    state_->round.reset();
    state_->resident.reset();
  }
  // A quarter less, and no more than what is free now: a budget above the GPU's memory comes
  // down to it on the first retry.
  budget_bytes_ -= budget_bytes_ / 4;
  const cuda::set_device_guard guard{options_.id};
  std::size_t free_bytes = 0, total = 0;
  if (cudaMemGetInfo(&free_bytes, &total) == cudaSuccess) {
    const std::uint64_t usable =
        free_bytes > options_.reserve_bytes ? free_bytes - options_.reserve_bytes : 0;
    budget_bytes_ = std::min<std::uint64_t>(budget_bytes_, usable);
  } else {
    cudaGetLastError();
  }
}

namespace {

/// Buffers made by `make` of `grown` sizes, or of the `need`ed ones where the GPU has no room
/// for more right now (the budget is what was free when the engine started: another process
/// may hold some of it since). Only a failure at the needed sizes is the job's.
template <typename Sizes, typename Make>
auto make_grown(const Sizes& grown, const Sizes& need, Make&& make)
{
  if (grown == need) return make(need);
  try {
    return make(grown);
  } catch (const out_of_memory&) {
    return make(need);
  }
}

}  // namespace

device_capacity cuda_device::capacity(const element_layout& layout) const
{
  const std::uint64_t per_element = buffers_per_element * layout.bytes();
  const cuda::set_device_guard guard{options_.id};
  const chunk_sorter with = sorter(layout);
  // Everything a round of capacity c holds, in whole pages, beside the margin.
  auto need = [with, layout](std::uint64_t c) -> std::uint64_t {
    return ring_budget(layout.key_bytes, layout.value_bytes, c,
                       ring_scratch_bytes(with, layout, c));
  };
  // A small job always sorts, whatever the budget: a few thousand elements take far less than
  // any GPU has, where a budget under the margin would leave no capacity at all (a 2-element
  // job with a budget below the margin was refused, naming a "smallest budget" just above it).
  const std::uint64_t fitting = state_->fitting(
      {.key_bytes = layout.key_bytes,
       .value_bytes = layout.value_bytes,
       .sample = with.sample(),
       .budget = budget_bytes_},
      [&] { return largest_fitting(budget_bytes_, per_element, need); });
  const std::uint64_t elements = std::max(fitting, gpu_small_job_elements);
  return device_capacity{
      .elements = elements,
      .bytes_per_element = per_element,
      // The need at the capacity asked about, not at today's: the figure an error names must
      // work when retried (it named 66.12, then 66.15, then 66.54 MiB for 20000003 u32 keys).
      .exact_budget = need,
      .whole_jobs_only = fitting < gpu_small_job_elements};
}

bool cuda_device::resident_fits(const element_layout& layout, std::uint64_t elements,
                                std::uint64_t gpus) const
{
  const cuda::set_device_guard guard{options_.id};
  return budget_margin + resident_buffers::needed(layout, elements, gpus, options_,
                                                  sorter(layout))
                             .total() <=
         budget_bytes_;
}

gpu_pinned& cuda_device::pinned()
{
  if (!state_->pinned) {
    const auto start = std::chrono::steady_clock::now();
    state_->pinned = std::make_unique<gpu_pinned>(options_);
    pinned_made_.seconds += seconds_since(start);
    pinned_made_.bytes += state_->pinned->bytes();
  }
  return *state_->pinned;
}

void cuda_device::profile_made_buffers(job_context& ctx, int round)
{
  // The host's calls (no CUDA event times them): stages of the host, named after the GPU.
  const auto add = [&](made& m, const char* what) {
    if (m.seconds > 0) ctx.add_host_stage(round, what + name_, 1, m.bytes, 0, m.seconds);
    m = {};
  };
  add(pinned_made_, "pinned staging made for ");
  add(device_made_, "device buffers made on ");
}

std::uint64_t cuda_device::room_for(std::uint64_t need, bool for_resident, std::uint64_t tables)
{
  const std::uint64_t kept = budget_margin + tables;
  const std::uint64_t room = budget_bytes_ > kept ? budget_bytes_ - kept : 0;
  std::uint64_t other = 0;
  if (for_resident && state_->round)
    other = state_->round->sizes.total(buffers_per_element) +
            device_pages(state_->round->tables.size());
  else if (!for_resident && state_->resident)
    other = state_->resident->sizes.total();
  if (other > 0 && other <= room && need <= room - other) return room - other;
  // The budget holds one kind or the other: free it first, so that its memory is free for
  // the new buffers.
  if (for_resident)
    state_->round.reset();
  else
    state_->resident.reset();
  return room;
}

resident_buffers& cuda_device::resident(const element_layout& layout, std::uint64_t elements,
                                        std::uint64_t gpus)
{
  const cuda::set_device_guard guard{options_.id};
  std::unique_ptr<resident_buffers>& kept = state_->resident;
  const chunk_sorter with = sorter(layout);
  const resident_sizes need =
      resident_buffers::needed(layout, std::max<std::uint64_t>(elements, 1), gpus, options_,
                               with);
  if (!kept || !kept->sizes.covers(need)) {
    const resident_sizes held = kept ? kept->sizes : resident_sizes{};
    kept.reset();  // first, so that its memory is free for the new one
    const std::uint64_t room = room_for(need.total(), true, 0);
    gpu_pinned& host = pinned();
    const auto start = std::chrono::steady_clock::now();
    kept = make_grown(
        grown_within(held, need, room, [](const resident_sizes& s) { return s.total(); }), need,
        [&](const resident_sizes& sizes) {
          return std::make_unique<resident_buffers>(sizes, options_, with, host);
        });
    device_made_.seconds += seconds_since(start);
    device_made_.bytes += kept->sizes.total();
  }
  kept->sorter = with;
  return *kept;
}

std::uint64_t cuda_device::host_bytes(const element_layout&, std::uint64_t,
                                      std::uint64_t slices) const
{
  // The pinned staging of both directions and the mapped words (gpu_pinned), and each ring
  // slot's pinned gather tables: a decode and a gather entry per key slice, a gather entry per
  // value slice.
  const std::uint64_t staging = 2 * std::uint64_t{options_.staging_pieces} *
                                    options_.staging_piece_bytes +
                                resident_buffers::word_count * sizeof(std::uint64_t);
  const std::uint64_t per_slice =
      sizeof(codec::encoded_slice) + 2 * sizeof(cuda::gather_slice);
  return staging + ring_slots * std::max<std::uint64_t>(slices, 1) * per_slice;
}

void cuda_device::process(const element_layout& layout, task_queue& queue, job_context& ctx)
{
  const cuda::set_device_guard guard{options_.id};
  const std::uint64_t cap = capacity(layout).elements;
  const std::uint64_t largest = std::max<std::uint64_t>(queue.largest(), 1);
  GPUSORT_EXPECTS(largest <= cap, "a task exceeds the GPU's capacity");
  // Room for the job's other round too: a second allocation of the ring would cost more than
  // the gap between the rounds.
  const std::uint64_t elements = std::clamp<std::uint64_t>(queue.reserve(), largest, cap);
  std::unique_ptr<round_state>& kept = state_->round;
  const chunk_sorter with = sorter(layout);
  const buffer_sizes need = round_state::needed(layout, elements, with);
  // A scattering round's lanes each table a slice a bucket (store_scattered): tables for as
  // many lanes as the budget's tables hold (batch_fits then takes no more).
  std::size_t wanted = queue.most_slices();
  if (const std::size_t buckets = queue.most_buckets(); buckets > 0) {
    const std::uint64_t held =
        ring_table_bytes(layout.bytes(), elements, ring_slots) /
        (ring_slots * table_entry_bytes + table_bounds_bytes(1));
    wanted = std::max<std::size_t>(
        wanted, std::min<std::uint64_t>(held, std::uint64_t{buckets} *
                                                  sort_lanes_from_environment()));
  }
  if (kept && kept->sizes.covers(need) && wanted > kept->table_entries)
    kept->grow_tables(wanted);
  if (!kept || !kept->sizes.covers(need)) {
    const buffer_sizes held = kept ? kept->sizes : buffer_sizes{};
    const std::size_t tables = std::max(wanted, kept ? kept->table_entries : 0);
    kept.reset();  // first, so that its memory is free for the new one
    const std::uint64_t room =
        room_for(need.total(buffers_per_element), false,
                 std::max(ring_table_bytes(layout.bytes(), elements, ring_slots),
                          device_pages(std::uint64_t{ring_slots} * tables * table_entry_bytes +
                                       table_bounds_bytes(tables))));
    gpu_pinned& host = pinned();
    const auto start = std::chrono::steady_clock::now();
    kept = make_grown(grown_sizes(held, need, buffers_per_element, room), need,
                      [&](const buffer_sizes& sizes) {
                        return std::make_unique<round_state>(sizes, tables, options_, with, host);
                      });
    device_made_.seconds += seconds_since(start);
    device_made_.bytes += kept->sizes.total(buffers_per_element);
  }
  profile_made_buffers(ctx, ctx.round());
  kept->sorter = with;
  // Which sort takes the chunks is the engine's choice per job (engine.cpp, route): said here,
  // where a test or an operator can see it.
  log(log_level::debug, "{}: round {} sorts {} chunks with the {} sort", name(), ctx.round(),
      queue.size(), with.name());
  round_state& state = *kept;
  state.layout = layout;
  state.profiling = ctx.profiling();
  state.scatter_source = nullptr;
  round_profile profile;
  if (state.profiling) profile.begin(state.h2d.value(), ctx);

  stage_queue<slot*> free_slots, loaded, computed, writing;
  for (slot& s : state.slots) free_slots.push(&s);
  failure_latch latch{ctx};
  const int device_id = options_.id;
  auto close_all = [&] {
    free_slots.close();
    loaded.close();
    computed.close();
    writing.close();
  };

  std::size_t beside = 0;  // tasks that shared a slot with an earlier one (the loader's)
  std::jthread loader{[&] {
    latch.run(
        [&] {
          const cuda::set_device_guard g{device_id};
          while (const chunk_task* t = queue.pop()) {
            ctx.check();
            const auto s = free_slots.pop();
            if (!s) break;
            slot& sl = **s;
            sl.clear();
            sl.take(*t, 0, state.gather_entries(*t));
            // The next tasks too, while the slot holds them (small chunks: batch_fits), each
            // with the table entries judged for it (pop_if's last look is at the task it takes).
            std::size_t entries = 0;
            while (const chunk_task* next = queue.pop_if([&](const chunk_task& c) {
                     entries = state.gather_entries(c);
                     return state.batch_fits(sl, c, entries);
                   })) {
              sl.take(*next, round_state::next_at(sl), entries);
              ++beside;
            }
            state.load(sl);
            loaded.push(*s);
          }
        },
        {close_all});
    loaded.close();
  }};
  std::jthread sorter{[&] {
    latch.run(
        [&] {
          const cuda::set_device_guard g{device_id};
          while (const auto s = loaded.pop()) {
            state.sort(**s);
            computed.push(*s);
          }
        },
        {close_all});
    computed.close();
  }};
  // A slot's chunk is in host memory: its tasks written, its stages profiled, the slot free.
  // The releaser says so: the storer only queues the copies and writes (store,
  // store_scattered), so that it places and queues the next slot's while they run, and the
  // slot comes free as soon as they are done.
  std::mutex stored_mutex;
  const auto stored = [&](slot* sl) {
    const std::scoped_lock lock{stored_mutex};
    for (const chunk_task* t : sl->tasks) {
      queue.written(*t);
      ctx.add_done(t->total());
    }
    if (state.profiling) profile.add(*sl);
    free_slots.push(sl);
  };
  std::jthread storer{[&] {
    latch.run(
        [&] {
          const cuda::set_device_guard g{device_id};
          while (const auto s = computed.pop()) {
            // A slot of several tasks holds none that waits to write (batch_fits).
            for (const chunk_task* t : (*s)->tasks) queue.wait_to_write(*t, ctx);
            if ((*s)->tasks.front()->scatter != nullptr)
              state.store_scattered(**s, [&] { ctx.check(); });
            else
              state.store(**s);
            writing.push(*s);
          }
        },
        {close_all});
    writing.close();
  }};
  std::jthread releaser{[&] {
    latch.run(
        [&] {
          const cuda::set_device_guard g{device_id};
          while (const auto s = writing.pop()) {
            state.finish_store(**s);
            stored(*s);
          }
        },
        {close_all});
  }};
  loader.join();
  sorter.join();
  storer.join();
  releaser.join();
  try {
    latch.rethrow();
  } catch (...) {
    // The failure may have left writes behind that no one finishes: none outlives the job's
    // arrays.
    state.out_staging.abandon_behind();
    kept.reset();  // a failed round may have left work queued behind an error: start afresh
    throw;
  }
  if (beside > 0)
    log(log_level::debug, "{}: round {} sorted {} of its {} chunks beside another", name(),
        ctx.round(), beside, queue.size());
  if (state.profiling) profile.report(ctx, name_, ctx.round());
}

host_buffer pinned_host_buffer(std::size_t bytes)
{
  host_buffer b{bytes};
  if (bytes == 0) return b;
  b.populate();
  GPUSORT_CUDA_TRY(
      cudaHostRegister(b.data(), bytes, cudaHostRegisterPortable | cudaHostRegisterMapped));
  count_held(held::registered, static_cast<std::int64_t>(bytes));
  b.set_release_hook([](void* p, std::size_t n) {
    GPUSORT_CUDA_ASSERT_OK(cudaHostUnregister(p));
    count_held(held::registered, -static_cast<std::int64_t>(n));
  });
  return b;
}

bool is_pinned(const void* p) noexcept { return pinned_attributes(p).has_value(); }

void staging::pack_in(char* d_dst, const std::vector<piece_mover::source_run>& runs,
                      cudaStream_t s)
{
  // Where each run starts among the packed bytes.
  pack_at_.resize(runs.size() + 1);
  pack_at_[0] = 0;
  for (std::size_t r = 0; r < runs.size(); ++r) pack_at_[r + 1] = pack_at_[r] + runs[r].bytes;
  stage_in(d_dst, pack_at_.back(), s, [&](char* piece, std::uint64_t off, std::uint64_t len) {
    // The runs that meet [off, off + len): from the last starting at or before off.
    const auto first = static_cast<std::int64_t>(
        std::upper_bound(pack_at_.begin(), pack_at_.end() - 1, off) - pack_at_.begin() - 1);
    const auto end = static_cast<std::int64_t>(
        std::lower_bound(pack_at_.begin(), pack_at_.end() - 1, off + len) - pack_at_.begin());
#pragma omp parallel for schedule(dynamic, 64)
    for (std::int64_t r = first; r < end; ++r) {
      const auto k = static_cast<std::size_t>(r);
      const std::uint64_t from = std::max(pack_at_[k], off);
      const std::uint64_t to = std::min(pack_at_[k + 1], off + len);
      if (to > from)
        std::memcpy(piece + (from - off), runs[k].data + (from - pack_at_[k]), to - from);
    }
  });
}

}  // namespace gpusort::detail
