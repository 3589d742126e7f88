#include "client/cli.hpp"
#include "client/progress.hpp"

#include "core/generate.hpp"
#include "core/verify.hpp"

#include <gpusort/config.hpp>
#include <gpusort/gpusort.hpp>
#include <gpusort/units.hpp>

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>

namespace gpusort::cli {

namespace {

dtype parse_dtype_option(const parsed_args& a)
{
  const std::string text = a.require("dtype");
  const auto t = parse_dtype(text);
  if (!t) throw cli_error{exit_usage, "unknown dtype '" + text + "' (u32, i32, u64, i64, f32, f64)"};
  return *t;
}

std::uint32_t parse_value_bytes(const parsed_args& a)
{
  const std::string text = a.get("value-bytes").value_or("8");
  if (text == "4") return 4;
  if (text == "8") return 8;
  throw cli_error{exit_usage, "--value-bytes must be 4 or 8, not '" + text + "'"};
}

/// Elements in a file of `bytes`, which must be a whole number of `element` bytes.
std::uint64_t element_count(const std::string& path, std::uint64_t bytes, std::uint64_t element)
{
  if (bytes % element != 0)
    throw cli_error{exit_runtime, path + ": size " + std::to_string(bytes) +
                                      " is not a multiple of the element size " +
                                      std::to_string(element)};
  return bytes / element;
}

config load_cli_config(const parsed_args& a)
{
  std::optional<std::string> path = a.get("config");
  if (!path) {
    if (const char* env = std::getenv("GPUSORT_CONFIG"); env != nullptr && *env != '\0')
      path = env;
  }
  if (!path) return config{};
  try {
    return load_config(*path);
  } catch (const config_error& e) {
    throw cli_error{exit_config, e.what()};
  }
}

void apply_log_level(const config& cfg)
{
  static constexpr spdlog::level::level_enum levels[] = {
      spdlog::level::trace, spdlog::level::debug, spdlog::level::info,
      spdlog::level::warn,  spdlog::level::err,   spdlog::level::off};
  spdlog::set_level(levels[static_cast<int>(cfg.level)]);
}

std::string json_escape(const std::string& s)
{
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) continue;
    out += c;
  }
  return out;
}

const std::vector<option_spec> gen_specs{
    {"dtype", true, "key type: u32 i32 u64 i64 f32 f64"},
    {"dist", true, "distribution: uniform gaussian bucket staggered sorted reverse zero "
                   "detdupes fewunique nanmix"},
    {"count", true, "elements, e.g. 10M (10^7) or 1Gi (2^30)"},
    {"seed", true, "seed (default 1); the same seed gives the same file"},
    {"out", true, "keys file to write"},
    {"values-out", true, "also write a values file"},
    {"value-bytes", true, "bytes per value: 4 or 8 (default 8)"},
    {"help", false, "this text"}};

const std::vector<option_spec> sort_specs{
    {"dtype", true, "key type: u32 i32 u64 i64 f32 f64"},
    {"out", true, "sorted keys file (default: sort the input in place, atomically)"},
    {"descending", false, "sort in descending order"},
    {"values", true, "values file sorted along with the keys"},
    {"value-bytes", true, "bytes per value: 4 or 8 (default 8)"},
    {"values-out", true, "sorted values file (with --out; default: values in place)"},
    {"local", false, "sort with the embedded engine (today every sort is local; the daemon "
                     "arrives with the service)"},
    {"config", true, "YAML configuration (default: $GPUSORT_CONFIG, else built-in defaults)"},
    {"json", false, "print one JSON object with the report"},
    {"quiet", false, "no progress bar and no summary"},
    {"help", false, "this text"}};

const std::vector<option_spec> verify_specs{
    {"dtype", true, "key type: u32 i32 u64 i64 f32 f64"},
    {"original", true, "the unsorted keys file"},
    {"descending", false, "expect descending order"},
    {"values", true, "sorted values file"},
    {"original-values", true, "the unsorted values file"},
    {"value-bytes", true, "bytes per value: 4 or 8 (default 8)"},
    {"json", false, "print one JSON object with the result"},
    {"help", false, "this text"}};

bool wants_help(const std::vector<std::string>& args, const std::vector<option_spec>& specs,
                std::string_view synopsis)
{
  for (const std::string& a : args)
    if (a == "--help" || a == "-h") {
      std::fputs(usage_text(synopsis, specs).c_str(), stdout);
      return true;
    }
  return false;
}

}  // namespace

