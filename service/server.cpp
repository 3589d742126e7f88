#include "service/server.hpp"

#include "core/program_log.hpp"
#include "proto/fd_passing.hpp"
#include "service/peer.hpp"
#include "service/reload.hpp"
#include "service/sd_notify.hpp"

#include <gpusort/config.hpp>

#include <boost/asio/post.hpp>

#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <stdexcept>
#include <system_error>
#include <utility>

namespace gpusort::service {

namespace {

namespace asio = boost::asio;
using stream = asio::local::stream_protocol;

// How long, after the jobs are done, sessions get to take their last JOB_FINISHED frames.
constexpr auto close_grace = std::chrono::seconds{2};
constexpr auto drain_poll = std::chrono::milliseconds{20};
// After accept() ran out of descriptors: long enough not to spin, short beside a client's patience.
constexpr auto accept_retry = std::chrono::milliseconds{100};

/// Whether a daemon answers on `path`: connect() succeeds. ECONNREFUSED: a socket file left by
/// a daemon that died. Other errors (permissions) are the caller's to report.
bool live_daemon_at(const std::string& path)
{
  const unique_fd fd{::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  if (!fd) throw std::system_error{errno, std::generic_category(), "socket"};
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), path.size());  // the config bounds the length
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0)
    return true;
  if (errno == ECONNREFUSED) return false;
  throw std::system_error{errno, std::generic_category(), "probing the existing socket " + path};
}

/// The listening socket systemd passed (socket activation: LISTEN_PID and LISTEN_FDS, the first
/// descriptor at 3), or -1 when none was passed to this process. The variables are cleared so
/// that no child inherits them.
int activated_socket()
{
  const char* pid = std::getenv("LISTEN_PID");
  const char* fds = std::getenv("LISTEN_FDS");
  if (pid == nullptr || fds == nullptr) return -1;
  const bool ours = std::strtol(pid, nullptr, 10) == static_cast<long>(::getpid());
  const long count = std::strtol(fds, nullptr, 10);
  ::unsetenv("LISTEN_PID");
  ::unsetenv("LISTEN_FDS");
  ::unsetenv("LISTEN_FDNAMES");
  if (!ours || count < 1) return -1;
  constexpr int first = 3;  // SD_LISTEN_FDS_START
  if (count > 1)
    spdlog::warn("systemd passed {} sockets; gpusortd listens on the first only", count);
  int type = 0, listening = 0;
  socklen_t type_len = sizeof type, listening_len = sizeof listening;
  sockaddr_un addr{};
  socklen_t addr_len = sizeof addr;
  if (::getsockopt(first, SOL_SOCKET, SO_TYPE, &type, &type_len) != 0 || type != SOCK_STREAM ||
      ::getsockname(first, reinterpret_cast<sockaddr*>(&addr), &addr_len) != 0 ||
      addr.sun_family != AF_UNIX ||
      ::getsockopt(first, SOL_SOCKET, SO_ACCEPTCONN, &listening, &listening_len) != 0 ||
      listening == 0)
    throw std::runtime_error{"the socket systemd passed (descriptor 3) is not a listening Unix "
                             "stream socket"};
  ::fcntl(first, F_SETFD, FD_CLOEXEC);
  return first;
}

}  // namespace

server::server(asio::io_context& io, daemon_context& ctx)
    : io_{io},
      ctx_{ctx},
      acceptor_{io},
      signals_{io, SIGTERM, SIGINT, SIGHUP},
      timer_{io},
      accept_timer_{io},
      own_uid_{static_cast<std::uint32_t>(::geteuid())}
{
  ctx_.queue.on_device_lost(
      [this](const std::string& reason) { asio::post(io_, [this, reason] { fail(reason); }); });
}

server::~server()
{
  ctx_.queue.on_device_lost(nullptr);
  remove_socket_file();
}

void server::fail(const std::string& reason)
{
  // Serving on would answer every job with the same error: a supervisor (systemd's
  // Restart=on-failure) restarts a daemon that exits non-zero, with a fresh context.
  spdlog::critical("the devices are lost, exiting for a restart: {}", reason);
  exit_code_ = 70;
  sd_notify_quietly("STATUS=failed: the devices are lost: " + reason);
  cancel_jobs("the daemon is exiting for a restart (its GPUs are lost)");
  shutdown();
}

void server::cancel_jobs(const std::string& why)
{
  if (cancelled_) return;
  cancelled_ = true;
  ctx_.queue.cancel_all(why + ": the job was cancelled; run it again once the daemon is back");
}

