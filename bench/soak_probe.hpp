// What a daemon process holds, read from /proc/<pid>: its memory (VmRSS, VmHWM and the anonymous
// and shared parts of the RSS) and its open descriptors, with the shared buffers of its pool
// (memfds named "gpusort-buffer") counted apart. The soak program and the hostile-client tests
// compare these before and after: the pool keeps released buffers mapped for reuse by design
// (service/buffer_pool.hpp), so "back to baseline" is judged on what is not the pool's.
#pragma once

#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>

namespace gpusort::soak {

struct process_usage {
  std::uint64_t vm_rss{};     ///< bytes resident (VmRSS)
  std::uint64_t vm_hwm{};     ///< peak resident (VmHWM)
  std::uint64_t rss_anon{};   ///< resident private memory (RssAnon): heap, engine scratch
  std::uint64_t rss_shmem{};  ///< resident shared memory (RssShmem): the pool's buffers
  std::uint64_t fds{};        ///< open descriptors
  std::uint64_t pool_fds{};   ///< of which memfds of the buffer pool
  std::uint64_t threads{};
  [[nodiscard]] std::uint64_t other_fds() const noexcept { return fds - pool_fds; }
};

/// Reads /proc/<pid>/status and /proc/<pid>/fd. A field the kernel does not show stays 0; a
/// process that is gone (or not ours to read) gives all zeros.
inline process_usage usage_of(pid_t pid)
{
  process_usage u;
  const std::filesystem::path proc = "/proc/" + std::to_string(pid);
  std::ifstream status{proc / "status"};
  for (std::string line; std::getline(status, line);) {
    const auto field = [&](std::string_view name, std::uint64_t& out) {
      if (!line.starts_with(name)) return;
      std::istringstream rest{line.substr(name.size())};
      std::uint64_t value = 0;
      rest >> value;
      out = name == "Threads:" ? value : value * 1024;  // status reports kB
    };
    field("VmRSS:", u.vm_rss);
    field("VmHWM:", u.vm_hwm);
    field("RssAnon:", u.rss_anon);
    field("RssShmem:", u.rss_shmem);
    field("Threads:", u.threads);
  }
  std::error_code ec;
  for (std::filesystem::directory_iterator it{proc / "fd", ec}, end; !ec && it != end;
       it.increment(ec)) {
    ++u.fds;
    const auto target = std::filesystem::read_symlink(it->path(), ec);
    if (ec) {
      ec.clear();
      continue;
    }
    if (target.string().starts_with("/memfd:gpusort-buffer")) ++u.pool_fds;
  }
  return u;
}

// GCC names its sanitizers with macros; clang (the tsan preset's compiler) only through
// __has_feature, which the first tsan run missed: its daemon was held to the unsanitized slack.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
inline constexpr bool sanitized_build = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
inline constexpr bool sanitized_build = true;
#else
inline constexpr bool sanitized_build = false;
#endif
#else
inline constexpr bool sanitized_build = false;
#endif

/// How much more private memory a daemon of this build may hold after a run than before: its
/// heap keeps some freed memory (glibc arenas); a sanitizer's allocator keeps freed blocks in
/// quarantine (256 MiB by default under ASan) and shadow memory besides.
inline std::uint64_t rss_slack(std::uint64_t plain)
{
  return sanitized_build ? plain + (std::uint64_t{512} << 20) : plain;
}

/// "fd -> target" per line, the pool's memfds left out: what to print when counts differ.
inline std::string fd_listing(pid_t pid)
{
  std::string out;
  std::error_code ec;
  for (std::filesystem::directory_iterator it{"/proc/" + std::to_string(pid) + "/fd", ec}, end;
       !ec && it != end; it.increment(ec)) {
    std::error_code link_ec;
    const std::string target = std::filesystem::read_symlink(it->path(), link_ec).string();
    if (!target.starts_with("/memfd:gpusort-buffer"))
      out += it->path().filename().string() + " -> " + target + "\n";
  }
  return out;
}

/// GPUSORT_SOAK_SCALE (default 1): the factor by which the long tests and the soak's CI run
/// shrink (0.1 under the sanitizers) or grow. Not a positive number: 1.
inline double soak_scale()
{
  const char* text = std::getenv("GPUSORT_SOAK_SCALE");
  if (text == nullptr) return 1.0;
  char* end = nullptr;
  const double v = std::strtod(text, &end);
  return end != text && *end == '\0' && v > 0 && std::isfinite(v) ? v : 1.0;
}

/// `n` times the soak scale, at least `least`.
inline std::uint64_t scaled(std::uint64_t n, std::uint64_t least = 1)
{
  return std::max<std::uint64_t>(
      least, static_cast<std::uint64_t>(std::llround(static_cast<double>(n) * soak_scale())));
}

/// "123.4 MiB" for a summary line.
inline std::string mib(std::uint64_t bytes)
{
  std::ostringstream s;
  s.setf(std::ios::fixed);
  s.precision(1);
  s << static_cast<double>(bytes) / (1024.0 * 1024.0) << " MiB";
  return s.str();
}

}  // namespace gpusort::soak
