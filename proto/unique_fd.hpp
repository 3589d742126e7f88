// Owning file descriptor: closed when the owner goes away, so that no error path of the protocol
// layer (a parser error, an exception between recvmsg and use) can leak a descriptor a peer sent.
#pragma once

#include <unistd.h>

#include <utility>

namespace gpusort::proto {

class unique_fd {
 public:
  unique_fd() noexcept = default;
  explicit unique_fd(int fd) noexcept : fd_{fd} {}
  ~unique_fd() { reset(); }

  unique_fd(unique_fd&& other) noexcept : fd_{other.release()} {}
  unique_fd& operator=(unique_fd&& other) noexcept
  {
    if (this != &other) reset(other.release());
    return *this;
  }
  unique_fd(const unique_fd&) = delete;
  unique_fd& operator=(const unique_fd&) = delete;

  [[nodiscard]] int get() const noexcept { return fd_; }
  [[nodiscard]] explicit operator bool() const noexcept { return fd_ >= 0; }

  /// Gives up ownership without closing.
  [[nodiscard]] int release() noexcept { return std::exchange(fd_, -1); }

  /// Closes the descriptor held (if any) and takes `fd`. close() errors are ignored: on Linux
  /// the descriptor is gone even when close reports EINTR or EIO, so a retry could close a
  /// descriptor another thread has just been given.
  void reset(int fd = -1) noexcept
  {
    const int old = std::exchange(fd_, fd);
    if (old >= 0) ::close(old);
  }

 private:
  int fd_{-1};
};

}  // namespace gpusort::proto
