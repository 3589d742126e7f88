// Block-level agents of the sample sort (CUB's "agent" layer): what one thread block does for one
// segment, tile or job. The thin kernels in kernels.cuh loop them over device-side work lists.
// Only for translation units compiled by nvcc.
#pragma once

#include "core/cuda/sample_sort/tuning.cuh"
#include "core/keys.hpp"

#include <cub/block/block_exchange.cuh>
#include <cub/block/block_load.cuh>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/block/block_store.cuh>
#include <cub/util_type.cuh>

#include <cstdint>
#include <type_traits>

namespace gpusort::cuda::detail::sample {

inline constexpr int max_levels = 16;

/// A range of elements that a level splits; its tiles are [tile_base, tile_base + tiles), its
/// bucket counters [count_base, count_base + 2k * tiles) for its own k (depth_for), so that a
/// level whose segments split into fewer than `buckets` scans no unused counters.
struct segment {
  std::uint64_t begin;
  std::uint64_t size;
  std::uint64_t tile_base;
  std::uint64_t count_base;
};

/// A range of at most bucket_capacity elements that one block sorts into the result buffer.
struct job {
  std::uint64_t begin;
  std::uint32_t size;
  std::uint32_t in_primary;  ///< 1: the elements are in d_keys, 0: in d_keys_alt
};

/// A finished range (equal keys): copied to the result from the primary buffer, or where it
/// lies in the result already, mapped back to raw keys in place (the typed entry).
struct copy_range {
  std::uint64_t begin;
  std::uint64_t size;
  std::uint32_t in_primary;
};

struct level_count {
  std::uint32_t segments;
  std::uint32_t tiles;
  unsigned long long counters;  ///< bucket counters of all its segments
};

/// Device-side counters of the work lists, zeroed once per sort.
struct counters {
  level_count levels[max_levels + 1];
  std::uint32_t jobs[2];  ///< [0] the large class, [1] the small class
  std::uint32_t copies;
};

/// Ordered bits <-> raw keys (gpusort::detail::sign_xor): all zero for ordered-bits input.
template <typename K>
using key_map = gpusort::detail::sign_xor<K>;

/// Cells of a segment's splitter range, a shortcut past the tree walk: cell c holds the number of
/// splitters whose cell is below c (low byte) and c (high byte); see cell_index.
inline constexpr int cell_bits = 12;
inline constexpr int cells = 1 << cell_bits;
/// a key whose cell holds more splitters walks the tree
inline constexpr std::uint32_t cell_compares = 3;

/// How a segment finds the cell of a key (cell_index::mode).
enum cell_mode : std::uint32_t { cells_off = 0, cells_linear = 1, cells_value = 2 };

/// The cell of a key. Any function of the ordered bits that never decreases would do: splitters
/// in cells below a key's are below the key, those in cells above it above. Linear: (key - lo)
/// >> shift. Value: linear in the value of the float (of K's size) whose ascending ordered bits
/// the key is, between the smallest and the largest splitter. The ordered bits of floats crowd
/// where one exponent's keys are (uniform floats in [-1, 1) put a quarter of the keys into 1/256
/// of the bits between their splitters), their values do not. Descending floats are the
/// negated values, so linear in value as well.
template <typename K>
struct cell_index {
  using real = std::conditional_t<sizeof(K) == 4, float, double>;
  K lo;  ///< the smallest and the largest splitter
  K hi;
  real offset;  ///< value mode: cell = value * scale + offset
  real scale;
  std::uint32_t shift;  ///< linear mode
  std::uint32_t mode;

  /// The float of ascending ordered bits o.
  __device__ __forceinline__ static real value_of(K o)
  {
    constexpr key_map<K> to_value = gpusort::detail::ordered_xor<K>(
        sizeof(K) == 4 ? dtype::f32 : dtype::f64, order::ascending, false);
    const K bits = to_value(o);
    if constexpr (sizeof(K) == 4) {
      return __uint_as_float(bits);
    } else {
      return __longlong_as_double(static_cast<long long>(bits));
    }
  }

