// Dispatch of the sample sort (CUB's "dispatch" layer): validates, lays the scratch out, picks the
// policy of the binary the device runs, and launches the levels and the bucket sorts on the
// caller's stream. Never allocates, never synchronizes.
#include "core/checks.hpp"
#include "core/cuda/sample_sort.cuh"
#include "core/cuda/sample_sort/kernels.cuh"
#include "core/keys.hpp"

#include <gpusort/error.hpp>

#include <cub/device/device_scan.cuh>

#include <cuda/std/functional>

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

namespace gpusort::cuda {
namespace {

namespace ss = detail::sample;

constexpr std::size_t scratch_alignment = 256;

constexpr std::size_t align_up(std::size_t bytes)
{
  return (bytes + scratch_alignment - 1) / scratch_alignment * scratch_alignment;
}

/// Where everything lives in the caller's scratch, and the bounds the lists are sized by.
struct scratch_layout {
  int levels{};                 ///< distribution levels launched (predicted + one spare)
  std::uint64_t segment_cap{};  ///< segments of one level: each above the capacity
  std::uint64_t tile_cap{};     ///< tiles of one level
  std::uint64_t count_cap{};    ///< bucket counters of one level
  std::uint64_t job_cap{};      ///< jobs of one size class over all levels
  std::uint64_t copy_cap{};
  std::size_t counters{}, segments[2]{}, tile_map{}, splitters{}, counts{}, offsets{}, jobs[2]{},
      copies{}, scan_temp{}, scan_temp_bytes{}, ids{}, total{};
};

std::size_t scan_temp_bytes(std::uint64_t items)
{
  std::size_t bytes = 0;
  GPUSORT_CUDA_TRY(cub::DeviceScan::ExclusiveScan(
      nullptr, bytes, static_cast<const std::uint32_t*>(nullptr),
      static_cast<std::uint64_t*>(nullptr), ::cuda::std::plus<std::uint64_t>{}, std::uint64_t{0},
      items));
  return bytes;
}

/// Levels that a segment of average size goes through (what the bulk of the data does; also the
/// benchmark's bytes model).
template <typename P>
int expected_levels(std::uint64_t n)
{
  int levels = 0;
  for (std::uint64_t size = n; size > static_cast<std::uint64_t>(P::bucket_capacity) &&
                               levels < ss::max_levels;
       ++levels)
    size >>= ss::depth_for<P>(size);
  return levels;
}

/// log2 k of an average segment at `level` (what depth_for gives the bulk of the data).
template <typename P>
int average_depth(std::uint64_t n, int level)
{
  std::uint64_t size = n;
  for (int i = 0; i < level; ++i) size >>= ss::depth_for<P>(size);
  return ss::depth_for<P>(size);
}

/// Levels launched: those of an average segment, and one spare level for the few buckets that
/// the spread of the sampling leaves above the capacity (depth_for counts levels to 3/4 of it
/// and splits towards half); a bucket still above it after that takes the fallback. (Levels
/// for 1.5 times the average bucket added a second spare level at 2^29: scans over the bound on
/// tiles, 0.3 ms, 2% of a u32 sort.)
template <typename P>
int predicted_levels(std::uint64_t n)
{
  const int levels = expected_levels<P>(n);
  return levels == 0 ? 0 : std::min(levels + 1, ss::max_levels);
}

/// Segments of level `level`: one at level 0, at most k times the previous level's, at most
/// segment_cap.
template <typename P>
std::uint64_t segments_bound(const scratch_layout& l, int level)
{
  std::uint64_t s = 1;
  for (int i = 0; i < level && s < l.segment_cap; ++i) s *= P::buckets;
  return std::min(s, l.segment_cap);
}

/// Tiles of `segments` segments of n elements in all: each has at most one tile more than its
/// elements and the lead before its first vector boundary fill (see ss::tiles_of).
template <typename P, typename K>
std::uint64_t tiles_for(std::uint64_t n, std::uint64_t segments)
{
  constexpr std::uint64_t lead = ss::key_vector<K>::size - 1;
  return (n + lead * segments + P::tile_items - 1) / P::tile_items + segments;
}

template <typename P, typename K>
std::uint64_t tiles_bound(const scratch_layout& l, std::uint64_t n, int level)
{
  return tiles_for<P, K>(n, segments_bound<P>(l, level));
}

template <typename P, typename K>
scratch_layout make_layout(std::uint64_t n, int forced_levels = -1)
{
  constexpr std::uint64_t capacity = P::bucket_capacity;
  scratch_layout l;
  l.levels = predicted_levels<P>(n);
  // forcing fewer levels keeps the lists within what the size query reserved
  if (forced_levels >= 0) l.levels = std::min(l.levels, forced_levels);
  l.segment_cap = n / (capacity + 1) + 1;
  l.tile_cap = tiles_for<P, K>(n, l.segment_cap);
  l.count_cap = l.tile_cap * P::counters;
  // A segment of s elements yields at most 6 s / M + 3 jobs (see classify_kernel): jobs above
  // M/2, runs of small buckets between them and windows of M/2 within a run.
  l.job_cap = static_cast<std::uint64_t>(l.levels) * (6 * n / capacity + 3 * l.segment_cap) + 1;
  l.copy_cap = n / ss::copy_chunk + 2 * n / capacity + 1;
  // CUB's scan, or the counted scan's block sums
  l.scan_temp_bytes =
      std::max(scan_temp_bytes(l.count_cap), ss::counted_blocks_max * sizeof(std::uint64_t));

  std::size_t at = 0;
  auto take = [&](std::size_t bytes) {
    const std::size_t here = at;
    at += align_up(bytes);
    return here;
  };
  l.counters = take(sizeof(ss::counters));
  l.segments[0] = take(l.segment_cap * sizeof(ss::segment));
  l.segments[1] = take(l.segment_cap * sizeof(ss::segment));
  l.tile_map = take(l.tile_cap * sizeof(std::uint32_t));
  l.splitters = take(l.segment_cap * sizeof(ss::splitters<K, P::buckets>));
  l.counts = take(l.count_cap * sizeof(std::uint32_t));
  l.offsets = take(l.count_cap * sizeof(std::uint64_t));
  l.jobs[0] = take(l.job_cap * sizeof(ss::job));
  l.jobs[1] = take(l.job_cap * sizeof(ss::job));
  l.copies = take(l.copy_cap * sizeof(ss::copy_range));
  l.scan_temp = take(l.scan_temp_bytes);
  // a byte an element: each key's bucket from the histogram pass to the scatter
  l.ids = take(l.levels > 0 ? n : 0);
  l.total = at;
  return l;
}

/// Blocks of `kernel` that fit the device at once: the persistent grids loop over their lists.
template <typename Kernel>
unsigned resident_blocks(Kernel kernel, int threads, std::size_t smem, int sms)
{
  int per_sm = 0;
  GPUSORT_CUDA_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem));
  return static_cast<unsigned>(std::max(per_sm, 1) * sms);
}

