// `gpusort verify`: a file sorted, and a permutation of its original.
#include "client/commands.hpp"

#include "client/commands/common.hpp"
#include "client/commands/records.hpp"
#include "core/records.hpp"
#include "client/files.hpp"
#include "client/in_place.hpp"
#include "core/verify.hpp"

#include <fmt/format.h>

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace gpusort::cli {

namespace fs = std::filesystem;

const command_spec& verify_spec()
{
  static const command_spec spec{
      .name = "verify",
      .synopsis = "FILE [--dtype T] [--original FILE] [--descending]\n"
                  "                      [--float-order total|numpy]\n"
                  "                      [--values FILE --original-values FILE "
                  "[--value-bytes 4|8]] [--json]\n"
                  "       gpusort verify FILE --records [--record-bytes R]\n"
                  "                      [--key OFFSET:LEN:TYPE[:desc]]... [--order FIELDS]\n"
                  "                      [--original FILE] [--json]",
      .description =
          "Checks that FILE is sorted and, with --original, that it is a permutation of the\n"
          "original, (key, value) pairs included, by an order-independent 128-bit\n"
          "fingerprint; without --original only the order is checked. Floats are checked in\n"
          "IEEE 754 totalOrder, or with --float-order numpy in NumPy's order (NaNs last,\n"
          "-0.0 == +0.0), the default when FILE is a .npy file.\n"
          "Any of the files may be a .npy file: its data after the header is checked, and the\n"
          "header gives the type (--dtype is then optional).\n"
          "Prints \"ok\" and exits 0 when it is; exits 1 naming the first problem otherwise.\n"
          "FILE - reads the keys from standard input.\n"
          "Records (--records, --record-bytes R or a structured .npy FILE) are checked as the\n"
          "sort benchmark's valsort does: in order by their keys (--key, repeatable; default\n"
          "0:10:bytes, the benchmark's key; a structured .npy file's fields as np.sort takes\n"
          "them, or --order), and with --original a permutation of the original by the 128-bit\n"
          "sum of every record's CRC-32. The output says the records' checksum and how many\n"
          "keys repeat.\n",
      .options = {
          {"dtype", "T", "key type: u32 i32 u64 i64 f32 f64 (a .npy file's\n"
                         "header says it)"},
          {"original", "FILE", "the keys before sorting (else: check the order only)"},
          {"descending", "", "expect descending order"},
          {"float-order", "ORDER", "total or numpy (default numpy for a .npy FILE,\n"
                                   "else total)"},
          {"values", "FILE", "the sorted values"},
          {"original-values", "FILE", "the values before sorting"},
          {"value-bytes", "4|8", "bytes per value (default 8, or the .npy header's)"},
          {"json", "", "print one JSON object: ok, elements, message (records: also\n"
                       "checksum and duplicate_keys)"},
          {"records", "", "FILE holds records (100 bytes each unless --record-bytes)"},
          {"record-bytes", "R", record_bytes_help},
          {"key", "SPEC", key_help, true},
          {"order", "FIELDS", "a structured .npy file's fields to check first"},
          {"help", "", "show this text"},
      }};
  return spec;
}

namespace {

/// Prints a verification's outcome (JSON, the "ok" line, or one error line) and returns its
/// exit code.
int report_verification(const parsed_args& a, bool ok, std::uint64_t n,
                        const std::string& message, const std::string& ok_line)
{
  if (a.has("json")) {
    print_json(stdout, {{"ok", ok}, {"elements", n}, {"message", message}});
  } else if (ok) {
    fmt::print("{}\n", ok_line);
  } else {
    std::fflush(stdout);
    std::fprintf(stderr, "gpusort: verification failed: %s\n", one_line(message).c_str());
  }
  std::fflush(stdout);
  return ok ? exit_ok : exit_verify_failed;
}

/// What verify checks: a file, mapped, or ("-") standard input read to its end.
class verify_input {
 public:
  explicit verify_input(const std::string& path)
      : shown_{path == "-" ? std::string{"standard input"} : path}
  {
    if (path == "-")
      piped_.emplace(STDIN_FILENO, shown_.string());
    else
      mapped_.emplace(path);
  }
  [[nodiscard]] void* source() const noexcept
  {
    return piped_ ? static_cast<void*>(piped_->data()) : mapped_->source();
  }
  [[nodiscard]] std::uint64_t size() const noexcept
  {
    return piped_ ? piped_->size() : mapped_->size();
  }
  [[nodiscard]] const fs::path& path() const noexcept { return shown_; }

 private:
  fs::path shown_;
  std::optional<stream_input> piped_;
  std::optional<mapped_input> mapped_;
};

/// A mapped file (or a stream) and where its array lies in it.
struct mapped_array {
  mapped_array(const std::string& shown, void* source, std::uint64_t size)
      : layout{layout_of(shown, source, size)}, data{static_cast<char*>(source) + layout.offset()}
  {
  }
  array_layout layout;
  void* data;  ///< the array's first byte, after any header
};

/// The keys of a mapped file in the host's order: the file's own bytes, or for big-endian keys a
/// byte-swapped copy (the mapping is read-only).
class host_order_keys {
 public:
  host_order_keys(void* data, const key_layout& k) : data_{data}
  {
    if (!k.swapped || k.count == 0) return;
    const std::uint64_t bytes = k.count * size_of(k.type);
    copy_ = std::make_unique<char[]>(bytes);
    std::memcpy(copy_.get(), data, bytes);
    swap_bytes(copy_.get(), k.count, size_of(k.type));
    data_ = copy_.get();
  }
  [[nodiscard]] void* data() const noexcept { return data_; }

 private:
  void* data_;
  std::unique_ptr<char[]> copy_;
};

std::string_view direction_name(order dir)
{
  return dir == order::ascending ? "ascending" : "descending";
}

/// `verify` without an original: the order alone, for a file whose input is gone.
int verify_order_only(const parsed_args& a, const fs::path& shown, const key_array& keys,
                      order direction, float_order floats)
{
  const order_check c = check_order(keys, direction, floats);
  return report_verification(
      a, c.ok, keys.count,
      c.ok ? "" : fmt::format("{} is not sorted {}: elements {} and {} are out of order",
                              shown.string(), direction_name(direction), c.first_violation,
                              c.first_violation + 1),
      fmt::format("ok: {} sorted {} (order only: no --original to compare with)",
                  plural(keys.count, "element"), direction_name(direction)));
}

/// `verify` of records: valsort's checks with core/records.hpp's verifier, which shares no
/// code with the sort.
int verify_records_file(const parsed_args& a, const std::string& sorted_path)
{
  for (const char* keys_only : {"dtype", "descending", "values", "original-values",
                                "value-bytes"})
    if (a.has(keys_only))
      throw cli_error{exit_usage,
                      fmt::format("--{} is for keys; records take --key (each with its order)",
                                  keys_only)};
  const verify_input sorted_file{sorted_path};
  const std::string shown = sorted_file.path().string();
  const mapped_array sorted{shown, sorted_file.source(), sorted_file.size()};
  // --records alone: the sort benchmark's 100-byte records.
  const std::uint32_t default_bytes =
      a.has("record-bytes") || (sorted.layout.npy && sorted.layout.npy->structured) ? 0 : 100;
  parsed_args with_size = a;
  if (default_bytes != 0)
    with_size.options.emplace("record-bytes", std::vector<std::string>{"100"});
  const records_layout r = records_layout_of(with_size, sorted.layout, shown, benchmark_key);
  const float_order floats =
      float_order_option(a).value_or(sorted.layout.npy ? float_order::numpy : float_order::total);
  const record_array records{sorted.data, r.count, r.record_bytes};
  const records_checksum sum = checksum_records(records);
  records_check check;
  std::string ok_line;
  if (const std::optional<std::string> original_path = a.get("original")) {
    const mapped_input original_file{*original_path};
    const mapped_array original{*original_path, original_file.source(), original_file.size()};
    const records_layout o = records_layout_of(with_size, original.layout, *original_path,
                                               benchmark_key);
    check = verify_records(records, r.keys, checksum_records({original.data, o.count,
                                                              o.record_bytes}),
                           floats);
    ok_line = fmt::format("ok: {} sorted, a permutation of {}", plural(r.count, "record"),
                          *original_path);
  } else {
    check = check_record_order(records, r.keys, floats);
    ok_line = fmt::format("ok: {} sorted (order only: no --original to compare with)",
                          plural(r.count, "record"));
  }
  const std::string checksum = fmt::format("{:016x}{:016x}", sum.sum_hi, sum.sum_lo);
  if (a.has("json")) {
    print_json(stdout, {{"ok", check.ok},
                        {"elements", r.count},
                        {"message", check.message},
                        {"checksum", checksum},
                        {"duplicate_keys", check.duplicate_keys}});
    std::fflush(stdout);
    return check.ok ? exit_ok : exit_verify_failed;
  }
  if (check.ok)
    ok_line += fmt::format("; checksum {}, {} duplicate keys", checksum, check.duplicate_keys);
  return report_verification(a, check.ok, r.count, check.message, ok_line);
}

}  // namespace

int run_verify(const std::vector<std::string>& args)
{
  const std::optional<parsed_args> parsed = parse_or_help(args, verify_spec());
  if (!parsed) return exit_ok;
  const parsed_args& a = *parsed;
  const std::string& sorted_path = one_file(a, "verify", "the sorted file");
  refuse_if_interrupted(sorted_path);
  if (a.has("records") || a.has("record-bytes") || a.has("key") || a.has("order"))
    return verify_records_file(a, sorted_path);
  const std::optional<dtype> type_option = optional_dtype_option(a);
  const std::optional<std::string> original_path = a.get("original");
  if (!original_path && a.has("values"))
    throw cli_error{exit_usage, "--values needs --original and --original-values"};
  if (a.has("values") != a.has("original-values"))
    throw cli_error{exit_usage, "--values and --original-values go together"};
  if (!a.has("values") && a.has("value-bytes"))
    throw cli_error{exit_usage, "--value-bytes needs --values"};
  const std::optional<std::uint32_t> value_bytes_given = optional_value_bytes_option(a);
  (void)float_order_option(a);  // a wrong value is a usage error before any file is read
  const order direction = a.has("descending") ? order::descending : order::ascending;

  const verify_input sorted_file{sorted_path};
  const mapped_array sorted{sorted_file.path().string(), sorted_file.source(),
                            sorted_file.size()};
  if (sorted.layout.npy && sorted.layout.npy->structured)
    return verify_records_file(a, sorted_path);
  std::optional<mapped_input> original_file;
  std::optional<mapped_array> original;
  if (original_path) {
    original_file.emplace(*original_path);
    original.emplace(*original_path, original_file->source(), original_file->size());
  }
  // The key type: --dtype, else the first header that says it; every header must agree.
  expected_type expected{type_option};
  if (!expected.type) {
    using candidate = std::pair<const mapped_array*, std::string>;
    for (const auto& [file, shown] :
         {candidate{&sorted, sorted_file.path().string()},
          candidate{original ? &*original : nullptr, original_path.value_or("")}}) {
      if (file == nullptr || !file->layout.npy) continue;
      expected = expected_type{npy_keys_of(*file->layout.npy, shown).type, shown};
      break;
    }
  }
  const key_layout k = keys_of(sorted.layout, expected, sorted_file.path().string());
  host_order_keys sorted_native{sorted.data, k};
  const key_array keys{sorted_native.data(), k.count, k.type};
  const float_order floats =
      float_order_option(a).value_or(sorted.layout.npy ? float_order::numpy : float_order::total);
  if (!original) return verify_order_only(a, sorted_file.path(), keys, direction, floats);

  const key_layout ok = keys_of(original->layout, {k.type, expected.source}, *original_path);
  std::optional<mapped_input> sorted_values_file, original_values_file;
  std::optional<mapped_array> sorted_values_at, original_values_at;
  std::optional<value_array> sorted_values, original_values;
  if (a.has("values")) {
    const std::string sv = *a.get("values");
    const std::string ov = *a.get("original-values");
    sorted_values_file.emplace(sv);
    original_values_file.emplace(ov);
    sorted_values_at.emplace(sv, sorted_values_file->source(), sorted_values_file->size());
    original_values_at.emplace(ov, original_values_file->source(), original_values_file->size());
    const std::uint32_t vb = values_of(sorted_values_at->layout, value_bytes_given, k.count, sv,
                                       sorted_file.path().string());
    const std::uint32_t ovb =
        values_of(original_values_at->layout, value_bytes_given, ok.count, ov, *original_path);
    if (ovb != vb)
      throw cli_error{exit_data, fmt::format("{} holds {}-byte values but {} holds {}-byte ones",
                                             sv, vb, ov, ovb)};
    sorted_values = value_array{sorted_values_at->data, k.count, vb};
    original_values = value_array{original_values_at->data, ok.count, vb};
  }

  host_order_keys original_native{original->data, ok};
  const fingerprint before =
      fingerprint_of(key_array{original_native.data(), ok.count, k.type}, original_values);
  const verify_result r = verify(keys, sorted_values, direction, before, floats);
  return report_verification(a, r.ok, k.count, r.message,
                             fmt::format("ok: {} sorted {}, a permutation of {}",
                                         plural(k.count, "element"), direction_name(direction),
                                         *original_path));
}

}  // namespace gpusort::cli
