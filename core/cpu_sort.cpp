#include "core/cpu_sort.hpp"

#include "core/checks.hpp"
#include "core/stream_copy.hpp"

#include <gpusort/error.hpp>

#include <omp.h>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <utility>
#include <cstring>
#include <memory>
#include <optional>
#include <type_traits>
#include <vector>

namespace gpusort::detail {

namespace {

unsigned thread_count(unsigned threads) noexcept
{
  return threads != 0 ? threads : static_cast<unsigned>(omp_get_max_threads());
}

// The sort: most-significant-digit radix on ordered bits with one buffer as large as the data,
// stable. Digits start at the highest bit that differs between the keys of a range, so that
// keys sharing their top bits (small integers, floats of one sign and exponent range, a few
// distinct values) skip those bits, and a range whose keys are all equal is done at once.
// - Ranges of parallel_min elements and more: one scatter pass with every thread (each counts
//   and then scatters its own contiguous block, so that equal keys keep their order) into 256
//   buckets, then the buckets in parallel, largest first, the largest again with every thread.
//   The pass's digit is the range's top 16 varying bits mapped through a monotone table drawn
//   from a sample of 16Ki keys, so that the buckets hold about as many keys each where the top
//   bits are spread unevenly (prefix_digit). The counting pass finds the range's varying bits
//   as it counts (one read of the data, not two); each bucket's are those of the range below
//   the highest bit in which the bucket's prefixes differ, or fewer: its own counting pass (or,
//   in cache, a read) finds the real ones (cpu_sort_tuning::lazy_vary; the scatter used to note
//   them with an OR and an AND per key).
// - Smaller ranges, on one thread: scatter passes while the range is larger than lsd_max, on
//   digits only as wide as it takes to leave ranges of about fitted_bytes (at most narrow_bits:
//   cpu_sort_tuning::fitted_digits), then, in cache, least-significant-digit passes (11-bit
//   digits, all histograms in one read) where the varying bits take at most lsd_max_passes
//   digits, else (64-bit keys) LSD passes on the top 22 varying bits and a scan that finishes
//   the runs of keys equal in those (sort_top_bits); insertion sort for the last few, written
//   straight into the range's destination. A range already ascending or strictly descending
//   is copied or reversed instead (in_order).
// Measured for the first three changes on one and two threads of the 2-core development machine
// (its CPU time, while the other engineers' builds kept the load at 7-10; a harness calling
// cpu_sort, 2^25 or 2^26 keys): the insertion sort that writes into the destination instead of
// sorting in place and copying took u64/u64 pairs from 96-104 to 45 ns a pair on one thread
// (a memcpy call for every bucket of about 4 pairs was 17% of the profile); 11-bit MSD digits
// in cache (since replaced by sort_top_bits) took doubles in [0, 1) from 44-55 to 25 ns a key
// (2^14-key buckets of 42 varying bits finish in one pass, not two); the sampled digit took
// doubles in [-1, 1) from 34-37 to 27-28 ns a key on two threads (the sign and the exponent's
// top bits put nearly every key into 2 of 256 radix buckets, so that the parallel pass over all
// the data did almost nothing). u64 and u32 keys: unchanged within the noise (26 and 21 ns a
// key on one thread). Then sort_top_bits in place of MSD passes down to buckets of about 8 and
// their insertion sorts (35% of the time on one thread), one thread, 2^25 keys, scratch
// faulted in beforehand, load 5-8, two runs each: u64 24.9-31.4 -> 19.7-20.4 ns a key, f64
// 26.9 -> 21.0-21.7, u64/u64 pairs 42.4-43.2 -> 38.7-39.0 ns a pair, u32 19.3-20.2 ->
// 19.1-19.7 (u32 keys take the plain LSD passes anyway).
// in_order (ranges already ascending or strictly descending are copied or reversed, not
// sorted): 2 threads, 2^24 u64 keys, CPU time, load 11-14: sorted 14.8 -> 6.5 ns a key, reverse
// 18.4 -> 6.0, uniform 20.2 -> 19.9, detdupes 5.7 -> 5.9 (sort_top_bits had made sorted and
// reversed inputs slower than the tiny insertion sorts, 12.4 and 13.5, which cost little on
// keys in order).
// All of it against the sorter of 87f3156 in one session (scratch faulted in beforehand, CPU
// time in ns an element summed over threads, load 10): one thread, 2^25 elements: u64 24.9 ->
// 22.4, f64 in [-1, 1) 28.8 -> 23.0, u32 21.5 -> 22.1, u64/u64 pairs 75.6 -> 39.3; two
// threads, 2^26: u64 25.6 -> 18.9 (wall 3.45 -> 2.57 s), f64 30.6 -> 16.3 (4.18 -> 2.19 s),
// pairs 77.2 -> 40.5 (10.34 -> 5.44 s).
// Earlier, on the 2-core development machine, 2^26 keys against __gnu_parallel::sort in the same
// run (bench/cpu_bench): 11-bit scatter digits everywhere 1.89x for u64 (2048 output streams a
// thread stall the TLB and the store buffers); 8-bit digits on one thread 2.14x u64, 3.16x u32,
// 2.24x f64; 10-bit parallel passes 1.92x; pairs 0.93-1.05x (keys and values are two streams
// each, twice the stores per element). u64/u64 pairs at 2^26: 1.27x, and 1.10x with 7-bit digits
// for pairs (fewer streams did not pay). Scatters through a cache line of buffer per bucket
// (software write-combining, for the parallel pass and ranges of 2^16 and more) did not pay on
// the H100 host's 16 cores either, two runs each against the code of then at 2^30 keys: u64
// 3.32-3.44 s against 3.23-3.64 s, u32 2.33-2.43 against 2.12-2.63, f64 5.30-5.76 against
// 4.57-4.98, pairs (2^28) 1.29-1.40 against 1.16-1.18
// (bench/results/h100-20261125-5492247-cpu-ab-*.json).
// Keys that are not their own ordered bits (floats, signed integers, descending order) come in
// raw: the first parallel pass maps them as it counts and scatters, and each range of lsd_max
// keys or fewer maps its result back as soon as it is sorted, in cache (sort_parallel,
// sort_range's `back`), where the engine's direct path made two passes of their own (each a
// read and a write of the whole array). On the 2-core development machine, 2 threads, 2^25 f64
// in [-1, 1), scratch kept, CPU time (a harness; now bench/cpu_sort_ab_bench), load 8: fused
// 22.2-24.2 ns a key against 21.4-24.0 for the separate passes, within the noise: there the two
// cores are the limit and the passes vectorise; they save memory traffic (2 x 16 bytes a key) for
// machines whose cores wait on memory, such as the 16-core GPU host. Fusing first made it slower
// (28.2-31.6) until the loops kept the map in registers (thread-local copies: stores of 64-bit
// counts may alias a map's 64-bit fields). Against main's sorter (a169c54) in one session, same
// harness, 2^25, one run each alternating, load 10-12: f64 main's separate passes 21.2-22.1 ns a
// key, fused 22.1-22.8; u64 20.2-26.7 against 21.8-23.6; u64/u64 pairs 45.4-55.2 against
// 53.0-55.8 ns a pair (within the noise; the pairs' loops differ only in local copies).
// The scratch's first touch, same harness and load, u64 at 2^25: scratch kept 20.1-25.0 ns a
// key, fresh with huge pages (host_buffer advises them; this machine's transparent huge pages
// are "madvise") 21.6-26.1 with a spike of 50.5 (240-310 faults), fresh in 4 KiB pages
// 27.1-36.9 (65.7K faults); touching fresh scratch beforehand from every core
// (MADV_POPULATE_WRITE in 2 MiB pieces) did not pay (4 KiB pages 25.5-30.5, huge pages
// 22.4-37.8). So the scratch stays fresh per sort: where huge pages are given, faults cost
// about what the noise does; where they are not, what pays is enabling them. A day later (the
// machine up 16 hours of builds, load 8; bench/cpu_sort_ab --scratch all, 2^26 u64, 2 threads,
// medians of 3): kept 18.75 ns a key, fresh with huge pages 44.65, fresh in 4 KiB pages 26.64:
// with memory fragmented, each huge page's fault compacts (defrag "madvise"), and first touch
// costs more than the sort. The H100 host (051b7d1, 2^29 u64, 16 threads): kept 57.9-60.1,
// huge 62.3-68.1, 4 KiB 58.9-65.0.
// Fitted digits and buckets that find their own varying bits (cpu_sort_tuning's fitted_digits
// and lazy_vary, against 8-bit digits and scatters that note them: bench/cpu_sort_ab, variants
// alternating in one process, CPU time, medians of 3-7, load 3-9 on the 2-core machine): one
// thread, 2^25 elements: u64 0.75x the time, u32 0.64x, f64 0.87x, u64/u64 pairs 0.86x; two
// threads: u64 2^28 0.80x, 2^27 0.84x and 0.74x, 2^26 within the noise (1.05x and 0.96x in
// two runs), pairs 2^27 0.90x, 2^26 0.945x. Where ranges leave the parallel pass at 2^22 elements (2^30 on 16 cores)
// the digits were 8 bits already, and what remains is the scatters' OR and AND per key. The
// line-buffered scatter with non-temporal stores on the parallel pass (stream_min_bytes) was
// 1.07x-1.10x slower here (2 threads, u64 2^27, pairs 2^26): two cores do not wait on memory;
// it stays off until the 16-core host, whose cores do, measures it.
constexpr unsigned wide_bits = 11;
constexpr unsigned narrow_bits = 8;
constexpr unsigned parallel_bits = 8;
constexpr std::uint64_t insertion_max = 32;
constexpr std::uint64_t lsd_max = std::uint64_t{1} << 14;
constexpr unsigned lsd_max_passes = 3;
constexpr std::uint64_t parallel_min = std::uint64_t{1} << 17;

template <typename V>
constexpr bool has_values = !std::is_same_v<V, no_value>;
constexpr std::uint64_t fitted_bytes = std::uint64_t{32} << 10;


/// A range of keys and, for pairs, the values beside them.
template <typename K, typename V>
struct span_pair {
  K* keys;
  V* values;  ///< unused for keys alone
  [[nodiscard]] span_pair at(std::uint64_t i) const noexcept
  {
    if constexpr (has_values<V>) return {keys + i, values + i};
    else return {keys + i, values};
  }
};

template <typename K, typename V>
void copy_range(span_pair<K, V> from, span_pair<K, V> to, std::uint64_t n)
{
  std::memcpy(to.keys, from.keys, n * sizeof(K));
  if constexpr (has_values<V>) std::memcpy(to.values, from.values, n * sizeof(V));
}

template <typename K, typename V>
void move_one(span_pair<K, V> from, std::uint64_t i, span_pair<K, V> to, std::uint64_t j)
{
  to.keys[j] = from.keys[i];
  if constexpr (has_values<V>) to.values[j] = from.values[i];
}

/// Bits in which some key of the range differs from `reference` (a key of the range, or of the
/// whole array when threads compute the range's blocks apart).
template <typename K>
K varying_bits(const K* keys, std::uint64_t n, K reference) noexcept
{
  K vary = 0;
  for (std::uint64_t i = 0; i < n; ++i) vary |= static_cast<K>(keys[i] ^ reference);
  return vary;
}

template <typename K>
unsigned highest_bit(K v) noexcept
{
  return static_cast<unsigned>(8 * sizeof(K) - 1) -
         static_cast<unsigned>(std::countl_zero(v));
}

/// Shift of the `bits`-wide digit whose top is the highest varying bit.
template <typename K>
unsigned top_shift(K vary, unsigned bits) noexcept
{
  const unsigned high = highest_bit(vary);
  return high + 1 >= bits ? high + 1 - bits : 0;
}

/// The out-of-cache digit's width for a range of n > lsd_max elements: the fewest bits, at most
/// narrow_bits, that leave buckets of fitted_bytes or less where keys spread evenly (a range
/// and its scratch in L1 or close to it; 4Ki u64 keys, 2Ki u64/u64 pairs). 2 threads, 2-core
/// machine, CPU time against 8-bit digits (medians of 3, load 7-9): u64/u64 pairs at 2^26 with
/// ranges of 32 KiB 0.945x, 64 KiB 1.015x, 128 KiB 1.049x, 256 KiB (16Ki pairs) 1.18x; u64 at
/// 2^27, 32 KiB 0.839x, 128 KiB 0.890x; one thread, 2^25, u64 0.751x and 0.740x, u32 0.640x and
/// 0.622x (the same within the noise).
template <typename K, typename V>
unsigned fitted_bits(std::uint64_t n) noexcept
{
  constexpr std::uint64_t element_bytes = sizeof(K) + (has_values<V> ? sizeof(V) : 0);
  constexpr std::uint64_t target = std::min(lsd_max, fitted_bytes / element_bytes);
  const auto needed = static_cast<unsigned>(std::bit_width((n - 1) / target));
  return std::clamp(needed, 1U, narrow_bits);
}

/// Insertion sort of n elements from `from` into `to` (the same range or another): the copy
/// that a range's parity may need rides along with the sort instead of costing a memcpy call.
template <typename K, typename V>
void insertion_sort(span_pair<K, V> from, span_pair<K, V> to, std::uint64_t n)
{
  for (std::uint64_t i = 0; i < n; ++i) {
    const K k = from.keys[i];
    std::uint64_t j = i;
    if constexpr (has_values<V>) {
      const V v = from.values[i];
      for (; j > 0 && k < to.keys[j - 1]; --j) {
        to.keys[j] = to.keys[j - 1];
        to.values[j] = to.values[j - 1];
      }
      to.keys[j] = k;
      to.values[j] = v;
    } else {
      for (; j > 0 && k < to.keys[j - 1]; --j) to.keys[j] = to.keys[j - 1];
      to.keys[j] = k;
    }
  }
}

/// LSD passes over the varying bits of n <= lsd_max elements in x (y: as much scratch).
/// Returns true when the sorted range ends in y.
template <typename K, typename V>
bool lsd_sort(span_pair<K, V> x, span_pair<K, V> y, std::uint64_t n, K vary)
{
  constexpr std::uint32_t radix = std::uint32_t{1} << wide_bits;
  const unsigned low = static_cast<unsigned>(std::countr_zero(vary));
  const unsigned high = highest_bit(vary);
  const unsigned passes = (high - low) / wide_bits + 1;
  static_assert(lsd_max <= UINT32_MAX);
  std::array<std::array<std::uint32_t, radix>, (8 * sizeof(K) + wide_bits - 1) / wide_bits>
      counts;
  for (unsigned p = 0; p < passes; ++p) counts[p].fill(0);
  for (std::uint64_t i = 0; i < n; ++i)
    for (unsigned p = 0; p < passes; ++p)
      ++counts[p][(x.keys[i] >> (low + p * wide_bits)) & (radix - 1)];
  span_pair<K, V> from = x, to = y;
  bool in_y = false;
  for (unsigned p = 0; p < passes; ++p) {
    const unsigned shift = low + p * wide_bits;
    std::array<std::uint32_t, radix>& c = counts[p];
    std::uint32_t sum = 0;
    for (std::uint32_t& v : c) sum += std::exchange(v, sum);
    for (std::uint64_t i = 0; i < n; ++i)
      move_one(from, i, to, c[(from.keys[i] >> shift) & (radix - 1)]++);
    std::swap(from, to);
    in_y = !in_y;
  }
  return in_y;
}

template <typename K, typename V>
void sort_range(span_pair<K, V> x, span_pair<K, V> y, std::uint64_t n, bool to_x, K vary,
                const key_map<K>* back, const cpu_sort_tuning& tune, bool exact = true);

/// keys[i] = map(keys[i]) on this thread: the map back to raw keys, applied to a range just
/// sorted while it is still in cache instead of in a pass of its own over the whole array.
template <typename K>
void map_keys(K* keys, std::uint64_t n, const key_map<K>& map) noexcept
{
  for (std::uint64_t i = 0; i < n; ++i) keys[i] = map(keys[i]);
}

/// Ranges already in order, ascending or strictly descending (sorted and reversed inputs keep
/// their order through the passes above): put in place by a copy or a reversal instead of being
/// sorted. Returns false, having moved nothing, otherwise; on other keys the scan stops at
/// once (the first or second key out of order), so it costs next to nothing.
template <typename K, typename V>
bool in_order(span_pair<K, V> x, span_pair<K, V> y, std::uint64_t n, bool to_x)
{
  std::uint64_t i = 1;
  while (i < n && !(x.keys[i] < x.keys[i - 1])) ++i;
  if (i == n) {
    if (!to_x) copy_range(x, y, n);
    return true;
  }
  if (i != 1) return false;
  // Strictly descending only: reversing equal keys would break stability.
  while (i < n && x.keys[i] < x.keys[i - 1]) ++i;
  if (i != n) return false;
  if (to_x) {
    std::reverse(x.keys, x.keys + n);
    if constexpr (has_values<V>) std::reverse(x.values, x.values + n);
  } else {
    std::reverse_copy(x.keys, x.keys + n, y.keys);
    if constexpr (has_values<V>) std::reverse_copy(x.values, x.values + n, y.values);
  }
  return true;
}

/// In cache, keys of many varying bits: LSD passes on the top top_bits of them, then every run
/// of keys equal in those bits finished apart (insertion sort for runs of a few, the full sort
/// for longer ones). Runs are mostly of one key, so the last step is a predictable scan, where
/// MSD passes would end in thousands of tiny insertion sorts that mispredict at every key.
constexpr unsigned top_bits = 2 * wide_bits;

template <typename K, typename V>
void sort_top_bits(span_pair<K, V> x, span_pair<K, V> y, std::uint64_t n, bool to_x, K vary,
                   const cpu_sort_tuning& tune)
{
  const unsigned shift = highest_bit(vary) + 1 - top_bits;
  const auto top_vary = static_cast<K>(vary & ~((K{1} << shift) - 1));
  // The sorted-by-top-bits range lies in `from`; `to` is its partner.
  const bool in_y = lsd_sort(x, y, n, top_vary);
  const span_pair<K, V> from = in_y ? y : x;
  const span_pair<K, V> to = in_y ? x : y;
  const bool stay = in_y != to_x;  // the result belongs where the runs lie now
  std::uint64_t i = 0;
  while (i < n) {
    const K prefix = static_cast<K>(from.keys[i] >> shift);
    std::uint64_t j = i + 1;
    while (j < n && static_cast<K>(from.keys[j] >> shift) == prefix) ++j;
    const std::uint64_t len = j - i;
    if (len == 1) {
      if (!stay) move_one(from, i, to, i);
    } else if (len <= insertion_max) {
      insertion_sort(from.at(i), stay ? from.at(i) : to.at(i), len);
    } else {
      sort_range<K, V>(from.at(i), to.at(i), len, stay,
                       varying_bits(from.keys + i, len, from.keys[i]), nullptr, tune);
    }
    i = j;
  }
}

/// Sorts n elements held in x with y as scratch, on this thread; the result ends in x when
/// `to_x`, else in y. With `back`, the result's keys leave through that map (ordered bits back
/// to raw keys): each range of lsd_max keys or fewer maps its result as soon as it is sorted, in
/// cache. `vary`: the bits in which the keys differ, or where not `exact` bits that include them.
template <typename K, typename V>
void sort_range(span_pair<K, V> x, span_pair<K, V> y, std::uint64_t n, bool to_x, K vary,
                const key_map<K>* back, const cpu_sort_tuning& tune, bool exact)
{
  // In cache, the real varying bits set how many passes the sort takes: one read finds them.
  // Out of cache the counting pass finds them as it counts.
  if (!exact && n <= lsd_max) {
    vary = n > 0 ? varying_bits(x.keys, n, x.keys[0]) : K{0};
    exact = true;
  }
  if (back != nullptr && (n <= lsd_max || vary == 0)) {
    sort_range<K, V>(x, y, n, to_x, vary, nullptr, tune);
    map_keys((to_x ? x : y).keys, n, *back);
    return;
  }
  if (n <= insertion_max || vary == 0) {
    if (vary != 0) insertion_sort(x, to_x ? x : y, n);
    else if (!to_x) copy_range(x, y, n);
    return;
  }
  if (in_order(x, y, n, to_x)) {
    if (back != nullptr) map_keys((to_x ? x : y).keys, n, *back);
    return;
  }
  // LSD while it takes few passes; with more varying bits an MSD pass leaves buckets of a few
  // keys that insertion sort finishes (u64 keys at 16Ki: one pass instead of six).
  const unsigned varying = highest_bit(vary) - static_cast<unsigned>(std::countr_zero(vary)) + 1;
  if (n <= lsd_max && varying <= lsd_max_passes * wide_bits) {
    if (lsd_sort(x, y, n, vary) == to_x) copy_range(to_x ? y : x, to_x ? x : y, n);
    return;
  }
  if (n <= lsd_max) {
    sort_top_bits(x, y, n, to_x, vary, tune);
    return;
  }
  // Out of cache (more than lsd_max keys): digits of narrow_bits at most, few enough output
  // streams for the TLB and the store buffers, and no wider than it takes to leave ranges of
  // about lsd_max: a wider digit leaves ranges so short that the in-cache sort's fixed costs
  // (two 2048-entry histograms to clear and sum) outweigh their keys.
  const unsigned bits = tune.fitted_digits ? fitted_bits<K, V>(n) : narrow_bits;
  const std::uint32_t radix = std::uint32_t{1} << bits;
  unsigned shift = top_shift(vary, bits);
  std::array<std::uint64_t, (std::size_t{1} << wide_bits) + 1> start;
  std::fill_n(start.begin(), radix + 1, 0);
  if (exact) {
    for (std::uint64_t i = 0; i < n; ++i) ++start[((x.keys[i] >> shift) & (radix - 1)) + 1];
  } else {
    // Counted on the digit of the bits given, which holds the real top varying bit unless the
    // range's keys share more bits than those say (then counted again: never on even keys).
    const K ref = x.keys[0];
    K found = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
      const K k = x.keys[i];
      ++start[((k >> shift) & (radix - 1)) + 1];
      found |= static_cast<K>(k ^ ref);
    }
    if (found == 0) {
      sort_range<K, V>(x, y, n, to_x, K{0}, back, tune);
      return;
    }
    vary = found;
    if (top_shift(vary, bits) != shift) {
      shift = top_shift(vary, bits);
      std::fill_n(start.begin(), radix + 1, 0);
      for (std::uint64_t i = 0; i < n; ++i) ++start[((x.keys[i] >> shift) & (radix - 1)) + 1];
    }
  }
  for (std::uint32_t b = 0; b < radix; ++b) start[b + 1] += start[b];
  std::array<std::uint64_t, std::size_t{1} << wide_bits> next;
  std::copy_n(start.begin(), radix, next.begin());
  if (tune.lazy_vary) {
    for (std::uint64_t i = 0; i < n; ++i)
      move_one(x, i, y, next[(x.keys[i] >> shift) & (radix - 1)]++);
    // A bucket's keys share every bit from the digit up: they vary in the bits below it at most.
    const auto below = static_cast<K>(vary & ((K{1} << shift) - 1));
    for (std::uint32_t b = 0; b < radix; ++b) {
      const std::uint64_t len = start[b + 1] - start[b];
      if (len > 0)
        sort_range<K, V>(y.at(start[b]), x.at(start[b]), len, !to_x, below, back, tune, false);
    }
    return;
  }
  std::array<K, std::size_t{1} << wide_bits> ors, ands;
  std::fill_n(ors.begin(), radix, K{0});
  std::fill_n(ands.begin(), radix, static_cast<K>(~K{0}));
  for (std::uint64_t i = 0; i < n; ++i) {
    const K k = x.keys[i];
    const auto d = static_cast<std::uint32_t>((k >> shift) & (radix - 1));
    move_one(x, i, y, next[d]++);
    ors[d] |= k;
    ands[d] &= k;
  }
  // The buckets now lie in y: the result belongs in y's partner when to_x.
  for (std::uint32_t b = 0; b < radix; ++b) {
    const std::uint64_t len = start[b + 1] - start[b];
    if (len > 0)
      sort_range(y.at(start[b]), x.at(start[b]), len, !to_x, static_cast<K>(ors[b] ^ ands[b]),
                 back, tune);
  }
}

/// The parallel pass's digit: the top prefix_bits of a range's varying bits, mapped through a
/// table to one of parallel_buckets buckets. The table is monotone, so that the buckets follow
/// each other in key order, and drawn from a sample so that they hold about as many keys each:
/// a plain radix digit wastes the pass where the top bits are spread unevenly (doubles in
/// [-1, 1): the sign and the exponent's top bits put nearly all keys in 2 of 256 buckets).
constexpr unsigned prefix_bits = 16;
constexpr std::uint32_t parallel_buckets = std::uint32_t{1} << parallel_bits;

template <typename K>
struct prefix_digit {
  unsigned shift{};
  K mask{};
  std::vector<std::uint8_t> table;
  [[nodiscard]] std::uint32_t operator()(K k) const noexcept
  {
    return table[static_cast<std::size_t>((k >> shift) & mask)];
  }
};

/// Keys the table is drawn from: evenly spaced, enough that a bucket's share is seen to within
/// a few percent, few enough to cost little beside the pass (16Ki cache misses).
constexpr std::uint64_t sample_size = std::uint64_t{1} << 14;

template <typename K>
std::vector<K> sample_of(const K* keys, std::uint64_t n)
{
  const std::uint64_t step = std::max<std::uint64_t>(1, n / sample_size);
  std::vector<K> sample;
  sample.reserve(static_cast<std::size_t>(std::min(n, sample_size)));
  for (std::uint64_t i = 0; i < n; i += step) sample.push_back(keys[i]);
  return sample;
}

/// The digit for keys whose varying bits are `vary`, balanced on `sample` (empty: the plain
/// radix digit on the top parallel_bits).
template <typename K>
prefix_digit<K> make_digit(K vary, const std::vector<K>& sample)
{
  const unsigned width = std::min(prefix_bits, highest_bit(vary) + 1);
  prefix_digit<K> d;
  d.shift = highest_bit(vary) + 1 - width;
  d.mask = static_cast<K>((K{1} << width) - 1);
  const std::size_t prefixes = std::size_t{1} << width;
  d.table.resize(prefixes);
  if (sample.empty()) {
    const unsigned drop = width > parallel_bits ? width - parallel_bits : 0;
    for (std::size_t p = 0; p < prefixes; ++p) d.table[p] = static_cast<std::uint8_t>(p >> drop);
    return d;
  }
  std::vector<std::uint32_t> hist(prefixes, 0);
  for (const K k : sample) ++hist[static_cast<std::size_t>((k >> d.shift) & d.mask)];
  // Bucket b closes once the prefixes so far hold (b + 1)/parallel_buckets of the sample; a
  // prefix more frequent than that has a bucket of its own, and prefixes the sample lacks join
  // the bucket before them. Keys with and without the highest varying bit (both exist) never
  // share a bucket, so that every bucket is smaller than the range even where the sample
  // misleads.
  std::uint64_t seen = 0;
  std::uint32_t b = 0;
  const std::uint64_t total = sample.size();
  const std::size_t half = prefixes / 2;
  for (std::size_t p = 0; p < prefixes; ++p) {
    if (p == half && d.table[half - 1] == b) ++b;
    d.table[p] = static_cast<std::uint8_t>(b);
    seen += hist[p];
    const std::uint32_t last = p < half ? parallel_buckets - 2 : parallel_buckets - 1;
    while (b < last && seen * parallel_buckets >= (b + 1) * total && hist[p] != 0) ++b;
  }
  return d;
}

// Below this many elements a parallel pass costs more to start than it saves.
constexpr std::int64_t parallel_pass_threshold = std::int64_t{1} << 18;

template <typename K>
void map_bits(const K* src, K* dst, std::uint64_t n, const key_map<K>& map)
{
  const auto count = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static) if (count > parallel_pass_threshold)
  for (std::int64_t i = 0; i < count; ++i) dst[i] = map(src[i]);
}