  __device__ __forceinline__ std::uint32_t operator()(K key) const
  {
    if (mode == cells_value) {
      const K o = key < lo ? lo : key > hi ? hi : key;
      // one rounding (a fused multiply-add) keeps the map non-decreasing; below zero and NaN
      // cannot occur between two finite splitters, and the conversion saturates anyway
      std::uint32_t c;
      if constexpr (sizeof(K) == 4) {
        c = __float2uint_rz(__fmaf_rn(value_of(o), scale, offset));
      } else {
        c = __double2uint_rz(__fma_rn(value_of(o), scale, offset));
      }
      return c < static_cast<std::uint32_t>(cells) ? c : cells - 1;
    }
    const K above = key > lo ? static_cast<K>(key - lo) : K{0};
    const K wide = static_cast<K>(above >> shift);
    return wide < static_cast<K>(cells) ? static_cast<std::uint32_t>(wide) : cells - 1;
  }
};

/// The per-segment splitter data a level keeps in scratch.
template <typename K, int Buckets>
struct alignas(16) splitters {
  std::uint16_t cell[cells];
  K tree[Buckets];                    ///< complete binary search tree, root at [1]
  K sorted[Buckets];                  ///< the k - 1 splitters in order
  std::uint32_t heavy[Buckets / 32];  ///< bit i: splitter i occurs more than once
  std::uint32_t depth;                ///< log2 k of this segment
  std::uint32_t any_heavy;            ///< some bit of heavy is set
  cell_index<K> index;                ///< mode cells_off: too crowded, walk the tree
};

template <typename K>
__host__ __device__ __forceinline__ bool is_identity(const key_map<K>& m)
{
  return m.set == 0 && m.clear == 0;
}

/// Everything a level's kernels touch. Level L reads keys[L % 2 == 0 ? primary : alt] and writes
/// the other; the result is always assembled in the alt buffers. The input may hold raw keys:
/// level 0 maps them with `to_ordered` as it reads them (a sort without levels maps its few
/// keys in place first), and every write of the result maps them back with `from_ordered`, so
/// that floats and signed or descending keys cost no passes of their own.
template <typename K, typename V>
struct work {
  K* keys;
  K* keys_alt;
  V* values;
  V* values_alt;
  std::uint64_t n;
  std::uint64_t seed;
  counters* count;
  segment* segments[2];  ///< level L uses [L % 2] and fills [(L + 1) % 2]
  std::uint32_t* tile_map;  ///< tile -> segment index of the current level
  void* splitter_data;      ///< splitters<K, buckets>[segment]
  std::uint32_t* bucket_counts;
  std::uint64_t* bucket_offsets;  ///< exclusive scan of bucket_counts
  std::uint8_t* bucket_ids;       ///< [i]: the bucket of element i, from the histogram pass
  job* jobs[2];
  copy_range* copies;
  key_map<K> to_ordered;
  key_map<K> from_ordered;
  std::uint32_t float_keys;  ///< f32 or f64: cells may index by value (cell_index)
  std::uint32_t level;
  /// Counters that CUB's scan of this level reads (its host-side bound), 0 for the counted
  /// scan: those past the level's own are zeroed before it (tile_map_kernel)
  std::uint64_t scan_bound;
};

template <typename V>
inline constexpr bool has_values_v = !std::is_same_v<V, cub::NullType>;

inline constexpr std::uint64_t copy_chunk = std::uint64_t{1} << 16;

/// 16 bytes of a tile's keys, read with one load: the histogram pass waited on its 4-byte loads
/// (ncu, 2^26 u32 keys on an H100: half its stalls on L1TEX, the DRAM at 40%).
template <typename K>
struct alignas(16) key_vector {
  static constexpr int size = 16 / static_cast<int>(sizeof(K));
  /// the bucket bytes of one vector's keys
  using ids = std::conditional_t<sizeof(K) == 4, std::uint32_t, std::uint16_t>;
  K k[size];
};

/// f(v, at, x) for the key vectors of this thread in a full tile: its vector v is the tile's
/// vector at = v * Threads + thread, whose keys are x.
template <int Threads, int Items, typename K, typename F>
__device__ __forceinline__ void for_each_vector(const K* tile, F&& f)
{
  using vector = key_vector<K>;
  static_assert(Items % vector::size == 0);
#pragma unroll
  for (int v = 0; v < Items / vector::size; ++v) {
    const int at = v * Threads + static_cast<int>(threadIdx.x);
    const vector x = reinterpret_cast<const vector*>(tile)[at];  // one load, not one a key
    f(v, at, x);
  }
}

/// Whether a tile is read as key vectors: it is full, its keys start at a 16-byte boundary and
/// its bucket bytes at a boundary of one vector's bytes. Other tiles (the first and last of most
/// segments past level 0) are read key by key, striped over the threads.
template <typename K>
__device__ __forceinline__ bool vectors_fit(const K* tile, const std::uint8_t* ids,
                                            std::uint32_t size, std::uint32_t full)
{
  return size == full && reinterpret_cast<std::uintptr_t>(tile) % 16 == 0 &&
         reinterpret_cast<std::uintptr_t>(ids) % sizeof(typename key_vector<K>::ids) == 0;
}

__device__ __forceinline__ std::uint64_t mix64(std::uint64_t x)
{
  // splitmix64's finalizer: a bijection that spreads every input bit over the output.
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

/// Lanes of the warp whose label agrees with this lane's in the low Bits bits: one ballot per
/// bit (as CUB's MatchAny; match.any.sync is slower for a few bits, and CUB's inline-assembly
/// version exhausted the predicate registers in the unrolled loops here).
template <int Bits>
__device__ __forceinline__ unsigned match_label(std::uint32_t label)
{
  unsigned peers = 0xffffffffU;
#pragma unroll
  for (int b = 0; b < Bits; ++b) {
    const bool set = ((label >> b) & 1U) != 0;
    const unsigned vote = __ballot_sync(0xffffffffU, set);
    peers &= set ? vote : ~vote;
  }
  return peers;
}

/// Exclusive sum of x over a block of Threads threads: a shuffle scan in each warp, then one warp
/// scans the warps' totals (in `totals`, which the caller keeps until a barrier after the call).
/// CUB's BLOCK_SCAN_WARP_SCANS adds up the totals of the warps before its own in every thread, a
/// chain of selects over all 32 warps of a 1024-thread block (11% of the bucket sort's
/// instructions for 2^26 u32 keys on an H100); its raking form needs more shared memory than
/// 16 Ki 64-bit keys leave.
template <int Threads>
__device__ __forceinline__ std::uint32_t block_exclusive_sum(std::uint32_t x,
                                                             std::uint32_t (&totals)[Threads / 32])
{
  constexpr int warps = Threads / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  auto inclusive_scan = [lane](std::uint32_t v) {
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const std::uint32_t below = __shfl_up_sync(0xffffffffU, v, d);
      v += lane >= d ? below : 0U;
    }
    return v;
  };
  const std::uint32_t inclusive = inclusive_scan(x);
  if (lane == 31) totals[warp] = inclusive;
  __syncthreads();
  if (warp == 0) {
    const std::uint32_t total = lane < warps ? totals[lane] : 0U;
    const std::uint32_t before = inclusive_scan(total) - total;
    __syncwarp();
    if (lane < warps) totals[lane] = before;
  }
  __syncthreads();
  return totals[warp] + inclusive - x;
}

/// The bits that x needs: 0 for 0, else one more than the index of its top set bit.
template <typename K>
__device__ __forceinline__ int bit_width_of(K x)
{
  if constexpr (sizeof(K) == 4) {
    return 32 - __clz(static_cast<int>(x));
  } else {
    return 64 - __clzll(static_cast<long long>(x));
  }
}

/// The number of low zero bits of x, which is not 0.
template <typename K>
__device__ __forceinline__ int trailing_zeros_of(K x)
{
  if constexpr (sizeof(K) == 4) {
    return __ffs(static_cast<int>(x)) - 1;
  } else {
    return __ffsll(static_cast<long long>(x)) - 1;
  }
}

/// ceil(log2(ceil(size / part))): the splitting in bits that takes `size` elements to parts of
/// at most `part`.
__host__ __device__ __forceinline__ int split_bits(std::uint64_t size, std::uint64_t part)
{
  const std::uint64_t need = (size + part - 1) / part;
  int bits = 0;
  while ((std::uint64_t{1} << bits) < need) ++bits;
  return bits;
}

/// log2 of the number of buckets for a segment of `size` elements. The levels still needed are
/// those that take it to 3/4 of the capacity; the splitting, spread evenly over them, aims at
/// half the capacity, at most k a level. (Counting levels to half the capacity sent a segment
/// just above k times that through one more level: at 2^29 u64 keys on an H100, half the data
/// took a third level, 37 ms against an estimated 31.)
template <typename P>
__host__ __device__ __forceinline__ int depth_for(std::uint64_t size)
{
  constexpr std::uint64_t capacity = P::bucket_capacity;
  const int levels_bits = split_bits(size, capacity / 4 * 3);
  const int levels = levels_bits < 1 ? 1 : (levels_bits + P::log_buckets - 1) / P::log_buckets;
  const int bits = split_bits(size, capacity / 2);
  const int depth = (bits + levels - 1) / levels;
  return depth < 1 ? 1 : depth > P::log_buckets ? P::log_buckets : depth;
}

/// The label of a key in bucket b (b splitters below it): keys equal to a splitter that occurs
/// more than once go to its equality bucket 2b + 1, all others to 2b. The scatter takes b from
/// the histogram pass (bucket_ids) and tells only the equality buckets apart again.
template <typename K>
struct equality_labels {
  const K* sorted;
  const std::uint32_t* heavy;
  bool any_heavy;

  __device__ __forceinline__ std::uint32_t operator()(K key, std::uint32_t b) const
  {
    // any_heavy is the same for the whole block: no divergence; heavy holds no bit past the
    // last splitter
    const bool eq = any_heavy && ((heavy[b >> 5] >> (b & 31)) & 1U) != 0 && key == sorted[b];
    return 2 * b + (eq ? 1U : 0U);
  }
};

/// Bucket of a key: b = the number of splitters below it (label tells its equality bucket
/// apart). The key's cell gives the splitters below the cell and at most cell_compares in it to
/// compare with (independent loads); a key in a crowded cell takes the branch-free descent of
/// Leischner et al. (j = 2j + (e > bt[j])), a chain of log2 k dependent loads, and so do all
/// keys of a segment whose sample crowds the cells (cells_off).
template <typename P, typename K>
struct classifier {
  const K* tree;
  const std::uint16_t* cell;
  equality_labels<K> label;
  cell_index<K> index;
  int depth;

  __device__ __forceinline__ std::uint32_t bucket(K key) const
  {
    // the mode is the same for the whole block: no divergence
    const std::uint32_t entry = index.mode != cells_off ? cell[index(key)] : 0xff00U;
    const std::uint32_t first = entry & 0xffU;
    const std::uint32_t in_cell = entry >> 8;
    std::uint32_t b = first;
    if (in_cell <= cell_compares) {
      // Guarded: most cells hold no splitter, so whole warps skip the later loads (unguarded
      // compares against a padded array lost 2-7%, u64 the most)
#pragma unroll
      for (std::uint32_t i = 0; i < cell_compares; ++i)
        b += (i < in_cell && key > label.sorted[first + i]) ? 1U : 0U;
    } else {
      std::uint32_t j = 1;
#pragma unroll
      for (int l = 0; l < P::log_buckets; ++l) {
        if (l < depth) j = 2 * j + (key > tree[j] ? 1U : 0U);
      }
      b = j - (1U << depth);
    }
    return b;
  }
};

/// Shared copy of what the scatter needs of one segment's splitters, loaded by a whole block.
template <typename P, typename K>
struct shared_labels {
  K sorted[P::buckets];
  std::uint32_t heavy[P::buckets / 32];
  int depth;
  bool any_heavy;

  __device__ __forceinline__ void load(const splitters<K, P::buckets>& s)
  {
    // the k - 1 splitters the sample agent wrote: slot k - 1 is never read here (heavy has no
    // bit for it, a cell counts at most the splitters there are), and copying it read scratch
    // that nothing wrote (compute-sanitizer initcheck, cc0a8fe)
    const int k = 1 << s.depth;
    for (int i = threadIdx.x; i < k - 1; i += blockDim.x) sorted[i] = s.sorted[i];
    for (int i = threadIdx.x; i < P::buckets / 32; i += blockDim.x) heavy[i] = s.heavy[i];
    if (threadIdx.x == 0) {
      depth = static_cast<int>(s.depth);
      any_heavy = s.any_heavy != 0;
    }
  }

  __device__ __forceinline__ equality_labels<K> get() const { return {sorted, heavy, any_heavy}; }
};

/// Shared copy of one segment's splitters for the histogram pass, loaded by a whole block.
template <typename P, typename K>
struct shared_splitters {
  alignas(16) std::uint16_t cell[cells];
  K tree[P::buckets];
  shared_labels<P, K> labels;
  cell_index<K> index;

  __device__ __forceinline__ void load(const splitters<K, P::buckets>& s)
  {
    labels.load(s);
    // nodes 1 to k - 1: the root is at 1 and the walk never reads node 0, which nothing writes
    const int k = 1 << s.depth;
    for (int i = threadIdx.x + 1; i < k; i += blockDim.x) tree[i] = s.tree[i];
    if (s.index.mode != cells_off) {
      constexpr int vectors = cells * sizeof(std::uint16_t) / sizeof(uint4);
      for (int i = threadIdx.x; i < vectors; i += blockDim.x)
        reinterpret_cast<uint4*>(cell)[i] = reinterpret_cast<const uint4*>(s.cell)[i];
    }
    if (threadIdx.x == 0) index = s.index;
  }

