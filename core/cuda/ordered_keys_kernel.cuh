// Ordered-bits transforms on the device, the kernel layer (CUB's "agent" + kernel). Only for
// translation units compiled by nvcc; host code calls ordered_keys.cuh.
#pragma once

#include "core/keys.hpp"

#include <gpusort/types.hpp>

#include <cstdint>

namespace gpusort::cuda::detail {

/// 16 bytes of keys, so that one load or store instruction moves 4 (32-bit) or 2 (64-bit) keys.
inline constexpr std::uint64_t vector_bytes = 16;

template <typename Bits>
struct alignas(vector_bytes) key_vector {
  static constexpr int size = static_cast<int>(vector_bytes / sizeof(Bits));
  Bits lanes[size];
};

/// The element operation, with dtype and order fixed at compile time so that each kernel
/// instance reduces to one or two bit operations per key.
template <typename Bits, dtype Type, order Dir, bool Forward>
struct ordered_op {
  __device__ __forceinline__ Bits operator()(Bits bits) const
  {
    if constexpr (Forward) {
      return gpusort::detail::to_ordered<Bits>(bits, Type, Dir);
    } else {
      return gpusort::detail::from_ordered<Bits>(bits, Type, Dir);
    }
  }
};

/// The element operation of an order known only at run time (NumPy's float order).
template <typename Bits>
struct map_op {
  gpusort::detail::key_map<Bits> map;
  __device__ __forceinline__ Bits operator()(Bits bits) const { return map(bits); }
};

/// Where the vectorized part of an array lies: keys [0, head) precede the first 16-byte
/// boundary, [head, tail_begin) are `vectors` whole vectors, [tail_begin, n) is the rest. A
/// source and destination 16-byte aligned differently have no vectors: head == n.
struct transform_layout {
  std::uint64_t n{};
  std::uint64_t head{};
  std::uint64_t vectors{};
  std::uint64_t tail_begin{};
};

/// Grid-stride over the vectors (64-bit indices throughout: arrays may exceed 2^32 keys); the
/// scalar keys at both ends (fewer than 2 * key_vector::size when `src` and `dst` share their
/// alignment, every key when they do not) are strided over the grid too. Reads `src` and writes
/// `dst`: the same array in place, or two that do not overlap, when the source must stay
/// readable (a stage that may run again).
template <typename Bits, typename Op>
__global__ void transform_kernel(const Bits* src, Bits* dst, transform_layout layout,
                                 std::uint32_t items, Op op)
{
  using vector_t = key_vector<Bits>;
  const auto* const in = reinterpret_cast<const vector_t*>(src + layout.head);
  auto* const out = reinterpret_cast<vector_t*>(dst + layout.head);
  const std::uint64_t block_threads = blockDim.x;
  const std::uint64_t tile = block_threads * items;
  const std::uint64_t grid_stride = tile * gridDim.x;

  for (std::uint64_t base = blockIdx.x * tile; base < layout.vectors; base += grid_stride) {
#pragma unroll 4
    for (std::uint32_t item = 0; item < items; ++item) {
      const std::uint64_t v = base + item * block_threads + threadIdx.x;
      if (v < layout.vectors) {
        vector_t data = in[v];
#pragma unroll
        for (int lane = 0; lane < vector_t::size; ++lane) data.lanes[lane] = op(data.lanes[lane]);
        out[v] = data;
      }
    }
  }

  const std::uint64_t scalars = layout.head + (layout.n - layout.tail_begin);
  const std::uint64_t grid_threads = block_threads * gridDim.x;
  for (std::uint64_t s = std::uint64_t{blockIdx.x} * block_threads + threadIdx.x; s < scalars;
       s += grid_threads) {
    const std::uint64_t i = s < layout.head ? s : layout.tail_begin + (s - layout.head);
    dst[i] = op(src[i]);
  }
}

}  // namespace gpusort::cuda::detail