unsigned grid_of(std::uint64_t work, unsigned resident)
{
  return static_cast<unsigned>(std::clamp<std::uint64_t>(work, 1, resident));
}

/// The shared memory of the agents of one policy: the scatter and the two bucket-sort classes
/// take theirs dynamically.
template <typename P, typename K, typename V>
struct smem_of {
  static constexpr std::size_t scatter = sizeof(typename ss::scatter_agent<P, K, V>::storage);
  static constexpr std::size_t large =
      sizeof(typename ss::bucket_sort_agent<K, V, P::sort_threads, P::sort_items>::storage);
  static constexpr std::size_t small = sizeof(
      typename ss::bucket_sort_agent<K, V, P::small_sort_threads, P::small_sort_items>::storage);
};

/// Resident blocks of the kernels that come in two forms: for ordered bits, and for raw keys
/// (Mapped: level 0 reads them, the bucket sorts write them back).
struct form_blocks {
  unsigned sample{}, histogram{}, scatter{}, large{}, small{};
};

/// Launch shapes of one layout on one device: resident blocks of each persistent kernel. Asked
/// once per device and kept, so that a sort costs the runtime no more queries than launches.
struct launch_setup {
  int sms{};
  unsigned list{}, map{}, finish{};
  form_blocks forms[2];  ///< [Mapped]
};

