// The host reference codec (core/run_codec.hpp) against its written format: runs whose deltas
// the test chose are read back bit by bit from the stream with a reader of the test's own, the
// index against widths and offsets computed from those deltas, and every generator's sorted runs
// must decode to themselves, whole, in slices, by position and by value (std::lower_bound on
// the original). The GPU codec is checked against this one (tests/gpu/run_codec_test.cpp).
#include "core/run_codec.hpp"

#include "core/cuda/run_codec/words.cuh"
#include "core/plan/dealing.hpp"
#include "tests/support/codec_runs.hpp"
#include "tests/support/sanitizer.hpp"

#include <gpusort/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <vector>

namespace {

namespace codec = gpusort::detail::codec;
using codec::block_keys;
using codec::run_block;
using gpusort::distribution;

/// An encoded run in buffers of the codec's bound, the stream in 64-bit words for alignment.
struct encoded {
  std::vector<run_block> index;
  std::vector<std::uint64_t> words;
  std::uint64_t bytes{};
  const std::byte* stream() const { return reinterpret_cast<const std::byte*>(words.data()); }
};

template <typename K>
encoded encode_run(const std::vector<K>& keys)
{
  encoded e;
  e.index.resize(codec::blocks_of(keys.size()));
  e.words.resize(codec::encoded_bytes_bound(keys.size(), sizeof(K)) / 8 + 1);
  e.bytes = codec::encode<K>(keys, e.index, std::as_writable_bytes(std::span{e.words}));
  return e;
}

template <typename K>
std::vector<K> decode_range(const encoded& e, std::uint64_t first, std::uint64_t last)
{
  std::vector<K> out(last - first);
  const std::uint64_t b0 = first / block_keys;
  const std::uint64_t base =
      e.index.empty() ? 0 : e.index[std::min(b0, e.index.size() - 1)].byte_offset;
  codec::decode<K>({e.index.data() + b0, e.stream() + base, first, last, 0}, out);
  return out;
}

/// Bit `i` of the stream, read byte by byte: the test's own reader of the format.
bool bit_at(const encoded& e, std::uint64_t i)
{
  return ((std::to_integer<unsigned>(e.stream()[i / 8]) >> (i % 8)) & 1U) != 0;
}

template <typename K>
class run_codec : public ::testing::Test {};
using key_widths = ::testing::Types<std::uint32_t, std::uint64_t>;
TYPED_TEST_SUITE(run_codec, key_widths);

// ---- the format: chosen deltas, every width ----

TYPED_TEST(run_codec, StoresChosenDeltasBitForBitAtEveryWidth)
{
  using K = TypeParam;
  constexpr std::uint32_t bits = sizeof(K) * 8;
  for (std::uint32_t width = 0; width <= bits; ++width) {
    for (const std::uint64_t n : {std::uint64_t{1}, std::uint64_t{2}, std::uint64_t{block_keys},
                                  std::uint64_t{3 * block_keys + 17}}) {
      const std::vector<K> deltas = gpusort::test_support::deltas_of_width<K>(width, n, width);
      const K first = static_cast<K>(0x9e3779b97f4a7c15ULL * (width + 1));
      const std::vector<K> keys = gpusort::test_support::keys_from_deltas<K>(first, deltas);
      const encoded e = encode_run(keys);
      ASSERT_EQ(e.index.size(), codec::blocks_of(n));
      std::uint64_t offset = 0;
      for (std::uint64_t b = 0; b < e.index.size(); ++b) {
        const std::uint32_t count = codec::keys_in_block(n, b);
        const std::uint32_t expected_width = count > 1 ? width : 0;
        const run_block& entry = e.index[b];
        ASSERT_EQ(entry.first_key, keys[b * block_keys]) << "width " << width << " block " << b;
        ASSERT_EQ(entry.width, expected_width) << "n " << n << " block " << b;
        ASSERT_EQ(entry.byte_offset, offset) << "block " << b;
        ASSERT_EQ(entry.reserved, 0U);
        // (count - 1) deltas of `width` bits, padded to whole 64-bit words
        const std::uint64_t block_bits = std::uint64_t{count - 1} * expected_width;
        offset += (block_bits + 63) / 64 * 8;
        for (std::uint32_t j = 0; j + 1 < count; ++j) {
          const std::uint64_t at = entry.byte_offset * 8 + std::uint64_t{j} * expected_width;
          std::uint64_t stored = 0;
          for (std::uint32_t i = 0; i < expected_width; ++i)
            stored |= std::uint64_t{bit_at(e, at + i)} << i;
          ASSERT_EQ(stored, std::uint64_t{deltas[b * block_keys + j]})
              << "width " << width << " block " << b << " delta " << j;
        }
        for (std::uint64_t i = block_bits; i < (block_bits + 63) / 64 * 64; ++i)
          ASSERT_FALSE(bit_at(e, entry.byte_offset * 8 + i)) << "padding bit " << i;
      }
      ASSERT_EQ(e.bytes, offset);
      ASSERT_EQ(codec::encoded_bytes<K>(keys), offset);
      ASSERT_LE(e.bytes, codec::encoded_bytes_bound(n, sizeof(K)));
      ASSERT_EQ(decode_range<K>(e, 0, n), keys) << "width " << width << " n " << n;
    }
  }
}

// The GPU agents' word arithmetic (core/cuda/run_codec/words.cuh: a thread per packed word, a
// thread per delta read), run here on the host against the reference codec's stream.
TYPED_TEST(run_codec, TheGpuWordArithmeticWritesAndReadsTheSameWords)
{
  using K = TypeParam;
  namespace gpu = gpusort::cuda::detail::codec;
  for (std::uint32_t width = 1; width <= sizeof(K) * 8; ++width) {
    for (const std::uint64_t n : {std::uint64_t{2}, std::uint64_t{37}, std::uint64_t{block_keys},
                                  std::uint64_t{2 * block_keys + 300}}) {
      const std::vector<K> deltas = gpusort::test_support::deltas_of_width<K>(width, n, ~width);
      const std::vector<K> keys = gpusort::test_support::keys_from_deltas<K>(K{1}, deltas);
      const encoded e = encode_run(keys);
      for (std::uint64_t b = 0; b < e.index.size(); ++b) {
        const std::uint32_t count = codec::keys_in_block(n, b);
        const K* block = keys.data() + b * block_keys;
        const std::uint64_t* words = e.words.data() + e.index[b].byte_offset / 8;
        for (std::uint32_t k = 0; k < codec::block_bytes(e.index[b].width, count) / 8; ++k)
          ASSERT_EQ(gpu::pack_word(block, count, width, k), words[k])
              << "width " << width << " n " << n << " block " << b << " word " << k;
        for (std::uint32_t j = 0; j + 1 < count; ++j)
          ASSERT_EQ(gpu::unpack_delta<K>(words, width, j), deltas[b * block_keys + j])
              << "width " << width << " block " << b << " delta " << j;
      }
    }
  }
}

TYPED_TEST(run_codec, EqualKeysTakeNoStreamAndFullWidthDeltasTakeAWordEach)
{
  using K = TypeParam;
  constexpr K top = std::numeric_limits<K>::max();
  for (const std::uint64_t n : gpusort::test_support::codec_sizes(false)) {
    const std::vector<K> equal(n, K{42});
    const encoded e = encode_run(equal);
    EXPECT_EQ(e.bytes, 0U) << n;
    for (const run_block& entry : e.index) {
      EXPECT_EQ(entry.width, 0U);
      EXPECT_EQ(entry.first_key, 42U);
      EXPECT_EQ(entry.byte_offset, 0U);
    }
    EXPECT_EQ(decode_range<K>(e, 0, n), equal);
  }
  // sorted, with a delta of every bit set: 0, max, max, ...
  std::vector<K> full(block_keys + 5, top);
  full[0] = 0;
  const encoded e = encode_run(full);
  ASSERT_EQ(e.index.size(), 2U);
  EXPECT_EQ(e.index[0].width, sizeof(K) * 8);
  EXPECT_EQ(e.index[1].width, 0U);
  EXPECT_EQ(e.bytes, codec::block_bytes(sizeof(K) * 8, block_keys));
  EXPECT_EQ(decode_range<K>(e, 0, full.size()), full);
}

// ---- every generator's sorted runs ----

TYPED_TEST(run_codec, EveryDistributionAndSizeDecodesToItself)
{
  using K = TypeParam;
  for (const gpusort::dtype t : gpusort::test_support::dtypes_of_width<K>()) {
    for (const distribution d : gpusort::all_distributions) {
      if (!gpusort::applies_to(d, t)) continue;
      // the large run (most of the test's time) is left to the unsanitized builds
      const bool large = !gpusort::test_support::under_sanitizer();
      for (const std::uint64_t n : gpusort::test_support::codec_sizes(large)) {
        const std::vector<K> keys = gpusort::test_support::sorted_run<K>(t, d, n, n + 5);
        const encoded e = encode_run(keys);
        ASSERT_EQ(e.bytes, codec::encoded_bytes<K>(keys));
        ASSERT_LE(e.bytes, codec::encoded_bytes_bound(n, sizeof(K)));
        for (std::uint64_t b = 0; b < e.index.size(); ++b) {
          // the width is that of the block's largest delta
          K largest = 0;
          for (std::uint64_t i = b * block_keys + 1; i < std::min(n, (b + 1) * block_keys); ++i)
            largest = std::max<K>(largest, keys[i] - keys[i - 1]);
          ASSERT_EQ(e.index[b].width, static_cast<std::uint32_t>(std::bit_width(largest)))
              << gpusort::name_of(d) << " block " << b;
        }
        ASSERT_EQ(decode_range<K>(e, 0, n), keys)
            << gpusort::name_of(t) << " " << gpusort::name_of(d) << " n=" << n;
      }
    }
  }
}

TYPED_TEST(run_codec, UnsortedKeysRoundTripBecauseDeltasWrap)
{
  using K = TypeParam;
  std::mt19937_64 rng{7};
  std::vector<K> keys(3 * block_keys + 11);
  for (K& k : keys) k = static_cast<K>(rng());
  const encoded e = encode_run(keys);
  EXPECT_EQ(decode_range<K>(e, 0, keys.size()), keys);
}

TYPED_TEST(run_codec, SlicesDecodeTheirKeysOnly)
{
  using K = TypeParam;
  const std::uint64_t n = 5 * block_keys + 123;
  const std::vector<K> keys =
      gpusort::test_support::sorted_run<K>(gpusort::test_support::dtypes_of_width<K>()[0],
                                           distribution::gaussian, n, 3);
  const encoded e = encode_run(keys);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges{
      {0, 0}, {0, 1}, {n - 1, n}, {n, n}, {block_keys - 1, block_keys + 1},
      {block_keys, 2 * block_keys}, {17, 18}, {5, block_keys - 3}, {100, n - 100}};
  std::mt19937_64 rng{11};
  for (int i = 0; i < 50; ++i) {
    std::uint64_t a = rng() % (n + 1), b = rng() % (n + 1);
    ranges.emplace_back(std::min(a, b), std::max(a, b));
  }
  for (const auto& [first, last] : ranges) {
    const std::vector<K> expected(keys.begin() + static_cast<std::ptrdiff_t>(first),
                                  keys.begin() + static_cast<std::ptrdiff_t>(last));
    ASSERT_EQ(decode_range<K>(e, first, last), expected) << "[" << first << ", " << last << ")";
  }
  // at an offset of a larger output, the keys around it untouched
  std::vector<K> out(20, K{7});
  codec::decode<K>({e.index.data() + 1, e.stream() + e.index[1].byte_offset, block_keys + 3,
                    block_keys + 13, 5},
                   out);
  for (std::uint64_t i = 0; i < out.size(); ++i)
    EXPECT_EQ(out[i], i >= 5 && i < 15 ? keys[block_keys + 3 + i - 5] : K{7}) << i;
}

TYPED_TEST(run_codec, PositionsAndBoundsMatchTheDecodedRun)
{
  using K = TypeParam;
  for (const distribution d : {distribution::uniform, distribution::fewunique,
                               distribution::zero, distribution::detdupes}) {
    for (const std::uint64_t n : {std::uint64_t{1}, std::uint64_t{block_keys + 1},
                                  std::uint64_t{4 * block_keys + 999}}) {
      const std::vector<K> keys = gpusort::test_support::sorted_run<K>(
          gpusort::test_support::dtypes_of_width<K>()[0], d, n, 21);
      const encoded e = encode_run(keys);
      for (std::uint64_t i = 0; i < n; i += 1 + n / 97)
        ASSERT_EQ(codec::key_at<K>(e.index, e.stream(), n, i), keys[i]) << i;
      ASSERT_EQ(codec::key_at<K>(e.index, e.stream(), n, n - 1), keys[n - 1]);
      std::vector<K> probes{0, std::numeric_limits<K>::max()};
      for (std::uint64_t i = 0; i < n; i += 1 + n / 61)
        for (const K k : {keys[i], static_cast<K>(keys[i] - 1), static_cast<K>(keys[i] + 1)})
          probes.push_back(k);
      for (std::uint64_t b = 0; b < e.index.size(); ++b)
        probes.push_back(static_cast<K>(e.index[b].first_key));
      for (const K p : probes) {
        const auto lower = static_cast<std::uint64_t>(
            std::lower_bound(keys.begin(), keys.end(), p) - keys.begin());
        const auto upper = static_cast<std::uint64_t>(
            std::upper_bound(keys.begin(), keys.end(), p) - keys.begin());
        ASSERT_EQ(codec::lower_bound<K>(e.index, e.stream(), n, p), lower) << p;
        ASSERT_EQ(codec::upper_bound<K>(e.index, e.stream(), n, p), upper) << p;
      }
    }
  }
}

// ---- round 1's dealt runs: where each block is ----

TEST(RunCodecDealt, BlocksWalkEveryRunOfTheDealingInOrder)
{
  constexpr std::uint64_t b = block_keys;
  for (const std::uint64_t d : {std::uint64_t{1}, std::uint64_t{2}, std::uint64_t{3},
                                std::uint64_t{16}, std::uint64_t{41}}) {
    for (const std::uint64_t m : {std::uint64_t{0}, std::uint64_t{1}, d - 1, d, d + 1, b * d - 1,
                                  b * d, b * d + 1, 3 * b * d + 7, std::uint64_t{1000003}}) {
      // the blocks of run j, from the dealing's own layout (core/plan/dealing.hpp)
      std::vector<codec::dealt_block> want;
      for (std::uint64_t j = 0; j < d; ++j) {
        ASSERT_EQ(codec::dealt_first_block(m, d, j), want.size()) << m << " " << d << " " << j;
        const std::uint64_t size = gpusort::detail::bin_size(m, d, j);
        const std::uint64_t start = gpusort::detail::bin_offset(m, d, j);
        for (std::uint64_t at = 0; at < size; at += b)
          want.push_back({j, start + at, static_cast<std::uint32_t>(std::min(b, size - at))});
      }
      ASSERT_EQ(codec::dealt_blocks(m, d), want.size()) << m << " " << d;
      for (std::uint64_t g = 0; g < want.size(); ++g) {
        const codec::dealt_block got = codec::dealt_block_at(m, d, g);
        ASSERT_EQ(got.run, want[g].run) << m << " " << d << " block " << g;
        ASSERT_EQ(got.first, want[g].first) << m << " " << d << " block " << g;
        ASSERT_EQ(got.keys, want[g].keys) << m << " " << d << " block " << g;
      }
      std::uint64_t bound = 0;
      for (std::uint64_t j = 0; j < d; ++j)
        bound += codec::encoded_bytes_bound(gpusort::detail::bin_size(m, d, j), 4);
      EXPECT_EQ(codec::dealt_bytes_bound(m, d, 4), bound);
    }
  }
}

// ---- bad input ----

TYPED_TEST(run_codec, BadBuffersAreClearErrors)
{
  using K = TypeParam;
  const std::vector<K> keys = gpusort::test_support::sorted_run<K>(
      gpusort::test_support::dtypes_of_width<K>()[0], distribution::uniform, block_keys + 1, 1);
  std::vector<run_block> index(2), short_index(1);
  std::vector<std::uint64_t> words(codec::encoded_bytes_bound(keys.size(), sizeof(K)) / 8 + 1);
  const auto stream = std::as_writable_bytes(std::span{words});
  EXPECT_THROW(codec::encode<K>(keys, short_index, stream), gpusort::invalid_argument);
  EXPECT_THROW(codec::encode<K>(keys, index, stream.subspan(1)), gpusort::invalid_argument);
  EXPECT_THROW(codec::encode<K>(keys, index, stream.first(8)), gpusort::invalid_argument);
  codec::encode<K>(keys, index, stream);
  std::vector<K> out(4);
  EXPECT_THROW(codec::decode<K>({index.data(), stream.data(), 0, 5, 0}, out),
               gpusort::invalid_argument);
  EXPECT_THROW(codec::decode<K>({index.data(), stream.data(), 3, 2, 0}, out),
               gpusort::invalid_argument);
  EXPECT_THROW(codec::key_at<K>(index, stream.data(), keys.size(), keys.size()),
               gpusort::invalid_argument);
  EXPECT_THROW(codec::lower_bound<K>(short_index, stream.data(), keys.size(), K{0}),
               gpusort::invalid_argument);
}

}  // namespace
