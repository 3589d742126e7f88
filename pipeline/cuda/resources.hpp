// RAII owners of CUDA runtime resources, in the spirit of RMM's cuda_stream and device_buffer.
// All are move-only; a moved-from object owns nothing and may only be destroyed or assigned.
// Construction failures throw (gpusort::out_of_memory when memory ran out, else
// gpusort::cuda_error); destructors never throw and log a failing release instead.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace gpusort::cuda {

/// A stream that does not synchronize with the legacy default stream, so that copies and
/// kernels of different chunks overlap. Belongs to the device current at construction.
class cuda_stream {
 public:
  cuda_stream();
  ~cuda_stream();
  cuda_stream(cuda_stream&& other) noexcept;
  cuda_stream& operator=(cuda_stream&& other) noexcept;
  cuda_stream(const cuda_stream&) = delete;
  cuda_stream& operator=(const cuda_stream&) = delete;

  [[nodiscard]] cudaStream_t value() const noexcept { return stream_; }
  [[nodiscard]] int device() const noexcept { return device_; }
  /// Blocks until all work queued so far has finished; throws on an asynchronous error.
  void synchronize() const;

 private:
  void release() noexcept;

  cudaStream_t stream_{};
  int device_{-1};
};

enum class event_timing : std::uint8_t { disabled, enabled };

/// An event; timing is off by default because timing events make synchronization slower.
class cuda_event {
 public:
  explicit cuda_event(event_timing timing = event_timing::disabled);
  ~cuda_event();
  cuda_event(cuda_event&& other) noexcept;
  cuda_event& operator=(cuda_event&& other) noexcept;
  cuda_event(const cuda_event&) = delete;
  cuda_event& operator=(const cuda_event&) = delete;

  [[nodiscard]] cudaEvent_t value() const noexcept { return event_; }
  [[nodiscard]] bool timing_enabled() const noexcept { return timing_; }

  void record(cudaStream_t stream) const;
  /// Makes `stream` wait for the work captured by the last record().
  void make_wait(cudaStream_t stream) const;
  void synchronize() const;
  /// True when the captured work has completed; throws on an asynchronous error.
  [[nodiscard]] bool ready() const;

 private:
  void release() noexcept;

  cudaEvent_t event_{};
  bool timing_{};
};

/// Milliseconds between two recorded events; both must have timing enabled.
[[nodiscard]] float elapsed_ms(const cuda_event& start, const cuda_event& stop);

/// Uninitialized device memory of the device current at construction (cudaMalloc, so aligned
/// to at least 256 bytes). A size of 0 allocates nothing and data() is null.
class device_buffer {
 public:
  device_buffer() noexcept = default;
  explicit device_buffer(std::uint64_t bytes);
  ~device_buffer();
  device_buffer(device_buffer&& other) noexcept;
  device_buffer& operator=(device_buffer&& other) noexcept;
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;

  [[nodiscard]] void* data() const noexcept { return data_; }
  template <typename T>
  [[nodiscard]] T* data() const noexcept
  {
    return static_cast<T*>(data_);
  }
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] int device() const noexcept { return device_; }

 private:
  void release() noexcept;

  void* data_{};
  std::uint64_t size_{};
  int device_{-1};
};

/// Page-locked host memory (cudaHostAlloc). `flags` are cudaHostAlloc's: cudaHostAllocPortable
/// for staging shared by several GPUs, cudaHostAllocMapped for kernels reading host memory.
class pinned_buffer {
 public:
  pinned_buffer() noexcept = default;
  explicit pinned_buffer(std::uint64_t bytes, unsigned int flags = cudaHostAllocDefault);
  ~pinned_buffer();
  pinned_buffer(pinned_buffer&& other) noexcept;
  pinned_buffer& operator=(pinned_buffer&& other) noexcept;
  pinned_buffer(const pinned_buffer&) = delete;
  pinned_buffer& operator=(const pinned_buffer&) = delete;

  [[nodiscard]] void* data() const noexcept { return data_; }
  template <typename T>
  [[nodiscard]] T* data() const noexcept
  {
    return static_cast<T*>(data_);
  }
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }

 private:
  void release() noexcept;

  void* data_{};
  std::uint64_t size_{};
};

/// Page-locks memory the caller owns (cudaHostRegister) for as long as this object lives, so
/// that copies from the caller's array run at full speed without a staging copy. The memory
/// must outlive the registration. A size of 0 registers nothing.
class host_registration {
 public:
  host_registration() noexcept = default;
  host_registration(void* data, std::uint64_t bytes,
                    unsigned int flags = cudaHostRegisterDefault);
  ~host_registration();
  host_registration(host_registration&& other) noexcept;
  host_registration& operator=(host_registration&& other) noexcept;
  host_registration(const host_registration&) = delete;
  host_registration& operator=(const host_registration&) = delete;

  [[nodiscard]] void* data() const noexcept { return data_; }
  [[nodiscard]] std::uint64_t size() const noexcept { return size_; }

 private:
  void release() noexcept;

  void* data_{};
  std::uint64_t size_{};
};

/// Makes `device` current for the guard's scope and restores the previous device after it, so
/// that code working on several GPUs never leaves another thread-local current device behind.
class set_device_guard {
 public:
  explicit set_device_guard(int device);
  ~set_device_guard();
  set_device_guard(const set_device_guard&) = delete;
  set_device_guard& operator=(const set_device_guard&) = delete;
  set_device_guard(set_device_guard&&) = delete;
  set_device_guard& operator=(set_device_guard&&) = delete;

  [[nodiscard]] int previous() const noexcept { return previous_; }

 private:
  int previous_{};
  bool switched_{};
};

/// The current device of the calling thread.
[[nodiscard]] int current_device();

}  // namespace gpusort::cuda