  __device__ __forceinline__ classifier<P, K> get() const
  {
    return {tree, cell, labels.get(), index, labels.depth};
  }
};

// ---- sampling: one block per segment ----

template <typename P, typename K>
struct sample_agent {
  /// Keys a thread sorts for a sample of oversampling * k keys.
  static constexpr int items_for(int k)
  {
    return (P::oversampling * k + P::sample_threads - 1) / P::sample_threads;
  }
  /// The sample is sorted at the size its k needs, in one of three classes: k = buckets, k =
  /// buckets / 2, k = buckets / 4 or fewer. (Sorted at the size of k = buckets always, level 1
  /// of 2^26 u32 keys, k = 64, sorted 7680 keys for 1920: 38 us of a 1.65 ms sort on an H100.)
  static constexpr int full_items = P::sample_items;
  static constexpr int half_items = items_for(P::buckets / 2);
  static constexpr int quarter_items = items_for(P::buckets / 4);
  static_assert(full_items == items_for(P::buckets));
  template <int Items>
  using sorter = cub::BlockRadixSort<K, P::sample_threads, Items>;
  // the sorted sample reuses the sorts' shared memory
  union storage {
    typename sorter<full_items>::TempStorage sort_full;
    typename sorter<half_items>::TempStorage sort_half;
    typename sorter<quarter_items>::TempStorage sort_quarter;
    K sample[P::sample_threads * P::sample_items];
  };

  storage& s;

  template <int Items>
  __device__ __forceinline__ typename sorter<Items>::TempStorage& sort_storage()
  {
    if constexpr (Items == full_items) {
      return s.sort_full;
    } else if constexpr (Items == half_items) {
      return s.sort_half;
    } else {
      static_assert(Items == quarter_items);
      return s.sort_quarter;
    }
  }

  /// Draws `count` keys of the segment at random and leaves them sorted in s.sample[0, count),
  /// sorting Items keys a thread (the keys past `count` sort after every drawn key).
  template <int Items>
  __device__ __forceinline__ void draw_sorted(const K* keys, const segment& seg,
                                              std::uint64_t stream, key_map<K> map, int count)
  {
    K items[Items];
#pragma unroll
    for (int i = 0; i < Items; ++i) {
      const int at = static_cast<int>(threadIdx.x) * Items + i;
      if (at < count) {
        const std::uint64_t r = mix64(stream + static_cast<std::uint64_t>(at));
        items[i] = map(keys[seg.begin + __umul64hi(r, seg.size)]);
      } else {
        items[i] = static_cast<K>(~K{0});
      }
    }
    sorter<Items>(sort_storage<Items>()).Sort(items);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < Items; ++i) s.sample[threadIdx.x * Items + i] = items[i];
    __syncthreads();
  }

  __device__ __forceinline__ void run(const K* keys, const segment& seg, std::uint64_t seed,
                                      key_map<K> map, bool float_keys,
                                      splitters<K, P::buckets>& out)
  {
    const int depth = depth_for<P>(seg.size);
    const int k = 1 << depth;
    const int count = P::oversampling * k;
    const std::uint64_t stream = mix64(seed ^ mix64(seg.begin) ^ (seg.size << 1));
    // k is the same for the whole block
    if (count <= P::sample_threads * quarter_items) {
      draw_sorted<quarter_items>(keys, seg, stream, map, count);
    } else if (count <= P::sample_threads * half_items) {
      draw_sorted<half_items>(keys, seg, stream, map, count);
    } else {
      draw_sorted<full_items>(keys, seg, stream, map, count);
    }

    const int a = P::oversampling;
    bool any_heavy = false;
    for (int base = 0; base < P::buckets; base += P::sample_threads) {
      const int i = base + static_cast<int>(threadIdx.x);
      bool heavy = false;
      if (i < k - 1) {
        const K key = s.sample[(i + 1) * a];
        out.sorted[i] = key;
        heavy = (i > 0 && s.sample[i * a] == key) ||
                (i + 1 < k - 1 && s.sample[(i + 2) * a] == key);
      }
      any_heavy = any_heavy || heavy;
      const unsigned mask = __ballot_sync(0xffffffffU, heavy);
      if ((threadIdx.x & 31) == 0 && i / 32 < P::buckets / 32) out.heavy[i / 32] = mask;
      if (i >= 1 && i < k) {
        // node j of the implicit tree holds splitter (2p + 1) * (k >> (l + 1)) - 1, where l is
        // j's depth and p its position within that depth
        const int l = 31 - __clz(i);
        const int p = i - (1 << l);
        const int idx = (2 * p + 1) * (k >> (l + 1)) - 1;
        out.tree[i] = s.sample[(idx + 1) * a];
      }
    }
    any_heavy = __syncthreads_or(any_heavy) != 0;
    if (threadIdx.x == 0) {
      out.depth = static_cast<std::uint32_t>(depth);
      out.any_heavy = any_heavy ? 1U : 0U;
    }
    cells_of(k, float_keys, out);
  }

  /// The cells of the k - 1 splitters s.sample[(i + 1) * a]: linear in the ordered bits, or for
  /// floats whose bits crowd the cells, linear in their values; off where both crowd them.
  /// Floats whose splitters straddle zero try their values first: their ordered bits span every
  /// exponent below the smaller end on both sides, which crowds linear cells for data spread
  /// evenly by value (f32 in [-1, 1): linear cells crowded and level 0's one-block sample kernel
  /// filled the cells twice).
  __device__ __forceinline__ void cells_of(int k, bool float_keys,
                                           splitters<K, P::buckets>& out) const
  {
    constexpr int a = P::oversampling;
    using real = typename cell_index<K>::real;
    cell_index<K> index{};
    index.lo = s.sample[a];
    index.hi = s.sample[(k - 1) * a];
    const int width = bit_width_of(static_cast<K>(index.hi - index.lo));
    index.shift = static_cast<std::uint32_t>(width > cell_bits ? width - cell_bits : 0);
    bool by_value = false;  // value cells can be built
    bool value_first = false;
    if (float_keys) {
      const real low = cell_index<K>::value_of(index.lo);
      const real high = cell_index<K>::value_of(index.hi);
      const real scale = static_cast<real>(cells) / (high - low);
      by_value = isfinite(low) && isfinite(high) && high > low && isfinite(scale);
      value_first = by_value && low < real{0} && high > real{0};
      index.scale = scale;
      index.offset = -low * scale;
    }
    auto fill = [&](cell_mode mode) {
      index.mode = mode;
      return fill_cells(k, index, out);
    };
    const bool filled = value_first
                            ? fill(cells_value) || fill(cells_linear)
                            : fill(cells_linear) || (by_value && fill(cells_value));
    if (!filled && threadIdx.x == 0) {
      index.mode = cells_off;
      out.index = index;
    }
  }

  /// Fills out.cell by `index` and keeps the index (true), unless more than 1 in 64 keys of the
  /// sample sits in a cell of more than cell_compares splitters: then most warps would walk the
  /// tree as well (floats by their bits; many equal keys) and the cells are not worth their
  /// lookup. (With cells throughout, f64 keys in [-1, 1) lost 5% and zero inputs 10%; H100,
  /// 85ab686.) The splitters are counted per cell and the counts scanned: a binary search of the
  /// splitters for each end of every cell took 17 us of level 0's 42 us sample kernel (one
  /// block for the whole GPU; 2^26 u32 keys on an H100).
  __device__ __forceinline__ bool fill_cells(int k, const cell_index<K>& index,
                                             splitters<K, P::buckets>& out) const
  {
    constexpr int a = P::oversampling;
    constexpr int per_thread = cells / P::sample_threads;
    static_assert(cells % P::sample_threads == 0);
    __shared__ alignas(16) std::uint32_t in_cell[cells];
    __shared__ std::uint32_t totals[P::sample_threads / 32];
    __shared__ int crowded;
    __syncthreads();  // every thread has read the counts of a previous call
    for (int c = threadIdx.x; c < cells; c += P::sample_threads) in_cell[c] = 0;
    if (threadIdx.x == 0) crowded = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < k - 1; i += P::sample_threads)
      atomicAdd(&in_cell[index(s.sample[(i + 1) * a])], 1U);
    __syncthreads();
    // a thread's cells are consecutive, so it moves them as vectors
    static_assert(per_thread % 8 == 0);
    std::uint32_t count[per_thread];
    std::uint32_t sum = 0;
#pragma unroll
    for (int j = 0; j < per_thread; j += 4) {
      const uint4 v = reinterpret_cast<const uint4*>(in_cell)[(threadIdx.x * per_thread + j) / 4];
      count[j] = v.x;
      count[j + 1] = v.y;
      count[j + 2] = v.z;
      count[j + 3] = v.w;
      sum += v.x + v.y + v.z + v.w;
    }
    // splitters whose cell is below c: an exclusive scan of the counts
    std::uint32_t below = block_exclusive_sum<P::sample_threads>(sum, totals);
    std::uint32_t packed[per_thread / 2];  // two cells a word, as out.cell lays them out
#pragma unroll
    for (int j = 0; j < per_thread; ++j) {
      const std::uint32_t entry = below | count[j] << 8;
      packed[j / 2] = j % 2 == 0 ? entry : packed[j / 2] | entry << 16;
      below += count[j];
    }
#pragma unroll
    for (int j = 0; j < per_thread / 2; j += 4) {
      reinterpret_cast<uint4*>(out.cell)[(threadIdx.x * per_thread / 2 + j) / 4] =
          make_uint4(packed[j], packed[j + 1], packed[j + 2], packed[j + 3]);
    }
    int mine = 0;
    for (int i = threadIdx.x; i < a * k; i += P::sample_threads)
      mine += in_cell[index(s.sample[i])] > cell_compares ? 1 : 0;
    atomicAdd(&crowded, mine);
    __syncthreads();
    const bool fits = crowded * 64 <= P::oversampling * k;
    if (fits && threadIdx.x == 0) out.index = index;
    return fits;
  }
};

