// Block-level agents of the sample sort (CUB's "agent" layer): what one thread block does for one
// segment, tile or job. The thin kernels in kernels.cuh loop them over device-side work lists.
// Only for translation units compiled by nvcc.
#pragma once

#include "core/cuda/sample_sort/tuning.cuh"

#include <cub/block/block_exchange.cuh>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/util_type.cuh>

#include <cstdint>
#include <type_traits>

namespace gpusort::cuda::detail::sample {

inline constexpr int max_levels = 16;

/// A range of elements that a level splits; its tiles are [tile_base, tile_base + tiles).
struct segment {
  std::uint64_t begin;
  std::uint64_t size;
  std::uint64_t tile_base;
};

/// A range of at most bucket_capacity elements that one block sorts into the result buffer.
struct job {
  std::uint64_t begin;
  std::uint32_t size;
  std::uint32_t in_primary;  ///< 1: the elements are in d_keys, 0: in d_keys_alt
};

/// A range that is finished (equal keys) but lies in the primary buffer: copied to the result.
struct copy_range {
  std::uint64_t begin;
  std::uint64_t size;
};

struct level_count {
  std::uint32_t segments;
  std::uint32_t tiles;
};

/// Device-side counters of the work lists, zeroed once per sort.
struct counters {
  level_count levels[max_levels + 1];
  std::uint32_t jobs[2];  ///< [0] the large class, [1] the small class
  std::uint32_t copies;
};

/// The per-segment splitter data a level keeps in scratch.
template <typename K, int Buckets>
struct splitters {
  K tree[Buckets];   ///< complete binary search tree, root at [1]
  K sorted[Buckets]; ///< the k - 1 splitters in order
  std::uint32_t heavy[Buckets / 32];  ///< bit i: splitter i occurs more than once
  std::uint32_t depth;                ///< log2 k of this segment
};

/// Everything a level's kernels touch. Level L reads keys[L % 2 == 0 ? primary : alt] and writes
/// the other; the result is always assembled in the alt buffers.
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
  job* jobs[2];
  copy_range* copies;
  std::uint32_t level;
};

template <typename V>
inline constexpr bool has_values_v = !std::is_same_v<V, cub::NullType>;

inline constexpr std::uint64_t copy_chunk = std::uint64_t{1} << 16;

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

/// log2 of the number of buckets for a segment of `size` elements: the levels still needed to
/// reach half the capacity, with the splitting spread evenly over them.
template <typename P>
__host__ __device__ __forceinline__ int depth_for(std::uint64_t size)
{
  const std::uint64_t half = P::bucket_capacity / 2;
  const std::uint64_t need = (size + half - 1) / half;  // >= 3 for size > capacity
  int bits = 0;
  while ((std::uint64_t{1} << bits) < need) ++bits;
  const int levels = (bits + P::log_buckets - 1) / P::log_buckets;
  const int depth = (bits + levels - 1) / levels;
  return depth < 1 ? 1 : depth;
}

/// Bucket of a key: the branch-free descent of Leischner et al. (j = 2j + (e > bt[j])) gives
/// b = the number of splitters below e; keys equal to a splitter that occurs more than once go to
/// its equality bucket 2b + 1, all others to 2b.
template <typename P, typename K>
struct classifier {
  const K* tree;
  const K* sorted;
  const std::uint32_t* heavy;
  int depth;

  __device__ __forceinline__ std::uint32_t operator()(K key) const
  {
    std::uint32_t j = 1;
#pragma unroll
    for (int l = 0; l < P::log_buckets; ++l) {
      if (l < depth) j = 2 * j + (key > tree[j] ? 1U : 0U);
    }
    const std::uint32_t b = j - (1U << depth);
    const bool eq = b + 1 < (1U << depth) && ((heavy[b >> 5] >> (b & 31)) & 1U) != 0 &&
                    key == sorted[b];
    return 2 * b + (eq ? 1U : 0U);
  }
};

/// Shared copy of one segment's splitters, loaded by a whole block.
template <typename P, typename K>
struct shared_splitters {
  K tree[P::buckets];
  K sorted[P::buckets];
  std::uint32_t heavy[P::buckets / 32];
  int depth;

