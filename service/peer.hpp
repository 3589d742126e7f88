// Who is on the other end of a Unix socket, from the kernel (SO_PEERCRED), and whether the
// daemon serves them (the allowed_uids / allowed_gids keys).
#pragma once

#include <gpusort/config.hpp>

#include <cstdint>
#include <string>

#include <sys/types.h>

namespace gpusort::service {

struct peer_credentials {
  pid_t pid{};
  std::uint32_t uid{};
  std::uint32_t gid{};
};

/// The credentials the peer of a connected Unix socket had when it connected (or called
/// socketpair). Throws std::system_error.
peer_credentials peer_of(int socket);

/// Both lists empty: the daemon's own effective uid and root. Otherwise exactly the listed uids
/// and the peers whose primary gid is listed; root and the daemon's user are not implied then
/// (list them to let them in).
bool allowed(const peer_credentials& peer, const config& cfg, std::uint32_t own_uid);

/// "pid 42, uid 1000, gid 1000", for logs and messages.
std::string describe(const peer_credentials& peer);

}  // namespace gpusort::service
