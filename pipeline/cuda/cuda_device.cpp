#include "pipeline/cuda/cuda_device.hpp"

#include "core/checks.hpp"
#include "core/cpu_sort.hpp"
#include "core/cuda/chunk_ops.cuh"
#include "core/cuda/merge_ops.cuh"
#include "core/cuda/ordered_keys.cuh"
#include "pipeline/cuda/resources.hpp"
#include "pipeline/cuda/stage_queue.hpp"
#include "pipeline/cuda/stage_totals.hpp"
#include "pipeline/cuda/staging.hpp"

#include <gpusort/error.hpp>
#include <gpusort/units.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <string_view>
#include <exception>
#include <mutex>
#include <optional>
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

/// One chunk's place in the ring: its device buffers, its gather tables and its events.
struct slot {
  cuda::device_buffer keys;
  cuda::device_buffer values;
  cuda::pinned_buffer key_table_host;
  cuda::pinned_buffer value_table_host;
  cuda::device_buffer key_table;
  cuda::device_buffer value_table;
  cuda::cuda_event loaded;
  cuda::cuda_event computed;
  /// Stage boundaries for sort_options::profile, read back once the chunk has left the GPU.
  std::array<cuda::cuda_event, 6> marks{
      cuda::cuda_event{cuda::event_timing::enabled}, cuda::cuda_event{cuda::event_timing::enabled},
      cuda::cuda_event{cuda::event_timing::enabled}, cuda::cuda_event{cuda::event_timing::enabled},
      cuda::cuda_event{cuda::event_timing::enabled}, cuda::cuda_event{cuda::event_timing::enabled}};
  const chunk_task* task{};
};

/// Where a device's stages spent one round, from the slots' timing events.
class round_profile {
 public:
  /// At the round's start, with `s` idle: the event and the host clock mark the same moment.
  void begin(cudaStream_t s, const job_context& ctx)
  {
    start_.record(s);
    origin_ = ctx.elapsed();
  }
  /// Adds a finished chunk: its marks hold (begin, end) of each stage.
  void add(const slot& sl, std::uint64_t bytes)
  {
    for (unsigned st = 0; st < gpu_stage_count; ++st)
      totals_.add(static_cast<gpu_stage>(st), cuda::elapsed_ms(start_, sl.marks[2 * st]) / 1e3,
                  cuda::elapsed_ms(start_, sl.marks[2 * st + 1]) / 1e3, bytes);
  }
  void report(job_context& ctx, const std::string& device, int round) const
  {
    totals_.report(ctx, device, round, origin_);
  }

 private:
  cuda::cuda_event start_{cuda::event_timing::enabled};
  double origin_{};
  stage_totals totals_;
};

/// Device address of mapped pinned host memory, or null when kernels cannot read it.
const char* mapped_address(const void* host) noexcept
{
  const std::optional<cudaPointerAttributes> a = pinned_attributes(host);
  return a ? static_cast<const char*>(a->devicePointer) : nullptr;
}

/// How round 2 gathers its slices from the pinned round-1 output. Copy engines move large
/// slices at the link's full rate without taking SMs from the sort of the next chunk; a kernel
/// reading mapped memory wins only where slices are so short that one copy call per slice costs
/// more than its bytes (design.md section 1). GPUSORT_GATHER=copy|kernel overrides the choice,
/// for measuring one against the other.
enum class gather_mode : std::uint8_t { automatic, copy, kernel };

