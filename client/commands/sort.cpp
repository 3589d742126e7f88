// `gpusort sort`: files or streams sorted by the daemon or, with --local, in this process; or
// their sorting permutation (--argsort-out).
#include "client/commands.hpp"

#include "client/commands/common.hpp"
#include "client/commands/records.hpp"
#include "client/files.hpp"
#include "client/in_place.hpp"
#include "client/npy.hpp"
#include "client/progress.hpp"
#include "core/program_log.hpp"
#include "core/switches.hpp"
#include "pipeline/host_memory.hpp"
#include "pipeline/rows/move_records.hpp"

#include <gpusort/client.hpp>
#include <gpusort/config.hpp>
#include <gpusort/gpusort.hpp>
#include <gpusort/rows.hpp>
#include <gpusort/units.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

namespace gpusort::cli {

namespace fs = std::filesystem;

const command_spec& sort_spec()
{
  static const command_spec spec{
      .name = "sort",
      .synopsis = "FILE [--dtype T] [--out FILE] [--descending] [--stable]\n"
                  "                    [--float-order total|numpy]\n"
                  "                    [--argsort-out FILE [--index-type i64|u32]]\n"
                  "                    [--values FILE [--value-bytes 4|8] [--values-out FILE]]\n"
                  "                    [--socket PATH | --local] [--config FILE]\n"
                  "                    [--host-memory-budget SIZE] [--json] [--quiet]\n"
                  "                    [--no-sync] [--profile]\n"
                  "       gpusort sort FILE --record-bytes R --key OFFSET:LEN:TYPE[:desc]...\n"
                  "                    [--out FILE | --argsort-out FILE] [--order FIELDS] ...",
      .description =
          "Sorts FILE, a raw little-endian array of keys of type T, and with --values a file of\n"
          "values paired with the keys by index. FILE is only read: the sorted data goes to a\n"
          "temporary file in the output's folder, renamed over the output only on success.\n"
          "Without --out (and --values-out) the sort is in place; a failure leaves every file\n"
          "as it was.\n"
          "Within a host memory budget (--host-memory-budget, the configuration's\n"
          "host_memory_budget, else half the RAM) that has no room for that temporary (in\n"
          "tmpfs it is memory) beside the engine's own buffers, FILE is sorted where it lies\n"
          "on the lean path, with a journal .FILE.gpusort-journal beside it: if the command is\n"
          "killed, the next gpusort sort of FILE (or gpusort recover FILE) puts every element\n"
          "back from the journal first. A sort that cannot run within the budget is refused,\n"
          "naming the memory it needs.\n"
          "FILE may be a NumPy .npy file (known by its magic \\x93NUMPY, versions 1.0-3.0):\n"
          "1-D, '<u4' '<i4' '<u8' '<i8' '<f4' '<f8' (big-endian '>' keys too: they are sorted\n"
          "in memory, keys alone). Its header gives the type\n"
          "(--dtype may repeat it, not contradict it) and is kept byte for byte: only the data\n"
          "after it is sorted. The same holds for a .npy --values file (any 4- or 8-byte\n"
          "numeric type). An output of a .npy input is a .npy file with the input's header;\n"
          "an output named *.npy of a raw input gets a new header.\n"
          "Floats sort by IEEE 754 totalOrder (-NaN first, +NaN last, -0.0 before +0.0), or\n"
          "with --float-order numpy as np.sort does: every NaN last in both orders, -0.0 equal\n"
          "to +0.0. numpy is the default for .npy files, total for raw files.\n"
          "--stable keeps equal keys (and their values) in input order: with --float-order\n"
          "numpy the result is np.sort(a, kind=\"stable\") byte for byte.\n"
          "--argsort-out FILE writes the stable sorting permutation, np.argsort(a,\n"
          "kind=\"stable\"): int64 (or u32) little-endian indices, raw, or a .npy file when\n"
          "FILE ends in .npy. The keys file is then only read; the sorted keys are written\n"
          "only when --out is given too.\n"
          "Prints a progress bar on stderr when it is a terminal and a summary line on stdout.\n"
          "The daemon (gpusortd) sorts unless --local is given: this command opens the files\n"
          "and passes their descriptors to it; the daemon never opens a path itself.\n"
          "FILE - reads the keys (raw or .npy) from standard input to its end and writes the\n"
          "sorted keys to standard output (or --out FILE); --out - writes a file's sorted keys\n"
          "to standard output. Streams are sorted in memory (--local) or in a shared buffer of\n"
          "the daemon (within its pinned_pool_bytes); the summary then goes to standard error.\n"
          "Records: with --record-bytes R (or a structured .npy FILE) FILE holds records of R\n"
          "bytes, sorted whole and stably by the keys --key names (repeat it: the first is the\n"
          "primary key), each in its own order: --key 0:10:bytes is the sort benchmark's key,\n"
          "--key 16:8:f64:desc a double at byte 16, descending. A structured .npy file sorts by\n"
          "its fields as np.sort(a, order=...) does: --order a,b (then the other fields), or\n"
          "all fields in order; --key NAME[:desc] names a field. --argsort-out writes\n"
          "np.argsort(a, order=..., kind=\"stable\").\n",
      .options = {
          {"dtype", "T", "key type: u32 i32 u64 i64 f32 f64 (a .npy file's\n"
                         "header says it)"},
          {"out", "FILE", "sorted keys file (default: sort FILE in place; - : standard\n"
                          "output)"},
          {"descending", "", "sort in descending order"},
          {"stable", "", "equal keys keep their input order"},
          {"float-order", "ORDER", "total (IEEE 754 totalOrder) or numpy (NaNs last,\n"
                                   "-0.0 == +0.0); default numpy for .npy files,\n"
                                   "else total"},
          {"argsort-out", "FILE", "write the stable sorting permutation here (.npy\n"
                                  "when FILE ends in .npy) and leave FILE unsorted"},
          {"index-type", "i64|u32", "index type for --argsort-out (default i64; u32\n"
                                    "for fewer than 2^32 keys)"},
          {"values", "FILE", "values file sorted along with the keys"},
          {"value-bytes", "4|8", "bytes per value (default 8, or the .npy header's)"},
          {"values-out", "FILE", "sorted values file; with --values, --out and --values-out\n"
                                 "go together (neither: both in place)"},
          {"socket", "PATH", "the daemon's socket (default: $GPUSORT_SOCKET, else the\n"
                             "configuration's `socket`, /run/gpusort/gpusort.sock)"},
          {"local", "", "sort in this process with the embedded engine, not the daemon"},
          {"config", "FILE", "configuration, YAML (default: $GPUSORT_CONFIG, else built-in\n"
                             "defaults): the engine's with --local, else the socket path"},
          {"host-memory-budget", "SIZE", "host memory the sort may use beyond its arrays\n"
                                         "(--local; k/M/G/Ki/Mi/Gi; default: the\n"
                                         "configuration's host_memory_budget)"},
          {"json", "", "print one JSON object instead of the summary: elements, bytes,\n"
                       "seconds (the sort's), wall_seconds (this command's, from its\n"
                       "start to the published output), peak_rss_bytes (this command's\n"
                       "peak memory), rate (bytes/s), engine, devices, chunks, rounds,\n"
                       "compensated_chunks, path (how it ran: lean, two rounds, resident,\n"
                       "direct, in core), host_memory_limit and host_memory_bytes (the\n"
                       "budget and what its path takes beyond the arrays, as planned); a\n"
                       "job that compressed its round-1 runs (--local) adds\n"
                       "round1_key_bytes and round1_stored_bytes, one that took the\n"
                       "scattered rounds scatter_buckets and equal_buckets"},
          {"quiet", "", "no progress bar, no summary, only warnings and errors (also -q)"},
          {"no-sync", "", "publish the output without waiting for it to reach the disk\n"
                          "(no fsync: for scratch files a crash may lose)"},
          {"profile", "", "say on stderr where the time went: each step from the\n"
                          "command's start, and the engine's stages (the daemon's too)\n"
                          "(with --json: also as \"timeline\" and \"stages\")"},
          {"record-bytes", "R", record_bytes_help},
          {"key", "SPEC", key_help, true},
          {"order", "FIELDS", "a structured .npy file's fields to sort by first, comma-\n"
                              "separated (NumPy's order=): the others follow"},
          {"help", "", "show this text"},
      }};
  return spec;
}

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

/// Bytes per index of --argsort-out: 8 (i64, NumPy's intp) unless --index-type u32.
std::uint32_t index_bytes_option(const parsed_args& a)
{
  const std::string text = a.get("index-type").value_or("i64");
  if (text == "i64") return 8;
  if (text == "u32") return 4;
  throw cli_error{exit_usage, "--index-type must be i64 or u32, not '" + text + "'"};
}

/// What an output starts with: a .npy input's header byte for byte (the same type and shape:
/// sorting changes neither); a new header when a raw input goes to a name ending in .npy, so
/// that an output named .npy is always one; else nothing.
std::string output_header(const array_layout& in, const std::string& out_path,
                          std::string_view descr, std::uint64_t count)
{
  if (in.npy) return in.header;
  if (has_npy_name(out_path)) return make_npy_header(descr, count);
  return {};
}

void set_log_level(log_level level, bool quiet)
{
  detail::set_program_log_level(quiet && level < log_level::warn ? log_level::warn : level);
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
  /// A step that ended at `at` (seconds from the start) on another thread, in its place in time.
  void mark_at(std::string what, double at)
  {
    if (!on_) return;
    const auto later = std::upper_bound(marks_.begin(), marks_.end(), at,
                                        [](double t, const auto& m) { return t < m.second; });
    marks_.emplace(later, std::move(what), at);
  }
  void set_stages(std::vector<stage_profile> stages) { stages_ = std::move(stages); }

  /// The fields --json adds: "timeline" (steps) and "stages" (the engine's).
  void add_json_fields(nlohmann::ordered_json& out) const
  {
    if (!on_) return;
    nlohmann::ordered_json steps = nlohmann::ordered_json::array();
    for (const auto& [what, at] : marks_) steps.push_back({{"step", what}, {"at", at}});
    nlohmann::ordered_json stages = nlohmann::ordered_json::array();
    for (const stage_profile& p : stages_)
      stages.push_back({{"device", p.device},
                        {"round", p.round},
                        {"stage", p.stage},
                        {"chunks", p.chunks},
                        {"bytes", p.bytes},
                        {"busy_seconds", p.busy_seconds},
                        {"first_start", p.first_start},
                        {"last_end", p.last_end}});
    out["timeline"] = std::move(steps);
    out["stages"] = std::move(stages);
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

/// Closes a local engine on a thread of its own once its sort is done, so that the outputs are
/// synced and published while its buffers are unpinned and unmapped: that took 0.54 s after
/// "sorted" out of core (the 8 GiB round-1 buffer) and 0.16-0.43 s fitting, before the outputs'
/// sync began (H100 host, 8 GiB, bench/results/h100-20261126-cc0a8fe-e2e-8Gi.json). On a disk the
/// fsync now runs beside it. The command still waits for it before its report and its exit: an
/// exit with the engine open would pay the same unmapping, with the CUDA runtime's teardown racing
/// the engine's. Leaving the closing thread to a std::_Exit (no static destructors) was tried: the
/// kernel's teardown of the same memory and context then ran inside the exit, so the command's
/// own clock said 1.70 s where its parent waited 1.97-2.07 s, against 1.86-2.02 s waiting here
/// (8 GiB fitting, H100 host, bench/results/h100-20261126-8375375-e2e-8Gi.json); not kept.
class engine_closer {
 public:
  void close(engine&& e)
  {
    try {
      thread_ = std::jthread{[this, eng = std::move(e)]() mutable {
        { const engine gone = std::move(eng); }
        closed_at_ = seconds_since_start();
      }};
    } catch (const std::system_error&) {  // no thread: the engine went with the lambda, here
      closed_at_ = seconds_since_start();
    }
  }
  /// Once the engine is closed: when that was, on `timeline`.
  void wait(sort_timeline& timeline)
  {
    if (thread_.joinable()) thread_.join();
    if (closed_at_ > 0)
      timeline.mark_at("engine closed (its buffers freed, beside the outputs' sync)", closed_at_);
    closed_at_ = 0;
  }

 private:
  std::jthread thread_;  // joins on the way out of a failed command too
  double closed_at_{};
};

/// The configuration of the one engine a --local command runs one job on: round1_buffer
/// `auto` becomes `by-job`. Pinned, the round-1 buffer's pages are made and registered before
/// round 1 (8 GiB: 0.53-0.59 s on the H200 host) and unregistered at the end (0.19-0.20 s),
/// which a one-shot job repays only where its chunks are small; the measurements behind the
/// bound are at round1_pin_below_chunk_bytes (pipeline/host_memory.hpp).
config one_shot(config cfg)
{
  if (cfg.round1_buffer == round1_memory::automatic) cfg.round1_buffer = round1_memory::by_job;
  return cfg;
}

/// The engine's exceptions as the command's exit codes, around `body`.
template <typename Body>
decltype(auto) mapping_engine_errors(Body&& body)
{
  try {
    return body();
  } catch (const cli_error&) {
    throw;
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

/// Runs `work` (a sort or an argsort on the engine it is given), mapping the engine's
/// exceptions to exit codes. With a `closer`, the engine is closed there, after a successful
/// sort, instead of before this returns. `premade`: an engine the command started already (to
/// ask it what a job needs), used and taken instead of a new one.
template <typename Work>
sort_report run_engine(const config& cfg, sort_timeline& timeline, Work&& work,
                       engine_closer* closer = nullptr, std::optional<engine>* premade = nullptr)
{
  return mapping_engine_errors([&] {
    sort_report report;
    {
      engine eng = premade != nullptr && premade->has_value() ? std::move(**premade)
                                                              : engine{one_shot(cfg)};
      if (premade != nullptr) premade->reset();
      timeline.mark("engine started (devices opened)");
      report = work(eng);
      timeline.mark("sorted");
      if (closer != nullptr) {
        closer->close(std::move(eng));
        timeline.set_stages(report.profile);
        return report;
      }
    }
    timeline.mark("engine closed (its buffers freed)");
    timeline.set_stages(report.profile);
    return report;
  });
}

/// Outputs that will be fsync'ed start going to their disk while the sort writes them.
void write_back_meanwhile(const parsed_args& a, const std::vector<atomic_output*>& outputs)
{
  if (a.has("no-sync")) return;
  for (atomic_output* out : outputs) out->write_back_meanwhile();
}

/// How a sort finished, for its report: the daemon's own numbers, or the local engine's in the
/// same shape.
enum class sorted_by : std::uint8_t { daemon, local };

/// The report of a finished sort on `to`: JSON with --json, else one line unless --quiet; only
/// the daemon's report has a queue time.
void print_sort_report(std::FILE* to, const sort_report& r, sorted_by by,
                       const parsed_args& a, const sort_timeline& timeline, bool records = false)
{
  const double wall_seconds = seconds_since_start();
  timeline.print(stderr);
  const bool daemon = by == sorted_by::daemon;
  if (a.has("json")) {
    nlohmann::ordered_json out{{"elements", r.elements},
                       {"bytes", r.bytes},
                       {"seconds", r.seconds},
                       {"wall_seconds", wall_seconds},
                       {"peak_rss_bytes", peak_rss_bytes()},
                       {"rate", r.rate_bytes_per_second()},
                       {"engine", r.engine},
                       {"devices", r.devices},
                       {"chunks", r.chunks},
                       {"rounds", r.rounds},
                       {"compensated_chunks", r.compensated_chunks},
                       {"path", r.path},
                       {"host_memory_limit", r.host_memory_limit},
                       {"host_memory_bytes", r.host_memory_bytes}};
    if (daemon) out["queue_seconds"] = r.queue_seconds;
    // What compress_runs saved of the round-1 buffer's keys (embedded jobs: the daemon's
    // report does not carry it).
    if (r.round1_key_bytes > 0) {
      out["round1_key_bytes"] = r.round1_key_bytes;
      out["round1_stored_bytes"] = r.round1_stored_bytes;
    }
    // A job that took the scattered rounds (embedded): its buckets, and those of one key.
    if (r.scatter_buckets > 0) {
      out["scatter_buckets"] = r.scatter_buckets;
      out["equal_buckets"] = r.equal_buckets;
    }
    timeline.add_json_fields(out);
    print_json(to, out);
  } else if (!a.has("quiet")) {
    std::string devices;
    for (const std::string& d : r.devices) devices += (devices.empty() ? "" : ",") + d;
    // Binary units throughout, as format_bytes gives the size (not MiB beside GB/s).
    fmt::print(to,
               "sorted {} ({}) in {:.3f} s ({:.3f} s in all): {:.3f} GiB/s, engine {} on {}, "
               "{}, {}{}\n",
               plural(r.elements, records ? "record" : "element"), format_bytes(r.bytes),
               r.seconds, wall_seconds,
               r.rate_bytes_per_second() / gibibyte, r.engine, devices, plural(r.chunks, "chunk"),
               plural(static_cast<std::uint64_t>(r.rounds), "round"),
               daemon ? " (daemon)" : "");
  }
  std::fflush(to);
}

/// The end of both sort paths: the outputs made durable, then renamed into place (none before
/// all are durable), then the report.
int finish_sort(progress_bar& bar, const std::vector<atomic_output*>& outputs,
                const sort_report& r, sorted_by by, const parsed_args& a,
                sort_timeline& timeline, engine_closer* closer = nullptr, bool records = false)
{
  bar.finish();
  const bool durable = !a.has("no-sync");
  for (atomic_output* out : outputs) out->sync(durable);
  timeline.mark(durable ? "outputs synced" : "outputs not synced (--no-sync)");
  publish_all(outputs);
  timeline.mark("outputs published");
  if (closer != nullptr) closer->wait(timeline);
  print_sort_report(stdout, r, by, a, timeline, records);
  return exit_ok;
}

/// `gpusort sort -` and `--out -`: keys from standard input (or the file), read to the end (a
/// pipe has no size to plan with), sorted in memory (--local) or in a shared buffer of the
/// daemon, then written to standard output or to --out FILE. With the data on standard output
/// the report goes to standard error, so that the stream carries the keys alone. A .npy stream
/// keeps its header in front of the sorted data, as a .npy file does. Big-endian .npy keys take
/// this way too, from a file to `out` (the file itself, in place): the engine and the daemon
/// compare the host's numbers, so they are byte-swapped here on the way in and out.
int sort_in_memory(const parsed_args& a, const std::optional<dtype>& type_option,
                   const fs::path& input_path, const std::optional<std::string>& out)
{
  if (a.has("values") || a.has("values-out") || a.has("value-bytes"))
    throw cli_error{exit_usage, "a stream carries keys alone: --values needs files (and no -)"};
  if (a.has("argsort-out"))
    throw cli_error{exit_usage, "--argsort-out needs the keys in a file, not a stream (-)"};
  const bool to_stdout = !out || *out == "-";
  const order direction = a.has("descending") ? order::descending : order::ascending;
  const sorted_by by = a.has("local") ? sorted_by::local : sorted_by::daemon;
  sort_timeline timeline{a.has("profile")};
  const bool from_stdin = input_path == "-";
  std::optional<input_file> file_in;
  if (!from_stdin) file_in.emplace(input_path);
  const std::string shown = from_stdin ? std::string{"standard input"} : input_path.string();
  const stream_input in{from_stdin ? STDIN_FILENO : file_in->fd(), shown};
  const array_layout layout = layout_of(shown, in.data(), in.size());
  const auto [t, n, swapped] = keys_of(layout, {type_option}, shown);
  const float_order floats =
      float_order_option(a).value_or(layout.npy ? float_order::numpy : float_order::total);
  char* const data = in.data() + layout.offset();
  if (swapped) swap_bytes(data, n, size_of(t));
  timeline.mark("input read");
  const std::string header =
      output_header(layout, to_stdout ? std::string{} : *out, npy_descr_of(t), n);
  std::optional<atomic_output> file_out;
  if (!to_stdout) {
    file_out.emplace(*out, header.size() + layout.bytes);
    write_all_at(file_out->fd(), header.data(), header.size(), 0, file_out->shown());
  }

  sort_report report;
  char* sorted = data;
  std::optional<client::connection> conn;
  std::optional<client::shared_buffer> shared;
  if (by == sorted_by::local) {
    const config cfg = load_cli_config(a);
    set_log_level(cfg.level, a.has("quiet") || a.has("json"));
    const sort_options options{.direction = direction,
                               .stable = a.has("stable"),
                               .floats = floats,
                               .profile = timeline.on()};
    // The job is made out here: clang 14 cannot capture structured bindings (C++20 P1091).
    const sort_job job{.keys = {data, n, t}};
    report = run_engine(cfg, timeline, [&](engine& eng) { return eng.sort(job, options); });
  } else {
    conn.emplace(connect_daemon(socket_option(a), "start gpusortd or sort with --local"));
    try {
      shared.emplace(conn->allocate_bytes(std::max<std::uint64_t>(layout.bytes, 1)));
      std::memcpy(shared->data(), data, layout.bytes);
      timeline.mark("copied into a shared buffer of the daemon");
      report = conn->sort(client::sort_request{.type = t,
                                               .count = n,
                                               .direction = direction,
                                               .keys = client::array_ref::in(*shared),
                                               .stable = a.has("stable"),
                                               .floats = floats});
    } catch (const client::error& e) {
      throw cli_error{exit_of(e.code()), std::string{"sort failed: "} + e.what()};
    }
    sorted = reinterpret_cast<char*>(shared->data());
    timeline.mark("sorted by the daemon");
  }
  if (swapped) swap_bytes(sorted, n, size_of(t));
  if (to_stdout) {
    write_all(STDOUT_FILENO, header.data(), header.size(), "standard output");
    write_all(STDOUT_FILENO, sorted, layout.bytes, "standard output");
    timeline.mark("written to standard output");
    print_sort_report(stderr, report, by, a, timeline);
    return exit_ok;
  }
  write_all_at(file_out->fd(), sorted, layout.bytes, header.size(), file_out->shown());
  progress_bar no_bar{false, stderr};
  return finish_sort(no_bar, {&*file_out}, report, by, a, timeline);
}

/// An input file and where its array lies in it.
struct input_array {
  explicit input_array(const fs::path& path) : file{path}, layout{layout_of(file)} {}
  input_file file;
  array_layout layout;
};

/// An output whose header (a .npy header, or none) is written: the sorted data goes at offset.
struct output_file {
  output_file(const fs::path& path, const std::string& header, std::uint64_t bytes)
      : file{path, header.size() + bytes}, offset{header.size()}, data_bytes{bytes}
  {
    write_all_at(file.fd(), header.data(), header.size(), 0, file.shown());
  }
  atomic_output file;
  std::uint64_t offset;
  std::uint64_t data_bytes;
};

/// A sort of files with its inputs open and its outputs created: what both ways of sorting
/// need.
struct file_sort {
  dtype type{};
  std::uint64_t count{};
  order direction{};
  bool stable{};
  float_order floats{};
  const input_array* keys{};
  const input_array* values{};  ///< null: keys only
  std::uint32_t value_bytes{};
  output_file* keys_out{};  ///< null: an argsort without --out
  output_file* values_out{};
  output_file* indices_out{};  ///< set: an argsort
  std::uint32_t index_bytes{8};
};

/// `gpusort sort --local`: the embedded engine reads the inputs with positioned reads (nothing
/// mapped: a file truncated meanwhile is an error, not a SIGBUS) and writes the temporaries the
/// same way, or, in tmpfs, through mappings whose pages it makes ahead
/// (pipeline/file_window.hpp). Only the data regions are given to it: a .npy header is never
/// part of an array.
sort_report sort_files_locally(const config& cfg, const file_sort& job, progress_bar& bar,
                               sort_timeline& timeline, engine_closer& closer,
                               std::optional<engine>& premade)
{
  sort_options options{.direction = job.direction,
                       .stable = job.stable,
                       .floats = job.floats,
                       .profile = timeline.on()};
  if (bar.enabled()) options.on_progress = [&bar](const progress_event& e) { bar.update(e); };
  std::vector<file_array> files;
  files.reserve(4);  // data() must stay valid: at most keys, values and two outputs
  const auto in = [&](const input_array& f) {
    return files.emplace_back(f.file.fd(), f.layout.offset(), f.layout.bytes,
                              f.file.path().string())
        .data();
  };
  const auto out = [&](const output_file* f) -> void* {
    if (f == nullptr) return nullptr;
    file_array& a = files.emplace_back(f->file.fd(), f->offset, f->data_bytes, f->file.shown());
    // The pages of a new tmpfs output take longer to make than the sort: start them before the
    // engine (CUDA, 0.12 s) starts. GPUSORT_PREPARE_OUTPUT=0 leaves them to the job, the A/B of
    // e2e_bench's cli_late_pages path (8 GiB, H100 host, medians of 3): started here, 2.10 s
    // against 2.41 out of core and 1.67 against 2.32 fitting in one run (15f0ad2); in two later
    // runs the order flipped within the spread of single runs (2.15 / 2.27 and 2.67 / 2.25 out
    // of core, 2.10 / 1.87 and 2.87 / 2.65 fitting; 82d5f7f, 5df71ab), as the page maker's own
    // time moved from 0.9 to 1.8 s. Kept: it cannot start the floor later.
    static const bool early = detail::switch_flag("GPUSORT_PREPARE_OUTPUT", true);
    if (early) a.prepare_output();
    return a.data();
  };
  const key_array keys{in(*job.keys), job.count, job.type};
  if (job.indices_out != nullptr) {
    const argsort_job argsort{.keys = keys,
                              .indices_out = out(job.indices_out),
                              .index_bytes = job.index_bytes,
                              .keys_out = out(job.keys_out)};
    return run_engine(
        cfg, timeline, [&](engine& eng) { return eng.argsort(argsort, options); }, &closer,
        &premade);
  }
  sort_job sort{.keys = keys, .keys_out = out(job.keys_out)};
  if (job.values != nullptr) {
    sort.values = value_array{in(*job.values), job.count, job.value_bytes};
    sort.values_out = out(job.values_out);
  }
  return run_engine(
      cfg, timeline, [&](engine& eng) { return eng.sort(sort, options); }, &closer, &premade);
}

/// `gpusort sort FILE --local` in place, where the temporary the sort would write (memory in
/// tmpfs) and the engine's fast path together need more than the host memory budget: FILE is
/// sorted where it lies on the lean path, its journal beside it. nullopt, and `premade` holds
/// the engine it started, where the budget has room for the usual way.
std::optional<sort_report> sort_in_place_lean(const config& cfg, const file_sort& job,
                                              const fs::path& keys_path,
                                              const std::optional<fs::path>& values_path,
                                              progress_bar& bar, sort_timeline& timeline,
                                              std::optional<engine>& premade)
{
  const std::uint64_t limit = cfg.host_memory_budget.value_or(0);
  sort_options options{.direction = job.direction,
                       .stable = job.stable,
                       .floats = job.floats,
                       .profile = timeline.on(),
                       .host_memory_limit = limit};
  if (bar.enabled()) options.on_progress = [&bar](const progress_event& e) { bar.update(e); };
  const writable_file keys_file{keys_path};
  std::optional<writable_file> values_file;
  if (values_path) values_file.emplace(*values_path);
  const file_array keys{keys_file.fd(), job.keys->layout.offset(), job.keys->layout.bytes,
                        keys_path.string()};
  std::optional<file_array> values;
  if (job.values != nullptr)
    values.emplace(values_file->fd(), job.values->layout.offset(), job.values->layout.bytes,
                   values_path->string());
  sort_job sort{.keys = {keys.data(), job.count, job.type}};
  if (values) sort.values = value_array{values->data(), job.count, job.value_bytes};
  const std::uint64_t temporary =
      in_memory_file_system(keys_path)
          ? job.keys->layout.bytes + (job.values != nullptr ? job.values->layout.bytes : 0)
          : 0;
  const bool lean = mapping_engine_errors([&] {
    premade.emplace(one_shot(cfg));
    timeline.mark("engine started (devices opened)");
    const memory_estimate e = premade->estimate_memory(sort, options);
    // A fast path the devices' budget cannot plan fails with that budget's own error; lean
    // would not mend it.
    if (e.fast_bytes == std::numeric_limits<std::uint64_t>::max()) return false;
    return temporary > limit || e.fast_bytes > limit - temporary ||
           detail::switch_flag("GPUSORT_LEAN", false);
  });
  if (!lean) return std::nullopt;
  std::optional<lean_journal> journal{std::in_place, keys_path};
  sort.journal_fd = journal->fd();
  timeline.mark("journal created");
  sort_report report;
  try {
    report = mapping_engine_errors([&] {
      engine eng = std::move(*premade);
      premade.reset();
      sort_report r = eng.sort(sort, options);
      timeline.mark("sorted");
      return r;
    });
  } catch (...) {
    // The engine put every element back unless it could not; where this cannot either, the
    // journal stays for gpusort recover.
    if (journal->restore(keys_file.fd(), values_file ? values_file->fd() : -1)) journal.reset();
    throw;
  }
  journal.reset();  // the files hold the sorted arrays: the journal goes
  timeline.set_stages(report.profile);
  return report;
}

/// `gpusort sort` through the daemon: the files were opened here and their descriptors go to
/// it with the offsets of their data; it writes the sorted data into the temporaries, which are
/// renamed over the outputs only when complete, as with --local.
sort_report sort_files_with_daemon(client::connection& conn, const file_sort& job,
                                   progress_bar& bar, bool profile)
{
  const auto at = [](const output_file& f) {
    return client::array_ref::of_fd(f.file.fd(), f.offset);
  };
  client::sort_request request{
      .type = job.type,
      .count = job.count,
      .direction = job.direction,
      .keys = client::array_ref::of_fd(job.keys->file.fd(), job.keys->layout.offset()),
      .stable = job.stable,
      .floats = job.floats,
      .profile = profile};
  if (job.keys_out != nullptr) request.keys_out = at(*job.keys_out);
  if (job.values != nullptr) {
    request.value_bytes = job.value_bytes;
    request.values = client::array_ref::of_fd(job.values->file.fd(), job.values->layout.offset());
    request.values_out = at(*job.values_out);
  }
  if (job.indices_out != nullptr) {
    request.indices_out = at(*job.indices_out);
    request.index_bytes = job.index_bytes;
  }
  progress_callback on_progress;
  if (bar.enabled())
    on_progress = [&bar](const progress_event& p) {
      bar.update(progress_event{p.round, p.bytes_done, p.bytes_total, p.rounds});
    };
  try {
    return conn.sort(request, on_progress);
  } catch (const client::error& e) {
    throw cli_error{exit_of(e.code()), std::string{"sort failed: "} + e.what()};
  }
}

/// `gpusort sort FILE` in place through the daemon, where the temporary the sort would write
/// (memory in tmpfs) and the daemon's round-1 buffer (about the data's size) together exceed
/// its host_memory_budget (or GPUSORT_LEAN=1): the daemon sorts the files where they lie on
/// the lean path, the journal (made here: the daemon opens no path) beside them. nullopt where
/// the usual way fits.
std::optional<sort_report> sort_in_place_with_daemon(client::connection& conn,
                                                     const file_sort& job,
                                                     const fs::path& keys_path,
                                                     const std::optional<fs::path>& values_path,
                                                     progress_bar& bar, bool profile)
{
  const std::uint64_t data =
      job.keys->layout.bytes + (job.values != nullptr ? job.values->layout.bytes : 0);
  const std::uint64_t temporary = in_memory_file_system(keys_path) ? data : 0;
  const std::uint64_t budget = [&] {
    try {
      return conn.status().host_memory_budget;
    } catch (const client::error& e) {
      throw cli_error{exit_of(e.code()), std::string{"cannot ask the daemon: "} + e.what()};
    }
  }();
  if (temporary + data <= budget && !detail::switch_flag("GPUSORT_LEAN", false))
    return std::nullopt;
  const writable_file keys_file{keys_path};
  std::optional<writable_file> values_file;
  if (values_path) values_file.emplace(*values_path);
  std::optional<lean_journal> journal{std::in_place, keys_path};
  client::sort_request request{
      .type = job.type,
      .count = job.count,
      .direction = job.direction,
      .keys = client::array_ref::of_fd(keys_file.fd(), job.keys->layout.offset()),
      .stable = job.stable,
      .floats = job.floats,
      .profile = profile,
      .journal = client::array_ref::of_fd(journal->fd())};
  if (job.values != nullptr) {
    request.value_bytes = job.value_bytes;
    request.values = client::array_ref::of_fd(values_file->fd(), job.values->layout.offset());
  }
  progress_callback on_progress;
  if (bar.enabled())
    on_progress = [&bar](const progress_event& p) {
      bar.update(progress_event{p.round, p.bytes_done, p.bytes_total, p.rounds});
    };
  try {
    sort_report r = conn.sort(request, on_progress);
    journal.reset();
    return r;
  } catch (const client::error& e) {
    // The daemon restored the files unless it died: then the journal says where everything is.
    if (journal->restore(keys_file.fd(), values_file ? values_file->fd() : -1)) journal.reset();
    throw cli_error{exit_of(e.code()), std::string{"sort failed: "} + e.what()};
  }
}

/// Renaming over a file needs only the folder's permission, but a read-only file must stay so:
/// an in-place sort needs files this user may write.
void check_writable_in_place(const std::string& path)
{
  if (::access(path.c_str(), W_OK) == 0) return;
  const int err = errno;
  throw cli_error{denied_or(err, exit_no_input),
                  "cannot sort " + path + " in place: " + std::strerror(err)};
}

/// `gpusort sort` of records (--record-bytes and --key, or a structured .npy file): sorted
/// whole into a temporary renamed over the output (FILE itself in place), or their permutation
/// written to --argsort-out. --local maps FILE read-only and gathers the records into the
/// mapped temporary (pipeline/rows/); the daemon reads FILE into its memory and writes the
/// temporary through the descriptors.
int sort_records_files(const parsed_args& a, const fs::path& input_path, const input_array& in,
                       const std::optional<config>& cfg, const std::string& socket)
{
  for (const char* keys_only : {"dtype", "descending", "values", "values-out", "value-bytes"})
    if (a.has(keys_only))
      throw cli_error{exit_usage, fmt::format("--{} is for keys; records take --key (each "
                                              "with its order) and move whole",
                                              keys_only)};
  const std::string shown = input_path.string();
  const records_layout r = records_layout_of(a, in.layout, shown);
  check_bool_keys(input_path, in.layout.offset(), r, shown);
  const float_order floats =
      float_order_option(a).value_or(in.layout.npy ? float_order::numpy : float_order::total);
  const std::optional<std::string> argsort_path = a.get("argsort-out");
  const std::uint32_t index_bytes = index_bytes_option(a);
  if (argsort_path && index_bytes == 4 && r.count > std::numeric_limits<std::uint32_t>::max())
    throw cli_error{exit_usage, "--index-type u32 holds fewer than 2^32 indices: use i64"};
  const std::optional<fs::path> out_path =
      a.has("out") ? std::optional<fs::path>{*a.get("out")}
                   : (argsort_path ? std::nullopt : std::optional<fs::path>{input_path});
  if (!a.has("out") && !argsort_path) check_writable_in_place(shown);
  sort_timeline timeline{a.has("profile")};
  timeline.mark("inputs opened");
  std::optional<output_file> records_out, indices_out;
  if (out_path) {
    const std::string header = in.layout.npy ? in.layout.header : std::string{};
    records_out.emplace(*out_path, header, in.layout.bytes);
  }
  if (argsort_path)
    indices_out.emplace(*argsort_path,
                        has_npy_name(*argsort_path)
                            ? make_npy_header(index_bytes == 8 ? "<i8" : "<u4", r.count)
                            : std::string{},
                        r.count * index_bytes);
  std::vector<atomic_output*> outputs;
  for (std::optional<output_file>* o : {&records_out, &indices_out})
    if (*o) outputs.push_back(&(*o)->file);
  write_back_meanwhile(a, outputs);
  timeline.mark("outputs created");
  const bool json = a.has("json");
  progress_bar bar{!a.has("quiet") && !json && ::isatty(STDERR_FILENO) == 1, stderr};
  sort_report report;
  engine_closer closer;
  const bool local = cfg.has_value();
  if (local) {
    const mapped_input mapped{input_path};
    const auto* records = static_cast<const std::byte*>(mapped.data()) + in.layout.offset();
    const auto data_of = [](output_file& o) {
      return static_cast<std::byte*>(o.file.map()) + o.offset;
    };
    sort_options options{.floats = floats, .profile = timeline.on()};
    if (bar.enabled())
      options.on_progress = [&bar](const progress_event& p) { bar.update(p); };
    report = run_engine(
        *cfg, timeline,
        [&](engine& eng) {
          const record_array rows{records, r.count, r.record_bytes};
          if (indices_out)
            return argsort_rows(eng, record_keys(rows, r.keys), data_of(*indices_out),
                                index_bytes, options);
          return sort_records(eng, rows, r.keys, data_of(*records_out), options);
        },
        &closer);
  } else {
    client::connection conn = connect_daemon(socket, "start gpusortd or sort with --local");
    timeline.mark("connected to the daemon");
    const auto at = [](const output_file& f) {
      return client::array_ref::of_fd(f.file.fd(), f.offset);
    };
    client::sort_request request{.count = r.count,
                                 .keys = client::array_ref::of_fd(in.file.fd(),
                                                                  in.layout.offset()),
                                 .floats = floats,
                                 .profile = timeline.on(),
                                 .record_bytes = r.record_bytes,
                                 .key_fields = r.keys};
    if (indices_out) {
      request.indices_out = at(*indices_out);
      request.index_bytes = index_bytes;
    } else {
      request.keys_out = at(*records_out);
    }
    progress_callback on_progress;
    if (bar.enabled())
      on_progress = [&bar](const progress_event& p) { bar.update(p); };
    try {
      report = conn.sort(request, on_progress);
    } catch (const client::error& e) {
      throw cli_error{exit_of(e.code()), std::string{"sort failed: "} + e.what()};
    }
    timeline.mark(fmt::format("sorted by the daemon (its sort {:.3f} s, queued {:.3f} s)",
                              report.seconds, report.queue_seconds));
  }
  // With --argsort-out alone the records are only read; with --out too they are written.
  if (indices_out && records_out) {
    const mapped_input mapped{input_path};
    const auto* records = static_cast<const unsigned char*>(mapped.data()) + in.layout.offset();
    auto* to = static_cast<unsigned char*>(records_out->file.map()) + records_out->offset;
    const void* idx = static_cast<const std::byte*>(indices_out->file.map()) +
                      indices_out->offset;
    if (index_bytes == 4)
      detail::gather_records(records, r.count, r.record_bytes,
                             static_cast<const std::uint32_t*>(idx), to);
    else
      detail::gather_records(records, r.count, r.record_bytes,
                             static_cast<const std::uint64_t*>(idx), to);
    timeline.mark("records gathered by the permutation");
  }
  return finish_sort(bar, outputs, report, local ? sorted_by::local : sorted_by::daemon, a,
                     timeline, &closer, true);
}

}  // namespace

int run_sort(const std::vector<std::string>& args)
{
  const std::optional<parsed_args> parsed = parse_or_help(args, sort_spec());
  if (!parsed) return exit_ok;
  const parsed_args& a = *parsed;
  const fs::path input_path = one_file(a, "sort", "the file to sort");
  const std::optional<dtype> type_option = optional_dtype_option(a);
  if (a.has("local") && a.has("socket"))
    throw cli_error{exit_usage, "--local sorts in this process; --socket names a daemon: not both"};
  (void)float_order_option(a);  // a wrong value is a usage error before any file is opened
  const std::optional<std::string> argsort_path = a.get("argsort-out");
  if (!argsort_path && a.has("index-type"))
    throw cli_error{exit_usage, "--index-type needs --argsort-out"};
  const std::uint32_t index_bytes = index_bytes_option(a);
  if ((input_path == "-" || a.get("out") == "-") &&
      (a.has("record-bytes") || a.has("key") || a.has("order")))
    throw cli_error{exit_usage, "records sort files, not streams (-)"};
  if (input_path == "-" || a.get("out") == "-")
    return sort_in_memory(a, type_option, input_path, a.get("out"));
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
  const std::optional<std::uint32_t> value_bytes_given = optional_value_bytes_option(a);
  if (argsort_path) {
    if (values_path)
      throw cli_error{exit_usage, "--argsort-out takes keys alone, not --values (the "
                                  "permutation it writes orders any number of value arrays)"};
    if (*argsort_path == "-")
      throw cli_error{exit_usage, "--argsort-out needs a file, not standard output (-)"};
    if (same_file(*argsort_path, input_path))
      throw cli_error{exit_usage, "--argsort-out names the keys file, which an argsort only "
                                  "reads"};
    if (a.has("out") && same_file(*argsort_path, *a.get("out")))
      throw cli_error{exit_usage, "--out and --argsort-out name the same file"};
  }
  // An argsort writes the keys only to --out; a sort writes them in place without it.
  const bool in_place = !a.has("out") && !argsort_path;
  const std::optional<fs::path> keys_out_path =
      a.has("out") ? std::optional<fs::path>{*a.get("out")}
                   : (argsort_path ? std::nullopt : std::optional<fs::path>{input_path});
  const std::optional<fs::path> values_out_path =
      values_path ? std::optional<fs::path>{a.get("values-out").value_or(*values_path)}
                  : std::nullopt;
  if (values_path && same_file(*keys_out_path, *values_out_path))
    throw cli_error{exit_usage, in_place ? "the keys and values are the same file"
                                         : "--out and --values-out name the same file"};
  const bool json = a.has("json");
  const bool quiet = a.has("quiet");
  const bool local = a.has("local");
  if (a.has("host-memory-budget") && !local)
    throw cli_error{exit_usage, "--host-memory-budget is the local engine's (--local); the "
                                "daemon has its own host_memory_budget"};
  std::optional<config> cfg;
  std::string socket;
  if (local) {
    cfg.emplace(load_cli_config(a));
    set_log_level(cfg->level, quiet || json);
    if (const std::optional<std::string> budget = a.get("host-memory-budget")) {
      const std::optional<std::uint64_t> bytes = parse_bytes(*budget);
      if (!bytes || *bytes == 0)
        throw cli_error{exit_usage, "--host-memory-budget takes a size such as 4Gi, not '" +
                                        *budget + "'"};
      cfg->host_memory_budget = *bytes;
    }
    if (!cfg->host_memory_budget) cfg->host_memory_budget = detail::physical_memory_half();
  } else {
    socket = socket_option(a);
  }
  sort_timeline timeline{a.has("profile")};
  // A sort of FILE that was killed left a journal, and some of FILE's elements in it: back
  // into the files first, whatever this sort is.
  if (restore_interrupted(input_path,
                          values_path ? std::optional<fs::path>{*values_path} : std::nullopt,
                          quiet || json))
    timeline.mark("an interrupted sort's elements put back");

  const input_array keys{input_path};
  if (wants_records(a, keys.layout)) return sort_records_files(a, input_path, keys, cfg, socket);
  const key_layout k = keys_of(keys.layout, {type_option}, input_path.string());
  std::optional<input_array> values;
  std::uint32_t value_bytes = 0;
  if (values_path) {
    values.emplace(*values_path);
    value_bytes =
        values_of(values->layout, value_bytes_given, k.count, *values_path, input_path.string());
  }
  if (argsort_path && index_bytes == 4 && k.count > std::numeric_limits<std::uint32_t>::max())
    throw cli_error{exit_usage, fmt::format("--index-type u32 holds fewer than 2^32 indices and "
                                            "{} holds {} keys: use i64",
                                            input_path.string(), k.count)};
  if (in_place) {
    check_writable_in_place(input_path.string());
    if (values_path) check_writable_in_place(*values_path);
  }
  if (k.swapped) {
    // Issue 43: refused before, where the Python client's sort_file sorts them.
    if (values_path || argsort_path)
      throw cli_error{exit_data, fmt::format("{} holds big-endian keys ('{}'), which sort alone: "
                                             "--values and --argsort-out need little-endian "
                                             "keys (save a.astype('<{}'))",
                                             input_path.string(), keys.layout.npy->descr,
                                             keys.layout.npy->descr.substr(1))};
    return sort_in_memory(a, type_option, input_path, keys_out_path->string());
  }
  timeline.mark("inputs opened");
  const file_sort in_place_job{
      .type = k.type,
      .count = k.count,
      .direction = a.has("descending") ? order::descending : order::ascending,
      .stable = a.has("stable"),
      .floats = float_order_option(a).value_or(keys.layout.npy ? float_order::numpy
                                                               : float_order::total),
      .keys = &keys,
      .values = values ? &*values : nullptr,
      .value_bytes = value_bytes};
  progress_bar bar{!quiet && !json && ::isatty(STDERR_FILENO) == 1, stderr};
  std::optional<engine> premade;
  if (local && in_place && k.count >= 2) {
    if (std::optional<sort_report> r =
            sort_in_place_lean(*cfg, in_place_job, input_path,
                               values_path ? std::optional<fs::path>{*values_path} : std::nullopt,
                               bar, timeline, premade)) {
      bar.finish();
      const bool durable = !a.has("no-sync");
      writable_file{input_path}.sync(durable);
      if (values_path) writable_file{*values_path}.sync(durable);
      timeline.mark(durable ? "files synced" : "files not synced (--no-sync)");
      print_sort_report(stdout, *r, sorted_by::local, a, timeline);
      return exit_ok;
    }
  }
  std::optional<client::connection> conn;
  if (!local) {
    conn.emplace(connect_daemon(socket, "start gpusortd or sort with --local"));
    timeline.mark("connected to the daemon");
    if (in_place && k.count >= 2) {
      if (std::optional<sort_report> r = sort_in_place_with_daemon(
              *conn, in_place_job, input_path,
              values_path ? std::optional<fs::path>{*values_path} : std::nullopt, bar,
              timeline.on())) {
        timeline.mark(fmt::format("sorted in place by the daemon (its sort {:.3f} s)",
                                  r->seconds));
        timeline.set_stages(r->profile);
        bar.finish();
        const bool durable = !a.has("no-sync");
        writable_file{input_path}.sync(durable);
        if (values_path) writable_file{*values_path}.sync(durable);
        print_sort_report(stdout, *r, sorted_by::daemon, a, timeline);
        return exit_ok;
      }
    }
  }

  std::optional<output_file> keys_out, values_out, indices_out;
  if (keys_out_path)
    keys_out.emplace(*keys_out_path,
                     output_header(keys.layout, keys_out_path->string(), npy_descr_of(k.type),
                                   k.count),
                     keys.layout.bytes);
  if (values)
    values_out.emplace(*values_out_path,
                       output_header(values->layout, values_out_path->string(),
                                     value_descr(value_bytes), k.count),
                       values->layout.bytes);
  if (argsort_path)
    indices_out.emplace(*argsort_path,
                        has_npy_name(*argsort_path)
                            ? make_npy_header(index_bytes == 8 ? "<i8" : "<u4", k.count)
                            : std::string{},
                        k.count * index_bytes);
  std::vector<atomic_output*> outputs;
  for (std::optional<output_file>* o : {&keys_out, &values_out, &indices_out})
    if (*o) outputs.push_back(&(*o)->file);
  write_back_meanwhile(a, outputs);
  timeline.mark("outputs created");

  file_sort job = in_place_job;
  job.keys_out = keys_out ? &*keys_out : nullptr;
  job.values_out = values_out ? &*values_out : nullptr;
  job.indices_out = indices_out ? &*indices_out : nullptr;
  job.index_bytes = index_bytes;
  sort_report report;
  engine_closer closer;
  if (local) {
    report = sort_files_locally(*cfg, job, bar, timeline, closer, premade);
  } else {
    report = sort_files_with_daemon(*conn, job, bar, timeline.on());
    timeline.mark(fmt::format("sorted by the daemon (its sort {:.3f} s, queued {:.3f} s)",
                              report.seconds, report.queue_seconds));
    timeline.set_stages(report.profile);  // the daemon's engine's, as --local shows its own
  }
  return finish_sort(bar, outputs, report, local ? sorted_by::local : sorted_by::daemon, a,
                     timeline, &closer);
}

}  // namespace gpusort::cli
