// Fuzzes parse_bytes and parse_count (core/units.cpp) against the promises of
// include/gpusort/units.hpp and the grammar at the top of core/units.cpp. Input: the text.
//
// Contracts checked, beyond "no crash, no undefined behaviour":
// - an accepted text is digits first, with no sign and no surrounding blanks;
// - plain digits mean their decimal value, and are rejected exactly when it passes 2^64;
// - a count is a size too: parse_count(t) == v implies parse_bytes(t) == v and
//   parse_bytes(t + "B") == v (the grammars differ only by the final "B");
// - the spellings the code writes read back: parse_bytes(exact_size(v)) == v for every v, and
//   format_bytes(v) ("1.50 GiB") reads back to within its rounding, half a hundredth of its
//   unit, whenever it denotes a whole number of bytes.
#include <gpusort/units.hpp>

#include "config/schema.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

namespace {

[[noreturn]] void broken(const char* what, std::string_view text)
{
  std::fprintf(stderr, "units contract broken: %s; input \"%.*s\"\n", what,
               static_cast<int>(text.size()), text.data());
  std::abort();
}

bool all_digits(std::string_view text)
{
  if (text.empty()) return false;
  for (const char c : text)
    if (c < '0' || c > '9') return false;
  return true;
}

/// The decimal value of digits, or nothing past 2^64 - 1: the reference for plain integers,
/// independent of core/units.cpp.
std::optional<std::uint64_t> reference_integer(std::string_view digits)
{
  unsigned __int128 value = 0;
  for (const char c : digits) {
    value = value * 10 + static_cast<unsigned>(c - '0');
    if (value > UINT64_MAX) return std::nullopt;
  }
  return static_cast<std::uint64_t>(value);
}

void check_text(std::string_view text)
{
  const std::optional<std::uint64_t> bytes = gpusort::parse_bytes(text);
  const std::optional<std::uint64_t> count = gpusort::parse_count(text);

  for (const auto& parsed : {bytes, count}) {
    if (!parsed) continue;
    if (text.empty() || text.front() < '0' || text.front() > '9')
      broken("accepted a text that does not start with a digit", text);
    if (text.back() == ' ' || text.back() == '\t') broken("accepted trailing blanks", text);
  }
  if (all_digits(text)) {
    const auto expected = reference_integer(text);
    if (bytes != expected) broken("parse_bytes of plain digits differs from their value", text);
    if (count != expected) broken("parse_count of plain digits differs from their value", text);
  }
  if (count) {
    if (bytes != count) broken("parse_count accepted what parse_bytes reads differently", text);
    const std::string with_b = std::string{text} + "B";
    if (gpusort::parse_bytes(with_b) != count) broken("count + \"B\" is not the same size", text);
  }
  // "B" is for bytes only.
  if (!text.empty() && text.back() == 'B' && count) broken("parse_count accepted a B", text);
}

void check_round_trips(std::uint64_t v, std::string_view input)
{
  const std::string exact = gpusort::detail::exact_size(v);
  if (gpusort::parse_bytes(exact) != v) broken(("exact_size(v) does not read back: " + exact +
                                                " v=" + std::to_string(v)).c_str(), input);

  const std::string formatted = gpusort::format_bytes(v);
  const std::optional<std::uint64_t> back = gpusort::parse_bytes(formatted);
  if (v < 1024) {
    if (back != v) broken(("format_bytes below 1 KiB is not exact: " + formatted).c_str(), input);
    return;
  }
  if (!back) return;  // e.g. "1.01 KiB" is 1034.24 bytes: not a whole number, rejected
  // The unit format_bytes chose, from its text: half a hundredth of it is the rounding.
  const std::size_t space = formatted.find(' ');
  const char prefix = formatted.at(space + 1);
  std::uint64_t unit = 1;
  for (const char p : std::string_view{"KMGTPE"}) {
    unit <<= 10;
    if (p == prefix) break;
  }
  const std::uint64_t diff = *back > v ? *back - v : v - *back;
  if (static_cast<unsigned __int128>(diff) * 200 > unit)
    broken(("format_bytes(v) reads back too far from v: " + formatted + " v=" +
            std::to_string(v) + " read " + std::to_string(*back)).c_str(), input);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  const std::string_view text{reinterpret_cast<const char*>(data), size};
  check_text(text);
  // The same bytes as a number, so that every value, not only the parseable ones, is written
  // and read back.
  std::uint64_t v = 0;
  std::memcpy(&v, data, size < sizeof v ? size : sizeof v);
  check_round_trips(v, text);
  if (const auto parsed = gpusort::parse_bytes(text)) check_round_trips(*parsed, text);
  return 0;
}
