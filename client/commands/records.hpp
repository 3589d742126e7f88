// Records on the command line (issue 42): the layout `sort`, `verify` and `gen` share, read from
// --record-bytes and repeated --key OFFSET:LEN:TYPE[:desc], or from a structured .npy header
// (its fields by name, NumPy's order of them with --order).
#pragma once

#include "client/args.hpp"
#include "client/commands/common.hpp"

#include <gpusort/types.hpp>

#include <cstdint>
#include <filesystem>
#include <utility>
#include <string>
#include <vector>

namespace gpusort::cli {

/// The help lines of the records' options, shared by the commands' tables.
inline constexpr const char* record_bytes_help =
    "bytes per record (1 to 1Mi; a structured .npy\n"
    "file's header says it)";
inline constexpr const char* key_help =
    "a key of the records: OFFSET:LEN:TYPE[:desc],\n"
    "TYPE u32 i32 u64 i64 f32 f64 u128 i128 bytes\n"
    "(LEN: the bytes' length, else the type's size);\n"
    "a structured .npy file's NAME[:desc] too; repeat\n"
    "it for more keys, the first the primary one";

/// How a command's records are laid out and compared.
struct records_layout {
  std::uint32_t record_bytes{};
  std::vector<key_field> keys;
  std::uint64_t count{};
  /// The structured .npy fields of type b1 among the keys, by name and offset: NumPy's
  /// sort(order=) takes every nonzero byte of one as True, which the keys' bytes cannot say,
  /// so their bytes must be 0 or 1 (check_bool_keys).
  std::vector<std::pair<std::string, std::uint32_t>> bool_keys;
};

/// Whether the command's options or the input ask for records: --record-bytes, --key, --order,
/// or a structured .npy input.
bool wants_records(const parsed_args& a, const array_layout& layout);

/// The layout of `layout`'s data named `shown`: --record-bytes (or the structured header's),
/// the keys from --key (or --order's fields then the others, NumPy's order for a structured
/// .npy file; else `default_keys`), the count of whole records. Usage errors name the bad
/// option; data errors (a size that is not whole records, a field type no key takes) exit 65.
records_layout records_layout_of(const parsed_args& a, const array_layout& layout,
                                 const std::string& shown,
                                 const std::vector<key_field>& default_keys = {});

/// Exit 65 naming the field and the first record where a b1 key (records_layout::bool_keys)
/// holds a byte other than 0 or 1: sorted as bytes it would order two Trues NumPy calls equal.
/// Reads nothing where there is no such key.
void check_bool_keys(const std::filesystem::path& input, std::uint64_t offset,
                     const records_layout& r, const std::string& shown);

/// The sort benchmark's key: 10 bytes at the start of each record.
inline const std::vector<key_field> benchmark_key{{column_type::bytes, 0, 10}};

}  // namespace gpusort::cli
