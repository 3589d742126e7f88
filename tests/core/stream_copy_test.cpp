// stream_copy and parallel_stream_copy against the bytes they were given: every length around
// the streaming threshold, the 64-byte lines and the 1 MiB pieces, from and to every alignment
// within a line, and nothing written outside the destination.
#include "core/stream_copy.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace {

using gpusort::detail::parallel_stream_copy;
using gpusort::detail::stream_copy;
using gpusort::detail::stream_copy_min_bytes;

constexpr std::size_t guard = 64;
constexpr unsigned char fence_byte = 0xA5;

/// Source bytes that differ from their neighbours and from the fence.
std::vector<unsigned char> pattern(std::size_t bytes, std::size_t offset)
{
  std::vector<unsigned char> v(bytes + offset);
  std::uint64_t x = 0x9E3779B97F4A7C15ULL;
  for (auto& b : v) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    b = static_cast<unsigned char>(x);
  }
  return v;
}

template <typename Copy>
void check(Copy copy, std::size_t bytes, std::size_t src_offset, std::size_t dst_offset)
{
  const std::vector<unsigned char> src = pattern(bytes, src_offset);
  std::vector<unsigned char> dst(guard + dst_offset + bytes + guard, fence_byte);
  copy(dst.data() + guard + dst_offset, src.data() + src_offset, bytes);
  for (std::size_t i = 0; i < guard + dst_offset; ++i)
    ASSERT_EQ(dst[i], fence_byte) << "written before the destination, byte " << i;
  for (std::size_t i = 0; i < bytes; ++i)
    ASSERT_EQ(dst[guard + dst_offset + i], src[src_offset + i])
        << "byte " << i << " of " << bytes << ", offsets " << src_offset << "/" << dst_offset;
  for (std::size_t i = guard + dst_offset + bytes; i < dst.size(); ++i)
    ASSERT_EQ(dst[i], fence_byte) << "written after the destination, byte " << i;
}

TEST(StreamCopy, EveryLengthAroundTheThresholdAndTheLinesFromEveryAlignment)
{
  const std::size_t t = stream_copy_min_bytes;
  const std::vector<std::size_t> lengths{0,     1,     15,        16,        17,        63,
                                         64,    65,    127,       t - 1,     t,         t + 1,
                                         t + 63, t + 64, t + 65,  3 * t + 17, (1u << 20) + 5};
  for (const std::size_t n : lengths)
    for (const std::size_t s : {0u, 1u, 8u, 15u, 16u, 33u})
      for (const std::size_t d : {0u, 1u, 7u, 16u, 48u, 63u})
        ASSERT_NO_FATAL_FAILURE(check(stream_copy, n, s, d));
}

TEST(StreamCopy, ParallelCopiesAcrossItsMiBPiecesLandWhole)
{
  constexpr std::size_t mib = std::size_t{1} << 20;
  for (const std::size_t n : {mib - 1, mib, mib + 1, 3 * mib + 4093, 17 * mib + 1})
    for (const std::size_t offset : {0u, 3u, 16u})
      ASSERT_NO_FATAL_FAILURE(check(parallel_stream_copy, n, offset, 64 - offset));
}

}  // namespace
