// The radix sort on every onesweep tile (core/cuda/chunk_ops.cuh, radix_tiles.cuh): CUB's own
// and the small-chunk tiles of issue 44, for every layout, against std::stable_sort (the radix
// sort keeps equal keys in input order, and values travel with them). Sizes: 0, 1, primes,
// either side of each tile's size for 4- and 8-byte elements, and chunk sizes of small budgets
// (262144 and a prime near 674K); distributions from uniform to one value; the low-bits sort of
// round 2 on each tile; scratch sized for CUB's tiles alone taken as a cue to sort on them; and
// the small tiles' bound checked before anything runs.
#include "gpu_test_support.hpp"
#include "pipeline/cuda/resources.hpp"

#include "core/cuda/chunk_ops.cuh"

#include <gpusort/error.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace gpusort {
namespace {

using cuda::cuda_stream;
using cuda::device_buffer;
using cuda::radix_tile;
using cuda::radix_tuning;

template <typename K, typename V>
struct layout {
  using key = K;
  using value = V;  // void: keys alone
};

template <typename L>
class gpu_radix_tiles : public test::gpu_test {};

using layouts = ::testing::Types<layout<std::uint32_t, void>, layout<std::uint32_t, std::uint32_t>,
                                 layout<std::uint32_t, std::uint64_t>, layout<std::uint64_t, void>,
                                 layout<std::uint64_t, std::uint32_t>,
                                 layout<std::uint64_t, std::uint64_t>>;
TYPED_TEST_SUITE(gpu_radix_tiles, layouts);

enum class dist { uniform, few, one, ascending, descending, low_bits };
const char* name(dist d)
{
  switch (d) {
    case dist::uniform: return "uniform";
    case dist::few: return "three values";
    case dist::one: return "one value";
    case dist::ascending: return "ascending";
    case dist::descending: return "descending";
    case dist::low_bits: return "low 12 bits";
  }
  return "?";
}

template <typename K>
std::vector<K> keys_of(std::uint64_t n, dist d, std::uint64_t seed)
{
  std::mt19937_64 rng{seed};
  std::vector<K> keys(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    const auto r = static_cast<K>(rng());
    switch (d) {
      case dist::uniform: keys[i] = r; break;
      case dist::few: keys[i] = static_cast<K>((r % 3) * 0x0101'0101'0101'0101ULL); break;
      case dist::one: keys[i] = static_cast<K>(0xA5A5'A5A5'A5A5'A5A5ULL); break;
      case dist::ascending: keys[i] = static_cast<K>(i * 7); break;
      case dist::descending: keys[i] = static_cast<K>((n - i) * 7); break;
      case dist::low_bits: keys[i] = static_cast<K>(0xC3C3'0000'0000'0000ULL >> (64 - 8 * sizeof(K))) |
                                     static_cast<K>(r & 0xFFF); break;
    }
  }
  return keys;
}

/// Sorts n keys of `d` (positions as values, in the value width) with `tuning` on `key_bits`
/// (0: all) in scratch of `scratch_bytes` (0: the size query's), and checks keys and values
/// against std::stable_sort.
template <typename K, typename V>
void expect_sorted(std::uint64_t n, dist d, const radix_tuning& tuning, unsigned key_bits = 0,
                   std::size_t scratch_bytes = 0)
{
  constexpr unsigned kb = sizeof(K);
  constexpr unsigned vb = std::is_void_v<V> ? 0 : sizeof(std::conditional_t<std::is_void_v<V>, char, V>);
  const std::vector<K> keys = keys_of<K>(n, d, n * 977 + static_cast<unsigned>(d));
  std::vector<std::uint64_t> order(n);
  std::iota(order.begin(), order.end(), std::uint64_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::uint64_t a, std::uint64_t b) { return keys[a] < keys[b]; });
  device_buffer k{n * kb + 8}, k_alt{n * kb + 8}, v{n * vb + 8}, v_alt{n * vb + 8};
  if (scratch_bytes == 0) scratch_bytes = cuda::radix_sort_scratch_bytes(n, kb, vb, tuning);
  device_buffer scratch{scratch_bytes + 1};
  ASSERT_EQ(cudaMemcpy(k.data(), keys.data(), n * kb, cudaMemcpyHostToDevice), cudaSuccess);
  if (vb == 4) {
    std::vector<std::uint32_t> pos(n);
    std::iota(pos.begin(), pos.end(), 0U);
    ASSERT_EQ(cudaMemcpy(v.data(), pos.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
  } else if (vb == 8) {
    std::vector<std::uint64_t> pos(n);
    std::iota(pos.begin(), pos.end(), std::uint64_t{0});
    ASSERT_EQ(cudaMemcpy(v.data(), pos.data(), n * 8, cudaMemcpyHostToDevice), cudaSuccess);
  }
  cuda_stream stream;
  const bool alt = cuda::radix_sort(k.data(), k_alt.data(), vb ? v.data() : nullptr,
                                    vb ? v_alt.data() : nullptr, n, kb, vb, scratch.data(),
                                    scratch_bytes, stream.value(), key_bits, tuning);
  stream.synchronize();
  std::vector<K> sorted(n);
  std::vector<std::uint64_t> values(n);
  ASSERT_EQ(cudaMemcpy(sorted.data(), (alt ? k_alt : k).data(), n * kb, cudaMemcpyDeviceToHost),
            cudaSuccess);
  if (vb == 4) {
    std::vector<std::uint32_t> v32(n);
    ASSERT_EQ(cudaMemcpy(v32.data(), (alt ? v_alt : v).data(), n * 4, cudaMemcpyDeviceToHost),
              cudaSuccess);
    std::copy(v32.begin(), v32.end(), values.begin());
  } else if (vb == 8) {
    ASSERT_EQ(cudaMemcpy(values.data(), (alt ? v_alt : v).data(), n * 8, cudaMemcpyDeviceToHost),
              cudaSuccess);
  }
  for (std::uint64_t i = 0; i < n; ++i) {
    ASSERT_EQ(sorted[i], keys[order[i]]) << "n=" << n << " " << name(d) << " at " << i;
    if (vb != 0) {
      ASSERT_EQ(values[i], order[i]) << "n=" << n << " " << name(d) << " at " << i;
    }
  }
}

radix_tuning tuning_of(radix_tile tile)
{
  return radix_tuning{.small_tile = tile,
                      .small_tile_max_elements = radix_tuning::max_small_tile_elements};
}

TYPED_TEST(gpu_radix_tiles, EveryTileSortsEverySizeAndDistributionStably)
{
  using K = typename TypeParam::key;
  using V = typename TypeParam::value;
  const std::uint64_t cap = test::max_test_n();
  for (const radix_tile tile : {radix_tile::cub, radix_tile::tile_2k, radix_tile::tile_1k}) {
    SCOPED_TRACE("tile " + std::to_string(static_cast<int>(tile)));
    // 0, 1, primes, either side of 1024, 2048, 4096 and CUB's 5760 and 7296, a small budget's
    // chunks.
    for (const std::uint64_t n : {0ULL, 1ULL, 2ULL, 1021ULL, 1023ULL, 1024ULL, 1025ULL, 2047ULL,
                                  2048ULL, 2049ULL, 4095ULL, 4097ULL, 5759ULL, 5761ULL, 7297ULL,
                                  65'537ULL, 262'144ULL, 673'217ULL}) {
      if (n > cap) continue;
      for (const dist d : {dist::uniform, dist::few, dist::one, dist::ascending,
                           dist::descending, dist::low_bits}) {
        if (n > 70'000 && d != dist::uniform && d != dist::few) continue;
        expect_sorted<K, V>(n, d, tuning_of(tile));
        if (this->HasFatalFailure()) return;
      }
    }
  }
}

TYPED_TEST(gpu_radix_tiles, SmallTilesSortOnTheLowBitsAlone)
{
  using K = typename TypeParam::key;
  using V = typename TypeParam::value;
  for (const radix_tile tile : {radix_tile::tile_2k, radix_tile::tile_1k})
    for (const std::uint64_t n : {1ULL, 4097ULL, 262'147ULL}) {
      if (n > test::max_test_n()) continue;
      // Round 2's keys share their bits above 12: the sort looks at the low 12 alone.
      expect_sorted<K, V>(n, dist::low_bits, tuning_of(tile), 12);
      if (this->HasFatalFailure()) return;
    }
}

TYPED_TEST(gpu_radix_tiles, ScratchForCubsTilesAloneIsACueToSortOnThem)
{
  using K = typename TypeParam::key;
  using V = typename TypeParam::value;
  constexpr unsigned kb = sizeof(K);
  constexpr unsigned vb = std::is_void_v<V> ? 0 : sizeof(std::conditional_t<std::is_void_v<V>, char, V>);
  const std::uint64_t n = std::min<std::uint64_t>(262'144, test::max_test_n());
  // Sized with CUB's tiles only; the 1k tiles want more lookback words for this many keys.
  const std::size_t cub_only =
      cuda::radix_sort_scratch_bytes(n, kb, vb, tuning_of(radix_tile::cub));
  expect_sorted<K, V>(n, dist::uniform, tuning_of(radix_tile::tile_1k), 0, cub_only);
}

TYPED_TEST(gpu_radix_tiles, TheSizeQueryCoversEverySmallerChunkOnTheSmallTile)
{
  using K = typename TypeParam::key;
  using V = typename TypeParam::value;
  constexpr unsigned kb = sizeof(K);
  constexpr unsigned vb = std::is_void_v<V> ? 0 : sizeof(std::conditional_t<std::is_void_v<V>, char, V>);
  // A ring sized for chunks of 8M sorts a final chunk of 1M on the small tile: the scratch for
  // 8M must hold what the small tile needs at its bound (radix_sort falls back otherwise, which
  // would be correct but slow).
  const radix_tuning tuning{.small_tile = radix_tile::tile_1k, .small_tile_max_elements = 1 << 20};
  EXPECT_GE(cuda::radix_sort_scratch_bytes(std::uint64_t{8} << 20, kb, vb, tuning),
            cuda::radix_sort_scratch_bytes(std::uint64_t{1} << 20, kb, vb, tuning_of(radix_tile::tile_1k)));
}

TEST(gpu_radix_tiles_arguments, SmallTilesBeyondTheirOffsetsAreRefused)
{
  // Checked before anything touches a GPU.
  const radix_tuning too_far{.small_tile = radix_tile::tile_2k,
                             .small_tile_max_elements = radix_tuning::max_small_tile_elements + 1};
  EXPECT_THROW((void)cuda::radix_sort_scratch_bytes(1, 8, 0, too_far), invalid_argument);
  EXPECT_THROW(cuda::radix_sort(nullptr, nullptr, nullptr, nullptr, 1, 8, 0, nullptr, 0, nullptr,
                                0, too_far),
               invalid_argument);
}

}  // namespace
}  // namespace gpusort
