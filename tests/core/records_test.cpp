// Records the sort benchmark's way: gensort's layout byte for byte, determinism, the
// distributions and refusals of the generator; valsort's checksum; and the order check against a
// reference comparator written here differently (floats by the sign-flip of their bits rather
// than by classification, 128-bit integers as __int128) on hand-built records of every key type.
#include "core/records.hpp"

#include <gpusort/error.hpp>
#include <gpusort/rows.hpp>

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <span>
#include <string>
#include <vector>

namespace {

using gpusort::column_type;
using gpusort::distribution;
using gpusort::float_order;
using gpusort::key_field;
using gpusort::order;
using gpusort::record_array;

__extension__ using u128 = unsigned __int128;
__extension__ using i128 = __int128;

using bytes_t = std::vector<unsigned char>;

constexpr distribution accepted[] = {distribution::uniform, distribution::gaussian,
                                     distribution::sorted,  distribution::reverse,
                                     distribution::zero,    distribution::fewunique};

bytes_t make(std::uint64_t n, std::uint32_t record_bytes, distribution d, std::uint64_t seed,
             std::uint64_t first_row = 0)
{
  bytes_t out(n * record_bytes);
  gpusort::generate_records(out.data(), n, record_bytes, d, seed, first_row);
  return out;
}

record_array view(const bytes_t& data, std::uint32_t record_bytes)
{
  return {data.data(), data.size() / record_bytes, record_bytes};
}

bool mentions(const std::string& text, const std::string& part)
{
  return text.find(part) != std::string::npos;
}

/// Restores the OpenMP thread count when a test ends.
class thread_count_guard {
 public:
  thread_count_guard() : saved_{omp_get_max_threads()} {}
  ~thread_count_guard() { omp_set_num_threads(saved_); }
  thread_count_guard(const thread_count_guard&) = delete;
  thread_count_guard& operator=(const thread_count_guard&) = delete;

