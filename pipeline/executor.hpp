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
};

/// The capacity every device offers for `layout`: the smallest of them.
device_capacity common_capacity(const std::vector<device*>& devices,
                                const element_layout& layout);

/// Bytes of the round-1 output for n elements: keys, then values from a 256-byte boundary so
/// that devices read them with aligned loads.
constexpr std::uint64_t round1_values_offset(std::uint64_t n, const element_layout& layout)
{
  return (n * layout.key_bytes + 255) / 256 * 256;
}
constexpr std::uint64_t round1_bytes(std::uint64_t n, const element_layout& layout)
{
  return round1_values_offset(n, layout) + n * layout.value_bytes;
}

/// Sorts `arrays` on `devices` by `plan` (in core when plan.d == 1). The round-1 output goes to
/// `round1_scratch` when given (at least n * layout.bytes() bytes: GPU engines keep it pinned
/// and reuse it across jobs), else to memory allocated for this job.
execution_stats execute(const job_arrays& arrays, const element_layout& layout,
                        const chunk_plan& plan, const std::vector<device*>& devices,
                        job_context& ctx, const host_buffer* round1_scratch = nullptr);

}  // namespace gpusort::detail
