// Tuning of the sample sort per architecture (CUB's policy hub). Device code takes the policy of
// the architecture it is compiled for (policy_hub::active); the host takes the policy of the
// binary the device actually runs (cudaFuncGetAttributes' binaryVersion), so that both agree.
//
// The algorithm (Leischner, Osipov and Sanders, "GPU sample sort", IPDPS 2010), as run here:
//  - A level takes every segment (bucket) above `bucket_capacity` elements: one block per segment
//    draws a random sample of oversampling * k keys (k a power of two up to `buckets`: as many
//    levels as take the segment to 3/4 of the capacity, split evenly and aiming at half of it;
//    see depth_for), sorts it in shared memory and keeps k - 1 splitters as a complete binary
//    search tree, and 4096 cells over the splitters' range (linear in the ordered bits, or for
//    floats whose bits crowd them, in their values; see cell_index), each with the number of
//    splitters below it and in it. Raw keys (floats, signed, descending) are mapped to ordered
//    bits as level 0 reads them and back as the bucket sorts write the result.
//  - A histogram pass: tiles of `tile_items` keys, each in one segment (full tiles at a 16-byte
//    boundary read as 16-byte vectors, the others key by key), find each key's bucket
//    from its cell and at most 3 compares, or where the cell holds more splitters, by the walk
//    of the tree, branch-free (j = 2j + (e > bt[j]), unrolled; see classifier), and count
//    buckets in per-warp counter arrays in shared
//    memory (one array per warp against contention; a warp whose keys all fall in one bucket
//    adds once, so runs of equal keys do not contend). Splitters that occur more than once get
//    an equality bucket beside them (bucket 2i+1 holds the keys equal to splitter i), so that
//    inputs with many equal keys finish instead of recursing ("zero", "detdupes").
//  - A device-wide exclusive scan over the counters, laid out segment by segment (2k per tile of
//    the segment's own k), bucket-major within a segment, gives every (tile, bucket) its global
//    output offset: CUB's over level 0's counters and over the host's bound where an average
//    segment takes all k buckets (the tile map zeroes the bound's counters past the level's
//    own, which CUB reads); elsewhere (levels whose segments split into fewer buckets, the
//    spare level, which nearly always finds no tiles) the counted scan, whose kernels read the
//    level's counter total from device memory (counted_sum_kernel).
//  - A scatter pass gathers each bucket's part of the tile in shared memory. It does not
//    classify the keys again, as the paper's does: the histogram pass keeps each key's bucket in
//    a byte of scratch (bucket_ids), and only keys at a repeated splitter are compared once more
//    for their equality bucket. Keys alone take places from shared atomics on counters that
//    start at the tile's scanned counts (equal keys cannot be told apart in any order); pairs
//    are ranked deterministically (per-warp counters, ballot matching, no atomics). Each
//    bucket's part goes out as one contiguous run.
//  - Buckets are classified: above the capacity, the next level; equality buckets above half the
//    capacity are finished as they are; the rest become jobs of at most `bucket_capacity`
//    elements (neighbouring small buckets share one job), sorted by one block each in shared
//    memory (one counting pass on the top bits in which the job's keys differ, then the runs
//    that share those bits; see bucket_sort_agent), the large size class first.
//  Levels run with no host synchronization: work lists live in device memory and persistent grids
//  loop over them, so the host launches a fixed number of levels predicted from n (plus spare
//  levels that find no work). A segment still above the capacity after the last level (not seen
//  in practice: that needs the random sample to fail repeatedly) is sorted by one block with a
//  bitonic network in device memory, slowly but correctly.
//
// Measured on an H100 (bench/sample_bench, bench/results/h100-20261121-sample/), 2^26 uniform
// u32 keys, kernel times per level from Nsight Compute:
//  - histogram: 768 us with match.any per key; 430-500 us with shared atomics (the tree walks
//    and their bank conflicts bound it: about 25% of the copy bandwidth);
//  - scatter: 2.0 ms with match.any and bucket-major counters (16-way bank conflicts on the
//    counter updates), 1.1 ms with ballot matching, warp-major counters and 64 registers;
//    keys alone by atomics from the histogram's counts 0.45 ms (u64: 0.67 ms, from 1.1); 64-bit
//    pairs 1.7 ms a level until 16-bit counters let two blocks share an SM; reading the
//    histogram's bucket bytes instead of classifying again, 0.33 ms (95be01a; three blocks an
//    SM at 40 registers then lost 13% at 2^29);
//  - bucket sort: see bucket_sort_agent (u64 1.24 ms at 16 Ki; u32 0.79, then 0.66 ms);
//  - 6c174b0, against eee71cf in one run (bench/results/h100-20261122-6c174b0/ab6*.txt): u32
//    +9% at both sizes, f32 +9% / +8%, f32 gaussian +18% / +9%, u64 +9% / +6%. Its parts:
//    full tiles read as 16-byte vectors in the histogram and the keys-alone scatter, cells
//    filled by counting splitters per cell (binary searches had taken 17 of level 0's 42 us
//    sample kernel, one block for the whole GPU), keys alone counting runs of up to 32 keys
//    before the LSD passes (ncu: the f32 gaussian bucket sort 1.12 ms against u32's 0.78, as
//    values on a 2^-23 grid come ~10 copies each near zero), one block reduction for min and
//    max, the spare level's own scan (CUB's over the bound: 34 us at 2^26, 0.25 ms at 2^29);
//    ab5 has the first three alone: u32 +6%, f32 gaussian +15% at 2^26;
//  - tiles cut from the vector boundary at or below a segment's start (734bf9d; before, three
//    in four u32 segments past level 0 had no tile on a boundary and read key by key): u32 and
//    f32 +4-5% at 2^26, +4-7% at 2^29 (bench/results/h100-20261122-734bf9d/ab7*.txt);
//  - 13ac653 and 5213001 against 734bf9d (bench/results/h100-20261122-13ac653/ab14*.txt,
//    h100-20261122-5213001/ab16*.txt): u32 +7-8% at 2^26, f32 +9-15%, u64 and f64 +6-8%; at
//    2^29 u32 +2%, f32 +4%, u64 -5%. The bucket sort's top pass turning counts into starts as
//    vectors, all reads first (17% of its stalls): +4% at both sizes; one histogram counter row
//    a block instead of one a warp (clearing and adding 16 rows cost a shared access a key):
//    +1%; the scatter loading the tile's global offsets with its counts, before the scan: +3% at
//    2^26, but -4 to -6% at 2^29, where a level's counters (counts and offsets, 12 bytes a tile
//    and bucket) are several times L2 (ab13, v16 against v15); keys alone skipping the counting
//    where all keys agree in the bits below the top pass's digit (floats on the generator's
//    2^-23 grid, with copies of each value): f32 +3-8%, u32 and 64-bit keys -1 to -2% for
//    the extra reduction; jobs in order keeping the swizzled layout (bucket_sort_agent::
//    swizzled): sorted +3-5%. Dropped after A/B: blocks taking contiguous shares of the tiles
//    and keeping their splitters loaded (-6% at 2^26, -35% at 2^29: neighbouring tiles no
//    longer meet in L2), equality counters in the upper half of the histogram row (no gain),
//    keeping splitters loaded between a block's strided tiles (-2% at 2^29), programmatic
//    dependent launches of every kernel (the launch overlapping the previous grid's end: +0-1%
//    at 2^26, -2 to -3% at 2^29; h100-20261122-5213001/ab17*.txt);
//  - launches and small kernels (0b0bc35 against a8c7d5d, bench/results/h100-20261123-0b0bc35/
//    ab*.txt): the sample sorted at the size its k needs (level 1 of 2^26 keys, k = 64, sorted
//    7680 keys for 1920: 38 -> 31 us), floats whose splitters straddle zero trying value cells
//    first (f32 level 0's sample 46 -> 33 us), one atomic a block for the jobs of a segment
//    (classify), CUB's scan at level 0 over its 2k counters a tile rather than 512 (23 -> 15
//    us at 2^26) and the counted scan at level 1 of 2^26 keys (k = 64: CUB's over the bound 26
//    us, counted 25), the counters' memset and level 0's tile map folded into init_kernel, no
//    tile map after the last level, the finished ranges and the fallback in one launch
//    (finish_kernel, each thread 4 loads in flight): u32 +1.5-2.5% at 2^26 (staggered 1.98 ->
//    2.03 times merge), f32 +1-3% (sorted 1.99 -> 2.02), zero +6%, detdupes +13%;
//  - cells (85ab686, 5e1a2ba): most keys skip the tree walk: u32 26.0 -> 28.9 / 29.3 Gkeys/s
//    at 2^26 / 2^29, u64 +3-5%, pairs +2-4%; with cells everywhere f64 lost 5% and zero inputs
//    10% (floats crowd the cells where one exponent's keys are, equal keys crowd them all), so
//    a segment whose sample crowds them walks the tree only; 7 compares instead of 3 lost 5-7%.
//    Cells linear in the value for floats whose bits crowd them, the equality check only where
//    a splitter repeats, four histogram blocks an SM and one spare level (not two): against
//    ee35aca in one run (bench/results/h100-20261122-ee35aca/ab3.txt), u32 +5% / +7%, f32
//    +10% / +18%, u64 +3%, f64 +4% / +7% at 2^26 / 2^29, pairs as before.
// Whole sorts (bench/results/h100-20261123-0b0bc35*): u32 40.7 / 38.5, f32 42.2 / 40.2, u64
// 25.0 / 21.0, f64 24.4 / 21.2, u64 pairs 12.0 / 10.2 Gkeys/s at 2^26 / 2^29 on uniform keys (CUB
// radix: 46.6 / 48.9, 44.6 / 46.7, 15.4 / 16.0, 15.3 / 15.8, 8.2 / 8.5; CUB merge: 19.6 / 17.3
// for 32-bit keys, 8.7 / 7.6 for 64-bit keys, 4.7 / 4.1 for pairs); 33 to 100 Gkeys/s on zero
// and detdupes, where equality buckets finish the keys in one level. Floats, signed and
// descending keys run about as fast as unsigned ones: level 0 maps them to ordered bits as it
// reads them and the bucket sorts map them back as they write (separate transform passes cost
// f64 0.7 ms of 4.5 at 2^26). What bounds it is instructions and latency in the shared-memory
// passes, not memory bandwidth: the modelled bytes per key move at 41-53% of the copy bandwidth
// on uniform keys. ncu at 0b0bc35, 2^26 u32 (clocks locked, ~15% above free-running): level 0
// sample 26 us, histogram 217, scatter 320; level 1 sample 31, histogram 217, scatter 311;
// bucket sort 691 us (ncu --set full on the histogram at 5213001: shared memory 80% busy, half
// its wavefronts bank conflicts of the random cell reads and counter atomics; the scatter: 33%
// of issue slots busy, latency of its tile's phases with two blocks an SM; level 1's sample
// kernel at 0b0bc35: one block's chain of barriers at 0.67 IPC). 32-bit keys reach 2.2 to 2.4
// times CUB's merge sort at 2^29 and 2.03 to 2.15 at 2^26 (u32 staggered and f32 sorted 2.03,
// against a merge sort that is faster on them), where the whole sort takes about 1.6 ms.
#pragma once

