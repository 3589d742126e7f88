// Block-level agents of the run codec: each handles one codec block of core/run_codec.hpp's
// format with the whole thread block. The kernels (kernels.cuh) loop them over a run's blocks.
// Only for translation units compiled by nvcc.
#pragma once

#include "core/cuda/run_codec/tuning.cuh"
#include "core/cuda/run_codec/words.cuh"
#include "core/run_codec.hpp"

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include <cuda/functional>

#include <cstdint>

namespace gpusort::cuda::detail::codec {

using gpusort::detail::codec::block_bytes;
using gpusort::detail::codec::run_block;

__device__ __forceinline__ std::uint32_t width_of_device(std::uint64_t largest)
{
  return largest == 0 ? 0U
                      : static_cast<std::uint32_t>(64 - __clzll(static_cast<long long>(largest)));
}

/// The width of one block: the bits of its largest delta.
template <typename K, int Threads>
struct width_agent {
  using reduce = cub::BlockReduce<K, Threads>;
  using storage = typename reduce::TempStorage;

  storage& s;

  /// Valid in thread 0. `keys` is the block's first key in global memory.
  __device__ __forceinline__ std::uint32_t width(const K* __restrict__ keys, std::uint32_t count)
  {
    K largest = 0;
    // both loads coalesce; the neighbour's comes from L1 mostly
    for (std::uint32_t i = threadIdx.x + 1; i < count; i += Threads) {
      const K delta = static_cast<K>(keys[i] - keys[i - 1]);
      largest = delta > largest ? delta : largest;
    }
    const K block_largest = reduce{s}.Reduce(largest, ::cuda::maximum<>{});
    return width_of_device(block_largest);
  }
};

/// Packs one block: its keys into shared memory, then each thread builds whole 64-bit words
/// from the deltas that touch them, so no two threads write a word and no atomics are needed
/// (a word takes 64 / width + 1 deltas at most).
template <typename K, int Threads>
struct pack_agent {
  struct storage {
    K keys[block_keys];
  };

  storage& s;

  __device__ __forceinline__ void pack(const K* __restrict__ keys, std::uint32_t count,
                                       std::uint32_t width, std::uint64_t* __restrict__ words,
                                       std::uint64_t word_room)
  {
    const std::uint32_t word_count = block_bytes(width, count) / 8;
    if (word_count == 0) return;  // equal keys: the index entry is the whole block
    for (std::uint32_t i = threadIdx.x; i < count; i += Threads) s.keys[i] = keys[i];
    __syncthreads();
    for (std::uint32_t k = threadIdx.x; k < word_count && k < word_room; k += Threads)
      words[k] = pack_word(s.keys, count, width, k);
    __syncthreads();  // every word made before the next block's keys arrive
  }
};

/// Decodes keys [from, to) of one block: its words into shared memory, each thread the deltas of
/// items consecutive keys, a block-wide exclusive scan of the threads' sums, the keys back in
/// shared memory (over the words) and out with coalesced stores.
template <typename K, int Threads>
struct decode_agent {
  static constexpr int items = static_cast<int>(block_keys) / Threads;
  using scan = cub::BlockScan<K, Threads>;
  static constexpr std::uint32_t most_words = block_keys * sizeof(K) / 8;  // a block's most
  struct storage {
    union {
      std::uint64_t words[most_words];
      K keys[block_keys];
    } tile;
    typename scan::TempStorage scan;
  };

  storage& s;

  __device__ __forceinline__ void decode(const run_block& entry,
                                         const std::uint64_t* __restrict__ words,
                                         std::uint32_t from, std::uint32_t to, K* __restrict__ out)
  {
    const std::uint32_t width = entry.width;
    // the words the keys below `to` use (an index entry wider than the key cannot overrun)
    const std::uint32_t word_count = min(block_bytes(width, to) / 8, most_words);
    for (std::uint32_t i = threadIdx.x; i < word_count; i += Threads) s.tile.words[i] = words[i];
    __syncthreads();
    K deltas[items];
    K sum = 0;
#pragma unroll
    for (int k = 0; k < items; ++k) {
      const std::uint32_t p = threadIdx.x * items + k;  // key p adds delta p - 1
      deltas[k] = (width > 0 && p > 0 && p < to) ? unpack_delta<K>(s.tile.words, width, p - 1)
                                                  : K{0};
      sum = static_cast<K>(sum + deltas[k]);
    }
    K before = 0;
    scan{s.scan}.ExclusiveSum(sum, before);
    __syncthreads();  // every word read before the keys take their place
    auto key = static_cast<K>(entry.first_key + before);
#pragma unroll
    for (int k = 0; k < items; ++k) {
      key = static_cast<K>(key + deltas[k]);
      s.tile.keys[threadIdx.x * items + k] = key;
    }
    __syncthreads();
    for (std::uint32_t i = from + threadIdx.x; i < to; i += Threads)
      out[i - from] = s.tile.keys[i];
    __syncthreads();  // the tile is the next block's
  }
};

}  // namespace gpusort::cuda::detail::codec