/// The keys as they are, for the passes over keys that are ordered bits already.
struct no_map {
  template <typename K>
  K operator()(K k) const noexcept
  {
    return k;
  }
};

/// Calls f(map) with *fwd, or with no_map where there is none, so that the loops over keys
/// already ordered compile as they were, without a branch per key.
template <typename K, typename F>
void with_map(const key_map<K>* fwd, F&& f)
{
  if (fwd != nullptr) f(*fwd);
  else f(no_map{});
}

/// A range whose keys are all equal: in place already, or copied with every thread, then
/// through the maps (the canonical maps make raw keys that differ equal: -0.0 and +0.0).
template <typename K, typename V>
void copy_parallel(span_pair<K, V> x, span_pair<K, V> y, std::uint64_t n, bool to_x,
                   const key_map<K>* fwd, const key_map<K>* back)
{
  if (fwd != nullptr) map_bits(x.keys, x.keys, n, *fwd);
  if (!to_x) {
    parallel_copy(y.keys, x.keys, n * sizeof(K));
    if constexpr (has_values<V>) parallel_copy(y.values, x.values, n * sizeof(V));
  }
  K* dst = to_x ? x.keys : y.keys;
  if (back != nullptr) map_bits(dst, dst, n, *back);
}

/// One thread's writes of one array (keys or values) in the parallel scatter, with
/// cpu_sort_tuning::stream_min_bytes: each bucket's next elements gather in a cache line of
/// buffer that goes out whole through non-temporal stores, so that the destination's lines are
/// not read from memory before they are overwritten (a plain store's read for ownership: a third
/// of the scatter's traffic) and do not evict the cache. The lines at either end of the thread's
/// share of a bucket, which other threads write too, go out element by element.
template <typename T>
class line_writer {
 public:
  static constexpr std::size_t line_bytes = 64;
  static constexpr std::uint64_t per_line = line_bytes / sizeof(T);

