// Service benchmark (issue 5): what going through gpusortd costs next to sorting in-process.
// Starts the daemon given as --daemon on a socket in a temporary folder, with the engine of
// --devices (cpu by default, as the targets are stated for the CPU engine), then measures:
//   - latency of a 1 MiB u64 job through the daemon, p50 and p99 over --jobs jobs, and the same
//     sort in-process on an engine of the same configuration;
//   - throughput of --clients concurrent clients submitting small jobs, and the same number of
//     threads sorting in-process on one engine;
//   - a --large job (1 GiB by default) through the daemon and in-process: the daemon's overhead.
// Every result is checked (sorted, and the same multiset by fingerprint). Writes the results
// format of bench/results_format.hpp.
//
//   service_bench --daemon build/release/service/gpusortd [--devices cpu] [--jobs 1000]
//                 [--clients 32] [--client-jobs 20] [--large 1Gi] [--json FILE]
//                 [--machine NAME] [--commit C]
#include "bench/results_format.hpp"
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
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
using gpusort::bench::target;

double seconds_since(clock_type::time_point t0)
{
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

[[noreturn]] void fail(const std::string& what)
{
  std::fprintf(stderr, "service_bench: %s\n", what.c_str());
  std::exit(1);
}

void check_sorted(std::uint64_t* keys, std::uint64_t n, const gpusort::fingerprint& before,
                  const char* what)
{
  const auto v = gpusort::verify(gpusort::key_array{keys, n, gpusort::dtype::u64}, std::nullopt,
                                 gpusort::order::ascending, before);
  if (!v.ok) fail(std::string{what} + ": " + v.message);
}

double percentile(std::vector<double> samples, double p)
{
  std::sort(samples.begin(), samples.end());
  const auto i = static_cast<std::size_t>(p * static_cast<double>(samples.size() - 1) + 0.5);
  return samples[std::min(i, samples.size() - 1)];
}

/// gpusortd as a child process on a private socket; SIGTERM and wait when destroyed.
class daemon_process {
 public:
  daemon_process(const std::string& exe, const std::string& devices)
  {
    char dir_template[] = "/tmp/gpusort-bench-XXXXXX";
    if (mkdtemp(dir_template) == nullptr) fail("cannot make a temporary folder");
    dir_ = dir_template;
    socket_ = dir_ + "/gpusortd.sock";
    const std::string config = dir_ + "/gpusortd.yaml";
    std::ofstream{config} << "devices: " << devices << "\nsocket: " << socket_
                          << "\nlog_level: warn\n";
    pid_ = fork();
    if (pid_ < 0) fail("fork failed");
    if (pid_ == 0) {
      execl(exe.c_str(), exe.c_str(), "--config", config.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int attempt = 0;; ++attempt) {  // until it listens
      try {
        gpusort::client::connection::connect(socket_, "service-bench-probe");
        return;
      } catch (const gpusort::client::error&) {
        int status = 0;
        if (waitpid(pid_, &status, WNOHANG) == pid_) fail("gpusortd exited at start");
        if (attempt == 600) fail("gpusortd did not start listening within 30 s");
        std::this_thread::sleep_for(std::chrono::milliseconds{50});
      }
    }
  }
  ~daemon_process()
  {
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  daemon_process(const daemon_process&) = delete;
  daemon_process& operator=(const daemon_process&) = delete;

  [[nodiscard]] const std::string& socket() const noexcept { return socket_; }

 private:
  std::string dir_, socket_;
  pid_t pid_{-1};
};

struct options {
  std::string daemon, devices = "cpu", json, machine = "unknown", commit = "unknown";
  std::uint64_t jobs = 1000, clients = 32, client_jobs = 20;
  std::uint64_t large = std::uint64_t{1} << 27;  // u64 keys: 1 GiB
};

options parse(int argc, char** argv)
{
  options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    auto count = [&] {
      const auto c = gpusort::parse_count(v);
      if (!c) fail("bad count " + v);
      return *c;
    };
    if (a == "--daemon") o.daemon = v;
    else if (a == "--devices") o.devices = v;
    else if (a == "--jobs") o.jobs = count();
    else if (a == "--clients") o.clients = count();
    else if (a == "--client-jobs") o.client_jobs = count();
    else if (a == "--large") o.large = count() / 8;
    else if (a == "--json") o.json = v;
    else if (a == "--machine") o.machine = v;
    else if (a == "--commit") o.commit = v;
    else fail("unknown argument " + a);
  }
  if (o.daemon.empty()) fail("--daemon PATH (gpusortd) is required");
  return o;
}

}  // namespace

int main(int argc, char** argv)
{
  const options o = parse(argc, argv);
  const daemon_process daemon{o.daemon, o.devices};
  gpusort::config cfg = gpusort::parse_config("devices: " + o.devices + "\n");
  gpusort::engine local{cfg};
  std::vector<target> targets;
  std::ostringstream raw;

  // Latency of 1 MiB jobs: the same input each time, copied in outside the timed region.
  constexpr std::uint64_t small = (std::uint64_t{1} << 20) / 8;
  std::vector<std::uint64_t> input(small);
  gpusort::generate(std::span<std::uint64_t>{input}, gpusort::distribution::uniform, 7);
  const gpusort::fingerprint small_print =
      gpusort::fingerprint_of(gpusort::key_array{input.data(), small, gpusort::dtype::u64});
  std::vector<double> through_daemon, in_process;
  {
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
  }
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
      if (!e.empty()) fail("client: " + e);
    return static_cast<double>(o.clients * o.client_jobs) / seconds_since(t0);
  };
  const double daemon_rate = run_clients(true), local_rate = run_clients(false);
  std::printf("%llu clients x %llu jobs of 1 MiB: daemon %.0f jobs/s, in-process %.0f jobs/s\n",
              static_cast<unsigned long long>(o.clients),
              static_cast<unsigned long long>(o.client_jobs), daemon_rate, local_rate);
  raw << "{\"concurrent\": {\"clients\": " << o.clients << ", \"daemon_jobs_per_s\": "
      << daemon_rate << ", \"in_process_jobs_per_s\": " << local_rate << "}},";

  // A large job: the daemon's overhead against the same sort in-process.
  {
    std::vector<std::uint64_t> big(o.large);
    gpusort::generate(std::span<std::uint64_t>{big}, gpusort::distribution::uniform, 9);
    const gpusort::fingerprint print =
        gpusort::fingerprint_of(gpusort::key_array{big.data(), o.large, gpusort::dtype::u64});
    auto conn = gpusort::client::connection::connect(daemon.socket(), "service-bench-large");
    auto keys = conn.allocate<std::uint64_t>(o.large);
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
    const std::string tag = gpusort::format_bytes(o.large * 8);
    std::printf("%s u64 job (best of 3): daemon %.3f s, in-process %.3f s, overhead %.1f%%\n",
                tag.c_str(), best_daemon, best_local, 100.0 * (best_daemon / best_local - 1));
    targets.push_back({"service.daemon_overhead." + tag, "time ratio",
                       "the same sort in-process", best_daemon, best_daemon / best_local, 1.03,
                       false});
    raw << "{\"large\": {\"bytes\": " << o.large * 8 << ", \"daemon_s\": " << best_daemon
        << ", \"in_process_s\": " << best_local << "}},";
  }

  gpusort::bench::print_targets(targets);
  if (!o.json.empty()) {
    std::string r = raw.str();
    if (!r.empty()) r.pop_back();
    gpusort::bench::write_results(o.json, o.commit, o.machine, targets, r,
                                  {"\"devices\": \"" + o.devices + "\""});
  }
  return 0;
}