using ss::list_threads;

template <typename P, typename K, typename V, bool Mapped>
form_blocks make_form_setup(int sms)
{
  using smem = smem_of<P, K, V>;
  GPUSORT_CUDA_TRY(cudaFuncSetAttribute(ss::scatter_kernel<K, V, Mapped>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(smem::scatter)));
  GPUSORT_CUDA_TRY(cudaFuncSetAttribute(ss::bucket_sort_kernel<K, V, 0, Mapped>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(smem::large)));
  GPUSORT_CUDA_TRY(cudaFuncSetAttribute(ss::bucket_sort_kernel<K, V, 1, Mapped>,
                                        cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(smem::small)));
  form_blocks b;
  b.sample = resident_blocks(ss::sample_kernel<K, V, Mapped>, P::sample_threads, 0, sms);
  b.histogram = resident_blocks(ss::histogram_kernel<K, V, Mapped>, P::dist_threads, 0, sms);
  b.scatter =
      resident_blocks(ss::scatter_kernel<K, V, Mapped>, P::dist_threads, smem::scatter, sms);
  b.large = resident_blocks(ss::bucket_sort_kernel<K, V, 0, Mapped>, P::sort_threads,
                            smem::large, sms);
  b.small = resident_blocks(ss::bucket_sort_kernel<K, V, 1, Mapped>, P::small_sort_threads,
                            smem::small, sms);
  return b;
}

template <typename P, typename K, typename V>
launch_setup make_setup(int device)
{
  using smem = smem_of<P, K, V>;
  // Hopper's 228 KiB an SM, less 1 KiB the system keeps per block: bucket sorts of 512 threads
  // (pairs) run two blocks an SM (measured: see policy_sm90), and no block takes more than the
  // 227 KiB a block can opt in to (64-bit keys alone: 224 KiB)
  constexpr bool sm90 = std::is_same_v<P, ss::policy_sm90<K, V>>;
  static_assert(!sm90 || P::sort_threads > 512 || 2 * (smem::large + 1024) <= 228 * 1024);
  static_assert(!sm90 || smem::large <= 227 * 1024);
  launch_setup l;
  GPUSORT_CUDA_TRY(cudaDeviceGetAttribute(&l.sms, cudaDevAttrMultiProcessorCount, device));
  l.list = resident_blocks(ss::classify_kernel<K, V>, list_threads, 0, l.sms);
  l.map = resident_blocks(ss::tile_map_kernel<K, V>, list_threads, 0, l.sms);
  l.finish = resident_blocks(ss::finish_kernel<K, V>, ss::finish_threads, 0, l.sms);
  l.forms[0] = make_form_setup<P, K, V, false>(l.sms);
  l.forms[1] = make_form_setup<P, K, V, true>(l.sms);
  return l;
}

/// The setup of the current device for layout (K, V), and whether it runs the sm_90 policy (the
/// binary the runtime picked for the device).
template <typename K, typename V>
std::pair<bool, launch_setup> setup_of_current_device()
{
  static std::mutex mutex;
  static std::map<int, std::pair<bool, launch_setup>> known;
  int device = 0;
  GPUSORT_CUDA_TRY(cudaGetDevice(&device));
  const std::lock_guard lock{mutex};
  const auto it = known.find(device);
  if (it != known.end()) return it->second;
  cudaFuncAttributes attributes{};
  GPUSORT_CUDA_TRY(cudaFuncGetAttributes(&attributes, ss::bucket_sort_kernel<K, V, 0, false>));
  const bool sm90 = attributes.binaryVersion >= 90;
  const launch_setup setup = sm90 ? make_setup<ss::policy_sm90<K, V>, K, V>(device)
                                  : make_setup<ss::policy_sm80<K, V>, K, V>(device);
  return known.emplace(device, std::pair{sm90, setup}).first->second;
}

