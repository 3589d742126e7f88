// The executor: runs a sort job on a set of devices, in core or through the two DSPS rounds.
#pragma once

#include "core/plan/chunk_plan.hpp"
#include "pipeline/device.hpp"
#include "pipeline/host_memory.hpp"

#include <gpusort/gpusort.hpp>

#include <cstdint>
#include <optional>
#include <vector>

namespace gpusort::detail {

/// The arrays of one job, validated: in place when dst == src.
struct job_arrays {
  void* src_keys{};
  void* src_values{};
  void* dst_keys{};
  void* dst_values{};
  std::uint64_t n{};
  [[nodiscard]] bool in_place() const noexcept { return dst_keys == src_keys; }
};

struct execution_stats {
  std::uint64_t chunks{1};
  int rounds{};
  std::uint64_t compensated_chunks{};
  /// Candidates the splitters came from (d * s): the usual sample's where its final chunks
  /// kept the bound, else the bound's (cut_runs, core/plan/slicing.hpp).
  std::uint64_t splitter_candidates{};
  /// Runs of round 2's first sample read while round 1 ran (pipeline/sample_behind.hpp), of d.
  std::uint64_t sample_runs_behind{};
  /// A compressed job's round-1 keys (issue 21; 0 for others): their bytes raw (n * key_bytes),
  /// what round 1 stored for them (streams and index entries of the chunks it encoded, the keys
  /// of those it left raw), and how many chunks it encoded.
  std::uint64_t round1_key_bytes{};
  std::uint64_t round1_stored_bytes{};
  std::uint64_t encoded_chunks{};
  /// Buckets of a job that took the scattered rounds, and of them those of a single key (both
  /// 0: it took DSPS's).
  std::uint64_t scatter_buckets{};
  std::uint64_t equal_buckets{};
};

/// Runs one round: every device pulls tasks until the queue is empty. The first failure stops
/// the other devices at their next task and is rethrown here. `reserve`: see task_queue;
/// `hooks`: what the caller learns of and adds to the tasks as the devices take them.
void run_round(int round, int rounds, std::vector<chunk_task> tasks,
               const element_layout& layout, const std::vector<device*>& devices,
               job_context& ctx, std::uint64_t reserve = 0,
               task_hooks hooks = {});

/// The capacity every device offers for `layout`: the smallest of them.
device_capacity common_capacity(const std::vector<device*>& devices,
                                const element_layout& layout);

/// Whether a job of `plan` compresses its runs under `mode`: only one of two rounds has runs to
/// compress; `automatic` encodes and lets each chunk fall back to raw (raw_above_for).
constexpr bool compresses(run_compression mode, const chunk_plan& plan) noexcept
{
  return mode != run_compression::off && !plan.in_core();
}

/// encode_target::raw_above for a chunk of `count` keys: `on` never stores raw (a stream never
/// exceeds the raw keys); `automatic` stores raw a chunk whose stream would keep more than
/// auto_compress_percent of its bytes. Why so few: on the H100 host (gpu_bench --compress, 8 GiB
/// at budget 1/8, bench/results/h100-20261126-467ce56-compress-8Gi.json) compressed jobs ran
/// slower whenever the runs kept 16% of their bytes or more (u32 uniform at 31%: 0.436 s off,
/// 0.565 s on; u64 uniform at 67%: 0.428 / 0.620 s; u32 sorted at 16%: 0.417 / 0.859 s): round 1
/// is bound by its uncompressed copy-in, and round 2's decoding from mapped memory slowed its
/// copy-out (50 -> 34 GB/s) more than the smaller reads saved. Only runs of few distinct keys
/// paid (u64 fewunique at 0.5%: 0.397 / 0.366 s).
inline constexpr std::uint64_t auto_compress_percent = 10;
constexpr std::uint64_t raw_above_for(run_compression mode, std::uint64_t count,
                                      const element_layout& layout) noexcept
{
  const std::uint64_t raw = count * layout.key_bytes;
  constexpr std::uint64_t p = auto_compress_percent;
  return mode == run_compression::on ? raw : raw / 100 * p + raw % 100 * p / 100;
}

/// The round-1 output of n elements: keys, then values from a 256-byte boundary so that devices
/// read them with aligned loads, then (a compressed job's) the index entries of every chunk's
/// encoded blocks, from a 256-byte boundary: chunk i's at round1_index_entry(plan, i), where
/// round 2 and a GPU (through the pinned buffer) read them.
constexpr std::uint64_t round1_values_offset(std::uint64_t n, const element_layout& layout)
{
  return (n * layout.key_bytes + 255) / 256 * 256;
}
constexpr std::uint64_t round1_index_offset(std::uint64_t n, const element_layout& layout)
{
  return (round1_values_offset(n, layout) + n * layout.value_bytes + 255) / 256 * 256;
}
/// Index entries before chunk i's (i = plan.d: all of them): the blocks of the chunks before it.
std::uint64_t round1_index_entry(const chunk_plan& plan, std::uint64_t i) noexcept;
/// Bytes of the round-1 output of a job of `plan`, compressed or not.
std::uint64_t round1_bytes(const chunk_plan& plan, const element_layout& layout, bool compressed);
/// Elements each device keeps buffers for across both rounds: a chunk or a final chunk's
/// bound, whichever is larger, so that round 2 reuses round 1's ring. Not the capacity: a job
/// cut small (chunk_bytes, a budget) then reserved the whole GPU, which left no room for the
/// buffers of jobs that fit beside the ring, and each kind freed the other (a compensated
/// final chunk above the bound grows the ring; it is rare). A GPU's slot that holds several
/// round-1 chunks sorts them side by side (round_state.hpp, sort lanes).
std::uint64_t ring_reserve(const chunk_plan& plan) noexcept;
/// Host memory a job of `plan` takes between the rounds: the candidates and their merge, the
/// cut of every run and the slices of every final chunk and its task, d * g * d of each (issue
/// 44: 260 MB at d = 3300, where a 2^20-candidate plan at d = 32 took under 30 MB).
std::uint64_t planning_bytes(const chunk_plan& plan, const element_layout& layout) noexcept;

/// plan.scatter_elements for a job of `plan` on GPUs (`gpus`) or the host device: the scattered
/// rounds' round-1 buffer where the job takes them (GPUSORT_SCATTER: `auto`, jobs of at least
/// scatter_tuning::min_chunks chunks on GPUs; `on`, every out-of-core job; `off`, none), else 0.
std::uint64_t scatter_elements_for(const chunk_plan& plan, bool gpus);

/// While one lives on a thread, scatter_elements_for gives 0 there: a job whose fast path fits
/// the host memory limit only without the scattered rounds' regions (about 19% more than
/// DSPS's round-1 buffer) runs DSPS rather than the lean path (engine.cpp). The engine plans
/// and runs a job on its caller's thread, so the choice holds for the whole job.
class dsps_only_scope {
 public:
  dsps_only_scope() noexcept;
  ~dsps_only_scope();
  dsps_only_scope(const dsps_only_scope&) = delete;
  dsps_only_scope& operator=(const dsps_only_scope&) = delete;
  [[nodiscard]] static bool active() noexcept;

 private:
  bool was_;
};

/// Sorts `arrays` on `devices` by `plan` (in core when plan.d == 1), compressing round 1's runs
/// as `compress_runs` says (compresses()). The round-1 output goes to `round1_scratch` when it
/// holds round1_bytes (GPU engines keep it pinned and reuse it across jobs), else to memory
/// allocated for this job.
execution_stats execute(const job_arrays& arrays, const element_layout& layout,
                        const chunk_plan& plan, const std::vector<device*>& devices,
                        job_context& ctx, const host_buffer* round1_scratch = nullptr,
                        run_compression compress_runs = run_compression::off);

}  // namespace gpusort::detail
