// Does cudaHostRegister on one thread hold up copies issued on another? Thread B copies 32 MiB
// host->device from registered memory in a loop, timing each call's return and each copy's end,
// while thread A registers 4 GiB (made beforehand) in one call, then in 16 slices of 256 MiB.
#include <cuda_runtime.h>
#include <sys/mman.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  std::printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)
using clk = std::chrono::steady_clock;
static double ms(clk::time_point a, clk::time_point b)
{ return std::chrono::duration<double, std::milli>(b - a).count(); }
int main()
{
  const std::size_t big = std::size_t{4} << 30, part = std::size_t{32} << 20;
  char* src = nullptr;
  CK(cudaMallocHost(&src, part));
  char* d = nullptr;
  CK(cudaMalloc(&d, part));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  for (int mode = 0; mode < 3; ++mode) {
    char* h = static_cast<char*>(mmap(nullptr, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    madvise(h, big, MADV_HUGEPAGE);
    std::memset(h, 0, big);
    std::atomic<bool> stop{false};
    std::vector<double> call_ms, copy_ms;
    std::thread copier([&] {
      while (!stop.load()) {
        const auto t0 = clk::now();
        cudaMemcpyAsync(d, src, part, cudaMemcpyHostToDevice, s);
        const auto t1 = clk::now();
        cudaStreamSynchronize(s);
        const auto t2 = clk::now();
        call_ms.push_back(ms(t0, t1));
        copy_ms.push_back(ms(t0, t2));
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const std::size_t base_copies = copy_ms.size();
    const auto t0 = clk::now();
    if (mode == 1) {
      CK(cudaHostRegister(h, big, cudaHostRegisterPortable | cudaHostRegisterMapped));
    } else if (mode == 2) {
      for (std::size_t at = 0; at < big; at += big / 16)
        CK(cudaHostRegister(h + at, big / 16, cudaHostRegisterPortable | cudaHostRegisterMapped));
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    const auto t1 = clk::now();
    stop = true;
    copier.join();
    std::vector<double> during(copy_ms.begin() + base_copies, copy_ms.end());
    std::vector<double> calls(call_ms.begin() + base_copies, call_ms.end());
    std::sort(during.begin(), during.end());
    std::sort(calls.begin(), calls.end());
    double sum = 0;
    for (double x : during) sum += x;
    std::printf("%s: %.0f ms; copies meanwhile %zu, median %.2f ms, max %.2f ms, mean rate %.1f GB/s; "
                "longest call %.2f ms\n",
                mode == 0 ? "no registration (sleep)" : mode == 1 ? "one 4 GiB registration" : "16 slices of 256 MiB",
                ms(t0, t1), during.size(), during.empty() ? 0 : during[during.size() / 2],
                during.empty() ? 0 : during.back(), during.empty() ? 0 : during.size() * part / (sum * 1e6),
                calls.empty() ? 0 : calls.back());
    if (mode == 1) cudaHostUnregister(h);
    if (mode == 2) for (std::size_t at = 0; at < big; at += big / 16) cudaHostUnregister(h + at);
    munmap(h, big);
  }
  return 0;
}