// ---- histogram: one block per tile ----

template <typename P, typename K>
struct histogram_agent {
  static constexpr std::uint32_t none = 0xffffffffU;  ///< the label of no key
  struct storage {
    shared_splitters<P, K> split;
    /// One row of counters for the whole block. Per-warp rows, as in the paper, guard against
    /// contention that shared atomics no longer have (conflicts are within a warp's access, in
    /// any row), and clearing and adding 16 rows cost a shared access per key: one row, +1% for
    /// u32 keys at 2^26 and 2^29 on an H100 (see tuning.cuh). Equality counters moved to the
    /// upper half, so that the even labels of the common case spread over all banks, did not
    /// help.
    std::uint32_t hist[P::counters];
  };

  storage& s;

  /// Counts the tile's keys per bucket into counts[b * stride] for b < 2k, and keeps each key's
  /// bucket b (its label without the equality bit) in ids[i] for the scatter.
  __device__ __forceinline__ void run(const K* keys, key_map<K> map, std::uint64_t begin,
                                      std::uint32_t size, std::uint32_t* counts,
                                      std::uint64_t stride, std::uint8_t* ids)
  {
    const int lane = static_cast<int>(threadIdx.x) % 32;
    for (int i = threadIdx.x; i < P::counters; i += P::dist_threads) s.hist[i] = 0;
    __syncthreads();
    const classifier<P, K> cls = s.split.get();
    std::uint32_t bkt[P::dist_items];
    if (vectors_fit(keys + begin, ids, size, P::tile_items)) {
      classify_vectors(keys + begin, map, cls, ids, bkt);
    } else {
      classify_striped(keys + begin, map, size, cls, ids, bkt);
    }
    // Shared-memory atomics; a warp whose lanes all hit one bucket (runs of equal or sorted
    // keys) adds once instead of contending 32 times. (match.any for every key cost 3x more on
    // an H100: 768 us for 2^26 u32 keys against ~250.)
#pragma unroll
    for (int i = 0; i < P::dist_items; ++i) {
      const std::uint32_t first = __shfl_sync(0xffffffffU, bkt[i], 0);
      if (__all_sync(0xffffffffU, bkt[i] == first)) {
        if (lane == 0 && first != none) atomicAdd(&s.hist[first], 32U);
      } else if (bkt[i] != none) {
        atomicAdd(&s.hist[bkt[i]], 1U);
      }
    }
    __syncthreads();
    const int nb = 2 << s.split.labels.depth;
    for (int b = threadIdx.x; b < nb; b += P::dist_threads)
      counts[static_cast<std::uint64_t>(b) * stride] = s.hist[b];
  }

  /// The labels of a tile's keys read key by key (item i of a thread is key i * threads +
  /// thread), `none` past its end. All descents first, so that the independent tree walks
  /// overlap their latencies. Past the end of a short tile a lane classifies the tile's last key
  /// again and drops it: a branch around each classification costs more than the few tiles that
  /// are short (2% for u32).
  __device__ __forceinline__ void classify_striped(const K* tile, key_map<K> map,
                                                   std::uint32_t size,
                                                   const classifier<P, K>& cls,
                                                   std::uint8_t* ids,
                                                   std::uint32_t (&bkt)[P::dist_items])
  {
#pragma unroll
    for (int i = 0; i < P::dist_items; ++i) {
      const std::uint32_t at = static_cast<std::uint32_t>(i * P::dist_threads) + threadIdx.x;
      const K key = map(tile[min(at, size - 1)]);
      const std::uint32_t b = cls.bucket(key);
      if (at < size) ids[at] = static_cast<std::uint8_t>(b);
      bkt[i] = at < size ? cls.label(key, b) : none;
    }
  }

  /// The labels of a full tile's keys read as vectors (vector v of a thread is vector
  /// v * threads + thread of the tile), with their bucket bytes stored a vector at a time.
  __device__ __forceinline__ void classify_vectors(const K* tile, key_map<K> map,
                                                   const classifier<P, K>& cls,
                                                   std::uint8_t* ids,
                                                   std::uint32_t (&bkt)[P::dist_items])
  {
    using vector = key_vector<K>;
    using vector_ids = typename vector::ids;
    for_each_vector<P::dist_threads, P::dist_items>(tile, [&](int v, int at, const vector& x) {
      vector_ids packed = 0;
#pragma unroll
      for (int j = 0; j < vector::size; ++j) {
        const K key = map(x.k[j]);
        const std::uint32_t b = cls.bucket(key);
        packed |= static_cast<vector_ids>(b << (8 * j));
        bkt[v * vector::size + j] = cls.label(key, b);
      }
      reinterpret_cast<vector_ids*>(ids)[at] = packed;
    });
  }
};

// ---- scatter: one block per tile ----

/// Moves a tile's keys (and values) to their buckets: each bucket's part of the tile is gathered
/// in shared memory and written out as one contiguous run. Keys alone take their places from
/// shared atomics on counters that start at the tile's bucket starts (the histogram pass's
/// counts, scanned), as equal keys cannot be told apart in any order. Pairs are ranked
/// deterministically instead (per-warp counters, ballot matching, no atomics), so that the same
/// input always gives the same order of values among equal keys.
template <typename P, typename K, typename V>
struct scatter_agent {
  static constexpr int warps = P::dist_threads / 32;
  static constexpr int tile = P::tile_items;
  static constexpr bool by_atomics = !has_values_v<V>;
  /// counters: one row of bucket starts (atomics), or one row per warp (ballots)
  static constexpr int rows = by_atomics ? 1 : warps;
  static constexpr int scan_items = P::counters * rows / P::dist_threads;
  static_assert(P::counters * rows % P::dist_threads == 0);
  using block_scan = cub::BlockScan<std::uint32_t, P::dist_threads>;
  using value_t = std::conditional_t<has_values_v<V>, V, char>;
  /// 32 bits for atomics; per-warp counters count at most a tile, and in 16 bits the storage
  /// of 64-bit pairs fits two blocks an SM
  using counter_t = std::conditional_t<by_atomics, std::uint32_t, std::uint16_t>;
  static_assert(tile < 65536);
  struct storage {
    shared_labels<P, K> split;  ///< no cells or tree: the buckets come from bucket_ids
    typename block_scan::TempStorage scan;
    /// per row its bucket counters, then each (bucket, row)'s start; warp-major so that the
    /// lanes updating one warp's counters spread over the banks (bucket-major put all of a
    /// warp's updates in one bank: 16-way conflicts), padded for the bucket-major scan
    counter_t offset[rows][P::counters + 1];
    std::uint64_t dst[P::counters];  ///< output index of the tile's bucket b, less its start
    K keys[tile];
    value_t values[has_values_v<V> ? tile : 1];
    std::uint16_t bucket[tile];
  };

  storage& s;

  /// Exclusive scan of the (bucket, row) counters in bucket-major order, in place.
  __device__ __forceinline__ void scan_counters()
  {
    std::uint32_t local[scan_items];
    std::uint32_t sum = 0;
#pragma unroll
    for (int j = 0; j < scan_items; ++j) {
      const int e = static_cast<int>(threadIdx.x) * scan_items + j;
      local[j] = s.offset[e % rows][e / rows];
      sum += local[j];
    }
    std::uint32_t prefix = 0;
    block_scan(s.scan).ExclusiveSum(sum, prefix);
#pragma unroll
    for (int j = 0; j < scan_items; ++j) {
      const int e = static_cast<int>(threadIdx.x) * scan_items + j;
      s.offset[e % rows][e / rows] = static_cast<counter_t>(prefix);
      prefix += local[j];
    }
  }

