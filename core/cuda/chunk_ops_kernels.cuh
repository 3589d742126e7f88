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

/// blockIdx.y picks a slice and then every gridDim.y-th after it; blocks along x stride
/// through it. A grid of fewer rows than slices keeps the gather to a share of the SMs: one
/// block for each of round 2's d short slices (2643 of 1.2 KB at d = 2643) filled the GPU and
/// stalled the chunk sort running beside it (issue 44). Four loads in flight a thread where a
/// slice is long: mapped host memory answers in microseconds.
template <typename T>
__global__ void gather_kernel(const gather_slice* __restrict__ table, std::uint32_t slices,
                              T* __restrict__ out)
{
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  for (std::uint32_t y = blockIdx.y; y < slices; y += gridDim.y) {
    const gather_slice s = table[y];
    const T* __restrict__ src = static_cast<const T*>(s.src);
    T* __restrict__ dst = out + s.dst_offset;
    std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < s.length; i += 4 * stride) {
      const T a = src[i], b = src[i + stride], c = src[i + 2 * stride], e = src[i + 3 * stride];
      dst[i] = a;
      dst[i + stride] = b;
      dst[i + 2 * stride] = c;
      dst[i + 3 * stride] = e;
    }
    for (; i < s.length; i += stride) dst[i] = src[i];
  }
}

/// Lanes of a warp, and the loads each lane of gather_warps_kernel keeps in flight.
inline constexpr unsigned gather_warp_lanes = 32;
inline constexpr unsigned gather_warp_unroll = 8;

/// The gather of a table of short slices (gather_tuning::warp_slice_elements): a warp a slice,
/// walking the table a grid's warps apart, each lane loading up to eight elements before it
/// stores any, so that a few dozen blocks keep the link's reads of mapped memory in flight.
template <typename T>
__global__ void gather_warps_kernel(const gather_slice* __restrict__ table, std::uint32_t slices,
                                    T* __restrict__ out)
{
  constexpr unsigned lanes = gather_warp_lanes;
  constexpr unsigned unroll = gather_warp_unroll;
  const unsigned lane = threadIdx.x % lanes;
  const std::uint64_t warps = std::uint64_t{gridDim.x} * blockDim.x / lanes;
  for (std::uint64_t y = (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / lanes;
       y < slices; y += warps) {
    const gather_slice s = table[y];
    const T* __restrict__ src = static_cast<const T*>(s.src);
    T* __restrict__ dst = out + s.dst_offset;
    for (std::uint64_t i = lane; i < s.length; i += unroll * lanes) {
      T v[unroll];
#pragma unroll
      for (unsigned u = 0; u < unroll; ++u)
        if (i + u * lanes < s.length) v[u] = src[i + u * lanes];
#pragma unroll
      for (unsigned u = 0; u < unroll; ++u)
        if (i + u * lanes < s.length) dst[i + u * lanes] = v[u];
    }
  }
}

/// scatter_lines: a warp a slice; lane l of a window stores bytes [w + 16 l, w + 16 l + 16)
/// of the slice's destination, whole where they lie within it, else word by word (elements
/// are 4-byte aligned). Sources are read a word at a time: device memory, aligned to 4 only.
__global__ void scatter_lines_kernel(const gather_slice* __restrict__ table, std::uint32_t slices,
                                     char* __restrict__ out, unsigned element_bytes)
{
  constexpr unsigned lanes = gather_warp_lanes;
  constexpr std::uintptr_t line = 128, piece = 16;
  const unsigned lane = threadIdx.x % lanes;
  const std::uint64_t warps = std::uint64_t{gridDim.x} * blockDim.x / lanes;
  for (std::uint64_t y = (std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x) / lanes;
       y < slices; y += warps) {
    const gather_slice s = table[y];
    const auto* src = static_cast<const char*>(s.src);
    const std::uintptr_t d0 = reinterpret_cast<std::uintptr_t>(out) + s.dst_offset * element_bytes;
    const std::uintptr_t d1 = d0 + s.length * element_bytes;
    const auto word = [&](std::uintptr_t at) {
      return *reinterpret_cast<const std::uint32_t*>(src + (at - d0));
    };
    for (std::uintptr_t w = d0 & ~(line - 1); w < d1; w += piece * lanes) {
      const std::uintptr_t p = w + piece * lane;
      if (p + piece <= d0 || p >= d1) continue;
      if (p >= d0 && p + piece <= d1) {
        *reinterpret_cast<uint4*>(p) = make_uint4(word(p), word(p + 4), word(p + 8), word(p + 12));
      } else {
        for (std::uintptr_t q = p < d0 ? d0 : p; q < p + piece && q < d1; q += 4)
          *reinterpret_cast<std::uint32_t*>(q) = word(q);
      }
    }
  }
}

}  // namespace gpusort::cuda::detail
