// End-to-end benchmark (issue 18): what a user waits for, next to the engine on memory it
// pinned. For u64 uniform keys of --bytes, out of core (device budget 1/8 of the data, or
// --budget 1/K: a small budget's many chunks, issue 44) and fitting, in one run:
//   reference     engine.sort on host memory registered with the engine (the engine's speed)
//   pageable      engine.sort on plain memory (a std::vector-like anonymous buffer)
//   cli           `gpusort sort FILE --out FILE --local`, a file in --dir, process start to exit
//                 (cli_late_pages: its output pages started by the job, not before the engine)
//   daemon-fd     `gpusort sort FILE --out FILE` through a gpusortd started here (descriptors)
//   daemon-fd-inplace  the C++ client sorting a copy of the file in place through its
//                 descriptor (no new pages: the time is the job's, submit to its end)
//   daemon-shm    the C++ client sorting a shared buffer of that gpusortd in place (filled by
//                 the client beforehand: the time is the job's, submit to its end)
//   cpu           the CPU engine on the same keys in memory (--cpu-bytes, scaled linearly to
//                 --bytes when smaller: n log n makes the scaled figure a slight underestimate)
// plus a parallel memcpy of the data (host memory bandwidth bounds every path that copies).
// Wall seconds of the child processes include process start, engine start, reading the input
// and publishing the output (fsync included: tmpfs makes it free, a disk does not); peak RSS
// is what each command reports of itself (--json's peak_rss_bytes, VmHWM: a mapped tmpfs
// output counts there) and the daemon's VmHWM. Writes bench/results-style JSON with "e2e."
// targets.
//
// With --disk-dir, a file of --disk-bytes on that folder's disk: the CLI (caches dropped first)
// against the disk's own parallel read and fsync'ed write rates, measured in the same run.
//
//   e2e_bench --bin DIR [--dir /dev/shm] [--bytes 8Gi] [--cpu-bytes 1Gi] [--json FILE]
//             [--disk-dir DIR [--disk-bytes 4Gi]] [--machine NAME] [--commit C] [--skip-daemon]
//             [--repeat R] [--paths cli,daemon_fd,...] [--budget 1/K] [--skip-fit]
//
// --budget 1/K (2 <= K <= 65536) sets the out-of-core budget; its targets are then named
// "ooc_1_K" where 1/8's are "ooc". --skip-fit leaves out the fitting runs.
// --paths runs only the CLI and daemon paths named (cli, cli_late_pages, cli_round1_pinned,
// daemon_fd, daemon_shm, daemon_fd_inplace), for same-run A/Bs of one path.
// --repeat runs each CLI and daemon path R times (the median is its target). Before each path,
// one fallocate of a new file of --bytes in --dir shows what the output's pages cost then: a
// new tmpfs file's pages are made one at a time under its lock, the floor of every path that
// writes a new file there.
#include "bench/results_format.hpp"
#include "core/cpu_sort.hpp"
#include "core/generate.hpp"
#include "core/stream_copy.hpp"
#include "core/verify.hpp"
#include "pipeline/host_memory.hpp"

#include <nlohmann/json.hpp>

#include <gpusort/client.hpp>
#include <gpusort/gpusort.hpp>
#include <gpusort/units.hpp>

#include <fcntl.h>
#include <omp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

using clock_type = std::chrono::steady_clock;
using gpusort::bench::target;
using gpusort::detail::host_buffer;

double seconds_since(clock_type::time_point t0)
{
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

[[noreturn]] void die(const std::string& message)
{
  std::fprintf(stderr, "e2e_bench: %s\n", message.c_str());
  std::exit(70);
}

struct child_run {
  double seconds{};
  double max_rss_gib{};
  int status{};
  std::string report;  ///< the command's --json line: its own timeline and the engine's stages
};

/// A number of the one-line JSON object in `text` (a command's --json report), 0 when absent
/// or not a number (null: not finite).
double json_number(const std::string& text, const std::string& key)
{
  const nlohmann::json report = nlohmann::json::parse(text, nullptr, false);
  if (report.is_discarded() || !report.is_object()) return 0.0;
  const auto it = report.find(key);
  return it != report.end() && it->is_number() ? it->get<double>() : 0.0;
}

/// Peak resident memory of a running process (VmHWM), GiB.
double peak_rss_gib(pid_t pid)
{
  std::ifstream status{"/proc/" + std::to_string(pid) + "/status"};
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0)
      return std::strtod(line.c_str() + 6, nullptr) / (1024.0 * 1024.0);
  return 0;
}

