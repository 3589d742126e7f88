// The CPU in-core sorter: a parallel, stable most-significant-digit radix sort on ordered bits
// with one buffer (core/cpu_sort.cpp says how and why), keys alone or with values in a second
// array, plus the parallel passes around it.
#pragma once

#include "core/keys.hpp"

#include <cstddef>
#include <cstdint>

namespace gpusort::detail {

/// Scratch bytes cpu_sort needs for n elements: room for a copy of the keys and values.
template <typename K, typename V>
constexpr std::size_t cpu_sort_scratch_bytes(std::uint64_t n) noexcept
{
  if constexpr (std::is_same_v<V, no_value>) {
    return static_cast<std::size_t>(n) * sizeof(K);
  } else {
    return static_cast<std::size_t>(n) * (sizeof(K) + sizeof(V));
  }
}

/// Choices of the sorter that a measurement on the machine at hand settles; the defaults are
/// the measured best (core/cpu_sort.cpp's comment has the numbers), and bench/cpu_sort_ab runs
/// the alternatives against them in one process.
struct cpu_sort_tuning {
  /// The parallel pass writes each bucket through a cache line of buffer per bucket and
  /// non-temporal stores (no read of the destination's lines before they are written) when it
  /// moves at least this many bytes of keys; 0: never.
  std::uint64_t stream_min_bytes{0};
  /// Out of cache, a range's digit is only as wide as it takes to leave ranges of about the
  /// in-cache size (at most 8 bits), instead of 8 bits always.
  bool fitted_digits{true};
  /// Out of cache, a range's scatter leaves its buckets' varying bits to be found by the next
  /// pass over each (in cache: a read; out of cache: while counting) instead of noting them
  /// per key (an OR and an AND into the bucket's entry).
  bool lazy_vary{true};
};

/// Sorts n ordered-bits keys ascending, stably, moving values along (values may be null when V
/// is no_value). `scratch`, at least 8-byte aligned, holds cpu_sort_scratch_bytes<K, V>(n)
/// bytes. threads 0: all cores.
template <typename K, typename V>
void cpu_sort(K* keys, V* values, std::uint64_t n, void* scratch, unsigned threads,
              const cpu_sort_tuning& tuning = {});

/// cpu_sort for keys of `k` that the caller holds raw and wants back raw (a canonical order's
/// -0.0 and NaNs come back as its codes do: +0.0 and one NaN), or that are ordered bits already
/// when `keys_ordered`. The maps ride along with the first pass (counting and scattering) and
/// with the last (each range of 16Ki keys or fewer as soon as it is sorted, in cache), instead
/// of costing two passes of their own over the whole array (to_ordered_bits and
/// from_ordered_bits: each reads and writes every key).
template <typename K, typename V>
void cpu_sort(K* keys, V* values, std::uint64_t n, void* scratch, unsigned threads,
              const key_order& k, bool keys_ordered, const cpu_sort_tuning& tuning = {});

/// Keys alone, from small_radix_min to small_radix_max elements, sort faster by an LSD radix sort
/// on one thread than by the parallel merge sort, whose thread start-up dominates there: the
/// daemon's small jobs (a 1 MiB u64 job must finish within a millisecond, issue 5).
inline constexpr std::uint64_t small_radix_min = 512;
inline constexpr std::uint64_t small_radix_max = std::uint64_t{1} << 18;

/// Scratch small_radix_sort needs: n keys where it applies, else 0.
template <typename K>
constexpr std::size_t small_radix_scratch_bytes(std::uint64_t n) noexcept
{
  return n >= small_radix_min && n <= small_radix_max ? static_cast<std::size_t>(n) * sizeof(K)
                                                      : 0;
}

/// Sorts n ordered-bits keys ascending with a one-thread LSD radix sort (11-bit digits, digits
/// that are equal in every key skipped) when n is in its range, using `scratch`
/// (small_radix_scratch_bytes). Returns false, touching nothing, when n is outside its range.
template <typename K>
bool small_radix_sort(K* keys, std::uint64_t n, void* scratch);

/// dst[i] = to_ordered(src[i]) (src and dst may be the same array).
template <typename K>
void to_ordered_bits(const K* src, K* dst, std::uint64_t n, const key_order& k);

/// dst[i] = from_ordered(src[i]) (src and dst may be the same array).
template <typename K>
void from_ordered_bits(const K* src, K* dst, std::uint64_t n, const key_order& k);

template <typename K>
void to_ordered_bits(const K* src, K* dst, std::uint64_t n, dtype t, order dir)
{
  to_ordered_bits(src, dst, n, key_order{.type = t, .dir = dir});
}

template <typename K>
void from_ordered_bits(const K* src, K* dst, std::uint64_t n, dtype t, order dir)
{
  from_ordered_bits(src, dst, n, key_order{.type = t, .dir = dir});
}

/// memcpy split over threads: one core cannot saturate host memory bandwidth.
void parallel_copy(void* dst, const void* src, std::size_t bytes);

}  // namespace gpusort::detail
