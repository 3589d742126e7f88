#include "client/commands/records.hpp"

#include <gpusort/units.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <optional>
#include <string_view>

namespace gpusort::cli {

namespace {

constexpr std::uint64_t max_record_bytes = std::uint64_t{1} << 20;

std::vector<std::string_view> split(std::string_view text, char by)
{
  std::vector<std::string_view> parts;
  for (std::size_t at = 0;;) {
    const std::size_t next = text.find(by, at);
    parts.push_back(text.substr(at, next == std::string_view::npos ? text.npos : next - at));
    if (next == std::string_view::npos) return parts;
    at = next + 1;
  }
}

std::optional<std::uint32_t> number(std::string_view text)
{
  std::uint32_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || end != text.data() + text.size()) return std::nullopt;
  return v;
}

/// The key a structured .npy field makes: integers and floats of the engine's types in the
/// host's byte order, byte strings ('S'), bools and unsigned bytes as bytes (their order is
/// the unsigned bytes'); nullopt for the others.
std::optional<key_field> key_of_field(const npy_field& f)
{
  if (f.nested || f.descr.size() < 3) return std::nullopt;
  const std::string_view d = f.descr;
  const auto t = npy_key_type(d);
  if (t) return key_field{column_type_of(*t), static_cast<std::uint32_t>(f.offset)};
  if (d[1] == 'S' || d == "|b1" || d == "|u1")
    return key_field{column_type::bytes, static_cast<std::uint32_t>(f.offset),
                     static_cast<std::uint32_t>(f.bytes)};
  return std::nullopt;
}

const npy_field* field_named(const npy_header& h, std::string_view name)
{
  const auto it = std::find_if(h.fields.begin(), h.fields.end(),
                               [&](const npy_field& f) { return f.name == name; });
  return it == h.fields.end() ? nullptr : &*it;
}

/// A key of a structured .npy file's field, or exit 65 naming it when no key takes its type.
key_field field_key(const npy_field& f, const std::string& shown)
{
  const std::optional<key_field> k = key_of_field(f);
  if (!k)
    throw cli_error{exit_data, fmt::format("{}: field '{}' ({}) is not a type records sort by "
                                           "(u4 i4 u8 i8 f4 f8 little-endian, S bytes, b1, u1)",
                                           shown, f.name, f.descr)};
  return *k;
}

/// One --key: OFFSET:LEN:TYPE[:desc], or for a structured .npy file NAME[:desc].
key_field parse_key(std::string_view text, const npy_header* npy, const std::string& shown)
{
  std::vector<std::string_view> parts = split(text, ':');
  order dir = order::ascending;
  if (parts.size() > 1 && (parts.back() == "desc" || parts.back() == "asc")) {
    if (parts.back() == "desc") dir = order::descending;
    parts.pop_back();
  }
  if (parts.size() == 1 && npy != nullptr && npy->structured) {
    const npy_field* f = field_named(*npy, parts[0]);
    if (f == nullptr)
      throw cli_error{exit_usage, fmt::format("--key {}: {} has no field '{}'", text, shown,
                                              parts[0])};
    key_field k = field_key(*f, shown);
    k.direction = dir;
    return k;
  }
  if (parts.size() != 3)
    throw cli_error{exit_usage, fmt::format("--key {}: not OFFSET:LEN:TYPE[:desc]{}", text,
                                            npy != nullptr && npy->structured
                                                ? " or a field's NAME[:desc]"
                                                : "")};
  const std::optional<std::uint32_t> offset = number(parts[0]);
  const std::optional<std::uint32_t> length = number(parts[1]);
  const std::optional<column_type> type = parse_column_type(parts[2]);
  if (!offset || !length)
    throw cli_error{exit_usage, fmt::format("--key {}: OFFSET and LEN are byte counts", text)};
  if (!type)
    throw cli_error{exit_usage, fmt::format("--key {}: unknown type '{}' (u32 i32 u64 i64 f32 "
                                            "f64 u128 i128 bytes)",
                                            text, parts[2])};
  if (*type == column_type::bytes) {
    if (*length == 0) throw cli_error{exit_usage, fmt::format("--key {}: a length of 0", text)};
    return {*type, *offset, *length, dir};
  }
  if (*length != size_of(*type))
    throw cli_error{exit_usage, fmt::format("--key {}: a {} key is {} bytes long, not {}", text,
                                            parts[2], size_of(*type), *length)};
  return {*type, *offset, 0, dir};
}

}  // namespace

bool wants_records(const parsed_args& a, const array_layout& layout)
{
  return a.has("record-bytes") || a.has("key") || a.has("order") ||
         (layout.npy && layout.npy->structured);
}

