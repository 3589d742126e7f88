// Starts the installed gpusortd (argv[1]) on a socket in a folder (argv[2]), sorts 100000 u64
// keys through the installed client library twice, as the README shows it (a shared buffer in
// place, then files the program opened, submitted with progress), checks both against std::sort,
// stops the daemon. Exits non-zero on any failure.
#include <gpusort/client.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <ios>
#include <stdexcept>
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
    const std::vector<std::uint64_t> original(keys.begin(), keys.end());
    const gpusort::sort_report report = conn.sort(keys);
    if (!std::equal(keys.begin(), keys.end(), expected.begin(), expected.end()))
      throw std::runtime_error{"the buffer is not sorted"};

    // The asynchronous form of the README: a file in, a file out, progress on the way.
    const std::string in_path = std::string{argv[2]} + "/keys.bin";
    const std::string out_path = std::string{argv[2]} + "/sorted.bin";
    const auto bytes = static_cast<std::streamsize>(original.size() * sizeof(std::uint64_t));
    std::ofstream{in_path, std::ios::binary}.write(
        reinterpret_cast<const char*>(original.data()), bytes);
    const int in_fd = ::open(in_path.c_str(), O_RDONLY | O_CLOEXEC);
    const int out_fd = ::open(out_path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (in_fd < 0 || out_fd < 0 || ::ftruncate(out_fd, bytes) != 0)
      throw std::runtime_error{"cannot open " + in_path + " or " + out_path};
    std::atomic<int> events{0};
    auto job = conn.submit({.type = gpusort::dtype::u64,
                            .count = original.size(),
                            .keys = gpusort::client::array_ref::of_fd(in_fd),
                            .keys_out = gpusort::client::array_ref::of_fd(out_fd)},
                           [&events](const gpusort::progress_event&) { ++events; });
    const gpusort::sort_report file_report = job.wait();
    ::close(in_fd);
    ::close(out_fd);
    std::vector<std::uint64_t> sorted(original.size());
    std::ifstream{out_path, std::ios::binary}.read(reinterpret_cast<char*>(sorted.data()), bytes);
    if (sorted != expected) throw std::runtime_error{"the output file is not sorted"};

    std::printf("sorted %llu keys through gpusortd (%s), then %llu from a file (%d progress "
                "events)\n",
                static_cast<unsigned long long>(report.elements), report.engine.c_str(),
                static_cast<unsigned long long>(file_report.elements), events.load());
    rc = 0;
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
