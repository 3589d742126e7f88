// Starts the installed gpusortd (argv[1]) on a socket in a temporary folder, sorts 100000 u64
// keys through the installed client library, checks them against std::sort, stops the daemon.
// Exits non-zero on any failure.
#include <gpusort/client.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv)
{
  if (argc != 3) {
    std::fprintf(stderr, "usage: gpusort_client_consumer GPUSORTD WORK_DIR\n");
    return 64;
  }
  const std::string socket = std::string{argv[2]} + "/gpusortd.sock";
  const std::string config = std::string{argv[2]} + "/gpusortd.yaml";
  std::ofstream{config} << "devices: cpu\nhost_threads: 2\nsocket: " << socket << "\n";
  const pid_t daemon = fork();
  if (daemon < 0) return 2;
  if (daemon == 0) {
    execl(argv[1], argv[1], "--config", config.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int rc = 1;
  try {
    gpusort::client::connection conn;
    for (int attempt = 0;; ++attempt) {  // until the daemon listens
      try {
        conn = gpusort::client::connection::connect(socket, "install-test");
        break;
      } catch (const gpusort::client::error&) {
        if (attempt == 200) throw;
        std::this_thread::sleep_for(std::chrono::milliseconds{50});
      }
    }
    auto keys = conn.allocate<std::uint64_t>(100'000);
    std::uint64_t x = 0x9E3779B97F4A7C15ULL;
    for (auto& k : keys) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      k = x;
    }
    std::vector<std::uint64_t> expected(keys.begin(), keys.end());
    std::sort(expected.begin(), expected.end());
    const gpusort::client::job_report report = conn.sort(keys);
    if (std::equal(keys.begin(), keys.end(), expected.begin(), expected.end())) {
      std::printf("sorted %llu keys through gpusortd (%s)\n",
                  static_cast<unsigned long long>(report.elements), report.engine.c_str());
      rc = 0;
    } else {
      std::fprintf(stderr, "not sorted\n");
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    rc = 2;
  }
  kill(daemon, SIGTERM);
  int status = 0;
  waitpid(daemon, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "gpusortd did not stop cleanly on SIGTERM (status %d)\n", status);
    rc = rc == 0 ? 3 : rc;
  }
  return rc;
}
