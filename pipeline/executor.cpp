#include "pipeline/executor.hpp"

#include "core/checks.hpp"
#include "core/cpu_sort.hpp"
#include "core/keys.hpp"
#include "core/log.hpp"
#include "core/plan/compensation.hpp"
#include "core/plan/dealing.hpp"
#include "core/plan/slicing.hpp"
#include "core/plan/splitters.hpp"
#include "pipeline/file_window.hpp"
#include "pipeline/host_memory.hpp"

#include <gpusort/error.hpp>

#include <algorithm>
#include <exception>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace gpusort::detail {

namespace {

/// Runs one round: every device pulls tasks until the queue is empty. The first failure stops
/// the other devices at their next task and is rethrown here.
void run_round(int round, int rounds, std::vector<chunk_task> tasks,
               const element_layout& layout, const std::vector<device*>& devices,
               job_context& ctx, std::uint64_t reserve = 0)
{
  std::uint64_t elements = 0;
  for (const chunk_task& t : tasks) elements += t.total();
  ctx.begin_round(round, elements, rounds);
  const std::size_t chunks = tasks.size();
  task_queue queue{std::move(tasks), reserve};
  const auto start = std::chrono::steady_clock::now();
  const auto profile_round = [&] {
    if (!ctx.profiling()) return;
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ctx.add_round_profile(round, chunks, elements * layout.bytes(), wall);
  };
  if (devices.size() == 1) {
    devices.front()->process(layout, queue, ctx);
    profile_round();
    return;
  }
  std::exception_ptr failure;
  std::mutex failure_mutex;
  std::vector<std::jthread> workers;
  workers.reserve(devices.size());
  for (device* dev : devices) {
    workers.emplace_back([&, dev] {
      try {
        dev->process(layout, queue, ctx);
      } catch (...) {
        const std::lock_guard lock{failure_mutex};
        if (!failure) failure = std::current_exception();
        ctx.abort();
      }
    });
  }
  workers.clear();  // joins
  if (failure) std::rethrow_exception(failure);
  profile_round();
}

/// The round-1 output (ordered bits, dealt runs): keys, then values, in the caller's scratch
/// or in host memory allocated for this job.
template <typename K, typename V>
class round1_output {
 public:
  static constexpr std::size_t value_size = std::is_same_v<V, no_value> ? 0 : sizeof(V);
  round1_output(std::uint64_t n, const element_layout& layout, const host_buffer* scratch)
  {
    const std::size_t bytes = round1_bytes(n, layout);
    if (scratch == nullptr || scratch->size() < bytes) {
      owned_ = host_buffer{bytes};
      scratch = &owned_;
    }
    keys_ = scratch->as<char>();
    values_ = keys_ + round1_values_offset(n, layout);
  }
  [[nodiscard]] K* keys() const noexcept { return reinterpret_cast<K*>(keys_); }
  [[nodiscard]] void* values() const noexcept { return values_; }

