// Thin kernels of the sample sort: each loops one agent (agents.cuh) over a device-side work list
// with a grid-stride loop, so the host never needs to know how much work a level found. The
// dispatch is in core/cuda/sample_sort.cu. Only for translation units compiled by nvcc.
#pragma once

#include "core/cuda/sample_sort/agents.cuh"

#include <cstdint>

namespace gpusort::cuda::detail::sample {

template <typename K, typename V>
using active_policy = typename policy_hub<K, V>::active;

inline constexpr int list_threads = 256;  ///< of the kernels over segments, tiles and lists

/// A map of raw keys (see work) as a kernel instance applies it: instances that read or write
/// no raw keys get a zero map, which folds away (applied as runtime zero maps, the maps cost
/// 64-bit keys 5% of a 2^26 sort on an H100).
template <bool Mapped, typename K>
__device__ __forceinline__ key_map<K> map_if(const key_map<K>& m)
{
  return Mapped ? m : key_map<K>{};
}

/// Elements before a segment that its first tile spans: back to the vector boundary.
template <typename K>
__host__ __device__ __forceinline__ std::uint64_t lead_of(std::uint64_t begin)
{
  return begin % key_vector<K>::size;
}

/// Tiles of the segment [begin, begin + size). They are cut at multiples of tile_items from the
/// vector boundary (key_vector) at or below its start, so that all but its first and last
/// tile start at a boundary and can be read as vectors. (Cut from the segment's start, three in
/// four segments of u32 keys past level 0 had no tile on a boundary: level 1's histogram took
/// 277 us for 2^26 keys on an H100 against level 0's 230.)
template <typename P, typename K>
__host__ __device__ __forceinline__ std::uint64_t tiles_of(std::uint64_t begin,
                                                           std::uint64_t size)
{
  return (lead_of<K>(begin) + size + P::tile_items - 1) / P::tile_items;
}

/// Tile t of a level: its segment (and that segment's index), its place within the segment, and
/// the elements it covers (the first and the last tile of a segment may be short).
struct tile_view {
  std::uint32_t index;
  segment seg;
  std::uint64_t in_seg;
  std::uint64_t begin;
  std::uint32_t size;
};

template <typename P, typename K>
__device__ __forceinline__ tile_view tile_at(const segment* segs, const std::uint32_t* tile_map,
                                             std::uint32_t t)
{
  tile_view tv;
  tv.index = tile_map[t];
  tv.seg = segs[tv.index];
  tv.in_seg = t - tv.seg.tile_base;
  const std::uint64_t first = tv.seg.begin - lead_of<K>(tv.seg.begin) + tv.in_seg * P::tile_items;
  const std::uint64_t last = first + P::tile_items;
  const std::uint64_t end = tv.seg.begin + tv.seg.size;
  tv.begin = first > tv.seg.begin ? first : tv.seg.begin;
  tv.size = static_cast<std::uint32_t>((last < end ? last : end) - tv.begin);
  return tv;
}

/// Bucket counters of a segment: 2k for each of its tiles.
template <typename P, typename K>
__host__ __device__ __forceinline__ std::uint64_t counters_of(std::uint64_t begin,
                                                              std::uint64_t size)
{
  return tiles_of<P, K>(begin, size) * (std::uint64_t{2} << depth_for<P>(size));
}

/// Zeroes the work lists' counters and sets up level 0: the whole input is one segment (its
/// tiles all map to it), or one job when it fits a block. (The counters' memset and level 0's
/// tile map were launches of their own.)
template <typename K, typename V>
__global__ void __launch_bounds__(list_threads) init_kernel(work<K, V> w)
{
  using P = active_policy<K, V>;
  const bool levels = w.n > static_cast<std::uint64_t>(P::bucket_capacity);
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    *w.count = counters{};
    if (levels) {
      w.segments[0][0] = segment{0, w.n, 0, 0};
      w.count->levels[0] = level_count{1, static_cast<std::uint32_t>(tiles_of<P, K>(0, w.n)),
                                       counters_of<P, K>(0, w.n)};
    } else {
      const int cls = w.n > static_cast<std::uint64_t>(P::small_capacity) ? 0 : 1;
      w.jobs[cls][0] = job{0, static_cast<std::uint32_t>(w.n), 1};
      w.count->jobs[cls] = 1;
    }
  }
  if (!levels) return;
  const std::uint64_t tiles = tiles_of<P, K>(0, w.n);
  for (std::uint64_t t = std::uint64_t{blockIdx.x} * list_threads + threadIdx.x; t < tiles;
       t += std::uint64_t{gridDim.x} * list_threads)
    w.tile_map[t] = 0;
}