void server::listen()
{
  const std::string& path = ctx_.cfg.socket;
  if (const int fd = activated_socket(); fd >= 0) {
    // systemd made the socket, owns its file and mode (gpusortd.socket): use it as it is.
    acceptor_.assign(stream{}, fd);
    spdlog::info("listening on the socket systemd passed ({})",
                 acceptor_.local_endpoint().path());
    if (acceptor_.local_endpoint().path() != path)
      spdlog::warn("the socket systemd passed is {}, not the configured {}: clients must use it",
                   acceptor_.local_endpoint().path(), path);
    return;
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      throw std::runtime_error{path + " exists and is not a socket; not replacing it"};
    if (live_daemon_at(path))
      throw std::runtime_error{"another daemon is answering on " + path};
    if (::unlink(path.c_str()) != 0)
      throw std::system_error{errno, std::generic_category(), "removing the stale socket " + path};
    spdlog::info("replaced the stale socket file {}", path);
  }
  acceptor_.open(stream{});
  // The socket file appears with mode 0660 at once (bind honours the umask): no moment in which
  // others could connect. chmod afterwards in case the umask was stricter.
  const mode_t old_mask = ::umask(0117);
  boost::system::error_code ec;
  acceptor_.bind(stream::endpoint{path}, ec);
  ::umask(old_mask);
  if (ec) throw std::system_error{ec.value(), std::generic_category(), "binding " + path};
  bound_ = true;
  if (::chmod(path.c_str(), 0660) != 0)
    throw std::system_error{errno, std::generic_category(), "chmod 0660 " + path};
  acceptor_.listen(asio::socket_base::max_listen_connections);
  spdlog::info("listening on {}", path);
}

void server::start()
{
  watch_signals();
  accept();
}

void server::watch_signals()
{
  signals_.async_wait([this](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    if (signo == SIGHUP) {
      reload();
    } else {
      spdlog::info("signal {} ({}) received: {}", signo, ::strsignal(signo),
                   stopping_ ? "cancelling the jobs" : "shutting down");
      shutdown();
    }
    if (!closing_sessions_) watch_signals();
  });
}

void server::accept()
{
  acceptor_.async_accept([this](const boost::system::error_code& ec, stream::socket socket) {
    if (stopping_) return;
    if (!ec) {
      if (std::exchange(accept_waiting_, false))
        spdlog::info("accepting connections again");
      on_accept(std::move(socket));
    } else if (ec == asio::error::no_descriptors || ec.value() == ENFILE ||
               ec == asio::error::no_buffer_space || ec == asio::error::no_memory) {
      // The connection stays in the backlog, so accepting again at once fails again at once:
      // gpusortd spun on it and wrote this line to its log without end (gigabytes a minute,
      // hostile_test RunningOutOfDescriptorsDoesNotSpinTheDaemon). Keep serving the
      // connections we have and try again shortly; say so once.
      if (!std::exchange(accept_waiting_, true))
        spdlog::warn("accept failed: {}; serving the connections open, trying again every {} ms",
                     ec.message(), accept_retry.count());
      accept_timer_.expires_after(accept_retry);
      accept_timer_.async_wait([this](const boost::system::error_code& timer_ec) {
        if (!timer_ec && !stopping_ && acceptor_.is_open()) accept();
      });
      return;
    } else if (ec != asio::error::operation_aborted) {
      spdlog::warn("accept failed: {}", ec.message());
    }
    if (acceptor_.is_open()) accept();
  });
}

void server::refuse(stream::socket& socket, wire::StatusCode code, const std::string& text)
{
  wire::ErrorReply reply;
  *reply.mutable_status() = proto::make_status(code, text);
  const std::vector<std::byte> frame = proto::encode_frame(0, reply, proto::hello_version);
  try {
    // A fresh socket's send buffer takes a small frame whole; never wait on a refused peer.
    socket.non_blocking(true);
    static_cast<void>(proto::try_send(socket.native_handle(), frame));
  } catch (const std::exception& e) {
    spdlog::debug("refusing a connection: {}", e.what());
  }
  boost::system::error_code ignored;
  socket.shutdown(stream::socket::shutdown_both, ignored);
  socket.close(ignored);
}

void server::on_accept(stream::socket socket)
{
  ctx_.connections_total.fetch_add(1);
  peer_credentials peer;
  try {
    peer = peer_of(socket.native_handle());
  } catch (const std::exception& e) {
    spdlog::warn("cannot read a client's credentials: {}", e.what());
    refuse(socket, wire::UNAUTHORIZED, "the daemon cannot read the peer's credentials");
    return;
  }
  if (!allowed(peer, ctx_.cfg, own_uid_)) {
    spdlog::warn("refused a client ({}): not in allowed_uids / allowed_gids", describe(peer));
    refuse(socket, wire::UNAUTHORIZED,
           "uid " + std::to_string(peer.uid) + " (gid " + std::to_string(peer.gid) +
               ") is not allowed to use this daemon (allowed_uids / allowed_gids)");
    return;
  }
  if (sessions_.size() >= ctx_.cfg.max_connections) {
    spdlog::warn("refused a client ({}): {} connections open (max_connections)", describe(peer),
                 sessions_.size());
    refuse(socket, wire::REJECTED_BUSY,
           "the daemon has " + std::to_string(sessions_.size()) +
               " connections open, its limit (max_connections); retry later");
    return;
  }
  auto s = std::make_shared<session>(std::move(socket), ctx_, peer,
                                     [this](const std::shared_ptr<session>& closed) {
                                       sessions_.erase(closed);
                                       ctx_.clients_open.store(
                                           static_cast<std::uint32_t>(sessions_.size()));
                                     });
  sessions_.insert(s);
  ctx_.clients_open.store(static_cast<std::uint32_t>(sessions_.size()));
  s->start();
}

