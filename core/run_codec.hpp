// The run codec (issue 21): a sorted run of ordered bits, compressed in blocks so that round 1
// can copy less over PCIe and keep less in host memory, and round 2 can still find keys by
// position or value through a small index. This header is the format, shared by the host
// reference codec below (plain C++, core/run_codec.cpp) and the GPU codec
// (core/cuda/run_codec.cuh), which must write the same bytes.
//
// Format. A run of n keys K (std::uint32_t or std::uint64_t) is cut into blocks of block_keys
// keys, the last one possibly shorter. Block b of c keys k[0..c) has:
//  - an index entry (run_block, kept by the host): k[0] (the frame of reference), the byte
//    offset of the block's deltas in the run's stream, and the width w of its deltas;
//  - c - 1 deltas k[i] - k[i - 1] (i = 1..c-1; sorted keys make them non-negative), each w bits,
//    w the bit width of the largest (0 when all keys are equal, 64 for u64 keys from 0 to
//    2^63 or more), delta i at bits [(i - 1) w, i w) of the block's little-endian 64-bit words,
//    least significant bit first, the unused bits of the last word zero.
// A block takes block_bytes(w, c) bytes, a multiple of 8, so that every block starts 8-byte
// aligned and can be read as 64-bit words. Deltas are taken modulo 2^bits, so any keys round-
// trip exactly; only sorted ones compress.
#pragma once

#include "core/keys.hpp"  // GPUSORT_HD

#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>

