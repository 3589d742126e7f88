// The in-core GPU sample sort (Leischner, Osipov and Sanders, IPDPS 2010), the host-side entries
// (CUB's "device" layer), beside radix_sort in chunk_ops.cuh and with the same contract: ordered
// bits in, double buffers, caller-owned scratch sized by a query, everything asynchronous on the
// caller's stream, nothing allocated and nothing synchronized. Includable from plain C++.
//
// The layers below: core/cuda/sample_sort.cu (host dispatch), sample_sort/kernels.cuh (thin
// kernels), sample_sort/agents.cuh (block-level agents), sample_sort/tuning.cuh (per-architecture
// tuning). The algorithm and the measured choices are described in sample_sort/tuning.cuh.
#pragma once

#include <gpusort/types.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace gpusort::cuda {

/// Seed of the random sample when the caller names none. Sampling depends only on the seed, the
/// element count and the data, so runs are reproducible.
inline constexpr std::uint64_t default_sample_seed = 0x5eed'0f'5a3b1e5ULL;

/// Scratch bytes sample_sort needs for n elements of key_bytes (4|8) and value_bytes (0|4|8):
/// bucket counters, their prefix sums, splitter trees and cells, work lists, and a byte per
/// element for its bucket (from the histogram pass to the scatter); about 3 bytes per element
/// for 32-bit keys alone, 4 for 64-bit keys alone and 7 for pairs (scratch_layout in
/// sample_sort.cu): less than the data, beyond the double buffers. Valid for every architecture
/// the library was built for (the largest of their layouts). Asks the CUDA runtime (CUB's scan
/// scratch).
std::size_t sample_sort_scratch_bytes(std::uint64_t n, unsigned key_bytes, unsigned value_bytes);

/// As sample_sort_scratch_bytes, for the current device alone: the layout of the policy that
/// sample_sort runs there (the binary the runtime picked for it), not the largest of every
/// policy built. On an H200 the sm_80 layout (buckets of 4 Ki keys, four times the segments and
/// their splitters) is the larger: 5.4 MiB for 786K u64 keys against 2.8 MiB by the layout's
/// formulas, which decides whether a 32 MiB budget holds chunks of 6 MiB (issue 44).
std::size_t sample_sort_scratch_bytes_here(std::uint64_t n, unsigned key_bytes,
                                           unsigned value_bytes);

/// Sorts n ordered-bits keys (unsigned, 4 or 8 bytes) ascending, values (0, 4 or 8 bytes) along,
/// over double buffers; returns true when the result is in the _alt buffers. Never allocates.
/// Both buffers of a pair are overwritten. Not stable; deterministic for a given seed.
bool sample_sort(void* d_keys, void* d_keys_alt, void* d_values, void* d_values_alt,
                 std::uint64_t n, unsigned key_bytes, unsigned value_bytes, void* d_scratch,
                 std::size_t scratch_bytes, cudaStream_t stream,
                 std::uint64_t seed = default_sample_seed);

/// Sorts n raw keys of type `t` in direction `dir` (floats by IEEE 754 totalOrder), values along:
/// the passes map keys to ordered bits as they read the input and back as they write the
/// result. The same buffers and result convention as above; value_bytes is 0, 4 or 8.
bool sample_sort(dtype t, order dir, void* d_keys, void* d_keys_alt, void* d_values,
                 void* d_values_alt, std::uint64_t n, unsigned value_bytes, void* d_scratch,
                 std::size_t scratch_bytes, cudaStream_t stream,
                 std::uint64_t seed = default_sample_seed);

/// Typed keys-only form of the entry above, for Key in u32 i32 u64 i64 f32 f64.
template <typename Key>
bool sample_sort(Key* d_keys, Key* d_keys_alt, std::uint64_t n, order dir, void* d_scratch,
                 std::size_t scratch_bytes, cudaStream_t stream)
{
  return sample_sort(dtype_of_v<Key>, dir, d_keys, d_keys_alt, nullptr, nullptr, n, 0, d_scratch,
                     scratch_bytes, stream);
}

/// Typed pairs form (Value of 4 or 8 bytes).
template <typename Key, typename Value>
bool sample_sort(Key* d_keys, Key* d_keys_alt, Value* d_values, Value* d_values_alt,
                 std::uint64_t n, order dir, void* d_scratch, std::size_t scratch_bytes,
                 cudaStream_t stream)
{
  static_assert(sizeof(Value) == 4 || sizeof(Value) == 8, "values are 4 or 8 bytes");
  return sample_sort(dtype_of_v<Key>, dir, d_keys, d_keys_alt, d_values, d_values_alt, n,
                     unsigned{sizeof(Value)}, d_scratch, scratch_bytes, stream);
}

namespace detail {

/// How the sample sort splits n elements on GPUs of compute capability sm_major: for the
/// benchmark's bytes-moved model and for tests that aim at level boundaries.
struct sample_sort_shape {
  int levels{};                      ///< levels of an average segment (each reads keys twice)
  int launched_levels{};             ///< levels launched: those, and a spare one
  std::uint32_t bucket_capacity{};   ///< M: the largest bucket one block sorts
  std::uint32_t tile_items{};        ///< elements per block in the distribution passes
  std::uint32_t buckets{};           ///< k, the most buckets of one level
};
sample_sort_shape sample_sort_shape_of(std::uint64_t n, unsigned key_bytes, unsigned value_bytes,
                                       int sm_major);

/// How the levels scan their bucket counters (tests force either scan on every level).
enum class scan_choice {
  predicted,  ///< CUB's over level 0's counters and over the host's bound where an average
              ///< segment takes all k buckets; the counted scan elsewhere (sample_sort.cu)
  counted,    ///< every level over the counters that device memory counts, as the spare level
              ///< does, which rarely has any
  bound,      ///< CUB's on every level, past level 0 over the host's bound (otherwise only at
              ///< a few hundred million elements)
};

/// The typed sample_sort with the number of levels forced (tests): with too few, segments above
/// the bucket capacity remain and take the fallback path. levels < 0: as predicted.
bool sample_sort_with_levels(dtype t, order dir, void* d_keys, void* d_keys_alt, void* d_values,
                             void* d_values_alt, std::uint64_t n, unsigned value_bytes,
                             void* d_scratch, std::size_t scratch_bytes, cudaStream_t stream,
                             std::uint64_t seed, int levels,
                             scan_choice scans = scan_choice::predicted);

}  // namespace detail

/// For `incore_engine: auto`: whether the sample sort beat cub::DeviceRadixSort for this layout
/// on GPUs of compute capability `sm_major` in bench/sample_bench (bench/results/*-sample/).
bool sample_sort_preferred(unsigned key_bytes, unsigned value_bytes, int sm_major);

}  // namespace gpusort::cuda
