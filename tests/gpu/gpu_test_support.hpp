// Shared by the GPU tests: the probe is asked once, and a test that needs a GPU skips with the
// probe's reason when there is none, so a CI host without GPUs shows skips rather than failures.
#pragma once

#include "pipeline/gpu_probe.hpp"

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>

namespace gpusort::test {

/// GPUSORT_TEST_MAX_N: the most elements a test sorts or transforms, for compute-sanitizer's
/// runs (scripts/gpu-check.sh), which slow kernels and memory tracking 10-100 times; tests
/// leave out the sizes above it. Unset: no cap.
inline std::uint64_t max_test_n()
{
  const char* cap = std::getenv("GPUSORT_TEST_MAX_N");
  return cap == nullptr ? ~std::uint64_t{0} : std::strtoull(cap, nullptr, 10);
}

inline const detail::gpu_probe_result& probed_gpus()
{
  static const detail::gpu_probe_result result = detail::probe_gpus();
  return result;
}

/// A test's setup on the legacy stream, complete when these return. A cudaMemcpy from pageable
/// memory may return before its DMA lands, and a cudaMemset of device memory is asynchronous;
/// the streams under test (cudaStreamNonBlocking) do not wait for the legacy stream. In s20's
/// call 4 (h200-20261201-s20), with three other test programs and compute-sanitizer on the GPU,
/// a gather test's marker memset landed after its kernel in 21 of 24 cases and left the whole
/// output at the marker.
inline cudaError_t copy_to_gpu(void* d_dst, const void* src, std::size_t bytes)
{
  if (const cudaError_t e = cudaMemcpy(d_dst, src, bytes, cudaMemcpyHostToDevice);
      e != cudaSuccess)
    return e;
  return cudaDeviceSynchronize();
}
inline cudaError_t fill_gpu(void* d_dst, int byte, std::size_t bytes)
{
  if (const cudaError_t e = cudaMemset(d_dst, byte, bytes); e != cudaSuccess) return e;
  return cudaDeviceSynchronize();
}

class gpu_test : public ::testing::Test {
 protected:
  void SetUp() override
  {
    if (probed_gpus().gpus.empty())
      GTEST_SKIP() << "needs a CUDA GPU; the probe found none: " << probed_gpus().note;
  }
};

}  // namespace gpusort::test
