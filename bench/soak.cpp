// Load and soak (issue 25 item 5): --clients clients at once, each submitting --jobs mixed jobs
// to one gpusortd (loopback only: a Unix socket) and verifying every result. The mix: every key
// type and distribution, keys alone and pairs (4- and 8-byte values), ascending and descending,
// in place and into separate outputs, stable sorts and argsorts, shared buffers of the daemon's
// pool, sealed memfds and regular files passed as descriptors, and cancels. Sizes from
// --min-size to --max-size bytes of keys: most jobs small (up to 1 MiB), a few medium (up to
// 16 MiB), and the first job of the first --large clients large, the first of all exactly
// --max-size. Every sorted result is checked by order plus a fingerprint of the original
// multiset (core/verify.hpp), an argsort's permutation by gathering the keys with it, and a
// cancelled job's arrays by their fingerprint.
//
// It starts a daemon of its own (--gpusortd, with --devices) on a socket in a temporary folder,
// or uses a running one (--socket). Before the clients come and after they have gone it reads
// the daemon's memory and descriptors from /proc (bench/soak_probe.hpp): the descriptors other
// than the pool's buffers must be back where they were, and the private memory within
// --rss-slack. Prints a summary; exit code 1 on any failure (a wrong result, an unexpected
// error, a leak), 64 on a bad command line. GPUSORT_SOAK_SCALE scales --jobs and --max-size.
#include "bench/bench_cli.hpp"
#include "bench/results_format.hpp"
#include "bench/soak_probe.hpp"
#include "bench/temp_folder.hpp"
#include "core/generate.hpp"
#include "core/verify.hpp"

#include <gpusort/client.hpp>
#include <gpusort/units.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
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

using namespace gpusort;
using clock_type = std::chrono::steady_clock;
using bench::usage_error;

constexpr const char* usage =
    "usage: soak_bench (--gpusortd GPUSORTD [--devices cpu] [--pool 1Gi] | --socket PATH)\n"
    "                  [--clients 64] [--jobs 200] [--min-size 1Ki] [--max-size 256Mi]\n"
    "                  [--large 3] [--cancel-percent 4] [--seed 1] [--rss-slack 128Mi]\n"
    "                  [--json FILE] [--machine NAME] [--commit C]\n"
    "\n"
    "--clients clients at once, --jobs mixed jobs each, against one gpusortd; every result\n"
    "verified; the daemon's memory and descriptors compared before and after.\n"
    "\n"
    "  --gpusortd PATH   start this daemon on a socket in a temporary folder, with\n"
    "  --devices D       its devices key (cpu, auto, [0, 1]) and\n"
    "  --pool SIZE       its pinned_pool_bytes\n"
    "  --socket PATH     use the daemon already listening there instead (same user: its /proc\n"
    "                    entries must be readable)\n"
    "  --clients N       clients at once\n"
    "  --jobs N          jobs per client (times GPUSORT_SOAK_SCALE)\n"
    "  --min-size SIZE   smallest job, bytes of keys\n"
    "  --max-size SIZE   largest job (times GPUSORT_SOAK_SCALE, at least 1 MiB); one job has it\n"
    "  --large N         how many clients start with a large job (--max-size, /2, /4, ...)\n"
    "  --cancel-percent P  jobs cancelled right after they are submitted\n"
    "  --seed S          the mix and the data\n"
    "  --rss-slack SIZE  how much more private memory the daemon may hold afterwards (640 MiB\n"
    "                    in a sanitizer build)\n"
    "  --json FILE       write the results (bench/results_format.hpp)\n";

struct options {
  std::string gpusortd, socket, devices = "cpu", pool = "1Gi";
  std::uint64_t clients = 64, jobs = 200, min_size = 1024, max_size = std::uint64_t{256} << 20;
  std::uint64_t large = 3, cancel_percent = 4, seed = 1;
  std::uint64_t rss_slack = soak::rss_slack(std::uint64_t{128} << 20);
  bench::results_options results;
};

