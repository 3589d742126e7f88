#include "pipeline/cuda/resources.hpp"

#include "core/checks.hpp"

#include <gpusort/error.hpp>

#include <string>
#include <utility>

namespace gpusort::cuda {
namespace {

static_assert(sizeof(std::size_t) == sizeof(std::uint64_t), "gpusort needs a 64-bit host");

// For releases: makes `device` current without throwing and gives back the previous one.
class noexcept_device_switch {
 public:
  explicit noexcept_device_switch(int device) noexcept
  {
    GPUSORT_CUDA_ASSERT_OK(cudaGetDevice(&previous_));
    if (device >= 0 && device != previous_) {
      GPUSORT_CUDA_ASSERT_OK(cudaSetDevice(device));
      switched_ = true;
    }
  }
  ~noexcept_device_switch()
  {
    if (switched_) GPUSORT_CUDA_ASSERT_OK(cudaSetDevice(previous_));
  }
  noexcept_device_switch(const noexcept_device_switch&) = delete;
  noexcept_device_switch& operator=(const noexcept_device_switch&) = delete;

 private:
  int previous_{};
  bool switched_{};
};

}  // namespace

int current_device()
{
  int device = 0;
  GPUSORT_CUDA_TRY(cudaGetDevice(&device));
  return device;
}

// ---- cuda_stream ----

cuda_stream::cuda_stream()
{
  device_ = current_device();
  GPUSORT_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
}

cuda_stream::~cuda_stream() { release(); }

cuda_stream::cuda_stream(cuda_stream&& other) noexcept
    : stream_{std::exchange(other.stream_, nullptr)}, device_{std::exchange(other.device_, -1)}
{
}

cuda_stream& cuda_stream::operator=(cuda_stream&& other) noexcept
{
  if (this != &other) {
    release();
    stream_ = std::exchange(other.stream_, nullptr);
    device_ = std::exchange(other.device_, -1);
  }
  return *this;
}

void cuda_stream::synchronize() const
{
  GPUSORT_EXPECTS(stream_ != nullptr, "synchronize() on a moved-from cuda_stream");
  GPUSORT_CUDA_TRY(cudaStreamSynchronize(stream_));
}

void cuda_stream::release() noexcept
{
  if (stream_ == nullptr) return;
  const noexcept_device_switch on_owner{device_};
  GPUSORT_CUDA_ASSERT_OK(cudaStreamDestroy(stream_));
  stream_ = nullptr;
  device_ = -1;
}

// ---- cuda_event ----

cuda_event::cuda_event(event_timing timing) : timing_{timing == event_timing::enabled}
{
  GPUSORT_CUDA_TRY(
      cudaEventCreateWithFlags(&event_, timing_ ? cudaEventDefault : cudaEventDisableTiming));
}

cuda_event::~cuda_event() { release(); }

cuda_event::cuda_event(cuda_event&& other) noexcept
    : event_{std::exchange(other.event_, nullptr)}, timing_{std::exchange(other.timing_, false)}
{
}

cuda_event& cuda_event::operator=(cuda_event&& other) noexcept
{
  if (this != &other) {
    release();
    event_ = std::exchange(other.event_, nullptr);
    timing_ = std::exchange(other.timing_, false);
  }
  return *this;
}

void cuda_event::record(cudaStream_t stream) const
{
  GPUSORT_EXPECTS(event_ != nullptr, "record() on a moved-from cuda_event");
  GPUSORT_CUDA_TRY(cudaEventRecord(event_, stream));
}

void cuda_event::make_wait(cudaStream_t stream) const
{
  GPUSORT_EXPECTS(event_ != nullptr, "make_wait() on a moved-from cuda_event");
  GPUSORT_CUDA_TRY(cudaStreamWaitEvent(stream, event_, 0));
}

void cuda_event::synchronize() const
{
  GPUSORT_EXPECTS(event_ != nullptr, "synchronize() on a moved-from cuda_event");
  GPUSORT_CUDA_TRY(cudaEventSynchronize(event_));
}

bool cuda_event::ready() const
{
  GPUSORT_EXPECTS(event_ != nullptr, "ready() on a moved-from cuda_event");
  const cudaError_t status = cudaEventQuery(event_);
  if (status == cudaErrorNotReady) {
    cudaGetLastError();  // "not ready" is an answer, not an error to leave behind
    return false;
  }
  GPUSORT_CUDA_TRY(status);
  return true;
}

void cuda_event::release() noexcept
{
  if (event_ == nullptr) return;
  GPUSORT_CUDA_ASSERT_OK(cudaEventDestroy(event_));
  event_ = nullptr;
  timing_ = false;
}

float elapsed_ms(const cuda_event& start, const cuda_event& stop)
{
  GPUSORT_EXPECTS(start.timing_enabled() && stop.timing_enabled(),
                  "elapsed_ms() needs two events created with event_timing::enabled");
  float ms = 0.0F;
  GPUSORT_CUDA_TRY(cudaEventElapsedTime(&ms, start.value(), stop.value()));
  return ms;
}

// ---- device_buffer ----

device_buffer::device_buffer(std::uint64_t bytes)
{
  if (bytes == 0) return;  // nothing to own, so no need to touch the runtime
  device_ = current_device();
  GPUSORT_CUDA_TRY(cudaMalloc(&data_, bytes));
  size_ = bytes;
  detail::count_held(detail::held::device, static_cast<std::int64_t>(bytes));
}

device_buffer::~device_buffer() { release(); }

device_buffer::device_buffer(device_buffer&& other) noexcept
    : data_{std::exchange(other.data_, nullptr)},
      size_{std::exchange(other.size_, 0)},
      device_{std::exchange(other.device_, -1)}
{
}

device_buffer& device_buffer::operator=(device_buffer&& other) noexcept
{
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    device_ = std::exchange(other.device_, -1);
  }
  return *this;
}