  explicit line_writer(T* dst) noexcept : dst_{dst} {}

  /// dst[at] = v, `at` being the next position of bucket d, whose share starts at `first`.
  void put(std::uint32_t d, std::uint64_t at, std::uint64_t first, T v) noexcept
  {
    const std::uint64_t slot = slot_of(at);
    lines_[d][slot] = v;
    if (slot == per_line - 1) flush(d, at, first);
  }

  /// Writes what bucket d holds yet: its share is [first, end).
  void finish(std::uint32_t d, std::uint64_t first, std::uint64_t end) noexcept
  {
    const std::uint64_t held = std::min(end - first, slot_of(end));
    for (std::uint64_t i = end - held; i < end; ++i) dst_[i] = lines_[d][slot_of(i)];
  }

  /// Orders the non-temporal stores before the barrier after which other threads read them.
  static void fence() noexcept
  {
#if defined(__SSE2__)
    _mm_sfence();
#endif
  }

 private:
  [[nodiscard]] std::uint64_t slot_of(std::uint64_t i) const noexcept
  {
    return (reinterpret_cast<std::uintptr_t>(dst_ + i) % line_bytes) / sizeof(T);
  }

  /// The line that ends at `last`, full in the buffer: whole where it is the thread's alone.
  void flush(std::uint32_t d, std::uint64_t last, std::uint64_t first) noexcept
  {
    if (last + 1 < first + per_line) {
      for (std::uint64_t i = first; i <= last; ++i) dst_[i] = lines_[d][slot_of(i)];
      return;
    }
    T* const line = dst_ + (last + 1 - per_line);
#if defined(__SSE2__)
    auto* out = reinterpret_cast<__m128i*>(line);
    const auto* in = reinterpret_cast<const __m128i*>(lines_[d].data());
    for (std::size_t q = 0; q < line_bytes / sizeof(__m128i); ++q)
      _mm_stream_si128(out + q, _mm_load_si128(in + q));
#else
    std::memcpy(line, lines_[d].data(), line_bytes);
#endif
  }