/// A sort of raw keys without levels (n within the capacity, or levels forced to none): the
/// input to ordered bits in place, for the bucket sort or the fallback, which read ordered bits
/// only (so that the bucket sort of the levels carries no map of its input).
template <typename K, typename V>
__global__ void map_input_kernel(work<K, V> w)
{
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  for (std::uint64_t i = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < w.n;
       i += stride)
    w.keys[i] = w.to_ordered(w.keys[i]);
}

/// Tile -> segment map of level w.level (> 0), one block per segment; and where CUB scans the
/// level's counters over the host's bound (w.scan_bound), the counters past the level's own
/// zeroed: the histogram pass writes only those of its segments, and CUB's scan read the rest
/// before anything wrote them (compute-sanitizer initcheck). Their offsets are never used, so
/// zeros are as good as any; the gap is the bound's slack, most of it where many buckets
/// finished a level early, and at most the bytes CUB's scan reads anyway.
template <typename K, typename V>
__global__ void tile_map_kernel(work<K, V> w)
{
  using P = active_policy<K, V>;
  const segment* segs = w.segments[w.level % 2];
  const std::uint32_t count = w.count->levels[w.level].segments;
  for (std::uint32_t s = blockIdx.x; s < count; s += gridDim.x) {
    const segment seg = segs[s];
    const std::uint64_t tiles = tiles_of<P, K>(seg.begin, seg.size);
    for (std::uint64_t t = threadIdx.x; t < tiles; t += blockDim.x)
      w.tile_map[seg.tile_base + t] = s;
  }
  const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
  for (std::uint64_t i = w.count->levels[w.level].counters +
                         std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x;
       i < w.scan_bound; i += stride)
    w.bucket_counts[i] = 0;
}

/// Mapped: level 0 of a sort of raw keys (likewise the histogram and the scatter).
template <typename K, typename V, bool Mapped>
__global__ void __launch_bounds__(active_policy<K, V>::sample_threads)
    sample_kernel(work<K, V> w)
{
  using P = active_policy<K, V>;
  using agent = sample_agent<P, K>;
  __shared__ typename agent::storage storage;
  const K* keys = w.level % 2 == 0 ? w.keys : w.keys_alt;
  const segment* segs = w.segments[w.level % 2];
  auto* out = static_cast<splitters<K, P::buckets>*>(w.splitter_data);
  const std::uint32_t count = w.count->levels[w.level].segments;
  for (std::uint32_t s = blockIdx.x; s < count; s += gridDim.x) {
    agent{storage}.run(keys, segs[s], w.seed, map_if<Mapped>(w.to_ordered), w.float_keys != 0,
                       out[s]);
    __syncthreads();
  }
}

// four blocks per SM: 32 registers a thread (ptxas took 40 for the cell compares, three blocks)
template <typename K, typename V, bool Mapped>
__global__ void __launch_bounds__(active_policy<K, V>::dist_threads, 4)
    histogram_kernel(work<K, V> w)
{
  using P = active_policy<K, V>;
  using agent = histogram_agent<P, K>;
  __shared__ typename agent::storage storage;
  const K* keys = w.level % 2 == 0 ? w.keys : w.keys_alt;
  const segment* segs = w.segments[w.level % 2];
  const auto* split = static_cast<const splitters<K, P::buckets>*>(w.splitter_data);
  const std::uint32_t tiles = w.count->levels[w.level].tiles;
  // The grid strides over the tiles so that the blocks at work hold neighbouring tiles: their
  // counters' stores (and the scatter's runs in each bucket) meet in L2. (Each block a
  // contiguous share of the tiles, keeping its segment's splitters loaded from tile to tile,
  // lost 6% at 2^26 u32 keys and 35% at 2^29 on an H100.)
  for (std::uint32_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const tile_view tv = tile_at<P, K>(segs, w.tile_map, t);
    storage.split.load(split[tv.index]);
    __syncthreads();
    agent{storage}.run(keys, map_if<Mapped>(w.to_ordered), tv.begin, tv.size,
                       w.bucket_counts + tv.seg.count_base + tv.in_seg,
                       tiles_of<P, K>(tv.seg.begin, tv.seg.size), w.bucket_ids + tv.begin);
    __syncthreads();
  }
}