#include <cub/block/block_radix_sort.cuh>

#include <cstdint>
#include <type_traits>

namespace gpusort::cuda::detail::sample {

/// Compile-time tuning of one (key, value) layout on one architecture.
template <int Buckets, int Oversampling, int SampleThreads, int DistThreads, int DistItems,
          int SortThreads, int SortItems, int SmallSortThreads, int SmallSortItems>
struct policy {
  static constexpr int buckets = Buckets;  ///< k, the most buckets of one level (power of two)
  static constexpr int log_buckets = Buckets == 256 ? 8 : 7;
  static constexpr int oversampling = Oversampling;  ///< a: sample keys per bucket
  static constexpr int sample_threads = SampleThreads;
  static constexpr int sample_items = Oversampling * Buckets / SampleThreads;
  static constexpr int dist_threads = DistThreads;  ///< histogram and scatter passes
  static constexpr int dist_items = DistItems;
  static constexpr int tile_items = DistThreads * DistItems;
  static constexpr int sort_threads = SortThreads;  ///< the large bucket-sort class
  static constexpr int sort_items = SortItems;
  static constexpr int bucket_capacity = SortThreads * SortItems;  ///< M
  static constexpr int small_sort_threads = SmallSortThreads;  ///< the small bucket-sort class
  static constexpr int small_sort_items = SmallSortItems;
  static constexpr int small_capacity = SmallSortThreads * SmallSortItems;
  static constexpr int counters = 2 * Buckets;  ///< bucket + equality bucket per splitter
  static_assert(Buckets == 128 || Buckets == 256);  // a bucket id is one byte (work::bucket_ids)
  static_assert(Oversampling * Buckets % SampleThreads == 0);
  static_assert(DistThreads % 32 == 0 && SortThreads % 32 == 0 && SmallSortThreads % 32 == 0);
  static_assert(SmallSortThreads * SmallSortItems < SortThreads * SortItems);
};

template <typename K, typename V>
inline constexpr bool keys_only_v = std::is_same_v<V, cub::NullType>;

/// sm_80 (A100: 164 KiB shared memory per SM, 108 SMs): in-block sorts of half the Hopper size,
/// so that two bucket-sort blocks fit an SM. Not measured here (no A100 on the GPU machines).
template <typename K, typename V>
using policy_sm80 =
    policy<256, sizeof(K) == 4 ? 30 : 15, 256, 512,
           (sizeof(K) == 4 && keys_only_v<K, V>) ? 16 : 8, 512,
           (sizeof(K) == 4 && keys_only_v<K, V>) ? 16 : 8, 128,
           (sizeof(K) == 4 && keys_only_v<K, V>) ? 16 : 8>;

/// sm_90 (H100/H200: 228 KiB shared memory per SM, 132 SMs). Distribution tiles of 512 threads
/// with 16 (32-bit keys alone) or 8 keys each: two blocks per SM within 64 registers a thread,
/// and 2k counters per tile stay a few percent of the bytes moved. M = 16 Ki keys alone (1024
/// threads, one block an SM; 64-bit keys fill 224 KiB: at 8 Ki and two blocks an SM, 2^29 keys
/// took three levels, 13.9 against 14.5 Gkeys/s in one run) or 4 Ki pairs (512 threads, two
/// blocks an SM: pairs at 4 Ki ran 11.2 / 8.6 Gkeys/s against 10.6 / 8.3 at 8 Ki and one block
/// an SM).
template <typename K, typename V>
using policy_sm90 =
    policy<256, sizeof(K) == 4 ? 30 : 15, 256, 512,
           (sizeof(K) == 4 && keys_only_v<K, V>) ? 16 : 8,
           keys_only_v<K, V> ? 1024 : 512,
           keys_only_v<K, V> ? 16 : 8, 128,
           (sizeof(K) == 4 && keys_only_v<K, V>) ? 16 : 8>;

template <typename K, typename V>
struct policy_hub {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  using active = policy_sm80<K, V>;
#else
  using active = policy_sm90<K, V>;
#endif
};

}  // namespace gpusort::cuda::detail::sample
