// The bit arithmetic of the GPU codec's agents, apart from the threads that run it: one packed
// 64-bit word of a block, and one delta read back. Plain C++ where nvcc does not compile it, so
// that the host tests (tests/core/run_codec_test.cpp) check it against the host reference codec
// on machines without a GPU; the agents (agents.cuh) call it per thread.
#pragma once

#include "core/run_codec.hpp"

#include <cstdint>

namespace gpusort::cuda::detail::codec {

/// Word k of a block of `count` keys whose deltas are `width` bits (k below the block's words,
/// so width > 0 and count >= 2): the deltas j whose bits [j w, j w + w) meet bits [64 k,
/// 64 k + 64), the first of them possibly begun in word k - 1. At most 64 / w + 1 deltas.
template <typename K>
GPUSORT_HD inline std::uint64_t pack_word(const K* keys, std::uint32_t count,
                                                std::uint32_t width, std::uint32_t k)
{
  const std::uint32_t low = k * 64;
  const std::uint32_t last = (low + 63) / width;
  const std::uint32_t end = last < count - 2 ? last : count - 2;  // the block's last delta
  std::uint64_t word = 0;
  for (std::uint32_t j = low / width; j <= end; ++j) {
    const auto delta = static_cast<std::uint64_t>(static_cast<K>(keys[j + 1] - keys[j]));
    const auto at = static_cast<std::int32_t>(j * width - low);  // negative: begun before
    word |= at >= 0 ? delta << at : delta >> -at;
  }
  return word;
}

/// Delta j (between keys j and j + 1) of a block whose deltas are `width` bits (1..64).
template <typename K>
GPUSORT_HD inline K unpack_delta(const std::uint64_t* words, std::uint32_t width,
                                       std::uint32_t j)
{
  const std::uint32_t bit = j * width;
  const std::uint32_t shift = bit % 64;
  std::uint64_t v = words[bit / 64] >> shift;
  if (shift + width > 64) v |= words[bit / 64 + 1] << (64 - shift);
  return static_cast<K>(width >= 64 ? v : v & ((std::uint64_t{1} << width) - 1));
}

}  // namespace gpusort::cuda::detail::codec