  T* dst_;
  alignas(line_bytes) std::array<std::array<T, per_line>, parallel_buckets> lines_;
};

/// One thread's block [first, last) of the parallel scatter: each key through `map` to ordered
/// bits, into its bucket's next position (next[d], advanced), written by put(d, at, key, i);
/// with `note`, each bucket's OR and AND of its keys beside. A struct, not a lambda in the
/// parallel region: clang refuses a lambda there the enclosing function's locals.
template <typename K, typename V, typename Map>
struct scatter_block {
  span_pair<K, V> from;
  std::uint64_t first, last;
  Map map;
  const prefix_digit<K>& digit;
  std::uint64_t* next;
  K* ors;
  K* ands;
  bool note;

  template <typename Put>
  void operator()(Put put) const
  {
    if (note) loop<true>(put);
    else loop<false>(put);
  }

  template <bool Note, typename Put>
  void loop(Put& put) const
  {
    // Copies the loop's stores cannot alias, so that they stay in registers.
    const Map m = map;
    const K* const keys = from.keys;
    for (std::uint64_t i = first; i < last; ++i) {
      const K k = m(keys[i]);
      const std::uint32_t d = digit(k);
      put(d, next[d]++, k, i);
      if constexpr (Note) {
        ors[d] |= k;
        ands[d] &= k;
      }
    }
  }
};

