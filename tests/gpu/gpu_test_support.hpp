// Shared by the GPU tests: the probe is asked once, and a test that needs a GPU skips with the
// probe's reason when there is none, so a CI host without GPUs shows skips rather than failures.
#pragma once

#include "pipeline/gpu_probe.hpp"

#include <gtest/gtest.h>

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

class gpu_test : public ::testing::Test {
 protected:
  void SetUp() override
  {
    if (probed_gpus().gpus.empty())
      GTEST_SKIP() << "needs a CUDA GPU; the probe found none: " << probed_gpus().note;
  }
};

}  // namespace gpusort::test
