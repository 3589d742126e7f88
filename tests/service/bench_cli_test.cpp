// The benchmarks as a new user meets them (issue 25): --help answers without a GPU or a daemon,
// a bad command line is one line and exit code 64, and a failure while running is one line and
// exit code 1, never an abort; service_bench stops its daemon and removes its folder then. The
// GPU benchmarks run with no GPU visible (CUDA_VISIBLE_DEVICES empty), on any host.
#include "tests/service/fd_test_support.hpp"

#include <gtest/gtest.h>

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpusort::service::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

struct finished {
  int code{-1};  ///< exit code; -1: killed by a signal, or still writing after the deadline
  std::string out, err;
};

/// Runs `argv` with `env` added to the environment and reads its stdout and stderr to their
/// end: a child that leaves a process behind holding them open (a daemon it did not stop) is
/// cut off at `deadline` and counts as a failure.
finished run(const std::vector<std::string>& argv, const std::vector<std::string>& env = {},
             std::chrono::seconds deadline = 120s)
{
  int out[2], err[2];
  EXPECT_EQ(::pipe2(out, O_CLOEXEC), 0);
  EXPECT_EQ(::pipe2(err, O_CLOEXEC), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(err[1], STDERR_FILENO);
    for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  finished f;
  const unique_fd o{out[0]}, e{err[0]};
  const auto end = std::chrono::steady_clock::now() + deadline;
  bool open_out = true, open_err = true;
  while ((open_out || open_err) && std::chrono::steady_clock::now() < end) {
    pollfd p[2] = {{.fd = open_out ? o.get() : -1, .events = POLLIN, .revents = 0},
                   {.fd = open_err ? e.get() : -1, .events = POLLIN, .revents = 0}};
    if (::poll(p, 2, 100) <= 0) continue;
    char buf[4096];
    for (int i = 0; i < 2; ++i) {
      if (p[i].revents == 0) continue;
      const ssize_t n = ::read(p[i].fd, buf, sizeof buf);
      if (n <= 0) (i == 0 ? open_out : open_err) = false;
      else (i == 0 ? f.out : f.err).append(buf, static_cast<std::size_t>(n));
    }
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  if (!open_out && !open_err && WIFEXITED(status)) f.code = WEXITSTATUS(status);
  return f;
}

/// One line, starting with `start`.
::testing::AssertionResult one_line(const std::string& text, const std::string& start)
{
  if (text.rfind(start, 0) == 0 && std::count(text.begin(), text.end(), '\n') == 1)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "not one line starting with '" << start << "': '"
                                       << text << "'";
}

std::vector<std::string> benches()
{
  std::vector<std::string> all{SERVICE_BENCH, PLAN_BENCH};
#ifdef GPU_BENCH
  all.emplace_back(GPU_BENCH);
  all.emplace_back(SAMPLE_BENCH);
  all.emplace_back(BESIDE_BENCH);
  all.emplace_back(SCATTER_BENCH);
#endif
  return all;
}

TEST(BenchCli, HelpAnswersWithoutAGpuOrADaemon)
{
  for (const std::string& bench : benches()) {
    const finished f = run({bench, "--help"}, {"CUDA_VISIBLE_DEVICES="});
    const std::string name = fs::path{bench}.filename().string();
    EXPECT_EQ(f.code, 0) << bench << ": " << f.err;
    EXPECT_EQ(f.out.rfind("usage: " + name + " ", 0), 0u) << f.out;
    EXPECT_TRUE(f.err.empty()) << f.err;
  }
}

TEST(BenchCli, BadCommandLinesAreOneLineAndExitCode64)
{
  for (const std::string& bench : benches()) {
    const std::string name = fs::path{bench}.filename().string();
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"--bogus", "1"}, {"--json"}, {"--sizes", "x"}}) {
      std::vector<std::string> argv{bench};
      argv.insert(argv.end(), args.begin(), args.end());
      const finished f = run(argv, {"CUDA_VISIBLE_DEVICES="});
      EXPECT_EQ(f.code, 64) << bench << " " << args.front() << ": " << f.err;
      EXPECT_TRUE(one_line(f.err, name + ": ")) << args.front();
      EXPECT_NE(f.err.find("(see --help)"), std::string::npos) << f.err;
    }
  }
}

// plan_bench plans and times on the CPUs: a capacity with a plan prints its shape and times, one
// below the smallest says so and names it.
TEST(BenchCli, PlanBenchTimesThePlanningAndNamesTheSmallestCapacity)
{
  const finished f =
      run({PLAN_BENCH, "--keys", "4Mi", "--capacities", "64Ki,256", "--repeat", "1"}, {});
  EXPECT_EQ(f.code, 0) << f.err;
  EXPECT_NE(f.out.find("capacity 65536: d="), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("cuts "), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("capacity 256: no two-round plan; the smallest capacity is "),
            std::string::npos)
      << f.out;
}

