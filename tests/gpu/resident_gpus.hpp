// GPUs for tests of the resident (in-core) sort, shared by the executor tests and the GPU fault
// sweep.
#pragma once

#include "gpu_test_support.hpp"
#include "pipeline/cuda/cuda_device.hpp"

#include <cstddef>
#include <memory>
#include <vector>

namespace gpusort::test {

/// GPUs whose resident sort works in small pieces and ranges, so that modest sizes exercise the
/// merges of many runs (odd counts among them), ranges that cut runs and (with two GPUs) parts
/// fetched from the other GPU.
inline std::vector<std::unique_ptr<detail::cuda_device>> small_piece_gpus(std::size_t count)
{
  std::vector<std::unique_ptr<detail::cuda_device>> gpus;
  for (std::size_t i = 0; i < count; ++i) {
    detail::cuda_device_options o;
    o.id = probed_gpus().gpus[i].id;
    o.resident.min_piece_elements = 1000;
    o.resident.max_pieces = 7;
    o.resident.min_range_elements = 700;
    o.resident.max_ranges = 5;
    gpus.push_back(std::make_unique<detail::cuda_device>(o));
  }
  return gpus;
}

}  // namespace gpusort::test