/// One level's sample, histogram, scan and scatter. The scan: CUB's over `cub_items` counters
/// (all the level can have), or without them the counted scan, over the counters the level has.
template <typename P, typename K, typename V, bool Mapped>
void distribute(const ss::work<K, V>& w, const scratch_layout& l, unsigned char* scratch,
                std::uint64_t segs, std::uint64_t tiles, std::optional<std::uint64_t> cub_items,
                const launch_setup& setup, cudaStream_t stream)
{
  const form_blocks& blocks = setup.forms[Mapped];
  ss::sample_kernel<K, V, Mapped>
      <<<grid_of(segs, blocks.sample), P::sample_threads, 0, stream>>>(w);
  GPUSORT_CHECK_LAUNCH();
  ss::histogram_kernel<K, V, Mapped>
      <<<grid_of(tiles, blocks.histogram), P::dist_threads, 0, stream>>>(w);
  GPUSORT_CHECK_LAUNCH();
  if (!cub_items) {
    // its block sums take the place of CUB's temporary storage
    auto* sums = reinterpret_cast<std::uint64_t*>(scratch + l.scan_temp);
    const unsigned blocks = std::min(ss::counted_blocks_max, 2 * static_cast<unsigned>(setup.sms));
    ss::counted_sum_kernel<K, V><<<blocks, ss::counted_threads, 0, stream>>>(w, sums);
    GPUSORT_CHECK_LAUNCH();
    ss::counted_prefix_kernel<K, V><<<1, ss::counted_threads, 0, stream>>>(sums, blocks);
    GPUSORT_CHECK_LAUNCH();
    ss::counted_scan_kernel<K, V><<<blocks, ss::counted_threads, 0, stream>>>(w, sums);
    GPUSORT_CHECK_LAUNCH();
  } else {
    std::size_t temp_bytes = 0;
    GPUSORT_CUDA_TRY(cub::DeviceScan::ExclusiveScan(
        nullptr, temp_bytes, static_cast<const std::uint32_t*>(w.bucket_counts),
        w.bucket_offsets, ::cuda::std::plus<std::uint64_t>{}, std::uint64_t{0}, *cub_items,
        stream));
    GPUSORT_EXPECTS(temp_bytes <= l.scan_temp_bytes, "sample_sort: scan scratch under-sized");
    GPUSORT_CUDA_TRY(cub::DeviceScan::ExclusiveScan(
        scratch + l.scan_temp, temp_bytes, static_cast<const std::uint32_t*>(w.bucket_counts),
        w.bucket_offsets, ::cuda::std::plus<std::uint64_t>{}, std::uint64_t{0}, *cub_items,
        stream));
  }
  ss::scatter_kernel<K, V, Mapped><<<grid_of(tiles, blocks.scatter), P::dist_threads,
                                     smem_of<P, K, V>::scatter, stream>>>(w);
  GPUSORT_CHECK_LAUNCH();
}

/// The bucket sorts, the large class first: its blocks are the long ones, the small ones fill
/// in behind them.
template <typename P, typename K, typename V, bool Mapped>
void sort_buckets(const ss::work<K, V>& w, const scratch_layout& l, const launch_setup& setup,
                  cudaStream_t stream)
{
  const form_blocks& blocks = setup.forms[Mapped];
  ss::bucket_sort_kernel<K, V, 0, Mapped><<<grid_of(l.job_cap, blocks.large), P::sort_threads,
                                            smem_of<P, K, V>::large, stream>>>(w);
  GPUSORT_CHECK_LAUNCH();
  ss::bucket_sort_kernel<K, V, 1, Mapped><<<grid_of(l.job_cap, blocks.small),
                                            P::small_sort_threads, smem_of<P, K, V>::small,
                                            stream>>>(w);
  GPUSORT_CHECK_LAUNCH();
}

