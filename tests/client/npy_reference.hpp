// The tests' own model of what `gpusort sort` must produce for .npy files, stable sorts,
// NumPy's float order and argsort, written from NumPy's documentation and never from the code
// under test: .npy headers built by hand, results by std::stable_sort with explicit comparators.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace npy_reference {

// ---- .npy headers ----------------------------------------------------------------------------

/// A .npy file's prefix around `dict`: magic, version major.0, the header length (2 bytes in
/// 1.0, 4 in 2.0 and 3.0), the dict padded with spaces to `align` bytes in all, then '\n'.
inline std::string npy_prefix(const std::string& dict, int major = 1, std::size_t align = 64)
{
  const std::size_t field = major == 1 ? 2 : 4;
  const std::size_t unpadded = 8 + field + dict.size() + 1;
  const std::size_t total = (unpadded + align - 1) / align * align;
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  std::uint64_t len = total - 8 - field;
  for (std::size_t i = 0; i < field; ++i, len >>= 8) out += static_cast<char>(len & 0xff);
  out += dict;
  out.append(total - unpadded, ' ');
  out += '\n';
  return out;
}

/// The dict np.save writes for a 1-D array (NumPy >= 1.24: sorted keys, ", " after each, then
/// room for the shape to grow to 21 digits).
inline std::string npy_dict(const std::string& descr, std::uint64_t n, bool fortran = false)
{
  const std::string length = std::to_string(n);
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': " +
                     (fortran ? "True" : "False") + ", 'shape': (" + length + ",), }";
  dict.append(21 - length.size(), ' ');
  return dict;
}

/// The header np.save writes for a 1-D little-endian array of `n` elements of `descr`.
inline std::string npy_header(const std::string& descr, std::uint64_t n, int major = 1,
                              std::size_t align = 64)
{
  return npy_prefix(npy_dict(descr, n), major, align);
}

// ---- key types -------------------------------------------------------------------------------

/// Calls f.template operator()<K>() with the C++ type of a key type's name.
template <typename F>
decltype(auto) visit_type(const std::string& name, F&& f)
{
  if (name == "u32") return f.template operator()<std::uint32_t>();
  if (name == "i32") return f.template operator()<std::int32_t>();
  if (name == "u64") return f.template operator()<std::uint64_t>();
  if (name == "i64") return f.template operator()<std::int64_t>();
  if (name == "f32") return f.template operator()<float>();
  if (name == "f64") return f.template operator()<double>();
  throw std::runtime_error{"no key type " + name};
}

inline std::string descr_of(const std::string& name)
{
  return std::string{"<"} + (name[0] == 'f' ? 'f' : name[0] == 'i' ? 'i' : 'u') +
         (name.substr(1) == "32" ? "4" : "8");
}

template <typename K>
using bits_of = std::conditional_t<sizeof(K) == 4, std::uint32_t, std::uint64_t>;

template <typename K>
bits_of<K> bits(K k)
{
  bits_of<K> b{};
  std::memcpy(&b, &k, sizeof k);
  return b;
}

template <typename K>
K from_bits(bits_of<K> b)
{
  K k{};
  std::memcpy(&k, &b, sizeof k);
  return k;
}

/// IEEE 754 totalOrder (and plain order for integers) as an unsigned key.
template <typename K>
bits_of<K> total_key(K k)
{
  using U = bits_of<K>;
  constexpr U sign = U{1} << (8 * sizeof(K) - 1);
  if constexpr (std::is_floating_point_v<K>) {
    const U b = bits(k);
    return (b & sign) != 0 ? static_cast<U>(~b) : static_cast<U>(b | sign);
  } else if constexpr (std::is_signed_v<K>) {
    return static_cast<U>(bits(k) ^ sign);
  } else {
    return k;
  }
}

/// "a comes before b" in the order gpusort sorts by: `numpy` is NumPy's (every NaN after every
/// number in both directions, NaNs equal, -0.0 == +0.0), else totalOrder.
template <typename K>
struct before {
  bool descending{};
  bool numpy{};
  bool operator()(K a, K b) const
  {
    if constexpr (std::is_floating_point_v<K>) {
      if (numpy) {
        if (std::isnan(a)) return false;
        if (std::isnan(b)) return true;
        return descending ? b < a : a < b;
      }
    }
    return descending ? total_key(b) < total_key(a) : total_key(a) < total_key(b);
  }
};

template <typename K>
std::vector<K> stable_sorted(std::vector<K> keys, bool descending, bool numpy)
{
  std::stable_sort(keys.begin(), keys.end(), before<K>{descending, numpy});
  return keys;
}