 private:
  int saved_;
};

// ------------------------------------------------------------------------------------------
// The reference comparator

template <typename T>
T load(const unsigned char* p)
{
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

template <typename T>
int sign_of_difference(const T& a, const T& b)
{
  return (b < a) - (a < b);
}

template <typename T>
int difference(const unsigned char* a, const unsigned char* b)
{
  return sign_of_difference(load<T>(a), load<T>(b));
}

/// totalOrder through the usual bit trick: negative values have every bit flipped, the others
/// only the sign bit, and the results compare as unsigned integers.
template <typename F>
int reference_total(F a, F b)
{
  using bits = std::conditional_t<sizeof(F) == 4, std::uint32_t, std::uint64_t>;
  constexpr bits sign = bits{1} << (8 * sizeof(F) - 1);
  const auto flip = [](bits x) { return static_cast<bits>((x & sign) != 0 ? ~x : x | sign); };
  return sign_of_difference(flip(std::bit_cast<bits>(a)), flip(std::bit_cast<bits>(b)));
}

int reference_key(const key_field& f, const unsigned char* a, const unsigned char* b,
                  float_order floats)
{
  a += f.offset;
  b += f.offset;
  const bool down = f.direction == order::descending;
  int c = 0;
  switch (f.type) {
    case column_type::u32: c = difference<std::uint32_t>(a, b); break;
    case column_type::i32: c = difference<std::int32_t>(a, b); break;
    case column_type::u64: c = difference<std::uint64_t>(a, b); break;
    case column_type::i64: c = difference<std::int64_t>(a, b); break;
    case column_type::u128: c = difference<u128>(a, b); break;
    case column_type::i128: c = difference<i128>(a, b); break;
    case column_type::f32:
    case column_type::f64: {
      const double x = f.type == column_type::f32 ? double{load<float>(a)} : load<double>(a);
      const double y = f.type == column_type::f32 ? double{load<float>(b)} : load<double>(b);
      if (floats == float_order::numpy) {
        if (std::isnan(x) || std::isnan(y)) return std::isnan(x) - std::isnan(y);
        c = sign_of_difference(x, y);
      } else {
        c = f.type == column_type::f32 ? reference_total(load<float>(a), load<float>(b))
                                       : reference_total(x, y);
      }
      break;
    }
    case column_type::bytes:
      c = std::lexicographical_compare(a, a + f.length, b, b + f.length)   ? -1
          : std::lexicographical_compare(b, b + f.length, a, a + f.length) ? 1
                                                                            : 0;
      break;
  }
  return down ? -c : c;
}

int reference_compare(std::span<const key_field> keys, const unsigned char* a,
                      const unsigned char* b, float_order floats)
{
  for (const key_field& f : keys)
    if (const int c = reference_key(f, a, b, floats); c != 0) return c;
  return 0;
}

/// Records stably sorted by the reference comparator.
bytes_t reference_sort(const bytes_t& data, std::uint32_t record_bytes,
                       std::span<const key_field> keys, float_order floats)
{
  const std::size_t n = data.size() / record_bytes;
  std::vector<std::size_t> index(n);
  std::iota(index.begin(), index.end(), std::size_t{0});
  std::stable_sort(index.begin(), index.end(), [&](std::size_t i, std::size_t j) {
    return reference_compare(keys, data.data() + i * record_bytes,
                             data.data() + j * record_bytes, floats) < 0;
  });
  bytes_t out(data.size());
  for (std::size_t i = 0; i < n; ++i)
    std::memcpy(out.data() + i * record_bytes, data.data() + index[i] * record_bytes,
                record_bytes);
  return out;
}

// ------------------------------------------------------------------------------------------
// Generator

TEST(RecordGenerate, GensortLayoutByteForByte)
{
  for (const std::uint64_t first_row :
       {std::uint64_t{0}, std::uint64_t{1000}, std::uint64_t{0xDEADBEEF12345678ULL}}) {
    const std::uint64_t n = 37;
    const bytes_t data = make(n, 100, distribution::uniform, 5, first_row);
    for (std::uint64_t i = 0; i < n; ++i) {
      const unsigned char* rec = data.data() + i * 100;
      SCOPED_TRACE("row " + std::to_string(first_row + i));
      EXPECT_EQ(rec[10], 0x00);
      EXPECT_EQ(rec[11], 0x11);
      char hex[40];
      std::snprintf(hex, sizeof hex, "%016llX%016llX", 0ULL,
                    static_cast<unsigned long long>(first_row + i));
      EXPECT_EQ(std::string(reinterpret_cast<const char*>(rec + 12), 32), std::string(hex));
      EXPECT_EQ(rec[44], 0x88);
      EXPECT_EQ(rec[45], 0x99);
      EXPECT_EQ(rec[46], 0xAA);
      EXPECT_EQ(rec[47], 0xBB);
      for (int run = 0; run < 12; ++run) {
        const unsigned char c = rec[48 + 4 * run];
        EXPECT_TRUE((c >= '0' && c <= '9') || (c >= 'A' && c <= 'F')) << int{c};
        for (int k = 1; k < 4; ++k) EXPECT_EQ(rec[48 + 4 * run + k], c);
      }
      EXPECT_EQ(rec[96], 0xCC);
      EXPECT_EQ(rec[97], 0xDD);
      EXPECT_EQ(rec[98], 0xEE);
      EXPECT_EQ(rec[99], 0xFF);
    }
  }
}

TEST(RecordGenerate, GensortFillerVariesWithTheRow)
{
  const bytes_t data = make(101, 100, distribution::zero, 8);
  std::set<std::string> fillers;
  for (std::size_t i = 0; i < 101; ++i)
    fillers.insert(std::string(reinterpret_cast<const char*>(data.data() + i * 100 + 48), 48));
  // 48 random bits each: 101 rows collide almost never.
  EXPECT_EQ(fillers.size(), 101U);
}

TEST(RecordGenerate, OtherSizesCarryTheRowAndAFiller)
{
  for (const std::uint32_t size : {10U, 12U, 17U, 18U, 19U, 64U, 99U, 101U, 4096U}) {
    SCOPED_TRACE("record_bytes " + std::to_string(size));
    const std::uint64_t first_row = 77;
    const std::uint64_t n = 13;
    const bytes_t data = make(n, size, distribution::zero, 3, first_row);
    std::set<std::string> payloads;
    for (std::uint64_t i = 0; i < n; ++i) {
      const unsigned char* rec = data.data() + i * size;
      for (std::uint32_t b = 0; b < 10; ++b) EXPECT_EQ(rec[b], 0);
      if (size >= 18) {
        EXPECT_EQ(load<std::uint64_t>(rec + 10), first_row + i);
      }
      payloads.insert(std::string(reinterpret_cast<const char*>(rec) + 10, size - 10));
    }
    // Every payload differs, so a record that left its key is visible (10-byte records have
    // none).
    EXPECT_EQ(payloads.size(), size == 10 ? 1U : n);
  }
}

TEST(RecordGenerate, DeterministicAcrossThreadCounts)
{
  const thread_count_guard guard;
  // Several work items per array in every size, so that 4 threads split it.
  const std::pair<std::uint32_t, std::uint64_t> shapes[] = {{100, 30011}, {4096, 1009},
                                                            {33, 100003}};
  for (const distribution d : accepted) {
    for (const auto& [size, n] : shapes) {
      SCOPED_TRACE(std::string{gpusort::name_of(d)} + ", " + std::to_string(size) + " bytes");
      omp_set_num_threads(1);
      const bytes_t one = make(n, size, d, 42, 9);
      omp_set_num_threads(4);
      const bytes_t four = make(n, size, d, 42, 9);
      EXPECT_TRUE(one == four);
    }
  }
}

TEST(RecordGenerate, PiecesEqualTheWhole)
{
  for (const distribution d : accepted) {
    SCOPED_TRACE(std::string{gpusort::name_of(d)});
    const bytes_t whole = make(1009, 100, d, 17);
    bytes_t pieces = make(500, 100, d, 17, 0);
    const bytes_t rest = make(509, 100, d, 17, 500);
    pieces.insert(pieces.end(), rest.begin(), rest.end());
    EXPECT_TRUE(whole == pieces);
  }
}

/// The records' keys as strings: they compare as unsigned bytes, like the keys. (Not vectors:
/// GCC 12 warns falsely about the memcmp inside std::set<std::vector<unsigned char>>.)
std::vector<std::string> keys_of(const bytes_t& data, std::uint32_t size)
{
  std::vector<std::string> keys;
  for (std::size_t i = 0; i < data.size() / size; ++i)
    keys.emplace_back(reinterpret_cast<const char*>(data.data() + i * size), 10);
  return keys;
}

unsigned char byte(const std::string& key, std::size_t i)
{
  return static_cast<unsigned char>(key[i]);
}

std::size_t distinct(const std::vector<std::string>& keys)
{
  return std::set<std::string>(keys.begin(), keys.end()).size();
}

TEST(RecordGenerate, Uniform)
{
  const std::uint64_t n = 10007;
  const auto keys = keys_of(make(n, 100, distribution::uniform, 1), 100);
  EXPECT_EQ(distinct(keys), n);
  // Every byte value turns up in every position of the key.
  for (std::size_t b = 0; b < 10; ++b) {
    std::set<unsigned char> seen;
    for (const std::string& k : keys) seen.insert(byte(k, b));
    EXPECT_EQ(seen.size(), 256U) << "byte " << b;
  }
  EXPECT_TRUE(keys_of(make(n, 100, distribution::uniform, 2), 100) != keys);
}

TEST(RecordGenerate, GaussianConcentratesInTheMiddle)
{
  const std::uint64_t n = 10007;
  const auto keys = keys_of(make(n, 64, distribution::gaussian, 1), 64);
  std::uint64_t middle = 0;
  for (const std::string& k : keys) middle += byte(k, 0) >= 0x40 && byte(k, 0) < 0xC0;
  // The mean of 4 uniform values lies in the middle half with probability 11/12; a uniform key
  // with 1/2.
  EXPECT_GT(static_cast<double>(middle) / static_cast<double>(n), 0.88);
  EXPECT_EQ(distinct(keys), n);
}

TEST(RecordGenerate, SortedAndReverseAreStrictlyMonotoneAcrossPieces)
{
  const std::uint64_t first_row = 0xFFFFFFFFULL - 50;  // across a 32-bit carry
  for (const distribution d : {distribution::sorted, distribution::reverse}) {
    const auto keys = keys_of(make(101, 100, d, 3, first_row), 100);
    const auto before = keys_of(make(1, 100, d, 999, first_row - 1), 100);
    for (std::size_t i = 0; i < keys.size(); ++i) {
      const std::string& previous = i == 0 ? before[0] : keys[i - 1];
      if (d == distribution::sorted) {
        EXPECT_LT(previous, keys[i]) << i;
        EXPECT_EQ(byte(keys[i], 0), 0);
        EXPECT_EQ(byte(keys[i], 9), static_cast<unsigned char>(first_row + i));
      } else {
        EXPECT_GT(previous, keys[i]) << i;
        EXPECT_EQ(byte(keys[i], 0), 0xFF);
      }
    }
  }
}

TEST(RecordGenerate, ZeroAndFewUnique)
{
  const std::uint64_t n = 10007;
  const auto zero = keys_of(make(n, 100, distribution::zero, 1), 100);
  EXPECT_EQ(distinct(zero), 1U);
  const auto few = keys_of(make(n, 100, distribution::fewunique, 1), 100);
  EXPECT_EQ(distinct(few), 16U);
}

TEST(RecordGenerate, EveryAcceptedDistributionSortsAndVerifies)
{
  const key_field key{.type = column_type::bytes, .offset = 0, .length = 10};
  for (const distribution d : accepted) {
    SCOPED_TRACE(std::string{gpusort::name_of(d)});
    const bytes_t data = make(1009, 100, d, 4);
    const auto original = gpusort::checksum_records(view(data, 100));
    const bytes_t sorted = reference_sort(data, 100, {&key, 1}, float_order::total);
    const auto result = gpusort::verify_records(view(sorted, 100), {&key, 1}, original);
    EXPECT_TRUE(result.ok) << result.message;
    const auto check = gpusort::checksum_records(view(sorted, 100));
    EXPECT_EQ(result.duplicate_keys, check.duplicate_keys);
    if (d == distribution::zero) {
      EXPECT_EQ(result.duplicate_keys, 1008U);
    }
    if (d == distribution::fewunique) {
      EXPECT_EQ(result.duplicate_keys, 1009U - 16U);
    }
    if (d == distribution::sorted) {
      EXPECT_TRUE(data == sorted);
    }
    if (d == distribution::reverse) {
      const key_field down{.type = column_type::bytes, .offset = 0, .length = 10,
                           .direction = order::descending};
      EXPECT_TRUE(gpusort::check_record_order(view(data, 100), {&down, 1}).ok);
    }
  }
}

TEST(RecordGenerate, Refusals)
{
  bytes_t buffer(4096 * 4, 0x5A);
  for (const distribution d : gpusort::all_distributions) {
    SCOPED_TRACE(std::string{gpusort::name_of(d)});
    if (gpusort::applies_to_records(d)) {
      EXPECT_NO_THROW(gpusort::generate_records(buffer.data(), 4, 100, d, 1));
    } else {
      EXPECT_THROW(gpusort::generate_records(buffer.data(), 4, 100, d, 1),
                   gpusort::invalid_argument);
      // Refused whatever the count: the caller learns before it has a big array.
      EXPECT_THROW(gpusort::generate_records(buffer.data(), 0, 100, d, 1),
                   gpusort::invalid_argument);
    }
  }
  EXPECT_FALSE(gpusort::applies_to_records(distribution::nanmix));
  EXPECT_FALSE(gpusort::applies_to_records(distribution::bucket));
  for (const std::uint32_t size : {0U, 1U, 9U, gpusort::max_record_bytes + 1}) {
    try {
      gpusort::generate_records(buffer.data(), 1, size, distribution::uniform, 1);
      ADD_FAILURE() << "record_bytes " << size << " accepted";
    } catch (const gpusort::invalid_argument& e) {
      EXPECT_TRUE(mentions(e.what(), std::to_string(size))) << e.what();
    }
  }
  EXPECT_NO_THROW(gpusort::generate_records(buffer.data(), 1, 10, distribution::uniform, 1));
  bytes_t largest(gpusort::max_record_bytes);
  EXPECT_NO_THROW(gpusort::generate_records(largest.data(), 1, gpusort::max_record_bytes,
                                            distribution::uniform, 1));
  EXPECT_THROW(gpusort::generate_records(nullptr, 1, 100, distribution::uniform, 1),
               gpusort::invalid_argument);
  EXPECT_NO_THROW(gpusort::generate_records(nullptr, 0, 100, distribution::uniform, 1));
  constexpr std::uint64_t last = std::numeric_limits<std::uint64_t>::max();
  EXPECT_NO_THROW(gpusort::generate_records(buffer.data(), 1, 100, distribution::sorted, 1, last));
  EXPECT_THROW(gpusort::generate_records(buffer.data(), 2, 100, distribution::sorted, 1, last),
               gpusort::invalid_argument);
}

TEST(RecordGenerate, CountsZeroAndOneTouchOnlyTheirRecords)
{
  bytes_t buffer(300, 0x5A);
  gpusort::generate_records(buffer.data(), 0, 100, distribution::uniform, 1);
  EXPECT_TRUE(std::all_of(buffer.begin(), buffer.end(), [](unsigned char c) { return c == 0x5A; }));
  gpusort::generate_records(buffer.data() + 100, 1, 100, distribution::uniform, 1, 5);
  EXPECT_TRUE(std::all_of(buffer.begin(), buffer.begin() + 100,
                          [](unsigned char c) { return c == 0x5A; }));
  EXPECT_TRUE(std::all_of(buffer.begin() + 200, buffer.end(),
                          [](unsigned char c) { return c == 0x5A; }));
  const bytes_t five = make(6, 100, distribution::uniform, 1);
  EXPECT_TRUE(std::equal(buffer.begin() + 100, buffer.begin() + 200, five.begin() + 500));
}

// ------------------------------------------------------------------------------------------
// Checksum

TEST(RecordChecksum, IsTheSumOfZlibCrc32)
{
  // CRC-32's check value: crc32("123456789") = 0xCBF43926.
  const std::string text = "123456789123456789";
  const auto one = gpusort::checksum_records({text.data(), 1, 9});
  EXPECT_EQ(one.count, 1U);
  EXPECT_EQ(one.sum_hi, 0U);
  EXPECT_EQ(one.sum_lo, 0xCBF43926ULL);
  const auto two = gpusort::checksum_records({text.data(), 2, 9});
  EXPECT_EQ(two.sum_lo, 2 * 0xCBF43926ULL);
  EXPECT_EQ(two.duplicate_keys, 1U);
  const auto none = gpusort::checksum_records({nullptr, 0, 100});
  EXPECT_EQ(none.count, 0U);
  EXPECT_EQ(none.sum_lo, 0U);
  EXPECT_EQ(none.duplicate_keys, 0U);
}

TEST(RecordChecksum, IndependentOfOrderAndThreadsSensitiveToEveryByte)
{
  const thread_count_guard guard;
  for (const std::uint32_t size : {100U, 7U, 4096U}) {
    SCOPED_TRACE("record_bytes " + std::to_string(size));
    const std::uint64_t n = size == 4096 ? 1009 : 100003;
    bytes_t data(n * size);
    std::mt19937_64 rng{size};
    for (auto& c : data) c = static_cast<unsigned char>(rng());
    omp_set_num_threads(1);
    const auto original = gpusort::checksum_records(view(data, size));
    omp_set_num_threads(4);
    const auto parallel = gpusort::checksum_records(view(data, size));
    EXPECT_TRUE(gpusort::same_records(original, parallel));
    EXPECT_EQ(original.duplicate_keys, parallel.duplicate_keys);

    std::vector<std::size_t> permutation(n);
    std::iota(permutation.begin(), permutation.end(), std::size_t{0});
    std::shuffle(permutation.begin(), permutation.end(), rng);
    bytes_t shuffled(data.size());
    for (std::size_t i = 0; i < n; ++i)
      std::memcpy(shuffled.data() + i * size, data.data() + permutation[i] * size, size);
    EXPECT_TRUE(gpusort::same_records(gpusort::checksum_records(view(shuffled, size)), original));

    for (const std::size_t at : {std::size_t{0}, shuffled.size() / 2, shuffled.size() - 1}) {
      bytes_t changed = shuffled;
      changed[at] ^= 0x01;
      EXPECT_FALSE(gpusort::same_records(gpusort::checksum_records(view(changed, size)),
                                         original))
          << "byte " << at;
    }
    // A record lost and another doubled: the count stays, the sum moves.
    bytes_t doubled = shuffled;
    std::memcpy(doubled.data(), doubled.data() + size, size);
    EXPECT_FALSE(
        gpusort::same_records(gpusort::checksum_records(view(doubled, size)), original));
    EXPECT_FALSE(gpusort::same_records(
        gpusort::checksum_records({shuffled.data(), n - 1, size}), original));
  }
}

TEST(RecordChecksum, DuplicateKeysAreAdjacentEqualFirstTenBytes)
{
  const thread_count_guard guard;
  omp_set_num_threads(4);
  const bytes_t zero = make(30011, 100, distribution::zero, 1);
  EXPECT_EQ(gpusort::checksum_records(view(zero, 100)).duplicate_keys, 30010U);
  const bytes_t sorted = make(30011, 100, distribution::sorted, 1);
  EXPECT_EQ(gpusort::checksum_records(view(sorted, 100)).duplicate_keys, 0U);
  // A 4-byte record is all key.
  const std::array<unsigned char, 16> small{1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 5, 1, 2, 3, 5};
  EXPECT_EQ(gpusort::checksum_records({small.data(), 4, 4}).duplicate_keys, 2U);
}

TEST(RecordChecksum, Refusals)
{
  bytes_t data(100);
  EXPECT_THROW(gpusort::checksum_records({data.data(), 1, 0}), gpusort::invalid_argument);
  EXPECT_THROW(gpusort::checksum_records({data.data(), 1, gpusort::max_record_bytes + 1}),
               gpusort::invalid_argument);
  EXPECT_THROW(gpusort::checksum_records({nullptr, 1, 100}), gpusort::invalid_argument);
}

// ------------------------------------------------------------------------------------------
// Order check on hand-built records

/// Draws key values from small pools, so that ties (decided by the next key) are common, with
/// the edge cases of every type among them.
class value_pool {
 public:
  explicit value_pool(std::uint64_t seed) : rng_{seed} {}

  void put(const key_field& f, unsigned char* rec)
  {
    unsigned char* p = rec + f.offset;
    const std::size_t pick = rng_() % 12;
    switch (f.type) {
      case column_type::u32:
        store(p, std::array<std::uint32_t, 6>{0, 1, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 12345}
                     [pick % 6]);
        return;
      case column_type::i32:
        store(p, std::array<std::int32_t, 6>{0, 1, -1, std::numeric_limits<std::int32_t>::min(),
                                             std::numeric_limits<std::int32_t>::max(), -77}
                     [pick % 6]);
        return;
      case column_type::u64:
        store(p, std::array<std::uint64_t, 6>{0, 1, 0x7FFFFFFFFFFFFFFFULL,
                                              0x8000000000000000ULL, ~0ULL, 0x100000000ULL}
                     [pick % 6]);
        return;
      case column_type::i64:
        store(p, std::array<std::int64_t, 6>{0, 1, -1, std::numeric_limits<std::int64_t>::min(),
                                             std::numeric_limits<std::int64_t>::max(),
                                             -0x100000000LL}[pick % 6]);
        return;
      case column_type::u128:
      case column_type::i128: {
        // High and low halves each from {0, 1, 2^63, all ones}: both signs of i128, and
        // pairs where the high half decides against the low one.
        const std::uint64_t halves[] = {0, 1, 0x8000000000000000ULL, ~0ULL};
        store_halves(p, halves[pick % 4], halves[(pick / 4 + rng_()) % 4]);
        return;
      }
      case column_type::f32: store(p, float_values<float>()[pick]); return;
      case column_type::f64: store(p, float_values<double>()[pick]); return;
      case column_type::bytes: {
        const std::uint32_t n = f.length;
        std::vector<unsigned char> v(n);
        switch (pick % 6) {
          case 0: std::fill(v.begin(), v.end(), 0x00); break;
          case 1: std::fill(v.begin(), v.end(), 0xFF); break;
          case 2: std::fill(v.begin(), v.end(), 0x7F); break;
          case 3: std::fill(v.begin(), v.end(), 0x80); break;
          case 4:  // differs from case 0 in its last byte only
            v.back() = 0x01;
            break;
          default:
            for (auto& c : v) c = static_cast<unsigned char>(rng_() % 3 + 0x7F);
        }
        std::memcpy(p, v.data(), n);
        return;
      }
    }
  }

  template <typename F>
  static std::array<F, 12> float_values()
  {
    using bits = std::conditional_t<sizeof(F) == 4, std::uint32_t, std::uint64_t>;
    const F quiet_nan = std::numeric_limits<F>::quiet_NaN();
    const F payload_nan = std::bit_cast<F>(static_cast<bits>(std::bit_cast<bits>(quiet_nan) | 5));
    const F signaling = std::numeric_limits<F>::signaling_NaN();
    const F inf = std::numeric_limits<F>::infinity();
    return {quiet_nan, -quiet_nan, payload_nan, -signaling, inf, -inf, F{0}, -F{0}, F{1},
            F{-1}, std::numeric_limits<F>::denorm_min(), -std::numeric_limits<F>::max()};
  }

 private:
  template <typename T>
  static void store(unsigned char* p, T v)
  {
    std::memcpy(p, &v, sizeof v);
  }
  static void store_halves(unsigned char* p, std::uint64_t high, std::uint64_t low)
  {
    const u128 v = (u128{high} << 64) | low;
    std::memcpy(p, &v, sizeof v);
  }

  std::mt19937_64 rng_;
};

std::string describe(const key_field& f, std::uint32_t size, float_order floats)
{
  return std::string{gpusort::name_of(f.type)} + " at " + std::to_string(f.offset) + " of " +
         std::to_string(size) + (f.direction == order::descending ? " desc" : " asc") +
         (floats == float_order::numpy ? " numpy" : " total");
}

/// Sorted by the reference comparator the records pass, with its count of ties; a swapped pair
/// fails exactly there.
void check_against_reference(const bytes_t& data, std::uint32_t size,
                             std::span<const key_field> keys, float_order floats)
{
  const bytes_t sorted = reference_sort(data, size, keys, floats);
  const std::size_t n = data.size() / size;
  const auto at = [&](const bytes_t& d, std::size_t i) { return d.data() + i * size; };
  std::uint64_t ties = 0;
  std::size_t first_less = n;
  for (std::size_t i = 0; i + 1 < n; ++i) {
    const int c = reference_compare(keys, at(sorted, i), at(sorted, i + 1), floats);
    ties += c == 0;
    if (c < 0 && first_less == n) first_less = i;
  }
  const auto result = gpusort::check_record_order(view(sorted, size), keys, floats);
  ASSERT_TRUE(result.ok) << result.message;
  EXPECT_EQ(result.duplicate_keys, ties);
  EXPECT_TRUE(result.message.empty());

  const auto verified =
      gpusort::verify_records(view(sorted, size), keys, gpusort::checksum_records(view(data, size)),
                              floats);
  EXPECT_TRUE(verified.ok) << verified.message;

  if (first_less == n) return;
  bytes_t swapped = sorted;
  unsigned char* const pair = swapped.data() + first_less * size;
  std::swap_ranges(pair, pair + size, pair + size);
  const auto bad = gpusort::check_record_order(view(swapped, size), keys, floats);
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.first_violation, first_less);
  EXPECT_TRUE(mentions(bad.message, "records " + std::to_string(first_less) + " and " +
                                        std::to_string(first_less + 1)))
      << bad.message;
}

TEST(RecordOrder, EveryTypeDirectionAndPlaceAgainstTheReference)
{
  std::uint64_t seed = 1;
  for (const std::uint32_t size : {4U, 12U, 100U, 4096U}) {
    for (const column_type t : gpusort::all_column_types) {
      const std::uint32_t bytes = t == column_type::bytes ? std::min(size, 10U)
                                                          : gpusort::size_of(t);
      if (bytes > size) continue;
      for (const std::uint32_t offset : {0U, (size - bytes) / 2, size - bytes}) {
        for (const order dir : {order::ascending, order::descending}) {
          const key_field first{.type = t, .offset = offset,
                                .length = t == column_type::bytes ? bytes : 0, .direction = dir};
          // The tie-breaker: the same type the other way elsewhere in the record where it fits,
          // otherwise the whole record as bytes (overlapping keys are allowed).
          const std::uint32_t other = offset >= bytes ? 0 : offset + bytes;
          const order other_dir = dir == order::ascending ? order::descending : order::ascending;
          const key_field second =
              other + bytes <= size
                  ? key_field{.type = t, .offset = other, .length = first.length,
                              .direction = other_dir}
                  : key_field{.type = column_type::bytes, .offset = 0, .length = size,
                              .direction = other_dir};
          const key_field keys[] = {first, second};
          const bool is_float = t == column_type::f32 || t == column_type::f64;
          for (const float_order floats : {float_order::total, float_order::numpy}) {
            if (!is_float && floats == float_order::numpy) continue;
            for (const std::size_t n : {0U, 1U, 2U, 3U, 13U, 101U, 1009U}) {
              if (size == 4096 && n > 101) continue;
              SCOPED_TRACE(describe(first, size, floats) + ", then " +
                           describe(second, size, floats) + ", n " + std::to_string(n));
              bytes_t data(n * size);
              std::mt19937_64 noise{seed};
              for (auto& c : data) c = static_cast<unsigned char>(noise());
              value_pool pool{seed++};
              for (std::size_t i = 0; i < n; ++i) {
                pool.put(second, data.data() + i * size);
                pool.put(first, data.data() + i * size);
              }
              check_against_reference(data, size, keys, floats);
            }
          }
        }
      }
    }
  }
}

/// 16-byte records of the given floats at offset 0, in the given order, each with its position
/// as a u32 at offset 8 (a second key where asked).
template <typename F>
bytes_t float_records(const std::vector<F>& values)
{
  bytes_t data(values.size() * 16);
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::memcpy(data.data() + i * 16, &values[i], sizeof(F));
    const auto position = static_cast<std::uint32_t>(i);
    std::memcpy(data.data() + i * 16 + 8, &position, 4);
  }
  return data;
}

