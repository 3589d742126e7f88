// A tmpfs of its own for a test that needs a full one (issue 18: "a full disk: a small tmpfs"):
// mounted on a new folder under /tmp where the test may mount (root), skipped elsewhere, and
// unmounted (lazily, in case a process still holds a file there) when it goes.
#pragma once

#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>

namespace gpusort::test_support {

class small_tmpfs {
 public:
  /// `size`: the mount's size option, such as "8m".
  explicit small_tmpfs(const char* size = "8m")
  {
    char name[] = "/tmp/gpusort-small-tmpfs-XXXXXX";
    if (::mkdtemp(name) == nullptr) {
      error_ = std::string{"mkdtemp: "} + std::strerror(errno);
      return;
    }
    path_ = name;
    const std::string options = std::string{"size="} + size;
    if (::mount("tmpfs", name, "tmpfs", 0, options.c_str()) == 0) {
      mounted_ = true;
      return;
    }
    error_ = std::string{"mount: "} + std::strerror(errno);
    ::rmdir(name);
  }
  ~small_tmpfs()
  {
    if (!mounted_) return;
    ::umount2(path_.c_str(), MNT_DETACH);
    ::rmdir(path_.c_str());
  }
  small_tmpfs(const small_tmpfs&) = delete;
  small_tmpfs& operator=(const small_tmpfs&) = delete;

  [[nodiscard]] bool mounted() const noexcept { return mounted_; }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }
  /// Why it is not mounted.
  [[nodiscard]] const std::string& error() const noexcept { return error_; }

 private:
  std::string path_, error_;
  bool mounted_{false};
};

}  // namespace gpusort::test_support
