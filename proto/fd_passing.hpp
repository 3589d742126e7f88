// Frames and descriptors over a Unix stream socket: sendmsg/recvmsg with SCM_RIGHTS.
//
// Works on blocking and non-blocking sockets alike: the blocking calls wait with poll() when the
// socket would block; the try_ calls return nullopt instead, for an event loop. System call
// failures throw std::system_error with the errno; a peer that sends more descriptors than
// allowed is a gpusort::invalid_argument (the connection cannot go on: bytes were consumed).
#pragma once

#include "proto/unique_fd.hpp"

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

namespace gpusort::proto {

/// One sendmsg: as much of `bytes` as the socket takes now, with `fds` attached when `fds` is
/// not empty. Returns the bytes sent (> 0), or nullopt when the socket would block (nothing was
/// sent, the descriptors neither). EINTR is retried; SIGPIPE is never raised (EPIPE throws).
std::optional<std::size_t> try_send(int socket, std::span<const std::byte> bytes,
                                    std::span<const int> fds = {});

/// Sends a whole frame: the descriptors go with the first sendmsg, which starts at the frame's
/// first byte, as frame_parser requires; partial writes are continued without them.
void send_frame(int socket, std::span<const std::byte> bytes, std::span<const int> fds = {});

struct received {
  std::size_t bytes{};  ///< 0: the peer closed the stream
  std::vector<unique_fd> fds;
};

/// One recvmsg into `buffer` (not empty) accepting at most `max_fds` descriptors, received with
/// MSG_CMSG_CLOEXEC. nullopt when the socket would block. More descriptors than `max_fds`
/// (MSG_CTRUNC) closes those that arrived and throws invalid_argument.
std::optional<received> try_receive(int socket, std::span<std::byte> buffer,
                                    std::size_t max_fds);

/// try_receive, waiting while the socket has nothing.
received receive(int socket, std::span<std::byte> buffer, std::size_t max_fds);

}  // namespace gpusort::proto
