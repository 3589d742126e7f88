// Tuning of the run codec's kernels (core/cuda/run_codec.cuh). One thread block handles one
// codec block (core/run_codec.hpp's block_keys keys) at a time and strides over the rest, so
// each agent's shared memory is one block's keys: 8 KiB (u32) or 16 KiB (u64).
#pragma once

#include "core/run_codec.hpp"

#include <cstdint>

namespace gpusort::cuda::detail::codec {

using gpusort::detail::codec::block_keys;

struct policy {
  /// Threads of every codec kernel: block_keys / threads keys a thread in the decoder's scan.
  static constexpr int threads = 256;
  static constexpr int items = static_cast<int>(block_keys) / threads;
  /// Grid cap: thread blocks stride over codec blocks beyond it (132 SMs of an H100 x 8
  /// resident blocks of 256 threads, twice over).
  static constexpr std::uint64_t max_grid = 132 * 8 * 2;
};
static_assert(policy::items * policy::threads == static_cast<int>(block_keys));

}  // namespace gpusort::cuda::detail::codec