  /// Where the tile's part of bucket b starts in the output, from the scanned counters.
  __device__ __forceinline__ static std::uint64_t global_offset(const std::uint64_t* tile_offsets,
                                                                std::uint64_t stride,
                                                                std::uint64_t segment_first,
                                                                std::uint64_t segment_begin, int b)
  {
    // differences of the scan stay exact modulo 2^64 even where other segments' unused counters
    // left garbage in between
    return segment_begin +
           (tile_offsets[static_cast<std::uint64_t>(b) * stride] - segment_first);
  }

  /// s.dst[b] from the scanned global offsets and the tile's bucket starts in s.offset[0].
  __device__ __forceinline__ void bucket_destinations(const std::uint64_t* tile_offsets,
                                                      std::uint64_t stride,
                                                      std::uint64_t segment_first,
                                                      std::uint64_t segment_begin)
  {
    const int nb = 2 << s.split.depth;
    for (int b = threadIdx.x; b < nb; b += P::dist_threads)
      s.dst[b] = global_offset(tile_offsets, stride, segment_first, segment_begin, b) -
                 s.offset[0][b];
  }

  __device__ __forceinline__ void run(const K* keys_in, key_map<K> map, const V* values_in,
                                      K* keys_out, V* values_out, std::uint64_t begin,
                                      std::uint32_t size, const std::uint32_t* tile_counts,
                                      const std::uint64_t* tile_offsets, std::uint64_t stride,
                                      std::uint64_t segment_first, std::uint64_t segment_begin,
                                      const std::uint8_t* ids)
  {
    const int lane = static_cast<int>(threadIdx.x) % 32;
    if constexpr (by_atomics) {
      const int nb = 2 << s.split.depth;
      // The tile's bucket counts, as the histogram pass found them (buckets past this segment's
      // 2k count nothing), and their global offsets, loaded together before the scan rather
      // than one after the other around it: u32 and f32 +3% at 2^26 on an H100, but -4 to -6%
      // at 2^29, where a level's counters are 8 times L2 (ab13; see tuning.cuh).
      constexpr int per_thread = P::counters / P::dist_threads;
      static_assert(P::counters % P::dist_threads == 0);
      std::uint64_t global[per_thread];
#pragma unroll
      for (int j = 0; j < per_thread; ++j) {
        const int b = j * P::dist_threads + static_cast<int>(threadIdx.x);
        std::uint32_t count = 0;
        if (b < nb) {
          count = tile_counts[static_cast<std::uint64_t>(b) * stride];
          global[j] = global_offset(tile_offsets, stride, segment_first, segment_begin, b);
        }
        s.offset[0][b] = count;
      }
      __syncthreads();
      scan_counters();
      __syncthreads();
#pragma unroll
      for (int j = 0; j < per_thread; ++j) {
        const int b = j * P::dist_threads + static_cast<int>(threadIdx.x);
        if (b < nb) s.dst[b] = global[j] - s.offset[0][b];
      }
    } else {
      for (int i = threadIdx.x; i < rows * (P::counters + 1); i += P::dist_threads)
        (&s.offset[0][0])[i] = 0;
    }
    __syncthreads();
    const equality_labels<K> label = s.split.get();
    constexpr std::uint32_t none = P::counters;  // the label of no key

    // Registers hold the keys and (bucket << 16 | rank) only; values go from device memory
    // straight to their shared slot once the ranks are known, so that two blocks fit an SM.
    K key[P::dist_items];
    std::uint32_t slot[P::dist_items];
    // The buckets are the histogram pass's: a byte a key moved is cheaper than classifying it
    // again. Keys alone go to places by atomics, so where they were in the tile does not
    // matter, and full tiles are read as vectors (see histogram_agent). (Loading them before
    // the work on the counters, to overlap the latency, lost 2-11%: H100, 734bf9d, ab8.)
    if (by_atomics && vectors_fit(keys_in + begin, ids, size, tile)) {
      using vector = key_vector<K>;
      using vector_ids = typename vector::ids;
      for_each_vector<P::dist_threads, P::dist_items>(
          keys_in + begin, [&](int v, int at, const vector& x) {
            const vector_ids packed = reinterpret_cast<const vector_ids*>(ids)[at];
#pragma unroll
            for (int j = 0; j < vector::size; ++j) {
              key[v * vector::size + j] = map(x.k[j]);
              slot[v * vector::size + j] = (packed >> (8 * j)) & 0xffU;
            }
          });
#pragma unroll
      for (int i = 0; i < P::dist_items; ++i) slot[i] = label(key[i], slot[i]);
    } else {
      // All loads first; past the end of a short tile, lanes take the tile's last key and drop
      // it (see histogram_agent; a full-tile and a short-tile copy of these loops, each with one
      // loop, lost 10% on u32).
#pragma unroll
      for (int i = 0; i < P::dist_items; ++i) {
        const std::uint32_t at = min(
            static_cast<std::uint32_t>(i * P::dist_threads) + threadIdx.x, size - 1);
        key[i] = map(keys_in[begin + at]);
        slot[i] = ids[at];
      }
#pragma unroll
      for (int i = 0; i < P::dist_items; ++i) {
        const std::uint32_t at = static_cast<std::uint32_t>(i * P::dist_threads) + threadIdx.x;
        slot[i] = at < size ? label(key[i], slot[i]) : none;
      }
    }
    if constexpr (by_atomics) {
      // A warp whose lanes all hit one bucket (runs of equal or sorted keys) takes 32 places
      // with one atomic instead of contending 32 times.
#pragma unroll
      for (int i = 0; i < P::dist_items; ++i) {
        const std::uint32_t b = slot[i];
        const std::uint32_t first = __shfl_sync(0xffffffffU, b, 0);
        std::uint32_t pos = 0;
        if (__all_sync(0xffffffffU, b == first)) {
          if (lane == 0 && b != none) pos = atomicAdd(&s.offset[0][b], 32U);
          pos = __shfl_sync(0xffffffffU, pos, 0) + static_cast<std::uint32_t>(lane);
        } else if (b != none) {
          pos = atomicAdd(&s.offset[0][b], 1U);
        }
        if (b != none) {
          s.keys[pos] = key[i];
          s.bucket[pos] = static_cast<std::uint16_t>(b);
        }
      }
    } else {
      // Ranks within (bucket, warp), items in order: each warp owns its counters, so no atomics
      // and the same input always gives the same output. MatchAny compares label_bits bits,
      // enough for `none`.
      const int warp = static_cast<int>(threadIdx.x) / 32;
      constexpr int label_bits = P::log_buckets + 2;
      const unsigned lanes_below = (1U << lane) - 1;
#pragma unroll
      for (int i = 0; i < P::dist_items; ++i) {
        const std::uint32_t b = slot[i];
        const unsigned peers = match_label<label_bits>(b);
        const int leader = __ffs(peers) - 1;
        std::uint32_t base = 0;
        if (b != none && lane == leader) {
          base = s.offset[warp][b];
          s.offset[warp][b] = static_cast<counter_t>(base + __popc(peers));
        }
        const std::uint32_t rank =
            __shfl_sync(0xffffffffU, base, leader) + __popc(peers & lanes_below);
        slot[i] = b << 16 | rank;
        __syncwarp();
      }
      __syncthreads();
      scan_counters();
      __syncthreads();
      bucket_destinations(tile_offsets, stride, segment_first, segment_begin);
#pragma unroll
      for (int i = 0; i < P::dist_items; ++i) {
        const std::uint32_t at = static_cast<std::uint32_t>(i * P::dist_threads) + threadIdx.x;
        if (at < size) {
          const std::uint32_t b = slot[i] >> 16;
          const std::uint32_t pos = s.offset[warp][b] + (slot[i] & 0xffffU);
          s.keys[pos] = key[i];
          s.values[pos] = values_in[begin + at];
          s.bucket[pos] = static_cast<std::uint16_t>(b);
        }
      }
    }
    __syncthreads();
    // each bucket's part of the tile goes out as one contiguous run
    for (std::uint32_t p = threadIdx.x; p < size; p += P::dist_threads) {
      const std::uint64_t to = s.dst[s.bucket[p]] + p;
      keys_out[to] = s.keys[p];
      if constexpr (has_values_v<V>) values_out[to] = s.values[p];
    }
  }
};

// ---- bucket sort: one block per job, in shared memory ----

__host__ __device__ constexpr int floor_log2(int x) { return x <= 1 ? 0 : 1 + floor_log2(x / 2); }

