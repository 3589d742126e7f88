// The verifier every test and benchmark trusts: an order check plus a permutation check by an
// order-independent 128-bit fingerprint of the multiset of (key, value) pairs.
#pragma once

#include <gpusort/types.hpp>

#include <compare>
#include <cstdint>
#include <optional>
#include <string>

namespace gpusort {

/// Order-independent fingerprint of a multiset of (key bits, value bits) pairs: two 64-bit sums
/// of independent strong hashes of each pair, and the count.
struct fingerprint {
  std::uint64_t lo{};
  std::uint64_t hi{};
  std::uint64_t count{};
  friend bool operator==(const fingerprint&, const fingerprint&) = default;
};

/// Fingerprint of `keys` (and `values`, paired by index); parallel, one pass.
fingerprint fingerprint_of(const key_array& keys, const std::optional<value_array>& values = {});

struct order_check {
  bool ok{true};
  std::uint64_t first_violation{};  ///< index i where key[i] and key[i+1] are out of order
};

/// Checks that keys are sorted by the key order (`floats` for floats) in direction `dir`.
order_check check_order(const key_array& keys, order dir,
                        float_order floats = float_order::total);

struct verify_result {
  bool ok{};
  std::string message;  ///< empty when ok; otherwise what failed and where
};

/// Verifies that (keys, values) is a sorted permutation of the original, given by its
/// fingerprint.
verify_result verify(const key_array& keys, const std::optional<value_array>& values, order dir,
                     const fingerprint& original, float_order floats = float_order::total);

}  // namespace gpusort
