#include "pipeline/cuda/cuda_device.hpp"

#include "core/checks.hpp"
#include "core/cuda/chunk_ops.cuh"
#include "core/cuda/merge_ops.cuh"
#include "core/log.hpp"
#include "core/run_codec.hpp"
#include "core/switches.hpp"
#include "pipeline/cuda/resources.hpp"
#include "pipeline/cuda/round_state.hpp"
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
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

namespace gpusort::detail {

using gpu_ring::round_state;
using gpu_ring::slot;

namespace {

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
                       gpu_ring::ring_scratch_bytes(with, layout, c));
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
                                                  gpu_ring::sort_lanes_from_environment()));
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

bool is_pinned(const void* p) noexcept { return gpu_ring::pinned_attributes(p).has_value(); }

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
