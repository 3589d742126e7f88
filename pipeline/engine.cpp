// gpusort::engine: picks the devices from the configuration, plans each job and runs it.
#include "core/host_threads.hpp"
#include "core/log.hpp"
#include "core/plan/chunk_plan.hpp"
#include "core/plan/scatter_buckets.hpp"
#include "core/plan/time_model.hpp"
#include "core/switches.hpp"
#include "pipeline/cuda/buffer_sizes.hpp"
#include "pipeline/device.hpp"
#include "pipeline/direct.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/file_window.hpp"
#include "pipeline/gpu_probe.hpp"
#include "pipeline/host_memory.hpp"
#include "pipeline/host_device.hpp"
#include "pipeline/lean/jobs.hpp"
#include "pipeline/stable.hpp"

#include <gpusort/gpusort.hpp>
#include <gpusort/units.hpp>

#if GPUSORT_WITH_CUDA
#include "pipeline/cuda/cuda_device.hpp"
#include "pipeline/cuda/page_locker.hpp"
#include "pipeline/cuda/resident.hpp"
#include "pipeline/cuda/resources.hpp"
#endif

#include <algorithm>
#include <functional>
#include <cmath>
#include <limits>
#include <optional>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <chrono>
#include <memory>
#include <mutex>

namespace gpusort {

namespace {

struct device_set {
  std::vector<std::unique_ptr<detail::device>> devices;
  std::vector<int> gpu_ids;  ///< CUDA ids of the devices when they are GPUs
  bool gpus{};
};

#if GPUSORT_WITH_CUDA
/// GPUSORT_STAGING=PxM (P pieces of M MiB) replaces the options' staging ring, for measuring
/// one ring against another in the same run; anything else leaves it.
void staging_from_environment(detail::cuda_device_options& options)
{
  const std::optional<std::string> v = detail::switch_text("GPUSORT_STAGING");
  if (!v) return;
  unsigned pieces = 0;
  unsigned mib = 0;
  char rest = 0;
  if (std::sscanf(v->c_str(), "%ux%u%c", &pieces, &mib, &rest) != 2 || pieces < 2 ||
      pieces > 64 || mib < 1 || mib > 1024) {
    detail::warn_ignored_switch("GPUSORT_STAGING", *v,
                                "PxM: P pieces (2 to 64) of M MiB (1 to 1024)");
    return;
  }
  options.staging_pieces = pieces;
  options.staging_piece_bytes = std::uint64_t{mib} << 20;
}

device_set make_gpus(const config& cfg, const std::vector<int>& ids)
{
  device_set set{.gpu_ids = ids, .gpus = true};
  for (const int id : ids) {
    detail::cuda_device_options options{
        .id = id, .incore = cfg.incore, .budget = cfg.device_memory_budget};
    staging_from_environment(options);
    set.devices.push_back(std::make_unique<detail::cuda_device>(options));
  }
  return set;
}
#endif

device_set make_devices(const config& cfg)
{
  if (cfg.devices != device_selection::cpu) {
    const detail::gpu_probe_result probe = detail::probe_gpus();
    std::vector<int> ids;
    if (cfg.devices == device_selection::listed) {
      for (const int id : cfg.gpu_ids) {
        if (std::none_of(probe.gpus.begin(), probe.gpus.end(),
                         [&](const detail::gpu_info& g) { return g.id == id; }))
          throw config_error{"devices: GPU " + std::to_string(id) + " is not available (" +
                             std::to_string(probe.gpus.size()) + " GPU(s) found" +
                             (probe.note.empty() ? "" : ": " + probe.note) + ")"};
        ids.push_back(id);
      }
    } else {
      for (const detail::gpu_info& g : probe.gpus) ids.push_back(g.id);
    }
    if (!ids.empty()) {
#if GPUSORT_WITH_CUDA
      detail::log(log_level::info, "sorting on {} GPU{}", ids.size(),
                  ids.size() == 1 ? "" : "s");
      return make_gpus(cfg, ids);
#else
      throw config_error{"devices: GPUs requested, but this build has no CUDA"};
#endif
    }
    // One short line; why there is no GPU (no driver, too old a driver, none visible) is
    // for those who ask for debug.
    detail::log(log_level::info, "no GPU found: sorting on the CPU");
    detail::log(log_level::debug, "no GPU: {}", probe.note);
  }
  device_set set;
  set.devices.push_back(
      std::make_unique<detail::host_device>(cfg.device_memory_budget, cfg.host_threads));
  return set;
}

/// What sort() checks of a job's shape before it runs (validate), without its pointers.
void validate_shape(const sort_job& job)
{
  if (!job.values) return;
  if (job.values->value_bytes != 4 && job.values->value_bytes != 8)
    throw invalid_argument{"sort: values must be 4 or 8 bytes, not " +
                           std::to_string(job.values->value_bytes)};
  if (job.values->count != job.keys.count)
    throw invalid_argument{"sort: " + std::to_string(job.values->count) + " values for " +
                           std::to_string(job.keys.count) + " keys"};
}

void validate(const sort_job& job)
{
  if (job.keys.count > 0 && job.keys.data == nullptr)
    throw invalid_argument{"sort: keys are null"};
  validate_shape(job);
  if (job.values && job.values->count > 0 && job.values->data == nullptr)
    throw invalid_argument{"sort: values are null"};
  const bool separate = job.keys_out != nullptr;
  if (job.values && job.keys.count > 0 && separate != (job.values_out != nullptr))
    throw invalid_argument{"sort: keys and values must both be sorted in place or both into "
                           "separate outputs"};
  if (!job.values && job.values_out != nullptr)
    throw invalid_argument{"sort: a values output without values"};
}

bool in_files(const detail::job_arrays& a)
{
  return detail::find_file_window(a.src_keys) || detail::find_file_window(a.src_values) ||
         detail::find_file_window(a.dst_keys) || detail::find_file_window(a.dst_values);
}

/// The CPU engine sorts in memory: arrays in files are read into host memory, sorted there in
/// place and written to their output (the input file itself for an in-place job). The GPU engine
/// needs none of this: its staging reads and writes the files piece by piece.
template <typename Sort>
detail::execution_stats sort_files_in_memory(const detail::job_arrays& a,
                                             const detail::element_layout& layout, Sort&& sort)
{
  // Allocated before the files are touched, so that running out of memory changes nothing.
  const detail::host_buffer keys{a.n * layout.key_bytes};
  const detail::host_buffer values{a.n * layout.value_bytes};
  detail::host_read(keys.data(), a.src_keys, keys.size());
  detail::host_read(values.data(), a.src_values, values.size());
  const detail::job_arrays in_memory{.src_keys = keys.data(),
                                     .src_values = values.data(),
                                     .dst_keys = keys.data(),
                                     .dst_values = values.data(),
                                     .n = a.n};
  const detail::execution_stats stats = sort(in_memory);
  const auto write_back = [&] {
    detail::host_write(a.dst_keys, keys.data(), keys.size());
    detail::host_write(a.dst_values, values.data(), values.size());
  };
  try {
    write_back();
  } catch (const io_error& first) {
    // In place, the write-back goes over the input: one that fails part way leaves some blocks
    // sorted and the rest as they were, keys torn from their values (found by the fault sweep,
    // tests/pipeline/fault_sweep_test.cpp). The sorted arrays are all in memory, so writing
    // them once more makes the file whole again after a transient failure; a separate output's
    // input was never written, and its failed output is not published.
    if (a.dst_keys != a.src_keys) throw;
    detail::log(log_level::warn, "{}; writing the sorted elements back once more", first.what());
    try {
      write_back();
    } catch (const io_error& second) {
      throw io_error{std::string{second.what()} +
                     " (twice: the file sorted in place may hold a mix of sorted and original "
                     "elements)"};
    }
  }
  return stats;
}

#if GPUSORT_WITH_CUDA
/// Whether the round-1 buffer of a job whose chunks hold `chunk_bytes` is pinned (config
/// round1_buffer; `auto` is pinned in an engine, and the CLI's --local turns it into `by-job`).
/// GPUSORT_ROUND1_PINNED=1 or 0 overrides it, for the A/B of e2e_bench's cli and
/// cli_round1_pinned paths.
bool round1_pinned(const config& cfg, std::uint64_t chunk_bytes)
{
  return detail::switch_flag("GPUSORT_ROUND1_PINNED",
                             detail::pins_round1(cfg.round1_buffer, chunk_bytes));
}

/// Grows a buffer the engine keeps from job to job (the round-1 buffer, the lean path's room)
/// to at least `bytes`, pinned as round1_pinned says for chunks of `chunk_bytes`; false where it
/// was large enough (then kept as it was made: `by-job` decides when the buffer is made).
bool keep_at_least(detail::host_buffer& kept, std::uint64_t bytes, const config& cfg,
                   std::uint64_t chunk_bytes)
{
  if (kept.size() >= bytes) return false;
  kept = detail::host_buffer{};  // the old one's memory goes first
  kept = round1_pinned(cfg, chunk_bytes) ? detail::pinned_host_buffer(bytes)
                                         : detail::host_buffer{bytes};
  return true;
}
#endif

}  // namespace

struct host_registration::state {
#if GPUSORT_WITH_CUDA
  cuda::host_registration registration;
#endif
};

host_registration::host_registration() noexcept = default;
host_registration::~host_registration() = default;
host_registration::host_registration(host_registration&&) noexcept = default;
host_registration& host_registration::operator=(host_registration&&) noexcept = default;

bool host_registration::pinned() const noexcept
{
#if GPUSORT_WITH_CUDA
  return state_ != nullptr && state_->registration.size() > 0;
#else
  return false;
#endif
}

// Read by the GPU path only: unused (and warned about by clang) in a CPU-only build.
[[maybe_unused]] constexpr std::uint64_t min_pipeline_chunk_bytes = std::uint64_t{64} << 20;

/// How many chunks an out-of-core GPU job should have at least, from a cost model fitted to
/// measurements on H100 and H200 (bench/results). A ring of three chunks fills before both links
/// are busy and drains after: about T/d per round, T the round's time at the link rate. Round 2
/// gathers d^2 slices per final chunk, d^3 in all, each costing about `per_slice` beside its bytes.
/// d^3 * per_slice + T/d is least near d = (T / (3 per_slice))^(1/4): 11 for 8 GiB, 15 for 32 GiB.
/// The optimum is flat: on the H100 with batched gathers (bench/results/h100-20261122-*), 8 GiB
/// took a median 0.461, 0.406, 0.417, 0.417 and 0.482 s at d = 8, 11, 16, 24 and 32.
/// With g GPUs each one pipelines its own share (its own links, its own fill and drain) while
/// the slices spread over g sets of copy engines: g times the count for a g-th of the job, a
/// multiple of g so that no GPU waits for another's extra chunk at the end of a round (on 2 H200s,
/// d = 11 left one GPU idle for the last 10% of each round).
/// GPUSORT_PIPELINE_CHUNKS overrides it, for measuring.
std::uint64_t pipeline_chunks(std::uint64_t job_bytes, std::uint64_t gpus)
{
  if (const auto forced = detail::switch_count("GPUSORT_PIPELINE_CHUNKS", 1, 1U << 20))
    return *forced;
  constexpr double link_bytes_per_second = 50e9;
  constexpr double per_slice_seconds = 4e-6;
  gpus = std::max<std::uint64_t>(gpus, 1);
  const double round_seconds =
      static_cast<double>(job_bytes) / static_cast<double>(gpus) / link_bytes_per_second;
  const double d = std::pow(round_seconds / (3 * per_slice_seconds), 0.25);
  return gpus * std::clamp<std::uint64_t>(static_cast<std::uint64_t>(std::llround(d)), 4, 32);
}

namespace {

/// How the fast path runs a job of n elements: what sort() does, decided before it does it.
/// sort(), estimate_memory() and plan() all ask route_of, so that a plan is the sort's.
struct fast_route {
  detail::model_path path{detail::model_path::two_rounds};
  detail::chunk_plan plan{};  ///< in_core and two_rounds: the chunk plan
  std::uint32_t resident_gpus{};  ///< resident: the GPUs the job takes
  /// two_rounds on GPUs: the plan is the radix sort's (element_layout::radix_chunks), whose
  /// smaller scratch left room for far larger chunks than the configured sorter's.
  bool radix_chunks{};
};

/// A GPU job whose keys are read from a file runs DSPS (the scattered rounds' sample would read
/// the file a key at a time: executor.cpp), so its round-1 buffer is the data's size, not the
/// regions' (about 19% more; 9.45 GiB for 8 GiB at 32 MiB, h200-20261201-s19 call 1).
void unscattered_input(fast_route& r, bool file_input) noexcept
{
  if (file_input) r.plan.scatter_elements = 0;
}

/// fast_bytes of a job the devices' budget cannot plan at all.
constexpr std::uint64_t infeasible = std::numeric_limits<std::uint64_t>::max();

/// The fast path's host memory as a job will run it, `bytes()` counting it. The scattered
/// rounds' regions take about 19% more than DSPS's round-1 buffer: a job over `limit` with them
/// but within it without runs DSPS, not lean, and `scope` then holds DSPS for its life.
template <class Bytes>
std::uint64_t fast_within(std::uint64_t limit, std::optional<detail::dsps_only_scope>& scope,
                          const Bytes& bytes)
{
  const std::uint64_t fast = bytes();
  if (fast == infeasible || fast <= limit || detail::dsps_only_scope::active()) return fast;
  scope.emplace();
  const std::uint64_t dsps = bytes();
  if (dsps < fast && dsps <= limit) return dsps;
  scope.reset();
  return fast;
}

/// `gpus`: the GPUs (0: the host device); `fits`: the GPUs a resident sort would take (0:
/// none: it does not fit), asked only where the job may go resident; `capacity`: the devices'
/// common capacity, asked only where the job is planned in chunks; `direct`: the CPU's direct
/// path (no device budget, no chunk size). Throws config_error naming the smallest budget
/// where the budget affords no plan.
fast_route route_of(std::uint64_t n, const detail::element_layout& layout,
                    const std::function<detail::device_capacity()>& capacity,
                    std::optional<std::uint64_t> max_chunk, std::uint64_t gpus,
                    const std::function<std::uint32_t()>& fits, bool direct)
{
  if (gpus > 0) {
    if (n > 0 && (!max_chunk || n <= *max_chunk)) {
      if (const std::uint32_t resident = fits(); resident > 0)
        return {.path = detail::model_path::resident, .resident_gpus = resident};
    }
    const std::uint64_t chunks = pipeline_chunks(n * layout.bytes(), gpus);
    const std::uint64_t pipelined = std::max<std::uint64_t>(
        (n + chunks - 1) / chunks, min_pipeline_chunk_bytes / layout.bytes());
    detail::chunk_plan plan = detail::make_plan(
        n, capacity(), max_chunk ? std::min(*max_chunk, pipelined) : pipelined,
        layout.key_bytes);
    plan.scatter_elements = detail::scatter_elements_for(plan, true);
    return {.path = plan.in_core() ? detail::model_path::in_core : detail::model_path::two_rounds,
            .plan = plan};
  }
  if (direct) return {.path = detail::model_path::direct};
  detail::chunk_plan plan = detail::make_plan(n, capacity(), max_chunk, layout.key_bytes);
  plan.scatter_elements = detail::scatter_elements_for(plan, false);
  return {.path = plan.in_core() ? detail::model_path::in_core : detail::model_path::two_rounds,
          .plan = plan};
}

}  // namespace

struct engine::impl {
  config cfg;
  std::vector<std::unique_ptr<detail::device>> devices;
  std::vector<int> gpu_ids;
  bool gpus{};
  /// GPU engines keep the round-1 output pinned across jobs: pinning per job would cost about
  /// as much as the sort (design.md section 1). One GPU job at a time uses it.
  std::mutex gpu_mutex;
  detail::host_buffer round1_cache;
  /// The lean path's room for jobs on memory, kept as the round-1 buffer is (pinned likewise).
  detail::host_buffer room_cache;
  /// Locks tmpfs outputs' pages for the GPUs' copy engines (pipeline/file_window.hpp); null on
  /// the CPU.
  std::shared_ptr<detail::page_locker> output_locker;

