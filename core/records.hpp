// Fixed-width records the sort benchmark's way: a generator of gensort's layout (and of records
// of any other width with the same 10-byte key), and a verifier in the manner of valsort that
// shares no code with the sorts it checks, so that a bug in their key encoding cannot hide
// itself: the order is checked by typed comparisons written in records.cpp, the permutation by
// the 128-bit sum of every record's CRC-32.
#pragma once

#include "core/generate.hpp"

#include <gpusort/rows.hpp>
#include <gpusort/types.hpp>

#include <cstdint>
#include <span>
#include <string>

namespace gpusort {

/// The sort benchmark's record and key sizes.
inline constexpr std::uint32_t gensort_record_bytes = 100;
inline constexpr std::uint32_t record_key_bytes = 10;
/// The largest record generate_records writes and the verifier reads.
inline constexpr std::uint32_t max_record_bytes = std::uint32_t{1} << 20;

/// Whether generate_records accepts `d`. It accepts the distributions whose key of a row is a
/// function of the seed and the row number alone (uniform, gaussian, sorted, reverse, zero,
/// fewunique), so that a file generated in pieces (first_row) equals one generated at once.
/// bucket, staggered and detdupes are refused: they are defined by the array's length, which a
/// piece does not know. nanmix is refused: it is for float keys.
constexpr bool applies_to_records(distribution d) noexcept
{
  switch (d) {
    case distribution::uniform:
    case distribution::gaussian:
    case distribution::sorted:
    case distribution::reverse:
    case distribution::zero:
    case distribution::fewunique: return true;
    case distribution::bucket:
    case distribution::staggered:
    case distribution::detdupes:
    case distribution::nanmix: return false;
  }
  return false;
}

/// Writes `count` records of `record_bytes` (10 to 1 MiB) at `out`, rows first_row to
/// first_row + count - 1. Each starts with a 10-byte key, compared as unsigned bytes:
///   uniform    10 random bytes (a hash of seed and row)
///   gaussian   the first 8 bytes big-endian the mean of 4 uniform 64-bit values, then 2 random
///   sorted     strictly ascending in the row: 0x00 0x00, then the row big-endian
///   reverse    strictly descending in the row: 0xFF 0xFF, then ~row big-endian
///   zero       all keys equal (ten zero bytes)
///   fewunique  one of 16 distinct random keys
/// 100-byte records are gensort's: the key, 0x00 0x11, the row as 32 uppercase hex digits,
/// 0x88 0x99 0xAA 0xBB, 48 bytes of filler (12 runs of 4 equal hex digits from a hash of seed
/// and row), 0xCC 0xDD 0xEE 0xFF. Other sizes: the key, then the row as 8 little-endian bytes where
/// the record has room for them (18 bytes or more), then filler hashed from seed and row, so
/// that a payload that left its key is visible.
/// Record r depends only on (record_bytes, d, seed, first_row + r), never on the thread count.
/// Throws gpusort::invalid_argument for a refused distribution, a size out of bounds, a null
/// `out` with count > 0, or rows past 2^64 - 1.
void generate_records(void* out, std::uint64_t count, std::uint32_t record_bytes, distribution d,
                      std::uint64_t seed, std::uint64_t first_row = 0);

/// valsort's summary of a set of records: their count and the 128-bit sum of the CRC-32
/// (zlib's) of every record, which does not depend on their order; and the number of records
/// whose first 10 bytes (the benchmark's key; all of a shorter record) equal those of the
/// record before, which counts duplicate keys where the records are sorted by that key.
struct records_checksum {
  std::uint64_t count{};
  std::uint64_t sum_hi{};
  std::uint64_t sum_lo{};
  std::uint64_t duplicate_keys{};
};

/// Whether two checksums describe the same multiset of records (count and sum; the duplicates
/// depend on the order, so they are not compared).
constexpr bool same_records(const records_checksum& a, const records_checksum& b) noexcept
{
  return a.count == b.count && a.sum_hi == b.sum_hi && a.sum_lo == b.sum_lo;
}

/// The checksum of `records` (1 byte to 1 MiB each); parallel, one pass.
records_checksum checksum_records(const record_array& records);

struct records_check {
  bool ok{true};
  std::uint64_t first_violation{};  ///< out of order: the first i with record i > record i + 1
  std::uint64_t duplicate_keys{};   ///< records whose keys equal those of the record before
  std::string message;              ///< empty when ok; otherwise what failed and where
};

/// Checks that every record is <= the next by `keys` (at least one), compared lexicographically,
/// the first key first, each in its own direction: bytes as unsigned bytes (memcmp), integers as
/// their C++ types in the machine's byte order (u128/i128: the low 8 bytes first), floats by
/// IEEE 754 totalOrder or by NumPy's order (`floats`; NaNs last in both directions there).
/// No key, a key that reaches past the record, a bytes key of length 0 or another key whose
/// length is neither 0 nor its type's size is a gpusort::invalid_argument that names the key.
/// first_violation is 0 unless the order failed.
records_check check_record_order(const record_array& records, std::span<const key_field> keys,
                                 float_order floats = float_order::total);

/// check_record_order, and that `sorted` is a permutation of the records `original` summed.
records_check verify_records(const record_array& sorted, std::span<const key_field> keys,
                            const records_checksum& original,
                            float_order floats = float_order::total);

}  // namespace gpusort