int run_gen(const std::vector<std::string>& args)
{
  constexpr std::string_view synopsis =
      "gpusort gen --dtype T --dist D --count N [--seed S] --out FILE [--values-out FILE "
      "--value-bytes 4|8]";
  if (wants_help(args, gen_specs, synopsis)) return exit_ok;
  const parsed_args a = parse_args(args, gen_specs);
  if (!a.positionals.empty()) throw cli_error{exit_usage, "gen takes no file argument; use --out"};
  const dtype t = parse_dtype_option(a);
  const std::string dist_text = a.require("dist");
  const auto dist = parse_distribution(dist_text);
  if (!dist) throw cli_error{exit_usage, "unknown distribution '" + dist_text + "'"};
  if (!applies_to(*dist, t))
    throw cli_error{exit_usage, "distribution " + dist_text + " needs a float dtype"};
  const std::string count_text = a.require("count");
  const auto count = parse_count(count_text);
  if (!count) throw cli_error{exit_usage, "bad --count '" + count_text + "'"};
  const auto seed = parse_count(a.get("seed").value_or("1"));
  if (!seed) throw cli_error{exit_usage, "bad --seed"};
  const std::uint32_t value_bytes = parse_value_bytes(a);

  atomic_output keys{a.require("out"), *count * size_of(t)};
  generate(key_array{keys.data(), *count, t}, *dist, *seed);
  std::optional<atomic_output> values;
  if (const auto vpath = a.get("values-out")) {
    values.emplace(*vpath, *count * value_bytes);
    generate_values(value_array{values->data(), *count, value_bytes}, *seed);
  }
  keys.commit();
  if (values) values->commit();
  return exit_ok;
}

int run_sort(const std::vector<std::string>& args)
{
  constexpr std::string_view synopsis =
      "gpusort sort FILE --dtype T [--out FILE] [--descending] [--values FILE --value-bytes 4|8 "
      "[--values-out FILE]] [--local] [--config FILE] [--json] [--quiet]";
  if (wants_help(args, sort_specs, synopsis)) return exit_ok;
  const parsed_args a = parse_args(args, sort_specs);
  if (a.positionals.size() != 1) throw cli_error{exit_usage, "sort needs exactly one input file"};
  const std::string& input_path = a.positionals.front();
  const dtype t = parse_dtype_option(a);
  const auto values_path = a.get("values");
  const auto values_out_path = a.get("values-out");
  const std::uint32_t value_bytes = parse_value_bytes(a);
  if (values_out_path && !values_path)
    throw cli_error{exit_usage, "--values-out needs --values"};
  if (values_path && a.has("out") != values_out_path.has_value())
    throw cli_error{exit_usage, "with --values, give both --out and --values-out, or neither "
                                "(both in place)"};
  const config cfg = load_cli_config(a);
  apply_log_level(cfg);

  const mapped_input in{input_path};
  const std::uint64_t n = element_count(input_path, in.size(), size_of(t));
  std::optional<mapped_input> vin;
  if (values_path) {
    vin.emplace(*values_path);
    const std::uint64_t vn = element_count(*values_path, vin->size(), value_bytes);
    if (vn != n)
      throw cli_error{exit_runtime, *values_path + " holds " + std::to_string(vn) +
                                        " values for " + std::to_string(n) + " keys"};
  }

  // The input stays read-only: the engine writes a separate output, renamed into place.
  atomic_output out{a.get("out").value_or(input_path), in.size()};
  std::optional<atomic_output> vout;
  if (values_path) vout.emplace(values_out_path.value_or(*values_path), vin->size());

  const bool json = a.has("json");
  const bool quiet = a.has("quiet") || json;
  progress_bar bar{!quiet && ::isatty(STDERR_FILENO) == 1};
  sort_options options{.direction = a.has("descending") ? order::descending : order::ascending};
  if (bar.enabled()) options.on_progress = [&bar](const progress_event& e) { bar.update(e); };

  sort_report report;
  try {
    engine eng{cfg};
    sort_job job{.keys = {const_cast<void*>(in.data()), n, t}, .keys_out = out.data()};
    if (vin) {
      job.values = value_array{const_cast<void*>(vin->data()), n, value_bytes};
      job.values_out = vout->data();
    }
    report = eng.sort(job, options);
  } catch (const config_error& e) {
    throw cli_error{exit_config, e.what()};
  } catch (const std::exception& e) {
    throw cli_error{exit_runtime, e.what()};
  }
  bar.finish();
  out.commit();
  if (vout) vout->commit();

  if (json) {
    std::string devices;
    for (const std::string& d : report.devices)
      devices += (devices.empty() ? "\"" : ", \"") + json_escape(d) + "\"";
    std::printf("{\"elements\": %llu, \"bytes\": %llu, \"seconds\": %.6f, \"rate\": %.1f, "
                "\"engine\": \"%s\", \"devices\": [%s], \"chunks\": %llu, \"rounds\": %d, "
                "\"compensated_chunks\": %llu}\n",
                static_cast<unsigned long long>(report.elements),
                static_cast<unsigned long long>(report.bytes), report.seconds,
                report.rate_bytes_per_second(), json_escape(report.engine).c_str(),
                devices.c_str(), static_cast<unsigned long long>(report.chunks), report.rounds,
                static_cast<unsigned long long>(report.compensated_chunks));
  } else if (!quiet) {
    std::printf("sorted %llu elements (%s) in %.3f s: %.2f GB/s, %.1f Melements/s [%s, d=%llu, "
                "%d round(s)]\n",
                static_cast<unsigned long long>(report.elements),
                format_bytes(report.bytes).c_str(), report.seconds,
                report.rate_bytes_per_second() / 1e9,
                report.seconds > 0 ? static_cast<double>(report.elements) / report.seconds / 1e6
                                   : 0.0,
                report.engine.c_str(), static_cast<unsigned long long>(report.chunks),
                report.rounds);
  }
  return exit_ok;
}