template <typename P, typename K, typename V>
bool run(dtype t, order dir, K* keys, K* keys_alt, V* values, V* values_alt, std::uint64_t n,
         void* d_scratch, std::size_t scratch_bytes, cudaStream_t stream, std::uint64_t seed,
         int forced_levels, detail::scan_choice scans, const launch_setup& setup)
{
  const scratch_layout l = make_layout<P, K>(n, forced_levels);
  if (scratch_bytes < l.total)
    throw invalid_argument{"sample_sort: scratch of " + std::to_string(scratch_bytes) +
                           " bytes, needs " + std::to_string(l.total) +
                           " (sample_sort_scratch_bytes)"};
  auto* base = static_cast<unsigned char*>(d_scratch);
  ss::work<K, V> w{};
  w.keys = keys;
  w.keys_alt = keys_alt;
  w.values = values;
  w.values_alt = values_alt;
  w.n = n;
  w.seed = seed;
  w.count = reinterpret_cast<ss::counters*>(base + l.counters);
  w.segments[0] = reinterpret_cast<ss::segment*>(base + l.segments[0]);
  w.segments[1] = reinterpret_cast<ss::segment*>(base + l.segments[1]);
  w.tile_map = reinterpret_cast<std::uint32_t*>(base + l.tile_map);
  w.splitter_data = base + l.splitters;
  w.bucket_counts = reinterpret_cast<std::uint32_t*>(base + l.counts);
  w.bucket_offsets = reinterpret_cast<std::uint64_t*>(base + l.offsets);
  w.jobs[0] = reinterpret_cast<ss::job*>(base + l.jobs[0]);
  w.jobs[1] = reinterpret_cast<ss::job*>(base + l.jobs[1]);
  w.copies = reinterpret_cast<ss::copy_range*>(base + l.copies);
  w.bucket_ids = base + l.ids;
  w.to_ordered = gpusort::detail::ordered_xor<K>(t, dir, true);
  w.from_ordered = gpusort::detail::ordered_xor<K>(t, dir, false);
  w.float_keys = is_float(t) ? 1U : 0U;
  const bool mapped = !ss::is_identity(w.to_ordered);

  const std::uint64_t level0_tiles = ss::tiles_of<P, K>(0, n);
  ss::init_kernel<K, V><<<grid_of((level0_tiles + list_threads - 1) / list_threads, setup.map),
                          list_threads, 0, stream>>>(w);
  GPUSORT_CHECK_LAUNCH();
  if (mapped && l.levels == 0) {
    ss::map_input_kernel<K, V>
        <<<grid_of((n + list_threads - 1) / list_threads, setup.map), list_threads, 0, stream>>>(
            w);
    GPUSORT_CHECK_LAUNCH();
  }
  // Level 0's counters are known here; a later level's are bounded by every segment taking k
  // buckets, which CUB scans where its average segment does; the counted scan takes the levels
  // whose segments split into fewer buckets and the spare level (rarely any tiles).
  auto cub_items_of = [&](int level) -> std::optional<std::uint64_t> {
    using detail::scan_choice;
    if (scans == scan_choice::counted) return std::nullopt;
    if (level == 0) return ss::counters_of<P, K>(0, n);
    if (scans == scan_choice::bound ||
        (level < expected_levels<P>(n) && average_depth<P>(n, level) == P::log_buckets))
      return tiles_bound<P, K>(l, n, level) * P::counters;
    return std::nullopt;
  };
  for (int level = 0; level < l.levels; ++level) {
    w.level = static_cast<std::uint32_t>(level);
    const std::uint64_t segs = segments_bound<P>(l, level);
    const std::uint64_t tiles = tiles_bound<P, K>(l, n, level);
    const std::optional<std::uint64_t> cub_items = cub_items_of(level);
    if (mapped && level == 0) {
      distribute<P, K, V, true>(w, l, base, segs, tiles, cub_items, setup, stream);
    } else {
      distribute<P, K, V, false>(w, l, base, segs, tiles, cub_items, setup, stream);
    }
    ss::classify_kernel<K, V><<<grid_of(segs, setup.list), list_threads, 0, stream>>>(w);
    GPUSORT_CHECK_LAUNCH();
    w.level = static_cast<std::uint32_t>(level + 1);
    // the next level's tile map and the counters its CUB scan reads past its own; past the
    // last level, segments still above the capacity go to the fallback, which takes them whole
    if (level + 1 < l.levels) {
      w.scan_bound = cub_items_of(level + 1).value_or(0);
      // enough blocks for the zeroing too: a thread per counter up to the resident blocks
      const std::uint64_t blocks = std::max(segments_bound<P>(l, level + 1),
                                            (w.scan_bound + list_threads - 1) / list_threads);
      ss::tile_map_kernel<K, V><<<grid_of(blocks, setup.map), list_threads, 0, stream>>>(w);
      GPUSORT_CHECK_LAUNCH();
    }
  }
  w.level = static_cast<std::uint32_t>(l.levels);
  if (mapped) {
    sort_buckets<P, K, V, true>(w, l, setup, stream);
  } else {
    sort_buckets<P, K, V, false>(w, l, setup, stream);
  }
  if (n > static_cast<std::uint64_t>(P::bucket_capacity)) {
    ss::finish_kernel<K, V><<<grid_of(std::max(l.copy_cap, l.segment_cap), setup.finish),
                              ss::finish_threads, 0, stream>>>(w);
    GPUSORT_CHECK_LAUNCH();
  }
  return true;
}