// two blocks per SM: 64 registers a thread (ptxas took 128 without the bound, one block per SM)
template <typename K, typename V, bool Mapped>
__global__ void __launch_bounds__(active_policy<K, V>::dist_threads, 2)
    scatter_kernel(work<K, V> w)
{
  using P = active_policy<K, V>;
  using agent = scatter_agent<P, K, V>;
  extern __shared__ __align__(16) unsigned char dynamic_smem[];
  auto& storage = *reinterpret_cast<typename agent::storage*>(dynamic_smem);
  const bool from_primary = w.level % 2 == 0;
  const K* keys_in = from_primary ? w.keys : w.keys_alt;
  K* keys_out = from_primary ? w.keys_alt : w.keys;
  const V* values_in = from_primary ? w.values : w.values_alt;
  V* values_out = from_primary ? w.values_alt : w.values;
  const segment* segs = w.segments[w.level % 2];
  const auto* split = static_cast<const splitters<K, P::buckets>*>(w.splitter_data);
  const std::uint32_t tiles = w.count->levels[w.level].tiles;
  for (std::uint32_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const tile_view tv = tile_at<P, K>(segs, w.tile_map, t);
    const std::uint64_t first = tv.seg.count_base;
    storage.split.load(split[tv.index]);
    __syncthreads();
    agent{storage}.run(keys_in, map_if<Mapped>(w.to_ordered), values_in, keys_out, values_out,
                       tv.begin, tv.size,
                       w.bucket_counts + first + tv.in_seg, w.bucket_offsets + first + tv.in_seg,
                       tiles_of<P, K>(tv.seg.begin, tv.seg.size),
                       w.bucket_offsets[first], tv.seg.begin, w.bucket_ids + tv.begin);
    __syncthreads();
  }
}

// ---- the counted scan: over the counters a level has, as device memory counts them ----
//
// CUB's scan takes its length from the host, which knows only a bound: every segment split into
// `buckets`. The spare level (see predicted_levels in sample_sort.cu) nearly always finds no
// tiles, and over that bound its scan took 0.25 ms at 2^29 u32 keys on an H100 (34 us at 2^26);
// level 1 of 2^26 keys splits its segments into 64 buckets, and CUB scanned four times the
// counters it had (24 us a level). These three kernels scan the level's counters as
// level_count::counters has them: each block sums its share of whole chunks, one block scans
// those sums, each block scans its share from its prefix. With no tiles, three launches that
// find nothing to do.

inline constexpr int counted_threads = 512;
inline constexpr int counted_items = 8;
inline constexpr int counted_chunk = counted_threads * counted_items;
/// most blocks of the counted scan: one sum per thread of the prefix kernel
inline constexpr unsigned counted_blocks_max = counted_threads;

/// This block's share [begin, end) of the level's live counters.
template <typename K, typename V>
__device__ __forceinline__ void counted_share(const work<K, V>& w, std::uint64_t& begin,
                                              std::uint64_t& end)
{
  const std::uint64_t items = w.count->levels[w.level].counters;
  const std::uint64_t chunks = (items + counted_chunk - 1) / counted_chunk;
  const std::uint64_t per_block = (chunks + gridDim.x - 1) / gridDim.x * counted_chunk;
  begin = min(items, blockIdx.x * per_block);
  end = min(items, begin + per_block);
}

template <typename K, typename V>
__global__ void __launch_bounds__(counted_threads) counted_sum_kernel(work<K, V> w,
                                                                      std::uint64_t* block_sums)
{
  using reduce = cub::BlockReduce<std::uint64_t, counted_threads>;
  __shared__ typename reduce::TempStorage temp;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  counted_share(w, begin, end);
  std::uint64_t sum = 0;
  for (std::uint64_t i = begin + threadIdx.x; i < end; i += counted_threads)
    sum += w.bucket_counts[i];
  const std::uint64_t total = reduce(temp).Sum(sum);
  if (threadIdx.x == 0) block_sums[blockIdx.x] = total;
}