/// sort_range with `threads` threads, for large ranges; `vary` as for sort_range, or nullopt
/// where unknown. `fwd`: the keys in x are raw and the counting and scatter passes map them to
/// ordered bits as they read them; `back`: as for sort_range. The maps ride along with passes
/// that read and write the data anyway, instead of costing two passes of their own (each a read
/// and a write of every key).
template <typename K, typename V>
void sort_parallel(span_pair<K, V> x, span_pair<K, V> y, std::uint64_t n, bool to_x,
                   unsigned threads, std::optional<K> known_vary, const key_map<K>* fwd,
                   const key_map<K>* back, const cpu_sort_tuning& tune)
{
  if (n < parallel_min || threads <= 1) {
    if (fwd != nullptr) map_bits(x.keys, x.keys, n, *fwd);
    const K vary = known_vary ? *known_vary : n > 0 ? varying_bits(x.keys, n, x.keys[0]) : K{0};
    sort_range(x, y, n, to_x, vary, back, tune);
    return;
  }
  constexpr std::uint32_t radix = parallel_buckets;
  // Thread t's contiguous block: [first, last).
  const std::uint64_t block = (n + threads - 1) / threads;
  const auto block_of = [&](unsigned t) {
    const std::uint64_t first = std::min<std::uint64_t>(n, t * block);
    return std::pair{first, std::min(n, first + block)};
  };
  struct alignas(64) thread_state {
    std::array<std::uint64_t, radix> count;
    std::array<K, radix> ors, ands;
    K vary;
  };
  std::vector<thread_state> state(threads);
  // Where the varying bits are unknown, the counting pass finds them while it counts on the
  // digit that the sample suggests; only when the sample missed the highest varying bit does
  // it count again (on the plain radix digit). One read of the data fewer than finding them
  // first.
  if (known_vary && *known_vary == 0) {
    copy_parallel(x, y, n, to_x, fwd, back);
    return;
  }
  std::vector<K> sample = sample_of(x.keys, n);
  const K ref = fwd != nullptr ? (*fwd)(x.keys[0]) : x.keys[0];
  if (fwd != nullptr)
    for (K& k : sample) k = (*fwd)(k);
  K vary = 0;
  if (known_vary) {
    vary = *known_vary;
  } else {
    for (const K k : sample) vary |= static_cast<K>(k ^ ref);
  }
  if (vary == 0) vary = 1;  // the count pass will tell whether anything varies
  prefix_digit<K> digit = make_digit(vary, sample);
  const auto count_pass = [&](bool find_vary) {
    with_map(fwd, [&](const auto& map) {
#pragma omp parallel num_threads(threads)
      {
        const auto t = static_cast<unsigned>(omp_get_thread_num());
        const auto [b0, b1] = block_of(t);
        thread_state& s = state[t];
        s.count.fill(0);
        // Copies the loop's stores cannot alias, so that they stay in registers: the counts are
        // 64-bit integers like the keys and the maps' fields.
        const auto m = map;
        const K r = ref;
        const K* const keys = x.keys;
        K v = 0;
        if (find_vary) {
          for (std::uint64_t i = b0; i < b1; ++i) {
            const K k = m(keys[i]);
            ++s.count[digit(k)];
            v |= static_cast<K>(k ^ r);
          }
        } else {
          for (std::uint64_t i = b0; i < b1; ++i) ++s.count[digit(m(keys[i]))];
        }
        s.vary = v;
      }
    });
  };
  count_pass(!known_vary);
  if (!known_vary) {
    const K guessed = vary;
    vary = 0;
    for (const thread_state& s : state) vary |= s.vary;
    if (vary != 0 && highest_bit(vary) != highest_bit(guessed)) {
      digit = make_digit(vary, std::vector<K>{});
      count_pass(false);
    }
  }
  if (vary == 0) {
    copy_parallel(x, y, n, to_x, fwd, back);
    return;
  }
  // Bucket by bucket, thread by thread: each thread's share of a bucket follows the shares of
  // the threads before it, which keeps equal keys in input order.
  std::array<std::uint64_t, radix + 1> start{};
  {
    std::uint64_t sum = 0;
    for (std::uint32_t d = 0; d < radix; ++d) {
      start[d] = sum;
      for (thread_state& s : state) sum += std::exchange(s.count[d], sum);
    }
    start[radix] = sum;
  }
  // The scatter notes each bucket's varying bits (bits some key has and some lacks), which
  // spares the next pass over each bucket a read of it. It writes the keys as ordered bits.
  const bool stream =
      tune.stream_min_bytes != 0 && n * sizeof(K) >= tune.stream_min_bytes;
  with_map(fwd, [&](const auto& map) {
#pragma omp parallel num_threads(threads)
    {
      const auto t = static_cast<unsigned>(omp_get_thread_num());
      const auto [b0, b1] = block_of(t);
      thread_state& s = state[t];
      s.ors.fill(0);
      s.ands.fill(static_cast<K>(~K{0}));
      const span_pair<K, V> from = x, to = y;
      const scatter_block<K, V, std::decay_t<decltype(map)>> scatter{
          .from = from,
          .first = b0,
          .last = b1,
          .map = map,  // a copy, as in the counting pass
          .digit = digit,
          .next = s.count.data(),
          .ors = s.ors.data(),
          .ands = s.ands.data(),
          .note = !tune.lazy_vary};
      if (!stream) {
        scatter([&](std::uint32_t, std::uint64_t at, K k, std::uint64_t i) {
          to.keys[at] = k;
          if constexpr (has_values<V>) to.values[at] = from.values[i];
        });
      } else {
        const std::array<std::uint64_t, radix> first = s.count;
        // 16 KiB a writer: too much for the stack of every OpenMP thread to take for granted.
        const auto keys_out = std::make_unique<line_writer<K>>(to.keys);
        std::unique_ptr<line_writer<V>> values_out;
        if constexpr (has_values<V>) values_out = std::make_unique<line_writer<V>>(to.values);
        scatter([&](std::uint32_t d, std::uint64_t at, K k, std::uint64_t i) {
          keys_out->put(d, at, first[d], k);
          if constexpr (has_values<V>) values_out->put(d, at, first[d], from.values[i]);
        });
        for (std::uint32_t d = 0; d < radix; ++d) {
          keys_out->finish(d, first[d], s.count[d]);
          if constexpr (has_values<V>) values_out->finish(d, first[d], s.count[d]);
        }
        line_writer<K>::fence();
      }
    }
  });
  std::array<K, radix> bucket_vary{};
  if (tune.lazy_vary) {
    // A bucket's keys share the bits above the digit and the digit's bits above the highest
    // one in which the bucket's prefixes differ (the table is monotone: they are a range).
    constexpr std::size_t none = ~std::size_t{0};
    std::array<std::size_t, radix> lo, hi;
    lo.fill(none);
    hi.fill(none);
    for (std::size_t p = 0; p < digit.table.size(); ++p) {
      const std::uint8_t b = digit.table[p];
      if (lo[b] == none) lo[b] = p;
      hi[b] = p;
    }
    for (std::uint32_t d = 0; d < radix; ++d) {
      if (lo[d] == none) continue;
      const unsigned top = digit.shift + static_cast<unsigned>(std::bit_width(lo[d] ^ hi[d]));
      bucket_vary[d] = top >= 8 * sizeof(K) ? vary : static_cast<K>(vary & ((K{1} << top) - 1));
    }
  } else {
    for (std::uint32_t d = 0; d < radix; ++d) {
      K o = 0;
      auto a = static_cast<K>(~K{0});
      for (const thread_state& s : state) {
        o |= s.ors[d];
        a &= s.ands[d];
      }
      bucket_vary[d] = static_cast<K>(o ^ a);
    }
  }
  // Buckets too large to balance among the others sort with every thread themselves; the rest
  // go largest first, so that no thread starts a large bucket when the others are nearly done.
  const std::uint64_t large = std::max(parallel_min, n / (2 * threads));
  std::vector<std::uint32_t> small;
  for (std::uint32_t d = 0; d < radix; ++d) {
    const std::uint64_t len = start[d + 1] - start[d];
    if (len > large)
      // Bits that only include the varying ones would mislead its digit (a bucket as large as
      // the range): unknown, the bucket's own counting pass finds them.
      sort_parallel<K, V>(y.at(start[d]), x.at(start[d]), len, !to_x, threads,
                          tune.lazy_vary ? std::optional<K>{} : std::optional<K>{bucket_vary[d]},
                          nullptr, back, tune);
    else if (len > 0)
      small.push_back(d);
  }
  std::stable_sort(small.begin(), small.end(), [&](std::uint32_t a, std::uint32_t b) {
    return start[a + 1] - start[a] > start[b + 1] - start[b];
  });
  const auto count = static_cast<std::int64_t>(small.size());
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
  for (std::int64_t i = 0; i < count; ++i) {
    const std::uint32_t d = small[static_cast<std::size_t>(i)];
    sort_range(y.at(start[d]), x.at(start[d]), start[d + 1] - start[d], !to_x, bucket_vary[d],
               back, tune, !tune.lazy_vary);
  }
}

