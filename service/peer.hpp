// Who is on the other end of a Unix socket, from the kernel (SO_PEERCRED, SO_PEERGROUPS), and
// whether the daemon serves them (the allowed_uids / allowed_gids keys).
#pragma once

#include <gpusort/config.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace gpusort::service {

struct peer_credentials {
  pid_t pid{};
  std::uint32_t uid{};
  std::uint32_t gid{};  ///< the primary group
  /// The supplementary groups, as getgroups() in the peer would list them; empty where the
  /// kernel cannot tell (SO_PEERGROUPS came with Linux 4.13), and then only `gid` counts.
  std::vector<std::uint32_t> groups;
};

/// The credentials the peer of a connected Unix socket had when it connected (or called
/// socketpair), with its supplementary groups. Throws std::system_error.
peer_credentials peer_of(int socket);

/// The peer's supplementary groups (SO_PEERGROUPS); nullopt where the kernel lacks the option.
/// Throws std::system_error on any other failure.
std::optional<std::vector<std::uint32_t>> peer_groups(int socket);

/// Both lists empty: the daemon's own effective uid and root. Otherwise exactly the listed uids
/// and the members of a listed group, as their primary group or a supplementary one (a user
/// added to the `gpusort` group with usermod -aG); root and the daemon's user are not implied
/// then (list them to let them in).
bool allowed(const peer_credentials& peer, const config& cfg, std::uint32_t own_uid);

/// "pid 42, uid 1000, gid 1000, groups 1000,27", for logs and messages.
std::string describe(const peer_credentials& peer);

}  // namespace gpusort::service
