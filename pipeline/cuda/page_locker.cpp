#include "pipeline/cuda/page_locker.hpp"

#include "core/checks.hpp"
#include "core/fault.hpp"
#include "core/log.hpp"
#include "core/switches.hpp"
#include "pipeline/cuda/resources.hpp"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace gpusort::detail {

namespace {

class cuda_page_locker final : public page_locker {
 public:
  explicit cuda_page_locker(int device) : device_{device} {}

  bool lock(void* data, std::size_t bytes) noexcept override
  {
    try {
      const cuda::set_device_guard guard{device_};
      const cudaError_t e = GPUSORT_CUDA_CALL(
          host_register, cudaHostRegister(data, bytes, cudaHostRegisterPortable));
      if (e != cudaSuccess) {
        cudaGetLastError();  // not sticky: the copies stage instead
        log(log_level::debug, "cudaHostRegister of {} bytes of an output: {}", bytes,
            cudaGetErrorString(e));
        return false;
      }
    } catch (...) {  // the device guard's cudaSetDevice failed
      return false;
    }
    count_held(held::registered, static_cast<std::int64_t>(bytes));
    return true;
  }

  void unlock(void* data, std::size_t bytes) noexcept override
  {
    try {
      const cuda::set_device_guard guard{device_};
      const cudaError_t e = cudaHostUnregister(data);
      // At exit after CUDA's own teardown the pages go with the process anyway.
      if (e != cudaSuccess && e != cudaErrorCudartUnloading)
        log_destructor_error(cudaGetErrorString(e), __FILE__, __LINE__);
      if (e != cudaSuccess) cudaGetLastError();
    } catch (...) {
    }
    count_held(held::registered, -static_cast<std::int64_t>(bytes));
  }

 private:
  int device_;
};

}  // namespace

std::shared_ptr<page_locker> make_cuda_page_locker(int device)
{
  // Off unless GPUSORT_OUTPUT_LOCK=1: once the staging's copies streamed and one mover thread
  // waited per piece, the staged copy-out ran at the link's speed (8 GiB fitting 0.16 s, as
  // locked), and the registrations only slowed the copy-in beside them (the daemon's fitting
  // job 0.55-0.58 s staged against 0.61-0.64 s locked; H200 host, 1898a39,
  // bench/results/h200-20261128-1898a39-e2e-8Gi-ab.txt).
  if (!switch_flag("GPUSORT_OUTPUT_LOCK", false)) return nullptr;
  return std::make_shared<cuda_page_locker>(device);
}

}  // namespace gpusort::detail