  __device__ __forceinline__ void load(const splitters<K, P::buckets>& s)
  {
    const int k = 1 << s.depth;
    for (int i = threadIdx.x; i < k; i += blockDim.x) {
      tree[i] = s.tree[i];
      sorted[i] = s.sorted[i];
    }
    for (int i = threadIdx.x; i < P::buckets / 32; i += blockDim.x) heavy[i] = s.heavy[i];
    if (threadIdx.x == 0) depth = static_cast<int>(s.depth);
  }

  __device__ __forceinline__ classifier<P, K> get() const { return {tree, sorted, heavy, depth}; }
};

// ---- sampling: one block per segment ----

template <typename P, typename K>
struct sample_agent {
  using sorter = cub::BlockRadixSort<K, P::sample_threads, P::sample_items>;
  // the sorted sample reuses the sort's shared memory
  union storage {
    typename sorter::TempStorage sort;
    K sample[P::sample_threads * P::sample_items];
  };

  storage& s;

  __device__ __forceinline__ void run(const K* keys, const segment& seg, std::uint64_t seed,
                                      splitters<K, P::buckets>& out)
  {
    const int depth = depth_for<P>(seg.size);
    const int k = 1 << depth;
    const int count = P::oversampling * k;
    const std::uint64_t stream = mix64(seed ^ mix64(seg.begin) ^ (seg.size << 1));
    K items[P::sample_items];
#pragma unroll
    for (int i = 0; i < P::sample_items; ++i) {
      const int at = static_cast<int>(threadIdx.x) * P::sample_items + i;
      if (at < count) {
        const std::uint64_t r = mix64(stream + static_cast<std::uint64_t>(at));
        items[i] = keys[seg.begin + __umul64hi(r, seg.size)];
      } else {
        items[i] = static_cast<K>(~K{0});  // after every sampled key (stable sort)
      }
    }
    sorter(s.sort).Sort(items);
    __syncthreads();
#pragma unroll
    for (int i = 0; i < P::sample_items; ++i)
      s.sample[threadIdx.x * P::sample_items + i] = items[i];
    __syncthreads();

    const int a = P::oversampling;
    for (int base = 0; base < P::buckets; base += P::sample_threads) {
      const int i = base + static_cast<int>(threadIdx.x);
      bool heavy = false;
      if (i < k - 1) {
        const K key = s.sample[(i + 1) * a];
        out.sorted[i] = key;
        heavy = (i > 0 && s.sample[i * a] == key) ||
                (i + 1 < k - 1 && s.sample[(i + 2) * a] == key);
      }
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
    if (threadIdx.x == 0) out.depth = static_cast<std::uint32_t>(depth);
  }
};

// ---- histogram: one block per tile ----

template <typename P, typename K>
struct histogram_agent {
  static constexpr int warps = P::dist_threads / 32;
  struct storage {
    shared_splitters<P, K> split;
    std::uint32_t hist[warps][P::counters];
  };

  storage& s;