void device_buffer::release() noexcept
{
  if (data_ != nullptr) {
    // cudaFree synchronizes the current device; make that the owner rather than a bystander.
    const noexcept_device_switch on_owner{device_};
    GPUSORT_CUDA_ASSERT_OK(cudaFree(data_));
    detail::count_held(detail::held::device, -static_cast<std::int64_t>(size_));
  }
  data_ = nullptr;
  size_ = 0;
  device_ = -1;
}

// ---- pinned_buffer ----

pinned_buffer::pinned_buffer(std::uint64_t bytes, unsigned int flags)
{
  if (bytes == 0) return;
  GPUSORT_CUDA_TRY(cudaHostAlloc(&data_, bytes, flags));
  size_ = bytes;
  detail::count_held(detail::held::pinned, static_cast<std::int64_t>(bytes));
}

pinned_buffer::~pinned_buffer() { release(); }

pinned_buffer::pinned_buffer(pinned_buffer&& other) noexcept
    : data_{std::exchange(other.data_, nullptr)}, size_{std::exchange(other.size_, 0)}
{
}

pinned_buffer& pinned_buffer::operator=(pinned_buffer&& other) noexcept
{
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void pinned_buffer::release() noexcept
{
  if (data_ != nullptr) {
    GPUSORT_CUDA_ASSERT_OK(cudaFreeHost(data_));
    detail::count_held(detail::held::pinned, -static_cast<std::int64_t>(size_));
  }
  data_ = nullptr;
  size_ = 0;
}

// ---- host_registration ----

host_registration::host_registration(void* data, std::uint64_t bytes, unsigned int flags)
{
  if (bytes == 0) return;
  if (data == nullptr) throw invalid_argument{"host_registration: null pointer with nonzero size"};
  GPUSORT_CUDA_TRY(cudaHostRegister(data, bytes, flags));
  data_ = data;
  size_ = bytes;
  detail::count_held(detail::held::registered, static_cast<std::int64_t>(bytes));
}

host_registration::~host_registration() { release(); }

host_registration::host_registration(host_registration&& other) noexcept
    : data_{std::exchange(other.data_, nullptr)}, size_{std::exchange(other.size_, 0)}
{
}

host_registration& host_registration::operator=(host_registration&& other) noexcept
{
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
  }
  return *this;
}

void host_registration::release() noexcept
{
  if (data_ != nullptr) {
    GPUSORT_CUDA_ASSERT_OK(cudaHostUnregister(data_));
    detail::count_held(detail::held::registered, -static_cast<std::int64_t>(size_));
  }
  data_ = nullptr;
  size_ = 0;
}

// ---- set_device_guard ----

set_device_guard::set_device_guard(int device) : previous_{current_device()}
{
  if (device != previous_) {
    GPUSORT_CUDA_TRY(cudaSetDevice(device));
    switched_ = true;
  }
}

set_device_guard::~set_device_guard()
{
  if (switched_) GPUSORT_CUDA_ASSERT_OK(cudaSetDevice(previous_));
}

}  // namespace gpusort::cuda