/// One block: the exclusive scan of the `blocks` sums, in place.
template <typename K, typename V>
__global__ void __launch_bounds__(counted_threads) counted_prefix_kernel(std::uint64_t* block_sums,
                                                                         unsigned blocks)
{
  using scan = cub::BlockScan<std::uint64_t, counted_threads>;
  __shared__ typename scan::TempStorage temp;
  const std::uint64_t sum = threadIdx.x < blocks ? block_sums[threadIdx.x] : 0;
  std::uint64_t prefix = 0;
  scan(temp).ExclusiveSum(sum, prefix);
  if (threadIdx.x < blocks) block_sums[threadIdx.x] = prefix;
}

/// Each block scans its share from its prefix. Counts and offsets pass through shared memory
/// (warp transposes), so that each warp reads and writes whole consecutive lines rather than a
/// thread's items 32 or 64 bytes from its neighbour's.
template <typename K, typename V>
__global__ void __launch_bounds__(counted_threads)
    counted_scan_kernel(work<K, V> w, const std::uint64_t* prefixes)
{
  using load = cub::BlockLoad<std::uint32_t, counted_threads, counted_items,
                              cub::BLOCK_LOAD_WARP_TRANSPOSE>;
  using scan = cub::BlockScan<std::uint64_t, counted_threads>;
  using store = cub::BlockStore<std::uint64_t, counted_threads, counted_items,
                                cub::BLOCK_STORE_WARP_TRANSPOSE>;
  __shared__ union {
    typename load::TempStorage load;
    typename scan::TempStorage scan;
    typename store::TempStorage store;
  } temp;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  counted_share(w, begin, end);
  std::uint64_t prefix = prefixes[blockIdx.x];
  for (std::uint64_t chunk = begin; chunk < end; chunk += counted_chunk) {
    const int valid = static_cast<int>(min(end - chunk, std::uint64_t{counted_chunk}));
    std::uint32_t counts[counted_items];
    load(temp.load).Load(w.bucket_counts + chunk, counts, valid, 0U);
    __syncthreads();
    std::uint64_t items[counted_items];
#pragma unroll
    for (int j = 0; j < counted_items; ++j) items[j] = counts[j];
    std::uint64_t total = 0;
    scan(temp.scan).ExclusiveSum(items, items, total);
    __syncthreads();
#pragma unroll
    for (int j = 0; j < counted_items; ++j) items[j] += prefix;
    store(temp.store).Store(w.bucket_offsets + chunk, items, valid);
    prefix += total;
    __syncthreads();  // the storage is used again
  }
}

enum bucket_kind : std::uint8_t { kind_merge = 0, kind_own = 1, kind_next = 2, kind_done = 3 };