/// The stable sorting permutation: np.argsort(a, kind="stable") for numpy order ascending.
template <typename K>
std::vector<std::int64_t> stable_argsort(const std::vector<K>& keys, bool descending, bool numpy)
{
  std::vector<std::int64_t> idx(keys.size());
  std::iota(idx.begin(), idx.end(), 0);
  const before<K> cmp{descending, numpy};
  std::stable_sort(idx.begin(), idx.end(), [&](std::int64_t i, std::int64_t j) {
    return cmp(keys[static_cast<std::size_t>(i)], keys[static_cast<std::size_t>(j)]);
  });
  return idx;
}

/// Keys with many equal ones (so that stability shows) and, for floats, NaNs of both signs and
/// many payloads, +-0.0, +-inf, subnormals.
template <typename K>
std::vector<K> tricky_keys(std::size_t n, std::uint64_t seed)
{
  std::mt19937_64 rng{seed};
  std::vector<K> out(n);
  const std::uint64_t distinct = std::max<std::size_t>(n / 8, 3);
  for (K& k : out) {
    const std::uint64_t r = rng();
    if constexpr (std::is_floating_point_v<K>) {
      using U = bits_of<K>;
      constexpr int mantissa = std::numeric_limits<K>::digits - 1;
      constexpr U sign = U{1} << (8 * sizeof(K) - 1);
      constexpr U exponent = static_cast<U>(~sign) & ~((U{1} << mantissa) - 1);
      const U s = (r & 1) != 0 ? sign : U{0};
      switch ((r >> 1) % 16) {
        case 0: {  // a NaN: quiet or signalling, any payload but zero
          U payload = static_cast<U>(rng()) & ((U{1} << mantissa) - 1);
          if ((r >> 8) % 4 == 0) payload &= 7;  // few payloads: equal NaN bit patterns too
          k = from_bits<K>(s | exponent | (payload == 0 ? U{1} : payload));
          break;
        }
        case 1: k = from_bits<K>(s); break;                        // -0.0 or +0.0
        case 2: k = from_bits<K>(s | exponent); break;             // -inf or +inf
        case 3: k = from_bits<K>(s | static_cast<U>(1 + (r >> 8) % 5)); break;  // subnormals
        default:
          k = static_cast<K>(static_cast<double>((r >> 8) % distinct) / 4.0) * (s != 0 ? -1 : 1);
      }
    } else {
      const std::uint64_t pick = (r >> 1) % 16;
      if (pick == 0) {
        k = std::numeric_limits<K>::min();
      } else if (pick == 1) {
        k = std::numeric_limits<K>::max();
      } else {
        k = static_cast<K>((r >> 5) % distinct);
        if constexpr (std::is_signed_v<K>)
          if ((r & 1) != 0) k = static_cast<K>(-k);
      }
    }
  }
  return out;
}

template <typename K>
std::string to_bytes(const std::vector<K>& v)
{
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(K));
}

template <typename K>
std::vector<K> from_bytes(const std::string& s)
{
  std::vector<K> v(s.size() / sizeof(K));
  // An empty vector's data() may be null, which memcpy must not get even for 0 bytes (UBSan).
  if (!v.empty()) std::memcpy(v.data(), s.data(), v.size() * sizeof(K));
  return v;
}

/// Empty when `got` is `want` byte for byte; else the first difference.
template <typename K>
std::string first_difference(const std::vector<K>& want, const std::vector<K>& got)
{
  if (want.size() != got.size())
    return "sizes " + std::to_string(want.size()) + " and " + std::to_string(got.size());
  for (std::size_t i = 0; i < want.size(); ++i)
    if (bits(want[i]) != bits(got[i]))
      return "element " + std::to_string(i) + " of " + std::to_string(want.size()) +
             ": bits " + std::to_string(bits(want[i])) + " expected, " +
             std::to_string(bits(got[i])) + " found";
  return {};
}

/// Empty when `got` is a permutation of `want` (the stable reference) whose every element is
/// equal to the reference's in the order: what an unstable sort may give.
template <typename K>
std::string unstable_difference(const std::vector<K>& want, const std::vector<K>& got,
                                bool descending, bool numpy)
{
  if (want.size() != got.size())
    return "sizes " + std::to_string(want.size()) + " and " + std::to_string(got.size());
  const before<K> cmp{descending, numpy};
  for (std::size_t i = 0; i < want.size(); ++i)
    if (cmp(want[i], got[i]) || cmp(got[i], want[i]))
      return "element " + std::to_string(i) + " is not equal to the reference's in the order";
  std::vector<bits_of<K>> a(want.size()), b(got.size());
  std::transform(want.begin(), want.end(), a.begin(), bits<K>);
  std::transform(got.begin(), got.end(), b.begin(), bits<K>);
  std::sort(a.begin(), a.end());
  std::sort(b.begin(), b.end());
  if (a != b) return "not a permutation of the input";
  return {};
}

}  // namespace npy_reference
