// Runs the real gpusortd (fork/exec) on a socket in a temporary folder, with a notify socket of
// its own standing in for systemd, and talks to it raw (frames) when a test needs to send what
// the client library never would.
#pragma once

#include "tests/service/fd_test_support.hpp"

#include "core/generate.hpp"
#include "core/verify.hpp"
#include "proto/fd_passing.hpp"
#include "proto/frame.hpp"

#include <gpusort/client.hpp>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace gpusort::service::testing {

inline bool tiny_budget()
{
  const char* b = std::getenv("GPUSORT_TEST_BUDGET");
  return b != nullptr && std::string{b} == "tiny";
}

inline std::string slurp(const std::filesystem::path& p)
{
  std::ifstream in{p, std::ios::binary};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void spit(const std::filesystem::path& p, const std::string& data)
{
  std::ofstream out{p, std::ios::binary | std::ios::trunc};
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

/// Fills `n` keys (and values) at `keys`/`values` and returns their fingerprint.
inline fingerprint fill(void* keys, dtype t, std::uint64_t n, std::uint64_t seed,
                        void* values = nullptr, std::uint32_t value_bytes = 0,
                        distribution d = distribution::uniform)
{
  generate(key_array{keys, n, t}, d, seed);
  std::optional<value_array> v;
  if (values != nullptr) {
    v = value_array{values, n, value_bytes};
    generate_values(*v, seed);
  }
  return fingerprint_of(key_array{keys, n, t}, v);
}

inline ::testing::AssertionResult sorted(void* keys, dtype t, std::uint64_t n, order dir,
                                         const fingerprint& original, void* values = nullptr,
                                         std::uint32_t value_bytes = 0)
{
  std::optional<value_array> v;
  if (values != nullptr) v = value_array{values, n, value_bytes};
  const verify_result r = verify(key_array{keys, n, t}, v, dir, original);
  if (r.ok) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << r.message;
}

/// A SUBMIT of `count` u64 keys from attached descriptor #0 at `offset`, in place.
inline wire::SubmitRequest submit_fd(std::uint64_t count, std::uint64_t offset = 0)
{
  wire::SubmitRequest s;
  s.set_dtype(wire::DTYPE_U64);
  s.set_count(count);
  s.mutable_keys()->set_attached_fd(0);
  s.mutable_keys()->set_offset(offset);
  s.set_in_place(true);
  return s;
}

/// The daemon on `socket` still sorts for a well-behaved client.
inline void expect_still_serving(const std::string& socket)
{
  auto c = client::connection::connect(socket);
  auto keys = c.allocate<std::uint32_t>(5000);
  const fingerprint before = fill(keys.data(), dtype::u32, keys.size(), 1);
  c.sort(keys);
  EXPECT_TRUE(sorted(keys.data(), dtype::u32, keys.size(), order::ascending, before));
}

/// Makes `socket` one the test's clients may not open, as a user outside the daemon's group
/// meets it (issue 43): mode 0 stops a test that is not root (the daemon runs as the test's
/// user); root, whom modes do not stop, takes become_stranger() in the client's process.
inline void deny_socket(const std::string& socket) { ::chmod(socket.c_str(), 0); }

/// In a child process about to be a client: when root, becomes nobody (uid and gid 65534, no
/// supplementary groups), for whom the socket's mode applies; exits 123 when that fails.
inline void become_stranger()
{
  if (::geteuid() != 0) return;
  if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(123);
}

/// A datagram socket bound in `dir`, as systemd's NOTIFY_SOCKET.
class notify_socket {
 public:
  explicit notify_socket(const std::filesystem::path& dir) : path_{(dir / "notify").string()}
  {
    ::unlink(path_.c_str());  // left by an earlier daemon_process in the same folder
    fd_.reset(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
    if (::bind(fd_.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0)
      throw std::runtime_error{"cannot bind the notify socket " + path_};
  }
  ~notify_socket() { ::unlink(path_.c_str()); }
  notify_socket(const notify_socket&) = delete;
  notify_socket& operator=(const notify_socket&) = delete;
  [[nodiscard]] const std::string& path() const { return path_; }

  /// The next datagram within `timeout`; nullopt when none came.
  std::optional<std::string> next(std::chrono::milliseconds timeout)
  {
    pollfd p{.fd = fd_.get(), .events = POLLIN, .revents = 0};
    if (::poll(&p, 1, static_cast<int>(timeout.count())) <= 0) return std::nullopt;
    char buf[4096];
    const ssize_t n = ::recv(fd_.get(), buf, sizeof buf, 0);
    if (n < 0) return std::nullopt;
    return std::string{buf, static_cast<std::size_t>(n)};
  }

  /// Waits for a datagram containing `line` (e.g. "READY=1"); the datagrams seen on the way are
  /// appended to `seen`.
  bool wait_for(const std::string& line, std::chrono::milliseconds timeout, std::string* seen)
  {
    const auto end = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      const auto d = next(left);
      if (!d) return false;
      if (seen != nullptr) *seen += *d + "\n";
      std::istringstream lines{*d};
      for (std::string l; std::getline(lines, l);)
        if (l == line) return true;
    }
  }

 private:
  std::string path_;
  unique_fd fd_;
};

/// The daemon under test. The configuration is `devices: cpu`, a socket in the folder, a
/// 256 MiB pool, log level debug, and `extra` (more keys, or other values of those three); with
/// GPUSORT_TEST_BUDGET=tiny a 512 KiB device budget so that the jobs of the tests take the
/// out-of-core path with several chunks (unless `extra` sets the budget itself).
class daemon_process {
 public:
  /// `activated`: a listening socket handed over as systemd's socket activation does (descriptor
  /// 3, LISTEN_PID, LISTEN_FDS), bound at dir/gpusortd.sock.
  explicit daemon_process(const std::filesystem::path& dir, const std::string& extra = "",
                          bool wait_ready = true, int activated = -1)
      : dir_{dir}, socket_{(dir / "gpusortd.sock").string()}, notify_{dir}, activated_{activated}
  {
    write_config(extra);
    start();
    if (wait_ready && !notify_.wait_for("READY=1", std::chrono::seconds{20}, &notices_))
      throw std::runtime_error{"gpusortd did not report READY=1; its log:\n" + log()};
  }
  ~daemon_process()
  {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  daemon_process(const daemon_process&) = delete;
  daemon_process& operator=(const daemon_process&) = delete;

  [[nodiscard]] const std::string& socket() const { return socket_; }
  [[nodiscard]] pid_t pid() const { return pid_; }
  [[nodiscard]] std::string log() const { return slurp(dir_ / "gpusortd.log"); }
  [[nodiscard]] notify_socket& notify() { return notify_; }
  /// What the notify socket received up to READY=1.
  [[nodiscard]] const std::string& notices() const { return notices_; }

  void signal(int signo) const { ::kill(pid_, signo); }

  /// Writes the configuration file again, as the constructor does with `extra`.
  void write_config(const std::string& extra) const
  {
    const auto unless_set = [&](const std::string& key, const std::string& value) {
      return extra.find(key + ":") == std::string::npos ? key + ": " + value + "\n" : "";
    };
    std::string yaml = "devices: cpu\n" + unless_set("socket", socket_) +
                       unless_set("pinned_pool_bytes", "256MiB") +
                       unless_set("log_level", "debug") + extra;
    if (tiny_budget()) yaml += unless_set("device_memory_budget", "512KiB");
    spit(dir_ / "gpusortd.yaml", yaml);
  }

  /// Sends SIGHUP and waits for the daemon to say it is done (READY=1 after RELOADING=1 on the
  /// notify socket); what came is appended to `seen`.
  bool reload(std::string* seen = nullptr)
  {
    signal(SIGHUP);
    std::string got;
    const bool reloading = notify_.wait_for("RELOADING=1", std::chrono::seconds{10}, &got);
    const bool ready = reloading && notify_.wait_for("READY=1", std::chrono::seconds{10}, &got);
    if (seen != nullptr) *seen += got;
    return ready;
  }

  /// Waits for the daemon to exit; returns its exit code, or -signal when a signal ended it,
  /// or nullopt when it is still running after `timeout`.
  std::optional<int> wait(std::chrono::milliseconds timeout)
  {
    const auto end = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < end) {
      int status = 0;
      const pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds{10});
    }
    return std::nullopt;
  }

 private:
  void start()
  {
    const std::string config = (dir_ / "gpusortd.yaml").string();
    const std::string log = (dir_ / "gpusortd.log").string();
    pid_ = ::fork();
    if (pid_ == 0) {
      const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      ::dup2(out, STDERR_FILENO);
      ::dup2(out, STDOUT_FILENO);
      ::setenv("NOTIFY_SOCKET", notify_.path().c_str(), 1);
      if (activated_ >= 0) {
        ::dup2(activated_, 3);
        ::setenv("LISTEN_PID", std::to_string(::getpid()).c_str(), 1);
        ::setenv("LISTEN_FDS", "1", 1);
      }
      ::execl(GPUSORTD, GPUSORTD, "--config", config.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }

  std::filesystem::path dir_;
  std::string socket_;
  notify_socket notify_;
  int activated_{-1};
  std::string notices_;
  pid_t pid_{-1};
};

/// A raw connection: frames in and out, no library.
class raw_connection {
 public:
  explicit raw_connection(const std::string& socket)
  {
    fd_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket.c_str(), sizeof addr.sun_path - 1);
    if (::connect(fd_.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0)
      throw std::runtime_error{"cannot connect to " + socket + ": " + std::strerror(errno)};
  }
  [[nodiscard]] int fd() const { return fd_.get(); }

  void send_bytes(const std::vector<std::byte>& bytes, std::span<const int> fds = {})
  {
    proto::send_frame(fd_.get(), bytes, fds);
  }
  template <typename M>
  void send(std::uint64_t id, const M& m, std::span<const int> fds = {})
  {
    send_bytes(proto::encode_frame(id, m), fds);
  }
  void hello()
  {
    wire::HelloRequest h;
    h.set_min_version(1);
    h.set_max_version(1);
    h.set_client_name("raw test");
    send(1000000, h);
    const auto r = next();
    EXPECT_TRUE(r && std::holds_alternative<proto::frame>(*r));
  }

  /// The next frame or parse error; nullopt when the daemon closed the connection or nothing
  /// came within `timeout`.
  std::optional<proto::parse_result> next(std::chrono::milliseconds timeout =
                                              std::chrono::seconds{10})
  {
    const auto end = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (auto r = parser_.next()) return r;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      if (left.count() <= 0 || closed_) return std::nullopt;
      pollfd p{.fd = fd_.get(), .events = POLLIN, .revents = 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return std::nullopt;
      std::vector<std::byte> buf(proto::header_bytes + proto::max_control_body);
      proto::received got = proto::receive(fd_.get(), buf, proto::max_fds_per_frame);
      if (got.bytes == 0) {
        closed_ = true;
        continue;
      }
      parser_.feed(std::span<const std::byte>{buf.data(), got.bytes}, std::move(got.fds));
    }
  }

  /// The next frame, which must be one (not a parse error).
  proto::frame next_frame()
  {
    auto r = next();
    if (!r) throw std::runtime_error{"no frame from the daemon"};
    if (auto* e = std::get_if<proto::parse_error>(&*r))
      throw std::runtime_error{"unreadable frame from the daemon: " + e->message};
    return std::get<proto::frame>(std::move(*r));
  }

  /// Whether the daemon closed the connection (within `timeout`), after any frames left.
  bool closed_by_daemon(std::chrono::milliseconds timeout = std::chrono::seconds{10})
  {
    while (next(timeout)) {
    }
    return closed_;
  }

 private:
  unique_fd fd_;
  proto::frame_parser parser_{proto::parser_options{.reads = proto::stream_direction::responses}};
  bool closed_{};
};

/// The status carried by a reply or event frame.
inline wire::Status status_of(const proto::frame& f)
{
  return std::visit(
      [](const auto& body) -> wire::Status {
        if constexpr (requires { body.status(); })
          return body.status();
        else
          return {};
      },
      f.msg);
}

}  // namespace gpusort::service::testing