/// The scratch's halves for keys and values: the wider of the two first, so that both start
/// aligned for their type.
template <typename K, typename V>
span_pair<K, V> scratch_pair(void* scratch, std::uint64_t n) noexcept
{
  auto* base = static_cast<char*>(scratch);
  span_pair<K, V> s{reinterpret_cast<K*>(base), nullptr};
  if constexpr (has_values<V>) {
    if constexpr (sizeof(V) > sizeof(K)) {
      s.values = reinterpret_cast<V*>(base);
      s.keys = reinterpret_cast<K*>(base + n * sizeof(V));
    } else {
      s.values = reinterpret_cast<V*>(base + n * sizeof(K));
    }
  }
  return s;
}

}  // namespace

template <typename K, typename V>
void cpu_sort(K* keys, V* values, std::uint64_t n, void* scratch, unsigned threads,
              const cpu_sort_tuning& tuning)
{
  if (n <= 1) return;
  GPUSORT_EXPECTS(scratch != nullptr, "cpu_sort needs cpu_sort_scratch_bytes of scratch");
  sort_parallel<K, V>(span_pair<K, V>{keys, values}, scratch_pair<K, V>(scratch, n), n, true,
                      thread_count(threads), std::optional<K>{}, nullptr, nullptr, tuning);
}

