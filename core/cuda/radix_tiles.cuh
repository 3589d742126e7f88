// CUB's onesweep radix sort with tiles of a chosen size: the tuning layer under radix_sort
// (chunk_ops.cu) and bench/radix_tile_bench.cu. CUB's SM90 tuning for 64-bit keys takes tiles of
// 5760 keys (384 threads, 15 keys each), made for arrays of millions: a chunk of 262K keys (an
// 8 GiB job at its smallest device budget, issue 44) is then 46 blocks on an H200's 132 SMs,
// and each of the eight passes waits on its tiles' latency with most of the GPU idle. Smaller
// tiles spread one pass over every SM. Only the onesweep policy changes; the rest is CUB's own.
// CUDA-only (include from .cu files).
#pragma once

#include <cub/device/dispatch/dispatch_radix_sort.cuh>
#include <cub/device/dispatch/tuning/tuning_radix_sort.cuh>

#include <cuda/std/type_traits>

#include <cstddef>
#include <cstdint>

namespace gpusort::cuda::detail {

/// A onesweep tile: `threads` a block and `items` a thread, both nominal for 4-byte elements as
/// CUB states them (8-byte keys or values get half the items).
template <int Threads, int Items>
struct onesweep_tile {
  static constexpr int threads = Threads;
  static constexpr int items = Items;
};

/// CUB's radix policy hub for K, V and Offset with `Tile` in place of its onesweep policy, for
/// every architecture (one terminal policy: the kernels are compiled per architecture anyway).
template <typename K, typename V, typename Offset, typename Tile>
struct tiled_radix_policy_hub {
  using cub_hub = cub::detail::radix::policy_hub<K, V, Offset>;
  static constexpr bool keys_only = ::cuda::std::is_same_v<V, cub::NullType>;
  using cub_policy = typename cub_hub::template OnesweepSmallKeyTunedPolicy<
      cub::detail::radix::sm90_small_key_tuning<sizeof(K), keys_only ? 0 : sizeof(V),
                                                sizeof(Offset)>>;
  using dominant = ::cuda::std::_If<(sizeof(V) > sizeof(K)), V, K>;

  struct policy : cub::ChainedPolicy<900, policy, policy>, cub_policy {
    using OnesweepPolicy = cub::AgentRadixSortOnesweepPolicy<
        Tile::threads, Tile::items, dominant, 1, cub::RADIX_RANK_MATCH_EARLY_COUNTS_ANY,
        cub::BLOCK_SCAN_RAKING_MEMOIZE, cub::RADIX_SORT_STORE_DIRECT,
        cub_policy::ONESWEEP_RADIX_BITS>;
  };
  using MaxPolicy = policy;
};

/// Ascending radix sort of `n` keys over double buffers (values move along; V = cub::NullType
/// for keys alone) on bits [0, end_bit), with `Tile`'s onesweep tiles; `d_temp` null: the size
/// query. 32-bit offsets: a chunk this is chosen for is far below 2^31 elements.
template <typename Tile, typename K, typename V>
cudaError_t tiled_radix_sort(void* d_temp, std::size_t& temp_bytes, cub::DoubleBuffer<K>& keys,
                             cub::DoubleBuffer<V>& values, std::uint32_t n, int end_bit,
                             cudaStream_t stream)
{
  using hub = tiled_radix_policy_hub<K, V, std::uint32_t, Tile>;
  return cub::DispatchRadixSort<cub::SortOrder::Ascending, K, V, std::uint32_t,
                                cub::detail::identity_decomposer_t,
                                hub>::Dispatch(d_temp, temp_bytes, keys, values, n, 0, end_bit,
                                               /*is_overwrite_okay=*/true, stream);
}

}  // namespace gpusort::cuda::detail
