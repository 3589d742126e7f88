// Dispatch of the chunk steps: validates, picks the instance for the element widths, launches
// on the caller's stream. Never allocates, never synchronizes.
#include "core/checks.hpp"
#include "core/cuda/chunk_ops.cuh"
#include "core/cuda/chunk_ops_kernels.cuh"
#include "core/keys.hpp"

#include <gpusort/error.hpp>

#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <string>

namespace gpusort::cuda {
namespace {

constexpr unsigned block_threads = 256;
// Enough resident blocks to fill an H100/H200 (8 an SM) for grid-stride loops.
constexpr std::uint64_t max_grid = std::uint64_t{hopper_sms} * 8;

unsigned grid_for(std::uint64_t n)
{
  return static_cast<unsigned>(
      std::clamp<std::uint64_t>((n + block_threads - 1) / block_threads, 1, max_grid));
}

void check_widths(unsigned key_bytes, unsigned value_bytes)
{
  if (key_bytes != 4 && key_bytes != 8)
    throw invalid_argument{"chunk ops: keys must be 4 or 8 bytes"};
  if (value_bytes != 0 && value_bytes != 4 && value_bytes != 8)
    throw invalid_argument{"chunk ops: values must be 0, 4 or 8 bytes"};
}

template <typename F>
decltype(auto) visit_widths(unsigned key_bytes, unsigned value_bytes, F&& f)
{
  check_widths(key_bytes, value_bytes);
  return gpusort::detail::visit_layout(key_bytes, value_bytes, std::forward<F>(f));
}

template <typename K, typename V>
bool sort_impl(void* d_keys, void* d_keys_alt, void* d_values, void* d_values_alt,
               std::uint64_t n, void* d_scratch, std::size_t* scratch_bytes, cudaStream_t stream,
               int begin_bit, int end_bit)
{
  cub::DoubleBuffer<K> keys{static_cast<K*>(d_keys), static_cast<K*>(d_keys_alt)};
  const auto count = static_cast<std::int64_t>(n);
  if constexpr (std::is_same_v<V, gpusort::detail::no_value>) {
    GPUSORT_CUDA_TRY(
        cub::DeviceRadixSort::SortKeys(d_scratch, *scratch_bytes, keys, count, begin_bit,
                                       end_bit, stream));
  } else {
    cub::DoubleBuffer<V> values{static_cast<V*>(d_values), static_cast<V*>(d_values_alt)};
    GPUSORT_CUDA_TRY(cub::DeviceRadixSort::SortPairs(d_scratch, *scratch_bytes, keys, values,
                                                     count, begin_bit, end_bit, stream));
  }
  return keys.selector != 0;
}

}  // namespace

std::size_t radix_sort_scratch_bytes(std::uint64_t n, unsigned key_bytes, unsigned value_bytes)
{
  return visit_widths(key_bytes, value_bytes, [&]<typename K, typename V>() {
    std::size_t bytes = 0;
    // For every bit: a sort on fewer (radix_sort's key_bits) needs no more.
    sort_impl<K, V>(nullptr, nullptr, nullptr, nullptr, n, nullptr, &bytes, nullptr, 0,
                    int{sizeof(K) * 8});
    return bytes;
  });
}

bool radix_sort(void* d_keys, void* d_keys_alt, void* d_values, void* d_values_alt,
                std::uint64_t n, unsigned key_bytes, unsigned value_bytes, void* d_scratch,
                std::size_t scratch_bytes, cudaStream_t stream, unsigned key_bits,
                unsigned begin_bit)
{
  if (key_bits > 8 * key_bytes)
    throw invalid_argument{"radix_sort: key_bits beyond the key's width"};
  if (begin_bit >= (key_bits > 0 ? key_bits : 8 * key_bytes) && begin_bit > 0)
    throw invalid_argument{"radix_sort: begin_bit at or past the last bit sorted on"};
  if (n == 0) return false;
  GPUSORT_EXPECTS(d_scratch != nullptr, "radix_sort needs scratch (see the size query)");
  return visit_widths(key_bytes, value_bytes, [&]<typename K, typename V>() {
    const int end_bit = key_bits > 0 ? static_cast<int>(key_bits) : int{sizeof(K) * 8};
    return sort_impl<K, V>(d_keys, d_keys_alt, d_values, d_values_alt, n, d_scratch,
                           &scratch_bytes, stream, static_cast<int>(begin_bit), end_bit);
  });
}

void deal(const void* d_keys, const void* d_values, std::uint64_t m, std::uint64_t d,
          void* d_out_keys, void* d_out_values, unsigned key_bytes, unsigned value_bytes,
          cudaStream_t stream)
{
  if (m == 0) return;
  if (d == 0) throw invalid_argument{"deal: d must be positive"};
  visit_widths(key_bytes, value_bytes, [&]<typename K, typename V>() {
    using W = std::conditional_t<std::is_same_v<V, gpusort::detail::no_value>, K, V>;
    const bool with_values = !std::is_same_v<V, gpusort::detail::no_value>;
    detail::deal_kernel<K, W><<<grid_for(m), block_threads, 0, stream>>>(
        static_cast<const K*>(d_keys), with_values ? static_cast<const W*>(d_values) : nullptr,
        m, d, static_cast<K*>(d_out_keys), static_cast<W*>(d_out_values));
    GPUSORT_CHECK_LAUNCH();
  });
}

void positions(void* d_out, std::uint64_t n, std::uint64_t first, unsigned value_bytes,
               cudaStream_t stream)
{
  if (n == 0) return;
  if (d_out == nullptr) throw invalid_argument{"positions: null output"};
  if (value_bytes == 4) {
    detail::positions_kernel<std::uint32_t>
        <<<grid_for(n), block_threads, 0, stream>>>(static_cast<std::uint32_t*>(d_out), n, first);
  } else if (value_bytes == 8) {
    detail::positions_kernel<std::uint64_t>
        <<<grid_for(n), block_threads, 0, stream>>>(static_cast<std::uint64_t*>(d_out), n, first);
  } else {
    throw invalid_argument{"positions: value_bytes must be 4 or 8"};
  }
  GPUSORT_CHECK_LAUNCH();
}

void gather(const gather_slice* d_table, std::uint32_t slices, std::uint64_t longest_slice,
            void* d_out, unsigned element_bytes, cudaStream_t stream, const gather_tuning& tuning)
{
  if (slices == 0 || longest_slice == 0) return;
  if (element_bytes != 4 && element_bytes != 8)
    throw invalid_argument{"gather: elements must be 4 or 8 bytes"};
  if (slices > 65535) throw invalid_argument{"gather: at most 65535 slices per launch"};
  if (tuning.threads_per_block == 0 || tuning.threads_per_block > 1024 ||
      tuning.max_blocks_per_slice == 0 || tuning.max_blocks == 0 || tuning.max_warp_blocks == 0)
    throw invalid_argument{"gather: a tuning of 1 to 1024 threads a block and at least one block"};
  if (longest_slice <= tuning.warp_slice_elements) {
    // A warp a slice: whole warps, at most one a slice, within the cap.
    const unsigned threads =
        std::max(tuning.threads_per_block / detail::gather_warp_lanes, 1U) *
        detail::gather_warp_lanes;
    const std::uint64_t warps_per_block = threads / detail::gather_warp_lanes;
    const auto blocks = static_cast<unsigned>(std::clamp<std::uint64_t>(
        (std::uint64_t{slices} + warps_per_block - 1) / warps_per_block, 1,
        tuning.max_warp_blocks));
    if (element_bytes == 4)
      detail::gather_warps_kernel<std::uint32_t><<<blocks, threads, 0, stream>>>(
          d_table, slices, static_cast<std::uint32_t*>(d_out));
    else
      detail::gather_warps_kernel<std::uint64_t><<<blocks, threads, 0, stream>>>(
          d_table, slices, static_cast<std::uint64_t*>(d_out));
    GPUSORT_CHECK_LAUNCH();
    return;
  }
  const std::uint64_t per_slice = std::clamp<std::uint64_t>(
      (longest_slice + tuning.threads_per_block - 1) / tuning.threads_per_block, 1,
      tuning.max_blocks_per_slice);
  const std::uint64_t rows =
      std::clamp<std::uint64_t>(tuning.max_blocks / per_slice, 1, std::uint64_t{slices});
  const dim3 grid{static_cast<unsigned>(per_slice), static_cast<unsigned>(rows)};
  if (element_bytes == 4)
    detail::gather_kernel<std::uint32_t><<<grid, tuning.threads_per_block, 0, stream>>>(
        d_table, slices, static_cast<std::uint32_t*>(d_out));
  else
    detail::gather_kernel<std::uint64_t><<<grid, tuning.threads_per_block, 0, stream>>>(
        d_table, slices, static_cast<std::uint64_t*>(d_out));
  GPUSORT_CHECK_LAUNCH();
}

void scatter_lines(const gather_slice* d_table, std::uint32_t slices, void* d_out,
                   unsigned element_bytes, unsigned blocks, cudaStream_t stream)
{
  if (slices == 0) return;
  if (element_bytes != 4 && element_bytes != 8 && element_bytes != 16)
    throw invalid_argument{"scatter_lines: elements must be 4, 8 or 16 bytes"};
  if (blocks == 0) throw invalid_argument{"scatter_lines: at least one block"};
  constexpr unsigned threads = 256;
  const std::uint32_t warps_per_block = threads / detail::gather_warp_lanes;
  const unsigned grid = std::min(blocks, (slices + warps_per_block - 1) / warps_per_block);
  detail::scatter_lines_kernel<<<grid, threads, 0, stream>>>(
      d_table, slices, static_cast<char*>(d_out), element_bytes);
  GPUSORT_CHECK_LAUNCH();
}

}  // namespace gpusort::cuda