template <typename K, typename V>
void cpu_sort(K* keys, V* values, std::uint64_t n, void* scratch, unsigned threads,
              const key_order& k, bool keys_ordered, const cpu_sort_tuning& tuning)
{
  if (ordered_is_identity(k)) {
    cpu_sort<K, V>(keys, values, n, scratch, threads, tuning);
    return;
  }
  const key_map<K> fwd = ordered_map<K>(k, true);
  const key_map<K> back = ordered_map<K>(k, false);
  if (n <= 1) {
    // Through both maps all the same: a canonical map writes -0.0 as +0.0.
    if (n == 1) keys[0] = back(keys_ordered ? keys[0] : fwd(keys[0]));
    return;
  }
  GPUSORT_EXPECTS(scratch != nullptr, "cpu_sort needs cpu_sort_scratch_bytes of scratch");
  sort_parallel<K, V>(span_pair<K, V>{keys, values}, scratch_pair<K, V>(scratch, n), n, true,
                      thread_count(threads), std::optional<K>{}, keys_ordered ? nullptr : &fwd,
                      &back, tuning);
}

template <typename K>
bool small_radix_sort(K* keys, std::uint64_t n, void* scratch)
{
  if (small_radix_scratch_bytes<K>(n) == 0) return false;
  GPUSORT_EXPECTS(scratch != nullptr, "small_radix_sort needs scratch");
  // 11-bit digits: 6 passes for 64-bit keys and 3 for 32-bit ones instead of 8 and 4, with
  // counters (48 KiB at most) that still sit in L1/L2.
  constexpr unsigned bits = 11;
  constexpr unsigned digits = (8 * sizeof(K) + bits - 1) / bits;
  constexpr K mask = (K{1} << bits) - 1;
  // Every digit's histogram in one read pass; n <= 2^18 fits 32-bit counters.
  std::array<std::array<std::uint32_t, std::size_t{1} << bits>, digits> counts{};
  for (std::uint64_t i = 0; i < n; ++i) {
    const K k = keys[i];
    for (unsigned d = 0; d < digits; ++d) ++counts[d][(k >> (bits * d)) & mask];
  }
  K* src = keys;
  K* dst = static_cast<K*>(scratch);
  for (unsigned d = 0; d < digits; ++d) {
    auto& c = counts[d];
    if (c[(keys[0] >> (bits * d)) & mask] == n) continue;  // the same digit everywhere
    std::uint32_t sum = 0;
    for (std::uint32_t& x : c) sum += std::exchange(x, sum);
    for (std::uint64_t i = 0; i < n; ++i) {
      const K k = src[i];
      dst[c[(k >> (bits * d)) & mask]++] = k;
    }
    std::swap(src, dst);
  }
  if (src != keys) std::memcpy(keys, src, n * sizeof(K));
  return true;
}

