// The run codec on the GPU (issue 21), the host-side entries (CUB's "device" layer): encodes a
// sorted run of ordered bits into core/run_codec.hpp's format (the same bytes as the host
// reference codec there) and decodes runs or sub-ranges of them, many slices in one launch.
// Includable from plain C++: host declarations only. Nothing here allocates or synchronizes:
// callers pass scratch sized by the size query, everything runs on the caller's stream.
//
// The layers below: core/cuda/run_codec.cu (host dispatch), run_codec/kernels.cuh (thin
// kernels), run_codec/agents.cuh (block-level agents), run_codec/tuning.cuh.
#pragma once

#include "core/run_codec.hpp"

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace gpusort::cuda {

using gpusort::detail::codec::encoded_slice;
using gpusort::detail::codec::run_block;

/// Scratch bytes encode_runs and encoded_size need for m keys dealt into `runs` runs (1: a
/// lone run): a width, a size and an offset per block (13 bytes per block_keys keys) and CUB's
/// scan storage. Asks the CUDA runtime (CUB's scan scratch).
std::size_t run_codec_scratch_bytes(std::uint64_t m, std::uint64_t runs = 1);

/// The stream bytes that encode_runs would write for the same arguments, to *d_bytes (device
/// memory or mapped pinned host memory) on `stream`: its passes (a) and (b), one read of the
/// keys, so that a caller can decide whether to compress (auto mode) and size the stream.
/// Throws gpusort::invalid_argument for bad widths, no runs, null pointers or scratch under
/// the size query.
void encoded_size(const void* d_keys, std::uint64_t m, std::uint64_t runs, unsigned key_bytes,
                  std::uint64_t* d_bytes, void* d_scratch, std::size_t scratch_bytes,
                  cudaStream_t stream);

/// Encodes the m keys at d_keys, dealt into `runs` sorted runs as round 1 deals a chunk
/// (core/plan/dealing.hpp; runs = 1: one sorted run), each run on its own: the runs' index
/// entries one after another in d_index (dealt_blocks(m, runs) entries, run j's first at
/// dealt_first_block), their streams back to back in d_stream with byte offsets from its start
/// (8-byte aligned, stream_capacity bytes: dealt_bytes_bound always suffices, encoded_size's
/// answer exactly), the total to *d_bytes unless it is null. A stream below the total is never
/// written past its capacity; *d_bytes then shows the shortfall. Three passes: the blocks'
/// widths and sizes, CUB's exclusive scan of the sizes, the packing. Throws
/// gpusort::invalid_argument for bad widths, no runs, null or misaligned pointers or scratch
/// under the size query.
void encode_runs(const void* d_keys, std::uint64_t m, std::uint64_t runs, unsigned key_bytes,
                 run_block* d_index, void* d_stream, std::uint64_t stream_capacity,
                 std::uint64_t* d_bytes, void* d_scratch, std::size_t scratch_bytes,
                 cudaStream_t stream);

/// Decodes keys [slice.first, slice.last) of an encoded run into d_out + slice.dst_offset (the
/// slice's index and stream device-accessible: device memory or mapped pinned host memory; see
/// encoded_slice). Blocks decode in parallel.
void decode_run(const encoded_slice& slice, unsigned key_bytes, void* d_out,
                cudaStream_t stream);

/// Decodes `slices` slices of d_table (device-accessible) in one launch, each to d_out +
/// dst_offset; most_blocks: the most codec blocks one slice touches (the grid's width), so that
/// round 2 decodes a final chunk's d*d slices with one launch as it gathers them today.
void decode_slices(const encoded_slice* d_table, std::uint32_t slices, std::uint64_t most_blocks,
                   void* d_out, unsigned key_bytes, cudaStream_t stream);

}  // namespace gpusort::cuda