  /// Counts the tile's keys per bucket into counts[b * stride] for b < 2k.
  __device__ __forceinline__ void run(const K* keys, std::uint64_t begin, std::uint32_t size,
                                      std::uint32_t* counts, std::uint64_t stride)
  {
    const int warp = static_cast<int>(threadIdx.x) / 32;
    const int lane = static_cast<int>(threadIdx.x) % 32;
    for (int i = threadIdx.x; i < warps * P::counters; i += P::dist_threads)
      (&s.hist[0][0])[i] = 0;
    __syncthreads();
    const classifier<P, K> cls = s.split.get();
    constexpr std::uint32_t none = 0xffffffffU;
    // all descents first, so that the independent tree walks overlap their latencies
    std::uint32_t bkt[P::dist_items];
#pragma unroll
    for (int i = 0; i < P::dist_items; ++i) {
      const std::uint32_t at = static_cast<std::uint32_t>(i * P::dist_threads) + threadIdx.x;
      bkt[i] = at < size ? cls(keys[begin + at]) : none;
    }
    // Shared-memory atomics on the warp's own counters; a warp whose lanes all hit one bucket
    // (runs of equal or sorted keys) adds once instead of contending 32 times. (match.any for
    // every key cost 3x more on an H100: 768 us for 2^26 u32 keys against ~250.)
#pragma unroll
    for (int i = 0; i < P::dist_items; ++i) {
      const std::uint32_t first = __shfl_sync(0xffffffffU, bkt[i], 0);
      if (__all_sync(0xffffffffU, bkt[i] == first)) {
        if (lane == 0 && first != none) atomicAdd(&s.hist[warp][first], 32U);
      } else if (bkt[i] != none) {
        atomicAdd(&s.hist[warp][bkt[i]], 1U);
      }
    }
    __syncthreads();
    const int nb = 2 << s.split.depth;
    for (int b = threadIdx.x; b < nb; b += P::dist_threads) {
      std::uint32_t sum = 0;
#pragma unroll
      for (int w = 0; w < warps; ++w) sum += s.hist[w][b];
      counts[static_cast<std::uint64_t>(b) * stride] = sum;
    }
  }
};

// ---- scatter: one block per tile ----

template <typename P, typename K, typename V>
struct scatter_agent {
  static constexpr int warps = P::dist_threads / 32;
  static constexpr int tile = P::tile_items;
  static constexpr int scan_items = P::counters * warps / P::dist_threads;
  static_assert(P::counters * warps % P::dist_threads == 0);
  using block_scan = cub::BlockScan<std::uint32_t, P::dist_threads>;
  using value_t = std::conditional_t<has_values_v<V>, V, char>;
  struct storage {
    shared_splitters<P, K> split;
    typename block_scan::TempStorage scan;
    /// per warp its bucket counters, then each (bucket, warp)'s start; warp-major so that the
    /// lanes updating one warp's counters spread over the banks (bucket-major put all of a
    /// warp's updates in one bank: 16-way conflicts), padded for the bucket-major scan
    std::uint32_t offset[warps][P::counters + 1];
    std::uint64_t dst[P::counters];  ///< output index of the tile's bucket b, less its start
    K keys[tile];
    value_t values[has_values_v<V> ? tile : 1];
    std::uint16_t bucket[tile];
  };

  storage& s;