template <typename K>
void to_ordered_bits(const K* src, K* dst, std::uint64_t n, const key_order& k)
{
  map_bits(src, dst, n, ordered_map<K>(k, true));
}

template <typename K>
void from_ordered_bits(const K* src, K* dst, std::uint64_t n, const key_order& k)
{
  map_bits(src, dst, n, ordered_map<K>(k, false));
}

void parallel_copy(void* dst, const void* src, std::size_t bytes)
{
  // One piece or less stays a memmove on this thread, as it always was (no thread pool woken).
  if (bytes <= (std::size_t{1} << 20)) {
    if (bytes != 0) std::memmove(dst, src, bytes);
    return;
  }
  copy_in_pieces(dst, src, bytes, [](void* d, const void* s, std::size_t n) noexcept {
    std::memcpy(d, s, n);
  });
}

#define GPUSORT_INSTANTIATE_CPU_SORT(K, V)                                                     \
  template void cpu_sort<K, V>(K*, V*, std::uint64_t, void*, unsigned, const cpu_sort_tuning&);  \
  template void cpu_sort<K, V>(K*, V*, std::uint64_t, void*, unsigned, const key_order&, bool,  \
                               const cpu_sort_tuning&);
GPUSORT_FOR_EACH_LAYOUT(GPUSORT_INSTANTIATE_CPU_SORT)
#undef GPUSORT_INSTANTIATE_CPU_SORT

template bool small_radix_sort(std::uint32_t*, std::uint64_t, void*);
template bool small_radix_sort(std::uint64_t*, std::uint64_t, void*);
template void to_ordered_bits(const std::uint32_t*, std::uint32_t*, std::uint64_t,
                              const key_order&);
template void to_ordered_bits(const std::uint64_t*, std::uint64_t*, std::uint64_t,
                              const key_order&);
template void from_ordered_bits(const std::uint32_t*, std::uint32_t*, std::uint64_t,
                                const key_order&);
template void from_ordered_bits(const std::uint64_t*, std::uint64_t*, std::uint64_t,
                                const key_order&);

}  // namespace gpusort::detail
