// Helpers shared by the service tests: counting open descriptors, making memfds and files.
#pragma once

#include "tests/support/open_fds.hpp"

#include "service/unique_fd.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>

namespace gpusort::service::testing {

using test_support::open_fd_count;

inline unique_fd make_memfd(std::uint64_t size, int seals, bool allow_sealing = true)
{
  const unsigned flags = MFD_CLOEXEC | (allow_sealing ? MFD_ALLOW_SEALING : 0u);
  unique_fd fd{::memfd_create("gpusort-test", flags)};
  EXPECT_TRUE(fd);
  EXPECT_EQ(::ftruncate(fd.get(), static_cast<off_t>(size)), 0);
  if (seals != 0) {
    EXPECT_EQ(::fcntl(fd.get(), F_ADD_SEALS, seals), 0);
  }
  return fd;
}

/// A file in a fresh temporary folder, removed with the folder.
class temp_dir {
 public:
  explicit temp_dir(const std::string& base = ::testing::TempDir())
  {
    std::string pattern = (std::filesystem::path{base} / "gpusort-svc-XXXXXX").string();
    const char* made = ::mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr);
    path_ = pattern;
  }
  ~temp_dir()
  {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace gpusort::service::testing
