// Records the sort benchmark's way, and their verifier. The generator is counter-based like
// core/generate.cpp: every record is a pure function of (seed, row), so the output never depends
// on the thread count and a file generated in pieces equals one generated at once. The verifier
// compares keys by their C++ types straight from the records' bytes and checks the permutation
// with valsort's sum of CRC-32s; it deliberately shares nothing with the sorts' key encoding
// (core/rows/), whose mistakes it exists to catch.
#include "core/records.hpp"

#include "core/counter_rng.hpp"

#include <gpusort/error.hpp>

#include <fmt/format.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

namespace gpusort {

namespace detail {
namespace {

__extension__ using u128 = unsigned __int128;

/// Bytes of records per OpenMP work item: large enough to amortize scheduling, small enough to
/// balance; at least one record.
constexpr std::uint64_t work_bytes = std::uint64_t{1} << 20;

constexpr std::uint64_t rows_per_item(std::uint32_t record_bytes) noexcept
{
  return std::max<std::uint64_t>(1, work_bytes / record_bytes);
}

/// Independent streams from one seed. Numbered apart from core/generate.cpp's so that records
/// and key arrays from the same seed are unrelated.
enum class stream : std::uint64_t { key = 101, gauss1, gauss2, gauss3, noise, table, pick };

using detail::counter_rng;
using detail::golden;
using detail::mix64;

void put_big_endian(unsigned char* out, std::uint64_t v) noexcept
{
  for (int b = 0; b < 8; ++b) out[b] = static_cast<unsigned char>(v >> (56 - 8 * b));
}

/// The low `bytes` (at most 8) bytes of v, least significant first.
void put_little_endian(unsigned char* out, std::uint64_t v, std::uint32_t bytes) noexcept
{
  for (std::uint32_t b = 0; b < bytes; ++b) out[b] = static_cast<unsigned char>(v >> (8 * b));
}

constexpr unsigned char hex_digit(std::uint64_t v) noexcept
{
  return static_cast<unsigned char>("0123456789ABCDEF"[v & 0xF]);
}

using record_key = std::array<unsigned char, record_key_bytes>;

/// The key of every row for one distribution and seed. `noise` is the row's draw that also
/// makes its filler: as in gensort, its top 16 bits end a random key and its low 48 bits make
/// the filler of a 100-byte record.
class key_maker {
 public:
  key_maker(distribution d, std::uint64_t seed)
      : d_{d}, key_{seed, stream::key}, g1_{seed, stream::gauss1}, g2_{seed, stream::gauss2},
        g3_{seed, stream::gauss3}, pick_{seed, stream::pick}
  {
    if (d != distribution::fewunique) return;
    // 80 random bits collide almost never, but "16 distinct keys" is the definition.
    const counter_rng table_rng{seed, stream::table};
    std::size_t found = 0;
    for (std::uint64_t k = 0; found < table_.size(); k += 2) {
      record_key candidate{};
      put_big_endian(candidate.data(), table_rng(k));
      const std::uint64_t tail = table_rng(k + 1);
      candidate[8] = static_cast<unsigned char>(tail >> 56);
      candidate[9] = static_cast<unsigned char>(tail >> 48);
      if (std::find(table_.begin(), table_.begin() + found, candidate) == table_.begin() + found)
        table_[found++] = candidate;
    }
  }

  void operator()(std::uint64_t row, std::uint64_t noise, unsigned char* out) const noexcept
  {
    const auto random_tail = [&] {
      out[8] = static_cast<unsigned char>(noise >> 56);
      out[9] = static_cast<unsigned char>(noise >> 48);
    };
    switch (d_) {
      case distribution::uniform:
        put_big_endian(out, key_(row));
        random_tail();
        return;
      case distribution::gaussian:
        put_big_endian(out, (key_(row) >> 2) + (g1_(row) >> 2) + (g2_(row) >> 2) +
                                (g3_(row) >> 2));
        random_tail();
        return;
      case distribution::sorted:
        out[0] = 0x00;
        out[1] = 0x00;
        put_big_endian(out + 2, row);
        return;
      case distribution::reverse:
        out[0] = 0xFF;
        out[1] = 0xFF;
        put_big_endian(out + 2, ~row);
        return;
      case distribution::fewunique: {
        const record_key& key = table_[pick_(row) >> 60];
        std::memcpy(out, key.data(), key.size());
        return;
      }
      case distribution::zero:
      case distribution::bucket:  // the refused ones never get here (applies_to_records)
      case distribution::staggered:
      case distribution::detdupes:
      case distribution::nanmix: std::memset(out, 0, record_key_bytes); return;
    }
  }