std::uint64_t size_value(std::string_view flag, const std::string& text)
{
  const auto v = parse_bytes(text);
  if (!v || *v == 0) throw usage_error{std::string{flag} + ": bad size '" + text + "'"};
  return *v;
}

void set_option(options& o, std::string_view flag, const std::string& value)
{
  if (flag == "--gpusortd") o.gpusortd = value;
  else if (flag == "--socket") o.socket = value;
  else if (flag == "--devices") o.devices = value;
  else if (flag == "--pool") o.pool = value;
  else if (flag == "--clients") o.clients = bench::parse_one_count(flag, value, 4096);
  else if (flag == "--jobs") o.jobs = bench::parse_one_count(flag, value);
  else if (flag == "--min-size") o.min_size = size_value(flag, value);
  else if (flag == "--max-size") o.max_size = size_value(flag, value);
  else if (flag == "--large") o.large = std::stoull(value);
  else if (flag == "--cancel-percent") o.cancel_percent = bench::parse_one_count(flag, value, 100);
  else if (flag == "--seed") o.seed = std::stoull(value);
  else if (flag == "--rss-slack") o.rss_slack = size_value(flag, value);
}

/// The daemon the soak started: a child on a socket in `dir`, logging to dir/gpusortd.log,
/// stopped with SIGTERM (its drain checked) when the soak ends.
class own_daemon {
 public:
  own_daemon(const options& o, const std::string& dir)
      : socket_{dir + "/gpusortd.sock"}, log_{dir + "/gpusortd.log"}
  {
    const std::string config = dir + "/gpusortd.yaml";
    // As many jobs queued as there are clients: the soak measures service, not refusals.
    std::ofstream{config} << "devices: " << o.devices << "\nsocket: " << socket_
                          << "\npinned_pool_bytes: " << o.pool << "\nmax_queued_jobs: "
                          << std::max<std::uint64_t>(64, o.clients)
                          << "\nmax_connections: " << std::max<std::uint64_t>(128, 2 * o.clients)
                          << "\nlog_level: info\n";
    pid_ = ::fork();
    if (pid_ < 0) throw std::system_error{errno, std::generic_category(), "fork"};
    if (pid_ == 0) {
      const int out = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      ::dup2(out, STDERR_FILENO);
      ::dup2(out, STDOUT_FILENO);
      ::execl(o.gpusortd.c_str(), o.gpusortd.c_str(), "--config", config.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
    for (int attempt = 0;; ++attempt) {
      try {
        client::connection::connect(socket_, "soak-probe");
        return;
      } catch (const client::error&) {
        if (exited() || attempt == 1200) {
          stop();
          throw std::runtime_error{o.gpusortd + " did not start; its log:\n" + log()};
        }
        std::this_thread::sleep_for(std::chrono::milliseconds{50});
      }
    }
  }
  ~own_daemon() { stop(); }
  own_daemon(const own_daemon&) = delete;
  own_daemon& operator=(const own_daemon&) = delete;

  [[nodiscard]] const std::string& socket() const noexcept { return socket_; }
  [[nodiscard]] std::string log() const
  {
    std::ifstream in{log_};
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  /// Whether it has exited (a crash, a signal): then it is no longer stopped at the end.
  bool exited()
  {
    int status = 0;
    if (pid_ > 0 && ::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      exit_text_ = WIFEXITED(status) ? "exit code " + std::to_string(WEXITSTATUS(status))
                                     : "signal " + std::to_string(WTERMSIG(status));
    }
    return pid_ <= 0;
  }
  [[nodiscard]] const std::string& exit_text() const noexcept { return exit_text_; }
  /// SIGTERM and wait; the exit code (0 after a clean drain), -1 when it had already gone.
  int stop() noexcept
  {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  std::string socket_, log_, exit_text_;
  pid_t pid_{-1};
};

// ---- one job ---------------------------------------------------------------------------------

enum class storage : std::uint8_t { pool, memfd, file };
enum class kind : std::uint8_t { sort, stable, argsort };

struct job_spec {
  dtype type{};
  std::uint64_t count{};
  std::uint32_t value_bytes{};
  order direction{};
  distribution dist{};
  kind what{};
  bool in_place{};
  bool cancel{};
  storage where{};
  float_order floats{float_order::total};
  [[nodiscard]] std::uint64_t key_bytes() const { return count * size_of(type); }
  [[nodiscard]] std::uint64_t input_bytes() const { return count * (size_of(type) + value_bytes); }
};

struct totals {
  std::uint64_t jobs{}, verified{}, cancelled{}, busy_retries{}, errors{}, bytes{};
  std::uint64_t small{}, medium{}, large{}, pairs{}, argsorts{}, stables{}, memfds{}, files{};
  std::vector<double> latencies;  ///< seconds from SUBMIT to JOB_FINISHED
  std::vector<std::string> failures;
};

constexpr std::uint64_t mib = std::uint64_t{1} << 20;

job_spec pick(std::mt19937_64& rng, const options& o, std::uint64_t client, std::uint64_t index,
              std::uint64_t max_size)
{
  const auto chance = [&](std::uint64_t percent) { return rng() % 100 < percent; };
  job_spec s;
  s.type = all_dtypes[rng() % std::size(all_dtypes)];
  std::uint64_t bytes = 0;
  const std::uint64_t small_max = std::min(mib, max_size);
  const auto log_uniform = [&](std::uint64_t lo, std::uint64_t hi) {
    lo = std::min(lo, hi);
    const double a = std::log2(static_cast<double>(lo)), b = std::log2(static_cast<double>(hi));
    const double x = a + (b - a) * static_cast<double>(rng() % 1'000'000) / 1e6;
    return static_cast<std::uint64_t>(std::exp2(x));
  };
  if (index == 0 && client < o.large) {
    bytes = std::max<std::uint64_t>(max_size >> client, std::min(max_size, 16 * mib));
  } else if (chance(2) && max_size > mib) {
    bytes = log_uniform(mib, std::min(max_size, 16 * mib));
  } else {
    bytes = log_uniform(o.min_size, small_max);
  }
  const bool large = bytes > 16 * mib;
  s.what = large || !chance(10) ? kind::sort : chance(50) ? kind::stable : kind::argsort;
  if (s.what != kind::argsort && chance(30)) s.value_bytes = chance(50) ? 4 : 8;
  if (s.what != kind::sort && is_float(s.type) && chance(50)) s.floats = float_order::numpy;
  // The size is the input's: keys and values together.
  s.count = std::max<std::uint64_t>(1, bytes / (size_of(s.type) + s.value_bytes));
  s.direction = chance(50) ? order::ascending : order::descending;
  std::vector<distribution> dists;
  for (const distribution d : all_distributions)
    if (applies_to(d, s.type)) dists.push_back(d);
  s.dist = dists[rng() % dists.size()];
  if (index == 0 && client == 0) {  // one job of exactly --max-size: u64 keys alone
    s.type = dtype::u64;
    s.value_bytes = 0;
    s.what = kind::sort;
    s.count = max_size / 8;
    s.dist = distribution::uniform;
  }
  s.in_place = s.what != kind::argsort && chance(50);
  s.cancel = chance(o.cancel_percent);
  s.where = storage::pool;
  if (s.input_bytes() <= 4 * mib && chance(15))
    s.where = chance(60) ? storage::memfd : storage::file;
  return s;
}

/// Memory a job's arrays live in: a pool buffer, a sealed memfd or a file (read back into
/// `bytes` for checking), and the array_ref that names it.
class job_memory {
 public:
  job_memory(client::connection& c, storage where, std::uint64_t size, const std::string& path,
             std::uint64_t& busy_retries)
      : where_{where}, size_{std::max<std::uint64_t>(size, 1)}
  {
    if (where_ == storage::pool) {
      for (int attempt = 0;; ++attempt) {
        try {
          buffer_ = c.allocate_bytes(size_);
          data_ = buffer_.data();
          return;
        } catch (const client::error& e) {
          // The pool is in use by the other clients' jobs: come back, as a client should.
          if (e.code() != client::status_code::rejected_busy || attempt == 6000) throw;
          ++busy_retries;
          std::this_thread::sleep_for(std::chrono::milliseconds{10});
        }
      }
    }
    if (where_ == storage::memfd) {
      fd_ = ::memfd_create("soak", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    } else {
      path_ = path;
      fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    }
    if (fd_ < 0 || ::ftruncate(fd_, static_cast<off_t>(size_)) != 0)
      throw std::system_error{errno, std::generic_category(), "making the job's memory"};
    if (where_ == storage::memfd &&
        ::fcntl(fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0)
      throw std::system_error{errno, std::generic_category(), "sealing a memfd"};
    void* p = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (p == MAP_FAILED) throw std::system_error{errno, std::generic_category(), "mmap"};
    data_ = static_cast<std::byte*>(p);
  }
  ~job_memory()
  {
    if (where_ != storage::pool) {
      ::munmap(data_, size_);
      ::close(fd_);
      if (!path_.empty()) ::unlink(path_.c_str());
    }
  }
  job_memory(const job_memory&) = delete;
  job_memory& operator=(const job_memory&) = delete;

  [[nodiscard]] std::byte* data() const noexcept { return data_; }
  [[nodiscard]] client::array_ref at(std::uint64_t offset) const
  {
    return where_ == storage::pool ? client::array_ref::in(buffer_, offset)
                                   : client::array_ref::of_fd(fd_, offset);
  }

 private:
  storage where_;
  std::uint64_t size_;
  client::shared_buffer buffer_;
  int fd_{-1};
  std::string path_;
  std::byte* data_{};
};

/// Checks an argsort's indices: a permutation of [0, n), the keys gathered by it in order, and
/// equal keys by position. Empty when right, else what is wrong.
std::string check_argsort(const job_spec& s, const std::byte* keys, const std::byte* indices,
                          std::uint32_t index_bytes)
{
  const std::uint64_t n = s.count, kb = size_of(s.type);
  std::vector<bool> seen(n);
  std::vector<std::byte> gathered(n * kb);
  std::uint64_t previous = 0;
  for (std::uint64_t i = 0; i < n; ++i) {
    std::uint64_t idx = 0;
    std::memcpy(&idx, indices + i * index_bytes, index_bytes);  // little-endian
    if (idx >= n || seen[idx]) return "index " + std::to_string(i) + " repeats or is out of range";
    seen[idx] = true;
    std::memcpy(gathered.data() + i * kb, keys + idx * kb, kb);
    // Keys of the same bits compare equal in either float order: they come by position.
    if (i > 0 && idx < previous &&
        std::memcmp(gathered.data() + i * kb, gathered.data() + (i - 1) * kb, kb) == 0)
      return "equal keys out of input order at " + std::to_string(i);
    previous = idx;
  }
  const order_check o = check_order(key_array{gathered.data(), n, s.type}, s.direction, s.floats);
  if (!o.ok) return "keys by the indices out of order at " + std::to_string(o.first_violation);
  return {};
}

/// Runs one job and checks it; returns what went wrong, empty when nothing did.
std::string run_job(client::connection& c, const job_spec& s, std::uint64_t seed,
                    const std::string& scratch, totals& t)
{
  const std::uint64_t kb = s.key_bytes(), vb = s.count * s.value_bytes;
  const std::uint32_t index_bytes = s.count < (std::uint64_t{1} << 32) && seed % 2 ? 4 : 8;
  const std::uint64_t ib = s.what == kind::argsort ? s.count * index_bytes : 0;
  // One region for everything, each array at a multiple of 8 bytes: input keys and values,
  // then the outputs.
  const auto align = [](std::uint64_t b) { return (b + 7) / 8 * 8; };
  const std::uint64_t values_at = align(kb), out_at = align(values_at + vb);
  const std::uint64_t out_values_at = align(out_at + kb), indices_at = out_values_at;
  const std::uint64_t total = s.in_place ? values_at + vb : out_values_at + std::max(vb, ib);
  job_memory mem{c, s.where, total, scratch + "/job-" + std::to_string(seed), t.busy_retries};
  std::byte* keys = mem.data();
  std::byte* values = s.value_bytes != 0 ? keys + values_at : nullptr;
  generate(key_array{keys, s.count, s.type}, s.dist, seed);
  std::optional<value_array> v;
  if (values != nullptr) {
    v = value_array{values, s.count, s.value_bytes};
    generate_values(*v, seed);
  }
  const fingerprint before = fingerprint_of(key_array{keys, s.count, s.type}, v);
  client::sort_request r{.type = s.type,
                         .count = s.count,
                         .direction = s.direction,
                         .keys = mem.at(0),
                         .stable = s.what == kind::stable,
                         .floats = s.floats};
  if (values != nullptr) {
    r.value_bytes = s.value_bytes;
    r.values = mem.at(values_at);
  }
  std::byte* out_keys = keys;
  std::byte* out_values = values;
  std::byte* out_indices = nullptr;
  if (s.what == kind::argsort) {
    out_indices = keys + indices_at;
    r.indices_out = mem.at(indices_at);
    r.index_bytes = index_bytes;
    if (seed % 3 == 0) {
      out_keys = keys + out_at;
      r.keys_out = mem.at(out_at);
    }
  } else if (!s.in_place) {
    out_keys = keys + out_at;
    r.keys_out = mem.at(out_at);
    if (values != nullptr) {
      out_values = keys + out_values_at;
      r.values_out = mem.at(out_values_at);
    }
  }
  const auto start = clock_type::now();
  client::job j;
  for (int attempt = 0;; ++attempt) {
    try {
      j = c.submit(r);
      break;
    } catch (const client::error& e) {
      if (e.code() != client::status_code::rejected_busy || attempt == 6000) throw;
      ++t.busy_retries;
      std::this_thread::sleep_for(std::chrono::milliseconds{10});
    }
  }
  if (s.cancel) j.cancel();
  bool cancelled = false;
  try {
    j.wait();
  } catch (const client::error& e) {
    if (!s.cancel || e.code() != client::status_code::cancelled) throw;
    cancelled = true;
  }
  t.latencies.push_back(std::chrono::duration<double>(clock_type::now() - start).count());
  // Whatever happened, the input holds the same pairs (in place: maybe in another order).
  const fingerprint input_now = fingerprint_of(key_array{keys, s.count, s.type}, v);
  if (cancelled) {
    ++t.cancelled;
    if (input_now != before) return "a cancelled job's input lost its pairs";
    return {};
  }
  if (s.what == kind::argsort) {
    if (input_now != before) return "an argsort wrote its keys";
    if (std::string e = check_argsort(s, keys, out_indices, index_bytes); !e.empty()) return e;
    if (out_keys != keys) {
      const verify_result k =
          verify(key_array{out_keys, s.count, s.type}, std::nullopt, s.direction, before,
                 s.floats);
      if (!k.ok) return "argsort keys_out: " + k.message;
    }
  } else {
    if (!s.in_place && input_now != before) return "a separate-output job wrote its input";
    std::optional<value_array> out_v;
    if (out_values != nullptr) out_v = value_array{out_values, s.count, s.value_bytes};
    const verify_result k =
        verify(key_array{out_keys, s.count, s.type}, out_v, s.direction, before, s.floats);
    if (!k.ok) return k.message;
  }
  ++t.verified;
  t.bytes += kb + vb;
  return {};
}

std::string describe(const job_spec& s)
{
  return std::string{name_of(s.type)} + " x " + std::to_string(s.count) +
         (s.value_bytes != 0 ? " pairs(" + std::to_string(s.value_bytes) + ")" : "") +
         (s.what == kind::argsort ? " argsort" : s.what == kind::stable ? " stable" : "") +
         (s.in_place ? " in place" : " separate") + " " + std::string{name_of(s.dist)} +
         (s.where == storage::memfd ? " memfd" : s.where == storage::file ? " file" : " pool") +
         (s.cancel ? " cancelled" : "");
}

void client_loop(const options& o, const std::string& socket, const std::string& scratch,
                 std::uint64_t client, std::uint64_t jobs, std::uint64_t max_size, totals& t)
{
  std::mt19937_64 rng{o.seed * 0x9E3779B97F4A7C15ULL + client};
  try {
    auto c = client::connection::connect(socket, "soak " + std::to_string(client));
    for (std::uint64_t i = 0; i < jobs; ++i) {
      const job_spec s = pick(rng, o, client, i, max_size);
      const std::uint64_t seed = rng();
      ++t.jobs;
      const std::uint64_t in = s.input_bytes();
      (in > 16 * mib ? t.large : in > mib ? t.medium : t.small) += 1;
      t.pairs += s.value_bytes != 0;
      t.argsorts += s.what == kind::argsort;
      t.stables += s.what == kind::stable;
      t.memfds += s.where == storage::memfd;
      t.files += s.where == storage::file;
      std::string failure;
      try {
        failure = run_job(c, s, seed, scratch, t);
      } catch (const std::exception& e) {
        failure = e.what();
      }
      if (!failure.empty()) {
        ++t.errors;
        t.failures.push_back("client " + std::to_string(client) + " job " + std::to_string(i) +
                             " (" + describe(s) + "): " + failure);
        if (!c.is_open()) return;
      }
    }
  } catch (const std::exception& e) {
    ++t.errors;
    t.failures.push_back("client " + std::to_string(client) + ": " + e.what());
  }
}

/// The daemon's usage with no client but the one asking (sessions close asynchronously after
/// their clients leave), that connection's descriptor not counted.
soak::process_usage quiet_usage(const std::string& socket, pid_t pid)
{
  auto c = client::connection::connect(socket, "soak-probe");
  for (const auto end = clock_type::now() + std::chrono::seconds{30};
       c.status().clients > 1 && clock_type::now() < end;)
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  soak::process_usage u = soak::usage_of(pid);
  if (u.fds > 0) --u.fds;
  return u;
}

double percentile(std::vector<double> v, double p)
{
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto i = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size()))) - 1;
  return v[std::min(i, v.size() - 1)];
}

int run(const options& o)
{
  if (o.gpusortd.empty() == o.socket.empty())
    throw usage_error{"give either --gpusortd (start a daemon) or --socket (use a running one)"};
  if (o.min_size > o.max_size) throw usage_error{"--min-size is larger than --max-size"};
  const std::uint64_t jobs = soak::scaled(o.jobs);
  const std::uint64_t max_size =
      std::max(mib, static_cast<std::uint64_t>(static_cast<double>(o.max_size) *
                                               std::min(1.0, soak::soak_scale())));
  bench::temp_folder dir{"gpusort-soak"};
  std::optional<own_daemon> daemon;
  std::string socket = o.socket;
  if (!o.gpusortd.empty()) {
    daemon.emplace(o, dir.path());
    socket = daemon->socket();
  }
  const client::server_info server = client::connection::connect(socket, "soak-probe").server();
  const auto pid = static_cast<pid_t>(server.pid);
  std::string devices;
  for (const std::string& d : server.devices) devices += (devices.empty() ? "" : ",") + d;
  std::printf("soak: %llu clients x %llu jobs, sizes %s to %s, %llu large, seed %llu, on %s "
              "(pid %d, %s)\n",
              static_cast<unsigned long long>(o.clients), static_cast<unsigned long long>(jobs),
              format_bytes(o.min_size).c_str(), format_bytes(max_size).c_str(),
              static_cast<unsigned long long>(o.large), static_cast<unsigned long long>(o.seed),
              socket.c_str(), static_cast<int>(pid), devices.c_str());
  std::fflush(stdout);
  // A first job so that the daemon's threads and first allocations are in the baseline.
  {
    totals warm;
    client_loop(o, socket, dir.path(), o.clients, 1, mib, warm);
    if (warm.errors != 0) throw std::runtime_error{"the warm-up job failed: " + warm.failures[0]};
  }
  const soak::process_usage before = quiet_usage(socket, pid);

  const auto start = clock_type::now();
  std::vector<totals> per_client(o.clients);
  {
    std::vector<std::thread> threads;
    for (std::uint64_t i = 0; i < o.clients; ++i)
      threads.emplace_back(client_loop, std::cref(o), std::cref(socket), std::cref(dir.path()),
                           i, jobs, max_size, std::ref(per_client[i]));
    for (std::thread& t : threads) t.join();
  }
  const double wall = std::chrono::duration<double>(clock_type::now() - start).count();

  totals all;
  for (totals& t : per_client) {
    all.jobs += t.jobs, all.verified += t.verified, all.cancelled += t.cancelled;
    all.busy_retries += t.busy_retries, all.errors += t.errors, all.bytes += t.bytes;
    all.small += t.small, all.medium += t.medium, all.large += t.large, all.pairs += t.pairs;
    all.argsorts += t.argsorts, all.stables += t.stables, all.memfds += t.memfds;
    all.files += t.files;
    all.latencies.insert(all.latencies.end(), t.latencies.begin(), t.latencies.end());
    all.failures.insert(all.failures.end(), t.failures.begin(), t.failures.end());
  }
  bool daemon_died = daemon && daemon->exited();
  soak::process_usage after;
  if (!daemon_died) after = quiet_usage(socket, pid);

  const auto ull = [](std::uint64_t v) { return static_cast<unsigned long long>(v); };
  std::printf("jobs %llu: verified %llu, cancelled %llu, errors %llu; busy retries %llu\n",
              ull(all.jobs), ull(all.verified), ull(all.cancelled), ull(all.errors),
              ull(all.busy_retries));
  std::printf("mix: %llu small (<= 1 MiB), %llu medium, %llu large (> 16 MiB); %llu pairs, "
              "%llu stable, %llu argsort; %llu memfd, %llu file\n",
              ull(all.small), ull(all.medium), ull(all.large), ull(all.pairs), ull(all.stables),
              ull(all.argsorts), ull(all.memfds), ull(all.files));
  std::printf("latency p50 %.4f s, p99 %.4f s, max %.4f s; %s verified in %.1f s\n",
              percentile(all.latencies, 0.5), percentile(all.latencies, 0.99),
              percentile(all.latencies, 1.0), format_bytes(all.bytes).c_str(), wall);
  std::printf("daemon before: rss %s (anon %s, shmem %s), hwm %s, fds %llu (%llu pool)\n",
              soak::mib(before.vm_rss).c_str(), soak::mib(before.rss_anon).c_str(),
              soak::mib(before.rss_shmem).c_str(), soak::mib(before.vm_hwm).c_str(),
              ull(before.fds), ull(before.pool_fds));
  if (!daemon_died)
    std::printf("daemon after:  rss %s (anon %s, shmem %s), hwm %s, fds %llu (%llu pool)\n",
                soak::mib(after.vm_rss).c_str(), soak::mib(after.rss_anon).c_str(),
                soak::mib(after.rss_shmem).c_str(), soak::mib(after.vm_hwm).c_str(),
                ull(after.fds), ull(after.pool_fds));
  constexpr std::size_t shown = 20;
  for (std::size_t i = 0; i < std::min(shown, all.failures.size()); ++i)
    std::printf("FAILED: %s\n", all.failures[i].c_str());
  if (all.failures.size() > shown)
    std::printf("... and %zu more failures\n", all.failures.size() - shown);

  std::vector<std::string> problems;
  if (daemon_died) problems.push_back("the daemon died (" + daemon->exit_text() + ")");
  if (all.errors != 0) problems.push_back(std::to_string(all.errors) + " job(s) failed");
  if (all.verified + all.cancelled != all.jobs)
    problems.push_back("not every job was verified or cancelled");
  if (!daemon_died && after.other_fds() != before.other_fds())
    problems.push_back("the daemon's descriptors (the pool's apart) went from " +
                       std::to_string(before.other_fds()) + " to " +
                       std::to_string(after.other_fds()) + ":\n" + soak::fd_listing(pid));
  if (!daemon_died && after.rss_anon > before.rss_anon + o.rss_slack)
    problems.push_back("the daemon's private memory grew from " + soak::mib(before.rss_anon) +
                       " to " + soak::mib(after.rss_anon));
  if (daemon && !daemon_died) {
    const int code = daemon->stop();
    if (code != 0)
      problems.push_back("the daemon did not stop cleanly on SIGTERM (" + std::to_string(code) +
                         ")");
  }

  std::vector<bench::target> targets{
      {.name = "soak jobs failed",
       .unit = "jobs",
       .baseline = "0",
       .value = static_cast<double>(all.errors),
       .ratio = static_cast<double>(all.errors),
       .goal = 0,
       .higher_is_better = false},
      {.name = "daemon descriptors after - before (pool apart)",
       .unit = "fds",
       .baseline = std::to_string(before.other_fds()),
       .value = static_cast<double>(after.other_fds()),
       .ratio = static_cast<double>(after.other_fds()) - static_cast<double>(before.other_fds()),
       .goal = 0,
       .higher_is_better = false},
      {.name = "daemon private memory after - before",
       .unit = "MiB",
       .baseline = soak::mib(before.rss_anon),
       .value = static_cast<double>(after.rss_anon) / static_cast<double>(mib),
       .ratio = (static_cast<double>(after.rss_anon) - static_cast<double>(before.rss_anon)) /
                static_cast<double>(mib),
       .goal = static_cast<double>(o.rss_slack) / static_cast<double>(mib),
       .higher_is_better = false}};
  std::ostringstream raw;
  raw << "{\"clients\": " << o.clients << ", \"jobs_per_client\": " << jobs
      << ", \"max_size\": " << max_size << ", \"seed\": " << o.seed
      << ", \"devices\": " << bench::json_string(devices) << ", \"jobs\": " << all.jobs
      << ", \"verified\": " << all.verified << ", \"cancelled\": " << all.cancelled
      << ", \"errors\": " << all.errors << ", \"busy_retries\": " << all.busy_retries
      << ", \"bytes\": " << all.bytes << ", \"wall_seconds\": " << wall
      << ", \"latency_p50\": " << percentile(all.latencies, 0.5)
      << ", \"latency_p99\": " << percentile(all.latencies, 0.99)
      << ", \"rss_before\": " << before.vm_rss << ", \"rss_after\": " << after.vm_rss
      << ", \"hwm_after\": " << after.vm_hwm << ", \"rss_anon_before\": " << before.rss_anon
      << ", \"rss_anon_after\": " << after.rss_anon << ", \"fds_before\": " << before.fds
      << ", \"fds_after\": " << after.fds << "},";
  bench::report_results(o.results, targets, raw.str());
  for (const std::string& p : problems) std::fprintf(stderr, "soak: %s\n", p.c_str());
  if (!problems.empty() && daemon) {
    std::string log = daemon->log();
    constexpr std::size_t keep = 20000;  // the end of it: what led to the failure
    if (log.size() > keep) log = "...\n" + log.substr(log.size() - keep);
    std::fprintf(stderr, "the daemon's log:\n%s\n", log.c_str());
  }
  std::printf("soak: %s\n", problems.empty() ? "PASSED" : "FAILED");
  return problems.empty() ? 0 : bench::exit_failed;
}

}  // namespace

int main(int argc, char** argv)
{
  return bench::run_main<options>(
      "soak_bench", usage, argc, argv,
      {"--gpusortd", "--socket", "--devices", "--pool", "--clients", "--jobs", "--min-size",
       "--max-size", "--large", "--cancel-percent", "--seed", "--rss-slack"},
      set_option, run);
}
