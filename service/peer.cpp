#include "service/peer.hpp"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

namespace gpusort::service {

peer_credentials peer_of(int socket)
{
  ucred cred{};
  socklen_t length = sizeof cred;
  if (::getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0)
    throw std::system_error{errno, std::generic_category(), "getsockopt(SO_PEERCRED)"};
  return peer_credentials{.pid = cred.pid,
                          .uid = static_cast<std::uint32_t>(cred.uid),
                          .gid = static_cast<std::uint32_t>(cred.gid)};
}

bool allowed(const peer_credentials& peer, const config& cfg, std::uint32_t own_uid)
{
  if (cfg.allowed_uids.empty() && cfg.allowed_gids.empty())
    return peer.uid == own_uid || peer.uid == 0;
  const auto listed = [](const std::vector<std::uint32_t>& ids, std::uint32_t id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
  };
  return listed(cfg.allowed_uids, peer.uid) || listed(cfg.allowed_gids, peer.gid);
}

std::string describe(const peer_credentials& peer)
{
  return "pid " + std::to_string(peer.pid) + ", uid " + std::to_string(peer.uid) + ", gid " +
         std::to_string(peer.gid);
}

}  // namespace gpusort::service
