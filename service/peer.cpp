#include "service/peer.hpp"

#include <spdlog/spdlog.h>

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <system_error>

namespace gpusort::service {

peer_credentials peer_of(int socket)
{
  ucred cred{};
  socklen_t length = sizeof cred;
  if (::getsockopt(socket, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0)
    throw std::system_error{errno, std::generic_category(), "getsockopt(SO_PEERCRED)"};
  peer_credentials peer{.pid = cred.pid,
                        .uid = static_cast<std::uint32_t>(cred.uid),
                        .gid = static_cast<std::uint32_t>(cred.gid),
                        .groups = {}};
  if (auto groups = peer_groups(socket)) {
    peer.groups = std::move(*groups);
  } else {
    static std::atomic<bool> told{false};
    if (!told.exchange(true))
      spdlog::warn("this kernel cannot tell a client's supplementary groups (SO_PEERGROUPS, "
                   "Linux 4.13): allowed_gids matches their primary group only");
  }
  return peer;
}

std::optional<std::vector<std::uint32_t>> peer_groups(int socket)
{
  // Enough for most users; for more the kernel answers ERANGE with the length it needs. The
  // groups are the peer's at connect() and do not change, so the second call fits.
  std::vector<gid_t> groups(32);
  int error = 0;
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto length = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (::getsockopt(socket, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &length) == 0) {
      groups.resize(length / sizeof(gid_t));
      return std::vector<std::uint32_t>(groups.begin(), groups.end());
    }
    error = errno;
    if (error == ENOPROTOOPT) return std::nullopt;
    if (error != ERANGE) break;
    groups.resize(length / sizeof(gid_t));
  }
  throw std::system_error{error, std::generic_category(), "getsockopt(SO_PEERGROUPS)"};
}

bool allowed(const peer_credentials& peer, const config& cfg, std::uint32_t own_uid)
{
  if (cfg.allowed_uids.empty() && cfg.allowed_gids.empty())
    return peer.uid == own_uid || peer.uid == 0;
  const auto listed = [](const std::vector<std::uint32_t>& ids, std::uint32_t id) {
    return std::find(ids.begin(), ids.end(), id) != ids.end();
  };
  return listed(cfg.allowed_uids, peer.uid) || listed(cfg.allowed_gids, peer.gid) ||
         std::any_of(peer.groups.begin(), peer.groups.end(),
                     [&](std::uint32_t g) { return listed(cfg.allowed_gids, g); });
}

std::string describe(const peer_credentials& peer)
{
  std::string text = "pid " + std::to_string(peer.pid) + ", uid " + std::to_string(peer.uid) +
                     ", gid " + std::to_string(peer.gid);
  if (!peer.groups.empty()) {
    text += ", groups ";
    for (std::size_t i = 0; i < peer.groups.size(); ++i)
      text += (i == 0 ? "" : ",") + std::to_string(peer.groups[i]);
  }
  return text;
}

}  // namespace gpusort::service
