#include "client/cli.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>

namespace gpusort::cli {

namespace {

std::string errno_text(const std::string& what, const std::string& path)
{
  return what + " " + path + ": " + std::strerror(errno);
}

}  // namespace

mapped_input::mapped_input(const std::string& path)
{
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw cli_error{exit_runtime, errno_text("cannot open", path)};
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string msg = errno_text("cannot stat", path);
    ::close(fd);
    throw cli_error{exit_runtime, msg};
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw cli_error{exit_runtime, path + " is not a regular file"};
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const std::string msg = errno_text("cannot map", path);
      ::close(fd);
      throw cli_error{exit_runtime, msg};
    }
    data_ = p;
  }
  ::close(fd);
}

mapped_input::~mapped_input()
{
  if (data_ != nullptr) ::munmap(data_, size_);
}

atomic_output::atomic_output(const std::string& path, std::uint64_t size) : path_{path}, size_{size}
{
  const std::filesystem::path p{path};
  const std::filesystem::path dir = p.has_parent_path() ? p.parent_path() : ".";
  std::random_device rd;
  temp_ = (dir / ("." + p.filename().string() + ".gpusort-" + std::to_string(rd()) + ".tmp"))
              .string();
  fd_ = ::open(temp_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) throw cli_error{exit_runtime, errno_text("cannot create output beside", path)};
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
    const std::string msg = errno_text("cannot size output", path);
    ::close(fd_);
    ::unlink(temp_.c_str());
    throw cli_error{exit_runtime, msg};
  }
  if (size > 0) {
    void* m = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (m == MAP_FAILED) {
      const std::string msg = errno_text("cannot map output", path);
      ::close(fd_);
      ::unlink(temp_.c_str());
      throw cli_error{exit_runtime, msg};
    }
    data_ = m;
  }
}

void atomic_output::commit()
{
  if (data_ != nullptr && ::msync(data_, size_, MS_SYNC) != 0)
    throw cli_error{exit_runtime, errno_text("cannot write", path_)};
  if (::fsync(fd_) != 0) throw cli_error{exit_runtime, errno_text("cannot write", path_)};
  if (::rename(temp_.c_str(), path_.c_str()) != 0)
    throw cli_error{exit_runtime, errno_text("cannot replace", path_)};
  committed_ = true;
}

atomic_output::~atomic_output()
{
  if (data_ != nullptr) ::munmap(data_, size_);
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_.c_str());
}

}  // namespace gpusort::cli
