#include "client/commands/common.hpp"

#include "client/commands.hpp"
#include "core/sys_io.hpp"

#include <gpusort/error.hpp>
#include <gpusort/units.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <limits>

namespace gpusort::cli {

namespace sys = detail::sys;

namespace {

void print_help(const command_spec& spec) { std::fputs(help_text(spec).c_str(), stdout); }

}  // namespace

// ---- arguments -------------------------------------------------------------------------------

std::optional<parsed_args> parse_or_help(const std::vector<std::string>& args,
                                         const command_spec& spec)
{
  // -h or --help wins over every other argument, even a wrong one.
  if (wants_help(args)) {
    print_help(spec);
    return std::nullopt;
  }
  return parse_args(args, spec);
}

const std::string& one_file(const parsed_args& a, std::string_view command,
                            std::string_view missing)
{
  if (a.positionals.size() != 1)
    throw cli_error{exit_usage, a.positionals.empty()
                                    ? std::string{command} + " needs " + std::string{missing}
                                    : std::string{command} + " takes one file, got " +
                                          std::to_string(a.positionals.size())};
  return a.positionals.front();
}

dtype dtype_option(const parsed_args& a)
{
  const std::string text = a.require("dtype");
  const auto t = parse_dtype(text);
  if (!t) throw cli_error{exit_usage, "unknown dtype '" + text + "' (u32 i32 u64 i64 f32 f64)"};
  return *t;
}

std::uint64_t count_option(const parsed_args& a)
{
  const std::string text = a.require("count");
  const std::optional<std::uint64_t> count = parse_count(text);
  if (!count) throw cli_error{exit_usage, "bad --count '" + text + "' (e.g. 1000, 10M, 1Gi)"};
  return *count;
}

std::optional<dtype> optional_dtype_option(const parsed_args& a)
{
  if (!a.has("dtype")) return std::nullopt;
  return dtype_option(a);
}

std::optional<std::uint32_t> optional_value_bytes_option(const parsed_args& a)
{
  const std::optional<std::string> text = a.get("value-bytes");
  if (!text) return std::nullopt;
  if (*text == "4") return 4;
  if (*text == "8") return 8;
  throw cli_error{exit_usage, "--value-bytes must be 4 or 8, not '" + *text + "'"};
}

std::optional<float_order> float_order_option(const parsed_args& a)
{
  const std::optional<std::string> text = a.get("float-order");
  if (!text) return std::nullopt;
  if (*text == "total") return float_order::total;
  if (*text == "numpy") return float_order::numpy;
  throw cli_error{exit_usage, "--float-order must be total or numpy, not '" + *text + "'"};
}

// ---- raw and .npy arrays ---------------------------------------------------------------------

std::uint64_t whole_elements(std::string_view shown, std::uint64_t bytes,
                             std::uint64_t element_bytes, std::string_view what)
{
  if (bytes % element_bytes != 0)
    throw cli_error{exit_data, fmt::format("{}: {} bytes is not a whole number of {}-byte {}",
                                           shown, bytes, element_bytes, what)};
  return bytes / element_bytes;
}

array_layout layout_of(const std::string& shown, std::uint64_t size,
                       const std::function<std::string(std::uint64_t)>& prefix)
{
  array_layout out{.bytes = size};
  const std::string first = prefix(12);
  if (!has_npy_magic(first)) {
    if (has_npy_name(shown))
      throw cli_error{exit_data, shown + " is named .npy but is no .npy file (it does not start "
                                         "with \\x93NUMPY)"};
    return out;
  }
  try {
    out.header = prefix(npy_header_bytes(first));
    out.npy = parse_npy_header(out.header);
  } catch (const npy_error& e) {
    throw cli_error{exit_data, shown + " is not a .npy file gpusort can read: " + e.what()};
  }
  out.bytes = size - out.header.size();
  return out;
}

array_layout layout_of(const input_file& file)
{
  const std::string shown = file.path().string();
  return layout_of(shown, file.size(), [&](std::uint64_t want) {
    std::string out(std::min(file.size(), want), '\0');
    for (std::uint64_t done = 0; done < out.size();) {
      const ssize_t got = sys::pread(file.fd(), out.data() + done, out.size() - done,
                                  static_cast<off_t>(done));
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) {
        const int err = errno;
        throw cli_error{exit_io, "cannot read " + shown + ": " + std::strerror(err)};
      }
      if (got == 0) {  // the file shrank since it was opened
        out.resize(done);
        break;
      }
      done += static_cast<std::uint64_t>(got);
    }
    return out;
  });
}