records_layout records_layout_of(const parsed_args& a, const array_layout& layout,
                                 const std::string& shown,
                                 const std::vector<key_field>& default_keys)
{
  const npy_header* npy = layout.npy ? &*layout.npy : nullptr;
  const bool structured = npy != nullptr && npy->structured;
  if (npy != nullptr && !structured)
    throw cli_error{exit_data, fmt::format("{} holds '{}' elements, not records (a structured "
                                           ".npy file has fields)",
                                           shown, npy->descr)};
  records_layout r;
  if (structured) {
    for (const npy_field& f : npy->fields)
      if (f.nested)
        throw cli_error{exit_data, fmt::format("{}: field '{}' is a subarray or a structure, "
                                               "which records sort around but not by",
                                               shown, f.name)};
    r.record_bytes =
        static_cast<std::uint32_t>(std::min(npy->record_bytes(), max_record_bytes + 1));
    if (npy->shape.size() != 1)
      throw cli_error{exit_data, fmt::format("{} is {}-dimensional: records are 1-D", shown,
                                             npy->shape.size())};
  }
  if (const std::optional<std::string> given = a.get("record-bytes")) {
    const std::optional<std::uint64_t> n = parse_count(*given);
    if (!n || *n == 0 || *n > max_record_bytes)
      throw cli_error{exit_usage, fmt::format("--record-bytes takes 1 to {}, not '{}'",
                                              max_record_bytes, *given)};
    if (structured && *n != r.record_bytes)
      throw cli_error{exit_usage, fmt::format("--record-bytes {}: {}'s header says {}", *n,
                                              shown, r.record_bytes)};
    r.record_bytes = static_cast<std::uint32_t>(*n);
  }
  if (r.record_bytes == 0)
    throw cli_error{exit_usage, "records need --record-bytes (the size of one record)"};
  if (r.record_bytes > max_record_bytes)
    throw cli_error{exit_data, fmt::format("{}: records of more than {} bytes", shown,
                                           max_record_bytes)};

  for (const std::string& k : a.get_all("key")) r.keys.push_back(parse_key(k, npy, shown));
  if (const std::optional<std::string> fields = a.get("order")) {
    if (!structured)
      throw cli_error{exit_usage, "--order names the fields of a structured .npy file"};
    if (!r.keys.empty()) throw cli_error{exit_usage, "--order or --key, not both"};
    // NumPy's order: the named fields, then every other field in the dtype's order.
    std::vector<const npy_field*> chosen;
    for (const std::string_view name : split(*fields, ',')) {
      const npy_field* f = field_named(*npy, name);
      if (f == nullptr)
        throw cli_error{exit_usage, fmt::format("--order: {} has no field '{}'", shown, name)};
      if (std::find(chosen.begin(), chosen.end(), f) != chosen.end())
        throw cli_error{exit_usage, fmt::format("--order names '{}' twice", name)};
      chosen.push_back(f);
    }
    for (const npy_field& f : npy->fields)
      if (std::find(chosen.begin(), chosen.end(), &f) == chosen.end() && !f.name.empty())
        chosen.push_back(&f);
    for (const npy_field* f : chosen) r.keys.push_back(field_key(*f, shown));
  }
  if (r.keys.empty() && structured)
    for (const npy_field& f : npy->fields)
      if (!f.name.empty()) r.keys.push_back(field_key(f, shown));
  const bool defaulted = r.keys.empty();
  if (defaulted) r.keys = default_keys;
  if (r.keys.empty())
    throw cli_error{exit_usage, "records need at least one --key OFFSET:LEN:TYPE[:desc]"};
  for (const key_field& k : r.keys)
    if (std::uint64_t{k.offset} + k.bytes() > r.record_bytes)
      throw cli_error{exit_usage, fmt::format("{} {}:{}:{} ends at byte {}, beyond the "
                                              "{}-byte record{}",
                                              defaulted ? "the default key" : "--key", k.offset,
                                              k.bytes(), name_of(k.type),
                                              std::uint64_t{k.offset} + k.bytes(),
                                              r.record_bytes,
                                              defaulted ? ": give --key" : "")};
  if (layout.bytes % r.record_bytes != 0)
    throw cli_error{exit_data, fmt::format("{} holds {} bytes of data, not a whole number of "
                                           "{}-byte records",
                                           shown, layout.bytes, r.record_bytes)};
  r.count = layout.bytes / r.record_bytes;
  if (structured && npy->shape.front() != r.count)
    throw cli_error{exit_data, fmt::format("{}: its header says {} records, its data holds {}",
                                           shown, npy->shape.front(), r.count)};
  if (structured)
    for (const npy_field& f : npy->fields)
      if (f.descr == "|b1" && std::any_of(r.keys.begin(), r.keys.end(), [&](const key_field& k) {
            return k.offset == f.offset && k.bytes() == 1;
          }))
        r.bool_keys.emplace_back(f.name, static_cast<std::uint32_t>(f.offset));
  return r;
}

void check_bool_keys(const std::filesystem::path& input, std::uint64_t offset,
                     const records_layout& r, const std::string& shown)
{
  if (r.bool_keys.empty() || r.count == 0) return;
  const mapped_input mapped{input};
  const auto* records = static_cast<const unsigned char*>(mapped.data()) + offset;
  for (const auto& [name, at] : r.bool_keys)
    for (std::uint64_t i = 0; i < r.count; ++i)
      if (const unsigned char b = records[i * r.record_bytes + at]; b > 1)
        throw cli_error{exit_data,
                        fmt::format("{}: bool field '{}' holds the byte {} in record {}: NumPy "
                                    "takes every nonzero byte as True, and records sort by "
                                    "their bytes; write it as 0 and 1 (in NumPy: a['{}'] = a['{}'] != 0)",
                                    shown, name, b, i, name, name)};
}

}  // namespace gpusort::cli