template <typename F>
void check_float_orders()
{
  using bits = std::conditional_t<sizeof(F) == 4, std::uint32_t, std::uint64_t>;
  const column_type t = sizeof(F) == 4 ? column_type::f32 : column_type::f64;
  const F inf = std::numeric_limits<F>::infinity();
  const F nan = std::numeric_limits<F>::quiet_NaN();
  const F nan_payload = std::bit_cast<F>(static_cast<bits>(std::bit_cast<bits>(nan) | 3));
  const F signaling = std::numeric_limits<F>::signaling_NaN();
  const key_field up{.type = t, .offset = 0};
  const key_field down{.type = t, .offset = 0, .direction = order::descending};
  const auto check = [](const std::vector<F>& values, const key_field& key, float_order floats) {
    const bytes_t data = float_records(values);
    return gpusort::check_record_order({data.data(), values.size(), 16}, {&key, 1}, floats);
  };

  // totalOrder: -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN, NaNs by payload (signaling
  // below quiet on the positive side, above it on the negative side).
  const std::vector<F> total_ascending{-nan_payload, -nan, -signaling, -inf, F{-1}, -F{0}, F{0},
                                       std::numeric_limits<F>::denorm_min(), F{1}, inf,
                                       signaling, nan, nan_payload};
  const auto ok = check(total_ascending, up, float_order::total);
  EXPECT_TRUE(ok.ok) << ok.message;
  EXPECT_EQ(ok.duplicate_keys, 0U);
  std::vector<F> total_descending(total_ascending.rbegin(), total_ascending.rend());
  EXPECT_TRUE(check(total_descending, down, float_order::total).ok);
  for (std::size_t i = 0; i + 1 < total_ascending.size(); ++i) {
    std::vector<F> swapped = total_ascending;
    std::swap(swapped[i], swapped[i + 1]);
    const auto bad = check(swapped, up, float_order::total);
    EXPECT_FALSE(bad.ok) << "swapped " << i;
    EXPECT_EQ(bad.first_violation, i);
  }
  EXPECT_FALSE(check({F{0}, -F{0}}, up, float_order::total).ok);
  EXPECT_FALSE(check({-F{0}, F{0}}, down, float_order::total).ok);

  // NumPy: NaNs last in both directions and equal among themselves; -0 == +0.
  const auto numpy_up = check({-inf, F{-1}, F{0}, -F{0}, F{0}, F{1}, inf, nan, -nan, signaling},
                              up, float_order::numpy);
  EXPECT_TRUE(numpy_up.ok) << numpy_up.message;
  EXPECT_EQ(numpy_up.duplicate_keys, 4U);  // two pairs of zeros, two pairs of NaNs
  const auto numpy_down =
      check({inf, F{1}, -F{0}, F{0}, F{-1}, -inf, -nan, nan_payload}, down, float_order::numpy);
  EXPECT_TRUE(numpy_down.ok) << numpy_down.message;
  EXPECT_EQ(numpy_down.duplicate_keys, 2U);
  const auto nan_first = check({nan, inf, F{1}}, down, float_order::numpy);
  EXPECT_FALSE(nan_first.ok);
  EXPECT_EQ(nan_first.first_violation, 0U);
  EXPECT_TRUE(mentions(nan_first.message, "nan")) << nan_first.message;
  EXPECT_FALSE(check({F{1}, nan, -inf}, up, float_order::numpy).ok);
  EXPECT_FALSE(check({-inf, F{1}, nan, F{2}}, up, float_order::numpy).ok);

  // Ties of NumPy's NaNs and zeros go to the second key (the position, here descending).
  const key_field position_down{.type = column_type::u32, .offset = 8,
                                .direction = order::descending};
  const key_field two_keys[] = {up, position_down};
  const bytes_t tied = float_records(std::vector<F>{-F{0}, F{0}, nan, -nan});
  const auto tie_result =
      gpusort::check_record_order({tied.data(), 4, 16}, two_keys, float_order::numpy);
  EXPECT_FALSE(tie_result.ok);
  EXPECT_EQ(tie_result.first_violation, 0U);
  EXPECT_TRUE(mentions(tie_result.message, "key 2")) << tie_result.message;
}