array_layout layout_of(const std::string& shown, const void* data, std::uint64_t size)
{
  const std::string_view all{static_cast<const char*>(data), size};
  return layout_of(shown, size, [&](std::uint64_t want) {
    return std::string{all.substr(0, std::min<std::uint64_t>(want, size))};
  });
}

npy_keys npy_keys_of(const npy_header& h, const std::string& shown)
{
  constexpr std::string_view sorted = "'<u4' '<i4' '<u8' '<i8' '<f4' '<f8' (or '>')";
  if (h.structured)
    throw cli_error{exit_data, fmt::format("{} holds a structured array ({}): gpusort sorts "
                                           "arrays of {}",
                                           shown, h.descr, sorted)};
  if (const auto t = npy_key_type(h.descr)) return {*t, false};
  if (h.descr.starts_with('>'))
    if (const auto t = npy_key_type("<" + h.descr.substr(1))) return {*t, true};
  throw cli_error{exit_data, fmt::format("{} holds '{}', not a key type gpusort sorts ({})",
                                         shown, h.descr, sorted)};
}

void swap_bytes(void* data, std::uint64_t n, std::uint64_t bytes)
{
  auto* p = static_cast<char*>(data);
  for (std::uint64_t i = 0; i < n; ++i, p += bytes) std::reverse(p, p + bytes);
}

std::uint64_t npy_elements(const array_layout& l, std::uint64_t element_bytes,
                           const std::string& shown)
{
  const npy_header& h = *l.npy;
  if (h.shape.empty())
    throw cli_error{exit_data, shown + " holds a 0-d array (a single scalar): nothing to sort"};
  // np.sort sorts along the last axis; a flat sort of a 2-D array would be something else.
  // fortran_order only matters for two or more axes: a 1-D array's bytes are the same.
  if (h.shape.size() != 1)
    throw cli_error{exit_data, fmt::format("{} has shape {}: gpusort sorts 1-D arrays (save "
                                           "a.ravel() to sort all of its elements as one)",
                                           shown, h.shape_text())};
  const std::uint64_t n = h.shape.front();
  if (l.offset() % element_bytes != 0)
    throw cli_error{exit_data, fmt::format("{}: its .npy header is {} bytes, not a whole number "
                                           "of {}-byte elements, so its data cannot be sorted "
                                           "where it lies (np.save pads headers to 64 bytes: "
                                           "save the array again)",
                                           shown, l.offset(), element_bytes)};
  if (n > std::numeric_limits<std::uint64_t>::max() / element_bytes ||
      n * element_bytes != l.bytes)
    throw cli_error{exit_data, fmt::format("{} holds {} bytes after its .npy header, but its "
                                           "shape {} of '{}' is {} bytes",
                                           shown, l.bytes, h.shape_text(), h.descr,
                                           n > std::numeric_limits<std::uint64_t>::max() /
                                                   element_bytes
                                               ? std::string{"more than 2^64"}
                                               : std::to_string(n * element_bytes))};
  return n;
}

key_layout keys_of(const array_layout& l, const expected_type& expected, const std::string& shown)
{
  if (!l.npy) {
    if (!expected.type)
      throw cli_error{exit_usage, "missing --dtype (" + shown + " is a raw file, which does not "
                                                                "say its key type)"};
    const dtype t = *expected.type;
    return {t, whole_elements(shown, l.bytes, size_of(t), std::string{name_of(t)} + " keys")};
  }
  const auto [t, swapped] = npy_keys_of(*l.npy, shown);
  if (expected.type && *expected.type != t) {
    if (expected.source == "--dtype")
      throw cli_error{exit_usage, fmt::format("--dtype {} disagrees with {}, whose .npy header "
                                              "says '{}' ({})",
                                              name_of(*expected.type), shown, l.npy->descr,
                                              name_of(t))};
    throw cli_error{exit_data, fmt::format("{} holds {} keys ('{}') but {} holds {}", shown,
                                           name_of(t), l.npy->descr, expected.source,
                                           name_of(*expected.type))};
  }
  return {t, npy_elements(l, size_of(t), shown), swapped};
}

