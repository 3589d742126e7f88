// Device steps for runs that are already sorted (ordered bits, ascending): merging two runs,
// splitting a merge into independent ranges (merge path), and counting keys below probe values
// (for choosing exact splitters across GPUs). Includable from plain C++: host declarations
// only. Nothing here allocates or synchronizes: callers pass scratch sized by the size query.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <span>

namespace gpusort::cuda {

/// Scratch bytes merge needs for runs totalling n elements.
std::size_t merge_scratch_bytes(std::uint64_t n, unsigned key_bytes, unsigned value_bytes);

/// Merges sorted runs 1 (n1 elements) and 2 (n2) into d_keys_out (values move along; value
/// pointers are ignored when value_bytes is 0). The output may not overlap the inputs.
void merge(const void* d_keys1, const void* d_values1, std::uint64_t n1, const void* d_keys2,
           const void* d_values2, std::uint64_t n2, void* d_keys_out, void* d_values_out,
           unsigned key_bytes, unsigned value_bytes, void* d_scratch, std::size_t scratch_bytes,
           cudaStream_t stream);

/// For each of `count` diagonals k (0 <= k <= n1 + n2), how many of the first k elements of
/// the merged order come from run 1, so that merging run1[a0, a1) with run2[k0 - a0, k1 - a1)
/// gives exactly the merged elements [k0, k1). Arrays may live in mapped pinned host memory.
void merge_path(const void* d_keys1, std::uint64_t n1, const void* d_keys2, std::uint64_t n2,
                unsigned key_bytes, const std::uint64_t* diagonals, std::uint64_t* run1_counts,
                std::uint32_t count, cudaStream_t stream);

/// A sorted run of ordered bits in device memory (count_below_runs).
struct key_run {
  const void* keys{};
  std::uint64_t n{};
};

/// For each of `count` probe values (ordered bits) and each run of `runs`, the number of the
/// run's keys below it and at most it, one launch per 32 runs: run q's counts of keys below
/// probe t go to counts[q * stride + t], of keys at most it to counts[q * stride + count
/// + t]. The resident sort's cut takes one such step per round trip to its GPUs, and a launch
/// per run had queued their binary searches' latency one after another (16 runs: about 0.35 ms
/// a step, 6 ms a cut of 8 GiB on two H200, issue 40). `probes` and `counts` may live in
/// mapped pinned host memory.
void count_below_runs(std::span<const key_run> runs, unsigned key_bytes,
                      const std::uint64_t* probes, std::uint64_t* counts, std::uint64_t stride,
                      std::uint32_t count, cudaStream_t stream);

}  // namespace gpusort::cuda
