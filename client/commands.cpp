#include "client/commands.hpp"

#include "client/files.hpp"
#include "client/progress.hpp"
#include "core/generate.hpp"
#include "core/program_log.hpp"
#include "core/verify.hpp"

#include <gpusort/client.hpp>
#include <gpusort/config.hpp>
#include <gpusort/gpusort.hpp>
#include <gpusort/units.hpp>

#include <fmt/format.h>

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <fstream>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace gpusort::cli {

namespace fs = std::filesystem;

namespace {

/// When the process started, near enough (static initialisation): the end-to-end time a user
/// waits, which --json reports beside the sort's own seconds.
const auto process_start = std::chrono::steady_clock::now();

/// This process's peak resident memory (VmHWM), in bytes; 0 where /proc does not say. Not
/// getrusage: its ru_maxrss keeps the parent's peak across fork and exec, so a command started
/// by a big program would report that program's memory.
std::uint64_t peak_rss_bytes()
{
  std::ifstream status{"/proc/self/status"};
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10) * 1024;
  return 0;
}

// ---- option tables ---------------------------------------------------------------------------

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

const command_spec& gen_spec()
{
  static const command_spec spec{
      .name = "gen",
      .synopsis = "--dtype T --dist D --count N --out FILE [--seed S]\n"
                  "                   [--values-out FILE [--value-bytes 4|8]] [--quiet]",
      .description =
          "Writes N generated keys of type T to FILE as a raw little-endian array (no header),\n"
          "and with --values-out as many values. The same dtype, distribution, count and seed\n"
          "always give the same files. N takes the suffixes k, M, G, T (10^3, 10^6, ...) and\n"
          "Ki, Mi, Gi, Ti (2^10, 2^20, ...): 10M is 10000000, 1Gi is 1073741824.\n",
      .options = {
          {"dtype", "T", dtype_help},
          {"dist", "D", distribution_help()},
          {"count", "N", "number of elements, e.g. 10M or 1Gi"},
          {"seed", "S", "seed, an unsigned integer (default 1)"},
          {"out", "FILE", "keys file to write (- : standard output)"},
          {"values-out", "FILE", "values file to write (value i is a hash of seed and i)"},
          {"value-bytes", "4|8", "bytes per value (default 8)"},
          {"quiet", "", "print nothing on success (also -q)"},
          {"help", "", "show this text"},
      }};
  return spec;
}

const command_spec& sort_spec()
{
  static const command_spec spec{
      .name = "sort",
      .synopsis = "FILE --dtype T [--out FILE] [--descending]\n"
                  "                    [--values FILE [--value-bytes 4|8] [--values-out FILE]]\n"
                  "                    [--socket PATH | --local] [--config FILE] [--json]\n"
                  "                    [--quiet] [--no-sync] [--profile]",
      .description =
          "Sorts FILE, a raw little-endian array of keys of type T, and with --values a file of\n"
          "values paired with the keys by index. Floats sort by IEEE 754 totalOrder (-NaN first,\n"
          "+NaN last). FILE is only read: the sorted data goes to a temporary file in the\n"
          "output's folder, renamed over the output only on success. Without --out (and\n"
          "--values-out) the sort is in place; a failure leaves every file as it was.\n"
          "Prints a progress bar on stderr when it is a terminal and a summary line on stdout.\n"
          "The daemon (gpusortd) sorts unless --local is given: this command opens the files\n"
          "and passes their descriptors to it; the daemon never opens a path itself.\n"
          "FILE - reads the keys from standard input to its end and writes the sorted keys to\n"
          "standard output (or --out FILE); --out - writes a file's sorted keys to standard\n"
          "output. Streams are sorted in memory (--local) or in a shared buffer of the daemon\n"
          "(within its pinned_pool_bytes); the summary then goes to standard error.\n",
      .options = {
          {"dtype", "T", dtype_help},
          {"out", "FILE", "sorted keys file (default: sort FILE in place; - : standard\n"
                          "output)"},
          {"descending", "", "sort in descending order"},
          {"values", "FILE", "values file sorted along with the keys"},
          {"value-bytes", "4|8", "bytes per value (default 8)"},
          {"values-out", "FILE", "sorted values file; with --values, --out and --values-out\n"
                                 "go together (neither: both in place)"},
          {"socket", "PATH", "the daemon's socket (default: $GPUSORT_SOCKET, else the\n"
                             "configuration's `socket`, /run/gpusort/gpusort.sock)"},
          {"local", "", "sort in this process with the embedded engine, not the daemon"},
          {"config", "FILE", "configuration, YAML (default: $GPUSORT_CONFIG, else built-in\n"
                             "defaults): the engine's with --local, else the socket path"},
          {"json", "", "print one JSON object instead of the summary: elements, bytes,\n"
                       "seconds (the sort's), wall_seconds (this command's, from its\n"
                       "start to the published output), peak_rss_bytes (this command's\n"
                       "peak memory), rate (bytes/s), engine, devices, chunks, rounds,\n"
                       "compensated_chunks"},
          {"quiet", "", "no progress bar, no summary, only warnings and errors (also -q)"},
          {"no-sync", "", "publish the output without waiting for it to reach the disk\n"
                          "(no fsync: for scratch files a crash may lose)"},
          {"profile", "", "say on stderr where the time went: each step from the\n"
                          "command's start, and with --local the engine's stages\n"
                          "(with --json: also as \"timeline\" and \"stages\")"},
          {"help", "", "show this text"},
      }};
  return spec;
}

const command_spec& verify_spec()
{
  static const command_spec spec{
      .name = "verify",
      .synopsis = "FILE --dtype T [--original FILE] [--descending]\n"
                  "                      [--values FILE --original-values FILE "
                  "[--value-bytes 4|8]] [--json]",
      .description =
          "Checks that FILE is sorted (totalOrder for floats) and, with --original, that it is\n"
          "a permutation of the original, (key, value) pairs included, by an order-independent\n"
          "128-bit fingerprint; without --original only the order is checked.\n"
          "Prints \"ok\" and exits 0 when it is; exits 1 naming the first problem otherwise.\n"
          "FILE - reads the keys from standard input.\n",
      .options = {
          {"dtype", "T", dtype_help},
          {"original", "FILE", "the keys before sorting (else: check the order only)"},
          {"descending", "", "expect descending order"},
          {"values", "FILE", "the sorted values"},
          {"original-values", "FILE", "the values before sorting"},
          {"value-bytes", "4|8", "bytes per value (default 8)"},
          {"json", "", "print one JSON object: ok, elements, message"},
          {"help", "", "show this text"},
      }};
  return spec;
}

const command_spec& status_spec()
{
  static const command_spec spec{
      .name = "status",
      .synopsis = "[--socket PATH] [--config FILE] [--json | --prometheus]",
      .description =
          "Asks the daemon (gpusortd) how it is: its devices, memory, shared buffers, clients,\n"
          "the jobs running and queued, and the totals since it started.\n",
      .options = {
          {"socket", "PATH", "the daemon's socket (default: $GPUSORT_SOCKET, else the\n"
                             "configuration's `socket`, /run/gpusort/gpusort.sock)"},
          {"config", "FILE", "configuration, YAML, for the socket path (default:\n"
                             "$GPUSORT_CONFIG)"},
          {"json", "", "print one JSON object with every field"},
          {"prometheus", "", "print the metrics in Prometheus's text format (names\n"
                             "gpusort_*: see the README), for a node exporter's textfile\n"
                             "collector or a scrape wrapper"},
          {"help", "", "show this text"},
      }};
  return spec;
}

// ---- option values ---------------------------------------------------------------------------

dtype dtype_option(const parsed_args& a)
{
  const std::string text = a.require("dtype");
  const auto t = parse_dtype(text);
  if (!t) throw cli_error{exit_usage, "unknown dtype '" + text + "' (u32 i32 u64 i64 f32 f64)"};
  return *t;
}

std::uint32_t value_bytes_option(const parsed_args& a)
{
  const std::string text = a.get("value-bytes").value_or("8");
  if (text == "4") return 4;
  if (text == "8") return 8;
  throw cli_error{exit_usage, "--value-bytes must be 4 or 8, not '" + text + "'"};
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

/// Elements in a file (mapped_input or input_file) of `bytes`, which must hold a whole number of
/// `element_bytes`.
/// How many elements `bytes` of `shown` hold; exit 65 when they are not a whole number.
std::uint64_t whole_elements(std::string_view shown, std::uint64_t bytes,
                             std::uint64_t element_bytes, std::string_view what)
{
  if (bytes % element_bytes != 0)
    throw cli_error{exit_data, fmt::format("{}: {} bytes is not a whole number of {}-byte {}",
                                           shown, bytes, element_bytes, what)};
  return bytes / element_bytes;
}

template <typename File>
std::uint64_t element_count(const File& file, std::uint64_t element_bytes, std::string_view what)
{
  return whole_elements(file.path().string(), file.size(), element_bytes, what);
}

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

void set_log_level(log_level level, bool quiet)
{
  detail::set_program_log_level(quiet && level < log_level::warn ? log_level::warn : level);
}

std::string json_string(std::string_view s)
{
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string plural(std::uint64_t n, std::string_view word)
{
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

double seconds_since_start()
{
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - process_start).count();
}

/// With --profile: when each step of a sort command ended, in seconds from the process's start,
/// and (with --local) the engine's stages, so that a user sees where the wall time went: the
/// start of CUDA, the pinning of buffers, the rounds, the sync of the outputs.
class sort_timeline {
 public:
  explicit sort_timeline(bool on) : on_{on} {}
  [[nodiscard]] bool on() const noexcept { return on_; }
  void mark(std::string what)
  {
    if (on_) marks_.emplace_back(std::move(what), seconds_since_start());
  }
  void set_stages(std::vector<stage_profile> stages) { stages_ = std::move(stages); }

  /// The fields --json adds: "timeline" (steps) and "stages" (the engine's).
  [[nodiscard]] std::string json_fields() const
  {
    if (!on_) return "";
    std::string steps;
    for (const auto& [what, at] : marks_)
      steps += fmt::format("{}{{\"step\": {}, \"at\": {:.6f}}}", steps.empty() ? "" : ", ",
                           json_string(what), at);
    std::string stages;
    for (const stage_profile& p : stages_)
      stages += fmt::format("{}{{\"device\": {}, \"round\": {}, \"stage\": {}, "
                            "\"chunks\": {}, \"bytes\": {}, \"busy_seconds\": {:.6f}, "
                            "\"first_start\": {:.6f}, \"last_end\": {:.6f}}}",
                            stages.empty() ? "" : ", ", json_string(p.device), p.round,
                            json_string(p.stage), p.chunks, p.bytes, p.busy_seconds,
                            p.first_start, p.last_end);
    return fmt::format(", \"timeline\": [{}], \"stages\": [{}]", steps, stages);
  }

  /// The same for people, on stderr: one line per step with the time it took, then the stages.
  void print(std::FILE* to) const
  {
    if (!on_) return;
    double before = 0;
    for (const auto& [what, at] : marks_) {
      fmt::print(to, "gpusort: profile: {:8.3f} s  (+{:.3f} s) {}\n", at, at - before, what);
      before = at;
    }
    for (const stage_profile& p : stages_)
      fmt::print(to, "gpusort: profile: round {} {} {}: {} in {} chunks, busy {:.3f} s of "
                     "{:.3f}-{:.3f} s\n",
                 p.round, p.device, p.stage, format_bytes(p.bytes), p.chunks, p.busy_seconds,
                 p.first_start, p.last_end);
  }

 private:
  bool on_;
  std::vector<std::pair<std::string, double>> marks_;
  std::vector<stage_profile> stages_;
};

/// Runs the engine, mapping its exceptions to exit codes.
sort_report run_engine(const config& cfg, const sort_job& job, const sort_options& options,
                       sort_timeline& timeline)
{
  try {
    sort_report report;
    {
      engine eng{cfg};
      timeline.mark("engine started (devices opened)");
      report = eng.sort(job, options);
      timeline.mark("sorted");
    }
    timeline.mark("engine closed (its buffers freed)");
    timeline.set_stages(report.profile);
    return report;
  } catch (const config_error& e) {
    throw cli_error{exit_config, e.what()};
  } catch (const io_error& e) {
    throw cli_error{exit_io, e.what()};
  } catch (const out_of_memory& e) {
    throw cli_error{exit_runtime, std::string{"out of memory: "} + e.what()};
  } catch (const std::bad_alloc&) {
    throw cli_error{exit_runtime, "out of host memory"};
  } catch (const std::exception& e) {
    throw cli_error{exit_runtime, std::string{"sort failed: "} + e.what()};
  }
}

void print_help(const command_spec& spec) { std::fputs(help_text(spec).c_str(), stdout); }

/// The command's arguments, parsed; nullopt when they asked for help, which is then printed.
std::optional<parsed_args> parse_or_help(const std::vector<std::string>& args,
                                         const command_spec& spec)
{
  if (wants_help(args)) {
    print_help(spec);
    return std::nullopt;
  }
  return parse_args(args, spec);
}

/// The one file a command takes; `missing` says what the command needs when none is given.
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

/// The daemon's socket: --socket, else $GPUSORT_SOCKET, else the configuration's `socket`.
std::string socket_option(const parsed_args& a)
{
  if (auto s = a.get("socket")) return *s;
  if (const char* env = std::getenv("GPUSORT_SOCKET"); env != nullptr && *env != '\0') return env;
  return load_cli_config(a).socket;
}

/// The exit code of a daemon's status: what a script can act on.
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

/// `hint`: what the user can do instead when no daemon answers (sort has --local; status not).
client::connection connect_daemon(const std::string& socket, std::string_view hint)
{
  try {
    return client::connection::connect(socket, std::string{"gpusort-cli "} + GPUSORT_VERSION);
  } catch (const client::error& e) {
    if (e.code() == client::status_code::connection_lost)
      throw cli_error{exit_unavailable, "cannot reach the daemon at " + socket + " (" +
                                            e.what() + "); " + std::string{hint}};
    throw cli_error{exit_of(e.code()), "the daemon at " + socket + " refused: " + e.what()};
  }
}

std::string json_list(const std::vector<std::string>& items)
{
  std::string out;
  for (const std::string& d : items) out += (out.empty() ? "" : ", ") + json_string(d);
  return "[" + out + "]";
}

/// Outputs that will be fsync'ed start going to their disk while the sort writes them.
void write_back_meanwhile(const parsed_args& a, atomic_output& keys_out,
                          std::optional<atomic_output>& values_out)
{
  if (a.has("no-sync")) return;
  keys_out.write_back_meanwhile();
  if (values_out) values_out->write_back_meanwhile();
}

/// How a sort finished, for its report: the daemon's own numbers, or the local engine's in the
/// same shape.
enum class sorted_by : std::uint8_t { daemon, local };

/// The report of a finished sort on `to`: JSON with --json, else one line unless --quiet; only
/// the daemon's report has a queue time.
void print_sort_report(std::FILE* to, const client::job_report& r, sorted_by by,
                       const parsed_args& a, const sort_timeline& timeline)
{
  const double wall_seconds = seconds_since_start();
  timeline.print(stderr);
  const bool daemon = by == sorted_by::daemon;
  if (a.has("json")) {
    const std::string queued =
        daemon ? fmt::format(", \"queue_seconds\": {}", r.queue_seconds) : "";
    fmt::print(to,
               "{{\"elements\": {}, \"bytes\": {}, \"seconds\": {}, \"wall_seconds\": {}, "
               "\"peak_rss_bytes\": {}, \"rate\": {}, \"engine\": {}, \"devices\": {}, "
               "\"chunks\": {}, \"rounds\": {}, \"compensated_chunks\": {}{}{}}}\n",
               r.elements, r.bytes, r.seconds, wall_seconds, peak_rss_bytes(), r.rate,
               json_string(r.engine), json_list(r.devices), r.chunks, r.rounds,
               r.compensated_chunks, queued, timeline.json_fields());
  } else if (!a.has("quiet")) {
    std::string devices;
    for (const std::string& d : r.devices) devices += (devices.empty() ? "" : ",") + d;
    // Binary units throughout, as format_bytes gives the size (not MiB beside GB/s).
    fmt::print(to,
               "sorted {} ({}) in {:.3f} s ({:.3f} s in all): {:.3f} GiB/s, engine {} on {}, "
               "{}, {}{}\n",
               plural(r.elements, "element"), format_bytes(r.bytes), r.seconds, wall_seconds,
               r.rate / gibibyte, r.engine, devices, plural(r.chunks, "chunk"),
               plural(static_cast<std::uint64_t>(r.rounds), "round"),
               daemon ? " (daemon)" : "");
  }
  std::fflush(to);
}

/// The end of both sort paths: the outputs made durable and renamed into place, then the report.
int finish_sort(progress_bar& bar, atomic_output& keys_out,
                std::optional<atomic_output>& values_out, const client::job_report& r,
                sorted_by by, const parsed_args& a, sort_timeline& timeline)
{
  bar.finish();
  const bool durable = !a.has("no-sync");
  keys_out.sync(durable);
  if (values_out) values_out->sync(durable);
  timeline.mark(durable ? "outputs synced" : "outputs not synced (--no-sync)");
  keys_out.publish();
  if (values_out) values_out->publish();
  timeline.mark("outputs published");
  print_sort_report(stdout, r, by, a, timeline);
  return exit_ok;
}

/// The report of the embedded engine in the shape of the daemon's.
client::job_report local_report(const sort_report& report)
{
  return client::job_report{.elements = report.elements,
                            .bytes = report.bytes,
                            .seconds = report.seconds,
                            .rate = report.rate_bytes_per_second(),
                            .engine = report.engine,
                            .devices = report.devices,
                            .chunks = report.chunks,
                            .rounds = report.rounds,
                            .compensated_chunks = report.compensated_chunks};
}

/// `gpusort sort -` and `--out -`: keys from standard input (or the file), read to the end (a
/// pipe has no size to plan with), sorted in memory (--local) or in a shared buffer of the
/// daemon, then written to standard output or to --out FILE. With the data on standard output
/// the report goes to standard error, so that the stream carries the keys alone.
int sort_stream(const parsed_args& a, dtype t, const fs::path& input_path)
{
  if (a.has("values") || a.has("values-out") || a.has("value-bytes"))
    throw cli_error{exit_usage, "a stream carries keys alone: --values needs files (and no -)"};
  const std::optional<std::string> out = a.get("out");
  const bool to_stdout = !out || *out == "-";
  const order direction = a.has("descending") ? order::descending : order::ascending;
  const sorted_by by = a.has("local") ? sorted_by::local : sorted_by::daemon;
  sort_timeline timeline{a.has("profile")};
  const bool from_stdin = input_path == "-";
  std::optional<input_file> file_in;
  if (!from_stdin) file_in.emplace(input_path);
  const std::string shown = from_stdin ? std::string{"standard input"} : input_path.string();
  const stream_input in{from_stdin ? STDIN_FILENO : file_in->fd(), shown};
  const std::uint64_t n =
      whole_elements(shown, in.size(), size_of(t), std::string{name_of(t)} + " keys");
  timeline.mark("input read");
  std::optional<atomic_output> file_out;
  if (!to_stdout) file_out.emplace(*out, in.size());

  client::job_report report;
  const char* sorted = in.data();
  std::optional<client::connection> conn;
  std::optional<client::shared_buffer> shared;
  if (by == sorted_by::local) {
    const config cfg = load_cli_config(a);
    set_log_level(cfg.level, a.has("quiet") || a.has("json"));
    report = local_report(run_engine(cfg, sort_job{.keys = {in.data(), n, t}},
                                     sort_options{.direction = direction, .profile = timeline.on()},
                                     timeline));
  } else {
    conn.emplace(connect_daemon(socket_option(a), "start gpusortd or sort with --local"));
    try {
      shared.emplace(conn->allocate_bytes(std::max<std::uint64_t>(in.size(), 1)));
      std::memcpy(shared->data(), in.data(), in.size());
      timeline.mark("copied into a shared buffer of the daemon");
      report = conn->sort(client::sort_request{.type = t,
                                               .count = n,
                                               .direction = direction,
                                               .keys = client::array_ref::in(*shared),
                                               .values = {},
                                               .keys_out = {},
                                               .values_out = {}});
    } catch (const client::error& e) {
      throw cli_error{exit_of(e.code()), std::string{"sort failed: "} + e.what()};
    }
    sorted = reinterpret_cast<const char*>(shared->data());
    timeline.mark("sorted by the daemon");
  }
  if (to_stdout) {
    write_all(STDOUT_FILENO, sorted, in.size(), "standard output");
    timeline.mark("written to standard output");
    print_sort_report(stderr, report, by, a, timeline);
    return exit_ok;
  }
  write_all(file_out->fd(), sorted, in.size(), file_out->shown());
  std::optional<atomic_output> no_values;
  progress_bar no_bar{false, stderr};
  return finish_sort(no_bar, *file_out, no_values, report, by, a, timeline);
}

}  // namespace

std::string one_line(std::string text)
{
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  return text;
}

const command_spec* find_command(std::string_view name)
{
  for (const command_spec* spec : {&gen_spec(), &sort_spec(), &verify_spec(), &status_spec()})
    if (spec->name == name) return spec;
  return nullptr;
}

// ---- gen -------------------------------------------------------------------------------------

int run_gen(const std::vector<std::string>& args)
{
  const std::optional<parsed_args> parsed = parse_or_help(args, gen_spec());
  if (!parsed) return exit_ok;
  const parsed_args& a = *parsed;
  if (!a.positionals.empty())
    throw cli_error{exit_usage, "gen writes to --out, unexpected argument '" +
                                    a.positionals.front() + "'"};
  const dtype t = dtype_option(a);
  const std::string dist_text = a.require("dist");
  const auto dist = parse_distribution(dist_text);
  if (!dist)
    throw cli_error{exit_usage, "unknown distribution '" + dist_text + "' (" +
                                    std::string{distribution_names()} + ")"};
  if (!applies_to(*dist, t))
    throw cli_error{exit_usage, "distribution " + dist_text + " needs a float dtype (f32, f64)"};
  const std::string count_text = a.require("count");
  const auto count = parse_count(count_text);
  if (!count)
    throw cli_error{exit_usage, "bad --count '" + count_text + "' (e.g. 1000, 10M, 1Gi)"};
  const std::uint64_t seed = seed_option(a);
  const fs::path out_path = a.require("out");
  const std::optional<std::string> values_path = a.get("values-out");
  if (!values_path && a.has("value-bytes"))
    throw cli_error{exit_usage, "--value-bytes needs --values-out"};
  const std::uint32_t value_bytes = value_bytes_option(a);
  if (values_path && same_file(out_path, *values_path))
    throw cli_error{exit_usage, "--out and --values-out name the same file"};
  constexpr std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  if (*count > max / size_of(t) || (values_path && *count > max / value_bytes))
    throw cli_error{exit_usage, "--count " + count_text + " is too large: its size overflows"};

  if (values_path == "-")
    throw cli_error{exit_usage, "--values-out - : only the keys can go to standard output"};
  const bool to_stdout = out_path == "-";
  std::optional<atomic_output> keys;
  std::unique_ptr<char[]> streamed;  // the keys for standard output, uninitialised until made
  if (to_stdout)
    streamed.reset(new char[std::max<std::uint64_t>(*count * size_of(t), 1)]);
  else
    keys.emplace(out_path, *count * size_of(t));
  std::optional<atomic_output> values;
  if (values_path) values.emplace(*values_path, *count * value_bytes);
  generate(key_array{to_stdout ? streamed.get() : keys->map(), *count, t}, *dist, seed);
  if (values) generate_values(value_array{values->map(), *count, value_bytes}, seed);
  if (to_stdout) write_all(STDOUT_FILENO, streamed.get(), *count * size_of(t), "standard output");
  for (std::optional<atomic_output>* out : {&keys, &values}) {
    if (!*out) continue;
    (*out)->sync();
    (*out)->publish();
  }

  if (!a.has("quiet")) {
    // With the keys on standard output, the summary goes to standard error.
    std::FILE* to = to_stdout ? stderr : stdout;
    std::fprintf(to, "wrote %s of %s (%s, seed %llu) to %s\n", plural(*count, "key").c_str(),
                 std::string{name_of(t)}.c_str(), dist_text.c_str(),
                 static_cast<unsigned long long>(seed),
                 to_stdout ? "standard output" : out_path.c_str());
    if (values)
      std::fprintf(to, "wrote %s of %u bytes to %s\n", plural(*count, "value").c_str(),
                   value_bytes, values_path->c_str());
  }
  return exit_ok;
}

// ---- sort ------------------------------------------------------------------------------------

namespace {

/// The keys' element count, after checking what both ways of sorting need of the inputs: whole
/// elements, as many values as keys, and (in place) files this user may write: renaming over a
/// file needs only the folder's permission, but a read-only file must stay so.
template <typename File>
std::uint64_t checked_inputs(const File& keys, const std::optional<File>& values, dtype t,
                             std::uint32_t value_bytes, const fs::path& input_path,
                             const std::optional<std::string>& values_path, bool in_place)
{
  const std::uint64_t n = element_count(keys, size_of(t), std::string{name_of(t)} + " keys");
  if (values) {
    const std::uint64_t vn = element_count(*values, value_bytes, "values");
    if (vn != n)
      throw cli_error{exit_data, fmt::format("{} holds {} {}-byte values but {} holds {} keys",
                                             *values_path, vn, value_bytes,
                                             input_path.string(), n)};
  }
  for (const fs::path& p : {input_path, fs::path{values_path.value_or("")}}) {
    if (!in_place || p.empty() || ::access(p.c_str(), W_OK) == 0) continue;
    const int err = errno;
    throw cli_error{denied_or(err, exit_no_input),
                    "cannot sort " + p.string() + " in place: " + std::strerror(err)};
  }
  return n;
}

/// `gpusort sort` through the daemon: the files are opened here and their descriptors passed;
/// the daemon writes the sorted data into temporaries that are renamed over the outputs only
/// when complete, as with --local.
int sort_with_daemon(const parsed_args& a, const fs::path& input_path, dtype t,
                     const std::optional<std::string>& values_path, std::uint32_t value_bytes,
                     const fs::path& keys_out_path,
                     const std::optional<fs::path>& values_out_path)
{
  const bool json = a.has("json");
  const bool quiet = a.has("quiet");
  const std::string socket = socket_option(a);
  const bool in_place = !a.has("out");
  sort_timeline timeline{a.has("profile")};

  const input_file keys{input_path};
  std::optional<input_file> values;
  if (values_path) values.emplace(*values_path);
  const std::uint64_t n =
      checked_inputs(keys, values, t, value_bytes, input_path, values_path, in_place);
  timeline.mark("inputs opened");
  client::connection conn = connect_daemon(socket, "start gpusortd or sort with --local");
  timeline.mark("connected to the daemon");

  atomic_output keys_out{keys_out_path, keys.size()};
  std::optional<atomic_output> values_out;
  if (values) values_out.emplace(*values_out_path, values->size());
  write_back_meanwhile(a, keys_out, values_out);
  timeline.mark("outputs created");

  client::sort_request request{
      .type = t,
      .count = n,
      .direction = a.has("descending") ? order::descending : order::ascending,
      .keys = client::array_ref::of_fd(keys.fd()),
      .keys_out = client::array_ref::of_fd(keys_out.fd())};
  if (values) {
    request.value_bytes = value_bytes;
    request.values = client::array_ref::of_fd(values->fd());
    request.values_out = client::array_ref::of_fd(values_out->fd());
  }
  progress_bar bar{!quiet && !json && ::isatty(STDERR_FILENO) == 1, stderr};
  client::progress_callback on_progress;
  if (bar.enabled())
    on_progress = [&bar](const client::progress& p) {
      bar.update(progress_event{p.round, p.bytes_done, p.bytes_total, p.rounds});
    };
  client::job_report report;
  try {
    report = conn.sort(request, on_progress);
  } catch (const client::error& e) {
    throw cli_error{exit_of(e.code()), std::string{"sort failed: "} + e.what()};
  }
  timeline.mark(fmt::format("sorted by the daemon (its sort {:.3f} s, queued {:.3f} s)",
                            report.seconds, report.queue_seconds));
  return finish_sort(bar, keys_out, values_out, report, sorted_by::daemon, a, timeline);
}

}  // namespace

int run_sort(const std::vector<std::string>& args)
{
  const std::optional<parsed_args> parsed = parse_or_help(args, sort_spec());
  if (!parsed) return exit_ok;
  const parsed_args& a = *parsed;
  const fs::path input_path = one_file(a, "sort", "the file to sort");
  const dtype t = dtype_option(a);
  if (a.has("local") && a.has("socket"))
    throw cli_error{exit_usage, "--local sorts in this process; --socket names a daemon: not both"};
  if (input_path == "-" || a.get("out") == "-") return sort_stream(a, t, input_path);
  const std::optional<std::string> values_path = a.get("values");
  if (!values_path && a.has("values-out"))
    throw cli_error{exit_usage, "--values-out needs --values"};
  if (!values_path && a.has("value-bytes"))
    throw cli_error{exit_usage, "--value-bytes needs --values"};
  if (values_path && a.has("out") != a.has("values-out"))
    throw cli_error{exit_usage, a.has("out") ? "--out with --values needs --values-out (or "
                                               "neither, to sort both in place)"
                                             : "--values-out needs --out (or neither, to sort "
                                               "both in place)"};
  const std::uint32_t value_bytes = value_bytes_option(a);
  const bool in_place = !a.has("out");
  const fs::path keys_out_path = a.get("out").value_or(input_path.string());
  const std::optional<fs::path> values_out_path =
      values_path ? std::optional<fs::path>{a.get("values-out").value_or(*values_path)}
                  : std::nullopt;
  if (values_path && same_file(keys_out_path, *values_out_path))
    throw cli_error{exit_usage, in_place ? "the keys and values are the same file"
                                         : "--out and --values-out name the same file"};
  const bool json = a.has("json");
  const bool quiet = a.has("quiet");
  if (!a.has("local"))
    return sort_with_daemon(a, input_path, t, values_path, value_bytes, keys_out_path,
                            values_out_path);
  const config cfg = load_cli_config(a);
  set_log_level(cfg.level, quiet || json);
  sort_timeline timeline{a.has("profile")};

  const input_file keys{input_path};
  std::optional<input_file> values;
  if (values_path) values.emplace(*values_path);
  const std::uint64_t n =
      checked_inputs(keys, values, t, value_bytes, input_path, values_path, in_place);
  timeline.mark("inputs opened");

  atomic_output keys_out{keys_out_path, keys.size()};
  std::optional<atomic_output> values_out;
  if (values) values_out.emplace(*values_out_path, values->size());
  write_back_meanwhile(a, keys_out, values_out);
  timeline.mark("outputs created");

  progress_bar bar{!quiet && !json && ::isatty(STDERR_FILENO) == 1, stderr};
  sort_options options{.direction = a.has("descending") ? order::descending : order::ascending,
                       .profile = timeline.on()};
  if (bar.enabled()) options.on_progress = [&bar](const progress_event& e) { bar.update(e); };
  // The engine reads the inputs with positioned reads (nothing mapped: a file truncated
  // meanwhile is an error, not a SIGBUS) and writes the temporaries the same way, or, in
  // tmpfs, through mappings whose pages it makes ahead (pipeline/file_window.hpp).
  std::vector<file_array> files;
  files.reserve(4);  // data() must stay valid
  const auto input_of = [&](const input_file& f, const std::string& name) {
    return files.emplace_back(f.fd(), 0, f.size(), name).data();
  };
  const auto output_of = [&](const atomic_output& out) {
    return files.emplace_back(out.fd(), 0, out.size(), out.shown()).data();
  };
  sort_job job{.keys = {input_of(keys, input_path.string()), n, t},
               .keys_out = output_of(keys_out)};
  if (values) {
    job.values = value_array{input_of(*values, *values_path), n, value_bytes};
    job.values_out = output_of(*values_out);
  }
  const sort_report report = run_engine(cfg, job, options, timeline);
  return finish_sort(bar, keys_out, values_out, local_report(report), sorted_by::local, a,
                     timeline);
}

// ---- verify ----------------------------------------------------------------------------------

namespace {

/// Prints a verification's outcome (JSON, the "ok" line, or one error line) and returns its
/// exit code.
int report_verification(const parsed_args& a, bool ok, std::uint64_t n,
                        const std::string& message, const std::string& ok_line)
{
  if (a.has("json")) {
    fmt::print("{{\"ok\": {}, \"elements\": {}, \"message\": {}}}\n", ok, n,
               json_string(message));
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

/// `verify` without an original: the order alone, for a file whose input is gone.
int verify_order_only(const parsed_args& a, const verify_input& sorted, std::uint64_t n, dtype t,
                      order direction)
{
  const char* dir = direction == order::ascending ? "ascending" : "descending";
  const order_check c = check_order(key_array{sorted.source(), n, t}, direction);
  return report_verification(
      a, c.ok, n,
      c.ok ? "" : fmt::format("{} is not sorted {}: elements {} and {} are out of order",
                              sorted.path().string(), dir, c.first_violation,
                              c.first_violation + 1),
      fmt::format("ok: {} sorted {} (order only: no --original to compare with)",
                  plural(n, "element"), dir));
}

}  // namespace

int run_verify(const std::vector<std::string>& args)
{
  const std::optional<parsed_args> parsed = parse_or_help(args, verify_spec());
  if (!parsed) return exit_ok;
  const parsed_args& a = *parsed;
  const std::string& sorted_path = one_file(a, "verify", "the sorted file");
  const dtype t = dtype_option(a);
  const std::optional<std::string> original_path = a.get("original");
  if (!original_path && a.has("values"))
    throw cli_error{exit_usage, "--values needs --original and --original-values"};
  if (a.has("values") != a.has("original-values"))
    throw cli_error{exit_usage, "--values and --original-values go together"};
  if (!a.has("values") && a.has("value-bytes"))
    throw cli_error{exit_usage, "--value-bytes needs --values"};
  const std::uint32_t value_bytes = value_bytes_option(a);
  const order direction = a.has("descending") ? order::descending : order::ascending;

  const std::string key_what = std::string{name_of(t)} + " keys";
  const verify_input sorted{sorted_path};
  const std::uint64_t n = element_count(sorted, size_of(t), key_what);
  if (!original_path) return verify_order_only(a, sorted, n, t, direction);
  const mapped_input original{*original_path};
  const std::uint64_t on = element_count(original, size_of(t), key_what);
  std::optional<mapped_input> sorted_values_file, original_values_file;
  std::optional<value_array> sorted_values, original_values;
  if (a.has("values")) {
    sorted_values_file.emplace(*a.get("values"));
    original_values_file.emplace(*a.get("original-values"));
    for (const auto& [file, keys] : {std::pair{&*sorted_values_file, n},
                                     std::pair{&*original_values_file, on}})
      if (const std::uint64_t vn = element_count(*file, value_bytes, "values"); vn != keys)
        throw cli_error{exit_data, fmt::format("{} holds {} values for {} keys",
                                               file->path().string(), vn, keys)};
    sorted_values = value_array{sorted_values_file->source(), n, value_bytes};
    original_values = value_array{original_values_file->source(), on, value_bytes};
  }

  const fingerprint before = fingerprint_of(key_array{original.source(), on, t}, original_values);
  const verify_result r =
      verify(key_array{sorted.source(), n, t}, sorted_values, direction, before);
  return report_verification(
      a, r.ok, n, r.message,
      fmt::format("ok: {} sorted {}, a permutation of {}", plural(n, "element"),
                  direction == order::ascending ? "ascending" : "descending", *original_path));
}

}  // namespace gpusort::cli

namespace gpusort::cli {

// ---- status ----------------------------------------------------------------------------------

namespace {

/// A label value as Prometheus's text format wants it: backslash, quote and newline escaped.
std::string label_value(std::string_view v)
{
  std::string out;
  for (const char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

/// The daemon's status as Prometheus metrics (text format 0.0.4): gauges for what is now,
/// counters (_total) for what happened since the daemon started.
std::string prometheus_text(const client::daemon_status& st)
{
  std::string out;
  const auto metric = [&out](std::string_view name, std::string_view type, std::string_view help,
                             const std::vector<std::pair<std::string, double>>& samples) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
    for (const auto& [labels, value] : samples)
      out += fmt::format("{}{} {}\n", name, labels, value);
  };
  const auto one = [](double v) {
    return std::vector<std::pair<std::string, double>>{{"", v}};
  };
  const auto d = [](std::uint64_t v) { return static_cast<double>(v); };
  metric("gpusort_info", "gauge", "The daemon's version (the value is always 1).",
         {{fmt::format("{{version=\"{}\"}}", label_value(st.server_version)), 1.0}});
  metric("gpusort_uptime_seconds", "gauge", "Seconds since the daemon started.",
         one(st.uptime_seconds));
  std::vector<std::pair<std::string, double>> total, free_bytes, budget, running;
  for (const auto& dev : st.devices) {
    const std::string labels = fmt::format("{{device=\"{}\",model=\"{}\"}}",
                                           label_value(dev.name), label_value(dev.model));
    total.emplace_back(labels, d(dev.memory_total));
    free_bytes.emplace_back(labels, d(dev.memory_free));
    budget.emplace_back(labels, d(dev.memory_budget));
    running.emplace_back(labels, d(dev.running_jobs));
  }
  metric("gpusort_device_memory_total_bytes", "gauge", "Memory of each device.", total);
  metric("gpusort_device_memory_free_bytes", "gauge", "Free memory of each device.", free_bytes);
  metric("gpusort_device_memory_budget_bytes", "gauge",
         "The memory budget of each device (0: automatic).", budget);
  metric("gpusort_device_running_jobs", "gauge", "Jobs running on each device.", running);
  metric("gpusort_host_memory_budget_bytes", "gauge", "host_memory_budget of the jobs together.",
         one(d(st.host_memory_budget)));
  metric("gpusort_host_memory_used_bytes", "gauge", "Host memory the running jobs hold.",
         one(d(st.host_memory_used)));
  metric("gpusort_pinned_pool_bytes", "gauge", "pinned_pool_bytes of the shared buffers.",
         one(d(st.pinned_pool_bytes)));
  metric("gpusort_pinned_pool_used_bytes", "gauge", "Pinned memory of the live shared buffers.",
         one(d(st.pinned_pool_used)));
  metric("gpusort_shared_buffers", "gauge", "Shared buffers in use.", one(d(st.buffers)));
  metric("gpusort_clients", "gauge", "Connected clients.", one(d(st.clients)));
  metric("gpusort_jobs", "gauge", "Jobs now, by state.",
         {{"{state=\"queued\"}", d(st.queued_jobs)}, {"{state=\"running\"}", d(st.running_jobs)}});
  const auto& t = st.totals;
  metric("gpusort_jobs_submitted_total", "counter", "Jobs submitted since the daemon started.",
         one(d(t.jobs_submitted)));
  metric("gpusort_jobs_finished_total", "counter", "Jobs that ended, by outcome.",
         {{"{outcome=\"succeeded\"}", d(t.jobs_succeeded)},
          {"{outcome=\"failed\"}", d(t.jobs_failed)},
          {"{outcome=\"cancelled\"}", d(t.jobs_cancelled)}});
  metric("gpusort_jobs_rejected_total", "counter", "Jobs refused at admission.",
         one(d(t.jobs_rejected)));
  metric("gpusort_sorted_bytes_total", "counter", "Bytes of keys and values sorted.",
         one(d(t.bytes_sorted)));
  metric("gpusort_connections_total", "counter", "Connections accepted.",
         one(d(t.connections)));
  return out;
}

}  // namespace

int run_status(const std::vector<std::string>& args)
{
  const std::optional<parsed_args> parsed = parse_or_help(args, status_spec());
  if (!parsed) return exit_ok;
  const parsed_args& a = *parsed;
  if (!a.positionals.empty())
    throw cli_error{exit_usage, "status takes no file, got '" + a.positionals.front() + "'"};
  const std::string socket = socket_option(a);
  client::connection conn = connect_daemon(socket, "is gpusortd running?");
  client::daemon_status st;
  try {
    st = conn.status();
  } catch (const client::error& e) {
    throw cli_error{exit_runtime, std::string{"status failed: "} + e.what()};
  }
  const auto job_json = [](const client::job_info& j) {
    return fmt::format("{{\"job_id\": {}, \"state\": {}, \"dtype\": {}, \"count\": {}, "
                       "\"bytes\": {}, \"queue_position\": {}, \"round\": {}, "
                       "\"bytes_done\": {}, \"bytes_total\": {}, \"seconds\": {}, "
                       "\"client_pid\": {}}}",
                       j.job_id, json_string(client::name_of(j.state)),
                       json_string(j.type ? name_of(*j.type) : "?"), j.count, j.bytes,
                       j.queue_position, j.round, j.bytes_done, j.bytes_total, j.seconds,
                       j.client_pid);
  };
  if (a.has("json") && a.has("prometheus"))
    throw cli_error{exit_usage, "--json and --prometheus are two formats: choose one"};
  if (a.has("prometheus")) {
    fmt::print("{}", prometheus_text(st));
    std::fflush(stdout);
    return exit_ok;
  }
  if (a.has("json")) {
    std::string devices, jobs;
    for (const auto& d : st.devices)
      devices += fmt::format("{}{{\"name\": {}, \"model\": {}, \"memory_total\": {}, "
                             "\"memory_free\": {}, \"memory_budget\": {}, "
                             "\"running_jobs\": {}}}",
                             devices.empty() ? "" : ", ", json_string(d.name),
                             json_string(d.model), d.memory_total, d.memory_free,
                             d.memory_budget, d.running_jobs);
    for (const auto& j : st.jobs) jobs += (jobs.empty() ? "" : ", ") + job_json(j);
    const auto& t = st.totals;
    fmt::print("{{\"server_version\": {}, \"uptime_seconds\": {}, \"devices\": [{}], "
               "\"host_memory_budget\": {}, \"host_memory_used\": {}, "
               "\"pinned_pool_bytes\": {}, \"pinned_pool_used\": {}, \"buffers\": {}, "
               "\"clients\": {}, \"queued_jobs\": {}, \"running_jobs\": {}, \"jobs\": [{}], "
               "\"totals\": {{\"jobs_submitted\": {}, \"jobs_succeeded\": {}, "
               "\"jobs_failed\": {}, \"jobs_cancelled\": {}, \"jobs_rejected\": {}, "
               "\"bytes_sorted\": {}, \"connections\": {}}}}}\n",
               json_string(st.server_version), st.uptime_seconds, devices,
               st.host_memory_budget, st.host_memory_used, st.pinned_pool_bytes,
               st.pinned_pool_used, st.buffers, st.clients, st.queued_jobs, st.running_jobs,
               jobs, t.jobs_submitted, t.jobs_succeeded, t.jobs_failed, t.jobs_cancelled,
               t.jobs_rejected, t.bytes_sorted, t.connections);
    std::fflush(stdout);
    return exit_ok;
  }
  fmt::print("gpusortd {} at {}, up {:.1f} s\n", st.server_version, socket, st.uptime_seconds);
  for (const auto& d : st.devices) {
    fmt::print("device {}{}: ", d.name, d.model.empty() ? "" : " (" + d.model + ")");
    if (d.memory_total != 0)
      fmt::print("memory {} total, {} free, ", format_bytes(d.memory_total),
                 format_bytes(d.memory_free));
    fmt::print("budget {}, {} running\n",
               d.memory_budget == 0 ? std::string{"auto"} : format_bytes(d.memory_budget),
               plural(d.running_jobs, "job"));
  }
  fmt::print("host memory: {} used of {} (host_memory_budget)\n",
             format_bytes(st.host_memory_used), format_bytes(st.host_memory_budget));
  fmt::print("shared buffers: {} in use, {} of {} (pinned_pool_bytes)\n", st.buffers,
             format_bytes(st.pinned_pool_used), format_bytes(st.pinned_pool_bytes));
  fmt::print("clients: {}\n", st.clients);
  fmt::print("jobs: {} running, {} queued\n", st.running_jobs, st.queued_jobs);
  for (const auto& j : st.jobs) {
    const double percent = j.bytes_total == 0 ? 0.0
                                              : 100.0 * static_cast<double>(j.bytes_done) /
                                                    static_cast<double>(j.bytes_total);
    fmt::print("  job {} {}: {} {} keys ({}), pid {}, ", j.job_id, client::name_of(j.state),
               j.count, j.type ? name_of(*j.type) : "?", format_bytes(j.bytes), j.client_pid);
    if (j.state == client::job_state::queued)
      fmt::print("position {}, ", j.queue_position);
    else
      fmt::print("round {} {:.0f}%, ", j.round, percent);
    fmt::print("{:.1f} s\n", j.seconds);
  }
  const auto& t = st.totals;
  fmt::print("totals: {} submitted, {} succeeded, {} failed, {} cancelled, {} rejected, {} "
             "sorted, {}\n",
             t.jobs_submitted, t.jobs_succeeded, t.jobs_failed, t.jobs_cancelled,
             t.jobs_rejected, format_bytes(t.bytes_sorted), plural(t.connections, "connection"));
  std::fflush(stdout);
  return exit_ok;
}

}  // namespace gpusort::cli
