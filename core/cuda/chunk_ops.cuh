// Device steps of one chunk, the host-side entries (CUB's "device" layer): the in-core radix
// sort of ordered bits, round-1 dealing and the round-2 gather of slices (from device memory or
// from mapped pinned host memory). A compensated tail never needs the GPU: the host writes it
// (pipeline/device.hpp). Includable from plain C++: host declarations only. Nothing here
// allocates: callers pass scratch, sized by the size queries.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace gpusort::cuda {

/// Scratch bytes radix_sort needs for n elements of key_bytes (4|8) and value_bytes (0|4|8).
std::size_t radix_sort_scratch_bytes(std::uint64_t n, unsigned key_bytes, unsigned value_bytes);

/// Sorts n ordered-bits keys ascending (values move along) with CUB's onesweep radix sort over
/// double buffers. Returns true when the sorted result is in the `_alt` buffers. `key_bits` > 0:
/// the caller knows the keys differ only in their low `key_bits` bits (at most the key's width),
/// and only those are sorted on; `begin_bit` > 0: only the bits from it up are sorted on (the
/// keys come out in order of those bits); equal keys keep their order either way.
bool radix_sort(void* d_keys, void* d_keys_alt, void* d_values, void* d_values_alt,
                std::uint64_t n, unsigned key_bytes, unsigned value_bytes, void* d_scratch,
                std::size_t scratch_bytes, cudaStream_t stream, unsigned key_bits = 0,
                unsigned begin_bit = 0);

/// Round-1 dealing: element x of the m sorted elements goes to bin x mod d, bins laid out one
/// after another (core/plan/dealing.hpp gives the layout). Values may be null.
void deal(const void* d_keys, const void* d_values, std::uint64_t m, std::uint64_t d,
          void* d_out_keys, void* d_out_values, unsigned key_bytes, unsigned value_bytes,
          cudaStream_t stream);

/// d_out[i] = first + i for i < n, as 4- or 8-byte unsigned integers: the input positions an
/// argsort sorts beside its keys, made where they are needed instead of copied in.
void positions(void* d_out, std::uint64_t n, std::uint64_t first, unsigned value_bytes,
               cudaStream_t stream);

/// One piece of a gather: `length` elements at `src` (device memory, or host memory mapped
/// into the device's address space) go to element `dst_offset` of the output.
struct gather_slice {
  const void* src;
  std::uint64_t length;
  std::uint64_t dst_offset;
};

/// Streaming multiprocessors of an H100 or H200 (SXM), the GPUs the grid caps below were
/// measured on: a cap counts blocks per SM of these.
inline constexpr std::uint32_t hopper_sms = 132;

/// Tuning of the gather kernels: blocks per slice are capped so that small slices do not launch
/// idle blocks; reads of mapped host memory want many loads in flight; the whole grid is capped
/// (two blocks an SM of an H100 or H200) so that a table of many short slices leaves most of
/// the GPU to the sort of the chunk before (its blocks then walk the table).
/// A table whose slices are all at most warp_slice_elements long goes a warp a slice instead,
/// each lane with eight loads in flight, on at most max_warp_blocks blocks: at d = 1594 (slices
/// of about 420 u64) a block a slice left most lanes one load each, needed 264 blocks to reach
/// 34 GB/s and slowed the sort beside it 1.9x; fewer blocks of it freed the sort and starved the
/// link (32 blocks: 22 GB/s, 8: 7.6; issue 44, h200x2-20261130-s10/call1).
struct gather_tuning {
  std::uint32_t threads_per_block{256};
  std::uint32_t max_blocks_per_slice{64};
  std::uint32_t max_blocks{2 * hopper_sms};
  std::uint32_t warp_slice_elements{1024};
  std::uint32_t max_warp_blocks{32};
};

/// Copies every slice of `d_table` (device-accessible, `slices` entries) into `d_out`, elements
/// of `element_bytes` (4 or 8). One launch for all slices: with d*d slices per final chunk, one
/// copy call per slice would cost more than the bytes (design.md section 1).
void gather(const gather_slice* d_table, std::uint32_t slices, std::uint64_t longest_slice,
            void* d_out, unsigned element_bytes, cudaStream_t stream,
            const gather_tuning& tuning = {});

/// Copies every slice of `d_table` (device-accessible, `slices` entries, sources in device
/// memory) to its place in `d_out` (mapped host memory: a scattering round's round-1 buffer),
/// elements of `element_bytes` (4, 8 or 16), on `blocks` blocks of 256 threads: a warp a slice,
/// each lane storing 16 bytes of a 512-byte window aligned to 128 B, so that every line of host
/// memory but a slice's first and last is written whole. Few blocks: writes to host memory
/// beside the copy engine's copies in slow a sort on the same GPU, less the fewer blocks write
/// (issue 44: 8 blocks 4.4x, 16 5.7x, the gather kernel's 32 9.0x, h200-20261201-s18/call4).
void scatter_lines(const gather_slice* d_table, std::uint32_t slices, void* d_out,
                   unsigned element_bytes, unsigned blocks, cudaStream_t stream);

}  // namespace gpusort::cuda
