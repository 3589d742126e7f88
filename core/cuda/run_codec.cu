// Dispatch of the run codec: validates, lays the scratch out, launches the passes on the
// caller's stream. Never allocates, never synchronizes.
#include "core/checks.hpp"
#include "core/cuda/run_codec.cuh"
#include "core/cuda/run_codec/kernels.cuh"

#include <gpusort/error.hpp>

#include <cub/device/device_scan.cuh>

#include <cuda/std/functional>

#include <algorithm>
#include <string>

namespace gpusort::cuda {
namespace {

namespace cc = detail::codec;
using gpusort::detail::codec::dealt_blocks;

constexpr std::size_t scratch_alignment = 256;

constexpr std::size_t align_up(std::size_t bytes)
{
  return (bytes + scratch_alignment - 1) / scratch_alignment * scratch_alignment;
}

/// Where the passes keep their per-block arrays in the caller's scratch.
struct scratch_layout {
  std::uint64_t blocks{};
  std::size_t widths{}, sizes{}, offsets{}, scan_temp{}, scan_temp_bytes{}, total{};
};

/// CUB's exclusive scan of blocks + 1 sizes into offsets (a null `temp` asks for its bytes).
void scan_sizes(void* temp, std::size_t& temp_bytes, const std::uint32_t* sizes,
                std::uint64_t* offsets, std::uint64_t items, cudaStream_t stream)
{
  GPUSORT_CUDA_TRY(cub::DeviceScan::ExclusiveScan(temp, temp_bytes, sizes, offsets,
                                                  ::cuda::std::plus<std::uint64_t>{},
                                                  std::uint64_t{0}, items, stream));
}

scratch_layout make_layout(std::uint64_t m, std::uint64_t runs)
{
  if (runs == 0) throw invalid_argument{"run codec: at least one run"};
  scratch_layout l;
  l.blocks = dealt_blocks(m, runs);
  scan_sizes(nullptr, l.scan_temp_bytes, nullptr, nullptr, l.blocks + 1, nullptr);
  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t here = at;
    at += align_up(bytes);
    return here;
  };
  l.widths = take(l.blocks);
  l.sizes = take((l.blocks + 1) * sizeof(std::uint32_t));
  l.offsets = take((l.blocks + 1) * sizeof(std::uint64_t));
  l.scan_temp = take(l.scan_temp_bytes);
  l.total = at;
  return l;
}

unsigned grid_for(std::uint64_t blocks)
{
  return static_cast<unsigned>(std::clamp<std::uint64_t>(blocks, 1, cc::policy::max_grid));
}

void check_key_bytes(unsigned key_bytes)
{
  if (key_bytes != 4 && key_bytes != 8)
    throw invalid_argument{"run codec: keys must be 4 or 8 bytes"};
}

/// Calls f.template operator()<K>() for the key width.
template <typename F>
void visit_keys(unsigned key_bytes, F&& f)
{
  check_key_bytes(key_bytes);
  if (key_bytes == 4) f.template operator()<std::uint32_t>();
  else f.template operator()<std::uint64_t>();
}

/// Passes (a) and (b): each block's width and size, then their offsets and the total at
/// offsets[blocks]. Returns the layout the pack pass reads.
scratch_layout measure(const void* d_keys, std::uint64_t m, std::uint64_t runs,
                       unsigned key_bytes, void* d_scratch, std::size_t scratch_bytes,
                       cudaStream_t stream)
{
  check_key_bytes(key_bytes);
  if (m > 0 && d_keys == nullptr) throw invalid_argument{"run codec: null keys"};
  if (d_scratch == nullptr)
    throw invalid_argument{"run codec needs scratch (see run_codec_scratch_bytes)"};
  scratch_layout l = make_layout(m, runs);
  if (scratch_bytes < l.total)
    throw invalid_argument{"run codec: scratch of " + std::to_string(scratch_bytes) +
                           " bytes, needs " + std::to_string(l.total) +
                           " (run_codec_scratch_bytes)"};
  auto* base = static_cast<unsigned char*>(d_scratch);
  auto* sizes = reinterpret_cast<std::uint32_t*>(base + l.sizes);
  visit_keys(key_bytes, [&]<typename K>() {
    cc::width_kernel<K><<<grid_for(l.blocks), cc::policy::threads, 0, stream>>>(
        static_cast<const K*>(d_keys), m, runs, base + l.widths, sizes);
    GPUSORT_CHECK_LAUNCH();
  });
  scan_sizes(base + l.scan_temp, l.scan_temp_bytes, sizes,
             reinterpret_cast<std::uint64_t*>(base + l.offsets), l.blocks + 1, stream);
  return l;
}

void copy_total(const scratch_layout& l, const void* d_scratch, std::uint64_t* d_bytes,
                cudaStream_t stream)
{
  const auto* offsets =
      reinterpret_cast<const std::uint64_t*>(static_cast<const unsigned char*>(d_scratch) +
                                             l.offsets);
  GPUSORT_CUDA_TRY(cudaMemcpyAsync(d_bytes, offsets + l.blocks, sizeof(std::uint64_t),
                                   cudaMemcpyDefault, stream));
}

}  // namespace

