// The vocabulary of rows (include/gpusort/rows.hpp): column type names and the checks of a
// job's keys, shared by the engine, the CLI and the daemon.
#include <gpusort/error.hpp>
#include <gpusort/rows.hpp>

#include <fmt/format.h>

#include <string>

namespace gpusort {

namespace {

/// The longest bytes key: a record's keys lie within its 1 MiB, and longer strings are better
/// sorted by a prefix and a hash than compared whole.
constexpr std::uint32_t max_key_bytes = 1u << 20;

}  // namespace

std::string_view name_of(column_type t) noexcept
{
  switch (t) {
    case column_type::u32: return "u32";
    case column_type::i32: return "i32";
    case column_type::u64: return "u64";
    case column_type::i64: return "i64";
    case column_type::f32: return "f32";
    case column_type::f64: return "f64";
    case column_type::u128: return "u128";
    case column_type::i128: return "i128";
    case column_type::bytes: return "bytes";
  }
  return "?";
}

std::optional<column_type> parse_column_type(std::string_view text) noexcept
{
  for (column_type t : all_column_types)
    if (name_of(t) == text) return t;
  return std::nullopt;
}

void check_row_keys(const row_keys& keys)
{
  if (keys.keys.empty()) throw invalid_argument{"a sort of rows needs at least one key"};
  for (std::size_t k = 0; k < keys.keys.size(); ++k) {
    const row_key& key = keys.keys[k];
    const key_field& f = key.field;
    const std::string which = fmt::format("key {} ({})", k + 1, name_of(f.type));
    if (f.type == column_type::bytes && (f.length == 0 || f.length > max_key_bytes))
      throw invalid_argument{fmt::format("{}: a bytes key is 1 to {} bytes long, not {}", which,
                                         max_key_bytes, f.length)};
    if (f.type != column_type::bytes && f.length != 0 && f.length != size_of(f.type))
      throw invalid_argument{fmt::format("{}: its length is {} bytes, not {}", which,
                                         size_of(f.type), f.length)};
    if (keys.count == 0) continue;
    if (key.data == nullptr) throw invalid_argument{which + ": no data"};
    if (key.stride == 0 && keys.count > 1)
      throw invalid_argument{which + ": a stride of 0 bytes (every row the same key)"};
  }
}

row_keys record_keys(const record_array& records, std::span<const key_field> fields)
{
  if (records.record_bytes == 0 || records.record_bytes > max_key_bytes)
    throw invalid_argument{fmt::format("a record is 1 to {} bytes long, not {}", max_key_bytes,
                                       records.record_bytes)};
  if (records.count > 0 && records.data == nullptr)
    throw invalid_argument{"records: no data"};
  if (fields.empty()) throw invalid_argument{"a sort of records needs at least one key"};
  row_keys keys{records.count, {}};
  const auto* base = static_cast<const unsigned char*>(records.data);
  for (std::size_t k = 0; k < fields.size(); ++k) {
    const key_field& f = fields[k];
    const std::uint64_t bytes = f.bytes();
    if (f.type == column_type::bytes && bytes == 0)
      throw invalid_argument{fmt::format("key {} (bytes at offset {}): a length of 0", k + 1,
                                         f.offset)};
    if (std::uint64_t{f.offset} + bytes > records.record_bytes)
      throw invalid_argument{fmt::format(
          "key {} ({} at offset {}, {} bytes) ends at byte {}, beyond the {}-byte record", k + 1,
          name_of(f.type), f.offset, bytes, std::uint64_t{f.offset} + bytes,
          records.record_bytes)};
    keys.keys.push_back({base == nullptr ? nullptr : base + f.offset, records.record_bytes, f});
    keys.keys.back().field.offset = 0;
  }
  check_row_keys(keys);
  return keys;
}

}  // namespace gpusort
