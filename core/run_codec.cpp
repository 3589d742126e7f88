// The host reference codec: one block at a time, in the plainest form of the format in
// run_codec.hpp, so that the GPU's bytes can be checked against it and the host can search an
// encoded run without a GPU.
#include "core/run_codec.hpp"

#include <gpusort/error.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace gpusort::detail::codec {
namespace {

constexpr std::uint64_t mask_of(std::uint32_t width)
{
  return width >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << width) - 1;
}

std::uint64_t load_word(const std::byte* words, std::uint64_t i)
{
  std::uint64_t w = 0;
  std::memcpy(&w, words + i * 8, 8);
  return w;
}

/// Delta j (0-based: between keys j and j + 1) of a block whose deltas are `width` bits.
std::uint64_t delta_at(const std::byte* words, std::uint32_t width, std::uint32_t j)
{
  if (width == 0) return 0;
  const std::uint64_t bit = std::uint64_t{j} * width;
  const auto shift = static_cast<std::uint32_t>(bit % 64);
  std::uint64_t v = load_word(words, bit / 64) >> shift;
  if (shift + width > 64) v |= load_word(words, bit / 64 + 1) << (64 - shift);
  return v & mask_of(width);
}

template <typename K>
std::uint32_t block_width(const K* keys, std::uint32_t count)
{
  K largest = 0;
  for (std::uint32_t i = 1; i < count; ++i)
    largest = std::max(largest, static_cast<K>(keys[i] - keys[i - 1]));
  return width_of(largest);
}

/// Keys [from, to) of one block into out[0 ..): its frame of reference plus the deltas so far.
template <typename K>
void decode_block(const run_block& entry, const std::byte* words, std::uint32_t from,
                  std::uint32_t to, K* out)
{
  auto key = static_cast<K>(entry.first_key);
  for (std::uint32_t i = 0; i < to; ++i) {
    if (i > 0) key = static_cast<K>(key + static_cast<K>(delta_at(words, entry.width, i - 1)));
    if (i >= from) out[i - from] = key;
  }
}

void check_index(std::span<const run_block> index, std::uint64_t n)
{
  if (index.size() < blocks_of(n))
    throw invalid_argument{"run codec: an index of " + std::to_string(index.size()) +
                           " entries for " + std::to_string(blocks_of(n)) + " blocks"};
}

/// The first position whose key is not `before` the probe: the blocks are searched by their
/// first keys, then the one block where the answer can lie is decoded up to the answer (sorted
/// keys: the first key not before it ends the search), without a buffer.
template <typename K, typename Before>
std::uint64_t partition_point(std::span<const run_block> index, const std::byte* stream,
                              std::uint64_t n, Before before)
{
  check_index(index, n);
  const std::uint64_t blocks = blocks_of(n);
  // blocks whose first key comes before: the answer is past their first key
  const auto after = std::partition_point(
      index.begin(), index.begin() + static_cast<std::ptrdiff_t>(blocks),
      [&](const run_block& e) { return before(static_cast<K>(e.first_key)); });
  const auto b = static_cast<std::uint64_t>(after - index.begin());
  if (b == 0) return 0;
  const run_block& entry = index[b - 1];
  const std::byte* words = stream + entry.byte_offset;
  const std::uint32_t count = keys_in_block(n, b - 1);
  auto key = static_cast<K>(entry.first_key);
  std::uint32_t i = 1;
  for (; i < count; ++i) {
    key = static_cast<K>(key + static_cast<K>(delta_at(words, entry.width, i - 1)));
    if (!before(key)) break;
  }
  return (b - 1) * block_keys + i;
}

}  // namespace

template <typename K>
std::uint64_t encoded_bytes(std::span<const K> keys)
{
  std::uint64_t bytes = 0;
  for (std::uint64_t b = 0; b < blocks_of(keys.size()); ++b) {
    const std::uint32_t count = keys_in_block(keys.size(), b);
    bytes += block_bytes(block_width(keys.data() + b * block_keys, count), count);
  }
  return bytes;
}