/// Sorts up to Threads * Items elements. Keys are ranked by key - min over bit_width(max - min)
/// bits, so a job between close splitters has few bits to sort; a job of equal keys is only
/// moved. Keys wait in registers while the first pass counts, so one shared key buffer is all a
/// job needs (two blocks of 4 Ki pairs share an SM, and 16 Ki 64-bit keys fit one block);
/// values wait in shared memory at their input positions.
///  1. One counting pass on the top log2(capacity) of those bits (one digit per element at the
///     capacity; uniform data in a bucket stays uniform between its splitters), ranked by
///     shared atomics on 16-bit counters, puts the keys in shared memory grouped by digit.
///  2. Each key of that buffer counts the keys of its digit's run (mostly 1 or 2) that go
///     before it, by (key, input position) for pairs so that the output is deterministic, and
///     is stored straight to its place in device memory, within its run, so nearly coalesced;
///     its value goes there from its input position.
///  A job with a run above `run_max` (a skewed job: far outliers, or many keys agreeing in
///  their top bits that no equality bucket caught) is sorted by LSD passes of 8-bit digits over
///  all its bits instead: the keys stay at their input positions and the passes move 16-bit
///  positions between two arrays.
/// An LSD pass ranks by warp: each warp owns Items * 32 consecutive positions and its own
/// digit counters, and ballots group the lanes of one digit, so a pass is stable and the output
/// deterministic without atomics.
///
/// Measured on an H100 (bench/sample_bench, 2^26 uniform keys, whole sort; kernel times by ncu):
///  - CUB's BlockRadixSort (4-bit digits, tile padded to the capacity): 12.3 Gkeys/s for u32, 8.1
///    for u64;
///  - LSD passes of 8 bits alone: 14.5 and 8.2 Gkeys/s; the bucket sort took 4.8 of the 8.2 ms
///    of a u64 sort, as a bucket of uniform 64-bit keys still spans ~50 bits (7 passes);
///  - one top pass, then a warp per digit sorting it in registers with a bitonic network: the
///    u64 bucket sort 2.7-3.1 ms, u32 2.3 ms (from 1.9), pairs slower: ~180 instructions per
///    element for a 32-element network, most of it on padding (1.7 G instructions issued);
///  - two stable warp-ranked passes over the top 16 (u32: 18) bits, then the runs: u64 2.21 ms,
///    pairs 2.90, u32 1.78 (1.1 G instructions for u64: ~60 a key and pass in the ballots);
///  - one atomic top pass into a second shared buffer, then one thread insertion-sorting each
///    run, then a copy out (d328eb3): u64 1.61-1.82 ms, pairs 2.53, u32 1.22-1.42; one block per
///    SM, 20 of 32 lanes active (the runs), 529 K spill requests per sort;
///  - this agent (24c0c40): u64 1.20 ms (two blocks an SM), u32 0.79 ms, u64/u64 1.68 ms at
///    8 Ki (one block an SM; at 4 Ki two blocks and faster whole sorts, see tuning.cuh); whole
///    sorts u64 17.9, u32 25.9, u64/u64 10.7 Gkeys/s. Storing keys from the input order instead
///    of from the buffer scattered the stores over the job: pairs 3.4 ms. 64-bit keys at 16 Ki
///    in one block an SM (6138ee1): 1.24 ms, about the same a key, and 2^29 keys need two
///    levels instead of three.
///  - jobs are half the capacity on average, and ncu counted every thread running all its items
///    predicated off: items past the job branch around their work (each_item), the run starts
///    are 16-bit with the job's size after the last, and keys alone in their run skip the
///    counting loop (14c27c9): u32 0.79 -> 0.66 ms, 433 M -> 359 M instructions, whole sorts
///    u32 +6%, u64 +6-7%. block_exclusive_sum instead of CUB's warp scans: u64 +3%, u32 flat.
///    Loading the next job's keys into shared memory (cp.async) while sorting: u32 -5%.
///  - ncu at 734bf9d (2^26 u32, 0.78 ms, 310 M warp instructions, 2.0 issued a cycle):
///    place_runs takes 44% of the instructions, its counting loop 25%: some lane of nearly
///    every warp sits in a run of two or more, so warps go round ~3.2 times. Unrolled 4 times,
///    f32 gaussian +2% but u32 -2%; u32 at 8 Ki in two 512-thread blocks an SM, within 2% of one
///    1024-thread block at 16 Ki (2^26; ab7 in bench/results/h100-20261122-734bf9d/): the
///    barriers of one block an SM are not what bounds it. A 15-bit top digit for 4-byte keys
///    alone (fewer keys sharing a digit, twice the counters a job): u32 -16 to -21% (ab8).
///  - The same ncu run: 17% of the stalls on the top pass turning counts into starts, one word
///    at a time, each read waiting for the previous word's store (starts overlay the counts).
///    Read and written as vectors, all reads first: the bucket sort 770 -> 676 us, whole sorts
///    +4% (u32, f32, u64 at 2^26, u32 and f32 at 2^29; ab9, ab12 in
///    bench/results/h100-20261122-13ac653/). Keys alone whose low bits agree skip the counting
///    where a digit holds only equal keys (see run): f32 gaussian and uniform +3-8%. Counting
///    only a run's others (one time round fewer, an index to skip) lost 1-3%; marking runs
///    that the top pass left out of order, in jobs with a run above 8, and placing keys of the
///    others without counting: f32 +2-7% but u32 -2% (ab11).
template <typename K, typename V, int Threads, int Items>
struct bucket_sort_agent {
  static constexpr int capacity = Threads * Items;
  static constexpr int warps = Threads / 32;
  static constexpr int digit_bits = 8;  ///< of the LSD passes
  static constexpr int digits = 1 << digit_bits;
  static constexpr int scan_items = digits * warps / Threads;
  static_assert(digits * warps % Threads == 0);
  /// the top pass: one digit per element at the capacity, two 16-bit counters a word
  static constexpr int top_bits = floor_log2(capacity);
  static constexpr int top_words = (1 << top_bits) / 2;
  static_assert((1 << top_bits) == capacity && capacity < 65536 && top_words % Threads == 0);
  /// The longest run whose keys count their places. Keys alone take longer runs: f32 gaussian
  /// keys (values on a grid of 2^-23, about ten copies of each near zero at 2^26) filled runs of
  /// 17 to 30 equal keys, and the whole job went to the LSD passes.
  static constexpr bool pairs = has_values_v<V>;
  static constexpr std::uint32_t run_max = pairs ? 16 : 32;
  /// What a job's keys have in common: their range, and the bits in which some differ.
  struct bounds {
    K lo;
    K hi;
    K differ;  ///< | of key ^ the job's first key
  };
  /// all in one reduction: one barrier a job less than two
  using reduce = cub::BlockReduce<bounds, Threads>;
  using value_t = std::conditional_t<pairs, V, char>;
  struct storage {
    K keys[capacity];
    value_t values[pairs ? capacity : 1];  ///< at their input positions
    /// index[0]: each key's input position after the top pass (the order among equal keys of
    /// pairs); both: positions of the keys in the LSD passes of a skewed job
    std::uint16_t index[2][capacity];
    union {
      /// LSD counters, warp-major and padded (see scatter_agent); 16 bits, as they count at
      /// most the capacity, so that two blocks of 64-bit keys fit an SM
      std::uint16_t count[warps][digits + 1];
      /// the top pass's counters, two digits a word; read and written as 16-byte vectors
      alignas(16) std::uint32_t top_count[top_words];
      /// after the scan: each digit's first position, and the job's size after the last digit
      std::uint16_t starts[capacity + 1];
    };
    union {
      std::uint32_t totals[warps];  ///< of block_exclusive_sum
      typename reduce::TempStorage reduce;
    } u;
    K min;
    K max;
    K differ;  ///< the bits in which some keys of the job differ
  };

  storage& s;

  /// A job's bits: those in which key - min ranges (bit_width(max - min)), and the low bits in
  /// which all its keys agree; and whether its keys come mostly in order (see swizzled).
  struct key_bits {
    int range;
    int agreed;
    bool ordered;
  };

  /// Keys of this thread: position i * Threads + threadIdx.x of the job.
  __device__ __forceinline__ static std::uint32_t position(int i)
  {
    return static_cast<std::uint32_t>(i * Threads) + threadIdx.x;
  }

  /// Whether item i of this thread is in a job of `size`. The first test is the same for the
  /// whole block, so that items past the job can branch around their work.
  __device__ __forceinline__ static bool in_job(int i, std::uint32_t size)
  {
    return static_cast<std::uint32_t>(i * Threads) < size && position(i) < size;
  }