void check_widths(unsigned key_bytes, unsigned value_bytes)
{
  if (key_bytes != 4 && key_bytes != 8)
    throw invalid_argument{"sample_sort: keys must be 4 or 8 bytes"};
  if (value_bytes != 0 && value_bytes != 4 && value_bytes != 8)
    throw invalid_argument{"sample_sort: values must be 0, 4 or 8 bytes"};
}

/// Calls f.template operator()<K, V>() with V = cub::NullType for keys only.
template <typename F>
decltype(auto) visit_widths(unsigned key_bytes, unsigned value_bytes, F&& f)
{
  check_widths(key_bytes, value_bytes);
  return gpusort::detail::visit_layout(
      key_bytes, value_bytes, [&]<typename K, typename V>() -> decltype(auto) {
        if constexpr (std::is_same_v<V, gpusort::detail::no_value>) {
          return f.template operator()<K, cub::NullType>();
        } else {
          return f.template operator()<K, V>();
        }
      });
}

}  // namespace

std::size_t sample_sort_scratch_bytes(std::uint64_t n, unsigned key_bytes, unsigned value_bytes)
{
  return visit_widths(key_bytes, value_bytes, [&]<typename K, typename V>() {
    return std::max(make_layout<ss::policy_sm80<K, V>, K>(n).total,
                    make_layout<ss::policy_sm90<K, V>, K>(n).total);
  });
}

std::size_t sample_sort_scratch_bytes_here(std::uint64_t n, unsigned key_bytes,
                                           unsigned value_bytes)
{
  return visit_widths(key_bytes, value_bytes, [&]<typename K, typename V>() {
    return setup_of_current_device<K, V>().first ? make_layout<ss::policy_sm90<K, V>, K>(n).total
                                                 : make_layout<ss::policy_sm80<K, V>, K>(n).total;
  });
}