/// Runs argv (a gpusort command with --json) to its end, with `env` added: wall seconds from
/// spawn to exit, and the peak RSS the command reports of itself (rusage would report this
/// program's: ru_maxrss survives fork and exec).
child_run run_child(const std::vector<std::string>& argv, const std::string& scratch_dir,
                    const std::vector<std::string>& env = {})
{
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_strings = env;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  const std::string out_path = scratch_dir + "/e2e_bench.stdout";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  pid_t pid = 0;
  const auto t0 = clock_type::now();
  if (posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data()) != 0)
    die("cannot start " + argv[0]);
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  if (::waitpid(pid, &status, 0) < 0) die("waitpid failed");
  const double seconds = seconds_since(t0);
  std::ifstream out{out_path};
  const std::string text{std::istreambuf_iterator<char>{out}, std::istreambuf_iterator<char>{}};
  ::unlink(out_path.c_str());
  child_run r{.seconds = seconds,
              .max_rss_gib = json_number(text, "peak_rss_bytes") / (1024.0 * 1024.0 * 1024.0),
              .status = status,
              .report = text.substr(0, text.find_last_not_of("\n") + 1)};
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string line;
    for (const std::string& a : argv) line += a + " ";
    die("failed (status " + std::to_string(status) + "): " + line);
  }
  return r;
}

void write_file(const std::string& path, const void* data, std::uint64_t bytes)
{
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) die("cannot create " + path + ": " + std::strerror(errno));
  const auto* p = static_cast<const char*>(data);
  for (std::uint64_t done = 0; done < bytes;) {
    const ssize_t n = ::pwrite(fd, p + done, std::min<std::uint64_t>(bytes - done, 1U << 30),
                               static_cast<off_t>(done));
    if (n <= 0) die("cannot write " + path + ": " + std::strerror(errno));
    done += static_cast<std::uint64_t>(n);
  }
  ::close(fd);
}

/// Checks a sorted output file against the input's fingerprint.
void check_file(const std::string& path, std::uint64_t n, const gpusort::fingerprint& before)
{
  host_buffer b{n * 8};
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) die("cannot open " + path);
  for (std::uint64_t done = 0; done < n * 8;) {
    const ssize_t got = ::pread(fd, b.as<char>() + done,
                                std::min<std::uint64_t>(n * 8 - done, 1U << 30),
                                static_cast<off_t>(done));
    if (got <= 0) die("cannot read " + path);
    done += static_cast<std::uint64_t>(got);
  }
  ::close(fd);
  const gpusort::verify_result v = gpusort::verify(
      gpusort::key_array{b.data(), n, gpusort::dtype::u64}, std::nullopt,
      gpusort::order::ascending, before);
  if (!v.ok) die(path + " is not the sorted input: " + v.message);
}

/// The best of three parallel copies of `bytes` in 4 MiB pieces: with memcpy, or (streaming)
/// with the staging's stream_copy, whose stores bypass the caches.
double parallel_memcpy_seconds(std::uint64_t bytes, bool streaming)
{
  host_buffer a{bytes}, b{bytes};
  std::memset(a.data(), 1, bytes);
  std::memset(b.data(), 2, bytes);
  double best = 1e30;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = clock_type::now();
    gpusort::detail::host_buffer* dst = &b;
    const auto pieces = static_cast<std::int64_t>(bytes >> 22);
#pragma omp parallel for schedule(static)
    for (std::int64_t p = 0; p < pieces; ++p)
      if (streaming)
        gpusort::detail::stream_copy(dst->as<char>() + (p << 22), a.as<char>() + (p << 22),
                                     std::size_t{1} << 22);
      else
        std::memcpy(dst->as<char>() + (p << 22), a.as<char>() + (p << 22), std::size_t{1} << 22);
    best = std::min(best, seconds_since(t0));
  }
  return best;
}

/// Writes dirty pages back and empties the page cache, so that a file on a disk is read from
/// the disk; false where this process may not (not root).
bool drop_caches()
{
  ::sync();
  std::ofstream f{"/proc/sys/vm/drop_caches"};
  f << "3\n";
  f.flush();
  return static_cast<bool>(f);
}