  __device__ __forceinline__ void run(const K* keys_in, const V* values_in, K* keys_out,
                                      V* values_out, std::uint64_t begin, std::uint32_t size,
                                      const std::uint64_t* tile_offsets, std::uint64_t stride,
                                      std::uint64_t segment_first, std::uint64_t segment_begin)
  {
    const int warp = static_cast<int>(threadIdx.x) / 32;
    const int lane = static_cast<int>(threadIdx.x) % 32;
    for (int i = threadIdx.x; i < warps * (P::counters + 1); i += P::dist_threads)
      (&s.offset[0][0])[i] = 0;
    __syncthreads();
    const classifier<P, K> cls = s.split.get();
    // one label above every bucket: MatchAny compares label_bits bits
    constexpr std::uint32_t none = P::counters;
    constexpr int label_bits = P::log_buckets + 2;
    const unsigned lanes_below = (1U << lane) - 1;

    // Registers hold the keys and (bucket << 16 | rank) only; values go from device memory
    // straight to their shared slot once the ranks are known, so that two blocks fit an SM.
    K key[P::dist_items];
    std::uint32_t slot[P::dist_items];
#pragma unroll
    for (int i = 0; i < P::dist_items; ++i) {
      const std::uint32_t at = static_cast<std::uint32_t>(i * P::dist_threads) + threadIdx.x;
      if (at < size) key[i] = keys_in[begin + at];
    }
#pragma unroll
    for (int i = 0; i < P::dist_items; ++i) {
      const std::uint32_t at = static_cast<std::uint32_t>(i * P::dist_threads) + threadIdx.x;
      slot[i] = at < size ? cls(key[i]) : none;
    }
    // Ranks within (bucket, warp), items in order: each warp owns its counters, so no atomics
    // and the same input always gives the same output.
#pragma unroll
    for (int i = 0; i < P::dist_items; ++i) {
      const std::uint32_t b = slot[i];
      const unsigned peers = match_label<label_bits>(b);
      const int leader = __ffs(peers) - 1;
      std::uint32_t base = 0;
      if (b != none && lane == leader) {
        base = s.offset[warp][b];
        s.offset[warp][b] = base + __popc(peers);
      }
      const std::uint32_t rank =
          __shfl_sync(0xffffffffU, base, leader) + __popc(peers & lanes_below);
      slot[i] = b << 16 | rank;
      __syncwarp();
    }
    __syncthreads();

    // (bucket, warp) counters -> starts within the tile, bucket-major
    // (bucket, warp) counters -> starts within the tile, in bucket-major order
    std::uint32_t local[scan_items];
    std::uint32_t sum = 0;
#pragma unroll
    for (int j = 0; j < scan_items; ++j) {
      const int e = static_cast<int>(threadIdx.x) * scan_items + j;
      local[j] = s.offset[e % warps][e / warps];
      sum += local[j];
    }
    std::uint32_t prefix = 0;
    block_scan(s.scan).ExclusiveSum(sum, prefix);
#pragma unroll
    for (int j = 0; j < scan_items; ++j) {
      const int e = static_cast<int>(threadIdx.x) * scan_items + j;
      s.offset[e % warps][e / warps] = prefix;
      prefix += local[j];
    }
    __syncthreads();
    const int nb = 2 << s.split.depth;
    for (int b = threadIdx.x; b < nb; b += P::dist_threads) {
      // differences of the scan stay exact modulo 2^64 even where other segments' unused
      // counters left garbage in between
      const std::uint64_t global =
          segment_begin + (tile_offsets[static_cast<std::uint64_t>(b) * stride] - segment_first);
      s.dst[b] = global - s.offset[0][b];
    }
#pragma unroll
    for (int i = 0; i < P::dist_items; ++i) {
      const std::uint32_t at = static_cast<std::uint32_t>(i * P::dist_threads) + threadIdx.x;
      if (at < size) {
        const std::uint32_t b = slot[i] >> 16;
        const std::uint32_t pos = s.offset[warp][b] + (slot[i] & 0xffffU);
        s.keys[pos] = key[i];
        if constexpr (has_values_v<V>) s.values[pos] = values_in[begin + at];
        s.bucket[pos] = static_cast<std::uint16_t>(b);
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

/// Sorts up to Threads * Items elements in shared memory. Keys are ranked by key - min over
/// bit_width(max - min) bits, so a job between close splitters has few bits to sort; a job of
/// equal keys is only moved.
///  1. One counting pass on the top log2(capacity) of those bits (one digit per element at the
///     capacity; uniform data in a bucket stays uniform between its splitters), ranked by
///     shared atomics on 16-bit counters, each key's input position carried along.
///  2. Each run of keys that agree in those bits (mostly 1 or 2 keys) is insertion-sorted by
///     (key, input position) by one thread, so the output is deterministic. Values are not
///     moved until the end, when each output position gathers its value from the input
///     position.
///  A job with a run above `run_max` (a skewed job: far outliers, or many keys agreeing in
///  their top bits that no equality bucket caught) is loaded again and sorted by LSD passes of
///  8-bit digits over all its bits: one pass slower than the LSD sort alone.
/// An LSD pass ranks by warp: each warp owns Items * 32 consecutive positions and its own
/// digit counters, and ballots group the lanes of one digit, so a pass is stable and the output
/// deterministic without atomics. Only warps holding elements work, so a job costs what its size
/// costs.
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
///  - this agent (one atomic top pass, runs by position): u64 1.82 ms, pairs 2.53, u32 1.42;
///    whole sorts u64 13.0, u64/u64 9.4, u32 16.3 Gkeys/s (bench/results/h100-20261122-d328eb3*).
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
  static_assert((1 << top_bits) == capacity && capacity <= 65536 && top_words % Threads == 0);
  static constexpr std::uint32_t run_max = 16;  ///< longest run one thread insertion-sorts
  using block_scan = cub::BlockScan<std::uint32_t, Threads>;
  using reduce = cub::BlockReduce<K, Threads>;
  using value_t = std::conditional_t<has_values_v<V>, V, char>;
  // Keys live in two shared buffers (a pass reads one and writes the other), so that only the
  // ranks stay in registers; values too where both copies fit the 227 KiB of an SM, else they
  // wait in registers during a pass.
  static constexpr std::size_t counter_bytes =
      (std::size_t{digits + 1} * warps > std::size_t{top_words} ? std::size_t{digits + 1} * warps
                                                                 : std::size_t{top_words}) *
      4;
  static constexpr bool values_twice =
      has_values_v<V> && 2 * (sizeof(K) + sizeof(value_t)) * capacity + counter_bytes +
                                 capacity * sizeof(std::uint16_t) <=
                             216 * 1024;
  static constexpr int value_buffers = values_twice ? 2 : 1;
  struct storage {
    K keys[2][capacity];
    value_t values[value_buffers][has_values_v<V> ? capacity : 1];
    union {
      std::uint32_t count[warps][digits + 1];  ///< warp-major, padded: see scatter_agent
      std::uint32_t top_count[top_words];
      std::uint16_t run_length[capacity];  ///< at each run's first position, else 0
    };
    std::uint16_t index[capacity];  ///< after the top pass: each key's position in the input
    union {
      typename block_scan::TempStorage scan;
      typename reduce::TempStorage reduce;
    } u;
    K min;
    K max;
  };

  storage& s;

  /// One stable LSD pass by the digit at `shift` of key - base, from keys[from] to
  /// keys[from ^ 1] (and the values).
  __device__ __forceinline__ void pass(int from, std::uint32_t size, K base, int shift)
  {
    auto digit_of = [=](K key) {
      return static_cast<std::uint32_t>(static_cast<K>(key - base) >> shift) & (digits - 1);
    };
    const int warp = static_cast<int>(threadIdx.x) / 32;
    const int lane = static_cast<int>(threadIdx.x) % 32;
    const unsigned lanes_below = (1U << lane) - 1;
    // Items per thread for this job, not for the capacity: every warp takes a share, so a job
    // of half the capacity runs half as long rather than on half the warps.
    const std::uint32_t per_thread = (size + Threads - 1) / Threads;
    const std::uint32_t warp_base = static_cast<std::uint32_t>(warp) * 32 * per_thread;
    constexpr std::uint32_t none = digits;  // one label above every digit
    std::uint32_t* flat = &s.count[0][0];
    for (int i = threadIdx.x; i < (digits + 1) * warps; i += Threads) flat[i] = 0;
    __syncthreads();
    const K* src = s.keys[from];
    K* dst = s.keys[from ^ 1];
    // ranks within a warp's positions are below 2^16: two to a register, against spills at the
    // 64 registers of 1024 threads
    static_assert(32 * Items < 65536);
    std::uint32_t rank[(Items + 1) / 2] = {};
    value_t value[values_twice ? 1 : Items];
#pragma unroll
    for (int i = 0; i < Items; ++i) {
      const std::uint32_t first = warp_base + static_cast<std::uint32_t>(i) * 32;
      // warp-uniform: a warp past the end skips its work (a `break` here would stop the
      // unrolling and put the arrays in local memory)
      if (static_cast<std::uint32_t>(i) < per_thread && first < size) {
        const std::uint32_t p = first + static_cast<std::uint32_t>(lane);
        std::uint32_t d = none;
        if (p < size) {
          d = digit_of(src[p]);
          if constexpr (has_values_v<V> && !values_twice) value[i] = s.values[0][p];
        }
        const unsigned peers = match_label<digit_bits + 1>(d);
        const int leader = __ffs(peers) - 1;
        std::uint32_t before = 0;
        if (d != none && lane == leader) {
          before = s.count[warp][d];
          s.count[warp][d] = before + __popc(peers);
        }
        const std::uint32_t r =
            __shfl_sync(0xffffffffU, before, leader) + __popc(peers & lanes_below);
        rank[i / 2] |= r << (16 * (i % 2));
        __syncwarp();
      }
    }
    __syncthreads();
    // (digit, warp) counters -> first positions, digit-major: stable. The counters are read
    // twice rather than kept in registers, again against spills.
    std::uint32_t sum = 0;
#pragma unroll
    for (int j = 0; j < scan_items; ++j) {
      const int e = static_cast<int>(threadIdx.x) * scan_items + j;
      sum += s.count[e % warps][e / warps];
    }
    std::uint32_t prefix = 0;
    block_scan(s.u.scan).ExclusiveSum(sum, prefix);
#pragma unroll
    for (int j = 0; j < scan_items; ++j) {
      const int e = static_cast<int>(threadIdx.x) * scan_items + j;
      const std::uint32_t here = s.count[e % warps][e / warps];
      s.count[e % warps][e / warps] = prefix;
      prefix += here;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < Items; ++i) {
      const std::uint32_t p = warp_base + static_cast<std::uint32_t>(i) * 32 +
                              static_cast<std::uint32_t>(lane);
      if (static_cast<std::uint32_t>(i) < per_thread && p < size) {
        const K key = src[p];
        const std::uint32_t to =
            s.count[warp][digit_of(key)] + ((rank[i / 2] >> (16 * (i % 2))) & 0xffffU);
        dst[to] = key;
        if constexpr (values_twice) {
          s.values[from ^ 1][to] = s.values[from][p];
        } else if constexpr (has_values_v<V>) {
          s.values[0][to] = value[i];
        }
      }
    }
    __syncthreads();
  }

  /// Loads the job into keys[0] (and values[0]); returns bit_width(max - min) and sets s.min.
  __device__ __forceinline__ int load(const K* keys_in, const V* values_in, std::uint64_t begin,
                                      std::uint32_t size)
  {
    K lo = static_cast<K>(~K{0});
    K hi = 0;
    for (std::uint32_t p = threadIdx.x; p < size; p += Threads) {
      const K key = keys_in[begin + p];
      s.keys[0][p] = key;
      if constexpr (has_values_v<V>) s.values[0][p] = values_in[begin + p];
      lo = key < lo ? key : lo;
      hi = key > hi ? key : hi;
    }
    const K block_lo = reduce(s.u.reduce).Reduce(lo, [](K x, K y) { return x < y ? x : y; });
    __syncthreads();
    const K block_hi = reduce(s.u.reduce).Reduce(hi, [](K x, K y) { return x > y ? x : y; });
    if (threadIdx.x == 0) {
      s.min = block_lo;
      s.max = block_hi;
    }
    __syncthreads();
    const K range = static_cast<K>(s.max - s.min);
    if (range == 0) return 0;
    if constexpr (sizeof(K) == 4) {
      return 32 - __clz(static_cast<int>(range));
    } else {
      return 64 - __clzll(static_cast<long long>(range));
    }
  }

  /// The top pass: keys[0] to keys[1] by digit (key - base) >> shift, ranked by shared atomics
  /// on 16-bit counters, so the order within a digit is arbitrary; index[] records each key's
  /// input position, which the runs then sort by, so the result is deterministic.
  __device__ __forceinline__ void top_pass(std::uint32_t size, K base, int shift)
  {
    constexpr int words = top_words / Threads;
    for (int i = threadIdx.x; i < top_words; i += Threads) s.top_count[i] = 0;
    __syncthreads();
    auto digit = [&](K key) {
      return static_cast<std::uint32_t>(static_cast<K>(key - base) >> shift);
    };
    std::uint32_t rank[(Items + 1) / 2] = {};  // two 16-bit ranks a register
#pragma unroll
    for (int i = 0; i < Items; ++i) {
      const std::uint32_t p = static_cast<std::uint32_t>(i * Threads) + threadIdx.x;
      if (p < size) {
        const std::uint32_t d = digit(s.keys[0][p]);
        const std::uint32_t half = 16 * (d % 2);
        const std::uint32_t old = atomicAdd(&s.top_count[d / 2], 1U << half);
        rank[i / 2] |= ((old >> half) & 0xffffU) << (16 * (i % 2));
      }
    }
    __syncthreads();
    std::uint32_t sum = 0;
#pragma unroll
    for (int j = 0; j < words; ++j) {
      const std::uint32_t w = s.top_count[threadIdx.x * words + j];
      sum += (w & 0xffffU) + (w >> 16);
    }
    std::uint32_t prefix = 0;
    block_scan(s.u.scan).ExclusiveSum(sum, prefix);
#pragma unroll
    for (int j = 0; j < words; ++j) {
      const std::uint32_t w = s.top_count[threadIdx.x * words + j];
      const std::uint32_t low = prefix;
      const std::uint32_t high = prefix + (w & 0xffffU);
      prefix = high + (w >> 16);
      s.top_count[threadIdx.x * words + j] = low | high << 16;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < Items; ++i) {
      const std::uint32_t p = static_cast<std::uint32_t>(i * Threads) + threadIdx.x;
      if (p < size) {
        const K key = s.keys[0][p];
        const std::uint32_t d = digit(key);
        const std::uint32_t to = ((s.top_count[d / 2] >> (16 * (d % 2))) & 0xffffU) +
                                 ((rank[i / 2] >> (16 * (i % 2))) & 0xffffU);
        s.keys[1][to] = key;
        s.index[to] = static_cast<std::uint16_t>(p);
      }
    }
    __syncthreads();
  }

  /// Sorts each run of keys[1] whose keys agree above bit `shift` (of key - base) by (key, input
  /// position) with one thread's insertion sort; false (nothing changed) if a run is above
  /// run_max.
  __device__ __forceinline__ bool finish_runs(std::uint32_t size, K base, int shift)
  {
    K* keys = s.keys[1];
    std::uint16_t* index = s.index;
    auto prefix = [&](std::uint32_t p) { return static_cast<K>(keys[p] - base) >> shift; };
    // Runs are found before any moves, so that no thread reads a run another thread sorts.
    bool too_long = false;
    for (std::uint32_t p = threadIdx.x; p < size; p += Threads) {
      const K here = prefix(p);
      std::uint32_t end = p;
      if (p == 0 || prefix(p - 1) != here) {  // the first of its run
        end = p + 1;
        while (end < size && end - p <= run_max && prefix(end) == here) ++end;
      }
      too_long = too_long || end - p > run_max;
      s.run_length[p] = static_cast<std::uint16_t>(end - p);
    }
    if (__syncthreads_or(too_long) != 0) return false;
    for (std::uint32_t p = threadIdx.x; p < size; p += Threads) {
      const std::uint32_t end = p + s.run_length[p];
      for (std::uint32_t i = p + 1; i < end; ++i) {
        const K key = keys[i];
        const std::uint16_t at = index[i];
        std::uint32_t j = i;
        for (; j > p && (keys[j - 1] > key || (keys[j - 1] == key && index[j - 1] > at)); --j) {
          keys[j] = keys[j - 1];
          index[j] = index[j - 1];
        }
        keys[j] = key;
        index[j] = at;
      }
    }
    __syncthreads();
    return true;
  }

  /// LSD passes over all `bits` from keys[from]; returns where the result is.
  __device__ __forceinline__ int lsd_sort(int from, std::uint32_t size, K base, int bits)
  {
    for (int shift = 0; shift < bits; shift += digit_bits) {
      pass(from, size, base, shift);
      from ^= 1;
    }
    return from;
  }

  __device__ __forceinline__ void run(const K* keys_in, const V* values_in, K* keys_out,
                                      V* values_out, std::uint64_t begin, std::uint32_t size)
  {
    const int bits = load(keys_in, values_in, begin, size);
    if (bits == 0 && keys_in == keys_out) return;  // equal keys, already in place
    const K base = s.min;
    if (bits > 0) {
      // the top top_bits of the bits that differ; where no more differ, each digit holds equal
      // keys, which only pairs need ordered (by input position)
      const int shift = bits > top_bits ? bits - top_bits : 0;
      top_pass(size, base, shift);
      if ((shift == 0 && !has_values_v<V>) || finish_runs(size, base, shift)) {
        for (std::uint32_t p = threadIdx.x; p < size; p += Threads) {
          keys_out[begin + p] = s.keys[1][p];
          if constexpr (has_values_v<V>) values_out[begin + p] = s.values[0][s.index[p]];
        }
        return;
      }
      // a skewed job (far outliers, or many keys agreeing in their top bits that no equality
      // bucket caught): the input is still in device memory, so sort it again by LSD passes
      load(keys_in, values_in, begin, size);
    }
    const int from = lsd_sort(0, size, base, bits);
    const int value_from = values_twice ? from : 0;
    for (std::uint32_t p = threadIdx.x; p < size; p += Threads) {
      keys_out[begin + p] = s.keys[from][p];
      if constexpr (has_values_v<V>) values_out[begin + p] = s.values[value_from][p];
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