namespace detail {

sample_sort_shape sample_sort_shape_of(std::uint64_t n, unsigned key_bytes, unsigned value_bytes,
                                       int sm_major)
{
  return visit_widths(key_bytes, value_bytes, [&]<typename K, typename V>() {
    auto shape = [&]<typename P>() {
      return sample_sort_shape{expected_levels<P>(n), predicted_levels<P>(n),
                               std::uint32_t{P::bucket_capacity}, std::uint32_t{P::tile_items},
                               std::uint32_t{P::buckets}};
    };
    if (sm_major >= 9) return shape.template operator()<ss::policy_sm90<K, V>>();
    return shape.template operator()<ss::policy_sm80<K, V>>();
  });
}

bool sample_sort_with_levels(dtype t, order dir, void* d_keys, void* d_keys_alt, void* d_values,
                             void* d_values_alt, std::uint64_t n, unsigned value_bytes,
                             void* d_scratch, std::size_t scratch_bytes, cudaStream_t stream,
                             std::uint64_t seed, int levels, scan_choice scans)
{
  const auto key_bytes = static_cast<unsigned>(size_of(t));
  check_widths(key_bytes, value_bytes);
  if (n == 0) return false;
  if (d_keys == nullptr || d_keys_alt == nullptr)
    throw invalid_argument{"sample_sort: null key buffers"};
  if (value_bytes != 0 && (d_values == nullptr || d_values_alt == nullptr))
    throw invalid_argument{"sample_sort: null value buffers"};
  if (d_scratch == nullptr)
    throw invalid_argument{"sample_sort needs scratch (see sample_sort_scratch_bytes)"};
  return visit_widths(key_bytes, value_bytes, [&]<typename K, typename V>() {
    auto* keys = static_cast<K*>(d_keys);
    auto* keys_alt = static_cast<K*>(d_keys_alt);
    auto* values = static_cast<V*>(d_values);
    auto* values_alt = static_cast<V*>(d_values_alt);
    const auto [sm90, setup] = setup_of_current_device<K, V>();
    if (sm90)
      return run<ss::policy_sm90<K, V>>(t, dir, keys, keys_alt, values, values_alt, n, d_scratch,
                                        scratch_bytes, stream, seed, levels, scans, setup);
    return run<ss::policy_sm80<K, V>>(t, dir, keys, keys_alt, values, values_alt, n, d_scratch,
                                      scratch_bytes, stream, seed, levels, scans, setup);
  });
}

}  // namespace detail

bool sample_sort(void* d_keys, void* d_keys_alt, void* d_values, void* d_values_alt,
                 std::uint64_t n, unsigned key_bytes, unsigned value_bytes, void* d_scratch,
                 std::size_t scratch_bytes, cudaStream_t stream, std::uint64_t seed)
{
  check_widths(key_bytes, value_bytes);
  // ordered bits are unsigned keys in ascending order: the key maps are the identity
  return detail::sample_sort_with_levels(key_bytes == 4 ? dtype::u32 : dtype::u64,
                                         order::ascending, d_keys, d_keys_alt, d_values,
                                         d_values_alt, n, value_bytes, d_scratch, scratch_bytes,
                                         stream, seed, -1, detail::scan_choice::predicted);
}

bool sample_sort(dtype t, order dir, void* d_keys, void* d_keys_alt, void* d_values,
                 void* d_values_alt, std::uint64_t n, unsigned value_bytes, void* d_scratch,
                 std::size_t scratch_bytes, cudaStream_t stream, std::uint64_t seed)
{
  // the passes read raw keys and write them back (work::to_ordered, from_ordered): no
  // transform passes (they cost f64 keys 0.7 ms of 4.5 at 2^26 on an H100, 24c0c40)
  return detail::sample_sort_with_levels(t, dir, d_keys, d_keys_alt, d_values, d_values_alt, n,
                                         value_bytes, d_scratch, scratch_bytes, stream, seed, -1);
}

bool sample_sort_preferred(unsigned key_bytes, unsigned value_bytes, int sm_major)
{
  check_widths(key_bytes, value_bytes);
  // bench/sample_bench on an H100 (bench/results/h100-20261123-0b0bc35*): the sample sort's speed
  // over cub::DeviceRadixSort's on uniform keys, the lower of 2^26 and 2^29 elements. 64-bit
  // keys win at both sizes (1.62 and 1.32), and so do 64-bit pairs (1.46 and 1.20); 32-bit keys
  // (0.87 and 0.79) only where many keys are equal (u32 zero, detdupes: 1.5 to 1.65x; f32 1.18
  // to 1.24), which a per-type choice cannot see; layouts not measured keep the radix sort.
  struct measured {
    unsigned key_bytes;
    unsigned value_bytes;
    double speed_over_radix;
  };
  constexpr measured sm90[] = {{4, 0, 0.79}, {8, 0, 1.32}, {8, 8, 1.20}};
  if (sm_major < 9) return false;  // not measured: no A100 on the GPU machines
  for (const measured& m : sm90)
    if (m.key_bytes == key_bytes && m.value_bytes == value_bytes) return m.speed_over_radix >= 1.0;
  return false;
}

}  // namespace gpusort::cuda
