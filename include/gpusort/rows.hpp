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
