// Owners of the kernel objects the daemon holds for its clients: a file descriptor (the
// protocol's) and a shared mapping. A daemon lives for months and serves untrusted clients, so
// nothing may leak on any path, exceptions included.
#pragma once

#include "proto/unique_fd.hpp"

#include <cstddef>
#include <utility>

#include <sys/mman.h>
#include <unistd.h>

namespace gpusort::service {

/// The protocol layer's owner serves the daemon too: descriptors pass between them.
using unique_fd = proto::unique_fd;

/// A mapping from mmap, unmapped on destruction. `base`/`length` are what mmap returned and was
/// asked for; `data` may lie inside it (offsets that are not page-aligned).
class unique_mapping {
 public:
  unique_mapping() = default;
  unique_mapping(void* base, std::size_t length) noexcept : base_{base}, length_{length} {}
  ~unique_mapping() { reset(); }
  unique_mapping(unique_mapping&& other) noexcept
      : base_{std::exchange(other.base_, nullptr)}, length_{std::exchange(other.length_, 0)}
  {
  }
  unique_mapping& operator=(unique_mapping&& other) noexcept
  {
    if (this != &other) {
      reset();
      base_ = std::exchange(other.base_, nullptr);
      length_ = std::exchange(other.length_, 0);
    }
    return *this;
  }
  unique_mapping(const unique_mapping&) = delete;
  unique_mapping& operator=(const unique_mapping&) = delete;

  [[nodiscard]] void* base() const noexcept { return base_; }
  [[nodiscard]] std::size_t length() const noexcept { return length_; }
  void reset() noexcept
  {
    if (base_ != nullptr) ::munmap(base_, length_);
    base_ = nullptr;
    length_ = 0;
  }

 private:
  void* base_{};
  std::size_t length_{};
};

}  // namespace gpusort::service
