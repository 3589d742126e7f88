// Shared by the GPU tests: the probe is asked once, and a test that needs a GPU skips with the
// probe's reason when there is none, so a CI host without GPUs shows skips rather than failures.
#pragma once

#include "pipeline/gpu_probe.hpp"

#include <gtest/gtest.h>

namespace gpusort::test {

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
