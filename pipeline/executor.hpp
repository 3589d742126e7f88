// The executor: runs a sort job on a set of devices, in core or through the two DSPS rounds.
#pragma once

#include "core/plan/chunk_plan.hpp"
#include "pipeline/device.hpp"

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

/// Sorts `arrays` on `devices` by `plan` (in core when plan.d == 1).
execution_stats execute(const job_arrays& arrays, const element_layout& layout,
                        const chunk_plan& plan, const std::vector<device*>& devices,
                        job_context& ctx);

}  // namespace gpusort::detail
