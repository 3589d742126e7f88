// Input generators. Every element is a pure function of (seed, index), drawn from a
// counter-based generator, so the output never depends on the thread count or the schedule.
// Distributions are built in a "unit" space of 64-bit positions and mapped to each key type by
// an order-preserving map, so one definition serves all six types.
#include "core/generate.hpp"

#include "core/counter_rng.hpp"

#include "core/keys.hpp"

#include <gpusort/error.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>

namespace gpusort {

namespace detail {
namespace {

__extension__ using u128 = unsigned __int128;

/// The paper's p: the number of blocks of bucket, staggered and detdupes.
constexpr std::uint64_t blocks = 240;

/// Elements per OpenMP work item: large enough to amortize scheduling, small enough to balance.
constexpr std::uint64_t work_item = std::uint64_t{1} << 16;

/// Independent streams of random numbers from one seed.
enum class stream : std::uint64_t { key = 1, gauss1, gauss2, gauss3, kind, pick, table, value };

using detail::counter_rng;

constexpr std::uint64_t mulhi(std::uint64_t a, std::uint64_t b) noexcept
{
  return static_cast<std::uint64_t>((u128{a} * b) >> 64);
}

/// floor(a * b / c) without overflow; requires the result to fit (a < c or b <= c).
constexpr std::uint64_t muldiv(std::uint64_t a, std::uint64_t b, std::uint64_t c) noexcept
{
  // A 128-bit division is a slow library call: take the 64-bit one whenever the product fits.
  std::uint64_t product = 0;
  if (!__builtin_mul_overflow(a, b, &product)) return product / c;
  return static_cast<std::uint64_t>(u128{a} * b / c);
}

/// Block of element i when n elements are split into p blocks: floor(i * p / n).
constexpr std::uint64_t block_of(std::uint64_t i, std::uint64_t n, std::uint64_t p) noexcept
{
  return muldiv(i, p, n);
}

/// First element of block b: ceil(b * n / p), the inverse of block_of.
constexpr std::uint64_t block_start(std::uint64_t b, std::uint64_t n, std::uint64_t p) noexcept
{
  return b * (n / p) + (b * (n % p) + p - 1) / p;  // b <= p, so nothing overflows
}

/// Width of one of the p sub-ranges of the unit space: floor(2^64 / p).
constexpr std::uint64_t sub_range = std::numeric_limits<std::uint64_t>::max() / blocks;

/// Order-preserving map from the unit space to a key type.
template <typename K>
K from_unit(std::uint64_t u) noexcept
{
  if constexpr (std::is_same_v<K, std::uint32_t>) {
    return static_cast<std::uint32_t>(u >> 32);
  } else if constexpr (std::is_same_v<K, std::int32_t>) {
    return std::bit_cast<std::int32_t>(static_cast<std::uint32_t>(u >> 32) ^ 0x80000000U);
  } else if constexpr (std::is_same_v<K, std::uint64_t>) {
    return u;
  } else if constexpr (std::is_same_v<K, std::int64_t>) {
    return std::bit_cast<std::int64_t>(u ^ 0x8000000000000000ULL);
  } else if constexpr (std::is_same_v<K, float>) {
    // 24 bits of fraction scaled to [0, 2) and shifted: every step is exact in float.
    return static_cast<float>(u >> 40) * 0x1p-23F - 1.0F;
  } else {
    static_assert(std::is_same_v<K, double>);
    return static_cast<double>(u >> 11) * 0x1p-52 - 1.0;
  }
}

/// Calls out[i] = f(i) for all i, in parallel; f must depend on i alone.
template <typename K, typename F>
void fill(K* out, std::uint64_t n, const F& f)
{
  const std::uint64_t items = (n + work_item - 1) / work_item;
#pragma omp parallel for schedule(static) if (items > 1)
  for (std::uint64_t item = 0; item < items; ++item) {
    const std::uint64_t end = std::min(n, (item + 1) * work_item);
    for (std::uint64_t i = item * work_item; i < end; ++i) out[i] = f(i);
  }
}

/// Position i of n spread evenly from the bottom (i = 0) to the top (i = n - 1) of the unit
/// space: floor(i * (2^64 - 1) / (n - 1)).
constexpr std::uint64_t spread(std::uint64_t i, std::uint64_t n) noexcept
{
  if (n <= 1) return 0;
  constexpr std::uint64_t top = std::numeric_limits<std::uint64_t>::max();
  const std::uint64_t q = top / (n - 1);
  const std::uint64_t r = top % (n - 1);
  return i * q + muldiv(i, r, n - 1);
}

// Arrays past 2^32 elements take the 128-bit paths, which no test can allocate: check here.
static_assert(spread(0, 5) == 0 && spread(4, 5) == std::numeric_limits<std::uint64_t>::max());
static_assert(spread((std::uint64_t{1} << 40) + 2, (std::uint64_t{1} << 40) + 3) ==
              std::numeric_limits<std::uint64_t>::max());
static_assert(spread(std::uint64_t{1} << 40, (std::uint64_t{1} << 41) + 1) ==
              (std::uint64_t{1} << 63) - 1);
static_assert(block_start(blocks, (std::uint64_t{1} << 62) + 7, blocks) ==
              (std::uint64_t{1} << 62) + 7);
static_assert(block_of(block_start(77, (std::uint64_t{1} << 62) + 7, blocks),
                       (std::uint64_t{1} << 62) + 7, blocks) == 77);
static_assert(block_of(block_start(77, (std::uint64_t{1} << 62) + 7, blocks) - 1,
                       (std::uint64_t{1} << 62) + 7, blocks) == 76);

/// detdupes: group of block b, where each group takes half of the remaining blocks (rounded up).
constexpr std::uint64_t detdupes_group(std::uint64_t b) noexcept
{
  std::uint64_t group = 0;
  std::uint64_t start = 0;
  while (true) {
    const std::uint64_t size = (blocks - start + 1) / 2;
    if (b < start + size || size == 0) return group;
    start += size;
    ++group;
  }
}

/// A NaN, an infinity or a zero of float type K, chosen by r (sign: top bit of r).
template <typename K>
K special(std::uint64_t kind, std::uint64_t r) noexcept
{
  using bits = bits_t<sizeof(K)>;
  constexpr int mantissa = std::numeric_limits<K>::digits - 1;
  constexpr bits mantissa_mask = (bits{1} << mantissa) - 1;
  constexpr bits exponent_mask = bits(~bits{0}) & bits(~mantissa_mask) & bits(~sign_bit<bits>);
  const bits sign = (r >> 63) != 0 ? sign_bit<bits> : bits{0};
  bits out = sign;
  if (kind == 0) {
    // Varied payloads: quiet and signaling, never zero (that would be an infinity).
    bits payload = static_cast<bits>(r) & mantissa_mask;
    if (payload == 0) payload = 1;
    out |= exponent_mask | payload;
  } else if (kind == 1) {
    out |= exponent_mask;
  }
  return std::bit_cast<K>(out);
}

template <typename K>
void generate_typed(K* out, std::uint64_t n, distribution d, std::uint64_t seed)
{
  const counter_rng rng{seed, stream::key};
  switch (d) {
    case distribution::uniform:
      fill(out, n, [&](std::uint64_t i) { return from_unit<K>(rng(i)); });
      return;
    case distribution::gaussian: {
      const counter_rng r1{seed, stream::gauss1};
      const counter_rng r2{seed, stream::gauss2};
      const counter_rng r3{seed, stream::gauss3};
      fill(out, n, [&](std::uint64_t i) {
        return from_unit<K>((rng(i) >> 2) + (r1(i) >> 2) + (r2(i) >> 2) + (r3(i) >> 2));
      });
      return;
    }
    case distribution::bucket:
      fill(out, n, [&](std::uint64_t i) {
        const std::uint64_t b = block_of(i, n, blocks);
        const std::uint64_t start = block_start(b, n, blocks);
        const std::uint64_t length = block_start(b + 1, n, blocks) - start;
        const std::uint64_t part = block_of(i - start, length, blocks);
        return from_unit<K>(part * sub_range + mulhi(rng(i), sub_range));
      });
      return;
    case distribution::staggered:
      fill(out, n, [&](std::uint64_t i) {
        const std::uint64_t b = block_of(i, n, blocks);
        const std::uint64_t part = b < blocks / 2 ? 2 * b + 1 : 2 * (b - blocks / 2);
        return from_unit<K>(part * sub_range + mulhi(rng(i), sub_range));
      });
      return;
    case distribution::sorted:
      fill(out, n, [&](std::uint64_t i) { return from_unit<K>(spread(i, n)); });
      return;
    case distribution::reverse:
      fill(out, n, [&](std::uint64_t i) { return from_unit<K>(spread(n - 1 - i, n)); });
      return;
    case distribution::zero:
      fill(out, n, [](std::uint64_t) { return K{0}; });
      return;
    case distribution::detdupes: {
      const int log_n = n == 0 ? 0 : static_cast<int>(std::bit_width(n)) - 1;
      fill(out, n, [&](std::uint64_t i) {
        const auto group = static_cast<int>(detdupes_group(block_of(i, n, blocks)));
        return static_cast<K>(std::max(0, log_n - group));
      });
      return;
    }
    case distribution::fewunique: {
      // Draw until 16 different keys: 32-bit keys may collide, if rarely.
      std::array<K, 16> table{};
      const counter_rng table_rng{seed, stream::table};
      std::size_t found = 0;
      for (std::uint64_t k = 0; found < table.size(); ++k) {
        const K candidate = from_unit<K>(table_rng(k));
        if (std::find(table.begin(), table.begin() + found, candidate) == table.begin() + found)
          table[found++] = candidate;
      }
      const counter_rng pick{seed, stream::pick};
      fill(out, n, [&](std::uint64_t i) { return table[pick(i) >> 60]; });
      return;
    }
    case distribution::nanmix:
      if constexpr (std::is_floating_point_v<K>) {
        const counter_rng kind_rng{seed, stream::kind};
        constexpr std::uint64_t percent = std::numeric_limits<std::uint64_t>::max() / 100;
        fill(out, n, [&](std::uint64_t i) {
          const std::uint64_t kind = kind_rng(i);
          const std::uint64_t r = rng(i);
          if (kind < 2 * percent) {
            // 1% NaN, 0.5% infinities, 0.5% zeros.
            return special<K>(kind < percent ? 0 : kind < 3 * percent / 2 ? 1 : 2, r);
          }
          return from_unit<K>(r);
        });
        return;
      } else {
        break;
      }
  }
  throw invalid_argument{std::string{"distribution "} + std::string{name_of(d)} +
                         " does not apply to keys of type " + std::string{name_of(dtype_of_v<K>)}};
}

}  // namespace
}  // namespace detail

std::string_view name_of(distribution d) noexcept
{
  switch (d) {
    case distribution::uniform: return "uniform";
    case distribution::gaussian: return "gaussian";
    case distribution::bucket: return "bucket";
    case distribution::staggered: return "staggered";
    case distribution::sorted: return "sorted";
    case distribution::reverse: return "reverse";
    case distribution::zero: return "zero";
    case distribution::detdupes: return "detdupes";
    case distribution::fewunique: return "fewunique";
    case distribution::nanmix: return "nanmix";
  }
  return "?";
}

std::optional<distribution> parse_distribution(std::string_view text) noexcept
{
  for (distribution d : all_distributions)
    if (name_of(d) == text) return d;
  return std::nullopt;
}

void generate(key_array keys, distribution d, std::uint64_t seed)
{
  if (!applies_to(d, keys.type))
    throw invalid_argument{std::string{"distribution "} + std::string{name_of(d)} +
                           " does not apply to keys of type " + std::string{name_of(keys.type)}};
  if (keys.count == 0) return;
  if (keys.data == nullptr) throw invalid_argument{"generate: null key array with count > 0"};
  detail::visit_dtype(keys.type, [&]<typename K>() {
    // The view describes the array to fill: writing it is this function's purpose.
    detail::generate_typed(static_cast<K*>(const_cast<void*>(keys.data)), keys.count, d, seed);
  });
}

void generate_values(value_array values, std::uint64_t seed)
{
  if (values.value_bytes != 4 && values.value_bytes != 8)
    throw invalid_argument{"generate_values: value_bytes must be 4 or 8, not " +
                           std::to_string(values.value_bytes)};
  if (values.count == 0) return;
  if (values.data == nullptr) throw invalid_argument{"generate_values: null value array"};
  const detail::counter_rng rng{seed, detail::stream::value};
  if (values.value_bytes == 4) {
    detail::fill(static_cast<std::uint32_t*>(const_cast<void*>(values.data)), values.count,
                 [&](std::uint64_t i) { return static_cast<std::uint32_t>(rng(i)); });
  } else {
    detail::fill(static_cast<std::uint64_t*>(const_cast<void*>(values.data)), values.count,
                 [&](std::uint64_t i) { return rng(i); });
  }
}

}  // namespace gpusort