  detail::execution_stats sort_on_gpus(const detail::job_arrays& arrays,
                                       const detail::element_layout& layout,
                                       const std::vector<detail::device*>& devs,
                                       detail::job_context& ctx);
  /// Elements of `layout` a chunk may hold by the configuration's chunk_bytes (nullopt: any).
  [[nodiscard]] std::optional<std::uint64_t> max_chunk_of(
      const detail::element_layout& layout) const;
  /// route_of on this engine's devices; `resident` receives the GPUs of a resident route.
  [[nodiscard]] fast_route route(std::uint64_t n, const detail::element_layout& layout,
                                 std::vector<detail::device*>* resident = nullptr) const;
  /// engine::plan's body for a sort of n elements of `layout` whose devices sort `inner`
  /// (positions beside the keys for a stable sort or an argsort), on `machine`.
  /// route_of on the GPUs (or host device) of a hypothetical machine.
  [[nodiscard]] fast_route route_on(const machine_model& machine, std::uint64_t n,
                                    const detail::element_layout& layout) const;
  /// engine::plan's body for n elements of `layout` whose devices sort `inner` (positions
  /// beside the keys for a stable sort of pairs or an argsort), on `machine`; `lean`: the job
  /// runs lean first (lean_first).
  [[nodiscard]] job_plan plan_of(std::uint64_t n, const detail::element_layout& layout,
                                 const detail::element_layout& inner, std::uint32_t stable_values,
                                 bool lean, const memory_estimate& memory, std::uint64_t limit,
                                 const machine_model& machine, bool this_machine);
  /// engine::estimate_memory's body for a sort, which plan_sort shares.
  /// The job's host memory within options' limit; `scope` as fast_within leaves it.
  [[nodiscard]] memory_estimate estimate(const sort_job& job, const sort_options& options,
                                         std::optional<detail::dsps_only_scope>& scope);
  [[nodiscard]] job_plan plan_sort(const sort_job& job, const sort_options& options,
                                   const machine_model& machine, bool this_machine);
  [[nodiscard]] job_plan plan_argsort(const argsort_job& job, const sort_options& options,
                                      const machine_model& machine, bool this_machine);
  /// One job with the given options as it comes, stable or not; `canonical`: see key_order.
  sort_report run(const sort_job& job, const sort_options& options, bool canonical);
  std::optional<sort_report> argsort_resident(const argsort_job& job, const sort_options& options,
                                              bool canonical);
  /// The report of a job of `elements` (`bytes` in all) that started at `start`.
  sort_report report_of(std::string engine_name, std::uint64_t elements, std::uint64_t bytes,
                        std::chrono::steady_clock::time_point start,
                        const detail::execution_stats& stats, detail::job_context& ctx) const;
  /// The host memory limit of a job: its options', else the configuration's, else half of
  /// the physical memory (config::host_memory_budget's "auto").
  [[nodiscard]] std::uint64_t limit_of(const sort_options& options) const;
  /// Host memory the fast path takes for a job of n elements of `layout` beyond its arrays
  /// (`files`: arrays in files, which the CPU engine reads into memory; `file_input`: the keys
  /// it reads are in a file, which GPUs sort without the scattered rounds: unscattered_input).
  [[nodiscard]] std::uint64_t fast_bytes(std::uint64_t n, const detail::element_layout& layout,
                                         bool files, bool file_input = false) const;
  [[nodiscard]] std::uint64_t fast_bytes(const sort_job& job, const sort_options& options) const;
  [[nodiscard]] std::uint64_t fast_bytes(const argsort_job& job,
                                         const sort_options& options) const;
  /// fast_bytes of a job as it runs within options' limit (fast_within).
  template <class Job>
  [[nodiscard]] std::uint64_t fast_bytes_within(
      const Job& job, const sort_options& options,
      std::optional<detail::dsps_only_scope>& scope) const
  {
    return fast_within(limit_of(options), scope, [&] { return fast_bytes(job, options); });
  }
  [[nodiscard]] detail::lean::engine_parts lean_parts();
  [[nodiscard]] std::vector<detail::device*> device_list() const;
  [[nodiscard]] detail::inner_sort inner()
  {
    return [this](const sort_job& job, const sort_options& options, bool canonical) {
      return run(job, options, canonical);
    };
  }
};

detail::execution_stats engine::impl::sort_on_gpus(const detail::job_arrays& arrays,
                                                   const detail::element_layout& layout,
                                                   const std::vector<detail::device*>& devs,
                                                   detail::job_context& ctx)
{
  const std::lock_guard lock{gpu_mutex};
#if GPUSORT_WITH_CUDA
  // Out-of-memory on a GPU shrinks the chunks and retries: nothing a failed attempt wrote is
  // visible (round 1 writes only the round-1 output; a failed round 2 restores the input).
  constexpr int attempts = 8;
  for (int attempt = 1;; ++attempt) {
    try {
      std::vector<detail::device*> resident;
      fast_route r = route(arrays.n, layout, &resident);
      unscattered_input(r, detail::find_file_window(arrays.src_keys).has_value());
      if (r.path == detail::model_path::resident) {
        std::vector<detail::cuda_device*> use;
        for (detail::device* d : resident) use.push_back(static_cast<detail::cuda_device*>(d));
        return detail::sort_resident(arrays, layout, use, ctx);
      }
      const detail::chunk_plan& plan = r.plan;
      const bool compressed = detail::compresses(cfg.compress_runs, plan);
      const std::uint64_t round1_bytes = detail::round1_bytes(plan, layout, compressed);
      const auto allocation_start = std::chrono::steady_clock::now();
      if (!plan.in_core() &&
          keep_at_least(round1_cache, round1_bytes, cfg, plan.chunk_size(0) * layout.bytes())) {
        // Pinning is paid once per engine: the daemon keeps the buffer, a one-shot CLI pays it
        // every run (it pins only for small chunks), so the profile shows it beside the rounds.
        ctx.add_host_stage(1, "round-1 buffer", 1, round1_bytes, 0,
                           detail::seconds_since(allocation_start));
      }
      detail::element_layout chosen = layout;
      chosen.radix_chunks = r.radix_chunks;
      return detail::execute(arrays, chosen, plan, devs, ctx, &round1_cache, cfg.compress_runs);
    } catch (const out_of_memory& e) {
      if (attempt == attempts) throw;
      detail::log(log_level::warn, "GPU memory ran out ({}); retrying with smaller chunks",
                  e.what());
      for (detail::device* d : devs) static_cast<detail::cuda_device*>(d)->shrink_budget();
    }
  }
#else
  (void)arrays, (void)layout, (void)devs, (void)ctx;
  throw logic_error{"GPU devices without CUDA support"};
#endif
}


engine::engine(config cfg) : impl_{std::make_unique<impl>()}
{
  device_set set = make_devices(cfg);
  impl_->devices = std::move(set.devices);
  impl_->gpu_ids = std::move(set.gpu_ids);
  impl_->gpus = set.gpus;
#if GPUSORT_WITH_CUDA
  if (impl_->gpus) impl_->output_locker = detail::make_cuda_page_locker(impl_->gpu_ids.front());
#endif
  impl_->cfg = std::move(cfg);
}

engine::~engine() = default;
engine::engine(engine&&) noexcept = default;
engine& engine::operator=(engine&&) noexcept = default;

const config& engine::configuration() const noexcept { return impl_->cfg; }

host_registration engine::register_host(void* data, std::size_t bytes)
{
  host_registration result;
  if (!impl_->gpus || bytes == 0) return result;
  if (data == nullptr) throw invalid_argument{"register_host: null pointer with nonzero size"};
#if GPUSORT_WITH_CUDA
  // The driver would fault the pages in on one thread; from every core first it is several
  // times faster (a daemon's 8 GiB shared buffer, its pages made by fallocate but not mapped:
  // see bench/results for the first Python sort that allocates one).
  detail::populate_pages(data, bytes, detail::page_contents::data);
  // Portable: page-locked for every GPU's context, not only the current one; mapped: the round-2
  // gather kernels read slices straight from it.
  const cuda::set_device_guard guard{impl_->gpu_ids.front()};
  result.state_ = std::make_unique<host_registration::state>(host_registration::state{
      cuda::host_registration{data, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped}});
#endif
  return result;
}

std::vector<std::string> engine::devices() const
{
  std::vector<std::string> names;
  for (const auto& dev : impl_->devices) names.push_back(dev->name());
  return names;
}

namespace {

detail::element_layout layout_of(dtype type, std::uint32_t value_bytes, const sort_options& o)
{
  return detail::element_layout{.type = type,
                                .direction = o.direction,
                                .key_bytes = static_cast<std::uint32_t>(size_of(type)),
                                .value_bytes = value_bytes,
                                .floats = o.floats};
}

/// A refusal of the lean path, said with what the fast path would have needed.
[[noreturn]] void refuse(const config_error& lean, std::uint64_t fast, std::uint64_t limit)
{
  throw config_error{std::string{lean.what()} + " (the fastest path needs " +
                     format_bytes(fast) + ", more than the limit of " + format_bytes(limit) +
                     ")"};
}

/// The report's path and memory for a job that did not run lean.
void note_path(sort_report& r, std::uint64_t limit, std::uint64_t bytes)
{
  if (r.path.empty() && r.rounds > 0)
    r.path = r.engine == "cpu-direct"                  ? "direct"
             : r.rounds == 2                           ? "two rounds"
             : r.engine.starts_with("gpu") ? "resident"
                                                       : "in core";
  r.host_memory_limit = limit;
  r.host_memory_bytes = bytes;
}

}  // namespace

std::uint64_t engine::impl::limit_of(const sort_options& options) const
{
  if (options.host_memory_limit) return *options.host_memory_limit;
  return cfg.host_memory_budget.value_or(detail::physical_memory_half());
}

std::vector<detail::device*> engine::impl::device_list() const
{
  std::vector<detail::device*> devs;
  for (const auto& dev : devices) devs.push_back(dev.get());
  return devs;
}

detail::lean::engine_parts engine::impl::lean_parts()
{
  detail::lean::engine_parts parts{.devices = device_list(),
                                   .gpus = gpus,
                                   .gpu_mutex = &gpu_mutex,
                                   .locker = output_locker,
                                   .threads = cfg.host_threads};
#if GPUSORT_WITH_CUDA
  if (gpus)
    parts.room = [this](std::uint64_t bytes) {
      // The lean path moves whole buckets, not a small budget's chunks: `by-job` keeps its
      // room pageable, as `pageable` did for --local before.
      keep_at_least(room_cache, bytes, cfg, std::numeric_limits<std::uint64_t>::max());
      return &room_cache;
    };
#endif
  return parts;
}

std::optional<std::uint64_t> engine::impl::max_chunk_of(const detail::element_layout& layout) const
{
  if (!cfg.chunk_bytes) return std::nullopt;
  return std::max<std::uint64_t>(1, *cfg.chunk_bytes / layout.bytes());
}

fast_route engine::impl::route(std::uint64_t n, const detail::element_layout& layout,
                               std::vector<detail::device*>* resident) const
{
  const std::vector<detail::device*> devs = device_list();
  const auto fits = [&]() -> std::uint32_t {
#if GPUSORT_WITH_CUDA
    std::vector<detail::cuda_device*> all;
    for (detail::device* d : devs) all.push_back(static_cast<detail::cuda_device*>(d));
    const std::vector<detail::cuda_device*> use = detail::resident_gpus(n, layout, all);
    if (resident != nullptr) resident->assign(use.begin(), use.end());
    return static_cast<std::uint32_t>(use.size());
#else
    (void)resident;
    return 0;
#endif
  };
  const fast_route r = route_of(
      n, layout, [&] { return detail::common_capacity(devs, layout); }, max_chunk_of(layout),
      gpus ? devs.size() : 0, fits, !cfg.device_memory_budget && !cfg.chunk_bytes);
  if (!gpus || r.path != detail::model_path::two_rounds || layout.stable || layout.radix_chunks ||
      cfg.incore != incore_engine::automatic)
    return r;
  // At a small budget the sample sort's scratch makes the chunks small: 8 GiB of u64 at 32 MiB
  // took 2643 chunks with it and 1594 with the radix sort, which then sorted in 0.81-0.84 s
  // against 0.97 s (every key type, stable or not, one H200); at 1/8, 41 chunks against 34, the
  // sample sort was the faster (0.377 against 0.40-0.42 s; h200x2-20261130-s9). Per chunk the
  // two cost about the same at these sizes, so the plan with far fewer chunks wins. (Its
  // scratch sized for the GPU's own policy since, both plan 1594 chunks there.)
  detail::element_layout radix = layout;
  radix.radix_chunks = true;
  // Float keys go to the radix sort out of core whatever their chunks: their ordered bits, all
  // but a few exponents alike, cost the sample sort more than integers do. 8 GiB of f64 on one
  // H200 in one run (h200x2-20261130-s13/call2): 0.599 against 0.652 s at 32 MiB (round 1's
  // sorts busy 0.232 against 0.278 s), 1.193 against 1.351 s at the smallest budget, 0.371
  // against 0.386 s at 1/8; u64 keys took 0.577 against 0.619 s at 32 MiB with the sample sort.
  const bool floats = is_float(layout.type);
  try {
    fast_route alt = route_of(
        n, radix, [&] { return detail::common_capacity(devs, radix); }, max_chunk_of(radix),
        devs.size(), [] { return std::uint32_t{0}; }, false);
    if (alt.path != detail::model_path::two_rounds || (!floats && 2 * r.plan.d < 3 * alt.plan.d))
      return r;
    alt.radix_chunks = true;
    return alt;
  } catch (const config_error&) {
    return r;  // no plan with the radix sort's chunks: the configured sorter's stands
  }
}

std::uint64_t engine::impl::fast_bytes(std::uint64_t n, const detail::element_layout& layout,
                                       bool files, bool file_input) const
{
  if (n == 0) return 0;
  const std::vector<detail::device*> devs = device_list();
  const std::uint64_t data = n * layout.bytes();
  const auto staging = [&](std::uint64_t elements, std::uint64_t slices) {
    std::uint64_t sum = 0;
    for (const detail::device* d : devs) sum += d->host_bytes(layout, elements, slices);
    return sum;
  };
  const std::uint64_t read_in = !gpus && files ? data : 0;  // sort_files_in_memory's copy
  try {
    fast_route r = route(n, layout);
    if (gpus) unscattered_input(r, file_input);
    switch (r.path) {
      case detail::model_path::resident:
        return staging(n / devs.size(), 1);
      case detail::model_path::direct:
        return read_in + data;  // the CPU sort's scratch
      case detail::model_path::in_core:
        return read_in + staging(n, 1);
      case detail::model_path::two_rounds:
      case detail::model_path::lean:
        break;
    }
    const detail::chunk_plan& plan = r.plan;
    // A GPU engine's round-1 output is its own buffer; the host device writes round 1 to
    // memory as large as the data, or the scattered rounds' regions (GPUSORT_SCATTER=on).
    const std::uint64_t round1 =
        gpus || plan.scatter_elements > 0
            ? detail::round1_bytes(plan, layout, detail::compresses(cfg.compress_runs, plan))
            : data;
    return read_in + round1 + detail::planning_bytes(plan, layout) +
           staging(plan.capacity, plan.d * plan.runs_per_chunk());
  } catch (const config_error&) {
    return std::numeric_limits<std::uint64_t>::max();
  }
}

std::uint64_t engine::impl::fast_bytes(const sort_job& job, const sort_options& options) const
{
  const std::uint64_t n = job.keys.count;
  const std::uint32_t vb = job.values ? job.values->value_bytes : 0;
  const detail::element_layout layout = layout_of(job.keys.type, vb, options);
  const bool file_input = detail::find_file_window(job.keys.data).has_value();
  const bool files =
      file_input || (job.keys_out != nullptr && detail::find_file_window(job.keys_out));
  if (!detail::needs_stable_path(job, options)) return fast_bytes(n, layout, files, file_input);
  if (!job.values)  // keys alone: zeros and NaNs aside
    return fast_bytes(n, layout, files, file_input);
  // Pairs: the keys and positions sorted as pairs, then the values gathered (stable.hpp).
  const std::uint32_t ib = n <= std::numeric_limits<std::uint32_t>::max() ? 4 : 8;
  const detail::element_layout pairs = layout_of(job.keys.type, ib, options);
  const std::uint64_t own = n * (layout.key_bytes + ib) + 2 * n * std::uint64_t{vb};
  const std::uint64_t inner = fast_bytes(n, pairs, false);
  return inner == std::numeric_limits<std::uint64_t>::max() ? inner : own + inner;
}

std::uint64_t engine::impl::fast_bytes(const argsort_job& job, const sort_options& options) const
{
  const std::uint64_t n = job.keys.count;
  const detail::element_layout pairs = layout_of(job.keys.type, job.index_bytes, options);
  if (gpus) {
#if GPUSORT_WITH_CUDA
    std::vector<detail::cuda_device*> all;
    for (detail::device* d : device_list()) all.push_back(static_cast<detail::cuda_device*>(d));
    detail::element_layout resident = pairs;
    resident.positions = true;
    resident.stable = true;
    if (n > 1 && !detail::resident_gpus(n, resident, all).empty())
      return fast_bytes(n, pairs, false) ;
#endif
  }
  const std::uint64_t inner = fast_bytes(n, pairs, false);
  return inner == std::numeric_limits<std::uint64_t>::max() ? inner : n * pairs.bytes() + inner;
}

memory_estimate engine::impl::estimate(const sort_job& job, const sort_options& options,
                                       std::optional<detail::dsps_only_scope>& scope)
{
  memory_estimate e{.fast_bytes = fast_bytes_within(job, options, scope)};
  const std::uint32_t vb = job.values ? job.values->value_bytes : 0;
  detail::element_layout layout = layout_of(job.keys.type, vb, options);
  layout.stable = options.stable && job.values.has_value();
  e.lean_bytes = detail::lean::least_bytes(lean_parts(), job.keys.count, layout);
  if (e.lean_bytes == 0) e.lean_refusal = "no lean plan exists for this job on these devices";
  return e;
}

memory_estimate engine::estimate_memory(const sort_job& job, const sort_options& options) const
{
  std::optional<detail::dsps_only_scope> dsps_only;  // as sort() would run it
  return impl_->estimate(job, options, dsps_only);
}

memory_estimate engine::estimate_memory(const argsort_job& job,
                                        const sort_options& options) const
{
  std::optional<detail::dsps_only_scope> dsps_only;  // as argsort() would run it
  memory_estimate e{.fast_bytes = impl_->fast_bytes_within(job, options, dsps_only)};
  e.lean_refusal = detail::lean::argsort_refusal(job);
  if (!e.lean_refusal.empty()) return e;
  detail::element_layout layout = layout_of(job.keys.type, job.index_bytes, options);
  layout.stable = true;
  e.lean_bytes = detail::lean::least_bytes(impl_->lean_parts(), job.keys.count, layout);
  if (e.lean_bytes == 0) e.lean_refusal = "no lean plan exists for this job on these devices";
  return e;
}

namespace {

/// GPUSORT_LEAN=1: every job of two elements or more runs on the lean path (within its limit),
/// to measure it against the fast path at the same size, and for tests.
bool lean_forced() noexcept
{
  // Read at every job, not once: gpu_bench --lean sets it around the runs it forces.
  return detail::switch_flag("GPUSORT_LEAN", false);
}

/// Whether a job of `count` elements runs lean before anything else: a journal asks for it, or
/// the fast path needs more host memory than the limit (`fast`), or GPUSORT_LEAN forces it.
bool lean_first(std::uint64_t count, bool journal, std::uint64_t fast, std::uint64_t limit)
{
  const bool over = fast != infeasible && fast > limit;
  return count >= 2 && (journal || over || lean_forced());
}

/// The report's path name for a route: sort_report::path's (note_path).
std::string path_name(const fast_route& r, bool on_gpus)
{
  switch (r.path) {
    case detail::model_path::direct:
      return "direct";
    case detail::model_path::in_core:
      return on_gpus ? "resident" : "in core";  // a GPU's one round trip, as note_path says
    case detail::model_path::resident:
      return "resident";
    case detail::model_path::two_rounds:
      return "two rounds";
    case detail::model_path::lean:
      return "lean";
  }
  return "";
}

}  // namespace

machine_model engine::machine() const
{
  if (!impl_->gpus) return machine_model::host(impl_->cfg.host_threads);
  machine_model m = machine_model::h200(static_cast<std::uint32_t>(impl_->devices.size()));
  // The host's planning rates were fitted on the two-H200 host's 32 cores; the one-H200 host's
  // 16 took 17-18 ns a sample key where the model says 10 (h200-20261201-s19 call 1): they go
  // with the cores this engine plans on.
  const double slower =
      std::max(1.0, 32.0 / detail::host_threads_or_cores(impl_->cfg.host_threads));
  m.candidate_seconds *= slower;
  m.cut_seconds *= slower;
  return m;
}

namespace {

/// The devices of a described machine as the engine counts their budgets: the host device's
/// own capacity, or a GPU's as cuda_device::capacity counts it (ring_budget), less its sort's
/// scratch (which only a GPU can size); where the budget holds no ring only small jobs (4096
/// elements) sort, whole. See pipeline/cuda/buffer_sizes.hpp.
detail::device_capacity described_capacity(const machine_model& m,
                                           const detail::element_layout& layout,
                                           std::uint64_t budget, unsigned host_threads)
{
  if (m.gpus == 0)
    return detail::host_device{budget == 0 ? std::nullopt : std::optional{budget}, host_threads}
        .capacity(layout);
  const std::uint64_t per_element = detail::gpu_ring_buffers_per_element * layout.bytes();
  // A ring of c elements as cuda_device counts it, less the scratch.
  const auto need = [layout](std::uint64_t c) {
    return detail::ring_budget(layout.key_bytes, layout.value_bytes, c, 0);
  };
  detail::device_capacity cap{.bytes_per_element = per_element, .exact_budget = need};
  if (budget != 0) {
    const std::uint64_t fitting = detail::largest_fitting(budget, per_element, need);
    cap.elements = std::max(fitting, detail::gpu_small_job_elements);
    cap.whole_jobs_only = fitting < detail::gpu_small_job_elements;
  }
  return cap;
}

}  // namespace

fast_route engine::impl::route_on(const machine_model& m, std::uint64_t n,
                                  const detail::element_layout& layout) const
{
  const std::uint64_t budget = cfg.device_memory_budget.value_or(m.device_memory);
  const detail::device_capacity cap = described_capacity(m, layout, budget, cfg.host_threads);
  if (m.gpus == 0) {
    return route_of(
        n, layout, [&] { return cap; }, max_chunk_of(layout), 0, [] { return 0U; },
        budget == 0 && !cfg.chunk_bytes);
  }
  const std::uint64_t e = layout.bytes();
  const auto fits = [&]() -> std::uint32_t {
    // Resident: the share and its work array on each GPU (resident_buffers), scratch aside.
    const std::uint32_t k = detail::resident_share_gpus(n, e, m.gpus);
    const std::uint64_t share = (n + k - 1) / k;
    const detail::resident_sizes need = detail::resident_need(
        layout.key_bytes, layout.value_bytes, share, 0, detail::resident_tuning{}, k);
    return budget == 0 || detail::gpu_budget_margin + need.total() <= budget ? k : 0;
  };
  return route_of(
      n, layout, [&] { return cap; }, max_chunk_of(layout), m.gpus, fits, false);
}

job_plan engine::impl::plan_of(std::uint64_t n, const detail::element_layout& layout,
                               const detail::element_layout& inner, std::uint32_t stable_values,
                               bool lean, const memory_estimate& memory, std::uint64_t limit,
                               const machine_model& m, bool this_machine)
{
  job_plan p{.elements = n,
             .bytes = n * layout.bytes(),
             .host_memory = memory,
             .host_memory_limit = limit,
             .machine = m};
  const bool on_gpus = this_machine ? gpus : m.gpus > 0;
  const std::uint32_t device_count =
      this_machine ? static_cast<std::uint32_t>(devices.size()) : std::max(m.gpus, 1U);
  p.device_budget = cfg.device_memory_budget.value_or(this_machine ? 0 : m.device_memory);
  detail::model_job job{.n = n,
                        .key_bytes = inner.key_bytes,
                        .value_bytes = inner.value_bytes,
                        .devices = device_count,
                        .stable_value_bytes = stable_values};
  // The smallest budget with which the two rounds plan the job on devices like these.
  const detail::device_capacity cap =
      this_machine ? detail::common_capacity(device_list(), inner)
                   : described_capacity(m, inner, p.device_budget, cfg.host_threads);
  p.smallest_budget = detail::smallest_budget(n, cap, inner.key_bytes);
  try {
    if (lean) {
      detail::element_layout lean_layout = layout;
      lean_layout.stable = stable_values > 0;
      const detail::lean::plan lp = detail::lean::plan_job(lean_parts(), n, lean_layout, limit);
      p.path = "lean";
      p.chunks = lp.chunks;
      p.bins = 1;
      p.rounds = 2;
      p.candidates = lp.samples * lp.chunks;
      job.path = detail::model_path::lean;
      job.key_bytes = layout.key_bytes;
      job.value_bytes = layout.value_bytes;
      job.stable_value_bytes = 0;
      job.d = lp.chunks;
      job.g = 1;
      job.candidates = p.candidates;
    } else {
      const fast_route r = this_machine ? route(n, inner) : route_on(m, n, inner);
      p.path = path_name(r, on_gpus);
      job.path = r.path;
      p.chunks = 1;
      p.rounds = 1;
      if (r.path == detail::model_path::resident) job.devices = r.resident_gpus;
      if (r.path == detail::model_path::in_core) job.devices = 1;
      if (r.path == detail::model_path::two_rounds) {
        p.chunks = r.plan.d;
        p.bins = r.plan.runs_per_chunk();
        p.rounds = 2;
        // Round 2 cuts with the usual sample first where the bound needs more, and keeps it
        // on keys that are not adversarial (cut_runs): what it reads then.
        p.candidates = r.plan.d * r.plan.first_s();
        p.slices = r.plan.d * r.plan.d * p.bins;
        job.d = r.plan.d;
        job.g = p.bins;
        job.candidates = p.candidates;
        // A GPU's ring holds a chunk or round 2's bound, in whole pages; where that is
        // several round-1 chunks, a slot takes them together (round_state.hpp's sort lanes).
        const auto slot_elements = [&](std::uint64_t element_bytes) {
          return element_bytes == 0 ? ~std::uint64_t{0}
                                    : detail::device_pages(detail::ring_reserve(r.plan) *
                                                           element_bytes) /
                                          element_bytes;
        };
        const std::uint64_t held =
            std::min(slot_elements(inner.key_bytes), slot_elements(inner.value_bytes));
        job.lanes = static_cast<std::uint32_t>(std::clamp<std::uint64_t>(
            held / std::max<std::uint64_t>(r.plan.chunk_size(0), 1), 1,
            detail::gpu_max_sort_lanes));
        if (r.plan.scatter_elements > 0) {
          // The scattered rounds (executor.cpp): a sample before round 1, no cuts, a task a
          // bucket in round 2, as many buckets as the sample's cut makes of keys without heavy
          // duplicates.
          const detail::scatter_tuning tuning = detail::scatter_tuning_from_environment();
          const std::uint64_t task = detail::ring_reserve(r.plan);
          const std::uint64_t samples = tuning.samples(n, task);
          p.buckets = tuning.cuts(n, task);
          p.bins = 1;
          p.candidates = samples;
          p.slices = r.plan.d * p.buckets;
          job.g = 1;
          job.candidates = samples;
          job.buckets = p.buckets;
        }
      }
    }
  } catch (const config_error& e) {
    p.path = "none";
    p.refusal = e.what();
    p.chunks = 0;
    p.bins = 0;
    p.rounds = 0;
    return p;
  }
  if (n == 0) {
    p.chunks = 0;
    p.rounds = 0;
  }
  p.devices = on_gpus ? job.devices : 1;
  const detail::model_prediction predicted = detail::predict(m, job);
  p.seconds = predicted.seconds;
  p.phases = predicted.phases;
  return p;
}

job_plan engine::impl::plan_sort(const sort_job& job, const sort_options& options,
                                 const machine_model& m, bool this_machine)
{
  validate_shape(job);
  const std::uint64_t n = job.keys.count;
  const std::uint32_t vb = job.values ? job.values->value_bytes : 0;
  const detail::element_layout layout = layout_of(job.keys.type, vb, options);
  const std::uint64_t limit = limit_of(options);
  std::optional<detail::dsps_only_scope> dsps_only;  // held while the job is planned
  const memory_estimate memory = estimate(job, options, dsps_only);
  const std::uint64_t fast = memory.fast_bytes;
  const bool lean = lean_first(n, job.journal_fd >= 0, fast, limit);
  // The stable path sorts (key, position) pairs and gathers the values after (stable.hpp).
  detail::element_layout inner = layout;
  std::uint32_t stable_values = 0;
  if (detail::needs_stable_path(job, options) && job.values) {
    inner = layout_of(job.keys.type, n <= std::numeric_limits<std::uint32_t>::max() ? 4 : 8,
                      options);
    stable_values = vb;
  }
  job_plan p = plan_of(n, layout, inner, stable_values, lean && this_machine, memory, limit, m,
                       this_machine);
  if (!this_machine) p.host_memory = {};  // another machine's host is not this one's
  if (this_machine && !lean && fast != infeasible && fast > limit && p.path != "none") {
    p.path = "none";
    p.refusal = "host_memory_limit: the fastest path needs " + format_bytes(fast) +
                ", more than the limit of " + format_bytes(limit);
  }
  return p;
}

job_plan engine::impl::plan_argsort(const argsort_job& job, const sort_options& options,
                                    const machine_model& m, bool this_machine)
{
  if (job.index_bytes != 4 && job.index_bytes != 8)
    throw invalid_argument{"argsort: indices must be 4 or 8 bytes, not " +
                           std::to_string(job.index_bytes)};
  const std::uint64_t n = job.keys.count;
  const detail::element_layout pairs = layout_of(job.keys.type, job.index_bytes, options);
  const std::uint64_t limit = limit_of(options);
  std::optional<detail::dsps_only_scope> dsps_only;  // held while the job is planned
  const std::uint64_t fast = fast_bytes_within(job, options, dsps_only);
  memory_estimate memory{.fast_bytes = fast};
  detail::element_layout lean_layout = pairs;
  lean_layout.stable = true;
  memory.lean_bytes = detail::lean::least_bytes(lean_parts(), n, lean_layout);
  // An argsort sorts (key, position) pairs: on GPUs that fit them in one round trip with the
  // positions made there, else as pairs through the fast path (stable.hpp).
  const bool lean = lean_first(n, false, fast, limit);
  job_plan p = plan_of(n, pairs, pairs, 0, lean && this_machine, memory, limit, m, this_machine);
  if (!this_machine) p.host_memory = {};  // another machine's host is not this one's
  p.bytes = n * pairs.key_bytes;
  return p;
}

job_plan engine::plan(const sort_job& job, const sort_options& options) const
{
  return impl_->plan_sort(job, options, machine(), true);
}

job_plan engine::plan(const argsort_job& job, const sort_options& options) const
{
  return impl_->plan_argsort(job, options, machine(), true);
}

namespace {

/// Whether `machine` has this engine's devices (its GPU count, or the CPU): its plan is then
/// the engine's own, only its rates differ (gpu_bench --model: the rates it measured).
bool same_devices(const machine_model& machine, bool gpus, std::size_t devices)
{
  return machine.gpus == (gpus ? devices : 0);
}

}  // namespace

job_plan engine::plan(const sort_job& job, const sort_options& options,
                      const machine_model& machine) const
{
  return impl_->plan_sort(job, options, machine,
                          same_devices(machine, impl_->gpus, impl_->devices.size()));
}

job_plan engine::plan(const argsort_job& job, const sort_options& options,
                      const machine_model& machine) const
{
  return impl_->plan_argsort(job, options, machine,
                             same_devices(machine, impl_->gpus, impl_->devices.size()));
}

sort_report engine::sort(const sort_job& job, const sort_options& options)
{
  validate(job);
  const std::uint64_t limit = impl_->limit_of(options);
  std::optional<detail::dsps_only_scope> dsps_only;  // held while the job runs
  const std::uint64_t fast = impl_->fast_bytes_within(job, options, dsps_only);
  // A fast path the devices' budget cannot plan (infeasible) fails with that budget's own
  // error below, naming the smallest device budget: lean would not mend it.
  if (lean_first(job.keys.count, job.journal_fd >= 0, fast, limit)) {
    try {
      return detail::lean::run_sort(impl_->lean_parts(), job, options, limit);
    } catch (const config_error& e) {
      if ((job.journal_fd >= 0 || lean_forced()) && fast <= limit) throw;
      refuse(e, fast, limit);
    }
  }
  sort_report r = detail::needs_stable_path(job, options)
                      ? detail::run_stable_sort(job, options, impl_->inner())
                      : impl_->run(job, options, false);
  note_path(r, limit, fast);
  return r;
}

sort_report engine::argsort(const argsort_job& job, const sort_options& options)
{
  const std::uint64_t limit = impl_->limit_of(options);
  std::optional<detail::dsps_only_scope> dsps_only;  // held while the job runs
  const std::uint64_t fast = impl_->fast_bytes_within(job, options, dsps_only);
  if (lean_first(job.keys.count, false, fast, limit) && job.indices_out != nullptr &&
      (job.index_bytes == 4 || job.index_bytes == 8)) {
    try {
      return detail::lean::run_argsort(impl_->lean_parts(), job, options, limit);
    } catch (const config_error& e) {
      refuse(e, fast, limit);
    }
  }
  sort_report r =
      detail::run_argsort(job, options, impl_->inner(),
                          [this](const argsort_job& j, const sort_options& o, bool canonical) {
                            return impl_->argsort_resident(j, o, canonical);
                          });
  note_path(r, limit, fast);
  return r;
}

std::optional<sort_report> engine::impl::argsort_resident(const argsort_job& job,
                                                          const sort_options& options,
                                                          bool canonical)
{
#if GPUSORT_WITH_CUDA
  if (!gpus) return std::nullopt;
  const auto start = std::chrono::steady_clock::now();
  const detail::element_layout layout{
      .type = job.keys.type,
      .direction = options.direction,
      .key_bytes = static_cast<std::uint32_t>(size_of(job.keys.type)),
      .value_bytes = job.index_bytes,
      .floats = options.floats,
      .canonical = canonical,
      .positions = true,
      .stable = true};
  const detail::job_arrays arrays{.src_keys = const_cast<void*>(job.keys.data),  // only read
                                  .src_values = nullptr,
                                  .dst_keys = job.keys_out,
                                  .dst_values = job.indices_out,
                                  .n = job.keys.count};
  const detail::output_mappings mapped_outputs{
      {{arrays.dst_keys, job.keys_out != nullptr ? arrays.n * layout.key_bytes : 0},
       {arrays.dst_values, arrays.n * layout.value_bytes}},
      output_locker};
  detail::job_context ctx{options, layout.bytes()};
  detail::execution_stats stats;
  {
    const std::lock_guard lock{gpu_mutex};
    std::vector<detail::cuda_device*> all;
    for (const auto& d : devices) all.push_back(static_cast<detail::cuda_device*>(d.get()));
    const std::vector<detail::cuda_device*> resident =
        detail::resident_gpus(arrays.n, layout, all);
    if (resident.empty()) return std::nullopt;
    try {
      stats = detail::sort_resident(arrays, layout, resident, ctx);
    } catch (const out_of_memory& e) {
      // Nothing is written before every key is on a GPU: the pairs route can still run.
      detail::log(log_level::info, "argsort: the GPUs ran out of memory ({}); sorting pairs",
                  e.what());
      return std::nullopt;
    }
  }
  mapped_outputs.check_sizes();
  return report_of("gpu-resident-argsort", arrays.n, arrays.n * layout.key_bytes, start, stats,
                   ctx);
#else
  (void)job, (void)options, (void)canonical;
  return std::nullopt;
#endif
}

sort_report engine::impl::run(const sort_job& job, const sort_options& options, bool canonical)
{
  const auto start = std::chrono::steady_clock::now();
  const detail::element_layout layout{
      .type = job.keys.type,
      .direction = options.direction,
      .key_bytes = static_cast<std::uint32_t>(size_of(job.keys.type)),
      .value_bytes = job.values ? job.values->value_bytes : 0U,
      .floats = options.floats,
      .canonical = canonical};
  // An in-place job writes its inputs (key_array's one exception); a separate one only reads them.
  void* const keys = const_cast<void*>(job.keys.data);
  void* const values = job.values ? const_cast<void*>(job.values->data) : nullptr;
  detail::job_arrays arrays{.src_keys = keys,
                            .src_values = values,
                            .dst_keys = job.keys_out ? job.keys_out : keys,
                            .dst_values = job.keys_out ? job.values_out : values,
                            .n = job.keys.count};
  if (arrays.dst_keys == arrays.src_keys) arrays.dst_values = arrays.src_values;

  // Outputs in tmpfs are written through mappings whose pages a thread makes from now on,
  // beside the sort (pipeline/file_window.hpp says why and what it saves).
  const detail::output_mappings mapped_outputs{{{arrays.dst_keys, arrays.n * layout.key_bytes},
                                                {arrays.dst_values, arrays.n * layout.value_bytes}},
                                               output_locker};

  std::vector<detail::device*> devs;
  for (const auto& dev : devices) devs.push_back(dev.get());
  detail::job_context ctx{options, layout.bytes()};

  std::string engine_name;
  detail::execution_stats stats;
  if (gpus) {
    engine_name = "gpu-dsps";
    stats = sort_on_gpus(arrays, layout, devs, ctx);
  } else {
    const fast_route r = route(arrays.n, layout);
    const bool direct = r.path == detail::model_path::direct;
    engine_name = direct ? "cpu-direct" : "cpu-dsps";
    const auto sort_on_cpu = [&](const detail::job_arrays& in_memory) {
      if (direct) return detail::sort_direct(in_memory, layout, cfg.host_threads, ctx);
      return detail::execute(in_memory, layout, r.plan, devs, ctx, nullptr, cfg.compress_runs);
    };
    stats = in_files(arrays) ? sort_files_in_memory(arrays, layout, sort_on_cpu)
                             : sort_on_cpu(arrays);
  }
  mapped_outputs.check_sizes();
  return report_of(std::move(engine_name), arrays.n, arrays.n * layout.bytes(), start, stats, ctx);
}

sort_report engine::impl::report_of(std::string engine_name, std::uint64_t elements,
                                    std::uint64_t bytes,
                                    std::chrono::steady_clock::time_point start,
                                    const detail::execution_stats& stats,
                                    detail::job_context& ctx) const
{
  sort_report report;
  report.engine = std::move(engine_name);
  report.elements = elements;
  report.bytes = bytes;
  report.seconds = detail::seconds_since(start);
  for (const auto& dev : devices) report.devices.push_back(dev->name());
  report.chunks = stats.chunks;
  report.rounds = stats.rounds;
  report.compensated_chunks = stats.compensated_chunks;
  report.round1_key_bytes = stats.round1_key_bytes;
  report.round1_stored_bytes = stats.round1_stored_bytes;
  report.scatter_buckets = stats.scatter_buckets;
  report.equal_buckets = stats.equal_buckets;
  report.profile = ctx.take_profile();
  return report;
}

}  // namespace gpusort
