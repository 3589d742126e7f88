// Thin kernels of the run codec: grid-stride loops of the agents (agents.cuh) over a run's codec
// blocks. The dispatch is in core/cuda/run_codec.cu. Only for translation units compiled by nvcc.
#pragma once

#include "core/cuda/run_codec/agents.cuh"

#include <cstdint>

namespace gpusort::cuda::detail::codec {

using gpusort::detail::codec::dealt_block;
using gpusort::detail::codec::dealt_block_at;
using gpusort::detail::codec::dealt_blocks;
using gpusort::detail::codec::encoded_slice;

/// Pass (a) of encoding: each block's width and stream bytes, for the m keys dealt into d runs
/// (a lone run: d = 1); sizes[blocks] = 0, so that the exclusive scan over blocks + 1 sizes
/// ends with the total.
template <typename K>
__global__ void __launch_bounds__(policy::threads)
    width_kernel(const K* __restrict__ keys, std::uint64_t m, std::uint64_t d,
                 std::uint8_t* __restrict__ widths, std::uint32_t* __restrict__ sizes)
{
  __shared__ typename width_agent<K, policy::threads>::storage storage;
  const std::uint64_t blocks = dealt_blocks(m, d);
  if (blockIdx.x == 0 && threadIdx.x == 0) sizes[blocks] = 0;
  for (std::uint64_t g = blockIdx.x; g < blocks; g += gridDim.x) {
    const dealt_block b = dealt_block_at(m, d, g);
    const std::uint32_t width = width_agent<K, policy::threads>{storage}.width(keys + b.first,
                                                                               b.keys);
    if (threadIdx.x == 0) {
      widths[g] = static_cast<std::uint8_t>(width);
      sizes[g] = block_bytes(width, b.keys);
    }
    __syncthreads();  // the reduction's storage is the next block's
  }
}

/// Pass (c): each block's index entry and words, at the offset the scan gave it. Words at or
/// past `word_room` (the stream's capacity) are not written.
template <typename K>
__global__ void __launch_bounds__(policy::threads)
    pack_kernel(const K* __restrict__ keys, std::uint64_t m, std::uint64_t d,
                const std::uint8_t* __restrict__ widths, const std::uint64_t* __restrict__ offsets,
                run_block* __restrict__ index, std::uint64_t* __restrict__ words,
                std::uint64_t word_room)
{
  __shared__ typename pack_agent<K, policy::threads>::storage storage;
  const std::uint64_t blocks = dealt_blocks(m, d);
  for (std::uint64_t g = blockIdx.x; g < blocks; g += gridDim.x) {
    const dealt_block b = dealt_block_at(m, d, g);
    const std::uint64_t offset = offsets[g];
    const std::uint32_t width = widths[g];
    if (threadIdx.x == 0) index[g] = run_block{keys[b.first], offset, width, 0};
    const std::uint64_t at = offset / 8;
    pack_agent<K, policy::threads>{storage}.pack(keys + b.first, b.keys, width, words + at,
                                                 at < word_room ? word_room - at : 0);
  }
}

/// Decodes slices: blockIdx.y picks the slice (of `table`, or `single` when table is null),
/// thread blocks along x stride over the codec blocks it touches.
template <typename K>
__global__ void __launch_bounds__(policy::threads)
    decode_kernel(const encoded_slice* __restrict__ table, encoded_slice single,
                  K* __restrict__ out)
{
  __shared__ typename decode_agent<K, policy::threads>::storage storage;
  const encoded_slice s = table != nullptr ? table[blockIdx.y] : single;
  if (s.first >= s.last) return;
  const std::uint64_t b0 = s.first / block_keys;
  const std::uint64_t blocks = (s.last - 1) / block_keys + 1 - b0;
  const std::uint64_t base = s.index[0].byte_offset;
  for (std::uint64_t j = blockIdx.x; j < blocks; j += gridDim.x) {
    const run_block entry = s.index[j];
    const std::uint64_t start = (b0 + j) * block_keys;  // the block's first key in the run
    const std::uint64_t begin = s.first > start ? s.first : start;
    const std::uint64_t end = s.last < start + block_keys ? s.last : start + block_keys;
    decode_agent<K, policy::threads>{storage}.decode(
        entry, reinterpret_cast<const std::uint64_t*>(s.stream + (entry.byte_offset - base)),
        static_cast<std::uint32_t>(begin - start), static_cast<std::uint32_t>(end - start),
        out + s.dst_offset + (begin - s.first));
  }
}

}  // namespace gpusort::cuda::detail::codec
