#include "service/session.hpp"

#include "proto/fd_passing.hpp"

#include <gpusort/error.hpp>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>

#include <spdlog/spdlog.h>

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
    while (auto result = parser_.next()) {
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
        return;
      }
    }
  }
  read();
}

void session::enqueue(outgoing o)
{
  if (closed_) return;
  out_bytes_ += o.bytes.size();
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
      // Not finish() here: a reply is sent from inside the request handler (send() runs
      // write() inline on this thread), and finish() disconnects the handler, which cancels its
      // jobs and takes the handler's lock again: the io thread deadlocked on the first failed
      // send of a SUBMIT's reply (found by the daemon's fault sweep, send:N). Nothing more is
      // written; the session ends once the handler has returned.
      out_.clear();
      out_bytes_ = 0;
      reading_stopped_ = true;
      boost::asio::post(socket_.get_executor(), [self = shared_from_this()] { self->finish(); });
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
    if (o.done == o.bytes.size()) out_.pop_front();
    if (read_paused_ && out_bytes_ <= max_queued_output / 2) {
      read_paused_ = false;
      read();
    }
  }
  if (flush_then_close_) finish();
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
  handler_->disconnect();
  boost::system::error_code ignored;
  socket_.close(ignored);
  spdlog::debug("session {}: closed", id_);
  if (on_closed_) on_closed_(shared_from_this());
}

}  // namespace gpusort::service