std::uint32_t values_of(const array_layout& l, const std::optional<std::uint32_t>& option,
                        std::uint64_t keys, const std::string& shown,
                        const std::string& keys_shown)
{
  std::uint32_t value_bytes = option.value_or(8);
  std::uint64_t n = 0;
  if (l.npy) {
    const std::optional<std::uint32_t> bytes =
        l.npy->structured ? std::nullopt : npy_value_bytes(l.npy->descr);
    if (!bytes)
      throw cli_error{exit_data, fmt::format("{} holds '{}': values must be 4 or 8 bytes each "
                                             "(integers, floats, complex64, datetime64)",
                                             shown, l.npy->descr)};
    if (option && *option != *bytes)
      throw cli_error{exit_usage, fmt::format("--value-bytes {} disagrees with {}, whose .npy "
                                              "header says '{}' ({} bytes)",
                                              *option, shown, l.npy->descr, *bytes)};
    value_bytes = *bytes;
    n = npy_elements(l, value_bytes, shown);
  } else {
    n = whole_elements(shown, l.bytes, value_bytes, "values");
  }
  if (n != keys)
    throw cli_error{exit_data, fmt::format("{} holds {} {}-byte values but {} holds {} keys",
                                           shown, n, value_bytes, keys_shown, keys)};
  return value_bytes;
}

std::string_view value_descr(std::uint32_t value_bytes)
{
  return value_bytes == 4 ? "<u4" : "<u8";
}

// ---- the configuration and the daemon --------------------------------------------------------

config load_cli_config(const parsed_args& a)
{
  std::optional<std::string> path = a.get("config");
  if (!path)
    if (const char* env = std::getenv("GPUSORT_CONFIG"); env != nullptr && *env != '\0')
      path = env;
  if (!path) return config{};
  try {
    return load_config(*path);
  } catch (const config_error& e) {
    throw cli_error{exit_config, e.what()};
  } catch (const std::exception& e) {
    throw cli_error{exit_config, *path + ": " + e.what()};
  }
}

std::string socket_option(const parsed_args& a)
{
  if (auto s = a.get("socket")) return *s;
  if (const char* env = std::getenv("GPUSORT_SOCKET"); env != nullptr && *env != '\0') return env;
  return load_cli_config(a).socket;
}

exit_code exit_of(client::status_code code) noexcept
{
  switch (code) {
    case client::status_code::connection_lost: return exit_unavailable;
    case client::status_code::rejected_busy:
    case client::status_code::shutting_down: return exit_try_later;
    case client::status_code::unauthorized: return exit_no_permission;
    case client::status_code::bad_fd: return exit_io;  // a file the job could not read or write
    default: return exit_runtime;
  }
}

client::connection connect_daemon(const std::string& socket, std::string_view hint)
{
  try {
    return client::connection::connect(socket, std::string{"gpusort-cli "} + GPUSORT_VERSION);
  } catch (const client::error& e) {
    if (e.code() == client::status_code::connection_lost)
      throw cli_error{exit_unavailable, "cannot reach the daemon at " + socket + " (" +
                                            e.what() + "); " + std::string{hint}};
    // UNAUTHORIZED: the socket's permissions or the daemon's allowed_uids / allowed_gids; the
    // message says which and what to do.
    if (e.code() == client::status_code::unauthorized)
      throw cli_error{exit_no_permission, "cannot use the daemon at " + socket + ": " + e.what()};
    throw cli_error{exit_of(e.code()), "the daemon at " + socket + " refused: " + e.what()};
  }
}

// ---- output ----------------------------------------------------------------------------------

void print_json(std::FILE* to, const nlohmann::ordered_json& value)
{
  fmt::print(to, "{}\n",
             value.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace));
}

std::string plural(std::uint64_t n, std::string_view word)
{
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

// ---- commands.hpp ----------------------------------------------------------------------------

std::string one_line(std::string text)
{
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  return text;
}

const command_spec* find_command(std::string_view name)
{
  for (const command_spec* spec :
       {&gen_spec(), &sort_spec(), &verify_spec(), &status_spec(), &recover_spec(),
        &plan_spec()})
    if (spec->name == name) return spec;
  return nullptr;
}

}  // namespace gpusort::cli
