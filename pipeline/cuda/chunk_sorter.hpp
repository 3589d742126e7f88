// The in-core sort a GPU runs on a chunk of ordered bits: CUB's radix sort or the GPU sample
// sort, chosen by the configuration's incore_engine (auto: what bench/sample_bench measured to be
// faster for the layout on this GPU generation). Both share one contract (chunk_ops.cuh).
#pragma once

#include "core/cuda/chunk_ops.cuh"
#include "core/cuda/sample_sort.cuh"
#include "core/switches.hpp"

#include <gpusort/config.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace gpusort::detail {

class chunk_sorter {
 public:
  chunk_sorter(incore_engine engine, unsigned key_bytes, unsigned value_bytes, int sm_major)
      : sample_{engine == incore_engine::sample ||
                (engine == incore_engine::automatic &&
                 cuda::sample_sort_preferred(key_bytes, value_bytes, sm_major))}
  {
  }

  [[nodiscard]] bool sample() const noexcept { return sample_; }
  [[nodiscard]] const char* name() const noexcept { return sample_ ? "sample" : "radix"; }

  /// Scratch for sorting n elements on the current device: the sample sort's for the policy the
  /// device runs (sample_sort_scratch_bytes_here), not the largest of every policy built. The
  /// sm_80 layout is about twice sm_90's at a small budget's chunks, and an H200 budgeting for
  /// it cut 8 GiB of u64 at 32 MiB into 2643 chunks instead of 1594, which then sorted in
  /// 0.773 s against 0.577 (CUB's radix sort: 0.619 s; h200x2-20261130-s13/call2, issue 44).
  /// GPUSORT_SAMPLE_SCRATCH_HERE=0 takes the largest again, for the A/B.
  [[nodiscard]] std::size_t scratch_bytes(std::uint64_t n, unsigned key_bytes,
                                          unsigned value_bytes) const
  {
    if (!sample_) return cuda::radix_sort_scratch_bytes(n, key_bytes, value_bytes);
    static const bool here = switch_flag("GPUSORT_SAMPLE_SCRATCH_HERE", true);
    return here ? cuda::sample_sort_scratch_bytes_here(n, key_bytes, value_bytes)
                : cuda::sample_sort_scratch_bytes(n, key_bytes, value_bytes);
  }

  /// Sorts n ordered bits ascending over double buffers; true when the result is in the _alt
  /// buffers. `key_bits` > 0: the keys differ only in their low key_bits bits (round 2's, between
  /// two splitters), which the radix sort then sorts on alone; the sample sort, whose passes do
  /// not go digit by digit, sorts as before.
  bool sort(void* d_keys, void* d_keys_alt, void* d_values, void* d_values_alt, std::uint64_t n,
            unsigned key_bytes, unsigned value_bytes, void* d_scratch, std::size_t scratch_bytes,
            cudaStream_t stream, unsigned key_bits = 0) const
  {
    return sample_ ? cuda::sample_sort(d_keys, d_keys_alt, d_values, d_values_alt, n, key_bytes,
                                       value_bytes, d_scratch, scratch_bytes, stream)
                   : cuda::radix_sort(d_keys, d_keys_alt, d_values, d_values_alt, n, key_bytes,
                                      value_bytes, d_scratch, scratch_bytes, stream, key_bits);
  }

 private:
  bool sample_;
};

}  // namespace gpusort::detail
