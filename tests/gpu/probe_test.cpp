#include "gpu_test_support.hpp"
#include "pipeline/gpu_probe.hpp"

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <cstdlib>

namespace gpusort {
namespace {

using gpu_probe_on_gpu = test::gpu_test;

TEST(gpu_probe, answers_with_gpus_or_a_reason)
{
  const detail::gpu_probe_result result = detail::probe_gpus();
  if (result.gpus.empty()) {
    EXPECT_FALSE(result.note.empty()) << "an empty probe must say why";
    return;
  }
  int previous_id = -1;
  for (const detail::gpu_info& gpu : result.gpus) {
    EXPECT_GT(gpu.id, previous_id) << "ids are distinct ordinals in ascending order";
    previous_id = gpu.id;
    EXPECT_FALSE(gpu.name.empty());
    EXPECT_GT(gpu.total_memory, 0U);
    EXPECT_GT(gpu.free_memory, 0U);
    EXPECT_LE(gpu.free_memory, gpu.total_memory);
    EXPECT_GE(gpu.cc_major, 7) << "CUDA 13 supports no older GPU";
    EXPECT_GE(gpu.cc_minor, 0);
    EXPECT_GT(gpu.multiprocessors, 0);
  }
}

// Runs in a child process started afresh (threadsafe death-test style re-executes the binary),
// so CUDA_VISIBLE_DEVICES is set before the runtime initializes: on a GPU host too, this takes
// the path where the runtime finds no device.
TEST(gpu_probe, reports_a_reason_when_no_device_is_visible)
{
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("CUDA_VISIBLE_DEVICES", "", 1);
        const detail::gpu_probe_result result = detail::probe_gpus();
        std::exit(result.gpus.empty() && !result.note.empty() ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(gpu_probe_on_gpu, matches_the_runtime_and_keeps_the_current_device)
{
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  const int last = count - 1;
  ASSERT_EQ(cudaSetDevice(last), cudaSuccess);

  const detail::gpu_probe_result result = detail::probe_gpus();
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, last);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);

  EXPECT_LE(result.gpus.size(), static_cast<std::size_t>(count));
  for (const detail::gpu_info& gpu : result.gpus) {
    cudaDeviceProp prop{};
    ASSERT_EQ(cudaGetDeviceProperties(&prop, gpu.id), cudaSuccess);
    EXPECT_EQ(gpu.name, prop.name);
    EXPECT_EQ(gpu.cc_major, prop.major);
    EXPECT_EQ(gpu.cc_minor, prop.minor);
    EXPECT_EQ(gpu.multiprocessors, prop.multiProcessorCount);
    EXPECT_EQ(gpu.total_memory, prop.totalGlobalMem);
  }
}

}  // namespace
}  // namespace gpusort