/// The disk's own rates, as a copy program would see them: the whole file read by parallel
/// preads of 4 MiB (caches dropped first), and as many bytes written to a new file in the same
/// folder with parallel pwrites, then fsync'ed.
std::pair<double, double> disk_seconds(const std::string& path, std::uint64_t bytes,
                                       const std::string& scratch)
{
  constexpr std::uint64_t block = std::uint64_t{4} << 20;
  host_buffer buffer{bytes};
  buffer.populate();
  const auto blocks = static_cast<std::int64_t>((bytes + block - 1) / block);
  const auto move_all = [&](int fd, bool read) {
    bool ok = true;
#pragma omp parallel for schedule(static) reduction(&& : ok)
    for (std::int64_t b = 0; b < blocks; ++b) {
      const std::uint64_t off = static_cast<std::uint64_t>(b) * block;
      const std::uint64_t len = std::min(block, bytes - off);
      char* at = buffer.as<char>() + off;
      const ssize_t done = read ? ::pread(fd, at, len, static_cast<off_t>(off))
                                : ::pwrite(fd, at, len, static_cast<off_t>(off));
      ok = ok && done == static_cast<ssize_t>(len);
    }
    return ok;
  };
  drop_caches();
  auto t0 = clock_type::now();
  const int in = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (in < 0 || !move_all(in, true)) die("cannot read " + path);
  ::close(in);
  const double read_s = seconds_since(t0);
  t0 = clock_type::now();
  const int out = ::open(scratch.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0 || !move_all(out, false) || ::fsync(out) != 0) die("cannot write " + scratch);
  ::close(out);
  const double write_s = seconds_since(t0);
  ::unlink(scratch.c_str());
  return {read_s, write_s};
}

/// A configuration for the children; `budget` 0: none (the job fits the GPU).
std::string config_file(const std::string& dir, const std::string& name, std::uint64_t budget,
                        const std::string& socket)
{
  const std::string path = dir + "/" + name;
  std::ofstream out{path};
  out << "devices: auto\n";
  if (budget > 0) out << "device_memory_budget: " << budget << "\n";
  out << "socket: " << socket << "\n";
  out << "log_level: warn\n";
  return path;
}

/// Seconds one fallocate takes to make the pages of a new file of `bytes` at `path` (removed
/// after): how fast this host makes a new output's pages now.
double new_file_pages_seconds(const std::string& path, std::uint64_t bytes)
{
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) die("cannot create " + path + ": " + std::strerror(errno));
  const auto t0 = clock_type::now();
  const int rc = ::fallocate(fd, 0, 0, static_cast<off_t>(bytes));
  const double s = seconds_since(t0);
  const int err = errno;
  ::close(fd);
  ::unlink(path.c_str());
  if (rc != 0) die("fallocate " + path + ": " + std::strerror(err));
  return s;
}

}  // namespace

