#include "service/sd_notify.hpp"

#include "service/unique_fd.hpp"

#include <spdlog/spdlog.h>

#include <sys/socket.h>
#include <sys/un.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <system_error>

namespace gpusort::service {

bool sd_notify(std::string_view state)
{
  const char* where = std::getenv("NOTIFY_SOCKET");
  if (where == nullptr || *where == '\0') return false;
  const std::string_view path{where};
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path || (path[0] != '/' && path[0] != '@'))
    throw std::system_error{EINVAL, std::generic_category(),
                            "NOTIFY_SOCKET is neither a path nor an abstract address"};
  std::memcpy(addr.sun_path, path.data(), path.size());
  // An abstract address starts with a NUL byte and is exactly as long as given: no terminator.
  if (path[0] == '@') addr.sun_path[0] = '\0';
  const auto length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() +
                                             (path[0] == '@' ? 0 : 1));
  const unique_fd fd{::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)};
  if (!fd) throw std::system_error{errno, std::generic_category(), "socket for sd_notify"};
  for (;;) {
    const ssize_t sent = ::sendto(fd.get(), state.data(), state.size(), MSG_NOSIGNAL,
                                  reinterpret_cast<const sockaddr*>(&addr), length);
    if (sent >= 0) return true;
    if (errno != EINTR)
      throw std::system_error{errno, std::generic_category(),
                              "sending '" + std::string{state} + "' to NOTIFY_SOCKET " +
                                  std::string{path}};
  }
}

void sd_notify_quietly(std::string_view state) noexcept
{
  try {
    sd_notify(state);
  } catch (const std::exception& e) {
    try {
      spdlog::warn("sd_notify: {}", e.what());
    } catch (...) {  // logging failed too: nothing left to tell
    }
  }
}

}  // namespace gpusort::service