TEST(RecordOrder, FloatsInBothOrders)
{
  check_float_orders<float>();
  check_float_orders<double>();
}

bytes_t halves_records(const std::vector<std::pair<std::uint64_t, std::uint64_t>>& values)
{
  // 24-byte records with the 128-bit key in the middle: low half at 4, high half at 12.
  bytes_t data(values.size() * 24, 0xEE);
  for (std::size_t i = 0; i < values.size(); ++i) {
    std::memcpy(data.data() + i * 24 + 4, &values[i].second, 8);
    std::memcpy(data.data() + i * 24 + 12, &values[i].first, 8);
  }
  return data;
}

TEST(RecordOrder, OneHundredTwentyEightBitIntegers)
{
  constexpr std::uint64_t ones = ~0ULL;
  const auto check = [](const std::vector<std::pair<std::uint64_t, std::uint64_t>>& values,
                        column_type t, order dir) {
    const bytes_t data = halves_records(values);
    const key_field key{.type = t, .offset = 4, .direction = dir};
    return gpusort::check_record_order({data.data(), values.size(), 24}, {&key, 1});
  };
  // (high, low). u128: the high half dominates a larger low half.
  EXPECT_TRUE(
      check({{0, ones}, {1, 0}, {1, 1}, {ones, 0}}, column_type::u128, order::ascending).ok);
  EXPECT_FALSE(check({{1, 0}, {0, ones}}, column_type::u128, order::ascending).ok);
  EXPECT_TRUE(check({{1, 0}, {0, ones}}, column_type::u128, order::descending).ok);
  // i128: negative below positive although its bits are larger; the low half unsigned.
  const std::uint64_t min_high = 0x8000000000000000ULL;
  EXPECT_TRUE(check({{min_high, 0}, {ones, 0}, {ones, ones}, {0, 0}, {0, 1}, {0, ones}, {1, 0}},
                    column_type::i128, order::ascending)
                  .ok);
  const auto bad = check({{0, 1}, {ones, ones}}, column_type::i128, order::ascending);
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.first_violation, 0U);
  EXPECT_TRUE(check({{0, 1}, {ones, ones}}, column_type::i128, order::descending).ok);
  EXPECT_FALSE(check({{ones, ones}, {0, 1}}, column_type::u128, order::ascending).ok);
}

