// The direct CPU path: with no device budget there is nothing to plan, and the parallel CPU
// sort runs on the user's array itself (after one copy when the output is separate).
#pragma once

#include "pipeline/device.hpp"
#include "pipeline/executor.hpp"

namespace gpusort::detail {

execution_stats sort_direct(const job_arrays& arrays, const element_layout& layout,
                            unsigned threads, job_context& ctx);

}  // namespace gpusort::detail