/// After the scatter: sizes of the buckets of each segment from the scanned counters, and what
/// becomes of them. One block per segment.
template <typename K, typename V>
__global__ void __launch_bounds__(list_threads) classify_kernel(work<K, V> w)
{
  using P = active_policy<K, V>;
  constexpr std::uint64_t capacity = P::bucket_capacity;
  constexpr std::uint64_t half = capacity / 2;
  __shared__ std::uint64_t start[P::counters + 1];
  __shared__ std::uint8_t kind[P::counters];
  // A segment's jobs of each class take their places in the job list with one atomic: one a job
  // on the list's counter, from every block at once, took level 1's classify of 2^26 u32 keys
  // (some 8 Ki jobs) 11.5 us against level 0's 5.4 on an H100.
  __shared__ std::uint32_t jobs_here[2];
  __shared__ std::uint32_t jobs_base[2];
  constexpr int per_thread = (P::counters + list_threads - 1) / list_threads;
  constexpr std::uint32_t none_found = 0xffffffffU;
  const segment* segs = w.segments[w.level % 2];
  segment* next = w.segments[(w.level + 1) % 2];
  level_count* next_count = &w.count->levels[w.level + 1];
  const auto* split = static_cast<const splitters<K, P::buckets>*>(w.splitter_data);
  // this level's output: the alt buffers after even levels, the primary ones after odd levels
  const std::uint32_t out_primary = w.level % 2;
  const std::uint32_t count = w.count->levels[w.level].segments;
  for (std::uint32_t s = blockIdx.x; s < count; s += gridDim.x) {
    const segment seg = segs[s];
    const std::uint64_t tiles = tiles_of<P, K>(seg.begin, seg.size);
    const std::uint64_t first = seg.count_base;
    const int nb = 2 << split[s].depth;
    const std::uint64_t seg_first = w.bucket_offsets[first];
    for (int b = threadIdx.x; b <= nb; b += list_threads)
      start[b] = b == nb ? seg.size : w.bucket_offsets[first + b * tiles] - seg_first;
    __syncthreads();
    for (int b = threadIdx.x; b < nb; b += list_threads) {
      const std::uint64_t size = start[b + 1] - start[b];
      const bool equal = (b & 1) != 0;
      std::uint8_t k = kind_merge;
      if (size > capacity) {
        k = equal ? kind_done : kind_next;
      } else if (size > half) {
        k = equal ? kind_done : kind_own;
      }
      kind[b] = k;
    }
    __syncthreads();
    if (threadIdx.x < 2) jobs_here[threadIdx.x] = 0;
    __syncthreads();
    job found[per_thread];
    std::uint32_t found_at[per_thread];  // class << 31 | place among the block's jobs of it
#pragma unroll
    for (int j = 0; j < per_thread; ++j) {
      const int b = j * list_threads + static_cast<int>(threadIdx.x);
      found_at[j] = none_found;
      if (b >= nb) continue;
      const std::uint64_t size = start[b + 1] - start[b];
      const std::uint64_t begin = seg.begin + start[b];
      if (kind[b] == kind_next) {
        const std::uint32_t at = atomicAdd(&next_count->segments, 1U);
        const auto tile_base = atomicAdd(&next_count->tiles,
                                         static_cast<std::uint32_t>(tiles_of<P, K>(begin, size)));
        const auto count_base = atomicAdd(
            &next_count->counters, static_cast<unsigned long long>(counters_of<P, K>(begin, size)));
        next[at] = segment{begin, size, tile_base, count_base};
      } else if (kind[b] == kind_done) {
        // in the primary buffer: copied to the result; in the result already: mapped back to
        // raw keys there, unless the keys are ordered bits
        if (out_primary != 0 || !is_identity(w.from_ordered)) {
          const std::uint64_t chunks = (size + copy_chunk - 1) / copy_chunk;
          const std::uint32_t at = atomicAdd(&w.count->copies, static_cast<std::uint32_t>(chunks));
          for (std::uint64_t c = 0; c < chunks; ++c) {
            const std::uint64_t from = c * copy_chunk;
            w.copies[at + c] = copy_range{
                begin + from, size - from < copy_chunk ? size - from : copy_chunk, out_primary};
          }
        }
      } else {
        // A merge group: consecutive small buckets whose starts share one window of half the
        // capacity, so that the group holds at most the capacity; one job for all of them.
        std::uint64_t job_size = size;
        bool head = true;
        if (kind[b] == kind_merge) {
          const std::uint64_t window = start[b] / half;
          head = b == 0 || kind[b - 1] != kind_merge || start[b - 1] / half != window;
          int e = b + 1;
          while (e < nb && kind[e] == kind_merge && start[e] / half == window) ++e;
          job_size = start[e] - start[b];
        }
        if (head && job_size > 0) {
          const std::uint32_t cls =
              job_size > static_cast<std::uint64_t>(P::small_capacity) ? 0U : 1U;
          found[j] = job{begin, static_cast<std::uint32_t>(job_size), out_primary};
          found_at[j] = cls << 31 | atomicAdd(&jobs_here[cls], 1U);
        }
      }
    }
    __syncthreads();
    if (threadIdx.x < 2 && jobs_here[threadIdx.x] != 0)
      jobs_base[threadIdx.x] = atomicAdd(&w.count->jobs[threadIdx.x], jobs_here[threadIdx.x]);
    __syncthreads();
#pragma unroll
    for (int j = 0; j < per_thread; ++j) {
      if (found_at[j] == none_found) continue;
      const std::uint32_t cls = found_at[j] >> 31;
      w.jobs[cls][jobs_base[cls] + (found_at[j] & 0x7fffffffU)] = found[j];
    }
    __syncthreads();
  }
}

template <typename K, typename V, int Class>
inline constexpr int sort_threads_v = Class == 0 ? active_policy<K, V>::sort_threads
                                                 : active_policy<K, V>::small_sort_threads;

