// `gpusort gen`: files of generated keys (and values), raw or .npy.
#include "client/commands.hpp"

#include "client/commands/common.hpp"
#include "client/files.hpp"
#include "client/npy.hpp"
#include "core/generate.hpp"
#include "core/records.hpp"

#include <gpusort/units.hpp>

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <fmt/format.h>

namespace gpusort::cli {

namespace fs = std::filesystem;

namespace {

std::string_view distribution_names()
{
  static const std::string names = [] {
    std::string s;
    for (const distribution d : all_distributions)
      s += (s.empty() ? "" : " ") + std::string{name_of(d)};
    return s;
  }();
  return names;
}

std::string_view distribution_help()
{
  // Wrapped so that the help column stays within 80 columns.
  static const std::string help = [] {
    std::string text = "distribution:";
    std::size_t line_start = 0;
    for (const distribution d : all_distributions) {
      const std::string_view name = name_of(d);
      if (text.size() - line_start + 1 + name.size() > 52) {
        text += "\n";
        line_start = text.size();
      } else {
        text += " ";
      }
      text += name;
    }
    return text + "\n(nanmix: floats only)";
  }();
  return help;
}

constexpr std::string_view dtype_help = "key type: u32 i32 u64 i64 f32 f64";

std::uint32_t value_bytes_option(const parsed_args& a)
{
  return optional_value_bytes_option(a).value_or(8);
}

std::uint64_t seed_option(const parsed_args& a)
{
  const std::string text = a.get("seed").value_or("1");
  std::uint64_t seed{};
  const auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), seed);
  if (err != std::errc{} || end != text.data() + text.size())
    throw cli_error{exit_usage, "--seed must be an unsigned 64-bit integer, not '" + text + "'"};
  return seed;
}

}  // namespace

const command_spec& gen_spec()
{
  static const command_spec spec{
      .name = "gen",
      .synopsis = "--dtype T --dist D --count N --out FILE [--seed S] [--npy]\n"
                  "                   [--values-out FILE [--value-bytes 4|8]] [--quiet]\n"
                  "       gpusort gen --records --count N --out FILE [--record-bytes R]\n"
                  "                   [--dist D] [--seed S]",
      .description =
          "Writes N generated keys of type T to FILE as a raw little-endian array (no header),\n"
          "and with --values-out as many values. The same dtype, distribution, count and seed\n"
          "always give the same files. N takes the suffixes k, M, G, T (10^3, 10^6, ...) and\n"
          "Ki, Mi, Gi, Ti (2^10, 2^20, ...): 10M is 10000000, 1Gi is 1073741824.\n"
          "A file whose name ends in .npy, and every file with --npy, is a NumPy .npy file\n"
          "instead: the header np.save writes (version 1.0, 1-D, '<u4' ... '<f8'; values\n"
          "'<u4' or '<u8'), then the same bytes.\n"
          "--records writes N records instead, the sort benchmark's (gensort's) 100-byte\n"
          "records by default: a random 10-byte key, the record's number in hex, filler; other\n"
          "sizes (--record-bytes, at least 10) carry the key, the number and a filler. --dist:\n"
          "uniform (default), gaussian, sorted, reverse, zero or fewunique keys.\n",
      .options = {
          {"dtype", "T", dtype_help},
          {"dist", "D", distribution_help()},
          {"count", "N", "number of elements, e.g. 10M or 1Gi"},
          {"seed", "S", "seed, an unsigned integer (default 1)"},
          {"out", "FILE", "keys file to write (- : standard output)"},
          {"values-out", "FILE", "values file to write (value i is a hash of seed and i)"},
          {"value-bytes", "4|8", "bytes per value (default 8)"},
          {"npy", "", "write .npy files whatever their names (for --out -)"},
          {"records", "", "write records (gensort's) instead of keys"},
          {"record-bytes", "R", "bytes per record with --records (default 100)"},
          {"quiet", "", "print nothing on success (also -q)"},
          {"help", "", "show this text"},
      }};
  return spec;
}

namespace {

/// `gen --records`: records written piece by piece (generate_records makes any range of rows
/// alike), so that a file larger than memory needs none.
int gen_records(const parsed_args& a)
{
  for (const char* keys_only : {"dtype", "values-out", "value-bytes", "npy"})
    if (a.has(keys_only))
      throw cli_error{exit_usage, fmt::format("--{} is for keys, not --records", keys_only)};
  const std::string dist_text = a.get("dist").value_or("uniform");
  const auto dist = parse_distribution(dist_text);
  if (!dist || !applies_to_records(*dist))
    throw cli_error{exit_usage, "--records takes --dist uniform, gaussian, sorted, reverse, "
                                "zero or fewunique, not '" + dist_text + "'"};
  const std::string count_text = a.require("count");
  const std::uint64_t count = count_option(a);
  std::uint32_t record_bytes = gensort_record_bytes;
  if (const auto given = a.get("record-bytes")) {
    const auto n = parse_count(*given);
    if (!n || *n < record_key_bytes || *n > max_record_bytes)
      throw cli_error{exit_usage, fmt::format("--record-bytes takes {} to {}, not '{}'",
                                              record_key_bytes, max_record_bytes, *given)};
    record_bytes = static_cast<std::uint32_t>(*n);
  }
  if (count > std::numeric_limits<std::uint64_t>::max() / record_bytes - 4096)
    throw cli_error{exit_usage, "--count " + count_text + " is too large: its size overflows"};
  const std::uint64_t seed = seed_option(a);
  const fs::path out_path = a.require("out");
  if (out_path == "-") throw cli_error{exit_usage, "--records needs a file, not standard output"};
  atomic_output out{out_path, count * record_bytes};
  // Pieces of about 64 MiB: written and dropped, so the page cache, not this process, holds
  // the file.
  const std::uint64_t piece = std::max<std::uint64_t>(1, (std::uint64_t{64} << 20) / record_bytes);
  std::vector<unsigned char> buffer(std::min(count, piece) * record_bytes);
  for (std::uint64_t first = 0; first < count; first += piece) {
    const std::uint64_t n = std::min(piece, count - first);
    generate_records(buffer.data(), n, record_bytes, *dist, seed, first);
    write_all_at(out.fd(), buffer.data(), n * record_bytes, first * record_bytes, out.shown());
  }
  out.sync();
  out.publish();
  if (!a.has("quiet"))
    std::printf("wrote %s of %u bytes (%s keys, seed %llu) to %s\n",
                plural(count, "record").c_str(), record_bytes, dist_text.c_str(),
                static_cast<unsigned long long>(seed), out_path.c_str());
  return exit_ok;
}

}  // namespace

