// Service benchmark (issue 5): what going through gpusortd costs next to sorting in-process.
// Starts the daemon given as --daemon on a socket in a temporary folder, with the engine of
// --devices (cpu by default, as the targets are stated for the CPU engine), then measures:
//   - latency of a 1 MiB u64 job through the daemon, p50 and p99 over --jobs jobs, and the same
//     sort in-process on an engine of the same configuration;
//   - throughput of --clients concurrent clients submitting small jobs, and the same number of
//     threads sorting in-process on one engine;
//   - a --large job (1 GiB by default) through the daemon and in-process: the daemon's overhead.
// --small-jobs N runs another mode alone (issue 25: small GPU jobs cost about 60 ms each in
// gpusortd): N jobs of 1 KiB to 1 MiB that cycle through the layouts a daemon meets (u32, u64
// and f64 keys, u64 keys with u32 values, a u32 argsort, a stable sort of f32 keys with u64
// values), one at a time, in-process on pageable memory and through the daemon on its shared
// buffers: jobs per second and p50 and p99 latency, per layout too.
// Every result is checked (sorted, and the same multiset by fingerprint). Writes the results
// format of bench/results_format.hpp. Any failure (a refused job, a daemon that does not start)
// ends it with one line and exit code 1, the daemon stopped and its folder removed.
#include "bench/bench_cli.hpp"
#include "bench/results_format.hpp"
#include "bench/temp_folder.hpp"
#include "core/generate.hpp"
#include "core/verify.hpp"

#include <gpusort/client.hpp>
#include <gpusort/config.hpp>
#include <gpusort/gpusort.hpp>
#include <gpusort/units.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
using gpusort::bench::target;
using gpusort::bench::usage_error;

constexpr const char* usage =
    "usage: service_bench --daemon GPUSORTD [--devices cpu] [--pool auto] [--jobs 1000]\n"
    "                     [--clients 32] [--client-jobs 20] [--large 1Gi] [--json FILE]\n"
    "                     [--machine NAME] [--commit C]\n"
    "       service_bench --daemon GPUSORTD --small-jobs N [--devices D] [--json FILE] ...\n"
    "\n"
    "gpusortd against the same sorts in-process: the latency of 1 MiB u64 jobs (p50, p99 over\n"
    "--jobs), --clients clients at once submitting --client-jobs such jobs each, and one --large\n"
    "job (bytes of u64 keys) for the daemon's overhead.\n"
    "\n"
    "  --daemon GPUSORTD  the daemon to start, on a socket in a temporary folder\n"
    "  --devices D        its devices key and the in-process engine's (cpu, auto, [0, 1])\n"
    "  --pool SIZE        its pinned_pool_bytes: at least --large (auto: half the memory)\n"
    "  --small-jobs N     only this: N jobs of 1 KiB to 1 MiB cycling u32, u64, f64 keys, u64\n"
    "                     keys with u32 values, a u32 argsort and a stable f32 + u64 sort, one\n"
    "                     at a time, in-process and through the daemon: jobs/s, p50, p99\n"
    "  --json FILE        also write the results there (bench/results_format.hpp)\n"
    "exit codes: 0 done, 1 a failure (one line says which), 64 a bad command line\n";

