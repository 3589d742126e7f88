// The checks of a sort's rows and keys (include/gpusort/rows.hpp), shared by the engine, the
// CLI and the daemon.
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