int main(int argc, char** argv)
{
  std::string bin, dir = "/dev/shm", json, machine = "unknown", commit = "unknown", disk_dir;
  std::uint64_t bytes = std::uint64_t{8} << 30, cpu_bytes = std::uint64_t{1} << 30;
  std::uint64_t disk_bytes = std::uint64_t{4} << 30;
  bool skip_daemon = false, skip_fit = false;
  int repeat = 1;
  std::uint64_t budget_k = 8;  ///< --budget 1/K
  std::string paths;  ///< --paths: the CLI and daemon paths to run (comma-separated), or all
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--skip-daemon" || a == "--skip-fit") {
      (a == "--skip-daemon" ? skip_daemon : skip_fit) = true;
      continue;
    }
    if (i + 1 >= argc) die("usage: e2e_bench --bin DIR [--dir D] [--bytes N] [--cpu-bytes N] "
                           "[--disk-dir D [--disk-bytes N]] [--json FILE] [--machine M] "
                           "[--commit C] [--skip-daemon] [--repeat R] [--paths P,...] "
                           "[--budget 1/K] [--skip-fit]");
    const std::string v = argv[++i];
    if (a == "--bin") bin = v;
    else if (a == "--dir") dir = v;
    else if (a == "--bytes") bytes = gpusort::parse_count(v).value_or(0);
    else if (a == "--cpu-bytes") cpu_bytes = gpusort::parse_count(v).value_or(0);
    else if (a == "--disk-dir") disk_dir = v;
    else if (a == "--disk-bytes") disk_bytes = gpusort::parse_count(v).value_or(0);
    else if (a == "--json") json = v;
    else if (a == "--machine") machine = v;
    else if (a == "--commit") commit = v;
    else if (a == "--repeat") repeat = static_cast<int>(gpusort::parse_count(v).value_or(0));
    else if (a == "--paths") paths = "," + v + ",";
    else if (a == "--budget") {
      const bool fraction = v.size() > 2 && v.size() <= 7 && v.compare(0, 2, "1/") == 0 &&
                            v.find_first_not_of("0123456789", 2) == std::string::npos;
      budget_k = fraction ? std::stoull(v.substr(2)) : 0;
      if (budget_k < 2 || budget_k > 65536) die("--budget takes 1/K, K from 2 to 65536");
    }
    else die("unknown argument " + a);
  }
  if (bin.empty() || bytes < 8) die("--bin DIR (with gpusort and gpusortd) and --bytes are needed");
  if (repeat < 1 || repeat > 9) die("--repeat takes 1 to 9");
  const std::uint64_t n = bytes / 8;
  bytes = n * 8;
  const std::uint64_t budget = bytes / budget_k;
  // Out of core's name in the rows and targets: "ooc" at 1/8, as before --budget existed.
  const std::string ooc_name = budget_k == 8 ? "ooc" : "ooc_1_" + std::to_string(budget_k);
  const std::vector<bool> modes =
      skip_fit ? std::vector<bool>{true} : std::vector<bool>{true, false};
  const std::string socket = dir + "/e2e_bench.sock";
  const std::string in = dir + "/e2e_bench.in", out = dir + "/e2e_bench.out";
  std::printf("e2e_bench: %s of u64 uniform keys (n = %llu), files in %s, %d threads\n",
              gpusort::format_bytes(bytes).c_str(), static_cast<unsigned long long>(n),
              dir.c_str(), omp_get_max_threads());

  std::ostringstream raw;
  std::vector<target> targets;
  const auto record = [&](const std::string& name, double seconds, double rss_gib) {
    std::printf("  %-28s %8.3f s  %6.2f GB/s  peak RSS %.2f GiB\n", name.c_str(), seconds,
                static_cast<double>(bytes) / seconds / 1e9, rss_gib);
    raw << (raw.tellp() > 0 ? "," : "") << "{\"path\": \"" << name << "\", \"seconds\": "
        << seconds << ", \"peak_rss_gib\": " << rss_gib << "}";
  };

  // The keys, their fingerprint and the input file.
  host_buffer keys{bytes};
  gpusort::generate(std::span<std::uint64_t>{keys.as<std::uint64_t>(), n},
                    gpusort::distribution::uniform, 18);
  const gpusort::fingerprint before =
      gpusort::fingerprint_of(gpusort::key_array{keys.data(), n, gpusort::dtype::u64});
  write_file(in, keys.data(), bytes);
  const std::uint64_t copied = std::min<std::uint64_t>(bytes, 4ULL << 30);
  const double scale = static_cast<double>(bytes) / static_cast<double>(copied);
  record("memcpy (parallel, host)", parallel_memcpy_seconds(copied, false) * scale, 0);
  // What the staging copies (core/stream_copy.hpp) can reach: the host's bound for the paths
  // that stage.
  if (gpusort::detail::stream_copy_streams())
    record("memcpy (parallel, streaming)", parallel_memcpy_seconds(copied, true) * scale, 0);

  double reference[2]{};
  for (const bool ooc : modes) {
    const std::string mode = ooc ? ooc_name : "fit";
    gpusort::config cfg;
    if (ooc) cfg.device_memory_budget = budget;
    gpusort::engine eng{cfg};
    // Reference: memory the engine pinned, sorted twice (the first warms the engine's caches,
    // as a daemon's are), the second timed.
    host_buffer work{bytes};
    double ref = 0, pageable = 0;
    {
      const gpusort::host_registration pin = eng.register_host(work.data(), bytes);
      for (int rep = 0; rep < 2; ++rep) {
        gpusort::detail::parallel_copy(work.data(), keys.data(), bytes);
        ref = eng.sort(std::span<std::uint64_t>{work.as<std::uint64_t>(), n}).seconds;
      }
    }
    for (int rep = 0; rep < 2; ++rep) {
      gpusort::detail::parallel_copy(work.data(), keys.data(), bytes);
      const auto t0 = clock_type::now();
      eng.sort(std::span<std::uint64_t>{work.as<std::uint64_t>(), n});
      pageable = seconds_since(t0);
    }
    const gpusort::verify_result v = gpusort::verify(
        gpusort::key_array{work.data(), n, gpusort::dtype::u64}, std::nullopt,
        gpusort::order::ascending, before);
    if (!v.ok) die(std::string{"engine result wrong: "} + v.message);
    reference[ooc ? 0 : 1] = ref;
    record(std::string{"reference "} + mode, ref, 0);
    record(std::string{"pageable "} + mode, pageable, 0);
    targets.push_back(target{.name = std::string{"e2e.pageable_rate."} + mode,
                             .unit = "x reference rate",
                             .baseline = "engine on pinned memory",
                             .value = pageable,
                             .ratio = ref / pageable,
                             .goal = 0.8,
                             .higher_is_better = true});
  }
  keys = host_buffer{};  // the children need the memory

  double cpu_scaled = 0;
  {
    const std::uint64_t cn = std::min(n, cpu_bytes / 8);
    host_buffer cpu_keys{cn * 8};
    gpusort::generate(std::span<std::uint64_t>{cpu_keys.as<std::uint64_t>(), cn},
                      gpusort::distribution::uniform, 19);
    gpusort::engine cpu{gpusort::config{.devices = gpusort::device_selection::cpu}};
    const double s = cpu.sort(std::span<std::uint64_t>{cpu_keys.as<std::uint64_t>(), cn}).seconds;
    cpu_scaled = s * static_cast<double>(n) / static_cast<double>(cn);
    record("cpu engine (scaled)", cpu_scaled, 0);
  }

  const std::string gpusort_cli = bin + "/gpusort", daemon = bin + "/gpusortd";
  const auto wanted = [&](const std::string& path) {
    return paths.empty() || paths.find("," + path + ",") != std::string::npos;
  };
  for (const bool ooc : modes) {
    const std::string mode = ooc ? ooc_name : "fit";
    const std::string cfg =
        config_file(dir, std::string{"e2e_bench."} + mode + ".yaml", ooc ? budget : 0, socket);
    const double ref = reference[ooc ? 0 : 1];
    // Each path runs --repeat times; its target takes the median, and every run's report is
    // kept in "raw" (runs of the same command on this host differ by up to 0.5 s).
    const auto add_path = [&](const std::string& path, const auto& run_once) {
      if (!wanted(path)) return;
      std::vector<child_run> runs;
      for (int rep = 0; rep < repeat; ++rep) {
        // What a new output file's pages cost now, just before: the floor of every path that
        // writes one (made one at a time under the file's lock; file_window.hpp).
        if (rep == 0) record("new file pages (fallocate) before " + path + " " + mode,
                             new_file_pages_seconds(out, bytes), 0);
        runs.push_back(run_once());
        check_file(out, n, before);
        ::unlink(out.c_str());
        record(path + " " + mode + (repeat > 1 ? " #" + std::to_string(rep + 1) : ""),
               runs.back().seconds, runs.back().max_rss_gib);
        if (!runs.back().report.empty())
          raw << ",{\"path\": \"" << path << " " << mode << "\", \"run\": " << rep + 1
              << ", \"report\": " << runs.back().report << "}";
      }
      std::sort(runs.begin(), runs.end(),
                [](const child_run& a, const child_run& b) { return a.seconds < b.seconds; });
      const child_run& r = runs[runs.size() / 2];
      if (repeat > 1) record(path + " " + mode + " (median)", r.seconds, r.max_rss_gib);
      targets.push_back(target{.name = "e2e." + path + "." + mode,
                               .unit = "s",
                               .baseline = "reference engine seconds",
                               .value = r.seconds,
                               .ratio = r.seconds / ref,
                               .goal = 2.0,
                               .higher_is_better = false});
      targets.push_back(target{.name = "e2e." + path + "_vs_cpu." + mode,
                               .unit = "x cpu engine",
                               .baseline = "cpu engine seconds (scaled)",
                               .value = r.seconds,
                               .ratio = cpu_scaled / r.seconds,
                               .goal = 5.0,
                               .higher_is_better = true});
    };
    const std::vector<std::string> local{gpusort_cli, "sort",   in,       "--dtype", "u64",
                                         "--out",     out,      "--local", "--config", cfg,
                                         "--json",    "--profile"};
    add_path("cli", [&] { return run_child(local, "/tmp"); });
    // The same with the output's pages started by the job, not before the engine starts.
    add_path("cli_late_pages",
             [&] { return run_child(local, "/tmp", {"GPUSORT_PREPARE_OUTPUT=0"}); });
    // The same with a pinned round-1 buffer, as the daemon keeps one (--local keeps it
    // pageable): what pinning costs a one-shot command against what it saves in the copies.
    if (ooc)
      add_path("cli_round1_pinned",
               [&] { return run_child(local, "/tmp", {"GPUSORT_ROUND1_PINNED=1"}); });
    if (skip_daemon) continue;
    // The daemon: started, given time to bind, then a client sorts through it.
    pid_t pid = 0;
    std::vector<std::string> dargv{daemon, "--config", cfg};
    std::vector<char*> dargs;
    for (const std::string& a : dargv) dargs.push_back(const_cast<char*>(a.c_str()));
    dargs.push_back(nullptr);
    ::unlink(socket.c_str());
    if (posix_spawn(&pid, dargs[0], nullptr, nullptr, dargs.data(), environ) != 0)
      die("cannot start gpusortd");
    for (int i = 0; i < 200 && ::access(socket.c_str(), F_OK) != 0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    // A first job warms the daemon's engine (its GPUs' buffers), as a running service's is.
    const std::vector<std::string> through{gpusort_cli, "sort", in,       "--dtype", "u64",
                                           "--out",     out,    "--socket", socket,   "--json",
                                           "--profile"};
    run_child(through, "/tmp");
    ::unlink(out.c_str());
    add_path("daemon_fd", [&] { return run_child(through, "/tmp"); });
    if (wanted("daemon_shm")) {
      // A shared buffer: the daemon pinned it once at ALLOCATE; the job copies straight from it.
      gpusort::client::connection conn = gpusort::client::connection::connect(socket, "e2e_bench");
      gpusort::client::buffer<std::uint64_t> shared = conn.allocate<std::uint64_t>(n);
      double seconds = 0;
      for (int rep = 0; rep < 2; ++rep) {  // the first warms the daemon's buffers for this path
        gpusort::generate(shared.span(), gpusort::distribution::uniform, 18);
        const auto t0 = clock_type::now();
        conn.sort(shared);
        seconds = seconds_since(t0);
      }
      const gpusort::verify_result v =
          gpusort::verify(gpusort::key_array{shared.data(), n, gpusort::dtype::u64}, std::nullopt,
                          gpusort::order::ascending, before);
      if (!v.ok) die(std::string{"the daemon's shared-buffer result is wrong: "} + v.message);
      record(std::string{"daemon_shm "} + mode, seconds, 0);
      targets.push_back(target{.name = std::string{"e2e.daemon_shm."} + mode,
                               .unit = "s",
                               .baseline = "reference engine seconds",
                               .value = seconds,
                               .ratio = seconds / ref,
                               .goal = 1.03,
                               .higher_is_better = false});
    }
    if (wanted("daemon_fd_inplace")) {
      // A file sorted in place through its descriptor (the client library's file region): its
      // pages exist, so no new page is made. A fresh copy of the input each run, made untimed;
      // the time is the job's, submit to its end, as for the shared buffer.
      gpusort::client::connection conn = gpusort::client::connection::connect(socket, "e2e_bench");
      std::vector<double> runs;
      for (int rep = 0; rep < repeat; ++rep) {
        std::filesystem::copy_file(in, out, std::filesystem::copy_options::overwrite_existing);
        const int fd = ::open(out.c_str(), O_RDWR | O_CLOEXEC);
        if (fd < 0) die("cannot open " + out + ": " + std::strerror(errno));
        const gpusort::client::sort_request request{
            .type = gpusort::dtype::u64, .count = n,
            .keys = gpusort::client::array_ref::of_fd(fd)};
        const auto t0 = clock_type::now();
        conn.sort(request);
        runs.push_back(seconds_since(t0));
        ::close(fd);
        check_file(out, n, before);
        ::unlink(out.c_str());
        record(std::string{"daemon_fd_inplace "} + mode +
                   (repeat > 1 ? " #" + std::to_string(rep + 1) : ""),
               runs.back(), 0);
      }
      std::sort(runs.begin(), runs.end());
      const double seconds = runs[runs.size() / 2];
      if (repeat > 1) record(std::string{"daemon_fd_inplace "} + mode + " (median)", seconds, 0);
      targets.push_back(target{.name = std::string{"e2e.daemon_fd_inplace."} + mode,
                               .unit = "s",
                               .baseline = "reference engine seconds",
                               .value = seconds,
                               .ratio = seconds / ref,
                               .goal = 2.0,
                               .higher_is_better = false});
    }
    const double daemon_rss = peak_rss_gib(pid);
    ::kill(pid, SIGTERM);
    int status = 0;
    ::waitpid(pid, &status, 0);
    std::printf("  gpusortd peak RSS %.2f GiB (two jobs)\n", daemon_rss);
    raw << ",{\"path\": \"gpusortd " << mode << "\", \"peak_rss_gib\": " << daemon_rss << "}";
  }
  ::unlink(in.c_str());

  // A file on a local disk: the CLI against the disk's own read and write rates, caches dropped
  // before each, out of core and fitting. The reference is scaled to this size.
  if (!disk_dir.empty() && disk_bytes >= 8) {
    const std::uint64_t dn = disk_bytes / 8;
    const std::string disk_in = disk_dir + "/e2e_bench.disk.in";
    const std::string disk_out = disk_dir + "/e2e_bench.disk.out";
    gpusort::fingerprint disk_before;
    {
      host_buffer disk_keys{dn * 8};
      gpusort::generate(std::span<std::uint64_t>{disk_keys.as<std::uint64_t>(), dn},
                        gpusort::distribution::uniform, 20);
      disk_before =
          gpusort::fingerprint_of(gpusort::key_array{disk_keys.data(), dn, gpusort::dtype::u64});
      write_file(disk_in, disk_keys.data(), dn * 8);
    }
    const bool dropped = drop_caches();
    if (!dropped) std::printf("  (page cache not dropped: not root; the disk rows read it)\n");
    const auto [read_s, write_s] = disk_seconds(disk_in, dn * 8, disk_dir + "/e2e_bench.scratch");
    const auto record_disk = [&](const std::string& name, double seconds) {
      std::printf("  %-28s %8.3f s  %6.2f GB/s\n", name.c_str(), seconds,
                  static_cast<double>(dn * 8) / seconds / 1e9);
      raw << ",{\"path\": \"" << name << "\", \"seconds\": " << seconds
          << ", \"bytes\": " << dn * 8 << ", \"caches_dropped\": " << dropped << "}";
    };
    record_disk("disk read (16 threads)", read_s);
    record_disk("disk write + fsync", write_s);
    for (const bool ooc : modes) {
      const std::string mode = ooc ? ooc_name : "fit";
      const std::string cfg = config_file(dir, std::string{"e2e_bench.disk."} + mode + ".yaml",
                                          ooc ? dn * 8 / budget_k : 0, socket);
      const double ref = reference[ooc ? 0 : 1] * static_cast<double>(dn) /
                         static_cast<double>(n);
      drop_caches();
      const child_run r = run_child({gpusort_cli, "sort", disk_in, "--dtype", "u64", "--out",
                                     disk_out, "--local", "--config", cfg, "--json", "--profile"},
                                    "/tmp");
      check_file(disk_out, dn, disk_before);
      ::unlink(disk_out.c_str());
      record_disk(std::string{"cli disk "} + mode, r.seconds);
      if (!r.report.empty())
        raw << ",{\"path\": \"cli disk " << mode << "\", \"report\": " << r.report << "}";
      const double floor = std::max(read_s + write_s, ref);
      targets.push_back(target{.name = std::string{"e2e.cli_disk."} + mode,
                               .unit = "s",
                               .baseline = "max(disk read + write, reference scaled)",
                               .value = r.seconds,
                               .ratio = r.seconds / floor,
                               .goal = 1.3,
                               .higher_is_better = false});
    }
    ::unlink(disk_in.c_str());
  }

  const int met = gpusort::bench::print_targets(targets, "seconds or rate");
  std::printf("\n%d of %zu targets met\n", met, targets.size());
  if (!json.empty())
    gpusort::bench::write_results(json, commit, machine, targets, raw.str(),
                                  {"\"bytes\": " + std::to_string(bytes),
                                   "\"ooc_budget\": " + std::to_string(budget),
                                   "\"dir\": \"" + dir + "\""});
  return 0;
}
