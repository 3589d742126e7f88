// Argsort and the stable sort (pipeline/stable.hpp says why they sort positions).
#include "pipeline/stable.hpp"

#include "core/cpu_sort.hpp"
#include "core/keys.hpp"
#include "pipeline/device.hpp"
#include "pipeline/file_window.hpp"
#include "pipeline/host_memory.hpp"

#include <gpusort/error.hpp>

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <mutex>
#include <string>
#include <vector>

namespace gpusort::detail {

namespace {

bool in_memory(const void* p) { return !find_file_window(p).has_value(); }

/// A run of equal keys: `length` elements from `offset`.
struct tie_run {
  std::uint64_t offset{};
  std::uint64_t length{};
};

/// Ties of at least this many elements are sorted by the parallel radix sort, one at a time;
/// shorter ones by std::sort inside the thread that found them (few distinct keys make runs of
/// millions, which one thread would take seconds over).
constexpr std::uint64_t long_tie = std::uint64_t{1} << 16;

template <typename I>
void fill_positions(I* idx, std::uint64_t n)
{
  const auto count = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static) if (count > (std::int64_t{1} << 16))
  for (std::int64_t i = 0; i < count; ++i) idx[i] = static_cast<I>(i);
}

/// Puts the positions of every run of equal keys in ascending order: the unstable sort's
/// permutation becomes the stable one. Keys compare by their bits, which in a canonical order
/// (key_order::canonical) holds for every pair of keys the order calls equal.
template <typename K, typename I>
void order_ties(const K* keys, I* idx, std::uint64_t n)
{
  if (n < 2) return;
  std::vector<tie_run> long_runs;
  std::mutex long_runs_mutex;
  const std::uint64_t parts =
      n < (std::uint64_t{1} << 16) ? 1 : static_cast<std::uint64_t>(omp_get_max_threads()) * 4;
  const auto part_count = static_cast<std::int64_t>(parts);
#pragma omp parallel for schedule(dynamic) if (parts > 1)
  for (std::int64_t p = 0; p < part_count; ++p) {
    // The runs that start inside [begin, end) are this part's, however far they reach.
    std::uint64_t begin = n * static_cast<std::uint64_t>(p) / parts;
    const std::uint64_t end = n * static_cast<std::uint64_t>(p + 1) / parts;
    while (begin < end && begin > 0 && keys[begin] == keys[begin - 1]) ++begin;
    for (std::uint64_t i = begin; i < end;) {
      std::uint64_t j = i + 1;
      while (j < n && keys[j] == keys[i]) ++j;
      if (j - i >= long_tie) {
        const std::lock_guard lock{long_runs_mutex};
        long_runs.push_back({i, j - i});
      } else if (j - i > 1) {
        std::sort(idx + i, idx + j);
      }
      i = j;
    }
  }
  if (long_runs.empty()) return;
  std::uint64_t longest = 0;
  for (const tie_run& r : long_runs) longest = std::max(longest, r.length);
  const host_buffer scratch{cpu_sort_scratch_bytes<I, no_value>(longest)};
  for (const tie_run& r : long_runs)
    cpu_sort<I, no_value>(idx + r.offset, nullptr, r.length, scratch.data(), 0);
}

/// Element i of an array in memory or in a file window.
template <typename K>
K input_key(const void* keys, std::uint64_t i)
{
  const auto* at = static_cast<const K*>(keys) + i;
  if (in_memory(keys)) return *at;
  K k{};
  host_read(&k, at, sizeof(K));
  return k;
}

/// First position in [0, n) whose code is not below `code` (codes ascend along the keys), the
/// keys read by `key_at(i)` (memory, or a file window's positioned reads).
template <typename K, typename KeyAt>
std::uint64_t first_code_at_least(std::uint64_t n, const key_map<K>& forward, K code,
                                  KeyAt&& key_at)
{
  std::uint64_t lo = 0;
  std::uint64_t hi = n;
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    if (forward(key_at(mid)) < code)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/// A canonical sort leaves +0.0 for every zero and one NaN for every NaN; the stable
/// permutation says which input key each of them is, so their bits come back from the input
/// (memory, or positioned reads of a file: only these two runs are read).
template <typename K, typename I>
void restore_canonical(K* sorted, const I* idx, std::uint64_t n, const key_order& canonical,
                       const void* input)
{
  const key_map<K> forward = ordered_map<K>(canonical, true);
  for (const K code : {forward.zero_to, forward.nan_code}) {
    const auto key_at = [sorted](std::uint64_t i) { return sorted[i]; };
    const std::uint64_t lo = first_code_at_least<K>(n, forward, code, key_at);
    const std::uint64_t hi =
        first_code_at_least<K>(n, forward, static_cast<K>(code + 1), key_at);
    const auto first = static_cast<std::int64_t>(lo);
    const auto last = static_cast<std::int64_t>(code == forward.nan_code ? n : hi);
    if (in_memory(input)) {
      const K* keys = static_cast<const K*>(input);
#pragma omp parallel for schedule(static) if (last - first > (std::int64_t{1} << 16))
      for (std::int64_t i = first; i < last; ++i) sorted[i] = keys[idx[i]];
    } else {
      for (std::int64_t i = first; i < last; ++i) sorted[i] = input_key<K>(input, idx[i]);
    }
  }
}

/// The sorted keys and the stable permutation of an array, in memory: the caller's own
/// (`keys_dst`, `idx_dst` when they are memory) or buffers of its own.
template <typename K, typename I>
struct permutation {
  host_buffer keys_buffer;
  host_buffer idx_buffer;
  K* keys{};
  I* idx{};
  bool canonical{};
  sort_report report;
};

/// The canonical key order of a job's keys; its numpy_floats() says whether the job needs the
/// canonical codes at all.
key_order canonical_order(dtype type, const sort_options& options) noexcept
{
  return {.type = type, .dir = options.direction, .floats = options.floats, .canonical = true};
}

template <typename K, typename I>
permutation<K, I> sort_positions(const key_array& keys, void* keys_dst, void* idx_dst,
                                 const sort_options& options, const inner_sort& sort)
{
  const std::uint64_t n = keys.count;
  permutation<K, I> p;
  // Allocated before anything is read, so that running out of memory changes nothing.
  if (keys_dst != nullptr && in_memory(keys_dst)) {
    p.keys = static_cast<K*>(keys_dst);
  } else {
    p.keys_buffer = host_buffer{n * sizeof(K)};
    p.keys = static_cast<K*>(p.keys_buffer.data());
  }
  if (idx_dst != nullptr && in_memory(idx_dst)) {
    p.idx = static_cast<I*>(idx_dst);
  } else {
    p.idx_buffer = host_buffer{n * sizeof(I)};
    p.idx = static_cast<I*>(p.idx_buffer.data());
  }
  host_read(p.keys, keys.data, n * sizeof(K));
  fill_positions(p.idx, n);
  p.canonical = canonical_order(keys.type, options).numpy_floats();
  sort_options unstable = options;
  unstable.stable = false;
  p.report = sort(sort_job{.keys = {p.keys, n, keys.type},
                           .values = value_array{p.idx, n, static_cast<std::uint32_t>(sizeof(I))}},
                  unstable, p.canonical);
  order_ties(p.keys, p.idx, n);
  return p;
}

template <typename F>
decltype(auto) visit_index(std::uint32_t index_bytes, F&& f)
{
  if (index_bytes == 4) return std::forward<F>(f).template operator()<std::uint32_t>();
  return std::forward<F>(f).template operator()<std::uint64_t>();
}

}  // namespace

/// The keys NumPy's order calls equal although their bits differ, as the input has them: its
/// zeros and its NaNs in input order, and how many keys sort before the zeros.

template <typename K>
distinct_equals<K> scan_distinct_equals(const void* input, std::uint64_t n, order dir)
{
  constexpr K sign = sign_bit<K>;
  constexpr K inf = static_cast<K>(sign - (K{1} << (sizeof(K) == 4 ? 23 : 52)));  // exponent ones
  distinct_equals<K> out;
  const std::uint64_t piece = std::min<std::uint64_t>(n, (std::uint64_t{64} << 20) / sizeof(K));
  host_buffer buffer;
  if (!in_memory(input)) buffer = host_buffer{piece * sizeof(K)};
  const auto parts = static_cast<std::int64_t>(omp_get_max_threads());
  std::vector<distinct_equals<K>> found(static_cast<std::size_t>(parts));
  std::uint64_t negative = 0;
  std::uint64_t positive = 0;
  for (std::uint64_t at = 0; at < n; at += piece) {
    const std::uint64_t len = std::min(piece, n - at);
    const K* keys = static_cast<const K*>(input) + at;
    if (!in_memory(input)) {
      host_read(buffer.data(), keys, len * sizeof(K));
      keys = static_cast<const K*>(buffer.data());
    }
#pragma omp parallel for schedule(static) reduction(+ : negative, positive) \
    if (len > (std::uint64_t{1} << 16))
    for (std::int64_t t = 0; t < parts; ++t) {
      // Lists of this thread's own, moved out at the end: pushing into found[t] directly would
      // write the vectors' ends, neighbours on a cache line, from every thread at once.
      distinct_equals<K> mine;
      const auto count = static_cast<std::uint64_t>(parts);
      const std::uint64_t begin = len * static_cast<std::uint64_t>(t) / count;
      const std::uint64_t end = len * static_cast<std::uint64_t>(t + 1) / count;
      // Blocks without a zero or a NaN (nearly all) only count their negatives, in a loop the
      // compiler vectorises: a branch per key kept the pass well below memory speed (H100,
      // 1 GiB: the stable sort at 0.47 of the plain sort's rate).
      constexpr std::uint64_t block = 256;
      std::uint64_t negatives = 0;
      std::uint64_t specials = 0;
      for (std::uint64_t b = begin; b < end; b += block) {
        const std::uint64_t stop = std::min(end, b + block);
        K any = 0;
        std::uint64_t neg = 0;
        for (std::uint64_t i = b; i < stop; ++i) {
          // A zero's magnitude wraps to the top, a NaN's is above the infinity's.
          any |= static_cast<K>(static_cast<K>((keys[i] & static_cast<K>(~sign)) - 1) >= inf);
          neg += keys[i] >> (sizeof(K) * 8 - 1);
        }
        negatives += neg;
        if (any == 0) continue;
        for (std::uint64_t i = b; i < stop; ++i) {
          const K magnitude = keys[i] & static_cast<K>(~sign);
          if (magnitude != 0 && magnitude <= inf) continue;
          (magnitude == 0 ? mine.zeros : mine.nans).push_back(keys[i]);
          negatives -= keys[i] >> (sizeof(K) * 8 - 1);
          ++specials;
        }
      }
      negative += negatives;
      positive += (end - begin) - specials - negatives;
      found[static_cast<std::size_t>(t)] = std::move(mine);
    }
    for (distinct_equals<K>& f : found) {
      out.zeros.insert(out.zeros.end(), f.zeros.begin(), f.zeros.end());
      out.nans.insert(out.nans.end(), f.nans.begin(), f.nans.end());
      f.zeros.clear();
      f.nans.clear();
    }
  }
  out.below_zero = dir == order::ascending ? negative : positive;
  return out;
}

template distinct_equals<std::uint32_t> scan_distinct_equals<std::uint32_t>(const void*, std::uint64_t, order);
template distinct_equals<std::uint64_t> scan_distinct_equals<std::uint64_t>(const void*, std::uint64_t, order);

bool needs_stable_path(const sort_job& job, const sort_options& options) noexcept
{
  return options.stable && job.keys.count > 1 &&
         (job.values.has_value() || canonical_order(job.keys.type, options).numpy_floats());
}

sort_report run_argsort(const argsort_job& job, const sort_options& options,
                        const inner_sort& sort, const resident_argsort& resident)
{
  const std::uint64_t n = job.keys.count;
  if (job.index_bytes != 4 && job.index_bytes != 8)
    throw invalid_argument{"argsort: indices must be 4 or 8 bytes, not " +
                           std::to_string(job.index_bytes)};
  if (job.index_bytes == 4 && n > std::numeric_limits<std::uint32_t>::max())
    throw invalid_argument{"argsort: " + std::to_string(n) +
                           " keys need 8-byte indices (4-byte indices hold fewer than 2^32)"};
  if (n > 0 && job.keys.data == nullptr) throw invalid_argument{"argsort: keys are null"};
  if (n > 0 && job.indices_out == nullptr)
    throw invalid_argument{"argsort: indices_out is null"};
  const auto start = std::chrono::steady_clock::now();
  const auto key_bytes = static_cast<std::uint32_t>(size_of(job.keys.type));
  const bool canonical = canonical_order(job.keys.type, options).numpy_floats();
  // Sorted keys in a canonical order get their zeros and NaNs back from the input by the
  // permutation, which must then be in memory beside them.
  const bool restorable = !canonical || job.keys_out == nullptr ||
                          (in_memory(job.keys_out) && in_memory(job.indices_out));
  if (n > 1 && restorable) {
    if (std::optional<sort_report> r = resident(job, options, canonical)) {
      if (canonical && job.keys_out != nullptr) {
        visit_layout(key_bytes, 0, [&]<typename K, typename>() {
          visit_index(job.index_bytes, [&]<typename I>() {
            restore_canonical(static_cast<K*>(job.keys_out),
                              static_cast<const I*>(job.indices_out), n,
                              canonical_order(job.keys.type, options), job.keys.data);
          });
        });
      }
      r->seconds = seconds_since(start);
      return *r;
    }
  }
  sort_report report = visit_layout(key_bytes, 0, [&]<typename K, typename>() {
    return visit_index(job.index_bytes, [&]<typename I>() {
      permutation<K, I> p =
          sort_positions<K, I>(job.keys, job.keys_out, job.indices_out, options, sort);
      if (job.keys_out != nullptr) {
        if (p.canonical)
          restore_canonical(p.keys, p.idx, n, canonical_order(job.keys.type, options),
                            job.keys.data);
        if (p.keys != job.keys_out) host_write(job.keys_out, p.keys, n * sizeof(K));
      }
      if (p.idx != job.indices_out) host_write(job.indices_out, p.idx, n * sizeof(I));
      return std::move(p.report);
    });
  });
  report.elements = n;
  report.bytes = n * key_bytes;
  report.seconds = seconds_since(start);
  return report;
}

namespace {

/// Keys alone in NumPy's order: a plain sort by canonical codes, every zero and NaN of the
/// input recorded beforehand in input order and written over the zero and NaN runs afterwards.
/// That is the stable result (NaNs last; the zeros after every key before them), at the cost of
/// one read of the input instead of sorting positions. A failed in-place job may leave the
/// zeros' signs and the NaNs' payloads canonical (+0.0, one NaN).
sort_report stable_keys_alone(const sort_job& job, const sort_options& options,
                              const inner_sort& sort)
{
  const std::uint64_t n = job.keys.count;
  const auto start = std::chrono::steady_clock::now();
  sort_report report = visit_layout(size_of(job.keys.type), 0, [&]<typename K, typename>() {
    const distinct_equals<K> equals = scan_distinct_equals<K>(job.keys.data, n, options.direction);
    sort_options unstable = options;
    unstable.stable = false;
    sort_report r = sort(job, unstable, true);
    // In place, the job writes its keys (key_array's one exception).
    auto* const out = static_cast<K*>(job.keys_out != nullptr ? job.keys_out
                                                              : const_cast<void*>(job.keys.data));
    if (!equals.zeros.empty())
      host_write(out + equals.below_zero, equals.zeros.data(), equals.zeros.size() * sizeof(K));
    if (!equals.nans.empty())
      host_write(out + (n - equals.nans.size()), equals.nans.data(),
                 equals.nans.size() * sizeof(K));
    return r;
  });
  report.seconds = seconds_since(start);
  return report;
}

}  // namespace

sort_report run_stable_sort(const sort_job& job, const sort_options& options,
                            const inner_sort& sort)
{
  if (!job.values) return stable_keys_alone(job, options, sort);
  const std::uint64_t n = job.keys.count;
  const auto start = std::chrono::steady_clock::now();
  const auto key_bytes = static_cast<std::uint32_t>(size_of(job.keys.type));
  const std::uint32_t value_bytes = job.values->value_bytes;
  const bool separate = job.keys_out != nullptr;
  // In place, the job writes its inputs (key_array's one exception).
  void* const dst_keys = separate ? job.keys_out : const_cast<void*>(job.keys.data);
  void* const dst_values = separate ? job.values_out : const_cast<void*>(job.values->data);
  const std::uint32_t index_bytes = n <= std::numeric_limits<std::uint32_t>::max() ? 4 : 8;
  sort_report report = visit_layout(key_bytes, value_bytes, [&]<typename K, typename V>() {
    return visit_index(index_bytes, [&]<typename I>() {
      // A separate output in memory receives the keys straight from the sort; an in-place job
      // writes its input only once the whole result exists.
      void* const keys_dst = separate ? dst_keys : nullptr;
      permutation<K, I> p = sort_positions<K, I>(job.keys, keys_dst, nullptr, options, sort);
      if (p.canonical)
        restore_canonical(p.keys, p.idx, n, canonical_order(job.keys.type, options),
                          job.keys.data);
      host_buffer values_sorted;
      if constexpr (!std::is_same_v<V, no_value>) {
        host_buffer values_in;
        const V* src = static_cast<const V*>(job.values->data);
        if (!in_memory(src)) {
          values_in = host_buffer{n * sizeof(V)};
          host_read(values_in.data(), src, n * sizeof(V));
          src = static_cast<const V*>(values_in.data());
        }
        V* out = nullptr;
        if (separate && in_memory(dst_values)) {
          out = static_cast<V*>(dst_values);
        } else {
          values_sorted = host_buffer{n * sizeof(V)};
          out = static_cast<V*>(values_sorted.data());
        }
        const auto count = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static) if (count > (std::int64_t{1} << 16))
        for (std::int64_t i = 0; i < count; ++i) out[i] = src[p.idx[i]];
        if (out != dst_values) host_write(dst_values, out, n * sizeof(V));
      }
      if (p.keys != dst_keys) host_write(dst_keys, p.keys, n * sizeof(K));
      return std::move(p.report);
    });
  });
  report.elements = n;
  report.bytes = n * (key_bytes + value_bytes);
  report.seconds = seconds_since(start);
  return report;
}

}  // namespace gpusort::detail

