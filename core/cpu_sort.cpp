#include "core/cpu_sort.hpp"

#include <gpusort/error.hpp>

#include <omp.h>
#include <parallel/algorithm>

#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>
#include <cstring>

namespace gpusort::detail {

namespace {

template <typename K, typename V>
struct [[gnu::packed]] record {
  K key;
  V value;
};

unsigned thread_count(unsigned threads) noexcept
{
  return threads != 0 ? threads : static_cast<unsigned>(omp_get_max_threads());
}

// Below this many elements a parallel sort costs more in thread start-up than it saves.
constexpr std::uint64_t parallel_threshold = std::uint64_t{1} << 16;

template <typename It, typename Less>
void sort_range(It first, It last, unsigned threads, Less less)
{
  const auto n = static_cast<std::uint64_t>(last - first);
  if (n < parallel_threshold || threads <= 1) {
    std::sort(first, last, less);
  } else {
    __gnu_parallel::sort(first, last, less,
                         __gnu_parallel::multiway_mergesort_tag(
                             static_cast<__gnu_parallel::_ThreadIndex>(threads)));
  }
}

}  // namespace

template <typename K, typename V>
void cpu_sort(K* keys, V* values, std::uint64_t n, void* scratch, unsigned threads)
{
  threads = thread_count(threads);
  if constexpr (std::is_same_v<V, no_value>) {
    sort_range(keys, keys + n, threads, std::less<K>{});
  } else {
    GPUSORT_EXPECTS(scratch != nullptr || n == 0, "sorting pairs needs scratch");
    auto* rec = static_cast<record<K, V>*>(scratch);
    const auto count = static_cast<std::int64_t>(n);
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t i = 0; i < count; ++i) {
      rec[i].key = keys[i];
      rec[i].value = values[i];
    }
    sort_range(rec, rec + n, threads, [](const record<K, V>& a, const record<K, V>& b) {
      return a.key < b.key;
    });
#pragma omp parallel for num_threads(threads) schedule(static)
    for (std::int64_t i = 0; i < count; ++i) {
      keys[i] = rec[i].key;
      values[i] = rec[i].value;
    }
  }
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

// Below this many elements a parallel pass costs more to start than it saves.
constexpr std::int64_t parallel_pass_threshold = std::int64_t{1} << 18;

template <typename K>
void to_ordered_bits(const K* src, K* dst, std::uint64_t n, dtype t, order dir)
{
  const auto count = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static) if (count > parallel_pass_threshold)
  for (std::int64_t i = 0; i < count; ++i) dst[i] = to_ordered<K>(src[i], t, dir);
}

template <typename K>
void from_ordered_bits(const K* src, K* dst, std::uint64_t n, dtype t, order dir)
{
  const auto count = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static) if (count > parallel_pass_threshold)
  for (std::int64_t i = 0; i < count; ++i) dst[i] = from_ordered<K>(src[i], t, dir);
}

void parallel_copy(void* dst, const void* src, std::size_t bytes)
{
  // 1 MiB: a 32 MiB staging piece of the GPU pipeline spreads over all 16 cores of a GPU host
  // (with 4 MiB, 8 pieces kept half of them idle).
  constexpr std::size_t piece = std::size_t{1} << 20;
  if (bytes <= piece) {
    if (bytes != 0) std::memmove(dst, src, bytes);
    return;
  }
  const auto pieces = static_cast<std::int64_t>((bytes + piece - 1) / piece);
#pragma omp parallel for schedule(static)
  for (std::int64_t p = 0; p < pieces; ++p) {
    const std::size_t off = static_cast<std::size_t>(p) * piece;
    std::memcpy(static_cast<char*>(dst) + off, static_cast<const char*>(src) + off,
                std::min(piece, bytes - off));
  }
}

#define GPUSORT_INSTANTIATE_CPU_SORT(K, V) \
  template void cpu_sort<K, V>(K*, V*, std::uint64_t, void*, unsigned);
GPUSORT_FOR_EACH_LAYOUT(GPUSORT_INSTANTIATE_CPU_SORT)
#undef GPUSORT_INSTANTIATE_CPU_SORT

template bool small_radix_sort(std::uint32_t*, std::uint64_t, void*);
template bool small_radix_sort(std::uint64_t*, std::uint64_t, void*);
template void to_ordered_bits(const std::uint32_t*, std::uint32_t*, std::uint64_t, dtype, order);
template void to_ordered_bits(const std::uint64_t*, std::uint64_t*, std::uint64_t, dtype, order);
template void from_ordered_bits(const std::uint32_t*, std::uint32_t*, std::uint64_t, dtype,
                                order);
template void from_ordered_bits(const std::uint64_t*, std::uint64_t*, std::uint64_t, dtype,
                                order);

}  // namespace gpusort::detail