 private:
  host_buffer owned_;
  char* keys_{};
  char* values_{};
};

template <typename K, typename V>
std::vector<chunk_task> round1_tasks(const job_arrays& a, const chunk_plan& plan,
                                     const round1_output<K, V>& out)
{
  constexpr std::size_t value_size = std::is_same_v<V, no_value> ? 0 : sizeof(V);
  std::vector<chunk_task> tasks(plan.d);
  for (std::uint64_t i = 0; i < plan.d; ++i) {
    const std::uint64_t begin = plan.chunk_begin(i);
    const std::uint64_t m = plan.chunk_size(i);
    chunk_task& t = tasks[i];
    t.src_keys = a.src_keys;
    t.src_values = a.src_values;
    t.slices = {run{begin, m}};
    t.count = m;
    t.dst_keys = out.keys() + begin;
    t.dst_values = static_cast<char*>(out.values()) + begin * value_size;
    t.dst_ordered = true;
    t.deal_bins = plan.d;
  }
  return tasks;
}

template <typename K, typename V>
std::vector<chunk_task> round2_tasks(const job_arrays& a, const chunk_plan& plan,
                                     const round1_output<K, V>& in,
                                     const std::vector<final_chunk>& finals,
                                     const splitter_set<K>& splitters, execution_stats& stats)
{
  constexpr std::size_t value_size = std::is_same_v<V, no_value> ? 0 : sizeof(V);
  const K* keys = in.keys();
  std::vector<chunk_task> tasks;
  tasks.reserve(finals.size());
  for (const std::uint64_t k : largest_first(finals)) {
    const final_chunk& fc = finals[k];
    if (fc.size == 0) continue;
    chunk_task t;
    t.src_keys = keys;
    t.src_values = in.values();
    t.src_ordered = true;
    t.dst_keys = static_cast<char*>(a.dst_keys) + fc.out_offset * sizeof(K);
    t.dst_values = static_cast<char*>(a.dst_values) + fc.out_offset * value_size;
    if (needs_compensation(fc, plan.capacity)) {
      compensation_split split = split_equal<K>(keys, fc, splitters, plan.capacity);
      t.slices = std::move(split.rest);
      t.count = split.rest_count;
      t.equal_slices = std::move(split.equal);
      t.equal_count = split.equal_count;
      t.splitter_bits = splitters.values[k];
      ++stats.compensated_chunks;
    } else {
      t.slices = fc.slices;
      t.count = fc.size;
    }
    tasks.push_back(std::move(t));
  }
  return tasks;
}

/// An in-place job whose round 2 failed has overwritten part of its input; the round-1 output
/// is a permutation of the input, so copying it back restores the original elements.
/// An input in a file is written back through a bounded buffer; when that fails too (the disk
/// that failed round 2), the error says so and the original failure is the one reported.
template <typename K, typename V>
void restore_input(const job_arrays& a, const element_layout& layout,
                   const round1_output<K, V>& r1) noexcept
{
  try {
    produce_into(static_cast<K*>(a.src_keys), a.n,
                 [&](K* out, std::uint64_t first, std::uint64_t count) {
                   from_ordered_bits<K>(r1.keys() + first, out, count, layout.keys());
                 });
    if constexpr (!std::is_same_v<V, no_value>)
      host_write(a.src_values, r1.values(), a.n * sizeof(V));
  } catch (const std::exception& e) {
    log(log_level::error, "an in-place sort failed and its input could not be restored: {}",
        e.what());
  }
}

/// Elements each device keeps buffers for across both rounds: a chunk or a final chunk's
/// bound, whichever is larger, so that round 2 reuses round 1's ring. Not the capacity: a job
/// cut small (chunk_bytes, a budget) then reserved the whole GPU, which left no room for the
/// buffers of jobs that fit beside the ring, and each kind freed the other (a compensated
/// final chunk above the bound grows the ring; it is rare).
std::uint64_t ring_reserve(const chunk_plan& plan) noexcept
{
  return std::min(plan.capacity, std::max(plan.chunk_size(0), plan.final_bound()));
}

/// DSPS in two rounds (design.md section 2).
template <typename K, typename V>
execution_stats sort_out_of_core(const job_arrays& a, const element_layout& layout,
                                 const chunk_plan& plan, const std::vector<device*>& devices,
                                 job_context& ctx, const host_buffer* scratch)
{
  execution_stats stats{.chunks = plan.d, .rounds = 2};
  const round1_output<K, V> r1{a.n, layout, scratch};
  const K* keys = r1.keys();

  // Round 1: sort every chunk and deal it into d sorted runs.
  run_round(1, 2, round1_tasks<K, V>(a, plan, r1), layout, devices, ctx, ring_reserve(plan));

  // Splitters from the runs of one new chunk (the transposed run table's row).
  const auto between = std::chrono::steady_clock::now();
  const std::vector<run> runs = make_run_table(plan);
  const std::vector<run> new_chunks = transpose(runs, plan.d);
  const std::span<const run> sampled{new_chunks.data() + plan.sampled_chunk * plan.d, plan.d};
  const splitter_set<K> splitters = choose_splitters<K>(keys, sampled, plan.s, plan.d);
  ctx.check();

  // Round 2: cut every run by binary search, sort each final chunk into its place,
  // compensating the chunks that splitter-equal keys made too large.
  const std::vector<final_chunk> finals = slice_runs<K>(keys, runs, splitters);
  std::vector<chunk_task> tasks = round2_tasks<K, V>(a, plan, r1, finals, splitters, stats);
  if (ctx.profiling()) {
    const double spent =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - between).count();
    ctx.add_profile(stage_profile{.device = "host",
                                  .round = 2,
                                  .stage = "plan",
                                  .chunks = tasks.size(),
                                  .bytes = 0,
                                  .busy_seconds = spent,
                                  .first_start = 0,
                                  .last_end = spent});
  }
  try {
    run_round(2, 2, std::move(tasks), layout, devices, ctx, ring_reserve(plan));
  } catch (...) {
    if (a.in_place()) restore_input<K, V>(a, layout, r1);
    throw;
  }
  return stats;
}

/// Fits one device: a single round trip.
execution_stats sort_in_core(const job_arrays& a, const element_layout& layout,
                             const std::vector<device*>& devices, job_context& ctx)
{
  chunk_task t;
  t.src_keys = a.src_keys;
  t.src_values = a.src_values;
  t.slices = {run{0, a.n}};
  t.count = a.n;
  t.dst_keys = a.dst_keys;
  t.dst_values = a.dst_values;
  std::vector<chunk_task> tasks;
  tasks.push_back(std::move(t));
  run_round(1, 1, std::move(tasks), layout, {devices.front()}, ctx);
  return execution_stats{.chunks = 1, .rounds = 1};
}

}  // namespace

device_capacity common_capacity(const std::vector<device*>& devices,
                                const element_layout& layout)
{
  GPUSORT_EXPECTS(!devices.empty(), "a job needs at least one device");
  device_capacity cap = devices.front()->capacity(layout);
  for (const device* dev : devices) {
    const device_capacity c = dev->capacity(layout);
    if (c.elements < cap.elements) cap = c;
  }
  return cap;
}

execution_stats execute(const job_arrays& arrays, const element_layout& layout,
                        const chunk_plan& plan, const std::vector<device*>& devices,
                        job_context& ctx, const host_buffer* round1_scratch)
{
  ctx.check();
  if (arrays.n == 0) return execution_stats{.chunks = 0, .rounds = 0};
  if (plan.in_core()) return sort_in_core(arrays, layout, devices, ctx);
  return visit_layout(layout.key_bytes, layout.value_bytes, [&]<typename K, typename V>() {
    return sort_out_of_core<K, V>(arrays, layout, plan, devices, ctx, round1_scratch);
  });
}

}  // namespace gpusort::detail
