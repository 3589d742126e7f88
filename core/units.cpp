// Grammar shared by parse_bytes and parse_count:
//
//   quantity := digits [ "." digits ] [ spaces ] [ prefix [ "i" ] ] [ "B" ]   ("B": bytes only)
//   prefix   := k | K | M | G | T | P | E          (10^3.. 10^18, or 2^10.. 2^60 with "i")
//
// Decimals are accepted when they denote a whole number ("1.5GiB", "0.5Ki", "2.0"), so a value
// printed by format_bytes ("1.50 GiB") reads back; "1.1KiB" (1126.4 bytes) is rejected rather
// than rounded, because a silently rounded size is a size nobody asked for. Spaces are allowed
// only between the number and a suffix; a sign, an exponent or surrounding whitespace is
// malformed. Kilo may be written k or K; the other prefixes are upper case only, since "m"
// would read as milli.
#include <gpusort/units.hpp>

#include <array>
#include <cstdio>

namespace gpusort {
namespace {

__extension__ typedef unsigned __int128 u128;  // __extension__: no -Wpedantic warning

constexpr bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

/// The multiplier of a prefix letter: 10^(3n) or, when binary, 2^(10n); 0 if not a prefix.
constexpr std::uint64_t prefix_multiplier(char c, bool binary) noexcept
{
  int n = 0;
  switch (c) {
    case 'k':
    case 'K': n = 1; break;
    case 'M': n = 2; break;
    case 'G': n = 3; break;
    case 'T': n = 4; break;
    case 'P': n = 5; break;
    case 'E': n = 6; break;
    default: return 0;
  }
  std::uint64_t m = 1;
  for (int i = 0; i < n; ++i) m *= binary ? 1024 : 1000;
  return m;
}

std::optional<std::uint64_t> parse_quantity(std::string_view text, bool bytes) noexcept
{
  std::size_t pos = 0;
  const auto digits_from = [&](std::size_t start) {
    std::size_t end = start;
    while (end < text.size() && is_digit(text[end])) ++end;
    return end;
  };

  const std::size_t int_end = digits_from(0);
  if (int_end == 0) return std::nullopt;
  std::string_view fraction;
  pos = int_end;
  if (pos < text.size() && text[pos] == '.') {
    const std::size_t frac_end = digits_from(pos + 1);
    if (frac_end == pos + 1) return std::nullopt;  // "1." is not a number
    fraction = text.substr(pos + 1, frac_end - pos - 1);
    pos = frac_end;
  }
  const std::size_t number_end = pos;
  while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t')) ++pos;
  if (pos == text.size() && pos != number_end) return std::nullopt;  // trailing blanks

  std::uint64_t multiplier = 1;
  std::string_view suffix = text.substr(pos);
  if (!suffix.empty() && prefix_multiplier(suffix.front(), false) != 0) {
    const bool binary = suffix.size() >= 2 && suffix[1] == 'i';
    multiplier = prefix_multiplier(suffix.front(), binary);
    suffix.remove_prefix(binary ? 2 : 1);
  }
  if (bytes && suffix == "B") suffix.remove_prefix(1);
  if (!suffix.empty()) return std::nullopt;

  std::uint64_t whole = 0;
  for (std::size_t i = 0; i < int_end; ++i) {
    if (__builtin_mul_overflow(whole, std::uint64_t{10}, &whole) ||
        __builtin_add_overflow(whole, static_cast<std::uint64_t>(text[i] - '0'), &whole))
      return std::nullopt;
  }

  // fraction * multiplier, digit by digit from the right like long multiplication on paper:
  // every digit left behind the point must come out 0, and what carries over the point is the
  // whole part. carry < multiplier <= 2^60 throughout, so 9 * multiplier + carry fits.
  while (!fraction.empty() && fraction.back() == '0') fraction.remove_suffix(1);
  std::uint64_t carry = 0;
  for (auto it = fraction.rbegin(); it != fraction.rend(); ++it) {
    const std::uint64_t p = static_cast<std::uint64_t>(*it - '0') * multiplier + carry;
    if (p % 10 != 0) return std::nullopt;  // not a whole number of bytes / elements
    carry = p / 10;
  }

  std::uint64_t result = 0;
  if (__builtin_mul_overflow(whole, multiplier, &result) ||
      __builtin_add_overflow(result, carry, &result))
    return std::nullopt;
  return result;
}

}  // namespace

std::optional<std::uint64_t> parse_bytes(std::string_view text) noexcept
{
  return parse_quantity(text, true);
}

std::optional<std::uint64_t> parse_count(std::string_view text) noexcept
{
  return parse_quantity(text, false);
}

std::string format_bytes(std::uint64_t bytes)
{
  if (bytes < 1024) return std::to_string(bytes) + " B";
  static constexpr std::array<const char*, 6> units{"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  // Hundredths of the unit, rounded half up, in integers: a double would misround large
  // values. Moves up a unit when rounding reaches 1024.00 ("1.00 MiB", not "1024.00 KiB").
  std::size_t u = 0;
  std::uint64_t hundredths = 0;
  for (;; ++u) {
    const unsigned shift = 10 * static_cast<unsigned>(u + 1);
    const std::uint64_t unit = std::uint64_t{1} << shift;
    const std::uint64_t q = bytes >> shift;
    const std::uint64_t r = bytes & (unit - 1);
    // r * 100 passes 2^64 for the larger units, hence 128 bits.
    hundredths = q * 100 + static_cast<std::uint64_t>((u128{r} * 100 + unit / 2) / unit);
    if (hundredths < 102400 || u + 1 == units.size()) break;
  }
  std::array<char, 48> buffer{};
  std::snprintf(buffer.data(), buffer.size(), "%llu.%02llu %s",
                static_cast<unsigned long long>(hundredths / 100),
                static_cast<unsigned long long>(hundredths % 100), units[u]);
  return buffer.data();
}

}  // namespace gpusort
