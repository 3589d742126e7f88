// References for sorts of rows, written from each type's definition (key_before of
// stable_reference.hpp for the six key types, memcmp for bytes, the halves of 128-bit
// integers) with std::stable_sort, never with the words the engine compares; records and
// layouts for the contract the CPU engine and the GPU tests share.
#pragma once

#include "tests/support/stable_reference.hpp"

#include <gpusort/rows.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace gpusort::test {

using bytes_t = std::vector<unsigned char>;

template <typename T>
T load(const unsigned char* p)
{
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

/// -1, 0, 1: a against b by one key, in its order.
inline int compare_key(const unsigned char* a, const unsigned char* b, const key_field& f,
                       float_order floats)
{
  const auto by = [&]<typename K>() {
    const K x = load<K>(a);
    const K y = load<K>(b);
    if (key_before(x, y, f.direction, floats)) return -1;
    if (key_before(y, x, f.direction, floats)) return 1;
    return 0;
  };
  const auto flip = [&](int c) { return f.direction == order::ascending ? c : -c; };
  switch (f.type) {
    case column_type::u32: return by.template operator()<std::uint32_t>();
    case column_type::i32: return by.template operator()<std::int32_t>();
    case column_type::u64: return by.template operator()<std::uint64_t>();
    case column_type::i64: return by.template operator()<std::int64_t>();
    case column_type::f32: return by.template operator()<float>();
    case column_type::f64: return by.template operator()<double>();
    case column_type::u128:
    case column_type::i128: {
      // Little-endian: the high half is the second 8 bytes.
      const auto hi_a = load<std::uint64_t>(a + 8);
      const auto hi_b = load<std::uint64_t>(b + 8);
      if (hi_a != hi_b) {
        if (f.type == column_type::i128)
          return flip(static_cast<std::int64_t>(hi_a) < static_cast<std::int64_t>(hi_b) ? -1
                                                                                          : 1);
        return flip(hi_a < hi_b ? -1 : 1);
      }
      const auto lo_a = load<std::uint64_t>(a);
      const auto lo_b = load<std::uint64_t>(b);
      return lo_a == lo_b ? 0 : flip(lo_a < lo_b ? -1 : 1);
    }
    case column_type::bytes: {
      const int c = std::memcmp(a, b, f.length);
      return c == 0 ? 0 : flip(c < 0 ? -1 : 1);
    }
  }
  return 0;
}

/// The stable order of records by `fields`, from std::stable_sort.
inline std::vector<std::uint64_t> reference_order(const bytes_t& records, std::uint32_t r,
                                                  const std::vector<key_field>& fields,
                                                  float_order floats)
{
  std::vector<std::uint64_t> idx(records.size() / r);
  std::iota(idx.begin(), idx.end(), std::uint64_t{0});
  std::stable_sort(idx.begin(), idx.end(), [&](std::uint64_t a, std::uint64_t b) {
    for (const key_field& f : fields) {
      const int c = compare_key(records.data() + a * r + f.offset,
                                records.data() + b * r + f.offset, f, floats);
      if (c != 0) return c < 0;
    }
    return false;
  });
  return idx;
}

inline bytes_t gathered(const bytes_t& records, std::uint32_t r,
                        const std::vector<std::uint64_t>& idx)
{
  bytes_t out(records.size());
  for (std::size_t i = 0; i < idx.size(); ++i)
    std::memcpy(out.data() + i * r, records.data() + idx[i] * r, r);
  return out;
}

/// A key value of `f` for row i drawn from `distinct` values (0: any), with NaNs of both signs,
/// both zeros and infinities among float keys.
inline void write_key(unsigned char* p, const key_field& f, std::uint64_t distinct,
                      std::mt19937_64& rng)
{
  const std::uint64_t draw = distinct == 0 ? rng() : rng() % distinct;
  const auto mixed = [&](std::uint64_t v) {
    // Spread the drawn value over the type's range: high bits and sign bits vary too.
    return distinct == 0 ? v : (v * 0x9e3779b97f4a7c15ull) ^ (v << 61);
  };
  switch (f.type) {
    case column_type::u32:
    case column_type::i32: {
      const auto v = static_cast<std::uint32_t>(mixed(draw) >> 32);
      std::memcpy(p, &v, 4);
      return;
    }
    case column_type::u64:
    case column_type::i64: {
      const std::uint64_t v = mixed(draw);
      std::memcpy(p, &v, 8);
      return;
    }
    case column_type::f32:
    case column_type::f64: {
      static const double specials[] = {std::numeric_limits<double>::quiet_NaN(),
                                        -std::numeric_limits<double>::quiet_NaN(),
                                        0.0,
                                        -0.0,
                                        std::numeric_limits<double>::infinity(),
                                        -std::numeric_limits<double>::infinity()};
      // One key in 8 a NaN of either sign, a zero of either sign or an infinity.
      const double v =
          rng() % 8 == 0 ? specials[draw % 6] : static_cast<double>(draw % 1000) - 500.5;
      if (f.type == column_type::f64) {
        std::memcpy(p, &v, 8);
      } else {
        const auto x = static_cast<float>(v);
        std::memcpy(p, &x, 4);
      }
      return;
    }
    case column_type::u128:
    case column_type::i128: {
      // Ties in the high half, differences in the low one, and the reverse.
      const std::uint64_t hi = mixed(draw % 5);
      const std::uint64_t lo = mixed(draw / 5);
      std::memcpy(p, &lo, 8);
      std::memcpy(p + 8, &hi, 8);
      return;
    }
    case column_type::bytes:
      for (std::uint32_t i = 0; i < f.length; ++i)
        p[i] = static_cast<unsigned char>(i + 1 < f.length ? (draw >> (8 * (i % 8))) & 3
                                                           : draw & 0xff);
      return;
  }
}

inline bytes_t make_records(std::uint64_t n, std::uint32_t r,
                            const std::vector<key_field>& fields, std::uint64_t distinct,
                            std::uint64_t seed)
{
  std::mt19937_64 rng{seed};
  bytes_t records(n * r);
  for (auto& b : records) b = static_cast<unsigned char>(rng());
  for (std::uint64_t i = 0; i < n; ++i)
    for (const key_field& f : fields)
      write_key(records.data() + i * r + f.offset, f, distinct, rng);
  return records;
}

struct layout_case {
  std::string name;
  std::uint32_t record_bytes;
  std::vector<key_field> fields;
};

/// Records of 4, 12, 100 and 4096 bytes; keys at the start, the middle and the end; several
/// keys of mixed types and orders.
inline std::vector<layout_case> layouts()
{
  using ct = column_type;
  const auto asc = order::ascending;
  const auto desc = order::descending;
  return {
      {"u32 alone in 4 bytes", 4, {{ct::u32, 0, 0, asc}}},
      {"bytes of 4 in 4 bytes desc", 4, {{ct::bytes, 0, 4, desc}}},
      {"i32 end then u64 start of 12", 12, {{ct::i32, 8, 0, asc}, {ct::u64, 0, 0, desc}}},
      // A 128-bit key whose words start inside it: bytes 4-11 and 12-19 of a u128.
      {"u32 then u128 of 20", 20, {{ct::u32, 0, 0, asc}, {ct::u128, 4, 0, asc}}},
      {"bytes 3 then i128 desc of 20", 20, {{ct::bytes, 16, 3, asc}, {ct::i128, 0, 0, desc}}},
      {"f32 middle of 12, then bytes", 12, {{ct::f32, 4, 0, desc}, {ct::bytes, 0, 3, asc}}},
      {"sort benchmark: 10 bytes at 0 of 100", 100, {{ct::bytes, 0, 10, asc}}},
      {"u128 middle, i64 end of 100", 100, {{ct::u128, 40, 0, asc}, {ct::i64, 92, 0, desc}}},
      {"i128 desc, f64, bytes 13", 100,
       {{ct::i128, 3, 0, desc}, {ct::f64, 50, 0, asc}, {ct::bytes, 87, 13, asc}}},
      {"4 KiB: u64 end, bytes 100 middle, i32 start", 4096,
       {{ct::u64, 4088, 0, asc}, {ct::bytes, 2000, 100, desc}, {ct::i32, 0, 0, asc}}},
  };
}

inline std::string trace(const layout_case& c, std::uint64_t n, std::uint64_t distinct,
                         float_order floats)
{
  return c.name + " n=" + std::to_string(n) + " distinct=" + std::to_string(distinct) +
         (floats == float_order::numpy ? " numpy" : " total");
}

}  // namespace gpusort::test