namespace gpusort::detail::codec {

static_assert(std::endian::native == std::endian::little,
              "the codec's streams are little-endian 64-bit words, written as they lie in memory");

/// Keys per block: the unit of decoding (a slice boundary decodes at most one block on the host)
/// and of the GPU's work (one thread block each). 2048 keeps the index at 24 bytes per 8 KiB of
/// u32 keys (0.3%) and a u64 block's keys in 16 KiB of shared memory.
inline constexpr std::uint32_t block_keys = 2048;

/// One block's entry of the index the host keeps beside the stream.
struct run_block {
  std::uint64_t first_key;    ///< the block's first key, its frame of reference
  std::uint64_t byte_offset;  ///< where its deltas start in the run's stream (a multiple of 8)
  std::uint32_t width;        ///< bits per delta, 0..64
  std::uint32_t reserved;     ///< zero; keeps the entry 24 bytes on host and device alike
};
static_assert(sizeof(run_block) == 24);

/// Blocks of a run of n keys.
GPUSORT_HD constexpr std::uint64_t blocks_of(std::uint64_t n)
{
  return (n + block_keys - 1) / block_keys;
}

/// Keys of block b of a run of n keys.
GPUSORT_HD constexpr std::uint32_t keys_in_block(std::uint64_t n, std::uint64_t b)
{
  const std::uint64_t rest = n - b * block_keys;
  return static_cast<std::uint32_t>(rest < block_keys ? rest : block_keys);
}

/// Bits of the largest delta of a block: 0 for 0, 64 when the top bit is set.
GPUSORT_HD constexpr std::uint32_t width_of(std::uint64_t largest_delta)
{
  std::uint32_t w = 0;
  while (w < 64 && (largest_delta >> w) != 0) ++w;
  return w;
}

/// Stream bytes of a block of `keys` keys whose deltas are `width` bits: whole 64-bit words.
GPUSORT_HD constexpr std::uint32_t block_bytes(std::uint32_t width, std::uint32_t keys)
{
  const std::uint32_t bits = keys == 0 ? 0 : (keys - 1) * width;
  return (bits + 63) / 64 * 8;
}

/// The most stream bytes a run of n keys of key_bytes (4|8) can take: every delta as wide as a
/// key, plus each block's padding to a word. What a caller allocates before the size is known.
constexpr std::uint64_t encoded_bytes_bound(std::uint64_t n, unsigned key_bytes)
{
  const std::uint64_t full = n / block_keys;
  const auto rest = static_cast<std::uint32_t>(n % block_keys);
  return full * block_bytes(key_bytes * 8, block_keys) + block_bytes(key_bytes * 8, rest);
}

// ---- round 1's form: m sorted keys dealt into d runs (core/plan/dealing.hpp's bins: the first
// m % d of m / d + 1 keys, the rest of m / d, one after another), encoded together: the runs'
// blocks numbered one after another, so that their index entries and streams lie back to back
// and one copy takes a chunk's stream out. A lone run is the case d = 1. ----

/// Where block g of the dealt runs is.
struct dealt_block {
  std::uint64_t run;    ///< its bin
  std::uint64_t first;  ///< its first key in the dealt array
  std::uint32_t keys;   ///< its keys
};

/// Blocks of every run of m keys dealt into d.
GPUSORT_HD constexpr std::uint64_t dealt_blocks(std::uint64_t m, std::uint64_t d)
{
  const std::uint64_t extra = m % d;
  return extra * blocks_of(m / d + 1) + (d - extra) * blocks_of(m / d);
}

/// The first block of run j: its index entry's place.
GPUSORT_HD constexpr std::uint64_t dealt_first_block(std::uint64_t m, std::uint64_t d,
                                                           std::uint64_t j)
{
  const std::uint64_t extra = m % d;
  const std::uint64_t large = blocks_of(m / d + 1), small = blocks_of(m / d);
  return j < extra ? j * large : extra * large + (j - extra) * small;
}

/// Block g (below dealt_blocks(m, d)) of the dealt runs.
GPUSORT_HD constexpr dealt_block dealt_block_at(std::uint64_t m, std::uint64_t d,
                                                      std::uint64_t g)
{
  const std::uint64_t extra = m % d, small_keys = m / d;
  const std::uint64_t large = blocks_of(small_keys + 1), small = blocks_of(small_keys);
  std::uint64_t run = 0, in_run = 0, run_start = 0, run_keys = 0;
  if (g < extra * large) {
    run = g / large;
    in_run = g % large;
    run_keys = small_keys + 1;
    run_start = run * run_keys;
  } else {  // small > 0 here: blocks past the large runs exist only when the small runs have keys
    run = extra + (g - extra * large) / small;
    in_run = (g - extra * large) % small;
    run_keys = small_keys;
    run_start = extra * (small_keys + 1) + (run - extra) * small_keys;
  }
  return {run, run_start + in_run * block_keys, keys_in_block(run_keys, in_run)};
}

/// The most stream bytes the dealt runs can take (encoded_bytes_bound of each).
constexpr std::uint64_t dealt_bytes_bound(std::uint64_t m, std::uint64_t d, unsigned key_bytes)
{
  const std::uint64_t extra = m % d;
  return extra * encoded_bytes_bound(m / d + 1, key_bytes) +
         (d - extra) * encoded_bytes_bound(m / d, key_bytes);
}

// ---- the host reference codec (core/run_codec.cpp); K is std::uint32_t or std::uint64_t ----

/// Stream bytes `keys` encode to (the index takes blocks_of(keys.size()) entries besides).
template <typename K>
std::uint64_t encoded_bytes(std::span<const K> keys);

/// Encodes `keys` into `index` (blocks_of(keys.size()) entries) and `stream` (at least
/// encoded_bytes(keys) bytes, 8-byte aligned); returns the stream bytes written. Throws
/// gpusort::invalid_argument when either is too small or the stream is misaligned.
template <typename K>
std::uint64_t encode(std::span<const K> keys, std::span<run_block> index,
                     std::span<std::byte> stream);

/// Where a sub-range of an encoded run is: `index` holds the entries of blocks first/block_keys
/// to (last-1)/block_keys (possibly more after), `stream` the run's bytes from index[0]'s
/// byte_offset on. For a whole run: all entries, the whole stream, first 0 and last n.
struct encoded_slice {
  const run_block* index;
  const std::byte* stream;
  std::uint64_t first;       ///< the slice's first key, counted from the run's start
  std::uint64_t last;        ///< one past its last key
  std::uint64_t dst_offset;  ///< where its first key goes in the output
};

/// Decodes keys [s.first, s.last) of the run into out[s.dst_offset ..).
template <typename K>
void decode(const encoded_slice& s, std::span<K> out);

/// Key `position` of a run (index and stream of the whole run), decoding one block's prefix:
/// what splitter sampling reads.
template <typename K>
K key_at(std::span<const run_block> index, const std::byte* stream, std::uint64_t n,
         std::uint64_t position);

/// The first position of a sorted encoded run whose key is not below `key` (upper: above it),
/// as std::lower_bound / upper_bound on the decoded run: a binary search of the index and one
/// block's decoding, what round-2 slicing needs per run and splitter.
template <typename K>
std::uint64_t lower_bound(std::span<const run_block> index, const std::byte* stream,
                          std::uint64_t n, K key);
template <typename K>
std::uint64_t upper_bound(std::span<const run_block> index, const std::byte* stream,
                          std::uint64_t n, K key);

}  // namespace gpusort::detail::codec
