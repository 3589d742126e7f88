#include "proto/fd_passing.hpp"

#include "core/checks.hpp"
#include "core/sys_io.hpp"

#include <gpusort/error.hpp>

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

namespace gpusort::proto {

namespace sys = detail::sys;

namespace {

[[noreturn]] void throw_errno(const char* what)
{
  throw std::system_error{errno, std::generic_category(), what};
}

void wait_for(int socket, short events)
{
  pollfd p{.fd = socket, .events = events, .revents = 0};
  while (::poll(&p, 1, -1) < 0)
    if (errno != EINTR) throw_errno("poll on a Unix socket");
  // Errors and hang-ups show up in the sendmsg/recvmsg that follows.
}

// Room for `n` descriptors in a control message, as cmsghdr-aligned storage.
std::vector<cmsghdr> control_buffer(std::size_t n)
{
  if (n == 0) return {};
  const std::size_t bytes = CMSG_SPACE(n * sizeof(int));
  return std::vector<cmsghdr>((bytes + sizeof(cmsghdr) - 1) / sizeof(cmsghdr));
}

}  // namespace

std::optional<std::size_t> try_send(int socket, std::span<const std::byte> bytes,
                                    std::span<const int> fds)
{
  GPUSORT_EXPECTS(!bytes.empty(), "descriptors need at least one byte to travel with");
  GPUSORT_EXPECTS(fds.size() <= 253, "more descriptors than SCM_MAX_FD");
  iovec iov{.iov_base = const_cast<std::byte*>(bytes.data()), .iov_len = bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<cmsghdr> control = control_buffer(fds.size());
  if (!fds.empty()) {
    msg.msg_control = control.data();
    msg.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
    std::memcpy(CMSG_DATA(cmsg), fds.data(), fds.size() * sizeof(int));
  }
  for (;;) {
    const ssize_t sent = sys::sendmsg(socket, &msg, MSG_NOSIGNAL);
    if (sent >= 0) return static_cast<std::size_t>(sent);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return std::nullopt;
    throw_errno("sendmsg on a Unix socket");
  }
}

void send_frame(int socket, std::span<const std::byte> bytes, std::span<const int> fds)
{
  GPUSORT_EXPECTS(!bytes.empty() || fds.empty(), "descriptors need at least one byte");
  std::size_t done = 0;
  while (done < bytes.size()) {
    // The descriptors ride with the first bytes that leave: until then `done` is 0.
    const auto sent = try_send(socket, bytes.subspan(done),
                               done == 0 ? fds : std::span<const int>{});
    if (sent)
      done += *sent;
    else
      wait_for(socket, POLLOUT);
  }
}

std::optional<received> try_receive(int socket, std::span<std::byte> buffer, std::size_t max_fds)
{
  GPUSORT_EXPECTS(!buffer.empty(), "receive needs room for at least one byte");
  iovec iov{.iov_base = buffer.data(), .iov_len = buffer.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<cmsghdr> control = control_buffer(max_fds);
  if (max_fds > 0) {
    msg.msg_control = control.data();
    msg.msg_controllen = control.size() * sizeof(cmsghdr);
  }
  ssize_t got = 0;
  for (;;) {
    got = sys::recvmsg(socket, &msg, MSG_CMSG_CLOEXEC);
    if (got >= 0) break;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return std::nullopt;
    throw_errno("recvmsg on a Unix socket");
  }
  received result{.bytes = static_cast<std::size_t>(got), .fds = {}};
  // Own every descriptor before judging anything, so that each error below closes them all.
  if (max_fds > 0) {
    for (cmsghdr* cmsg = CMSG_FIRSTHDR(&msg); cmsg != nullptr; cmsg = CMSG_NXTHDR(&msg, cmsg)) {
      if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) continue;
      const std::size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (std::size_t i = 0; i < count; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
        result.fds.emplace_back(fd);
      }
    }
  }
  // The control buffer is rounded up to 8 bytes, so it may take one descriptor more than asked.
  if ((msg.msg_flags & MSG_CTRUNC) != 0 || result.fds.size() > max_fds)
    throw invalid_argument{"the peer sent more than " + std::to_string(max_fds) +
                           " descriptors with one message; they were closed"};
  return result;
}

received receive(int socket, std::span<std::byte> buffer, std::size_t max_fds)
{
  for (;;) {
    if (auto result = try_receive(socket, buffer, max_fds)) return std::move(*result);
    wait_for(socket, POLLIN);
  }
}

}  // namespace gpusort::proto
