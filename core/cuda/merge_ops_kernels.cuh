// Kernels of merge_ops: binary searches over sorted runs, one thread per query. They run once
// per merge split or splitter probe, on a handful of threads: their cost is the launch.
#pragma once

#include <cstdint>

namespace gpusort::cuda::detail {

/// Elements of `a` among the first k of the merge of a (first on ties) and b.
template <typename K>
__device__ std::uint64_t co_rank(const K* a, std::uint64_t na, const K* b, std::uint64_t nb,
                                 std::uint64_t k)
{
  std::uint64_t lo = k > nb ? k - nb : 0;
  std::uint64_t hi = k < na ? k : na;
  while (lo < hi) {
    const std::uint64_t i = lo + (hi - lo) / 2;  // i < na and k - i >= 1
    if (a[i] <= b[k - i - 1]) {
      lo = i + 1;
    } else {
      hi = i;
    }
  }
  return lo;
}

template <typename K>
__global__ void merge_path_kernel(const K* a, std::uint64_t na, const K* b, std::uint64_t nb,
                                  const std::uint64_t* diagonals, std::uint64_t* run1_counts,
                                  std::uint32_t count)
{
  const std::uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count) run1_counts[i] = co_rank(a, na, b, nb, diagonals[i]);
}

/// First position in a[0, n) whose key is not below v (strict) or above v (!strict).
template <typename K>
__device__ std::uint64_t partition_point(const K* a, std::uint64_t n, K v, bool strict)
{
  std::uint64_t lo = 0, hi = n;
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (strict ? a[mid] < v : a[mid] <= v) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

/// Runs of one count_below_runs launch, passed by value in the kernel's parameters.
inline constexpr unsigned max_count_runs = 32;
struct count_run_table {
  const void* keys[max_count_runs];
  std::uint64_t n[max_count_runs];
};

/// One thread a (run, probe, strictness): thread i of run q writes counts[q * stride + i], the
/// count below probe i (i < count) or at most probe i - count.
template <typename K>
__global__ void count_below_runs_kernel(const __grid_constant__ count_run_table runs,
                                        std::uint32_t run_count, const std::uint64_t* probes,
                                        std::uint64_t* counts, std::uint64_t stride,
                                        std::uint32_t count)
{
  const std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  const std::uint64_t per_run = std::uint64_t{2} * count;
  if (i >= per_run * run_count) return;
  const auto q = static_cast<std::uint32_t>(i / per_run);
  const auto r = static_cast<std::uint32_t>(i % per_run);
  const bool strict = r < count;
  const K v = static_cast<K>(probes[strict ? r : r - count]);
  counts[q * stride + r] =
      partition_point(static_cast<const K*>(runs.keys[q]), runs.n[q], v, strict);
}

}  // namespace gpusort::cuda::detail
