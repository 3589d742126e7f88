// Dispatch of the merge steps over ordered bits (unsigned keys, so CUB's default less is the
// product's order). Never allocates, never synchronizes.
#include "core/checks.hpp"
#include "core/cuda/merge_ops.cuh"
#include "core/cuda/merge_ops_kernels.cuh"
#include "core/keys.hpp"

#include <gpusort/error.hpp>

#include <cub/device/device_merge.cuh>

#include <algorithm>
#include <type_traits>
#include <utility>

namespace gpusort::cuda {
namespace {

constexpr unsigned search_threads = 128;

template <typename F>
decltype(auto) visit_widths(unsigned key_bytes, unsigned value_bytes, F&& f)
{
  if (key_bytes != 4 && key_bytes != 8)
    throw invalid_argument{"merge ops: keys must be 4 or 8 bytes"};
  if (value_bytes != 0 && value_bytes != 4 && value_bytes != 8)
    throw invalid_argument{"merge ops: values must be 0, 4 or 8 bytes"};
  return gpusort::detail::visit_layout(key_bytes, value_bytes, std::forward<F>(f));
}

template <typename K, typename V>
void merge_impl(const void* k1, const void* v1, std::uint64_t n1, const void* k2, const void* v2,
                std::uint64_t n2, void* k_out, void* v_out, void* d_scratch,
                std::size_t* scratch_bytes, cudaStream_t stream)
{
  const auto c1 = static_cast<std::int64_t>(n1), c2 = static_cast<std::int64_t>(n2);
  if constexpr (std::is_same_v<V, gpusort::detail::no_value>) {
    GPUSORT_CUDA_TRY(cub::DeviceMerge::MergeKeys(
        d_scratch, *scratch_bytes, static_cast<const K*>(k1), c1, static_cast<const K*>(k2), c2,
        static_cast<K*>(k_out), ::cuda::std::less<>{}, stream));
  } else {
    GPUSORT_CUDA_TRY(cub::DeviceMerge::MergePairs(
        d_scratch, *scratch_bytes, static_cast<const K*>(k1), static_cast<const V*>(v1), c1,
        static_cast<const K*>(k2), static_cast<const V*>(v2), c2, static_cast<K*>(k_out),
        static_cast<V*>(v_out), ::cuda::std::less<>{}, stream));
  }
}

unsigned blocks_for(std::uint32_t count) { return (count + search_threads - 1) / search_threads; }

}  // namespace

std::size_t merge_scratch_bytes(std::uint64_t n, unsigned key_bytes, unsigned value_bytes)
{
  return visit_widths(key_bytes, value_bytes, [&]<typename K, typename V>() {
    std::size_t bytes = 0;
    merge_impl<K, V>(nullptr, nullptr, n / 2, nullptr, nullptr, n - n / 2, nullptr, nullptr,
                     nullptr, &bytes, nullptr);
    return bytes;
  });
}

void merge(const void* d_keys1, const void* d_values1, std::uint64_t n1, const void* d_keys2,
           const void* d_values2, std::uint64_t n2, void* d_keys_out, void* d_values_out,
           unsigned key_bytes, unsigned value_bytes, void* d_scratch, std::size_t scratch_bytes,
           cudaStream_t stream)
{
  if (n1 + n2 == 0) return;
  GPUSORT_EXPECTS(d_scratch != nullptr, "merge needs scratch (see the size query)");
  visit_widths(key_bytes, value_bytes, [&]<typename K, typename V>() {
    std::size_t needed = 0;
    merge_impl<K, V>(nullptr, nullptr, n1, nullptr, nullptr, n2, nullptr, nullptr, nullptr,
                     &needed, nullptr);
    GPUSORT_EXPECTS(needed <= scratch_bytes, "merge scratch too small for the runs");
    merge_impl<K, V>(d_keys1, d_values1, n1, d_keys2, d_values2, n2, d_keys_out, d_values_out,
                     d_scratch, &scratch_bytes, stream);
  });
}

void merge_path(const void* d_keys1, std::uint64_t n1, const void* d_keys2, std::uint64_t n2,
                unsigned key_bytes, const std::uint64_t* diagonals, std::uint64_t* run1_counts,
                std::uint32_t count, cudaStream_t stream)
{
  if (count == 0) return;
  visit_widths(key_bytes, 0, [&]<typename K, typename>() {
    detail::merge_path_kernel<K><<<blocks_for(count), search_threads, 0, stream>>>(
        static_cast<const K*>(d_keys1), n1, static_cast<const K*>(d_keys2), n2, diagonals,
        run1_counts, count);
    GPUSORT_CHECK_LAUNCH();
  });
}

void count_below_runs(std::span<const key_run> runs, unsigned key_bytes,
                      const std::uint64_t* probes, std::uint64_t* counts, std::uint64_t stride,
                      std::uint32_t count, cudaStream_t stream)
{
  if (count == 0 || runs.empty()) return;
  GPUSORT_EXPECTS(stride >= std::uint64_t{2} * count, "count_below_runs: runs' counts overlap");
  visit_widths(key_bytes, 0, [&]<typename K, typename>() {
    for (std::size_t first = 0; first < runs.size(); first += detail::max_count_runs) {
      const auto group = static_cast<std::uint32_t>(
          std::min<std::size_t>(detail::max_count_runs, runs.size() - first));
      detail::count_run_table table{};
      for (std::uint32_t q = 0; q < group; ++q) {
        table.keys[q] = runs[first + q].keys;
        table.n[q] = runs[first + q].n;
      }
      const std::uint64_t threads = std::uint64_t{2} * count * group;
      const auto blocks =
          static_cast<unsigned>((threads + search_threads - 1) / search_threads);
      detail::count_below_runs_kernel<K><<<blocks, search_threads, 0, stream>>>(
          table, group, probes, counts + first * stride, stride, count);
      GPUSORT_CHECK_LAUNCH();
    }
  });
}

}  // namespace gpusort::cuda
