// Inputs of the run codec's tests, host (tests/core) and GPU (tests/gpu) alike: sorted runs of
// ordered bits from every generator of core/generate.hpp, and runs whose deltas the test chose
// (so that every width, 0 and 64 included, is forced by construction and known).
#pragma once

#include "core/generate.hpp"
#include "core/keys.hpp"
#include "core/run_codec.hpp"

#include <gpusort/types.hpp>

#include <algorithm>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace gpusort::test_support {

/// The key types whose ordered bits are K.
template <typename K>
std::vector<dtype> dtypes_of_width()
{
  if constexpr (sizeof(K) == 4) return {dtype::u32, dtype::i32, dtype::f32};
  else return {dtype::u64, dtype::i64, dtype::f64};
}

/// Run lengths around the block size, primes, and one large run of many blocks.
inline std::vector<std::uint64_t> codec_sizes(bool large = true)
{
  constexpr std::uint64_t b = detail::codec::block_keys;
  std::vector<std::uint64_t> sizes{0, 1, 2, 3, b - 1, b, b + 1, 2 * b - 1, 2 * b, 7919, 10007};
  if (large) sizes.push_back((std::uint64_t{1} << 18) + 7);  // 129 blocks, the last of 7 keys
  return sizes;
}

/// n keys of type t from distribution d as ascending ordered bits, sorted: a round-1 run.
template <typename K>
std::vector<K> sorted_run(dtype t, distribution d, std::uint64_t n, std::uint64_t seed)
{
  std::vector<K> keys(n);
  generate(key_array{keys.data(), n, t}, d, seed);
  for (K& k : keys) k = detail::to_ordered<K>(k, t, order::ascending);
  std::sort(keys.begin(), keys.end());
  return keys;
}

/// The delta between keys j and j + 1 of a run whose every block has deltas of exactly
/// `width` bits: the block's first delta is the largest of that width, the rest random below
/// it.
template <typename K>
std::vector<K> deltas_of_width(std::uint32_t width, std::uint64_t n, std::uint64_t seed)
{
  std::mt19937_64 rng{seed};
  const std::uint64_t largest =
      width == 0 ? 0 : (width >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << width) - 1);
  std::vector<K> deltas(n > 0 ? n - 1 : 0);
  for (std::uint64_t j = 0; j < deltas.size(); ++j)
    deltas[j] = static_cast<K>(j % detail::codec::block_keys == 0 ? largest
                                                                  : rng() & (largest >> 1));
  return deltas;
}

/// Keys from a first key and deltas: key j + 1 = key j + deltas[j], wrapping modulo 2^bits, as
/// the codec takes its deltas (so the stored deltas are known exactly, sorted or not).
template <typename K>
std::vector<K> keys_from_deltas(K first, std::span<const K> deltas)
{
  std::vector<K> keys{first};
  for (const K d : deltas) keys.push_back(static_cast<K>(keys.back() + d));
  return keys;
}

}  // namespace gpusort::test_support
