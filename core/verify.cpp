// The verifier. The permutation check sums two independent strong hashes of every (key, value)
// pair modulo 2^64: the sum does not depend on the order, costs one streaming pass, and any change
// to the multiset moves it unless 128 bits of hash collide.
#include "core/verify.hpp"

#include "core/keys.hpp"

#include <gpusort/error.hpp>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>

namespace gpusort {

namespace detail {
namespace {

/// Elements per OpenMP work item.
constexpr std::uint64_t work_item = std::uint64_t{1} << 16;

/// The splitmix64 finalizer.
constexpr std::uint64_t mix_splitmix(std::uint64_t z) noexcept
{
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

/// The MurmurHash3 fmix64 finalizer: a different bijection, so the two sums are independent.
constexpr std::uint64_t mix_murmur(std::uint64_t z) noexcept
{
  z = (z ^ (z >> 33)) * 0xFF51AFD7ED558CCDULL;
  z = (z ^ (z >> 33)) * 0xC4CEB9FE1A85EC53ULL;
  return z ^ (z >> 33);
}

// Each hash is bijective in the key for a fixed value and in the value for a fixed key, so a
// change of either one alone always changes the term.
constexpr std::uint64_t hash_lo(std::uint64_t key, std::uint64_t value) noexcept
{
  return mix_splitmix(mix_splitmix(key ^ 0x243F6A8885A308D3ULL) ^ (value + 0x13198A2E03707344ULL));
}

constexpr std::uint64_t hash_hi(std::uint64_t key, std::uint64_t value) noexcept
{
  return mix_murmur(mix_murmur(key + 0xA4093822299F31D0ULL) +
                    std::rotl(value ^ 0x082EFA98EC4E6C89ULL, 29));
}

void check_keys(const key_array& keys)
{
  if (keys.count != 0 && keys.data == nullptr)
    throw invalid_argument{"null key array with count " + std::to_string(keys.count)};
}

void check_values(const key_array& keys, const std::optional<value_array>& values)
{
  if (!values) return;
  if (values->value_bytes != 4 && values->value_bytes != 8)
    throw invalid_argument{"value_bytes must be 4 or 8, not " +
                           std::to_string(values->value_bytes)};
  if (values->count != keys.count)
    throw invalid_argument{"value count " + std::to_string(values->count) +
                           " differs from key count " + std::to_string(keys.count)};
  if (values->count != 0 && values->data == nullptr)
    throw invalid_argument{"null value array with count " + std::to_string(values->count)};
}

template <typename K, typename V>
fingerprint fingerprint_typed(const K* keys, const V* values, std::uint64_t n)
{
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  const std::uint64_t items = (n + work_item - 1) / work_item;
#pragma omp parallel for schedule(static) reduction(+ : lo, hi) if (items > 1)
  for (std::uint64_t item = 0; item < items; ++item) {
    const std::uint64_t end = std::min(n, (item + 1) * work_item);
    for (std::uint64_t i = item * work_item; i < end; ++i) {
      const std::uint64_t key = raw_bits(keys[i]);
      std::uint64_t value = 0;
      if constexpr (!std::is_same_v<V, no_value>) value = values[i];
      lo += hash_lo(key, value);
      hi += hash_hi(key, value);
    }
  }
  return fingerprint{lo, hi, n};
}

template <typename K>
std::uint64_t first_violation(const K* keys, std::uint64_t n, const key_order& k)
{
  // Canonical codes: keys the order calls equal (NumPy's NaNs, its zeros) compare equal.
  using bits = bits_t<sizeof(K)>;
  const key_map<bits> code = ordered_map<bits>(k, true);
  std::uint64_t first = n;  // n: none
  if (n < 2) return first;
  const std::uint64_t pairs = n - 1;
  const std::uint64_t items = (pairs + work_item - 1) / work_item;
#pragma omp parallel for schedule(static) reduction(min : first) if (items > 1)
  for (std::uint64_t item = 0; item < items; ++item) {
    const std::uint64_t end = std::min(pairs, (item + 1) * work_item);
    for (std::uint64_t i = item * work_item; i < end; ++i) {
      if (code(raw_bits(keys[i])) > code(raw_bits(keys[i + 1]))) {
        first = std::min(first, i);
        break;
      }
    }
  }
  return first;
}

/// A key for a message: integers in decimal, floats shortest round trip, NaNs with their bits.
template <typename K>
std::string describe(K key)
{
  if constexpr (std::is_floating_point_v<K>) {
    char text[64];
    const auto result = std::to_chars(text, text + sizeof text, key);
    std::string out{text, result.ptr};
    if (std::isnan(key)) {
      char bits[32];
      std::snprintf(bits, sizeof bits, " (bits 0x%0*llx)", static_cast<int>(2 * sizeof(K)),
                    static_cast<unsigned long long>(raw_bits(key)));
      out += bits;
    }
    return out;
  } else {
    return std::to_string(key);
  }
}

}  // namespace
}  // namespace detail

fingerprint fingerprint_of(const key_array& keys, const std::optional<value_array>& values)
{
  detail::check_keys(keys);
  detail::check_values(keys, values);
  return detail::visit_dtype(keys.type, [&]<typename K>() {
    const auto* k = static_cast<const K*>(keys.data);
    if (!values) return detail::fingerprint_typed<K, detail::no_value>(k, nullptr, keys.count);
    if (values->value_bytes == 4)
      return detail::fingerprint_typed(k, static_cast<const std::uint32_t*>(values->data),
                                       keys.count);
    return detail::fingerprint_typed(k, static_cast<const std::uint64_t*>(values->data),
                                     keys.count);
  });
}

order_check check_order(const key_array& keys, order dir, float_order floats)
{
  detail::check_keys(keys);
  const std::uint64_t first = detail::visit_dtype(keys.type, [&]<typename K>() {
    return detail::first_violation(
        static_cast<const K*>(keys.data), keys.count,
        detail::key_order{.type = keys.type, .dir = dir, .floats = floats, .canonical = true});
  });
  if (first >= keys.count) return order_check{};
  return order_check{false, first};
}

verify_result verify(const key_array& keys, const std::optional<value_array>& values, order dir,
                     const fingerprint& original, float_order floats)
{
  detail::check_keys(keys);
  detail::check_values(keys, values);
  const order_check sorted = check_order(keys, dir, floats);
  if (!sorted.ok) {
    const std::uint64_t i = sorted.first_violation;
    std::string message = detail::visit_dtype(keys.type, [&]<typename K>() {
      const auto* k = static_cast<const K*>(keys.data);
      return detail::describe(k[i]) + (dir == order::ascending ? " > " : " < ") +
             detail::describe(k[i + 1]);
    });
    return verify_result{false, std::string{"not sorted "} +
                                    (dir == order::ascending ? "ascending" : "descending") +
                                    " at index " + std::to_string(i) + ": " + message};
  }
  const fingerprint got = fingerprint_of(keys, values);
  if (got != original) {
    return verify_result{false, "not a permutation of the input: fingerprint differs (count " +
                                    std::to_string(got.count) + " vs " +
                                    std::to_string(original.count) + ")"};
  }
  return verify_result{true, {}};
}

}  // namespace gpusort
