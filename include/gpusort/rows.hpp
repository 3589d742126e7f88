// Rows: sorting by several keys at once. A row's keys are fields of a fixed-width record (a
// database row, a NumPy structured array, the sort benchmark's 100-byte records) or elements of
// separate column arrays (np.lexsort's keys); they compare lexicographically, the first key
// first, each in its own order.
//
//   gpusort::engine engine{gpusort::config{}};
//   // 100-byte records, a 10-byte key at their start compared as unsigned bytes:
//   gpusort::sort_records(engine, {records, n, 100}, {{.type = gpusort::column_type::bytes,
//                                                      .offset = 0, .length = 10}});
//   // The permutation that sorts rows by `a` ascending, then `b` descending:
//   gpusort::argsort_rows(engine, gpusort::row_keys{n, {gpusort::column(a),
//                                  gpusort::column(b, gpusort::order::descending)}}, perm);
#pragma once

#include <gpusort/gpusort.hpp>

#include <cstdint>
#include <span>
#include <string_view>
#include <type_traits>
#include <vector>

namespace gpusort {

/// What a key of a row holds: the six key types, 128-bit integers (two's complement for i128,
/// in the machine's byte order like the others), and byte strings of a fixed length compared
/// as unsigned bytes (memcmp's order: the sort benchmark's keys, fixed-width text).
enum class column_type : std::uint8_t { u32, i32, u64, i64, f32, f64, u128, i128, bytes };

inline constexpr column_type all_column_types[] = {
    column_type::u32, column_type::i32, column_type::u64,  column_type::i64, column_type::f32,
    column_type::f64, column_type::u128, column_type::i128, column_type::bytes};

/// Bytes of a key of `t` (0 for bytes: its length says).
constexpr std::uint32_t size_of(column_type t) noexcept
{
  switch (t) {
    case column_type::u32:
    case column_type::i32:
    case column_type::f32: return 4;
    case column_type::u64:
    case column_type::i64:
    case column_type::f64: return 8;
    case column_type::u128:
    case column_type::i128: return 16;
    case column_type::bytes: return 0;
  }
  return 0;
}

std::string_view name_of(column_type t) noexcept;
/// "u32" ... "f64", "u128", "i128", "bytes"; nullopt for anything else.
std::optional<column_type> parse_column_type(std::string_view text) noexcept;

/// The column type of a key type.
constexpr column_type column_type_of(dtype t) noexcept
{
  switch (t) {
    case dtype::u32: return column_type::u32;
    case dtype::i32: return column_type::i32;
    case dtype::u64: return column_type::u64;
    case dtype::i64: return column_type::i64;
    case dtype::f32: return column_type::f32;
    case dtype::f64: return column_type::f64;
  }
  return column_type::u64;
}

/// A key inside a record: its type, where it starts, its length (for bytes; 0 or the type's
/// size for the others) and its order.
struct key_field {
  column_type type{column_type::u64};
  std::uint32_t offset{};
  std::uint32_t length{};
  order direction{order::ascending};
  /// The key's bytes: `length` for bytes, the type's size otherwise.
  [[nodiscard]] constexpr std::uint32_t bytes() const noexcept
  {
    return type == column_type::bytes ? length : size_of(type);
  }
};

/// `count` records of `record_bytes` (1 byte to 1 MiB) each at `data`.
struct record_array {
  const void* data{};
  std::uint64_t count{};
  std::uint32_t record_bytes{};
};

/// One key of every row: row i's key is at data + i * stride (a column: stride = the key's
/// bytes; a field of records: data = records + offset, stride = the record's bytes).
struct row_key {
  const void* data{};
  std::uint64_t stride{};
  key_field field{};  ///< its offset is ignored: `data` points at row 0's key
};

/// `count` rows and their keys, the first the primary one (note: np.lexsort takes the last
/// key as the primary one; the Python client's lexsort takes NumPy's order).
struct row_keys {
  std::uint64_t count{};
  std::vector<row_key> keys;
};

/// A column of keys of its own: `keys` of a key type.
template <typename K>
row_key column(std::span<const K> keys, order direction = order::ascending)
{
  static_assert(std::is_arithmetic_v<K>);
  return {keys.data(), sizeof(K), {column_type_of(dtype_of_v<std::remove_cv_t<K>>), 0, 0,
                                   direction}};
}
template <typename K>
row_key column(const std::vector<K>& keys, order direction = order::ascending)
{
  return column(std::span<const K>{keys}, direction);
}

/// The keys of `fields` in `records`, checked: every field within the record, at least one,
/// a bytes field of 1 to record_bytes bytes. A bad field is a gpusort::invalid_argument that
/// names it.
row_keys record_keys(const record_array& records, std::span<const key_field> fields);

/// Checks `keys` (at least one key, data for every key of a non-empty job, a positive
/// stride, a bytes key's length of 1 to 1 MiB); a gpusort::invalid_argument otherwise.
void check_row_keys(const row_keys& keys);

/// The stable permutation that sorts the rows: row indices_out[i] is the i-th row in order,
/// equal rows by position (np.lexsort's meaning with the primary key first). Indices are
/// int64 (index_bytes 8) or uint32 (4, only for fewer than 2^32 rows). Float keys compare in
/// options.floats (in NumPy's order, NaNs and both zeros tie, as in np.lexsort).
/// options.stable is implied; options.direction must be ascending (each key has its own).
/// The keys are read only; indices_out is ordinary memory (not a file_array).
sort_report argsort_rows(engine& engine, const row_keys& keys, void* indices_out,
                         std::uint32_t index_bytes = 8, const sort_options& options = {});

/// Sorts whole records by `fields` (stable), in place (records_out null) or into records_out
/// (the same size, not overlapping). The keys' permutation is found as argsort_rows does and
/// the records are then moved on the host's cores; in place, the host takes a second copy of
/// the records meanwhile unless options.host_memory_limit forbids it, when they are permuted
/// in place instead (slower; a few MiB). Returns the engine's report with `bytes` the records'.
sort_report sort_records(engine& engine, const record_array& records,
                         std::span<const key_field> fields, void* records_out = nullptr,
                         const sort_options& options = {});

}  // namespace gpusort
