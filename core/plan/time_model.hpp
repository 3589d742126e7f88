// The time model (issues 40 and 44; docs/design.md "The time model"): the seconds a job takes
// on a machine_model, phase by phase, from how the engine runs it: the three-stream ring of
// each round (pipeline fill and drain, the slowest stage per chunk), the host's planning
// between the rounds, round 2's slices, the resident path's copies, sort and merged ranges, and the
// host memory every GPU's copies share. No CUDA: the engine's plan() and the benchmarks use it.
#pragma once

#include <gpusort/gpusort.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace gpusort::detail {

enum class model_path : std::uint8_t { direct, in_core, resident, two_rounds, lean };

/// The shape of a job as the planner decided it.
struct model_job {
  std::uint64_t n{};
  std::uint32_t key_bytes{8};
  std::uint32_t value_bytes{};  ///< of what the devices sort (positions for a stable sort)
  model_path path{model_path::two_rounds};
  std::uint64_t d{1};           ///< chunks
  std::uint64_t g{1};           ///< bins per chunk
  std::uint64_t candidates{};   ///< d * s
  std::uint32_t devices{1};     ///< devices the job takes (resident: GPUs it fits on)
  /// Round-1 chunks a GPU's ring slot sorts side by side (its sort lanes: the ring, sized for
  /// round 2's bound, holds that many), 1: one at a time.
  std::uint32_t lanes{1};
  /// A stable sort of pairs: the devices sort (key, position) and the host gathers the values
  /// of `stable_value_bytes` after.
  std::uint32_t stable_value_bytes{};
  /// > 0: the scattered rounds with this many buckets (candidates: the sample's keys).
  std::uint64_t buckets{};
  [[nodiscard]] std::uint64_t element_bytes() const noexcept { return key_bytes + value_bytes; }
};

struct model_tuning {
  /// Round 2's slices below this average go through the gather kernel over mapped memory, at
  /// least this through the copy engines (cuda_device_options::gather_copy_min_bytes).
  static constexpr double kernel_gather_below_bytes = 256.0 * 1024;
  /// A GPU below this share is not worth its own (resident.hpp min_resident_share_bytes).
  static constexpr double min_resident_share_bytes = 64.0 * 1024 * 1024;
  /// A fit: the share of the links' (or the host's) rate a round's copies get chunk after
  /// chunk. 0.92 was fitted to the engine of 11-29 (h200x2-20261129-s7 calls 1 and 3,
  /// h200-20261129-chunks call 4: 0.87-0.95 of the time predicted without it); the engine of
  /// 11-30 moves its rounds faster (the resident sort's buffers aside, the ring is the same,
  /// the host fed it faster), and with 0.92 the model over-predicted its out-of-core jobs by
  /// 1.02-1.14x in the four `gpu_bench --model` runs of h200x2-20261130-s12 (mean 1.05);
  /// 0.96 puts every one of them within 0.92-1.10. What takes the rest is not measured apart:
  /// the slots' hand-offs between the streams, the sort's own traffic beside the copies.
  static constexpr double ring_link_efficiency = 0.96;
  /// A fit: the share of a round-1 chunk's fixed cost (machine_model::chunk_seconds) left
  /// where two or more chunks sort side by side on a GPU's lanes. One H200 at 8 GiB's smallest
  /// budget (d = 4096, two chunks a slot): round 1 took 0.301-0.312 s with lanes against
  /// 0.408-0.422 s without, 74 us a chunk of which 14 us its bytes at sort_rate
  /// (h200x2-20261130-s14/call3). Only two lanes were measured; more are taken as no better.
  static constexpr double lane_chunk_share = 0.6;
};

struct model_prediction {
  double seconds{};
  std::vector<plan_phase> phases;
};

/// The predicted seconds of `job` on `machine`, with its phases.
model_prediction predict(const machine_model& machine, const model_job& job);

/// GPUs a resident job of n elements of `element_bytes` takes out of `gpus`: as
/// resident_gpus does, one per 64 MiB share at most (without asking any GPU's memory).
std::uint32_t resident_share_gpus(std::uint64_t n, std::uint64_t element_bytes,
                                  std::uint32_t gpus) noexcept;

}  // namespace gpusort::detail
