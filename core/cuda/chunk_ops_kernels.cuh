// Thin kernels of the chunk steps; the dispatch is in chunk_ops.cu.
#pragma once

#include "core/cuda/chunk_ops.cuh"

#include <cstdint>

namespace gpusort::cuda::detail {

/// Grid-stride dealing: reads are coalesced, writes go to d streams of consecutive addresses
/// (element x lands at bin_offset(x mod d) + x / d).
template <typename K, typename V>
__global__ void deal_kernel(const K* __restrict__ keys, const V* __restrict__ values,
                            std::uint64_t m, std::uint64_t d, K* __restrict__ out_keys,
                            V* __restrict__ out_values)
{
  const std::uint64_t base = m / d;
  const std::uint64_t extra = m % d;
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  for (std::uint64_t x = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; x < m;
       x += stride) {
    const std::uint64_t j = x % d;
    const std::uint64_t at = j * base + (j < extra ? j : extra) + x / d;
    out_keys[at] = keys[x];
    if (values != nullptr) out_values[at] = values[x];
  }
}

/// Grid-stride positions: out[i] = first + i.
template <typename W>
__global__ void positions_kernel(W* __restrict__ out, std::uint64_t n, std::uint64_t first)
{
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = static_cast<W>(first + i);
}

/// blockIdx.y picks the slice; blocks along x stride through it.
template <typename T>
__global__ void gather_kernel(const gather_slice* __restrict__ table, T* __restrict__ out)
{
  const gather_slice s = table[blockIdx.y];
  const T* __restrict__ src = static_cast<const T*>(s.src);
  T* __restrict__ dst = out + s.dst_offset;
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < s.length;
       i += stride)
    dst[i] = src[i];
}

}  // namespace gpusort::cuda::detail