int run_verify(const std::vector<std::string>& args)
{
  constexpr std::string_view synopsis =
      "gpusort verify FILE --dtype T --original FILE [--descending] [--values FILE "
      "--original-values FILE --value-bytes 4|8] [--json]";
  if (wants_help(args, verify_specs, synopsis)) return exit_ok;
  const parsed_args a = parse_args(args, verify_specs);
  if (a.positionals.size() != 1) throw cli_error{exit_usage, "verify needs exactly one file"};
  const dtype t = parse_dtype_option(a);
  const std::uint32_t value_bytes = parse_value_bytes(a);
  if (a.has("values") != a.has("original-values"))
    throw cli_error{exit_usage, "--values and --original-values go together"};

  const std::string& sorted_path = a.positionals.front();
  const mapped_input sorted{sorted_path};
  const std::string original_path = a.require("original");
  const mapped_input original{original_path};
  const std::uint64_t n = element_count(sorted_path, sorted.size(), size_of(t));
  const std::uint64_t on = element_count(original_path, original.size(), size_of(t));
  std::optional<mapped_input> sv, ov;
  std::optional<value_array> sorted_values, original_values;
  if (a.has("values")) {
    sv.emplace(*a.get("values"));
    ov.emplace(*a.get("original-values"));
    sorted_values = value_array{const_cast<void*>(sv->data()),
                                element_count(*a.get("values"), sv->size(), value_bytes),
                                value_bytes};
    original_values = value_array{const_cast<void*>(ov->data()),
                                  element_count(*a.get("original-values"), ov->size(),
                                                value_bytes),
                                  value_bytes};
    if (sorted_values->count != n || original_values->count != on)
      throw cli_error{exit_runtime, "values and keys differ in count"};
  }
  const fingerprint before =
      fingerprint_of(key_array{const_cast<void*>(original.data()), on, t}, original_values);
  const verify_result r =
      verify(key_array{const_cast<void*>(sorted.data()), n, t}, sorted_values,
             a.has("descending") ? order::descending : order::ascending, before);
  if (a.has("json")) {
    std::printf("{\"ok\": %s, \"elements\": %llu, \"message\": \"%s\"}\n", r.ok ? "true" : "false",
                static_cast<unsigned long long>(n), json_escape(r.message).c_str());
  } else if (r.ok) {
    std::printf("ok: %llu elements sorted %s, a permutation of %s\n",
                static_cast<unsigned long long>(n),
                a.has("descending") ? "descending" : "ascending", original_path.c_str());
  } else {
    std::fprintf(stderr, "gpusort: verification failed: %s\n", r.message.c_str());
  }
  return r.ok ? exit_ok : exit_verify_failed;
}

}  // namespace gpusort::cli