gather_mode gather_mode_from_environment() noexcept
{
  const char* v = std::getenv("GPUSORT_GATHER");
  if (v == nullptr) return gather_mode::automatic;
  const std::string_view s{v};
  return s == "copy" ? gather_mode::copy : s == "kernel" ? gather_mode::kernel
                                                         : gather_mode::automatic;
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
  staging& in_staging;
  staging& out_staging;
  chunk_sorter sorter;

  // Reused by batch_copies, so that a task allocates nothing.
  std::vector<void*> batch_dst;
  std::vector<const void*> batch_src;
  std::vector<std::size_t> batch_size;
  bool batch_supported{true};

  // Per round:
  element_layout layout{};
  bool profiling{};
  gather_mode gather{gather_mode::automatic};
  std::uint64_t gather_copy_min_bytes{};

  /// The bytes of each buffer a round of `elements` needs.
  static buffer_sizes needed(const element_layout& l, std::uint64_t elements,
                             const chunk_sorter& with)
  {
    return {.keys = elements * l.key_bytes,
            .values = elements * l.value_bytes,
            .scratch = with.scratch_bytes(elements, l.key_bytes, l.value_bytes)};
  }

  round_state(const buffer_sizes& s, std::size_t tables, const cuda_device_options& o,
              const chunk_sorter& with, gpu_pinned& pinned)
      : sizes{s},
        table_entries{std::max<std::size_t>(tables, 1)},
        in_staging{pinned.in},
        out_staging{pinned.out},
        sorter{with},
        gather{gather_mode_from_environment()},
        gather_copy_min_bytes{o.gather_copy_min_bytes}
  {
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

  /// Gather tables for `entries` slices per task (the ring's streams are idle between rounds).
  void grow_tables(std::size_t entries)
  {
    table_entries = std::max<std::size_t>(entries, 1);
    const std::size_t table_bytes = table_entries * sizeof(cuda::gather_slice);
    for (slot& sl : slots) {
      sl.key_table_host = cuda::pinned_buffer{table_bytes};
      sl.value_table_host = cuda::pinned_buffer{table_bytes};
      sl.key_table = cuda::device_buffer{table_bytes};
      sl.value_table = cuda::device_buffer{table_bytes};
    }
  }

  ~round_state()
  {
    // No buffer may go while a copy or kernel still uses it.
    GPUSORT_CUDA_ASSERT_OK(cudaStreamSynchronize(h2d.value()));
    GPUSORT_CUDA_ASSERT_OK(cudaStreamSynchronize(compute.value()));
    GPUSORT_CUDA_ASSERT_OK(cudaStreamSynchronize(d2h.value()));
  }
  round_state(const round_state&) = delete;
  round_state& operator=(const round_state&) = delete;

  void mark(slot& s, unsigned index, cudaStream_t stream) const
  {
    if (profiling) s.marks[index].record(stream);
  }

  /// Gathers slices of mapped host memory at `base` (device address `d_base`) with one kernel
  /// launch per 65535 slices, through the slot's pinned and device tables.
  void gather_mapped(const std::vector<run>& slices, const char* d_base,
                     std::uint64_t element_bytes, char* d_out, cuda::pinned_buffer& table_host,
                     cuda::device_buffer& table)
  {
    auto* entries = table_host.data<cuda::gather_slice>();
    std::uint64_t at = 0, longest = 0;
    for (std::size_t i = 0; i < slices.size(); ++i) {
      entries[i] = {d_base + slices[i].offset * element_bytes, slices[i].length, at};
      at += slices[i].length;
      longest = std::max(longest, slices[i].length);
    }
    GPUSORT_CUDA_TRY(cudaMemcpyAsync(table.data(), entries,
                                     slices.size() * sizeof(cuda::gather_slice),
                                     cudaMemcpyHostToDevice, h2d.value()));
    for (std::size_t first = 0; first < slices.size(); first += max_slices_per_launch) {
      const auto count =
          static_cast<std::uint32_t>(std::min<std::size_t>(max_slices_per_launch,
                                                           slices.size() - first));
      cuda::gather(table.data<cuda::gather_slice>() + first, count, longest, d_out,
                   static_cast<unsigned>(element_bytes), h2d.value());
    }
  }

  /// One array of a task onto the device: slice by slice through the copy engine (staged when
  /// the source is not pinned), or in one gather kernel over mapped memory for short slices.
  void load_array(const chunk_task& t, const void* src, std::uint64_t element_bytes,
                  char* d_out, cuda::pinned_buffer& table_host, cuda::device_buffer& table)
  {
    const char* mapped = t.src_ordered ? mapped_address(src) : nullptr;
    const std::uint64_t average_bytes =
        t.slices.empty() ? 0 : t.count * element_bytes / t.slices.size();
    const bool short_slices = average_bytes < gather_copy_min_bytes;
    const bool kernel = mapped != nullptr && (gather == gather_mode::kernel ||
                                              (gather == gather_mode::automatic && short_slices));
    if (kernel) {
      gather_mapped(t.slices, mapped, element_bytes, d_out, table_host, table);
      return;
    }
    if (t.slices.size() > 1 && mapped != nullptr &&
        batch_copies(t.slices, src, element_bytes, d_out))
      return;
    std::uint64_t at = 0;
    for (const run& sl : t.slices) {
      copy_to_device(d_out + at * element_bytes,
                     static_cast<const char*>(src) + sl.offset * element_bytes,
                     sl.length * element_bytes, h2d.value(), in_staging);
      at += sl.length;
    }
  }

  /// All slices of pinned memory in one cudaMemcpyBatchAsync: a round-2 task has d^2 slices,
  /// and issuing one copy call each (about 5 us) held the copy engine back (measured: round 2
  /// at 34 GB/s against round 1's 51 GB/s with d = 32 on an H200). False where the driver lacks
  /// batches (the caller copies slice by slice).
  bool batch_copies(const std::vector<run>& slices, const void* src, std::uint64_t element_bytes,
                    char* d_out)
  {
    if (!batch_supported) return false;
    batch_dst.clear();
    batch_src.clear();
    batch_size.clear();
    std::uint64_t at = 0;
    for (const run& sl : slices) {
      if (sl.length == 0) continue;
      batch_dst.push_back(d_out + at * element_bytes);
      batch_src.push_back(static_cast<const char*>(src) + sl.offset * element_bytes);
      batch_size.push_back(sl.length * element_bytes);
      at += sl.length;
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

  /// Copy-in stage of one task.
  void load(slot& s, const chunk_task& t)
  {
    const std::uint64_t kb = layout.key_bytes, vb = layout.value_bytes;
    mark(s, 0, h2d.value());
    load_array(t, t.src_keys, kb, s.keys.data<char>(), s.key_table_host, s.key_table);
    if (vb > 0)
      load_array(t, t.src_values, vb, s.values.data<char>(), s.value_table_host, s.value_table);
    mark(s, 1, h2d.value());
    s.loaded.record(h2d.value());
  }

  /// Compute stage: ordered bits, sort, deal or tail, raw bits again.
  void sort(slot& s, const chunk_task& t)
  {
    const cudaStream_t st = compute.value();
    s.loaded.make_wait(st);
    mark(s, 2, st);
    const unsigned kb = layout.key_bytes, vb = layout.value_bytes;
    if (!t.src_ordered) cuda::to_ordered(s.keys.data(), t.count, layout.keys(), st);
    if (sorter.sort(s.keys.data(), alt_keys.data(), s.values.data(), alt_values.data(), t.count,
                    kb, vb, scratch.data(), sizes.scratch, st)) {
      std::swap(s.keys, alt_keys);
      std::swap(s.values, alt_values);
    }
    if (t.deal_bins > 1) {
      cuda::deal(s.keys.data(), vb > 0 ? s.values.data() : nullptr, t.count, t.deal_bins,
                 alt_keys.data(), vb > 0 ? alt_values.data() : nullptr, kb, vb, st);
      std::swap(s.keys, alt_keys);
      std::swap(s.values, alt_values);
    }
    if (!t.dst_ordered)
      cuda::from_ordered(s.keys.data(), t.count, layout.keys(), st);
    mark(s, 3, st);
    s.computed.record(st);
  }

  /// Copy-out stage; returns once the chunk is in host memory.
  void store(slot& s, const chunk_task& t)
  {
    const cudaStream_t st = d2h.value();
    s.computed.make_wait(st);
    mark(s, 4, st);
    const std::uint64_t kb = layout.key_bytes, vb = layout.value_bytes;
    copy_to_host(t.dst_keys, s.keys.data<char>(), t.count * kb, st, out_staging);
    if (vb > 0) copy_to_host(t.dst_values, s.values.data<char>(), t.count * vb, st, out_staging);
    mark(s, 5, st);
    write_equal_tail(t, layout);  // overlaps the copies above
    GPUSORT_CUDA_TRY(cudaStreamSynchronize(st));
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

/// What largest_fitting found for one layout and budget (cuda_device::resident_capacity and
/// capacity): asked for every job, and a bisection of about 34 steps (an 80 GB budget), each
/// asking CUB for the sort's and the merge's scratch.
struct fitting_memo {
  bool resident{};
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
      return m.resident == key.resident && m.key_bytes == key.key_bytes &&
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

std::uint64_t resident_buffers::piece_elements(std::uint64_t elements,
                                               const cuda_device_options& options)
{
  const std::uint64_t pieces = std::clamp<std::uint64_t>(
      elements / std::max<std::uint64_t>(options.resident_min_piece_elements, 1), 1,
      std::max<std::uint64_t>(options.resident_max_pieces, 1));
  return (elements + pieces - 1) / pieces;
}

std::size_t resident_buffers::scratch_bytes(const element_layout& layout, std::uint64_t elements,
                                            const cuda_device_options& options,
                                            const chunk_sorter& sorter)
{
  return std::max(sorter.scratch_bytes(piece_elements(elements, options), layout.key_bytes,
                                       layout.value_bytes),
                  cuda::merge_scratch_bytes(elements, layout.key_bytes, layout.value_bytes));
}

buffer_sizes resident_buffers::needed(const element_layout& layout, std::uint64_t elements,
                                      const cuda_device_options& options,
                                      const chunk_sorter& sorter)
{
  return {.keys = elements * layout.key_bytes,
          .values = elements * layout.value_bytes,
          .scratch = scratch_bytes(layout, elements, options, sorter)};
}

resident_buffers::resident_buffers(const buffer_sizes& s, const cuda_device_options& options,
                                   const chunk_sorter& with, gpu_pinned& pinned)
    : tuning{options},
      sorter{with},
      sizes{s},
      scratch_capacity{s.scratch},
      in_staging{pinned.in},
      out_staging{pinned.out},
      words{pinned.words}
{
  for (unsigned i = 0; i < copies; ++i) {
    keys[i] = cuda::device_buffer{sizes.keys};
    values[i] = cuda::device_buffer{sizes.values};
  }
  scratch = cuda::device_buffer{sizes.scratch};
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

/// Besides its buffers of `per_element` bytes an element, the budget holds scratch that grows
/// with the element count and a margin for gather tables, staging and what CUB and the runtime
/// take: the largest count c with margin + c * per_element + scratch(c) <= budget, by bisection.
constexpr std::uint64_t budget_margin = std::uint64_t{64} << 20;

/// The capacity below which no budget goes: jobs this small sort in core on any GPU.
constexpr std::uint64_t small_job_elements = 4096;

template <typename Scratch>
std::uint64_t largest_fitting(std::uint64_t budget, std::uint64_t per_element, Scratch&& scratch)
{
  std::uint64_t lo = 0, hi = budget / per_element + 1;
  while (lo + 1 < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    (budget_margin + per_element * mid + scratch(mid) <= budget ? lo : hi) = mid;
  }
  return lo;
}

/// Buffers made by `make` of `grown` sizes, or of the `need`ed ones where the GPU has no room
/// for more right now (the budget is what was free when the engine started: another process
/// may hold some of it since). Only a failure at the needed sizes is the job's.
template <typename Make>
auto make_grown(const buffer_sizes& grown, const buffer_sizes& need, Make&& make)
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
  auto scratch = [with, layout](std::uint64_t c) -> std::uint64_t {
    return with.scratch_bytes(c, layout.key_bytes, layout.value_bytes);
  };
  // A small job always sorts, whatever the budget: a few thousand elements take far less than
  // any GPU has, where a budget under the margin would leave no capacity at all (a 2-element
  // job with a 24 MiB budget was refused, naming a "smallest budget" of 64.03 MiB).
  const std::uint64_t fitting = state_->fitting(
      {.resident = false,
       .key_bytes = layout.key_bytes,
       .value_bytes = layout.value_bytes,
       .sample = with.sample(),
       .budget = budget_bytes_},
      [&] { return largest_fitting(budget_bytes_, per_element, scratch); });
  const std::uint64_t elements = std::max(fitting, small_job_elements);
  return device_capacity{
      .elements = elements,
      .bytes_per_element = per_element,
      .fixed_bytes = budget_margin + scratch(elements),
      // The scratch at the capacity asked about, not at today's: the figure an error names must
      // work when retried (it named 66.12, then 66.15, then 66.54 MiB for 20000003 u32 keys).
      .exact_budget = [per_element, scratch](std::uint64_t c) {
        return budget_margin + per_element * c + scratch(c);
      }};
}

std::uint64_t cuda_device::resident_capacity(const element_layout& layout) const
{
  const cuda::set_device_guard guard{options_.id};
  const chunk_sorter with = sorter(layout);
  return state_->fitting(
      {.resident = true,
       .key_bytes = layout.key_bytes,
       .value_bytes = layout.value_bytes,
       .sample = with.sample(),
       .budget = budget_bytes_},
      [&] {
        return largest_fitting(budget_bytes_, resident_buffers::copies * layout.bytes(),
                               [&](std::uint64_t c) -> std::uint64_t {
                                 return resident_buffers::scratch_bytes(layout, c, options_,
                                                                        with);
                               });
      });
}

gpu_pinned& cuda_device::pinned()
{
  if (!state_->pinned) state_->pinned = std::make_unique<gpu_pinned>(options_);
  return *state_->pinned;
}

std::uint64_t cuda_device::room_for(const buffer_sizes& need, unsigned copies, bool for_resident)
{
  const std::uint64_t room = budget_bytes_ > budget_margin ? budget_bytes_ - budget_margin : 0;
  std::uint64_t other = 0;
  if (for_resident && state_->round)
    other = state_->round->sizes.total(buffers_per_element);
  else if (!for_resident && state_->resident)
    other = state_->resident->sizes.total(resident_buffers::copies);
  if (other > 0 && other <= room && need.total(copies) <= room - other) return room - other;
  // The budget holds one kind or the other: free it first, so that its memory is free for
  // the new buffers.
  if (for_resident)
    state_->round.reset();
  else
    state_->resident.reset();
  return room;
}

resident_buffers& cuda_device::resident(const element_layout& layout, std::uint64_t elements)
{
  const cuda::set_device_guard guard{options_.id};
  std::unique_ptr<resident_buffers>& kept = state_->resident;
  const chunk_sorter with = sorter(layout);
  const buffer_sizes need =
      resident_buffers::needed(layout, std::max<std::uint64_t>(elements, 1), options_, with);
  if (!kept || !kept->sizes.covers(need)) {
    const buffer_sizes held = kept ? kept->sizes : buffer_sizes{};
    kept.reset();  // first, so that its memory is free for the new one
    const std::uint64_t room = room_for(need, resident_buffers::copies, true);
    gpu_pinned& host = pinned();
    kept = make_grown(grown_sizes(held, need, resident_buffers::copies, room), need,
                      [&](const buffer_sizes& sizes) {
                        return std::make_unique<resident_buffers>(sizes, options_, with, host);
                      });
  }
  kept->sorter = with;
  return *kept;
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
  if (kept && kept->sizes.covers(need) && queue.most_slices() > kept->table_entries)
    kept->grow_tables(queue.most_slices());
  if (!kept || !kept->sizes.covers(need)) {
    const buffer_sizes held = kept ? kept->sizes : buffer_sizes{};
    const std::size_t tables = std::max(queue.most_slices(), kept ? kept->table_entries : 0);
    kept.reset();  // first, so that its memory is free for the new one
    const std::uint64_t room = room_for(need, buffers_per_element, false);
    gpu_pinned& host = pinned();
    kept = make_grown(grown_sizes(held, need, buffers_per_element, room), need,
                      [&](const buffer_sizes& sizes) {
                        return std::make_unique<round_state>(sizes, tables, options_, with, host);
                      });
  }
  kept->sorter = with;
  round_state& state = *kept;
  state.layout = layout;
  state.profiling = ctx.profiling();
  round_profile profile;
  if (state.profiling) profile.begin(state.h2d.value(), ctx);

  stage_queue<slot*> free_slots, loaded, computed;
  for (slot& s : state.slots) free_slots.push(&s);
  failure_latch latch{ctx};
  const int device_id = options_.id;
  auto close_all = [&] {
    free_slots.close();
    loaded.close();
    computed.close();
  };

  std::jthread loader{[&] {
    latch.run(
        [&] {
          const cuda::set_device_guard g{device_id};
          while (const chunk_task* t = queue.pop()) {
            ctx.check();
            const auto s = free_slots.pop();
            if (!s) break;
            (*s)->task = t;
            state.load(**s, *t);
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
            state.sort(**s, *(*s)->task);
            computed.push(*s);
          }
        },
        {close_all});
    computed.close();
  }};
  std::jthread storer{[&] {
    latch.run(
        [&] {
          const cuda::set_device_guard g{device_id};
          while (const auto s = computed.pop()) {
            const chunk_task& t = *(*s)->task;
            state.store(**s, t);
            if (state.profiling) {
              const std::uint64_t bytes = t.count * layout.bytes();
              profile.add(**s, bytes);
            }
            ctx.add_done(t.total());
            free_slots.push(*s);
          }
        },
        {close_all});
  }};
  loader.join();
  sorter.join();
  storer.join();
  try {
    latch.rethrow();
  } catch (...) {
    kept.reset();  // a failed round may have left work queued behind an error: start afresh
    throw;
  }
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

}  // namespace gpusort::detail
