#include "pipeline/lean/jobs.hpp"

#include "core/checks.hpp"
#include "core/cpu_sort.hpp"
#include "core/host_threads.hpp"
#include "core/keys.hpp"
#include "core/switches.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/lean/lean.hpp"
#include "pipeline/stable.hpp"

#include <gpusort/error.hpp>
#include <gpusort/units.hpp>

#include <algorithm>
#include <chrono>
#include <limits>
#include <numeric>
#include <optional>
#include <string>

namespace gpusort::detail::lean {

namespace {

/// The permutation's movers: the configured host threads, else one per core.
unsigned movers_of(const engine_parts& parts)
{
  return std::clamp(host_threads_or_cores(parts.threads), 1U, 64U);
}

plan_request request_for(const engine_parts& parts, std::uint64_t n,
                         const element_layout& layout, std::uint64_t limit)
{
  plan_request r;
  r.n = n;
  r.layout = layout;
  r.capacity = common_capacity(parts.devices, layout).elements;
  r.devices = parts.devices.size();
  r.host_limit = limit;
  r.movers = movers_of(parts);
  r.gather = switch_word("GPUSORT_LEAN_ROUND2", {"gather", "permute"}) != "permute";
  r.device_host_bytes = [devices = parts.devices, layout](std::uint64_t elements,
                                                          std::uint64_t slices) {
    std::uint64_t sum = 0;
    for (const device* d : devices) sum += d->host_bytes(layout, elements, slices);
    return sum;
  };
  return r;
}

/// The order whose codes make NumPy's equal floats equal bits; numpy_floats() says whether a
/// job's keys need it.
key_order canonical_of(dtype type, const sort_options& options) noexcept
{
  return {.type = type, .dir = options.direction, .floats = options.floats, .canonical = true};
}

element_layout layout_of(dtype type, std::uint32_t value_bytes, const sort_options& options)
{
  return element_layout{.type = type,
                        .direction = options.direction,
                        .key_bytes = static_cast<std::uint32_t>(size_of(type)),
                        .value_bytes = value_bytes,
                        .floats = options.floats};
}

/// The journal file of an in-place job on files, where the caller gave one.
std::optional<journal_file> journal_of(const sort_job& job)
{
  if (job.journal_fd < 0) return std::nullopt;
  if (job.keys_out != nullptr)
    throw invalid_argument{"sort: a journal is for a sort in place, not into separate outputs"};
  const std::optional<file_identity> keys = identity_of(job.keys.data);
  if (!keys)
    throw invalid_argument{"sort: a journal is for arrays in files (file_array), not memory"};
  journal_file f{.fd = job.journal_fd, .name = "the journal", .keys = *keys};
  if (job.values) {
    const std::optional<file_identity> values = identity_of(job.values->data);
    if (!values) throw invalid_argument{"sort: a journal's keys and values must both be files"};
    f.values = *values;
  }
  return f;
}

/// Runs the lean sort of `a` under the engine's GPU lock, its tmpfs outputs mapped.
lean_stats run_arrays(const engine_parts& parts, const job_arrays& a,
                      const element_layout& layout, const plan& p, job_context& ctx,
                      const journal_file* file)
{
  const output_mappings mapped{{{a.dst_keys, a.n * layout.key_bytes},
                                {a.dst_values, a.n * layout.value_bytes}},
                               parts.locker};
  std::unique_lock<std::mutex> lock;
  if (parts.gpus && parts.gpu_mutex != nullptr) lock = std::unique_lock{*parts.gpu_mutex};
  host_buffer* room = nullptr;
  if (file == nullptr && parts.room && lock.owns_lock())
    room = parts.room(room_bytes(p, layout.key_bytes, layout.value_bytes));
  const lean_stats stats =
      sort_lean(a, layout, p, parts.devices, ctx, file, movers_of(parts), room);
  lock = {};
  mapped.check_sizes();
  return stats;
}

sort_report report_of(const engine_parts& parts, const lean_stats& stats, std::uint64_t n,
                      std::uint64_t bytes, std::uint64_t limit, std::uint64_t extra,
                      std::chrono::steady_clock::time_point start, job_context& ctx)
{
  sort_report r;
  r.engine = parts.gpus ? "gpu-lean" : "cpu-lean";
  r.path = "lean";
  r.elements = n;
  r.bytes = bytes;
  r.seconds = seconds_since(start);
  for (const device* d : parts.devices) r.devices.push_back(d->name());
  r.chunks = stats.shape.chunks;
  r.rounds = 2;
  r.host_memory_limit = limit;
  r.host_memory_bytes = stats.shape.host_bytes + extra;
  r.profile = ctx.take_profile();
  return r;
}

/// Copies n elements of `bytes` each from src to dst (memory or file windows) a piece at a time.
void copy_array(void* dst, const void* src, std::uint64_t bytes)
{
  if (!find_file_window(dst) && !find_file_window(src)) {
    parallel_copy(dst, src, bytes);
    return;
  }
  constexpr std::uint64_t piece = std::uint64_t{16} << 20;
  std::vector<char> buffer(std::min(piece, bytes));
  for (std::uint64_t at = 0; at < bytes; at += piece) {
    const std::uint64_t len = std::min(piece, bytes - at);
    host_read(buffer.data(), static_cast<const char*>(src) + at, len);
    host_write(static_cast<char*>(dst) + at, buffer.data(), len);
  }
}

}  // namespace

plan plan_job(const engine_parts& parts, std::uint64_t n, const element_layout& layout,
              std::uint64_t limit)
{
  return make_plan(request_for(parts, n, layout, limit));
}

std::uint64_t least_bytes(const engine_parts& parts, std::uint64_t n,
                          const element_layout& layout)
{
  if (n < 2) return 0;
  return least_host_bytes(request_for(parts, n, layout, 0));
}

sort_report run_sort(const engine_parts& parts, const sort_job& job, const sort_options& options,
                     std::uint64_t limit)
{
  const auto start = std::chrono::steady_clock::now();
  const std::uint64_t n = job.keys.count;
  element_layout layout =
      layout_of(job.keys.type, job.values ? job.values->value_bytes : 0, options);
  // NumPy's equal floats whose bits differ (zeros, NaNs) keep their input order as the stable
  // path does: sorted by canonical codes, then written back over their runs, in input order.
  const bool specials = options.stable && canonical_of(job.keys.type, options).numpy_floats();
  layout.canonical = specials;
  layout.stable = options.stable && job.values.has_value();
  void* const keys = const_cast<void*>(job.keys.data);  // in place: written (key_array's rule)
  void* const values = job.values ? const_cast<void*>(job.values->data) : nullptr;
  const job_arrays a{.src_keys = keys,
                     .src_values = values,
                     .dst_keys = job.keys_out != nullptr ? job.keys_out : keys,
                     .dst_values = job.keys_out != nullptr ? job.values_out : values,
                     .n = n};
  const std::optional<journal_file> file = journal_of(job);
  job_context ctx{options, layout.bytes()};
  return visit_layout(layout.key_bytes, 0, [&]<typename K, typename>() {
    // The zeros and NaNs are read first: what they take comes off what the plan may take.
    distinct_equals<K> equals;
    std::uint64_t extra = 0;
    if (specials) {
      equals = scan_distinct_equals<K>(job.keys.data, n, options.direction);
      extra = (equals.zeros.size() + equals.nans.size()) * sizeof(K);
      const std::uint64_t least = least_bytes(parts, n, layout);
      if (extra > limit || (least != 0 && least > limit - extra))
        throw config_error{
            "host_memory_limit: a stable sort in NumPy's float order keeps its " +
            std::to_string(equals.zeros.size() + equals.nans.size()) +
            " zeros and NaNs aside (" + format_bytes(extra) + "); with the lean path's least, " +
            format_bytes(least) + ", it needs " + format_bytes(least + extra) + " (" +
            std::to_string(least + extra) + " bytes), more than the limit of " +
            format_bytes(limit)};
    }
    const plan p = plan_job(parts, n, layout, limit - extra);
    const lean_stats stats = run_arrays(parts, a, layout, p, ctx, file ? &*file : nullptr);
    auto* const out = static_cast<K*>(a.dst_keys);
    if (!equals.zeros.empty())
      host_write(out + equals.below_zero, equals.zeros.data(), equals.zeros.size() * sizeof(K));
    if (!equals.nans.empty())
      host_write(out + (n - equals.nans.size()), equals.nans.data(),
                 equals.nans.size() * sizeof(K));
    return report_of(parts, stats, n, n * layout.bytes(), limit, extra, start, ctx);
  });
}

std::string argsort_refusal(const argsort_job& job)
{
  if (job.keys_out != nullptr) return {};
  return "an argsort within a host memory limit sorts the keys beside their positions and "
         "needs keys_out (the sorted keys' array) to do it in; without one it needs a copy of "
         "the keys too";
}

sort_report run_argsort(const engine_parts& parts, const argsort_job& job,
                        const sort_options& options, std::uint64_t limit)
{
  const auto start = std::chrono::steady_clock::now();
  const std::uint64_t n = job.keys.count;
  if (const std::string why = argsort_refusal(job); !why.empty())
    throw config_error{"host_memory_limit: " + why};
  element_layout layout = layout_of(job.keys.type, job.index_bytes, options);
  const bool canonical = canonical_of(job.keys.type, options).numpy_floats();
  layout.canonical = canonical;
  layout.stable = true;
  const plan p = plan_job(parts, n, layout, limit);
  // The keys into keys_out, the positions into indices_out: then an in-place stable sort of
  // pairs is the argsort.
  copy_array(job.keys_out, job.keys.data, n * layout.key_bytes);
  visit_layout(8, job.index_bytes, [&]<typename, typename I>() {
    if constexpr (!std::is_same_v<I, no_value>)
      produce_into(static_cast<I*>(job.indices_out), n,
                   [](I* out, std::uint64_t first, std::uint64_t count) {
                     std::iota(out, out + count, static_cast<I>(first));
                   });
  });
  const job_arrays a{.src_keys = job.keys_out,
                     .src_values = job.indices_out,
                     .dst_keys = job.keys_out,
                     .dst_values = job.indices_out,
                     .n = n};
  job_context ctx{options, layout.bytes()};
  const lean_stats stats = run_arrays(parts, a, layout, p, ctx, nullptr);
  if (canonical)
    restore_canonical_keys(job.keys_out, job.indices_out, job.index_bytes, n, job.keys.type,
                           options, job.keys.data);
  return report_of(parts, stats, n, n * layout.key_bytes, limit, 0, start, ctx);
}

}  // namespace gpusort::detail::lean
