// The daemon's listening side: the Unix socket (stale file replaced, a live daemon refused, mode
// 0660), peer authentication with SO_PEERCRED and SO_PEERGROUPS, the connection limit, and the
// signals: SIGTERM and SIGINT stop it (graceful shutdown per the `shutdown` and
// `shutdown_timeout` keys), SIGHUP reloads its configuration file (service/reload.hpp).
#pragma once

#include "service/daemon_context.hpp"
#include "service/session.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <memory>
#include <string>
#include <unordered_set>

namespace gpusort::service {

class server {
 public:
  server(boost::asio::io_context& io, daemon_context& ctx);
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  /// Binds and listens on cfg.socket. A socket file nobody answers on is replaced; one a live
  /// daemon answers on, or a path that is not a socket, is an error (std::runtime_error).
  void listen();
  /// Starts accepting and watching the signals; io.run() then serves until shutdown ends.
  void start();
  /// Graceful shutdown: stop accepting, drain or cancel the jobs, close the sessions, remove
  /// the socket. io.run() returns once everything is closed. A second call cancels the jobs.
  void shutdown();
  /// Reads the configuration file again and applies the keys that can change at run time (log
  /// level, peer lists, connection and job limits, shutdown keys) to what follows: connections
  /// already open and jobs already admitted stay. One log line says what changed; a file that
  /// does not load is logged as an error and changes nothing.
  void reload();
  /// The daemon's exit code: 0, or 70 after the devices were lost (fail()).
  [[nodiscard]] int exit_code() const { return exit_code_; }

 private:
  void watch_signals();
  void accept();
  void on_accept(boost::asio::local::stream_protocol::socket socket);
  void poll_drain();
  void refuse(boost::asio::local::stream_protocol::socket& socket, wire::StatusCode code,
              const std::string& text);
  void remove_socket_file() noexcept;
  /// The devices are lost: log it, cancel every job and stop, to exit non-zero (io thread).
  void fail(const std::string& reason);
  /// Cancels every job, once, telling their clients `why` the daemon stops (SHUTTING_DOWN).
  void cancel_jobs(const std::string& why);

  boost::asio::io_context& io_;
  daemon_context& ctx_;
  boost::asio::local::stream_protocol::acceptor acceptor_;
  boost::asio::signal_set signals_;
  boost::asio::steady_timer timer_;
  boost::asio::steady_timer accept_timer_;  ///< accept() again after running out of descriptors
  std::unordered_set<std::shared_ptr<session>> sessions_;
  std::uint32_t own_uid_;
  bool bound_{};
  bool accept_waiting_{};  ///< accept() failed for want of descriptors; logged once
  bool stopping_{};
  bool cancelled_{};
  bool closing_sessions_{};
  int exit_code_{0};
  std::chrono::steady_clock::time_point drain_deadline_{};
  std::chrono::steady_clock::time_point close_deadline_{};
};

}  // namespace gpusort::service
