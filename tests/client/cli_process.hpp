// Runs the `gpusort` binary under test (GPUSORT_CLI) in a child process: arguments, extra
// environment (GPUSORT_CONFIG and GPUSORT_SOCKET cleared first), standard input from a file,
// standard output and error captured through files in `dir`.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace gpusort::test_support {

struct cli_result {
  int code{-1};  ///< the exit code; -1 when a signal ended it
  std::string out;
  std::string err;
};

inline cli_result run_cli(const std::filesystem::path& dir, const std::vector<std::string>& args,
                          const std::vector<std::pair<std::string, std::string>>& env = {},
                          const std::string& stdin_path = "/dev/null")
{
  const std::string out = (dir / "stdout.txt").string();
  const std::string err = (dir / "stderr.txt").string();
  std::vector<std::string> a{GPUSORT_CLI};
  a.insert(a.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& s : a) argv.push_back(s.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int i = ::open(stdin_path.c_str(), O_RDONLY);
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(i, STDIN_FILENO);
    ::dup2(o, STDOUT_FILENO);
    ::dup2(e, STDERR_FILENO);
    ::unsetenv("GPUSORT_CONFIG");
    ::unsetenv("GPUSORT_SOCKET");
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    ::execv(argv[0], argv.data());
    ::_exit(122);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  const auto read = [](const std::string& p) {
    std::ifstream in{p, std::ios::binary};
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  return cli_result{WIFEXITED(status) ? WEXITSTATUS(status) : -1, read(out), read(err)};
}

}  // namespace gpusort::test_support