/// Sorts the jobs of one size class into the alt buffers, one block per job. Within 64
/// registers a thread, so that blocks of up to 512 threads fit two to an SM. Mapped: a sort of
/// raw keys, whose result goes back to raw keys.
template <typename K, typename V, int Class, bool Mapped>
__global__ void __launch_bounds__(sort_threads_v<K, V, Class>,
                                  sort_threads_v<K, V, Class> <= 512
                                      ? 1024 / sort_threads_v<K, V, Class> : 1)
    bucket_sort_kernel(work<K, V> w)
{
  using P = active_policy<K, V>;
  using agent = std::conditional_t<
      Class == 0, bucket_sort_agent<K, V, P::sort_threads, P::sort_items>,
      bucket_sort_agent<K, V, P::small_sort_threads, P::small_sort_items>>;
  extern __shared__ __align__(16) unsigned char dynamic_smem[];
  auto& storage = *reinterpret_cast<typename agent::storage*>(dynamic_smem);
  const std::uint32_t count = w.count->jobs[Class];
  // the next job's descriptor loads while this one sorts (ncu: blocks waited on it at the
  // start of every job)
  job next = blockIdx.x < count ? w.jobs[Class][blockIdx.x] : job{};
  for (std::uint32_t j = blockIdx.x; j < count; j += gridDim.x) {
    const job jb = next;
    if (j + gridDim.x < count) next = w.jobs[Class][j + gridDim.x];
    const K* keys_in = jb.in_primary != 0 ? w.keys : w.keys_alt;
    const V* values_in = jb.in_primary != 0 ? w.values : w.values_alt;
    agent{storage}.run(keys_in, values_in, w.keys_alt, map_if<Mapped>(w.from_ordered), w.values_alt,
                       jb.begin, jb.size);
    __syncthreads();
  }
}

/// One block puts the finished range [begin, begin + size) into the result: from the primary
/// buffers to the alt buffers, or mapped back to raw keys where it lies there already. Each
/// thread loads `unroll` keys before it stores any, so that a block of finish_threads keeps as
/// many loads in flight as the four blocks of 256 threads an SM that copied before.
template <typename K, typename V>
__device__ __forceinline__ void finish_range(const work<K, V>& w, std::uint64_t begin,
                                             std::uint64_t size, bool in_primary)
{
  constexpr int unroll = 4;
  using value_t = std::conditional_t<has_values_v<V>, V, char>;
  const K* from = in_primary ? w.keys : w.keys_alt;
  const bool values = has_values_v<V> && in_primary;
  const std::uint64_t end = begin + size;
  const std::uint64_t step = blockDim.x;
  for (std::uint64_t i = begin + threadIdx.x; i < end; i += unroll * step) {
    K k[unroll];
    value_t v[unroll];
#pragma unroll
    for (int j = 0; j < unroll; ++j) {
      const std::uint64_t at = i + j * step;
      if (at < end) {
        k[j] = from[at];
        if constexpr (has_values_v<V>) {
          if (values) v[j] = w.values[at];
        }
      }
    }
#pragma unroll
    for (int j = 0; j < unroll; ++j) {
      const std::uint64_t at = i + j * step;
      if (at < end) {
        w.keys_alt[at] = w.from_ordered(k[j]);
        if constexpr (has_values_v<V>) {
          if (values) w.values_alt[at] = v[j];
        }
      }
    }
  }
}

inline constexpr int finish_threads = 1024;

/// The work after the levels that is not bucket sorting, in one launch (two launches cost an
/// empty launch more, and most sorts have neither): the finished ranges (equal keys) the levels
/// left, one block per range, then the segments still above the capacity after the last level
/// (w.level = the level count), sorted in place by one block each and moved to the alt buffers
/// where they are not there already.
template <typename K, typename V>
__global__ void __launch_bounds__(finish_threads) finish_kernel(work<K, V> w)
{
  const std::uint32_t copies = w.count->copies;
  for (std::uint32_t c = blockIdx.x; c < copies; c += gridDim.x) {
    const copy_range r = w.copies[c];
    finish_range(w, r.begin, r.size, r.in_primary != 0);
  }
  const segment* segs = w.segments[w.level % 2];
  const std::uint32_t count = w.count->levels[w.level].segments;
  const bool in_primary = w.level % 2 == 0;
  for (std::uint32_t s = blockIdx.x; s < count; s += gridDim.x) {
    const segment seg = segs[s];
    K* keys = (in_primary ? w.keys : w.keys_alt) + seg.begin;
    V* values = has_values_v<V> ? (in_primary ? w.values : w.values_alt) + seg.begin : nullptr;
    bitonic_segment<K, V>(keys, values, seg.size);
    if (in_primary || !is_identity(w.from_ordered))
      finish_range(w, seg.begin, seg.size, in_primary);
    __syncthreads();
  }
}

}  // namespace gpusort::cuda::detail::sample