  /// f(i) for the items of this thread in a job of `size` (f tests in_job itself): the upper
  /// half only where the job reaches it, behind a branch the whole block takes alike. Jobs are
  /// half the capacity on average, and ptxas turns short guarded items into predicated ones,
  /// which every warp executes (ncu: all 16 loads of every thread for every job).
  template <typename F>
  __device__ __forceinline__ static void each_item(std::uint32_t size, F&& f)
  {
#pragma unroll
    for (int i = 0; i < Items / 2; ++i) f(i);
    if (size > static_cast<std::uint32_t>(capacity / 2)) {
#pragma unroll
      for (int i = Items / 2; i < Items; ++i) f(i);
    }
  }

  /// Loads the job's keys into registers and its values into shared memory (so that a job
  /// sorted in place has read all it needs before anything is written); returns its key_bits
  /// and sets s.min.
  __device__ __forceinline__ key_bits load(const K* keys_in, const V* values_in,
                                           std::uint64_t begin, std::uint32_t size,
                                           K (&key)[Items])
  {
    K lo = static_cast<K>(~K{0});
    K hi = 0;
    K differ = 0;
    const K first = size != 0 ? keys_in[begin] : K{0};  // one address for all: a broadcast
#pragma unroll
    for (int i = 0; i < Items; ++i) key[i] = 0;
    each_item(size, [&](int i) {
      if (in_job(i, size)) {
        key[i] = keys_in[begin + position(i)];
        if constexpr (pairs) s.values[position(i)] = values_in[begin + position(i)];
        lo = key[i] < lo ? key[i] : lo;
        hi = key[i] > hi ? key[i] : hi;
        differ |= key[i] ^ first;
      }
    });
    const bounds job = reduce(s.u.reduce).Reduce(bounds{lo, hi, differ}, [](bounds x, bounds y) {
      return bounds{x.lo < y.lo ? x.lo : y.lo, x.hi > y.hi ? x.hi : y.hi,
                    static_cast<K>(x.differ | y.differ)};
    });
    if (threadIdx.x == 0) {
      s.min = job.lo;
      s.max = job.hi;
      s.differ = job.differ;
    }
    // Whether the first key of each thread is at most the next thread's: about half of them for
    // keys in random order, nearly all for sorted ones. Counted by the barrier that was needed
    // anyway.
    const K next = __shfl_down_sync(0xffffffffU, key[0], 1);
    const bool in_order = threadIdx.x % 32 == 31 || position(0) + 1 >= size || key[0] <= next;
    const int ordered = __syncthreads_count(in_order ? 1 : 0);
    const K range = static_cast<K>(s.max - s.min);
    if (range == 0) return {0, 0, false};
    // keys that differ differ in some bit
    return {bit_width_of(range), trailing_zeros_of(s.differ), ordered > Threads / 4 * 3};
  }

  /// Where the top pass keeps the key of position p in s.keys, in a job whose keys come mostly
  /// in order (Swizzle): each 32-key row XORed with its row number, so that keys landing a fixed
  /// stride apart spread over the banks. A job of sorted keys (after the distribution, in runs
  /// of 32 keys 4 apart in the input) puts a warp's keys into runs of the same length a few
  /// words apart: f32 "sorted" at 2^26, with four copies of each value, took 8.7 shared
  /// wavefronts per store against 3.5 for random keys, and the bucket sort 644 us against 583
  /// (ncu, H100). Swizzled always, sorted inputs +3-4% but u32 and u64 in random order -1 to
  /// -2% (the counting loop's extra work; ab15 in bench/results/h100-20261122-5213001/).
  template <bool Swizzle>
  __device__ __forceinline__ static std::uint32_t swizzled(std::uint32_t p)
  {
    return Swizzle ? p ^ ((p >> 5) & 31U) : p;
  }

  /// (key - base) >> shift: the top pass's digit; an LSD pass keeps its low 8 bits.
  __device__ __forceinline__ static std::uint32_t digit_at(K key, K base, int shift)
  {
    return static_cast<std::uint32_t>(static_cast<K>(key - base) >> shift);
  }

  /// The top pass: keys to s.keys grouped by digit (key - base) >> shift, ranked by shared
  /// atomics on 16-bit counters, so the order within a digit is arbitrary; s.index[0] records
  /// each key's input position. False, with nothing moved, if a digit holds more than run_max
  /// keys that still need ordering.
  template <bool Swizzle>
  __device__ __forceinline__ bool top_pass(const K (&key)[Items], std::uint32_t size, K base,
                                           int shift, bool equal_digits)
  {
    constexpr int words = top_words / Threads;
    for (int i = threadIdx.x; i < top_words; i += Threads) s.top_count[i] = 0;
    __syncthreads();
    std::uint32_t rank[(Items + 1) / 2] = {};  // two 16-bit ranks a register
#pragma unroll
    for (int i = 0; i < Items; ++i) {
      if (in_job(i, size)) {
        const std::uint32_t d = digit_at(key[i], base, shift);
        const std::uint32_t half = 16 * (d % 2);
        const std::uint32_t old = atomicAdd(&s.top_count[d / 2], 1U << half);
        rank[i / 2] |= ((old >> half) & 0xffffU) << (16 * (i % 2));
      }
    }
    __syncthreads();
    // A thread's counter words are read and written as 16-byte vectors, all reads before the
    // first write: starts overlay the counters, and reading each word after the previous word's
    // starts went out serialized 8 shared round trips (ncu, 734bf9d: 17% of the bucket sort's
    // stalls). They are read twice rather than held across the scan, where 64-bit keys spill.
    using word_vector = uint4;
    constexpr int vectors = words / 4;
    static_assert(words % 4 == 0);
    auto* const count_vectors = reinterpret_cast<word_vector*>(s.top_count);
    word_vector w[vectors];
#pragma unroll
    for (int v = 0; v < vectors; ++v) w[v] = count_vectors[threadIdx.x * vectors + v];
    std::uint32_t sum = 0;
    bool too_long = false;
#pragma unroll
    for (int v = 0; v < vectors; ++v) {
      const std::uint32_t x[4] = {w[v].x, w[v].y, w[v].z, w[v].w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        sum += (x[j] & 0xffffU) + (x[j] >> 16);
        too_long = too_long || (x[j] & 0xffffU) > run_max || (x[j] >> 16) > run_max;
      }
    }
    std::uint32_t prefix = block_exclusive_sum<Threads>(sum, s.u.totals);
#pragma unroll
    for (int v = 0; v < vectors; ++v) w[v] = count_vectors[threadIdx.x * vectors + v];
    // a counter word (two digits' counts) becomes the two digits' starts, in place
    auto starts_of = [&prefix](std::uint32_t x) {
      const std::uint32_t first = prefix;
      const std::uint32_t second = first + (x & 0xffffU);
      prefix = second + (x >> 16);
      return (first & 0xffffU) | (second << 16);
    };
#pragma unroll
    for (int v = 0; v < vectors; ++v) {
      count_vectors[threadIdx.x * vectors + v] = {starts_of(w[v].x), starts_of(w[v].y),
                                                  starts_of(w[v].z), starts_of(w[v].w)};
    }
    if (threadIdx.x == 0) s.starts[capacity] = static_cast<std::uint16_t>(size);
    // where every digit holds equal keys, keys alone are in order already
    if (__syncthreads_or(too_long) != 0 && (!equal_digits || pairs)) return false;
    each_item(size, [&](int i) {
      if (in_job(i, size)) {
        const std::uint32_t at =
            s.starts[digit_at(key[i], base, shift)] + ((rank[i / 2] >> (16 * (i % 2))) & 0xffffU);
        s.keys[swizzled<Swizzle>(at)] = key[i];
        if constexpr (pairs) s.index[0][at] = static_cast<std::uint16_t>(position(i));
      }
    });
    __syncthreads();
    return true;
  }

  /// After the top pass: each key of s.keys counts the keys of its run that go before it and
  /// goes to its place in the output, which lies within its run, so the stores stay nearly
  /// coalesced; its value comes from its input position.
  template <bool Swizzle>
  __device__ __forceinline__ void place_runs(K* keys_out, key_map<K> map, V* values_out,
                                             std::uint64_t begin, std::uint32_t size, K base,
                                             int shift, bool equal_digits)
  {
#pragma unroll
    for (int i = 0; i < Items; ++i) {
      const std::uint32_t q = position(i);
      if (in_job(i, size)) {
        const K key = s.keys[swizzled<Swizzle>(q)];
        std::uint32_t place = q;
        if (!equal_digits || pairs) {
          const std::uint32_t d = digit_at(key, base, shift);
          const std::uint32_t first = s.starts[d];
          const std::uint32_t end = s.starts[d + 1];
          place = first;
          // most keys are alone in their run (a job of half the capacity spreads over twice
          // as many digits)
          if (end - first > 1) {
            const std::uint32_t from = pairs ? s.index[0][q] : q;
#pragma unroll 1
            for (std::uint32_t r = first; r < end; ++r) {
              const K other = s.keys[swizzled<Swizzle>(r)];
              // ties: by input position for pairs; keys alone by place in the buffer, any order
              const bool before = (pairs ? s.index[0][r] : r) < from;
              place += (other < key || (other == key && before)) ? 1U : 0U;
            }
          }
        }
        keys_out[begin + place] = map(key);
        if constexpr (pairs) values_out[begin + place] = s.values[s.index[0][q]];
      }
    }
  }

