// Does compute-sanitizer initcheck count bytes written by cudaMemcpyBatchAsync as initialized?
// Copies 3 slices from pinned host memory into device memory, by batch (argv[1] == "batch") or
// one cudaMemcpyAsync a slice, then a kernel sums them.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstring>
#include <cstdint>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { \
  std::printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)
__global__ void sum(const std::uint64_t* d, int n, unsigned long long* out)
{
  for (int i = threadIdx.x; i < n; i += blockDim.x) atomicAdd(out, d[i]);
}
int main(int argc, char** argv)
{
  const bool batch = argc > 1 && std::strcmp(argv[1], "batch") == 0;
  const int n = 3000;
  std::uint64_t* h = nullptr;
  CK(cudaMallocHost(&h, n * 8));
  for (int i = 0; i < n; ++i) h[i] = i;
  std::uint64_t* d = nullptr;
  unsigned long long* d_out = nullptr;
  CK(cudaMalloc(&d, n * 8));
  CK(cudaMalloc(&d_out, 8));
  CK(cudaMemset(d_out, 0, 8));
  cudaStream_t s;
  CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  void* dst[3] = {d, d + 1000, d + 2000};
  const void* src[3] = {h + 2000, h, h + 1000};
  std::size_t size[3] = {8000, 8000, 8000};
  if (batch) {
    cudaMemcpyAttributes a{};
    a.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    std::size_t first = 0;
    CK(cudaMemcpyBatchAsync(dst, src, size, 3, &a, &first, 1, s));
  } else {
    for (int i = 0; i < 3; ++i) CK(cudaMemcpyAsync(dst[i], src[i], size[i], cudaMemcpyHostToDevice, s));
  }
  sum<<<1, 256, 0, s>>>(d, n, d_out);
  CK(cudaGetLastError());
  unsigned long long r = 0;
  CK(cudaMemcpyAsync(&r, d_out, 8, cudaMemcpyDeviceToHost, s));
  CK(cudaStreamSynchronize(s));
  std::printf("%s: sum %llu (expected %llu)\n", batch ? "batch" : "single", r,
              (unsigned long long)n * (n - 1) / 2);
  return r == (unsigned long long)n * (n - 1) / 2 ? 0 : 2;
}
