// One client connection on the daemon's io_context: reads frames (bytes and SCM_RIGHTS
// descriptors) into the pure parser of proto/, hands them to its request_handler, and writes the
// replies and job events in order. Everything of a session runs on the io_context's one thread;
// job events from worker threads are dispatched onto it.
#pragma once

#include "proto/frame.hpp"
#include "service/request_handler.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>

#include <deque>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

namespace gpusort::service {

class session : public outbox, public std::enable_shared_from_this<session> {
 public:
  using socket_type = boost::asio::local::stream_protocol::socket;

  /// `on_closed` runs once, on the io thread, when the connection is gone.
  session(socket_type socket, daemon_context& ctx, peer_credentials peer,
          std::function<void(const std::shared_ptr<session>&)> on_closed);
  ~session() override;
  session(const session&) = delete;
  session& operator=(const session&) = delete;

  void start();
  /// Thread-safe; on the io thread the frame is queued at once, from other threads it is
  /// dispatched there, so a reply queued before a job starts precedes the job's events.
  void send(std::vector<std::byte> frame, std::vector<unique_fd> fds) override;
  /// Stops reading, sends what is queued, then closes. For the daemon's shutdown.
  void close_after_flush();
  /// Closes now, dropping unsent frames.
  void close();
  [[nodiscard]] std::size_t active_jobs() const { return handler_ ? handler_->active_jobs() : 0; }

 private:
  struct outgoing {
    std::vector<std::byte> bytes;
    std::vector<unique_fd> fds;
    std::size_t done{};
    std::uint64_t progress_of{};  ///< a PROGRESS frame: the request id of its job's SUBMIT
  };

  void read();
  void on_readable();
  /// Hands the parser's complete frames to the handler while the replies queued stay under
  /// their limit; false when it stopped for that (or the session is closing).
  bool handle_frames();
  void resume_reading();
  void enqueue(outgoing o);
  void write();
  void write_failed();
  void finish();

  socket_type socket_;
  daemon_context& ctx_;
  const peer_credentials peer_;
  const std::uint64_t id_;
  std::function<void(const std::shared_ptr<session>&)> on_closed_;
  std::shared_ptr<request_handler> handler_;
  proto::frame_parser parser_{proto::parser_options{.reads = proto::stream_direction::requests}};
  std::vector<std::byte> buffer_;
  bool version_applied_{};
  std::deque<outgoing> out_;
  std::size_t out_bytes_{};  ///< queued, not yet sent
  std::size_t peak_out_bytes_{};
  // A job's PROGRESS frame still waiting in out_, by the request id of its SUBMIT, as a position
  // counted from the first frame ever queued (out_front_ is the front's): a newer one replaces
  // it, so that a client that does not read holds one PROGRESS per job here, not all of them.
  std::unordered_map<std::uint64_t, std::uint64_t> waiting_progress_;
  std::uint64_t out_front_{};
  std::uint64_t progress_replaced_{};
  bool read_paused_{};       ///< by backpressure: the client does not read its replies
  bool read_armed_{};        ///< an async_wait for reading is pending
  bool writing_{};
  bool reading_stopped_{};
  bool flush_then_close_{};
  bool write_failed_{};  ///< the peer is gone: finish() is posted, nothing more goes out
  bool closed_{};
};

}  // namespace gpusort::service