template <typename K>
std::uint64_t encode(std::span<const K> keys, std::span<run_block> index,
                     std::span<std::byte> stream)
{
  const std::uint64_t n = keys.size();
  check_index(index, n);
  if (reinterpret_cast<std::uintptr_t>(stream.data()) % 8 != 0)
    throw invalid_argument{"run codec: the stream must be 8-byte aligned"};
  const std::uint64_t needed = encoded_bytes(keys);
  if (stream.size() < needed)
    throw invalid_argument{"run codec: a stream of " + std::to_string(stream.size()) +
                           " bytes, the run needs " + std::to_string(needed)};
  std::uint64_t at = 0;
  for (std::uint64_t b = 0; b < blocks_of(n); ++b) {
    const K* k = keys.data() + b * block_keys;
    const std::uint32_t count = keys_in_block(n, b);
    const std::uint32_t width = block_width(k, count);
    const std::uint32_t bytes = block_bytes(width, count);
    index[b] = run_block{k[0], at, width, 0};
    std::vector<std::uint64_t> words(bytes / 8, 0);
    for (std::uint32_t j = 0; j + 1 < count && width > 0; ++j) {
      const std::uint64_t delta = static_cast<K>(k[j + 1] - k[j]);
      const std::uint64_t bit = std::uint64_t{j} * width;
      const auto shift = static_cast<std::uint32_t>(bit % 64);
      words[bit / 64] |= delta << shift;
      if (shift + width > 64) words[bit / 64 + 1] |= delta >> (64 - shift);
    }
    if (bytes > 0) std::memcpy(stream.data() + at, words.data(), bytes);
    at += bytes;
  }
  return at;
}

template <typename K>
void decode(const encoded_slice& s, std::span<K> out)
{
  if (s.last < s.first || s.dst_offset + (s.last - s.first) > out.size())
    throw invalid_argument{"run codec: a slice [" + std::to_string(s.first) + ", " +
                           std::to_string(s.last) + ") does not fit an output of " +
                           std::to_string(out.size()) + " keys at " +
                           std::to_string(s.dst_offset)};
  if (s.first == s.last) return;
  const std::uint64_t b0 = s.first / block_keys;
  for (std::uint64_t b = b0; b <= (s.last - 1) / block_keys; ++b) {
    const run_block& entry = s.index[b - b0];
    const std::uint64_t begin = std::max(s.first, b * block_keys);
    const std::uint64_t end = std::min(s.last, (b + 1) * block_keys);
    decode_block(entry, s.stream + (entry.byte_offset - s.index[0].byte_offset),
                 static_cast<std::uint32_t>(begin - b * block_keys),
                 static_cast<std::uint32_t>(end - b * block_keys),
                 out.data() + s.dst_offset + (begin - s.first));
  }
}

template <typename K>
K key_at(std::span<const run_block> index, const std::byte* stream, std::uint64_t n,
         std::uint64_t position)
{
  check_index(index, n);
  if (position >= n)
    throw invalid_argument{"run codec: key " + std::to_string(position) + " of a run of " +
                           std::to_string(n)};
  const std::uint64_t b = position / block_keys;
  const auto i = static_cast<std::uint32_t>(position % block_keys);
  K key{};
  decode_block(index[b], stream + index[b].byte_offset, i, i + 1, &key);
  return key;
}

template <typename K>
std::uint64_t lower_bound(std::span<const run_block> index, const std::byte* stream,
                          std::uint64_t n, K key)
{
  return partition_point<K>(index, stream, n, [key](K x) { return x < key; });
}

template <typename K>
std::uint64_t upper_bound(std::span<const run_block> index, const std::byte* stream,
                          std::uint64_t n, K key)
{
  return partition_point<K>(index, stream, n, [key](K x) { return x <= key; });
}

#define GPUSORT_CODEC_INSTANTIATE(K)                                                          \
  template std::uint64_t encoded_bytes<K>(std::span<const K>);                                \
  template std::uint64_t encode<K>(std::span<const K>, std::span<run_block>,                  \
                                   std::span<std::byte>);                                     \
  template void decode<K>(const encoded_slice&, std::span<K>);                                \
  template K key_at<K>(std::span<const run_block>, const std::byte*, std::uint64_t,           \
                       std::uint64_t);                                                        \
  template std::uint64_t lower_bound<K>(std::span<const run_block>, const std::byte*,         \
                                        std::uint64_t, K);                                    \
  template std::uint64_t upper_bound<K>(std::span<const run_block>, const std::byte*,         \
                                        std::uint64_t, K);
GPUSORT_CODEC_INSTANTIATE(std::uint32_t)
GPUSORT_CODEC_INSTANTIATE(std::uint64_t)
#undef GPUSORT_CODEC_INSTANTIATE

}  // namespace gpusort::detail::codec