#ifdef GPU_BENCH
TEST(BenchCli, NoGpuIsOneLineAndExitCode1)
{
  // Each with a command line it takes (beside_bench and scatter_bench have no --sizes).
  using bench_flag = std::pair<std::string, const char*>;
  for (const auto& [bench, flag] : {bench_flag{GPU_BENCH, "--sizes"},
                                    bench_flag{SAMPLE_BENCH, "--sizes"},
                                    bench_flag{BESIDE_BENCH, "--reps"},
                                    bench_flag{SCATTER_BENCH, "--samples-per-bucket"}}) {
    const finished f = run({bench, flag, "1Ki"}, {"CUDA_VISIBLE_DEVICES="});
    const std::string name = fs::path{bench}.filename().string();
    EXPECT_EQ(f.code, 1) << bench << ": " << f.err;
    EXPECT_TRUE(one_line(f.err, name + ": ")) << bench;
  }
}
#endif

// The --large job does not fit the daemon's pinned_pool_bytes: TOO_LARGE, said in one line after
// the results so far, and the daemon stopped (else it would hold the pipes open) with its
// folder gone.
TEST(BenchCli, ServiceBenchReportsARefusedJob)
{
  const temp_dir tmp;
  const finished f = run({SERVICE_BENCH, "--daemon", GPUSORTD, "--jobs", "2", "--clients", "1",
                          "--client-jobs", "1", "--pool", "1MiB", "--large", "2Mi"},
                         {"TMPDIR=" + tmp.path().string()});
  EXPECT_EQ(f.code, 1) << f.out << f.err;
  EXPECT_NE(f.out.find("1 MiB u64 job, 2 jobs: daemon p50"), std::string::npos) << f.out;
  EXPECT_TRUE(one_line(f.err, "service_bench: the --large job (2.00 MiB): TOO_LARGE: "));
  EXPECT_NE(f.err.find("(--pool sets it for this run)"), std::string::npos) << f.err;
  EXPECT_TRUE(fs::is_empty(tmp.path())) << "the daemon's folder is left behind";
}

TEST(BenchCli, ServiceBenchDaemonThatDoesNotStart)
{
  const temp_dir tmp;
  // --devices is checked before the daemon starts; a daemon that cannot run, before it starts.
  finished f = run({SERVICE_BENCH, "--daemon", GPUSORTD, "--devices", "7"});
  EXPECT_EQ(f.code, 64) << f.err;
  EXPECT_TRUE(one_line(f.err, "service_bench: --devices:1:10: devices: expected"));
  f = run({SERVICE_BENCH, "--daemon", (tmp.path() / "none").string()});
  EXPECT_EQ(f.code, 64) << f.err;
  EXPECT_TRUE(one_line(f.err, "service_bench: --daemon "));
}

// --small-jobs (issue 25): every layout in turn, in-process and through the daemon, each result
// verified, the figures printed and written; a count of 0 is a bad command line.
TEST(BenchCli, ServiceBenchSmallJobsRunsEveryLayoutBothWays)
{
  const temp_dir tmp;
  const std::string json = (tmp.path() / "small.json").string();
  finished f = run({SERVICE_BENCH, "--daemon", GPUSORTD, "--small-jobs", "13", "--json", json},
                   {"TMPDIR=" + tmp.path().string()});
  EXPECT_EQ(f.code, 0) << f.out << f.err;
  EXPECT_NE(f.out.find("13 small jobs (1 KiB to 1 MiB, 6 layouts in turn)"), std::string::npos)
      << f.out;
  for (const char* line : {"in-process: ", "daemon: ", "u32 argsort", "stable f32 keys"})
    EXPECT_NE(f.out.find(line), std::string::npos) << line << " missing from\n" << f.out;
  std::ifstream in{json};
  const std::string written{std::istreambuf_iterator<char>{in}, {}};
  EXPECT_NE(written.find("\"service.small_jobs.daemon_jobs_per_s\""), std::string::npos)
      << written;
  f = run({SERVICE_BENCH, "--daemon", GPUSORTD, "--small-jobs", "0"});
  EXPECT_EQ(f.code, 64) << f.err;
  EXPECT_TRUE(one_line(f.err, "service_bench: --small-jobs takes a count of at least 1"));
}

}  // namespace
}  // namespace gpusort::service::testing