TEST(RecordOrder, IntegersAndBytesByTheirTypes)
{
  const auto check = [](const std::vector<std::uint32_t>& words, column_type t, order dir) {
    const key_field key{.type = t, .offset = 0, .length = t == column_type::bytes ? 4U : 0U,
                        .direction = dir};
    return gpusort::check_record_order({words.data(), words.size(), 4}, {&key, 1});
  };
  // 0x80000000: the largest u32 of these, the smallest i32; as bytes (little-endian) its
  // first byte is 0x00.
  const std::vector<std::uint32_t> words{0x7FFFFFFF, 0x80000000};
  EXPECT_TRUE(check(words, column_type::u32, order::ascending).ok);
  EXPECT_FALSE(check(words, column_type::i32, order::ascending).ok);
  EXPECT_TRUE(check(words, column_type::i32, order::descending).ok);
  EXPECT_FALSE(check(words, column_type::bytes, order::ascending).ok);
  // Bytes compare unsigned: 0x80 after 0x7F.
  EXPECT_TRUE(check({0x7F, 0x80}, column_type::bytes, order::ascending).ok);
  EXPECT_TRUE(check({0x80, 0x7F}, column_type::bytes, order::descending).ok);

  // u64 / i64 in 12-byte records at offset 4, tie broken by a u32 at offset 0.
  const auto record = [](std::uint32_t tie, std::uint64_t v) {
    bytes_t r(12);
    std::memcpy(r.data(), &tie, 4);
    std::memcpy(r.data() + 4, &v, 8);
    return r;
  };
  bytes_t data;
  for (const auto& r : {record(9, ~0ULL), record(1, 0), record(2, 0), record(0, 5)})
    data.insert(data.end(), r.begin(), r.end());
  const key_field i64_up{.type = column_type::i64, .offset = 4};
  const key_field u64_up{.type = column_type::u64, .offset = 4};
  const key_field tie_up{.type = column_type::u32, .offset = 0};
  const key_field tie_down{.type = column_type::u32, .offset = 0, .direction = order::descending};
  const key_field i64_then_up[] = {i64_up, tie_up};
  const key_field i64_then_down[] = {i64_up, tie_down};
  const auto up = gpusort::check_record_order({data.data(), 4, 12}, i64_then_up);
  EXPECT_TRUE(up.ok) << up.message;
  EXPECT_EQ(up.duplicate_keys, 0U);
  const auto down = gpusort::check_record_order({data.data(), 4, 12}, i64_then_down);
  EXPECT_FALSE(down.ok);
  EXPECT_EQ(down.first_violation, 1U);
  EXPECT_TRUE(mentions(down.message, "key 2 (u32 at offset 0, descending): 1 then 2"))
      << down.message;
  EXPECT_EQ(gpusort::check_record_order({data.data(), 4, 12}, {&i64_up, 1}).duplicate_keys, 1U);
  EXPECT_FALSE(gpusort::check_record_order({data.data(), 4, 12}, {&u64_up, 1}).ok);
}