std::size_t run_codec_scratch_bytes(std::uint64_t m, std::uint64_t runs)
{
  return make_layout(m, runs).total;
}

void encoded_size(const void* d_keys, std::uint64_t m, std::uint64_t runs, unsigned key_bytes,
                  std::uint64_t* d_bytes, void* d_scratch, std::size_t scratch_bytes,
                  cudaStream_t stream)
{
  if (d_bytes == nullptr) throw invalid_argument{"encoded_size: null result"};
  const scratch_layout l = measure(d_keys, m, runs, key_bytes, d_scratch, scratch_bytes, stream);
  copy_total(l, d_scratch, d_bytes, stream);
}

void encode_runs(const void* d_keys, std::uint64_t m, std::uint64_t runs, unsigned key_bytes,
                 run_block* d_index, void* d_stream, std::uint64_t stream_capacity,
                 std::uint64_t* d_bytes, void* d_scratch, std::size_t scratch_bytes,
                 cudaStream_t stream)
{
  if (m > 0 && d_index == nullptr) throw invalid_argument{"encode_runs: null index"};
  if (d_stream == nullptr && stream_capacity > 0)
    throw invalid_argument{"encode_runs: null stream"};
  if (reinterpret_cast<std::uintptr_t>(d_stream) % 8 != 0)
    throw invalid_argument{"encode_runs: the stream must be 8-byte aligned"};
  const scratch_layout l = measure(d_keys, m, runs, key_bytes, d_scratch, scratch_bytes, stream);
  auto* base = static_cast<unsigned char*>(d_scratch);
  if (m > 0) {
    visit_keys(key_bytes, [&]<typename K>() {
      cc::pack_kernel<K><<<grid_for(l.blocks), cc::policy::threads, 0, stream>>>(
          static_cast<const K*>(d_keys), m, runs, base + l.widths,
          reinterpret_cast<const std::uint64_t*>(base + l.offsets), d_index,
          static_cast<std::uint64_t*>(d_stream), stream_capacity / 8);
      GPUSORT_CHECK_LAUNCH();
    });
  }
  if (d_bytes != nullptr) copy_total(l, d_scratch, d_bytes, stream);
}

void decode_run(const encoded_slice& slice, unsigned key_bytes, void* d_out, cudaStream_t stream)
{
  check_key_bytes(key_bytes);
  if (slice.last < slice.first)
    throw invalid_argument{"decode_run: a slice [" + std::to_string(slice.first) + ", " +
                           std::to_string(slice.last) + ")"};
  if (slice.first == slice.last) return;
  if (slice.index == nullptr || d_out == nullptr)
    throw invalid_argument{"decode_run: null index or output"};
  const std::uint64_t blocks =
      (slice.last - 1) / cc::block_keys - slice.first / cc::block_keys + 1;
  visit_keys(key_bytes, [&]<typename K>() {
    cc::decode_kernel<K><<<grid_for(blocks), cc::policy::threads, 0, stream>>>(
        nullptr, slice, static_cast<K*>(d_out));
    GPUSORT_CHECK_LAUNCH();
  });
}

void decode_slices(const encoded_slice* d_table, std::uint32_t slices, std::uint64_t most_blocks,
                   void* d_out, unsigned key_bytes, cudaStream_t stream)
{
  check_key_bytes(key_bytes);
  if (slices == 0 || most_blocks == 0) return;
  if (d_table == nullptr || d_out == nullptr)
    throw invalid_argument{"decode_slices: null table or output"};
  if (slices > 65535) throw invalid_argument{"decode_slices: at most 65535 slices per launch"};
  const dim3 grid{grid_for(most_blocks), slices};
  visit_keys(key_bytes, [&]<typename K>() {
    cc::decode_kernel<K><<<grid, cc::policy::threads, 0, stream>>>(d_table, encoded_slice{},
                                                                   static_cast<K*>(d_out));
    GPUSORT_CHECK_LAUNCH();
  });
}

}  // namespace gpusort::cuda
