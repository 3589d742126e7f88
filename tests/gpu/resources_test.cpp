#include "gpu_test_support.hpp"
#include "pipeline/cuda/resources.hpp"

#include "core/cuda/ordered_keys.cuh"

#include <gpusort/error.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <thread>
#include <utility>
#include <vector>

namespace gpusort {
namespace {

using cuda::cuda_event;
using cuda::cuda_stream;
using cuda::device_buffer;
using cuda::event_timing;
using cuda::host_registration;
using cuda::pinned_buffer;
using cuda::set_device_guard;

constexpr std::uint64_t absurd_bytes = std::uint64_t{1} << 50;  // 1 PiB

cudaMemoryType memory_type(const void* p)
{
  cudaPointerAttributes attributes{};
  EXPECT_EQ(cudaPointerGetAttributes(&attributes, p), cudaSuccess);
  return attributes.type;
}

int device_count()
{
  int count = 0;
  EXPECT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  return count;
}

// Fills `bytes` bytes of device memory with `value` on `stream` and returns them on the host.
std::vector<unsigned char> fill_and_read(void* d, std::uint64_t bytes, int value,
                                         cudaStream_t stream)
{
  std::vector<unsigned char> host(bytes);
  EXPECT_EQ(cudaMemsetAsync(d, value, bytes, stream), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(host.data(), d, bytes, cudaMemcpyDeviceToHost, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  return host;
}

bool all_bytes_are(const std::vector<unsigned char>& bytes, unsigned char value)
{
  return std::all_of(bytes.begin(), bytes.end(), [&](unsigned char b) { return b == value; });
}

using gpu_resources = test::gpu_test;

TEST_F(gpu_resources, stream_is_non_blocking_and_moves)
{
  cuda_stream a;
  ASSERT_NE(a.value(), nullptr);
  EXPECT_EQ(a.device(), cuda::current_device());
  unsigned int flags = 0;
  ASSERT_EQ(cudaStreamGetFlags(a.value(), &flags), cudaSuccess);
  EXPECT_EQ(flags, static_cast<unsigned int>(cudaStreamNonBlocking));

  const cudaStream_t handle = a.value();
  cuda_stream b{std::move(a)};
  EXPECT_EQ(a.value(), nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(b.value(), handle);
  b.synchronize();

  cuda_stream c;
  c = std::move(b);  // c's own stream is destroyed, b's handed over
  EXPECT_EQ(c.value(), handle);
  EXPECT_EQ(b.value(), nullptr);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(cudaStreamQuery(c.value()), cudaSuccess);
  EXPECT_THROW(b.synchronize(), logic_error);
}

TEST_F(gpu_resources, event_orders_work_across_streams)
{
  constexpr std::uint64_t bytes = std::uint64_t{64} << 20;
  cuda_stream producer;
  cuda_stream consumer;
  device_buffer buffer{bytes};
  pinned_buffer host{bytes};
  std::memset(host.data(), 0, bytes);

  cuda_event done;
  EXPECT_FALSE(done.timing_enabled());
  ASSERT_EQ(cudaMemsetAsync(buffer.data(), 0xAB, bytes, producer.value()), cudaSuccess);
  done.record(producer.value());
  done.make_wait(consumer.value());
  ASSERT_EQ(cudaMemcpyAsync(host.data(), buffer.data(), bytes, cudaMemcpyDeviceToHost,
                            consumer.value()),
            cudaSuccess);
  consumer.synchronize();
  const auto* p = host.data<unsigned char>();
  EXPECT_TRUE(std::all_of(p, p + bytes, [](unsigned char b) { return b == 0xAB; }));
  EXPECT_TRUE(done.ready());
}

TEST_F(gpu_resources, event_ready_reflects_pending_work)
{
  cuda_stream stream;
  std::atomic<bool> release{false};
  // A host function that blocks the stream until the test lets it go: the event recorded after
  // it cannot complete before that, whatever the timing.
  auto wait_for_release = [](void* flag) {
    while (!static_cast<std::atomic<bool>*>(flag)->load()) std::this_thread::yield();
  };
  ASSERT_EQ(cudaLaunchHostFunc(stream.value(), wait_for_release, &release), cudaSuccess);
  cuda_event event;
  event.record(stream.value());
  EXPECT_FALSE(event.ready());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "not-ready must not leave an error behind";
  release.store(true);
  event.synchronize();
  EXPECT_TRUE(event.ready());
}

TEST_F(gpu_resources, timing_events_measure_and_untimed_ones_refuse)
{
  cuda_stream stream;
  device_buffer buffer{std::uint64_t{256} << 20};
  cuda_event start{event_timing::enabled};
  cuda_event stop{event_timing::enabled};
  EXPECT_TRUE(start.timing_enabled());
  start.record(stream.value());
  ASSERT_EQ(cudaMemsetAsync(buffer.data(), 1, buffer.size(), stream.value()), cudaSuccess);
  stop.record(stream.value());
  stop.synchronize();
  EXPECT_GT(cuda::elapsed_ms(start, stop), 0.0F);

  cuda_event untimed;
  untimed.record(stream.value());
  untimed.synchronize();
  EXPECT_THROW((void)cuda::elapsed_ms(start, untimed), logic_error);

  cuda_event moved{std::move(start)};
  EXPECT_TRUE(moved.timing_enabled());
  EXPECT_FALSE(start.timing_enabled());  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(start.value(), nullptr);     // NOLINT(bugprone-use-after-move)
  EXPECT_GT(cuda::elapsed_ms(moved, stop), 0.0F);
}

TEST_F(gpu_resources, device_buffer_allocates_frees_and_moves)
{
  constexpr std::uint64_t bytes = (std::uint64_t{1} << 20) + 3;
  device_buffer a{bytes};
  ASSERT_NE(a.data(), nullptr);
  EXPECT_EQ(a.size(), bytes);
  EXPECT_EQ(a.device(), cuda::current_device());
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.data()) % 256, 0U);
  EXPECT_EQ(static_cast<void*>(a.data<std::uint64_t>()), a.data());
  EXPECT_EQ(memory_type(a.data()), cudaMemoryTypeDevice);
  cuda_stream stream;
  EXPECT_TRUE(all_bytes_are(fill_and_read(a.data(), bytes, 0x5C, stream.value()), 0x5C));

  void* const first = a.data();
  device_buffer b{std::move(a)};
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(a.size(), 0U);       // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(b.data(), first);
  EXPECT_EQ(b.size(), bytes);

  device_buffer c{1024};
  void* const second = c.data();
  c = std::move(b);  // frees c's own allocation
  EXPECT_EQ(c.data(), first);
  EXPECT_EQ(memory_type(second), cudaMemoryTypeUnregistered);
  EXPECT_EQ(memory_type(first), cudaMemoryTypeDevice);
  {
    const device_buffer d{std::move(c)};
  }
  EXPECT_EQ(memory_type(first), cudaMemoryTypeUnregistered);

  const device_buffer empty{0};
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_TRUE(empty.empty());
}

TEST_F(gpu_resources, absurd_device_allocation_throws_out_of_memory_and_device_stays_usable)
{
  EXPECT_THROW(device_buffer{absurd_bytes}, out_of_memory);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);

  // Allocation, a kernel and a copy still work afterwards.
  cuda_stream stream;
  device_buffer keys{1000 * sizeof(std::int32_t)};
  ASSERT_EQ(cudaMemsetAsync(keys.data(), 0, keys.size(), stream.value()), cudaSuccess);
  cuda::to_ordered(keys.data(), 1000, dtype::i32, order::ascending, stream.value());
  std::vector<std::uint32_t> back(1000);
  ASSERT_EQ(cudaMemcpyAsync(back.data(), keys.data(), keys.size(), cudaMemcpyDeviceToHost,
                            stream.value()),
            cudaSuccess);
  stream.synchronize();
  EXPECT_TRUE(std::all_of(back.begin(), back.end(), [](auto k) { return k == 0x80000000U; }));
}

TEST_F(gpu_resources, pinned_buffer_allocates_frees_and_moves)
{
  constexpr std::uint64_t count = std::uint64_t{1} << 18;
  pinned_buffer a{count * sizeof(std::uint64_t)};
  ASSERT_NE(a.data(), nullptr);
  EXPECT_EQ(memory_type(a.data()), cudaMemoryTypeHost);
  std::iota(a.data<std::uint64_t>(), a.data<std::uint64_t>() + count, std::uint64_t{7});

  cuda_stream stream;
  device_buffer d{a.size()};
  pinned_buffer back{a.size()};
  ASSERT_EQ(cudaMemcpyAsync(d.data(), a.data(), a.size(), cudaMemcpyHostToDevice, stream.value()),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(back.data(), d.data(), a.size(), cudaMemcpyDeviceToHost,
                            stream.value()),
            cudaSuccess);
  stream.synchronize();
  EXPECT_EQ(std::memcmp(a.data(), back.data(), a.size()), 0);

  void* const first = a.data();
  pinned_buffer b{std::move(a)};
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(b.data(), first);
  b = std::move(back);
  EXPECT_EQ(memory_type(first), cudaMemoryTypeUnregistered);

  EXPECT_THROW(pinned_buffer{absurd_bytes}, out_of_memory);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_TRUE(pinned_buffer{0}.empty());
}

TEST_F(gpu_resources, mapped_pinned_buffer_is_usable_by_kernels)
{
  constexpr std::uint64_t n = 4097;
  pinned_buffer mapped{n * sizeof(std::int64_t), cudaHostAllocMapped | cudaHostAllocPortable};
  auto* keys = mapped.data<std::int64_t>();
  for (std::uint64_t i = 0; i < n; ++i) keys[i] = static_cast<std::int64_t>(i) - 2000;

  void* device_view = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(&device_view, mapped.data(), 0), cudaSuccess);
  cuda_stream stream;
  cuda::to_ordered(device_view, n, dtype::i64, order::ascending, stream.value());
  stream.synchronize();
  const auto* bits = mapped.data<std::uint64_t>();
  for (std::uint64_t i = 0; i < n; ++i) {
    const auto expected =
        static_cast<std::uint64_t>(static_cast<std::int64_t>(i) - 2000) ^ (std::uint64_t{1} << 63);
    ASSERT_EQ(bits[i], expected) << "at " << i;
  }
}

TEST_F(gpu_resources, host_registration_pins_caller_memory_until_destroyed)
{
  std::vector<std::uint32_t> data(std::uint64_t{1} << 20);
  std::iota(data.begin(), data.end(), 0U);
  const std::uint64_t bytes = data.size() * sizeof(std::uint32_t);
  EXPECT_EQ(memory_type(data.data()), cudaMemoryTypeUnregistered);
  {
    host_registration registration{data.data(), bytes};
    EXPECT_EQ(registration.data(), data.data());
    EXPECT_EQ(registration.size(), bytes);
    EXPECT_EQ(memory_type(data.data()), cudaMemoryTypeHost);
    EXPECT_THROW((host_registration{data.data(), bytes}), cuda_error)
        << "registering the same memory twice is a CUDA error";
    EXPECT_EQ(cudaGetLastError(), cudaSuccess);

    host_registration moved{std::move(registration)};
    EXPECT_EQ(registration.data(), nullptr);  // NOLINT(bugprone-use-after-move)
    {
      const host_registration gone{std::move(registration)};  // NOLINT: empty, releases nothing
    }
    EXPECT_EQ(memory_type(data.data()), cudaMemoryTypeHost);

    cuda_stream stream;
    device_buffer d{bytes};
    std::vector<std::uint32_t> back(data.size());
    ASSERT_EQ(cudaMemcpyAsync(d.data(), data.data(), bytes, cudaMemcpyHostToDevice,
                              stream.value()),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpyAsync(back.data(), d.data(), bytes, cudaMemcpyDeviceToHost,
                              stream.value()),
              cudaSuccess);
    stream.synchronize();
    EXPECT_EQ(back, data);
  }
  EXPECT_EQ(memory_type(data.data()), cudaMemoryTypeUnregistered);
  EXPECT_THROW((host_registration{nullptr, 16}), invalid_argument);
  const host_registration nothing{nullptr, 0};
  EXPECT_EQ(nothing.data(), nullptr);
}

TEST_F(gpu_resources, set_device_guard_restores_and_rejects_bad_devices)
{
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  {
    const set_device_guard guard{0};
    EXPECT_EQ(guard.previous(), 0);
    EXPECT_EQ(cuda::current_device(), 0);
  }
  EXPECT_EQ(cuda::current_device(), 0);

  const int count = device_count();
  EXPECT_THROW(set_device_guard{count}, cuda_error);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cuda::current_device(), 0);
}

TEST_F(gpu_resources, set_device_guard_switches_between_gpus)
{
  const int count = device_count();
  if (count < 2) GTEST_SKIP() << "needs two GPUs; " << count << " visible";
  ASSERT_EQ(cudaSetDevice(count - 1), cudaSuccess);
  {
    const set_device_guard guard{0};
    EXPECT_EQ(guard.previous(), count - 1);
    EXPECT_EQ(cuda::current_device(), 0);
    // A buffer of device 0 freed while another device is current must still be freed.
    device_buffer on_zero{4096};
    EXPECT_EQ(on_zero.device(), 0);
    ASSERT_EQ(cudaSetDevice(count - 1), cudaSuccess);
    void* const p = on_zero.data();
    on_zero = device_buffer{};
    EXPECT_EQ(memory_type(p), cudaMemoryTypeUnregistered);
    EXPECT_EQ(cuda::current_device(), count - 1) << "release must not move the current device";
  }
  EXPECT_EQ(cuda::current_device(), count - 1);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
}

}  // namespace
}  // namespace gpusort
