// Copies that span two adjacent cudaHostRegister'ed ranges: does the runtime take them as
// pinned (returns at once, link rate) or as pageable (staged, blocking), or refuse them?
#include <cuda_runtime.h>
#include <sys/mman.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <cstdint>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  std::printf("%s: %s\n", #x, cudaGetErrorString(e)); } } while (0)
using clk = std::chrono::steady_clock;
static double us(clk::time_point a, clk::time_point b)
{ return std::chrono::duration<double, std::micro>(b - a).count(); }
__global__ void sum(const std::uint64_t* p, std::uint64_t n, unsigned long long* out)
{
  unsigned long long s = 0;
  for (std::uint64_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) s += p[i];
  atomicAdd(out, s);
}
int main()
{
  const std::size_t half = std::size_t{128} << 20, all = 2 * half, part = std::size_t{64} << 20;
  char* h = static_cast<char*>(mmap(nullptr, all + half, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  std::memset(h, 1, all + half);
  char* pageable = h + all;  // the last 128 MiB stay pageable
  CK(cudaHostRegister(h, half, cudaHostRegisterPortable | cudaHostRegisterMapped));
  CK(cudaHostRegister(h + half, half, cudaHostRegisterPortable | cudaHostRegisterMapped));
  for (int i = 0; i < 2; ++i) {
    cudaPointerAttributes a{};
    CK(cudaPointerGetAttributes(&a, h + i * half + 4096));
    std::printf("half %d: type %d host %p device %p (identity %d)\n", i, (int)a.type, (void*)(h + i * half + 4096),
                a.devicePointer, a.devicePointer == h + i * half + 4096);
  }
  char* d = nullptr;
  CK(cudaMalloc(&d, part));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  struct { const char* name; char* host; } cases[] = {
    {"within one", h + 16 * (1 << 20)}, {"spanning two", h + half - part / 2}, {"pageable", pageable}};
  for (int rep = 0; rep < 2; ++rep)
    for (auto& c : cases) {
      for (int dir = 0; dir < 2; ++dir) {
        CK(cudaStreamSynchronize(s));
        const auto t0 = clk::now();
        cudaError_t e = dir == 0 ? cudaMemcpyAsync(d, c.host, part, cudaMemcpyHostToDevice, s)
                                 : cudaMemcpyAsync(c.host, d, part, cudaMemcpyDeviceToHost, s);
        const auto t1 = clk::now();
        CK(cudaStreamSynchronize(s));
        const auto t2 = clk::now();
        std::printf("rep %d %-13s %s: %s, call returned after %.0f us, done after %.0f us (%.1f GB/s)\n", rep, c.name,
                    dir == 0 ? "H2D" : "D2H", cudaGetErrorString(e), us(t0, t1), us(t0, t2), part / us(t0, t2) / 1e3);
      }
      // a batch of one copy, host to device
      void* dst[1] = {d};
      const void* src[1] = {c.host};
      std::size_t size[1] = {part};
      cudaMemcpyAttributes a{};
      a.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
      std::size_t first = 0;
      const auto t0 = clk::now();
      cudaError_t e = cudaMemcpyBatchAsync(dst, src, size, 1, &a, &first, 1, s);
      const auto t1 = clk::now();
      CK(cudaStreamSynchronize(s));
      const auto t2 = clk::now();
      std::printf("rep %d %-13s batch H2D: %s, call returned after %.0f us, done after %.0f us (%.1f GB/s)\n", rep, c.name,
                  cudaGetErrorString(e), us(t0, t1), us(t0, t2), part / us(t0, t2) / 1e3);
      cudaGetLastError();
    }
  // a kernel reading mapped memory across the boundary
  unsigned long long* d_out = nullptr;
  CK(cudaMalloc(&d_out, 8));
  CK(cudaMemset(d_out, 0, 8));
  auto* q = reinterpret_cast<std::uint64_t*>(h + half - part / 2);
  for (std::size_t i = 0; i < part / 8; ++i) q[i] = i;
  cudaPointerAttributes a{};
  CK(cudaPointerGetAttributes(&a, q));
  sum<<<264, 256, 0, s>>>(static_cast<const std::uint64_t*>(a.devicePointer), part / 8, d_out);
  CK(cudaGetLastError());
  unsigned long long r = 0;
  CK(cudaMemcpyAsync(&r, d_out, 8, cudaMemcpyDeviceToHost, s));
  CK(cudaStreamSynchronize(s));
  const unsigned long long n = part / 8;
  std::printf("mapped kernel across the boundary: sum %llu, expected %llu\n", r, n * (n - 1) / 2);
  return 0;
}