 private:
  distribution d_;
  counter_rng key_;
  counter_rng g1_;
  counter_rng g2_;
  counter_rng g3_;
  counter_rng pick_;
  std::array<record_key, 16> table_{};
};

void write_record(unsigned char* rec, std::uint32_t record_bytes, std::uint64_t row,
                  const key_maker& keys, const counter_rng& noise_rng) noexcept
{
  const std::uint64_t noise = noise_rng(row);
  keys(row, noise, rec);
  if (record_bytes == gensort_record_bytes) {
    rec[10] = 0x00;
    rec[11] = 0x11;
    // gensort's row numbers are 128-bit; ours fit the low 64 bits.
    std::memset(rec + 12, '0', 16);
    for (int i = 0; i < 16; ++i) rec[28 + i] = hex_digit(row >> (60 - 4 * i));
    rec[44] = 0x88;
    rec[45] = 0x99;
    rec[46] = 0xAA;
    rec[47] = 0xBB;
    for (int i = 0; i < 12; ++i) std::memset(rec + 48 + 4 * i, hex_digit(noise >> (44 - 4 * i)), 4);
    rec[96] = 0xCC;
    rec[97] = 0xDD;
    rec[98] = 0xEE;
    rec[99] = 0xFF;
    return;
  }
  std::uint32_t at = record_key_bytes;
  if (record_bytes - at >= 8) {
    put_little_endian(rec + at, row, 8);
    at += 8;
  }
  for (std::uint64_t word = 0; at < record_bytes; ++word) {
    const std::uint32_t take = std::min<std::uint32_t>(8, record_bytes - at);
    put_little_endian(rec + at, mix64(noise + (word + 1) * golden), take);
    at += take;
  }
}

std::string refusal(distribution d)
{
  const std::string head =
      fmt::format("generate_records: distribution {} does not apply to records: ", name_of(d));
  if (d == distribution::nanmix) return head + "it makes float keys, and a record's key is bytes";
  return head + "it is defined by the array's length, which a piece generated from first_row "
                "does not know";
}

void check_record_array(const record_array& records, const char* what)
{
  if (records.record_bytes == 0 || records.record_bytes > max_record_bytes)
    throw invalid_argument{fmt::format("{}: a record is 1 to {} bytes long, not {}", what,
                                       max_record_bytes, records.record_bytes)};
  if (records.count > 0 && records.data == nullptr)
    throw invalid_argument{fmt::format("{}: no data for {} records", what, records.count)};
}

void check_key_fields(const record_array& records, std::span<const key_field> keys)
{
  if (keys.empty()) throw invalid_argument{"checking the order of records needs a key"};
  for (std::size_t k = 0; k < keys.size(); ++k) {
    const key_field& f = keys[k];
    const std::string which =
        fmt::format("key {} ({} at offset {})", k + 1, name_of(f.type), f.offset);
    if (f.type == column_type::bytes && f.length == 0)
      throw invalid_argument{which + ": a bytes key of length 0"};
    if (f.type != column_type::bytes && f.length != 0 && f.length != size_of(f.type))
      throw invalid_argument{fmt::format("{}: a length of {} bytes; a {} key is {} bytes", which,
                                         f.length, name_of(f.type), size_of(f.type))};
    const std::uint64_t end = std::uint64_t{f.offset} + f.bytes();
    if (end > records.record_bytes)
      throw invalid_argument{fmt::format("{}: {} bytes ending at byte {}, beyond the {}-byte "
                                         "record",
                                         which, f.bytes(), end, records.record_bytes)};
  }
}

// ---- The comparison: each type by its own C++ operators, loaded with memcpy. ----

template <typename T>
T load(const unsigned char* p) noexcept
{
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename T>
int three_way(T a, T b) noexcept
{
  return a < b ? -1 : (b < a ? 1 : 0);
}

/// The two 64-bit halves of a 128-bit integer: machine order, so the high half comes second
/// on a little-endian machine.
constexpr unsigned high_half_at = std::endian::native == std::endian::little ? 8 : 0;
constexpr unsigned low_half_at = 8 - high_half_at;

template <typename F>
auto nan_payload(F x) noexcept
{
  using bits = std::conditional_t<sizeof(F) == 4, std::uint32_t, std::uint64_t>;
  constexpr bits mantissa = (bits{1} << (std::numeric_limits<F>::digits - 1)) - 1;
  return static_cast<bits>(std::bit_cast<bits>(x) & mantissa);
}

/// IEEE 754 totalOrder, from its definition (5.10): every value with the sign bit set below
/// every value without it; with equal signs, magnitudes order positives and reverse
/// negatives, a NaN's magnitude above infinity and NaNs among themselves by payload (the quiet
/// bit first, so signaling below quiet).
template <typename F>
int total_order(F a, F b) noexcept
{
  const bool a_negative = std::signbit(a);
  if (a_negative != std::signbit(b)) return a_negative ? -1 : 1;
  int magnitude = 0;
  const bool a_nan = std::isnan(a);
  const bool b_nan = std::isnan(b);
  if (a_nan && b_nan) {
    magnitude = three_way(nan_payload(a), nan_payload(b));
  } else if (a_nan || b_nan) {
    magnitude = a_nan ? 1 : -1;
  } else {
    magnitude = three_way(std::fabs(a), std::fabs(b));
  }
  return a_negative ? -magnitude : magnitude;
}

/// NumPy's order: NaNs after every number in both directions and equal among themselves;
/// numbers by value (-0.0 == +0.0), reversed when descending. The direction is applied here,
/// since the NaNs ignore it.
template <typename F>
int numpy_order(F a, F b, bool descending) noexcept
{
  const bool a_nan = std::isnan(a);
  const bool b_nan = std::isnan(b);
  if (a_nan || b_nan) return a_nan == b_nan ? 0 : (a_nan ? 1 : -1);
  const int c = three_way(a, b);
  return descending ? -c : c;
}

template <typename F>
int compare_float(const unsigned char* a, const unsigned char* b, bool descending,
                  float_order floats) noexcept
{
  const F x = load<F>(a);
  const F y = load<F>(b);
  if (floats == float_order::numpy) return numpy_order(x, y, descending);
  const int c = total_order(x, y);
  return descending ? -c : c;
}

/// <0, 0, >0 as record a's key `f` sorts before, with or after record b's.
int compare_key(const key_field& f, const unsigned char* a, const unsigned char* b,
                float_order floats) noexcept
{
  a += f.offset;
  b += f.offset;
  const bool descending = f.direction == order::descending;
  int c = 0;
  switch (f.type) {
    case column_type::u32: c = three_way(load<std::uint32_t>(a), load<std::uint32_t>(b)); break;
    case column_type::i32: c = three_way(load<std::int32_t>(a), load<std::int32_t>(b)); break;
    case column_type::u64: c = three_way(load<std::uint64_t>(a), load<std::uint64_t>(b)); break;
    case column_type::i64: c = three_way(load<std::int64_t>(a), load<std::int64_t>(b)); break;
    case column_type::f32: return compare_float<float>(a, b, descending, floats);
    case column_type::f64: return compare_float<double>(a, b, descending, floats);
    case column_type::u128:
      c = three_way(load<std::uint64_t>(a + high_half_at), load<std::uint64_t>(b + high_half_at));
      if (c == 0)
        c = three_way(load<std::uint64_t>(a + low_half_at), load<std::uint64_t>(b + low_half_at));
      break;
    case column_type::i128:
      c = three_way(load<std::int64_t>(a + high_half_at), load<std::int64_t>(b + high_half_at));
      if (c == 0)
        c = three_way(load<std::uint64_t>(a + low_half_at), load<std::uint64_t>(b + low_half_at));
      break;
    case column_type::bytes: {
      const int m = std::memcmp(a, b, f.length);
      c = (m > 0) - (m < 0);
      break;
    }
  }
  return descending ? -c : c;
}

/// The first key on which two records differ (keys.size() when they tie), and the sign.
struct record_comparison {
  std::size_t key{};
  int sign{};
};

record_comparison compare_records(std::span<const key_field> keys, const unsigned char* a,
                                  const unsigned char* b, float_order floats) noexcept
{
  for (std::size_t k = 0; k < keys.size(); ++k) {
    const int c = compare_key(keys[k], a, b, floats);
    if (c != 0) return {k, c};
  }
  return {keys.size(), 0};
}

template <typename F>
std::string describe_float(F x)
{
  char text[64];
  const auto result = std::to_chars(text, text + sizeof text, x);
  std::string out{text, result.ptr};
  if (std::isnan(x))
    out += fmt::format(" (bits {:#0{}x})", std::bit_cast<std::conditional_t<
                                               sizeof(F) == 4, std::uint32_t, std::uint64_t>>(x),
                       2 + 2 * sizeof(F));
  return out;
}

/// A key's value for a message.
std::string describe_key(const key_field& f, const unsigned char* rec)
{
  const unsigned char* p = rec + f.offset;
  switch (f.type) {
    case column_type::u32: return std::to_string(load<std::uint32_t>(p));
    case column_type::i32: return std::to_string(load<std::int32_t>(p));
    case column_type::u64: return std::to_string(load<std::uint64_t>(p));
    case column_type::i64: return std::to_string(load<std::int64_t>(p));
    case column_type::f32: return describe_float(load<float>(p));
    case column_type::f64: return describe_float(load<double>(p));
    case column_type::u128:
    case column_type::i128:
      return fmt::format("0x{:016x}{:016x}", load<std::uint64_t>(p + high_half_at),
                         load<std::uint64_t>(p + low_half_at));
    case column_type::bytes: {
      // Long keys are shown by their start: 16 bytes tell where they differ in nearly all cases.
      constexpr std::uint32_t shown = 16;
      std::string out;
      for (std::uint32_t i = 0; i < std::min(f.length, shown); ++i)
        out += fmt::format("{}{:02x}", i == 0 ? "" : " ", p[i]);
      if (f.length > shown) out += " ...";
      return out;
    }
  }
  return "?";
}

std::string describe_checksum(const records_checksum& c)
{
  if (c.sum_hi == 0) return fmt::format("{:x} ({} records)", c.sum_lo, c.count);
  return fmt::format("{:x}{:016x} ({} records)", c.sum_hi, c.sum_lo, c.count);
}

}  // namespace
}  // namespace detail

void generate_records(void* out, std::uint64_t count, std::uint32_t record_bytes, distribution d,
                      std::uint64_t seed, std::uint64_t first_row)
{
  if (record_bytes < record_key_bytes)
    throw invalid_argument{fmt::format("generate_records: a record holds a {}-byte key, so it "
                                       "is at least {} bytes long, not {}",
                                       record_key_bytes, record_key_bytes, record_bytes)};
  if (record_bytes > max_record_bytes)
    throw invalid_argument{fmt::format("generate_records: a record is at most {} bytes long, "
                                       "not {}",
                                       max_record_bytes, record_bytes)};
  if (!applies_to_records(d)) throw invalid_argument{detail::refusal(d)};
  if (count == 0) return;
  if (out == nullptr)
    throw invalid_argument{fmt::format("generate_records: no memory for {} records", count)};
  if (count - 1 > std::numeric_limits<std::uint64_t>::max() - first_row)
    throw invalid_argument{fmt::format("generate_records: {} rows from row {} pass row 2^64 - 1",
                                       count, first_row)};
  if (count > std::numeric_limits<std::size_t>::max() / record_bytes)
    throw invalid_argument{fmt::format("generate_records: {} records of {} bytes exceed the "
                                       "address space",
                                       count, record_bytes)};

  const detail::key_maker keys{d, seed};
  const detail::counter_rng noise{seed, detail::stream::noise};
  auto* base = static_cast<unsigned char*>(out);
  const std::uint64_t per_item = detail::rows_per_item(record_bytes);
  const std::uint64_t items = (count + per_item - 1) / per_item;
#pragma omp parallel for schedule(static) if (items > 1)
  for (std::uint64_t item = 0; item < items; ++item) {
    const std::uint64_t end = std::min(count, (item + 1) * per_item);
    for (std::uint64_t i = item * per_item; i < end; ++i)
      detail::write_record(base + i * record_bytes, record_bytes, first_row + i, keys, noise);
  }
}

records_checksum checksum_records(const record_array& records)
{
  detail::check_record_array(records, "checksum_records");
  const auto* base = static_cast<const unsigned char*>(records.data);
  const std::uint64_t n = records.count;
  const std::uint32_t bytes = records.record_bytes;
  const std::uint32_t key_bytes = std::min(bytes, record_key_bytes);
  const std::uint64_t per_item = detail::rows_per_item(bytes);
  const std::uint64_t items = (n + per_item - 1) / per_item;
  // 128 bits as valsort sums: 2^64 records of 32-bit CRCs cannot overflow them.
  detail::u128 sum = 0;
  std::uint64_t duplicates = 0;
#pragma omp parallel if (items > 1)
  {
    detail::u128 my_sum = 0;
    std::uint64_t my_duplicates = 0;
#pragma omp for schedule(static) nowait
    for (std::uint64_t item = 0; item < items; ++item) {
      const std::uint64_t end = std::min(n, (item + 1) * per_item);
      for (std::uint64_t i = item * per_item; i < end; ++i) {
        const unsigned char* rec = base + i * bytes;
        my_sum += ::crc32(0L, rec, static_cast<uInt>(bytes));
        if (i > 0 && std::memcmp(rec - bytes, rec, key_bytes) == 0) ++my_duplicates;
      }
    }
#pragma omp critical(gpusort_checksum_records)
    {
      sum += my_sum;
      duplicates += my_duplicates;
    }
  }
  return records_checksum{n, static_cast<std::uint64_t>(sum >> 64), static_cast<std::uint64_t>(sum),
                          duplicates};
}

records_check check_record_order(const record_array& records, std::span<const key_field> keys,
                                 float_order floats)
{
  detail::check_record_array(records, "check_record_order");
  detail::check_key_fields(records, keys);
  if (records.count < 2) return records_check{};
  const auto* base = static_cast<const unsigned char*>(records.data);
  const std::uint32_t bytes = records.record_bytes;
  // Pairs (i, i + 1) are split among the threads, so every pair, across the items' boundaries
  // too, is compared exactly once.
  const std::uint64_t pairs = records.count - 1;
  const std::uint64_t per_item = detail::rows_per_item(bytes);
  const std::uint64_t items = (pairs + per_item - 1) / per_item;
  std::uint64_t first = pairs;  // pairs: none
  std::uint64_t duplicates = 0;
#pragma omp parallel for schedule(static) reduction(min : first) reduction(+ : duplicates) \
    if (items > 1)
  for (std::uint64_t item = 0; item < items; ++item) {
    const std::uint64_t end = std::min(pairs, (item + 1) * per_item);
    for (std::uint64_t i = item * per_item; i < end; ++i) {
      const unsigned char* rec = base + i * bytes;
      const int sign = detail::compare_records(keys, rec, rec + bytes, floats).sign;
      if (sign > 0) {
        first = std::min(first, i);
      } else if (sign == 0) {
        ++duplicates;
      }
    }
  }
  if (first == pairs) return records_check{true, 0, duplicates, {}};

  const unsigned char* a = base + first * bytes;
  const unsigned char* b = a + bytes;
  const std::size_t k = detail::compare_records(keys, a, b, floats).key;
  const key_field& f = keys[k];
  // "then" rather than < or >: NumPy's NaNs are last in either direction.
  return records_check{
      false, first, duplicates,
      fmt::format("records {} and {} are out of order by key {} ({} at offset {}, {}): {} then {}",
                  first, first + 1, k + 1, name_of(f.type), f.offset,
                  f.direction == order::descending ? "descending" : "ascending",
                  detail::describe_key(f, a), detail::describe_key(f, b))};
}

records_check verify_records(const record_array& sorted, std::span<const key_field> keys,
                             const records_checksum& original, float_order floats)
{
  detail::check_record_array(sorted, "verify_records");
  detail::check_key_fields(sorted, keys);
  if (sorted.count != original.count) {
    return records_check{false, 0, 0,
                         fmt::format("count mismatch: {} records, the original had {}",
                                     sorted.count, original.count)};
  }
  records_check order_result = check_record_order(sorted, keys, floats);
  if (!order_result.ok) return order_result;
  const records_checksum got = checksum_records(sorted);
  if (!same_records(got, original)) {
    return records_check{false, 0, order_result.duplicate_keys,
                         "not a permutation: checksum " + detail::describe_checksum(got) +
                             " vs " + detail::describe_checksum(original) + " of the original"};
  }
  return order_result;
}

}  // namespace gpusort