double seconds_since(clock_type::time_point t0)
{
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

void check_sorted(std::uint64_t* keys, std::uint64_t n, const gpusort::fingerprint& before,
                  const char* what)
{
  const auto v = gpusort::verify(gpusort::key_array{keys, n, gpusort::dtype::u64}, std::nullopt,
                                 gpusort::order::ascending, before);
  if (!v.ok) throw std::runtime_error{std::string{what} + ": " + v.message};
}

double percentile(std::vector<double> samples, double p)
{
  std::sort(samples.begin(), samples.end());
  const auto i = static_cast<std::size_t>(p * static_cast<double>(samples.size() - 1) + 0.5);
  return samples[std::min(i, samples.size() - 1)];
}

/// Runs one part of the benchmark; its failure names the part ("the --large job: TOO_LARGE:
/// ..."), since the daemon's message alone does not say which of the bench's jobs it refused.
template <typename F>
void part(const std::string& what, F&& body)
{
  try {
    body();
  } catch (const std::exception& e) {
    throw std::runtime_error{what + ": " + e.what()};
  }
}

/// gpusortd as a child process on a private socket; SIGTERM and wait when destroyed. A daemon
/// that does not come up is stopped and its folder removed before the constructor throws.
class daemon_process {
 public:
  daemon_process(const std::string& exe, const std::string& devices, const std::string& pool)
      : socket_{dir_.path() + "/gpusortd.sock"}
  {
    const std::string config = dir_.path() + "/gpusortd.yaml";
    std::ofstream{config} << "devices: " << devices << "\nsocket: " << socket_
                          << "\npinned_pool_bytes: " << pool << "\nlog_level: warn\n";
    pid_ = ::fork();
    if (pid_ < 0) throw std::system_error{errno, std::generic_category(), "fork"};
    if (pid_ == 0) {
      ::execl(exe.c_str(), exe.c_str(), "--config", config.c_str(), static_cast<char*>(nullptr));
      std::fprintf(stderr, "service_bench: cannot run %s: %s\n", exe.c_str(),
                   std::strerror(errno));
      ::_exit(127);
    }
    try {
      wait_until_listening(exe);
    } catch (...) {
      stop();
      throw;
    }
  }
  ~daemon_process() { stop(); }
  daemon_process(const daemon_process&) = delete;
  daemon_process& operator=(const daemon_process&) = delete;

  [[nodiscard]] const std::string& socket() const noexcept { return socket_; }

 private:
  void wait_until_listening(const std::string& exe)
  {
    for (int attempt = 0;; ++attempt) {
      try {
        gpusort::client::connection::connect(socket_, "service-bench-probe");
        return;
      } catch (const gpusort::client::error&) {
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
          pid_ = -1;
          throw std::runtime_error{
              exe + " exited at start (" +
              (WIFEXITED(status) ? "exit code " + std::to_string(WEXITSTATUS(status))
                                 : "signal " + std::to_string(WTERMSIG(status))) +
              "; its message, if any, is above)"};
        }
        if (attempt == 600) throw std::runtime_error{exe + " did not listen within 30 s"};
        std::this_thread::sleep_for(std::chrono::milliseconds{50});
      }
    }
  }
  void stop() noexcept
  {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  gpusort::bench::temp_folder dir_;  // first: the folder outlives the daemon
  std::string socket_;
  pid_t pid_{-1};
};

struct options {
  std::string daemon, devices = "cpu", pool = "auto";
  gpusort::bench::results_options results;
  gpusort::config local{.devices = gpusort::device_selection::cpu};  ///< in-process: --devices
  std::uint64_t jobs = 1000, clients = 32, client_jobs = 20;
  std::uint64_t small_jobs = 0;  ///< > 0: the small-jobs mode alone
  std::uint64_t large = std::uint64_t{1} << 27;  // u64 keys: 1 GiB
};

/// `key: value` as the daemon would read it; a value it would refuse is a usage error here,
/// before the daemon starts.
gpusort::config checked(std::string_view flag, const std::string& key, const std::string& value)
{
  try {
    return gpusort::parse_config(key + ": " + value + "\n", flag);
  } catch (const std::exception& e) {
    throw usage_error{e.what()};
  }
}

void set_option(options& o, std::string_view flag, const std::string& v)
{
  const auto count = [&](std::uint64_t at_least) {
    const auto c = gpusort::parse_count(v);
    if (!c || *c < at_least)
      throw usage_error{std::string{flag} + " takes a count of at least " +
                        std::to_string(at_least) + ", not '" + v + "'"};
    return *c;
  };
  if (flag == "--daemon" && ::access(v.c_str(), X_OK) != 0)
    throw usage_error{"--daemon " + v + ": " + std::strerror(errno)};
  if (flag == "--daemon") o.daemon = v;
  else if (flag == "--devices") o.local = checked(flag, "devices", o.devices = v);
  else if (flag == "--pool") checked(flag, "pinned_pool_bytes", o.pool = v);
  else if (flag == "--jobs") o.jobs = count(1);
  else if (flag == "--clients") o.clients = count(1);
  else if (flag == "--client-jobs") o.client_jobs = count(1);
  else if (flag == "--large") o.large = count(8) / 8;
  else if (flag == "--small-jobs") o.small_jobs = count(1);
}

// ---- --small-jobs --------------------------------------------------------------------------

/// The layouts a daemon meets, in turn: each one after another made a GPU replace its kept
/// buffers when it needed more of any of them (issue 25).
enum class small_kind : std::uint8_t { u32_keys, u64_keys, f64_keys, u64_u32_pairs, u32_argsort,
                                       stable_f32_u64_pairs };
constexpr std::array<const char*, 6> small_kind_names{
    "u32 keys", "u64 keys", "f64 keys", "u64 keys + u32 values", "u32 argsort",
    "stable f32 keys + u64 values"};

struct small_job {
  small_kind kind{};
  gpusort::dtype type{};
  std::uint64_t n{};
  std::uint32_t value_bytes{};  ///< values, or an argsort's indices; 0: keys alone
  [[nodiscard]] bool argsort() const { return kind == small_kind::u32_argsort; }
  [[nodiscard]] bool stable() const { return kind == small_kind::stable_f32_u64_pairs; }
  [[nodiscard]] bool pairs() const { return value_bytes != 0 && !argsort(); }
  [[nodiscard]] std::uint64_t key_bytes() const { return n * gpusort::size_of(type); }
  [[nodiscard]] std::uint64_t value_array_bytes() const { return n * value_bytes; }
};

/// Job `i`: the layouts in turn, keys and values of 1 KiB to 1 MiB in all, log-uniform.
small_job small_job_at(std::uint64_t i, std::mt19937_64& rng)
{
  small_job j;
  j.kind = static_cast<small_kind>(i % small_kind_names.size());
  switch (j.kind) {
    case small_kind::u32_keys: j.type = gpusort::dtype::u32; break;
    case small_kind::u64_keys: j.type = gpusort::dtype::u64; break;
    case small_kind::f64_keys: j.type = gpusort::dtype::f64; break;
    case small_kind::u64_u32_pairs:
      j.type = gpusort::dtype::u64;
      j.value_bytes = 4;
      break;
    case small_kind::u32_argsort:
      j.type = gpusort::dtype::u32;
      j.value_bytes = 8;  // int64 indices
      break;
    case small_kind::stable_f32_u64_pairs:
      j.type = gpusort::dtype::f32;
      j.value_bytes = 8;
      break;
  }
  const double bytes = std::exp2(10.0 + 10.0 * static_cast<double>(rng() % 1'000'000) / 1e6);
  const std::uint64_t per = gpusort::size_of(j.type) + (j.pairs() ? j.value_bytes : 0);
  j.n = std::max<std::uint64_t>(1, static_cast<std::uint64_t>(bytes) / per);
  return j;
}

/// One job's input, made before the clock starts, and its fingerprint.
struct small_input {
  std::vector<std::byte> keys, values;
  gpusort::fingerprint print;
};

small_input make_input(const small_job& j, std::uint64_t seed)
{
  small_input in;
  in.keys.resize(j.key_bytes());
  gpusort::generate(gpusort::key_array{in.keys.data(), j.n, j.type},
                    gpusort::distribution::uniform, seed);
  std::optional<gpusort::value_array> values;
  if (j.pairs()) {
    in.values.resize(j.value_array_bytes());
    values = gpusort::value_array{in.values.data(), j.n, j.value_bytes};
    gpusort::generate_values(*values, seed + 1);
  }
  in.print = gpusort::fingerprint_of(gpusort::key_array{in.keys.data(), j.n, j.type}, values);
  return in;
}

/// Checks a sorted result in place (keys, values) or an argsort's indices over `keys`.
void check_small(const small_job& j, const small_input& in, const std::byte* keys,
                 const std::byte* values, const char* where)
{
  const std::string what = std::string{where} + " " + small_kind_names[static_cast<int>(j.kind)] +
                           " job of " + std::to_string(j.n);
  if (j.argsort()) {
    // The indices must be a permutation that puts the keys in order.
    const auto* idx = reinterpret_cast<const std::int64_t*>(values);
    const auto* k = reinterpret_cast<const std::uint32_t*>(in.keys.data());
    std::vector<std::uint32_t> gathered(j.n);
    std::vector<bool> seen(j.n);
    for (std::uint64_t i = 0; i < j.n; ++i) {
      const auto at = static_cast<std::uint64_t>(idx[i]);
      if (at >= j.n || seen[at]) throw std::runtime_error{what + ": indices not a permutation"};
      seen[at] = true;
      gathered[i] = k[at];
    }
    const auto v = gpusort::verify(gpusort::key_array{gathered.data(), j.n, j.type},
                                   std::nullopt, gpusort::order::ascending, in.print);
    if (!v.ok) throw std::runtime_error{what + ": " + v.message};
    return;
  }
  std::optional<gpusort::value_array> vals;
  if (j.pairs()) vals = gpusort::value_array{const_cast<std::byte*>(values), j.n, j.value_bytes};
  const auto v = gpusort::verify(gpusort::key_array{const_cast<std::byte*>(keys), j.n, j.type},
                                 vals, gpusort::order::ascending, in.print);
  if (!v.ok) throw std::runtime_error{what + ": " + v.message};
}

/// Latencies of one way of sorting, by layout too.
struct small_timings {
  std::vector<double> all;
  std::array<std::vector<double>, small_kind_names.size()> by_kind;
  void add(const small_job& j, double seconds)
  {
    all.push_back(seconds);
    by_kind[static_cast<int>(j.kind)].push_back(seconds);
  }
  [[nodiscard]] double jobs_per_second() const
  {
    double sum = 0;
    for (const double s : all) sum += s;
    return sum > 0 ? static_cast<double>(all.size()) / sum : 0.0;
  }
};

/// Prints one way's figures and returns them as a JSON object for the results' raw list.
std::string report_small(const char* name, const small_timings& t)
{
  std::printf("%s: %.0f jobs/s, p50 %.3f ms, p99 %.3f ms\n", name, t.jobs_per_second(),
              percentile(t.all, 0.5) * 1e3, percentile(t.all, 0.99) * 1e3);
  std::ostringstream json;
  json << "{\"small_jobs\": {\"path\": \"" << name << "\", \"jobs\": " << t.all.size()
       << ", \"jobs_per_s\": " << t.jobs_per_second()
       << ", \"p50_ms\": " << percentile(t.all, 0.5) * 1e3
       << ", \"p99_ms\": " << percentile(t.all, 0.99) * 1e3 << ", \"p50_ms_by_layout\": {";
  for (std::size_t k = 0; k < small_kind_names.size(); ++k) {
    const double p50 = t.by_kind[k].empty() ? 0.0 : percentile(t.by_kind[k], 0.5);
    std::printf("  %-30s p50 %.3f ms\n", small_kind_names[k], p50 * 1e3);
    json << (k > 0 ? ", " : "") << "\"" << small_kind_names[k] << "\": " << p50 * 1e3;
  }
  json << "}}},";
  return json.str();
}

/// The engine's job for `j` on arrays at `keys` and `values` (values or indices), in place.
void sort_in_process(gpusort::engine& eng, const small_job& j, std::byte* keys, std::byte* values)
{
  if (j.argsort()) {
    eng.argsort({.keys = {keys, j.n, j.type}, .indices_out = values, .index_bytes = 8});
    return;
  }
  gpusort::sort_job job{.keys = {keys, j.n, j.type}};
  if (j.pairs()) job.values = gpusort::value_array{values, j.n, j.value_bytes};
  eng.sort(job, {.stable = j.stable()});
}

int run_small_jobs(const options& o)
{
  if (o.daemon.empty()) throw usage_error{"--daemon GPUSORTD is required"};
  const daemon_process daemon{o.daemon, o.devices, o.pool};
  gpusort::engine local{o.local};
  const std::string devices = local.devices().empty() ? "none" : local.devices().front();
  std::printf("%llu small jobs (1 KiB to 1 MiB, %zu layouts in turn) on %s, one at a time\n",
              static_cast<unsigned long long>(o.small_jobs), small_kind_names.size(),
              devices.c_str());
  // The same jobs for both, layouts in turn from the first job on (that is a daemon's life,
  // not a warm-up apart); all in-process first, then all through the daemon, so that the two
  // processes do not take turns on the GPU.
  const auto each_job = [&](auto&& body) {
    std::mt19937_64 rng{25};
    for (std::uint64_t i = 0; i < o.small_jobs; ++i) {
      const small_job j = small_job_at(i, rng);
      body(j, make_input(j, 100 + i));
    }
  };
  small_timings in_process, through_daemon;
  part("the small jobs in-process", [&] {
    each_job([&](const small_job& j, const small_input& in) {
      // Pageable memory: the GPU engine stages it through its pinned pieces.
      std::vector<std::byte> keys = in.keys;
      std::vector<std::byte> values = j.argsort() ? std::vector<std::byte>(j.n * 8) : in.values;
      const auto t0 = clock_type::now();
      sort_in_process(local, j, keys.data(), values.data());
      in_process.add(j, seconds_since(t0));
      check_small(j, in, keys.data(), values.data(), "in-process");
    });
  });
  part("the small jobs through the daemon", [&] {
    auto conn = gpusort::client::connection::connect(daemon.socket(), "service-bench-small");
    each_job([&](const small_job& j, const small_input& in) {
      // The daemon's shared buffers, which it pinned once when it made them; released after
      // the job, for the pool to hand on, as a client does.
      gpusort::client::shared_buffer k = conn.allocate_bytes(j.key_bytes());
      std::copy(in.keys.begin(), in.keys.end(), k.data());
      gpusort::client::shared_buffer v;
      gpusort::client::sort_request r{.type = j.type,
                                      .count = j.n,
                                      .keys = gpusort::client::array_ref::in(k),
                                      .stable = j.stable()};
      if (j.value_bytes != 0) {
        v = conn.allocate_bytes(j.value_array_bytes());
        if (j.argsort()) {
          r.indices_out = gpusort::client::array_ref::in(v);
          r.index_bytes = 8;
        } else {
          std::copy(in.values.begin(), in.values.end(), v.data());
          r.value_bytes = j.value_bytes;
          r.values = gpusort::client::array_ref::in(v);
        }
      }
      const auto t0 = clock_type::now();
      conn.sort(r);
      through_daemon.add(j, seconds_since(t0));
      check_small(j, in, k.data(), v.data(), "daemon");
    });
  });
  std::vector<target> targets;
  std::ostringstream raw;
  raw << report_small("in-process", in_process) << report_small("daemon", through_daemon);
  // The GPU soak of 051b7d1 ran 17 jobs a second with 64 clients, most of them small; its 64 x
  // 200 jobs of issue 25 want well under the GPU machine's 600 s per command.
  const double rate = through_daemon.jobs_per_second();
  targets.push_back({"service.small_jobs.daemon_jobs_per_s", "jobs/s",
                     "17 jobs/s (GPU soak, 051b7d1, H100)", rate, rate / 17.0, 5.0, true});
  gpusort::bench::report_results(o.results, targets, raw.str(),
                                 {"\"devices\": \"" + o.devices + "\"",
                                  "\"device\": " + gpusort::bench::json_string(devices)});
  return 0;
}

int run(const options& o)
{
  if (o.small_jobs > 0) return run_small_jobs(o);
  if (o.daemon.empty()) throw usage_error{"--daemon GPUSORTD is required"};
  const daemon_process daemon{o.daemon, o.devices, o.pool};
  gpusort::engine local{o.local};
  std::vector<target> targets;
  std::ostringstream raw;

  // Latency of 1 MiB jobs: the same input each time, copied in outside the timed region.
  constexpr std::uint64_t small = (std::uint64_t{1} << 20) / 8;
  std::vector<std::uint64_t> input(small);
  gpusort::generate(std::span<std::uint64_t>{input}, gpusort::distribution::uniform, 7);
  const gpusort::fingerprint small_print =
      gpusort::fingerprint_of(gpusort::key_array{input.data(), small, gpusort::dtype::u64});
  std::vector<double> through_daemon, in_process;
  part("the 1 MiB jobs", [&] {
    auto conn = gpusort::client::connection::connect(daemon.socket(), "service-bench");
    auto keys = conn.allocate<std::uint64_t>(small);
    std::vector<std::uint64_t> scratch(small);
    for (std::uint64_t j = 0; j < o.jobs + 10; ++j) {  // 10 warm-up jobs
      std::copy(input.begin(), input.end(), keys.begin());
      auto t0 = clock_type::now();
      conn.sort(keys);
      const double d = seconds_since(t0);
      std::copy(input.begin(), input.end(), scratch.begin());
      t0 = clock_type::now();
      local.sort(std::span<std::uint64_t>{scratch});
      const double l = seconds_since(t0);
      if (j < 10) continue;
      through_daemon.push_back(d);
      in_process.push_back(l);
      if (j == 10 || j + 1 == o.jobs + 10) {
        check_sorted(keys.data(), small, small_print, "daemon 1 MiB job");
        check_sorted(scratch.data(), small, small_print, "in-process 1 MiB job");
      }
    }
  });
  const double p50 = percentile(through_daemon, 0.5), p99 = percentile(through_daemon, 0.99);
  const double l50 = percentile(in_process, 0.5), l99 = percentile(in_process, 0.99);
  std::printf("1 MiB u64 job, %llu jobs: daemon p50 %.3f ms p99 %.3f ms; in-process p50 %.3f ms "
              "p99 %.3f ms\n",
              static_cast<unsigned long long>(o.jobs), p50 * 1e3, p99 * 1e3, l50 * 1e3, l99 * 1e3);
  targets.push_back({"service.latency_1mib_p50", "ms", "1 ms (issue 5, CPU engine)", p50 * 1e3,
                     p50 * 1e3 / 1.0, 1.0, false});
  raw << "{\"latency_1mib\": {\"daemon_p50_ms\": " << p50 * 1e3 << ", \"daemon_p99_ms\": "
      << p99 * 1e3 << ", \"in_process_p50_ms\": " << l50 * 1e3 << ", \"in_process_p99_ms\": "
      << l99 * 1e3 << "}},";

  // Throughput: many clients at once, each on its own connection and buffer.
  auto run_clients = [&](bool through) {
    std::vector<std::thread> threads;
    std::vector<std::string> errors(o.clients);
    const auto t0 = clock_type::now();
    for (std::uint64_t c = 0; c < o.clients; ++c) {
      threads.emplace_back([&, c] {
        try {
          std::vector<std::uint64_t> mine(small);
          if (through) {
            auto conn = gpusort::client::connection::connect(daemon.socket(), "bench-client");
            auto keys = conn.allocate<std::uint64_t>(small);
            for (std::uint64_t j = 0; j < o.client_jobs; ++j) {
              std::copy(input.begin(), input.end(), keys.begin());
              conn.sort(keys);
            }
            check_sorted(keys.data(), small, small_print, "concurrent daemon job");
          } else {
            for (std::uint64_t j = 0; j < o.client_jobs; ++j) {
              std::copy(input.begin(), input.end(), mine.begin());
              local.sort(std::span<std::uint64_t>{mine});
            }
            check_sorted(mine.data(), small, small_print, "concurrent in-process job");
          }
        } catch (const std::exception& e) {
          errors[c] = e.what();
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (const std::string& e : errors)
      if (!e.empty()) throw std::runtime_error{"a client: " + e};
    return static_cast<double>(o.clients * o.client_jobs) / seconds_since(t0);
  };
  double daemon_rate = 0, local_rate = 0;
  part("the concurrent clients", [&] {
    daemon_rate = run_clients(true);
    local_rate = run_clients(false);
  });
  std::printf("%llu clients x %llu jobs of 1 MiB: daemon %.0f jobs/s, in-process %.0f jobs/s\n",
              static_cast<unsigned long long>(o.clients),
              static_cast<unsigned long long>(o.client_jobs), daemon_rate, local_rate);
  raw << "{\"concurrent\": {\"clients\": " << o.clients << ", \"daemon_jobs_per_s\": "
      << daemon_rate << ", \"in_process_jobs_per_s\": " << local_rate << "}},";

  // A large job: the daemon's overhead against the same sort in-process.
  const std::string tag = gpusort::format_bytes(o.large * 8);
  part("the --large job (" + tag + ")", [&] {
    // The daemon's buffer first: a pool too small for it refuses at once, before the input is
    // made.
    auto conn = gpusort::client::connection::connect(daemon.socket(), "service-bench-large");
    auto keys = [&] {
      try {
        return conn.allocate<std::uint64_t>(o.large);
      } catch (const gpusort::client::error& e) {
        if (e.code() != gpusort::client::status_code::too_large) throw;
        throw std::runtime_error{std::string{e.what()} + " (--pool sets it for this run)"};
      }
    }();
    std::vector<std::uint64_t> big(o.large);
    gpusort::generate(std::span<std::uint64_t>{big}, gpusort::distribution::uniform, 9);
    const gpusort::fingerprint print =
        gpusort::fingerprint_of(gpusort::key_array{big.data(), o.large, gpusort::dtype::u64});
    double best_daemon = 1e30, best_local = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      std::copy(big.begin(), big.end(), keys.begin());
      auto t0 = clock_type::now();
      conn.sort(keys);
      best_daemon = std::min(best_daemon, seconds_since(t0));
      check_sorted(keys.data(), o.large, print, "large daemon job");
      std::vector<std::uint64_t> mine = big;
      t0 = clock_type::now();
      local.sort(std::span<std::uint64_t>{mine});
      best_local = std::min(best_local, seconds_since(t0));
      check_sorted(mine.data(), o.large, print, "large in-process job");
    }
    std::printf("%s u64 job (best of 3): daemon %.3f s, in-process %.3f s, overhead %.1f%%\n",
                tag.c_str(), best_daemon, best_local, 100.0 * (best_daemon / best_local - 1));
    targets.push_back({"service.daemon_overhead." + tag, "time ratio",
                       "the same sort in-process", best_daemon, best_daemon / best_local, 1.03,
                       false});
    raw << "{\"large\": {\"bytes\": " << o.large * 8 << ", \"daemon_s\": " << best_daemon
        << ", \"in_process_s\": " << best_local << "}},";
  });

  gpusort::bench::report_results(o.results, targets, raw.str(),
                                 {"\"devices\": \"" + o.devices + "\""});
  return 0;
}

}  // namespace

int main(int argc, char** argv)
{
  return gpusort::bench::run_main<options>(
      "service_bench", usage, argc, argv,
      {"--daemon", "--devices", "--pool", "--jobs", "--clients", "--client-jobs", "--large",
       "--small-jobs"},
      set_option, run);
}