TEST(RecordOrder, ZeroAndOneRecords)
{
  const key_field key{.type = column_type::u32, .offset = 0};
  const auto none = gpusort::check_record_order({nullptr, 0, 4}, {&key, 1});
  EXPECT_TRUE(none.ok);
  EXPECT_EQ(none.duplicate_keys, 0U);
  const std::uint32_t one = 7;
  const auto single = gpusort::check_record_order({&one, 1, 4}, {&key, 1});
  EXPECT_TRUE(single.ok);
  EXPECT_EQ(single.duplicate_keys, 0U);
}

TEST(RecordOrder, KeysAreCheckedAgainstTheRecord)
{
  bytes_t data(200);
  const record_array records{data.data(), 2, 100};
  const auto message_of = [&](std::vector<key_field> keys) -> std::string {
    try {
      (void)gpusort::check_record_order(records, keys);
    } catch (const gpusort::invalid_argument& e) {
      return e.what();
    }
    return "(accepted)";
  };
  EXPECT_TRUE(mentions(message_of({{.type = column_type::u64, .offset = 96}}), "key 1 (u64"));
  EXPECT_TRUE(mentions(message_of({{.type = column_type::u32, .offset = 0},
                                   {.type = column_type::bytes, .offset = 90, .length = 11}}),
                       "key 2 (bytes"));
  EXPECT_TRUE(mentions(message_of({{.type = column_type::bytes, .offset = 0, .length = 0}}),
                       "key 1"));
  EXPECT_TRUE(mentions(message_of({{.type = column_type::u32, .offset = 0, .length = 8}}),
                       "key 1"));
  EXPECT_TRUE(mentions(message_of({{.type = column_type::i128,
                                    .offset = std::numeric_limits<std::uint32_t>::max()}}),
                       "key 1"));
  EXPECT_NE(message_of({}), "(accepted)");
  EXPECT_EQ(message_of({{.type = column_type::u32, .offset = 96},
                        {.type = column_type::bytes, .offset = 0, .length = 100},
                        {.type = column_type::i128, .offset = 84, .length = 16}}),
            "(accepted)");
  const key_field key{.type = column_type::u32, .offset = 0};
  EXPECT_THROW((void)gpusort::check_record_order({nullptr, 2, 100}, {&key, 1}),
               gpusort::invalid_argument);
  EXPECT_THROW((void)gpusort::check_record_order({data.data(), 2, 0}, {&key, 1}),
               gpusort::invalid_argument);
  EXPECT_THROW((void)gpusort::verify_records({data.data(), 2, 2}, {&key, 1}, {}),
               gpusort::invalid_argument);
}

