#include "core/rows/row_words.hpp"

#include <gpusort/error.hpp>

#include <omp.h>

#include <algorithm>
#include <bit>
#include <cstring>

namespace gpusort::detail {

namespace {

/// Below this many rows a word pass runs on the calling thread: a parallel region costs more.
constexpr std::uint64_t parallel_rows = 1u << 16;

dtype dtype_of(column_type t) noexcept
{
  switch (t) {
    case column_type::u32: return dtype::u32;
    case column_type::i32: return dtype::i32;
    case column_type::i64: return dtype::i64;
    case column_type::f32: return dtype::f32;
    case column_type::f64: return dtype::f64;
    default: return dtype::u64;
  }
}

template <typename T>
T load(const unsigned char* p) noexcept
{
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// std::byteswap is C++23.
constexpr std::uint32_t swap_bytes(std::uint32_t v) noexcept { return __builtin_bswap32(v); }
constexpr std::uint64_t swap_bytes(std::uint64_t v) noexcept { return __builtin_bswap64(v); }

template <typename T>
void store_big_endian(T v, unsigned char* p) noexcept
{
  if constexpr (std::endian::native == std::endian::little) v = swap_bytes(v);
  std::memcpy(p, &v, sizeof v);
}

}  // namespace

row_words::row_words(const row_keys& keys, float_order floats)
{
  check_row_keys(keys);
  for (const row_key& rk : keys.keys) {
    key_code k;
    k.data = static_cast<const unsigned char*>(rk.data);
    k.stride = rk.stride;
    k.type = rk.field.type;
    k.bytes = rk.field.bytes();
    k.descending = rk.field.direction == order::descending;
    const key_order ko{dtype_of(k.type), rk.field.direction, floats,
                       floats == float_order::numpy};
    k.map32 = ordered_map<std::uint32_t>(ko, true);
    k.map64 = ordered_map<std::uint64_t>(ko, true);
    keys_.push_back(k);
  }
  // Cut the string of all keys' ordered bytes into words, and each word into the pieces of
  // keys it holds.
  std::uint64_t at = 0;
  std::vector<std::vector<segment>> per_word;
  for (std::uint32_t k = 0; k < keys_.size(); ++k) {
    std::uint32_t done = 0;
    while (done < keys_[k].bytes) {
      const std::uint64_t w = at / 8;
      const auto to = static_cast<std::uint32_t>(at % 8);
      const std::uint32_t length = std::min<std::uint32_t>(8 - to, keys_[k].bytes - done);
      if (per_word.size() <= w) per_word.resize(w + 1);
      // whole() makes a 128-bit key's word from one of its halves: only where the word is one.
      const column_type t = keys_[k].type;
      const bool half = (t == column_type::u128 || t == column_type::i128) && done % 8 == 0;
      const bool whole_word =
          to == 0 && length == 8 && (keys_[k].bytes == 8 || t == column_type::bytes || half);
      per_word[w].push_back({k, done, length, to, whole_word});
      done += length;
      at += length;
    }
  }
  key_bytes_ = at;
  words_ = static_cast<std::uint32_t>(per_word.size());
  first_segment_.push_back(0);
  for (const auto& segs : per_word) {
    segments_.insert(segments_.end(), segs.begin(), segs.end());
    first_segment_.push_back(static_cast<std::uint32_t>(segments_.size()));
  }
}

std::uint64_t row_words::load_big_endian(const unsigned char* p) noexcept
{
  auto v = load<std::uint64_t>(p);
  if constexpr (std::endian::native == std::endian::little) v = swap_bytes(v);
  return v;
}

std::uint64_t row_words::whole(const key_code& k, std::uint64_t row, std::uint32_t from) noexcept
{
  const unsigned char* p = k.data + row * k.stride;
  switch (k.type) {
    case column_type::bytes: {
      const std::uint64_t v = load_big_endian(p + from);
      return k.descending ? ~v : v;
    }
    case column_type::u128:
    case column_type::i128: {
      // from 0: the high half (the second 8 bytes on a little-endian host), from 8: the low.
      const bool little = std::endian::native == std::endian::little;
      const bool high = from == 0;
      std::uint64_t v = load<std::uint64_t>(p + (high == little ? 8 : 0));
      if (high && k.type == column_type::i128) v ^= std::uint64_t{1} << 63;
      return k.descending ? ~v : v;
    }
    default: return k.map64(load<std::uint64_t>(p));
  }
}

void row_words::put(const key_code& k, std::uint64_t row, std::uint32_t from,
                    std::uint32_t length, unsigned char* to) noexcept
{
  const unsigned char* p = k.data + row * k.stride;
  unsigned char ordered[16];
  switch (k.type) {
    case column_type::bytes:
      std::memcpy(to, p + from, length);
      if (k.descending)
        for (std::uint32_t i = 0; i < length; ++i) to[i] = static_cast<unsigned char>(~to[i]);
      return;
    case column_type::u32:
    case column_type::i32:
    case column_type::f32: store_big_endian(k.map32(load<std::uint32_t>(p)), ordered); break;
    case column_type::u64:
    case column_type::i64:
    case column_type::f64: store_big_endian(k.map64(load<std::uint64_t>(p)), ordered); break;
    case column_type::u128:
    case column_type::i128: {
      // The machine's byte order: the high half is the second word on a little-endian host.
      const bool little = std::endian::native == std::endian::little;
      std::uint64_t hi = load<std::uint64_t>(p + (little ? 8 : 0));
      std::uint64_t lo = load<std::uint64_t>(p + (little ? 0 : 8));
      if (k.type == column_type::i128) hi ^= std::uint64_t{1} << 63;
      if (k.descending) {
        hi = ~hi;
        lo = ~lo;
      }
      store_big_endian(hi, ordered);
      store_big_endian(lo, ordered + 8);
      break;
    }
  }
  std::memcpy(to, ordered + from, length);
}

void row_words::words_of(std::uint64_t first, std::uint64_t count, std::uint32_t w,
                         std::uint64_t* out) const
{
  const auto n = static_cast<std::int64_t>(count);
#pragma omp parallel for schedule(static) if (count >= parallel_rows)
  for (std::int64_t i = 0; i < n; ++i) out[i] = word(first + static_cast<std::uint64_t>(i), w);
}

template <typename Index>
void row_words::words_of_rows(const Index* rows, std::uint64_t count, std::uint32_t w,
                              std::uint64_t* out) const
{
  const auto n = static_cast<std::int64_t>(count);
#pragma omp parallel for schedule(static) if (count >= parallel_rows)
  for (std::int64_t i = 0; i < n; ++i) out[i] = word(static_cast<std::uint64_t>(rows[i]), w);
}

template void row_words::words_of_rows(const std::uint32_t*, std::uint64_t, std::uint32_t,
                                       std::uint64_t*) const;
template void row_words::words_of_rows(const std::uint64_t*, std::uint64_t, std::uint32_t,
                                       std::uint64_t*) const;

}  // namespace gpusort::detail
