#include "core/plan/splitters.hpp"

#include "core/checks.hpp"
#include "core/counter_rng.hpp"
#include "core/cpu_sort.hpp"
#include "core/switches.hpp"

#include <gpusort/error.hpp>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

namespace gpusort::detail {

template <typename Source>
void read_candidates(const Source& source, const run& r, std::uint64_t s, candidate_places places,
                     std::uint64_t first, std::uint64_t count, typename Source::key_type* out)
{
  const bool random = places == candidate_places::random;
  source.read(
      r, count,
      [&](std::uint64_t t) {
        const std::uint64_t x = first + t;
        if (!random) return candidate_position(x, s, r.length);
        return random_candidate_position(x, s, r.length, mix64(mix64(r.offset ^ golden) + x));
      },
      out);
}

bool splitters_by_selection_pays(std::uint64_t d, std::uint64_t s) noexcept
{
  // Per candidate, the sort costs about two passes of a byte's digit (bits / 8 of them, each a
  // read and a write); a selection's step costs log2(s) reads in each of the d runs, and it
  // takes bits steps for each of d - 1 splitters. The bits cancel.
  if (d < 2 || s == 0) return false;
  const auto log_s = static_cast<std::uint64_t>(std::bit_width(s));
  return (d - 1) * log_s * 4 < s;
}

template <typename K>
splitter_set<K> splitters_by_selection(std::span<const K> candidates, std::uint64_t d)
{
  GPUSORT_EXPECTS(d >= 2 && candidates.size() % d == 0 && !candidates.empty(),
                  "a selection takes d runs of s candidates");
  const std::uint64_t s = candidates.size() / d;
  const auto run = [&](std::uint64_t i) { return candidates.subspan(i * s, s); };
  K least = run(0).front(), greatest = run(0).back();
  for (std::uint64_t i = 1; i < d; ++i) {
    least = std::min(least, run(i).front());
    greatest = std::max(greatest, run(i).back());
  }
  const auto at_most = [&](K v) {
    std::uint64_t c = 0;
    for (std::uint64_t i = 0; i < d; ++i) {
      const std::span<const K> r = run(i);
      c += static_cast<std::uint64_t>(std::upper_bound(r.begin(), r.end(), v) - r.begin());
    }
    return c;
  };
  splitter_set<K> out;
  out.values.resize(d - 1);
  out.est.resize(d - 1);
  const auto splitters = static_cast<std::int64_t>(d - 1);
#pragma omp parallel for schedule(dynamic) if (d > 16)
  for (std::int64_t kk = 0; kk < splitters; ++kk) {
    const auto k = static_cast<std::uint64_t>(kk);
    // The least v with at least (k + 1) s candidates at most v: the sorted candidates' entry
    // (k + 1) s - 1. at_most(greatest) is all of them, so hi always qualifies.
    const std::uint64_t want = (k + 1) * s;
    K lo = least, hi = greatest;
    while (lo < hi) {
      const K mid = static_cast<K>(lo + (hi - lo) / 2);
      if (at_most(mid) >= want)
        hi = mid;
      else
        lo = static_cast<K>(mid + 1);
    }
    out.values[k] = lo;
    std::uint64_t equal = 0;
    for (std::uint64_t i = 0; i < d; ++i) {
      const std::span<const K> r = run(i);
      const auto [first, last] = std::equal_range(r.begin(), r.end(), lo);
      equal += static_cast<std::uint64_t>(last - first);
    }
    out.est[k] = equal;
  }
  return out;
}

template <typename K>
splitter_set<K> splitters_of(std::span<K> candidates, std::uint64_t d)
{
  GPUSORT_EXPECTS(d >= 2, "splitters need at least two chunks");
  if (candidates.size() % d == 0 && switch_flag("GPUSORT_SPLITTER_SELECT", true) &&
      splitters_by_selection_pays(d, candidates.size() / d))
    return splitters_by_selection(std::span<const K>{candidates}, d);
  // The candidates are d sorted runs, but a d-way merge climbs a tree of log2(d) unpredictable
  // comparisons per candidate: the radix sort, which ignores the runs, was faster at every d
  // (plan_bench on 2 cores, 256Mi keys: 0.031 s against 0.035 s at d = 18, 0.121 against 0.276
  // at d = 554 and 0.550 against 1.455 s at d = 4096, candidates read and sorted).
  {
    // Uninitialised: the sort writes its scratch before it reads it.
    const auto scratch = std::make_unique_for_overwrite<K[]>(
        cpu_sort_scratch_bytes<K, no_value>(candidates.size()) / sizeof(K) + 1);
    cpu_sort<K, no_value>(candidates.data(), nullptr, candidates.size(), scratch.get(), 0);
  }

  const std::uint64_t per_splitter = candidates.size() / d;
  splitter_set<K> out;
  out.values.reserve(d - 1);
  out.est.reserve(d - 1);
  for (std::uint64_t k = 0; k + 1 < d; ++k) {
    const K v = candidates[(k + 1) * per_splitter - 1];
    out.values.push_back(v);
    const auto [lo, hi] = std::equal_range(candidates.begin(), candidates.end(), v);
    out.est.push_back(static_cast<std::uint64_t>(hi - lo));
  }
  return out;
}

template <typename Source>
void read_sample(const Source& source, std::span<const run> sampled_runs, std::uint64_t s,
                 candidate_places places, std::span<const std::uint64_t> first_unread,
                 typename Source::key_type* out)
{
  GPUSORT_EXPECTS(first_unread.size() == sampled_runs.size(), "a first candidate a run");
  // Up to 2^20 reads scattered over gigabytes miss cache and TLB alike (about 0.1 s on one
  // thread, measured on an H100 host, where a whole round takes 0.2 s): read them on every core,
  // in groups of increasing positions, so that an encoded run decodes each block once a group.
  constexpr std::uint64_t group = candidate_group;
  const auto runs = static_cast<std::int64_t>(sampled_runs.size());
  const auto groups = static_cast<std::int64_t>((s + group - 1) / group);
#pragma omp parallel for collapse(2) schedule(dynamic)
  for (std::int64_t i = 0; i < runs; ++i) {
    for (std::int64_t g = 0; g < groups; ++g) {
      const auto r = static_cast<std::size_t>(i);
      const std::uint64_t end = std::min(static_cast<std::uint64_t>(g + 1) * group, s);
      const std::uint64_t x0 = std::max(static_cast<std::uint64_t>(g) * group, first_unread[r]);
      if (x0 >= end) continue;
      read_candidates(source, sampled_runs[r], s, places, x0, end - x0, out + r * s + x0);
    }
  }
}

template <typename Source>
splitter_set<typename Source::key_type> choose_splitters(const Source& source,
                                                         std::span<const run> sampled_runs,
                                                         std::uint64_t s, std::uint64_t d,
                                                         candidate_places places)
{
  using K = typename Source::key_type;
  GPUSORT_EXPECTS(d >= 2, "splitters need at least two chunks");
  GPUSORT_EXPECTS(s >= 1, "splitters need at least one candidate per run");
  for (const run& r : sampled_runs)
    GPUSORT_EXPECTS(r.length >= s, "every sampled run must hold s candidates");
  const std::vector<std::uint64_t> none_read(sampled_runs.size(), 0);
  std::vector<K> candidates(sampled_runs.size() * s);
  read_sample(source, sampled_runs, s, places, std::span<const std::uint64_t>{none_read},
              candidates.data());
  return splitters_of(std::span<K>{candidates}, d);
}

#define GPUSORT_INSTANTIATE_SPLITTERS(Source)                                                 \
  template void read_candidates(const Source&, const run&, std::uint64_t, candidate_places,     \
                                std::uint64_t, std::uint64_t, Source::key_type*);              \
  template void read_sample(const Source&, std::span<const run>, std::uint64_t,               \
                            candidate_places, std::span<const std::uint64_t>,                  \
                            Source::key_type*);                                               \
  template splitter_set<Source::key_type> choose_splitters(const Source&, std::span<const run>, \
                                                           std::uint64_t, std::uint64_t,      \
                                                           candidate_places);
GPUSORT_FOR_EACH_RUN_SOURCE(GPUSORT_INSTANTIATE_SPLITTERS)
#undef GPUSORT_INSTANTIATE_SPLITTERS
template splitter_set<std::uint32_t> splitters_of(std::span<std::uint32_t>, std::uint64_t);
template splitter_set<std::uint64_t> splitters_of(std::span<std::uint64_t>, std::uint64_t);
template splitter_set<std::uint32_t> splitters_by_selection(std::span<const std::uint32_t>,
                                                            std::uint64_t);
template splitter_set<std::uint64_t> splitters_by_selection(std::span<const std::uint64_t>,
                                                            std::uint64_t);

}  // namespace gpusort::detail