TEST(RecordOrder, ViolationsAcrossWorkItemsWithThreads)
{
  const thread_count_guard guard;
  omp_set_num_threads(4);
  const std::uint64_t n = 50021;
  const bytes_t sorted = make(n, 100, distribution::sorted, 1);
  const key_field key{.type = column_type::bytes, .offset = 0, .length = 10};
  const auto clean = gpusort::check_record_order(view(sorted, 100), {&key, 1});
  EXPECT_TRUE(clean.ok);
  EXPECT_EQ(clean.duplicate_keys, 0U);
  // 1 MiB of 100-byte records is 10485 of them: pairs on both sides of the items' boundaries.
  for (const std::uint64_t i : {std::uint64_t{0}, std::uint64_t{10483}, std::uint64_t{10484},
                                std::uint64_t{10485}, std::uint64_t{20969},
                                std::uint64_t{20970}, n - 2}) {
    bytes_t broken = sorted;
    std::swap_ranges(broken.begin() + static_cast<std::ptrdiff_t>(i * 100),
                     broken.begin() + static_cast<std::ptrdiff_t>(i * 100 + 100),
                     broken.begin() + static_cast<std::ptrdiff_t>(i * 100 + 100));
    const auto result = gpusort::check_record_order(view(broken, 100), {&key, 1});
    EXPECT_FALSE(result.ok);
    EXPECT_EQ(result.first_violation, i);
    if (i + 4 > n) continue;
    // A later violation does not hide the first one.
    std::swap_ranges(broken.end() - 300, broken.end() - 200, broken.end() - 200);
    EXPECT_EQ(gpusort::check_record_order(view(broken, 100), {&key, 1}).first_violation, i);
  }
  const bytes_t zero = make(n, 100, distribution::zero, 1);
  EXPECT_EQ(gpusort::check_record_order(view(zero, 100), {&key, 1}).duplicate_keys, n - 1);
}