namespace gpusort::detail {

namespace {

template <typename K, typename I>
void restore_canonical_runs(K* sorted, const I* idx, std::uint64_t n, const key_order& canonical,
                            const void* input)
{
  const key_map<K> forward = ordered_map<K>(canonical, true);
  const auto first_at_least = [&](K code) {
    return first_code_at_least<K>(n, forward, code,
                                  [&](std::uint64_t i) { return input_key<K>(sorted, i); });
  };
  constexpr std::uint64_t piece = std::uint64_t{1} << 20;
  std::vector<I> positions;
  std::vector<K> keys;
  for (const K code : {forward.zero_to, forward.nan_code}) {
    const std::uint64_t lo = first_at_least(code);
    const std::uint64_t hi =
        code == forward.nan_code ? n : first_at_least(static_cast<K>(code + 1));
    for (std::uint64_t at = lo; at < hi; at += piece) {
      const std::uint64_t len = std::min(piece, hi - at);
      positions.resize(len);
      keys.resize(len);
      host_read(positions.data(), idx + at, len * sizeof(I));
      for (std::uint64_t i = 0; i < len; ++i)
        keys[i] = input_key<K>(input, static_cast<std::uint64_t>(positions[i]));
      host_write(sorted + at, keys.data(), len * sizeof(K));
    }
  }
}

}  // namespace

void restore_canonical_keys(void* sorted, const void* indices, std::uint32_t index_bytes,
                            std::uint64_t n, dtype type, const sort_options& options,
                            const void* input)
{
  visit_layout(size_of(type), 0, [&]<typename K, typename>() {
    visit_index(index_bytes, [&]<typename I>() {
      restore_canonical_runs(static_cast<K*>(sorted), static_cast<const I*>(indices), n,
                             canonical_order(type, options), input);
    });
  });
}

}  // namespace gpusort::detail
