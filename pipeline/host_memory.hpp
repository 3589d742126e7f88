// Host memory the pipeline owns: uninitialised, page-aligned, and an allocation failure is a
// gpusort::out_of_memory that names the size, not a std::bad_alloc from deep inside a sort.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpusort::detail {

class host_buffer {
 public:
  host_buffer() = default;
  explicit host_buffer(std::size_t bytes);
  ~host_buffer();
  host_buffer(host_buffer&& other) noexcept;
  host_buffer& operator=(host_buffer&& other) noexcept;
  host_buffer(const host_buffer&) = delete;
  host_buffer& operator=(const host_buffer&) = delete;

  [[nodiscard]] void* data() const noexcept { return data_; }
  template <typename T>
  [[nodiscard]] T* as() const noexcept
  {
    return static_cast<T*>(data_);
  }
  [[nodiscard]] std::size_t size() const noexcept { return bytes_; }

 private:
  void* data_{};
  std::size_t bytes_{};
};

}  // namespace gpusort::detail