// ------------------------------------------------------------------------------------------
// verify_records

TEST(RecordVerify, NamesWhatFailed)
{
  const std::uint64_t n = 10007;
  const bytes_t data = make(n, 100, distribution::uniform, 11);
  const auto original = gpusort::checksum_records(view(data, 100));
  const key_field key{.type = column_type::bytes, .offset = 0, .length = 10};
  bytes_t sorted = reference_sort(data, 100, {&key, 1}, float_order::total);
  const auto ok = gpusort::verify_records(view(sorted, 100), {&key, 1}, original);
  EXPECT_TRUE(ok.ok) << ok.message;
  EXPECT_EQ(ok.duplicate_keys, 0U);

  const auto unsorted = gpusort::verify_records(view(data, 100), {&key, 1}, original);
  EXPECT_FALSE(unsorted.ok);
  EXPECT_TRUE(mentions(unsorted.message, "out of order")) << unsorted.message;

  bytes_t payload = sorted;
  payload[5000 * 100 + 50] ^= 0x20;  // a filler byte: the keys stay sorted
  const auto changed = gpusort::verify_records(view(payload, 100), {&key, 1}, original);
  EXPECT_FALSE(changed.ok);
  EXPECT_TRUE(mentions(changed.message, "not a permutation: checksum")) << changed.message;

  bytes_t doubled = sorted;
  std::memcpy(doubled.data() + 100, doubled.data(), 100);  // equal keys stay in order
  const auto twice = gpusort::verify_records(view(doubled, 100), {&key, 1}, original);
  EXPECT_FALSE(twice.ok);
  EXPECT_TRUE(mentions(twice.message, "not a permutation")) << twice.message;
  EXPECT_EQ(twice.duplicate_keys, 1U);

  const auto shorter =
      gpusort::verify_records({sorted.data(), n - 1, 100}, {&key, 1}, original);
  EXPECT_FALSE(shorter.ok);
  EXPECT_TRUE(mentions(shorter.message, "count mismatch")) << shorter.message;

  // Empty and single arrays verify against their own checksums.
  EXPECT_TRUE(gpusort::verify_records({nullptr, 0, 100}, {&key, 1},
                                      gpusort::checksum_records({nullptr, 0, 100}))
                  .ok);
  EXPECT_TRUE(gpusort::verify_records({data.data(), 1, 100}, {&key, 1},
                                      gpusort::checksum_records({data.data(), 1, 100}))
                  .ok);
}

TEST(RecordVerify, SeveralKeysOfGensortRecords)
{
  // fewunique keys tie often; the row's hex digits (unique) decide, descending.
  const std::uint64_t n = 1009;
  const bytes_t data = make(n, 100, distribution::fewunique, 12);
  const key_field keys[] = {{.type = column_type::bytes, .offset = 0, .length = 10},
                            {.type = column_type::bytes, .offset = 12, .length = 32,
                             .direction = order::descending}};
  const bytes_t sorted = reference_sort(data, 100, keys, float_order::total);
  const auto result =
      gpusort::verify_records(view(sorted, 100), keys, gpusort::checksum_records(view(data, 100)));
  EXPECT_TRUE(result.ok) << result.message;
  EXPECT_EQ(result.duplicate_keys, 0U);
  // By the first key alone, ties are adjacent equal keys: n - 16.
  EXPECT_EQ(gpusort::check_record_order(view(sorted, 100), {keys, 1}).duplicate_keys, n - 16);
}

}  // namespace