int run_gen(const std::vector<std::string>& args)
{
  const std::optional<parsed_args> parsed = parse_or_help(args, gen_spec());
  if (!parsed) return exit_ok;
  const parsed_args& a = *parsed;
  if (!a.positionals.empty())
    throw cli_error{exit_usage, "gen writes to --out, unexpected argument '" +
                                    a.positionals.front() + "'"};
  if (a.has("records")) return gen_records(a);
  if (a.has("record-bytes")) throw cli_error{exit_usage, "--record-bytes needs --records"};
  const dtype t = dtype_option(a);
  const std::string dist_text = a.require("dist");
  const auto dist = parse_distribution(dist_text);
  if (!dist)
    throw cli_error{exit_usage, "unknown distribution '" + dist_text + "' (" +
                                    std::string{distribution_names()} + ")"};
  if (!applies_to(*dist, t))
    throw cli_error{exit_usage, "distribution " + dist_text + " needs a float dtype (f32, f64)"};
  const std::string count_text = a.require("count");
  const std::uint64_t count = count_option(a);
  const std::uint64_t seed = seed_option(a);
  const fs::path out_path = a.require("out");
  const std::optional<std::string> values_path = a.get("values-out");
  if (!values_path && a.has("value-bytes"))
    throw cli_error{exit_usage, "--value-bytes needs --values-out"};
  const std::uint32_t value_bytes = value_bytes_option(a);
  if (values_path && same_file(out_path, *values_path))
    throw cli_error{exit_usage, "--out and --values-out name the same file"};
  constexpr std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  if (count > max / size_of(t) - 4096 || (values_path && count > max / value_bytes - 4096))
    throw cli_error{exit_usage, "--count " + count_text + " is too large: its size overflows"};

  if (values_path == "-")
    throw cli_error{exit_usage, "--values-out - : only the keys can go to standard output"};
  const bool to_stdout = out_path == "-";
  // The same bytes behind a header np.save would write, for NumPy and for tests of .npy input.
  const auto header_for = [&](const std::string& path, std::string_view descr) {
    return a.has("npy") || has_npy_name(path) ? make_npy_header(descr, count) : std::string{};
  };
  const std::string keys_header = header_for(out_path.string(), npy_descr_of(t));
  const std::string values_header =
      values_path ? header_for(*values_path, value_descr(value_bytes)) : std::string{};
  const std::uint64_t keys_bytes = keys_header.size() + count * size_of(t);
  std::optional<atomic_output> keys;
  std::unique_ptr<char[]> streamed;  // the keys for standard output, uninitialised until made
  if (to_stdout)
    streamed.reset(new char[std::max<std::uint64_t>(keys_bytes, 1)]);
  else
    keys.emplace(out_path, keys_bytes);
  std::optional<atomic_output> values;
  if (values_path) values.emplace(*values_path, values_header.size() + count * value_bytes);
  // Headers are multiples of 64 bytes: the keys after them are aligned as generate() wants.
  char* const keys_at = to_stdout ? streamed.get() : static_cast<char*>(keys->map());
  if (keys_at != nullptr) std::memcpy(keys_at, keys_header.data(), keys_header.size());
  generate(key_array{keys_at == nullptr ? nullptr : keys_at + keys_header.size(), count, t},
           *dist, seed);
  if (values) {
    auto* const values_at = static_cast<char*>(values->map());
    if (values_at != nullptr) std::memcpy(values_at, values_header.data(), values_header.size());
    generate_values(value_array{values_at == nullptr ? nullptr
                                                     : values_at + values_header.size(),
                                count, value_bytes},
                    seed);
  }
  if (to_stdout) write_all(STDOUT_FILENO, streamed.get(), keys_bytes, "standard output");
  for (std::optional<atomic_output>* out : {&keys, &values}) {
    if (!*out) continue;
    (*out)->sync();
    (*out)->publish();
  }

  if (!a.has("quiet")) {
    // With the keys on standard output, the summary goes to standard error.
    std::FILE* to = to_stdout ? stderr : stdout;
    std::fprintf(to, "wrote %s of %s (%s, seed %llu) to %s\n", plural(count, "key").c_str(),
                 std::string{name_of(t)}.c_str(), dist_text.c_str(),
                 static_cast<unsigned long long>(seed),
                 to_stdout ? "standard output" : out_path.c_str());
    if (values)
      std::fprintf(to, "wrote %s of %u bytes to %s\n", plural(count, "value").c_str(),
                   value_bytes, values_path->c_str());
  }
  return exit_ok;
}

}  // namespace gpusort::cli
