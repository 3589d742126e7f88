// One connection's protocol state machine, without a socket: frames in (from the session's
// parser), frames out (through an outbox). The session owns the socket and the parser; this
// class owns the rules of proto/README.md: HELLO first, buffers and jobs private to their
// connection, one reply per request, events after the SUBMIT_REPLY, and every failure a status
// with a message. Exceptions stop here.
#pragma once

#include "proto/frame.hpp"
#include "service/daemon_context.hpp"
#include "service/peer.hpp"

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

namespace gpusort::service {

/// Where a connection's outgoing frames go. Thread-safe: job events come from worker threads.
/// Frames sent from one thread leave in the order sent.
class outbox {
 public:
  virtual ~outbox() = default;
  virtual void send(std::vector<std::byte> frame, std::vector<unique_fd> fds) = 0;
};

class request_handler : public std::enable_shared_from_this<request_handler> {
 public:
  request_handler(daemon_context& ctx, peer_credentials peer, std::uint64_t session,
                  std::weak_ptr<outbox> out);
  ~request_handler();
  request_handler(const request_handler&) = delete;
  request_handler& operator=(const request_handler&) = delete;

  enum class verdict : std::uint8_t { keep, close };

  /// A frame from the parser. The reply (and later the job's events) go to the outbox.
  verdict handle(proto::frame f);
  /// A parse error: answered; `close` when it was fatal.
  verdict handle(const proto::parse_error& error);

  /// The connection ended: cancels its jobs and gives its buffers back. Idempotent.
  void disconnect();

  /// The version chosen by HELLO; nullopt before it.
  [[nodiscard]] std::optional<std::uint16_t> version() const noexcept { return version_; }
  [[nodiscard]] std::uint64_t session() const noexcept { return session_; }
  [[nodiscard]] std::size_t active_jobs() const;

 private:
  struct job_entry {
    std::shared_ptr<job> j;
    std::uint64_t request_id{};
    std::vector<std::uint64_t> buffer_ids;
  };

  void reply(std::uint64_t request_id, const proto::message& m, std::vector<unique_fd> fds = {});
  void reply_error(std::uint64_t request_id, proto::message_type request, wire::StatusCode code,
                   std::string text);
  void dispatch(proto::frame& f);
  void on_hello(std::uint64_t id, const wire::HelloRequest& r);
  void on_allocate(std::uint64_t id, const wire::AllocateRequest& r);
  void on_release(std::uint64_t id, const wire::ReleaseRequest& r);
  void on_submit(std::uint64_t id, const wire::SubmitRequest& r, std::vector<unique_fd> fds);
  void on_cancel(std::uint64_t id, const wire::CancelRequest& r);
  void on_job_status(std::uint64_t id, const wire::JobStatusRequest& r);
  void on_daemon_status(std::uint64_t id);
  void job_progress(std::uint64_t request_id, const job& j, const progress_event& e);
  void job_finished(std::uint64_t request_id, const job& j, const job_outcome& outcome);
  [[nodiscard]] std::shared_ptr<job> find_job(std::uint64_t job_id) const;

  daemon_context& ctx_;
  const peer_credentials peer_;
  const std::uint64_t session_;
  const std::weak_ptr<outbox> out_;
  std::optional<std::uint16_t> version_;
  bool disconnected_{};

  mutable std::mutex mutex_;  // jobs_: finished callbacks come from worker threads
  // Held while a SUBMIT is admitted and answered, and while a job event is sent: no event can
  // overtake its job's SUBMIT_REPLY, whichever thread the outbox sends from.
  std::mutex events_mutex_;
  std::unordered_map<std::uint64_t, job_entry> jobs_;
};

/// Fills a JobInfo from a job (state, progress, queue position given by the caller).
void fill_job_info(wire::JobInfo& info, const job& j, std::uint32_t queue_position);

/// The DAEMON_STATUS reply of the whole daemon.
wire::DaemonStatusReply daemon_status(daemon_context& ctx);

}  // namespace gpusort::service