  /// One stable LSD pass by the digit at `shift` of key - base over the positions in
  /// s.index[from], into s.index[from ^ 1]: keys stay where the top pass's caller left them and
  /// are read through their positions, so that a pass holds only 16-bit positions and ranks in
  /// registers.
  __device__ __forceinline__ void pass(int from, std::uint32_t size, K base, int shift)
  {
    auto digit_of = [=](K key) {
      return digit_at(key, base, shift) & (digits - 1);
    };
    const int warp = static_cast<int>(threadIdx.x) / 32;
    const int lane = static_cast<int>(threadIdx.x) % 32;
    const unsigned lanes_below = (1U << lane) - 1;
    // Items per thread for this job, not for the capacity: every warp takes a share, so a job
    // of half the capacity runs half as long rather than on half the warps.
    const std::uint32_t per_thread = (size + Threads - 1) / Threads;
    const std::uint32_t warp_base = static_cast<std::uint32_t>(warp) * 32 * per_thread;
    constexpr std::uint32_t none = digits;  // one label above every digit
    std::uint16_t* flat = &s.count[0][0];
    for (int i = threadIdx.x; i < (digits + 1) * warps; i += Threads) flat[i] = 0;
    __syncthreads();
    const std::uint16_t* src = s.index[from];
    std::uint16_t* dst = s.index[from ^ 1];
    static_assert(32 * Items < 65536);
    std::uint32_t rank[(Items + 1) / 2] = {};  // two 16-bit ranks a register
#pragma unroll
    for (int i = 0; i < Items; ++i) {
      const std::uint32_t first = warp_base + static_cast<std::uint32_t>(i) * 32;
      // warp-uniform: a warp past the end skips its work (a `break` here would stop the
      // unrolling and put the arrays in local memory)
      if (static_cast<std::uint32_t>(i) < per_thread && first < size) {
        const std::uint32_t p = first + static_cast<std::uint32_t>(lane);
        const std::uint32_t d = p < size ? digit_of(s.keys[src[p]]) : none;
        const unsigned peers = match_label<digit_bits + 1>(d);
        const int leader = __ffs(peers) - 1;
        std::uint32_t before = 0;
        if (d != none && lane == leader) {
          before = s.count[warp][d];
          s.count[warp][d] = static_cast<std::uint16_t>(before + __popc(peers));
        }
        const std::uint32_t r =
            __shfl_sync(0xffffffffU, before, leader) + __popc(peers & lanes_below);
        rank[i / 2] |= r << (16 * (i % 2));
        __syncwarp();
      }
    }
    __syncthreads();
    // (digit, warp) counters -> first positions, digit-major: stable. The counters are read
    // twice rather than kept in registers.
    std::uint32_t sum = 0;
#pragma unroll
    for (int j = 0; j < scan_items; ++j) {
      const int e = static_cast<int>(threadIdx.x) * scan_items + j;
      sum += s.count[e % warps][e / warps];
    }
    std::uint32_t prefix = block_exclusive_sum<Threads>(sum, s.u.totals);
#pragma unroll
    for (int j = 0; j < scan_items; ++j) {
      const int e = static_cast<int>(threadIdx.x) * scan_items + j;
      const std::uint32_t here = s.count[e % warps][e / warps];
      s.count[e % warps][e / warps] = static_cast<std::uint16_t>(prefix);
      prefix += here;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < Items; ++i) {
      const std::uint32_t p = warp_base + static_cast<std::uint32_t>(i) * 32 +
                              static_cast<std::uint32_t>(lane);
      if (static_cast<std::uint32_t>(i) < per_thread && p < size) {
        const std::uint16_t at = src[p];
        dst[s.count[warp][digit_of(s.keys[at])] + ((rank[i / 2] >> (16 * (i % 2))) & 0xffffU)] =
            at;
      }
    }
    __syncthreads();
  }

  /// The skewed job: the keys at their input positions, LSD passes over all `bits` on the
  /// positions, then out.
  __device__ __forceinline__ void lsd_sort(const K (&key)[Items], K* keys_out, key_map<K> map,
                                           V* values_out, std::uint64_t begin,
                                           std::uint32_t size, K base, int bits)
  {
#pragma unroll
    for (int i = 0; i < Items; ++i) {
      if (in_job(i, size)) {
        s.keys[position(i)] = key[i];
        s.index[0][position(i)] = static_cast<std::uint16_t>(position(i));
      }
    }
    __syncthreads();
    int from = 0;
    for (int shift = 0; shift < bits; shift += digit_bits) {
      pass(from, size, base, shift);
      from ^= 1;
    }
    for (std::uint32_t p = threadIdx.x; p < size; p += Threads) {
      const std::uint16_t at = s.index[from][p];
      keys_out[begin + p] = map(s.keys[at]);
      if constexpr (pairs) values_out[begin + p] = s.values[at];
    }
  }

  /// Sorts keys_in[begin, begin + size) and the values along into keys_out (written through
  /// out_map), which may be the same buffers.
  __device__ __forceinline__ void run(const K* keys_in, const V* values_in, K* keys_out,
                                      key_map<K> out_map, V* values_out, std::uint64_t begin,
                                      std::uint32_t size)
  {
    K key[Items];
    const key_bits kb = load(keys_in, values_in, begin, size, key);
    const int bits = kb.range;
    if (bits == 0) {  // equal keys: in input order, already in place or copied
      const bool moved = keys_in != keys_out;
      if (moved || !is_identity(out_map)) {
#pragma unroll
        for (int i = 0; i < Items; ++i) {
          if (in_job(i, size)) {
            keys_out[begin + position(i)] = out_map(key[i]);
            if constexpr (pairs) {
              if (moved) values_out[begin + position(i)] = s.values[position(i)];
            }
          }
        }
      }
      return;
    }
    const K base = s.min;
    // The top top_bits of the range. Where the bits below agree in all keys, each digit holds
    // equal keys, which only pairs need ordered (by input position): all keys where no more
    // bits differ, and floats on a grid coarser than their spacing, as the f32 inputs are (values
    // k * 2^-23 - 1 in [-1, 1): four copies of each at 2^26 uniform keys, about ten near zero for
    // gaussian ones; keys alone counted their places once per copy, the f32 gaussian bucket
    // sort 878 us against u32's 770 on an H100).
    const int shift = bits > top_bits ? bits - top_bits : 0;
    const bool equal_digits = shift <= kb.agreed;
    auto sort_swizzled = [&](auto swizzle) {
      constexpr bool on = decltype(swizzle)::value;
      if (top_pass<on>(key, size, base, shift, equal_digits)) {
        place_runs<on>(keys_out, out_map, values_out, begin, size, base, shift, equal_digits);
      } else {
        lsd_sort(key, keys_out, out_map, values_out, begin, size, base, bits);
      }
    };
    if (kb.ordered) {
      sort_swizzled(std::true_type{});
    } else {
      sort_swizzled(std::false_type{});
    }
  }
};

// ---- the fallback for segments that the levels did not shrink: one block, bitonic ----

template <typename K, typename V>
__device__ void bitonic_segment(K* keys, V* values, std::uint64_t size)
{
  std::uint64_t p2 = 1;
  while (p2 < size) p2 <<= 1;
  auto exchange = [&](std::uint64_t i, std::uint64_t j) {
    // positions at or past `size` stand for +infinity and never move
    if (j < size && keys[j] < keys[i]) {
      const K k = keys[i];
      keys[i] = keys[j];
      keys[j] = k;
      if constexpr (has_values_v<V>) {
        const V v = values[i];
        values[i] = values[j];
        values[j] = v;
      }
    }
  };
  for (std::uint64_t k = 2; k <= p2; k <<= 1) {
    const std::uint64_t half = k / 2;
    for (std::uint64_t x = threadIdx.x; x < p2 / 2; x += blockDim.x) {
      const std::uint64_t i = (x / half) * k + x % half;
      exchange(i, i ^ (k - 1));
    }
    __syncthreads();
    for (std::uint64_t d = k / 4; d >= 1; d /= 2) {
      for (std::uint64_t x = threadIdx.x; x < p2 / 2; x += blockDim.x) {
        const std::uint64_t i = (x / d) * 2 * d + x % d;
        exchange(i, i + d);
      }
      __syncthreads();
    }
  }
}

}  // namespace gpusort::cuda::detail::sample
