// Ordered-bits transforms on the device, the host-side entry (CUB's "device" layer). Includable
// from plain C++: it declares host functions only; the kernel is in ordered_keys_kernel.cuh.
//
// to_ordered() maps the raw keys of type `t` to the unsigned ordered bits of core/keys.hpp,
// from_ordered() maps them back, so that device sorts work on unsigned integers and a
// descending sort is an ascending sort of complemented bits. In place, or out of place from a
// source left as it was, so that a stage that fails after it can run again.
#pragma once

#include "core/keys.hpp"

#include <gpusort/types.hpp>

#include <cuda_runtime_api.h>

#include <cstdint>

namespace gpusort::cuda {

/// Launch shape of the transform kernels. Each thread handles `items_per_thread` 16-byte
/// vectors per tile; the grid is capped at `max_blocks` and strides over larger arrays, so any
/// 64-bit count works with a bounded grid.
struct transform_tuning {
  std::uint32_t threads_per_block{256};
  std::uint32_t items_per_thread{4};
  std::uint32_t max_blocks{4096};
};

/// Transforms `n` keys of type `t` at `d_keys` (device-accessible memory, aligned to the key
/// size) into ordered bits for `dir`, in place, asynchronously on `stream`. Allocates nothing.
/// Launches nothing for n == 0 or when the ordered bits equal the raw bits.
/// Throws gpusort::invalid_argument for a null or misaligned pointer or a bad tuning, and
/// gpusort::cuda_error when the launch fails.
void to_ordered(void* d_keys, std::uint64_t n, dtype t, order dir, cudaStream_t stream,
                const transform_tuning& tuning = {});

/// The inverse of to_ordered(), with the same contract.
void from_ordered(void* d_keys, std::uint64_t n, dtype t, order dir, cudaStream_t stream,
                  const transform_tuning& tuning = {});

/// The same for every key order (core/keys.hpp key_order: NumPy's float order, canonical codes
/// for stable sorts). Orders other than totalOrder run a kernel with the map's few integer
/// operations as run-time constants.
void to_ordered(void* d_keys, std::uint64_t n, const gpusort::detail::key_order& k,
                cudaStream_t stream, const transform_tuning& tuning = {});
void from_ordered(void* d_keys, std::uint64_t n, const gpusort::detail::key_order& k,
                  cudaStream_t stream, const transform_tuning& tuning = {});

/// Out of place, as core/cpu_sort.hpp's to_ordered_bits: reads `n` keys at `d_src` and writes
/// their transform to `d_dst`, with the same contract. Both are aligned to the key size and are
/// either the same array (in place, as above) or do not overlap; `d_src` is never written
/// unless it is `d_dst`. Where the ordered bits equal the raw bits the keys are copied as they
/// are (nothing to do in place). Throws gpusort::invalid_argument for a null or misaligned
/// pointer, arrays that partly overlap or a bad tuning, and gpusort::cuda_error when the launch
/// or the copy fails.
void to_ordered(const void* d_src, void* d_dst, std::uint64_t n,
                const gpusort::detail::key_order& k, cudaStream_t stream,
                const transform_tuning& tuning = {});
void from_ordered(const void* d_src, void* d_dst, std::uint64_t n,
                  const gpusort::detail::key_order& k, cudaStream_t stream,
                  const transform_tuning& tuning = {});

}  // namespace gpusort::cuda