void server::shutdown()
{
  if (stopping_) {
    cancel_jobs("the daemon is shutting down (a second signal stopped the jobs it was "
                "finishing)");
    return;
  }
  stopping_ = true;
  boost::system::error_code ignored;
  acceptor_.close(ignored);
  accept_timer_.cancel();
  remove_socket_file();
  ctx_.queue.stop_accepting();
  sd_notify_quietly("STOPPING=1\nSTATUS=stopping: " +
                    std::string{ctx_.cfg.on_shutdown == shutdown_policy::cancel
                                    ? "cancelling the jobs"
                                    : "finishing the jobs"});
  const auto snapshot = ctx_.queue.snapshot();
  spdlog::info("shutting down: {} job(s) running, {} queued; shutdown: {}, timeout {} s",
               snapshot.running.size(), snapshot.queued.size(), name_of(ctx_.cfg.on_shutdown),
               ctx_.cfg.shutdown_timeout);
  if (ctx_.cfg.on_shutdown == shutdown_policy::cancel || ctx_.cfg.shutdown_timeout == 0)
    cancel_jobs(ctx_.cfg.on_shutdown == shutdown_policy::cancel
                    ? "the daemon is shutting down (shutdown: cancel)"
                    : "the daemon is shutting down (shutdown_timeout: 0)");
  drain_deadline_ =
      std::chrono::steady_clock::now() + std::chrono::seconds{ctx_.cfg.shutdown_timeout};
  poll_drain();
}

void server::reload()
{
  if (stopping_) {
    spdlog::info("SIGHUP received while shutting down: not reloading the configuration");
    return;
  }
  if (ctx_.config_path.empty()) {
    spdlog::warn("SIGHUP received: there is no configuration file to reload");
    return;
  }
  const std::string file = ctx_.config_path.string();
  // systemd's reload protocol: RELOADING=1 with the time, READY=1 when done, even when the
  // file was refused (the daemon serves on, as it was).
  timespec now{};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  sd_notify_quietly("RELOADING=1\nMONOTONIC_USEC=" +
                    std::to_string(static_cast<std::uint64_t>(now.tv_sec) * 1'000'000 +
                                   static_cast<std::uint64_t>(now.tv_nsec) / 1000));
  try {
    reload_plan plan = plan_reload(ctx_.cfg, load_config(ctx_.config_path));
    ctx_.cfg = std::move(plan.next);
    detail::set_program_log_level(ctx_.cfg.level);
    ctx_.queue.set_limits(queue_limits_of(ctx_.cfg, ctx_.queue.limits().workers));
    // After the new level is set, so that the line shows at the level the file asks for.
    spdlog::log(plan.need_restart.empty() ? spdlog::level::info : spdlog::level::warn, "{}",
                describe(plan, file));
    sd_notify_quietly("READY=1\nSTATUS=serving on " + ctx_.cfg.socket +
                      "; configuration reloaded");
  } catch (const std::exception& e) {
    spdlog::error("SIGHUP: the configuration was not reloaded, the daemon keeps the one it has: "
                  "{}",
                  e.what());
    sd_notify_quietly("READY=1\nSTATUS=serving on " + ctx_.cfg.socket +
                      "; reloading the configuration failed: " + e.what());
  }
}

void server::poll_drain()
{
  const auto now = std::chrono::steady_clock::now();
  if (!closing_sessions_) {
    if (!ctx_.queue.idle()) {
      if (!cancelled_ && now >= drain_deadline_) {
        spdlog::warn("shutdown_timeout ({} s) passed: cancelling the jobs left",
                     ctx_.cfg.shutdown_timeout);
        cancel_jobs("the daemon is shutting down and its shutdown_timeout (" +
                    std::to_string(ctx_.cfg.shutdown_timeout) + " s) passed");
      }
    } else {
      // Every job has ended and its JOB_FINISHED has been posted to its session's thread, this
      // one: a handler posted now runs after them, so the sessions close with nothing left out.
      closing_sessions_ = true;
      close_deadline_ = now + close_grace;
      asio::post(io_, [this] {
        const auto all = sessions_;  // closing erases from sessions_
        for (const auto& s : all) s->close_after_flush();
      });
    }
  }
  if (closing_sessions_) {
    if (!sessions_.empty() && now >= close_deadline_) {
      spdlog::warn("{} client(s) did not take their last frames; closing them",
                   sessions_.size());
      const auto all = sessions_;
      for (const auto& s : all) s->close();
    }
    if (sessions_.empty()) {
      // Nothing left to wait for: with the signals and the timer idle, io.run() returns.
      signals_.cancel();
      return;
    }
  }
  timer_.expires_after(drain_poll);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) poll_drain();
  });
}

void server::remove_socket_file() noexcept
{
  if (!bound_) return;
  bound_ = false;
  ::unlink(ctx_.cfg.socket.c_str());
}

}  // namespace gpusort::service
