// `gpusort verify`: a file sorted, and a permutation of its original.
#include "client/commands.hpp"

#include "client/commands/common.hpp"
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
                  "[--value-bytes 4|8]] [--json]",
      .description =
          "Checks that FILE is sorted and, with --original, that it is a permutation of the\n"
          "original, (key, value) pairs included, by an order-independent 128-bit\n"
          "fingerprint; without --original only the order is checked. Floats are checked in\n"
          "IEEE 754 totalOrder, or with --float-order numpy in NumPy's order (NaNs last,\n"
          "-0.0 == +0.0), the default when FILE is a .npy file.\n"
          "Any of the files may be a .npy file: its data after the header is checked, and the\n"
          "header gives the type (--dtype is then optional).\n"
          "Prints \"ok\" and exits 0 when it is; exits 1 naming the first problem otherwise.\n"
          "FILE - reads the keys from standard input.\n",
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
          {"json", "", "print one JSON object: ok, elements, message"},
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

}  // namespace

int run_verify(const std::vector<std::string>& args)
{
  const std::optional<parsed_args> parsed = parse_or_help(args, verify_spec());
  if (!parsed) return exit_ok;
  const parsed_args& a = *parsed;
  const std::string& sorted_path = one_file(a, "verify", "the sorted file");
  refuse_if_interrupted(sorted_path);
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
