// Runs the `gpusort` binary under test (GPUSORT_CLI) in a child process: arguments, extra
// environment (GPUSORT_CONFIG and GPUSORT_SOCKET cleared first), standard input from a file,
// standard output and error to files (or stderr to a descriptor, a terminal), and a hook that
// runs in the child before exec (resource limits, signal dispositions). start_cli() returns at
// once, for tests that act on a running command; run_cli() waits for it.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace gpusort::test_support {

struct cli_result {
  int code{-1};   ///< the exit code; -1 when a signal ended it
  int signal{};   ///< the signal that ended it, 0 when it exited
  std::string out;
  std::string err;
};

struct cli_command {
  std::vector<std::string> args;  ///< after the program's name
  std::vector<std::pair<std::string, std::string>> env{};
  std::string stdin_path{"/dev/null"};
  std::string stdout_path{"/dev/null"};
  std::string stderr_path{"/dev/null"};
  int stderr_fd{-1};                 ///< when >= 0, stderr goes there instead of stderr_path
  std::function<void()> in_child{};  ///< runs in the child just before exec
};

/// Starts the command (GPUSORT_CLI, or $GPUSORT_TEST_CLI); the child exits 121 when it cannot open its files, 122 when exec fails.
inline pid_t start_cli(const cli_command& c)
{
  // GPUSORT_TEST_CLI: the binary where it is not where the build put it (a bundle on a GPU
  // host, scripts/gpu-check.sh).
  const char* cli = std::getenv("GPUSORT_TEST_CLI");
  std::vector<std::string> a{cli != nullptr ? cli : GPUSORT_CLI};
  a.insert(a.end(), c.args.begin(), c.args.end());
  std::vector<char*> argv;
  for (std::string& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  const int i = ::open(c.stdin_path.c_str(), O_RDONLY);
  const int o = ::open(c.stdout_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  const int e = c.stderr_fd >= 0 ? c.stderr_fd
                                 : ::open(c.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (i < 0 || o < 0 || e < 0) ::_exit(121);
  ::dup2(i, STDIN_FILENO);
  ::dup2(o, STDOUT_FILENO);
  ::dup2(e, STDERR_FILENO);
  ::unsetenv("GPUSORT_CONFIG");
  ::unsetenv("GPUSORT_SOCKET");
  for (const auto& [k, v] : c.env) ::setenv(k.c_str(), v.c_str(), 1);
  if (c.in_child) c.in_child();
  ::execv(argv[0], argv.data());
  ::_exit(122);
}

inline std::string slurp_file(const std::filesystem::path& p)
{
  std::ifstream in{p, std::ios::binary};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Waits for a started command; reads its stdout and stderr files unless they are empty paths.
inline cli_result wait_cli(pid_t pid, const std::filesystem::path& stdout_path,
                           const std::filesystem::path& stderr_path)
{
  int status = 0;
  ::waitpid(pid, &status, 0);
  cli_result r;
  if (WIFEXITED(status)) r.code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  if (!stdout_path.empty()) r.out = slurp_file(stdout_path);
  if (!stderr_path.empty()) r.err = slurp_file(stderr_path);
  return r;
}

/// Runs the command to its end with stdout and stderr captured in `dir`.
inline cli_result run_cli(const std::filesystem::path& dir, const std::vector<std::string>& args,
                          const std::vector<std::pair<std::string, std::string>>& env = {},
                          const std::string& stdin_path = "/dev/null")
{
  const std::filesystem::path out = dir / "stdout.txt", err = dir / "stderr.txt";
  return wait_cli(start_cli(cli_command{.args = args,
                                        .env = env,
                                        .stdin_path = stdin_path,
                                        .stdout_path = out.string(),
                                        .stderr_path = err.string()}),
                  out, err);
}

}  // namespace gpusort::test_support
