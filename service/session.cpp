#include "service/session.hpp"

#include "proto/fd_passing.hpp"

#include <gpusort/error.hpp>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

#include <spdlog/spdlog.h>

#include <malloc.h>

#include <algorithm>
#include <system_error>

namespace gpusort::service {

namespace {

// A client that sends requests but does not read the replies would make its queue of outgoing
// frames grow without bound: past this many bytes the session stops reading its requests until
// the queue drains to half.
constexpr std::size_t max_queued_output = std::size_t{1} << 20;

}  // namespace

session::session(socket_type socket, daemon_context& ctx, peer_credentials peer,
                 std::function<void(const std::shared_ptr<session>&)> on_closed)
    : socket_{std::move(socket)},
      ctx_{ctx},
      peer_{peer},
      id_{ctx.next_session.fetch_add(1)},
      on_closed_{std::move(on_closed)},
      buffer_(proto::header_bytes + proto::max_control_body)
{
}

session::~session()
{
  if (handler_) handler_->disconnect();
}

void session::start()
{
  socket_.non_blocking(true);
  handler_ = std::make_shared<request_handler>(ctx_, peer_, id_,
                                               std::weak_ptr<outbox>{shared_from_this()});
  spdlog::debug("session {}: connected ({})", id_, describe(peer_));
  read();
}

void session::send(std::vector<std::byte> frame, std::vector<unique_fd> fds)
{
  boost::asio::dispatch(socket_.get_executor(),
                        [self = shared_from_this(), o = outgoing{std::move(frame), std::move(fds),
                                                                 0}]() mutable {
                          self->enqueue(std::move(o));
                        });
}

void session::read()
{
  if (closed_ || reading_stopped_ || read_armed_) return;
  if (out_bytes_ > max_queued_output) {
    spdlog::debug("session {}: {} bytes of replies wait for a client that does not read; its "
                  "requests wait too",
                  id_, out_bytes_);
    read_paused_ = true;
    return;
  }
  read_armed_ = true;
  socket_.async_wait(socket_type::wait_read,
                     [self = shared_from_this()](const boost::system::error_code& ec) {
                       self->read_armed_ = false;
                       if (self->closed_ || self->reading_stopped_) return;
                       if (ec) {
                         self->finish();
                         return;
                       }
                       self->on_readable();
                     });
}

void session::on_readable()
{
  // A bounded number of reads per wake-up, so that one busy client cannot starve the others.
  for (int reads = 0; reads < 16 && out_bytes_ <= max_queued_output; ++reads) {
    std::optional<proto::received> got;
    try {
      got = proto::try_receive(socket_.native_handle(), buffer_, proto::max_fds_per_frame);
    } catch (const invalid_argument& e) {
      // More descriptors than a frame may carry: bytes were consumed, the stream is lost.
      wire::ErrorReply reply;
      *reply.mutable_status() = proto::make_status(wire::PROTOCOL_ERROR, e.what());
      enqueue(outgoing{proto::encode_frame(0, reply, proto::hello_version), {}, 0});
      close_after_flush();
      return;
    } catch (const std::system_error& e) {
      spdlog::debug("session {}: {}", id_, e.what());
      finish();
      return;
    }
    if (!got) break;
    if (got->bytes == 0) {
      if (!parser_.idle())
        spdlog::debug("session {}: the client closed in the middle of a frame", id_);
      finish();
      return;
    }
    parser_.feed(std::span<const std::byte>{buffer_.data(), got->bytes}, std::move(got->fds));
    if (!handle_frames()) break;
  }
  read();
}

bool session::handle_frames()
{
  // One read brings up to 64 KiB of requests, thousands of small ones, and a DAEMON_STATUS
  // reply lists every job: answering all of them before looking at the queue of replies let a
  // client that does not read make the daemon hold megabytes per read (64 such clients with 64
  // jobs queued: 202 MiB). The frames past the limit wait in the parser until the client reads.
  while (out_bytes_ <= max_queued_output) {
    auto result = parser_.next();
    if (!result) return true;
    const request_handler::verdict v =
        std::holds_alternative<proto::frame>(*result)
            ? handler_->handle(std::get<proto::frame>(std::move(*result)))
            : handler_->handle(std::get<proto::parse_error>(*result));
    if (!version_applied_ && handler_->version()) {
      parser_.accept_versions(*handler_->version(), *handler_->version());
      version_applied_ = true;
    }
    if (v == request_handler::verdict::close) {
      close_after_flush();
      return false;
    }
    if (write_failed_) return false;  // the peer is gone: the requests after this one go unread
  }
  return false;
}

void session::resume_reading()
{
  if (closed_ || reading_stopped_) return;
  handle_frames();
  read();
}

void session::enqueue(outgoing o)
{
  if (closed_ || write_failed_) return;
  if (o.fds.empty() && o.bytes.size() >= proto::header_bytes) {
    const proto::frame_header h =
        proto::decode_header(std::span<const std::byte, proto::header_bytes>{o.bytes.data(),
                                                                             proto::header_bytes});
    if (h.type == static_cast<std::uint16_t>(proto::message_type::progress)) {
      // Progress is a snapshot: the newest makes any older one still waiting here worthless.
      // Before this, a client that did not read got every event of its jobs queued in the
      // daemon, ten a second per job for as long as the jobs ran.
      if (const auto it = waiting_progress_.find(h.request_id); it != waiting_progress_.end()) {
        outgoing& older = out_[it->second - out_front_];
        if (older.done == 0) {
          out_bytes_ = out_bytes_ - older.bytes.size() + o.bytes.size();
          older.bytes = std::move(o.bytes);
          ++progress_replaced_;
          return;
        }
      }
      o.progress_of = h.request_id;
      waiting_progress_[h.request_id] = out_front_ + out_.size();
    } else if (h.type == static_cast<std::uint16_t>(proto::message_type::job_finished)) {
      // The job is over: a later job may reuse its request id, and its progress must not take
      // the place of this one's, before this JOB_FINISHED.
      waiting_progress_.erase(h.request_id);
    }
  }
  out_bytes_ += o.bytes.size();
  peak_out_bytes_ = std::max(peak_out_bytes_, out_bytes_);
  out_.push_back(std::move(o));
  if (!writing_) write();
}

void session::write()
{
  while (!out_.empty()) {
    outgoing& o = out_.front();
    std::vector<int> raw;
    if (o.done == 0)
      for (const unique_fd& fd : o.fds) raw.push_back(fd.get());
    std::optional<std::size_t> sent;
    try {
      sent = proto::try_send(socket_.native_handle(),
                             std::span<const std::byte>{o.bytes}.subspan(o.done), raw);
    } catch (const std::system_error& e) {
      spdlog::debug("session {}: {}", id_, e.what());
      write_failed();
      return;
    }
    if (!sent) {
      writing_ = true;
      socket_.async_wait(socket_type::wait_write,
                         [self = shared_from_this()](const boost::system::error_code& ec) {
                           self->writing_ = false;
                           if (self->closed_) return;
                           if (ec) {
                             self->finish();
                             return;
                           }
                           self->write();
                         });
      return;
    }
    o.done += *sent;
    out_bytes_ -= *sent;
    if (o.done == o.bytes.size()) {
      if (o.progress_of != 0) {
        const auto it = waiting_progress_.find(o.progress_of);
        if (it != waiting_progress_.end() && it->second == out_front_) waiting_progress_.erase(it);
      }
      out_.pop_front();
      ++out_front_;
    }
    if (read_paused_ && out_bytes_ <= max_queued_output / 2) {
      read_paused_ = false;
      // Frames may wait in the parser: they are handled first, from the io loop, because
      // handling them sends replies, and this is the middle of sending.
      boost::asio::post(socket_.get_executor(),
                        [self = shared_from_this()] { self->resume_reading(); });
    }
  }
  if (flush_then_close_) finish();
}

void session::write_failed()
{
  // write() runs inside send(), that is inside the request handler's reply, which may hold the
  // handler's locks (a SUBMIT_REPLY is sent under the lock that keeps it ahead of the job's
  // events). Closing here would cancel the job there and then, whose JOB_FINISHED takes the same
  // lock: gpusortd hung for good when a client sent a SUBMIT and hung up before the reply
  // (hostile_test ClientsThatSubmitAndHangUpAtOnce). So the session stops reading and writing
  // now and closes from the io loop, once the handler has returned.
  if (write_failed_ || closed_) return;
  write_failed_ = true;
  reading_stopped_ = true;
  out_.clear();
  out_bytes_ = 0;
  waiting_progress_.clear();
  boost::asio::post(socket_.get_executor(), [self = shared_from_this()] { self->finish(); });
}

void session::close_after_flush()
{
  if (closed_) return;
  reading_stopped_ = true;
  flush_then_close_ = true;
  if (!writing_ && out_.empty()) finish();
}

void session::close() { finish(); }

void session::finish()
{
  if (closed_) return;
  closed_ = true;
  out_.clear();
  out_bytes_ = 0;
  waiting_progress_.clear();
  // A client that read nothing left up to a MiB of replies here, thousands of small blocks
  // that the heap keeps after they are freed: 64 such clients left gpusortd 108 MiB larger
  // for good (hostile_test PipelinedStatusRequestsWithAFullQueueStayWithinTheReplyLimit).
  if (peak_out_bytes_ >= max_queued_output / 2) ::malloc_trim(0);
  if (progress_replaced_ != 0)
    spdlog::debug("session {}: {} progress event(s) replaced by newer ones while the client did "
                  "not read",
                  id_, progress_replaced_);
  handler_->disconnect();
  boost::system::error_code ignored;
  socket_.close(ignored);
  spdlog::debug("session {}: closed", id_);
  if (on_closed_) on_closed_(shared_from_this());
}

}  // namespace gpusort::service
