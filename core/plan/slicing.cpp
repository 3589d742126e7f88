#include "core/plan/slicing.hpp"

#include "core/checks.hpp"
#include "core/switches.hpp"

#include <gpusort/error.hpp>

#include <algorithm>
#include <chrono>
#include <numeric>

namespace gpusort::detail {

namespace {

/// upper_bound of `key` in run r from `from`, searched first in the `step` positions after it,
/// then in windows four times larger: consecutive splitters cut a run about length / d apart,
/// so the first window mostly holds the answer and the search stays within a few cache lines
/// instead of crossing the whole run (d^2 g searches: 11M at d = 3300, issue 44).
template <typename Source>
std::uint64_t upper_bound_near(const Source& source, const run& r, std::uint64_t from,
                               typename Source::key_type key, std::uint64_t step)
{
  for (;;) {
    const std::uint64_t end = r.length - from > step ? from + step : r.length;
    // A prefix of the run is a piece of it: the source searches [from, end).
    const std::uint64_t at = source.upper_bound(run{r.offset, end}, from, key);
    if (at < end || end == r.length) return at;
    from = end;
    step *= 4;
  }
}

/// The final chunks from the cut table: cut[r * (d + 1) + k] is where final chunk k's slice
/// of run r starts (cut[r * (d + 1)] = 0, cut[r * (d + 1) + d] the run's length).
std::vector<final_chunk> finals_from_cuts(std::span<const run> runs,
                                          const std::vector<std::uint64_t>& cut, std::uint64_t d)
{
  const std::uint64_t nruns = runs.size();
  // Each final chunk from its column of the cut table, on every core: d^2 g slices in all,
  // read with a stride of d + 1 words (16.7M at d = 4096 took a second on one thread).
  std::vector<final_chunk> chunks(d);
  const auto d_signed = static_cast<std::int64_t>(d);
#pragma omp parallel for schedule(dynamic, 4)
  for (std::int64_t kk = 0; kk < d_signed; ++kk) {
    const auto k = static_cast<std::uint64_t>(kk);
    final_chunk& fc = chunks[k];
    fc.index = k;
    fc.slices.reserve(nruns);
    for (std::uint64_t r = 0; r < nruns; ++r) {
      const std::uint64_t lo = cut[r * (d + 1) + k];
      const std::uint64_t hi = cut[r * (d + 1) + k + 1];
      if (hi > lo) fc.slices.push_back(slice{runs[r].offset + lo, hi - lo});
      fc.size += hi - lo;
    }
  }
  std::uint64_t offset = 0;
  for (final_chunk& fc : chunks) {
    fc.out_offset = offset;
    offset += fc.size;
  }
  return chunks;
}

/// Key `at` of the sorted piece `r`.
template <typename Source>
typename Source::key_type key_at(const Source& source, const run& r, std::uint64_t at)
{
  typename Source::key_type key{};
  source.read(r, 1, [at](std::uint64_t) { return at; }, &key);
  return key;
}

}  // namespace

template <typename Source>
std::vector<final_chunk> slice_runs(const Source& source, std::span<const run> runs,
                                    const splitter_set<typename Source::key_type>& splitters)
{
  const std::uint64_t d = splitters.values.size() + 1;
  const std::uint64_t nruns = runs.size();
  // cut[r * (d + 1) + k]: start of final chunk k's slice within run r.
  std::vector<std::uint64_t> cut(nruns * (d + 1));
  const auto nruns_signed = static_cast<std::int64_t>(nruns);
#pragma omp parallel for schedule(dynamic, 16)
  for (std::int64_t rr = 0; rr < nruns_signed; ++rr) {
    const auto r = static_cast<std::uint64_t>(rr);
    std::uint64_t* c = &cut[r * (d + 1)];
    c[0] = 0;
    std::uint64_t from = 0;
    const std::uint64_t step = std::max<std::uint64_t>(runs[r].length / d, 64);
    for (std::uint64_t k = 0; k + 1 < d; ++k) {
      // Splitters are non-decreasing, so each search starts where the last one ended.
      from = upper_bound_near(source, runs[r], from, splitters.values[k], step);
      c[k + 1] = from;
    }
    c[d] = runs[r].length;
  }
  return finals_from_cuts(runs, cut, d);
}

template <typename Source>
std::vector<final_chunk> slice_dealt_runs(const Source& source, const chunk_plan& plan,
                                          std::span<const run> runs,
                                          const splitter_set<typename Source::key_type>& splitters)
{
  const std::uint64_t d = splitters.values.size() + 1;
  GPUSORT_EXPECTS(d == plan.d, "round 2 cuts the plan's runs by d - 1 splitters");
  const std::uint64_t g = plan.runs_per_chunk();
  // The cuts below follow from the dealing, so the runs must be the plan's bins.
  GPUSORT_EXPECTS(std::ranges::equal(runs, make_run_table(plan)),
                  "dealt cuts need the plan's run table (make_run_table)");
  std::vector<std::uint64_t> cut(runs.size() * (d + 1));
  const auto d_signed = static_cast<std::int64_t>(d);
#pragma omp parallel for schedule(dynamic, 1)
  for (std::int64_t ii = 0; ii < d_signed; ++ii) {
    const auto i = static_cast<std::uint64_t>(ii);
    const std::uint64_t m = plan.chunk_size(i);
    const run* bins = &runs[i * g];
    // Bin j of chunk i holds the chunk's sorted positions j, j + g, j + 2g, ...: a splitter
    // with c of the chunk's keys at most it leaves ceil((c - j) / g) of them in bin j. c comes
    // from bin 0's cut u (position g(u-1) is at most the splitter, position gu above it) and
    // the keys at index u - 1 of bins 1.. (positions g(u-1)+1 ..., in order), one search and
    // log2 g keys instead of g searches (d^2 g cuts: 16.7M at d = 4096, issue 44).
    const std::uint64_t step = std::max<std::uint64_t>(bins[0].length / d, 64);
    std::uint64_t from = 0;
    for (std::uint64_t j = 0; j < g; ++j) {
      cut[(i * g + j) * (d + 1)] = 0;
      cut[(i * g + j) * (d + 1) + d] = bins[j].length;
    }
    for (std::uint64_t k = 0; k + 1 < d; ++k) {
      const auto splitter = splitters.values[k];
      from = upper_bound_near(source, bins[0], from, splitter, step);
      std::uint64_t c = 0;
      if (from > 0) {
        const std::uint64_t base = g * (from - 1);
        // Bins [1, hi) hold a key at index from - 1; the first above the splitter ends c.
        std::uint64_t lo = 1;
        std::uint64_t hi = std::min(g, m - base);
        while (lo < hi) {
          const std::uint64_t mid = lo + (hi - lo) / 2;
          if (splitter < key_at(source, bins[mid], from - 1)) {
            hi = mid;
          } else {
            lo = mid + 1;
          }
        }
        c = base + lo;
      }
      for (std::uint64_t j = 0; j < g; ++j)
        cut[(i * g + j) * (d + 1) + k + 1] = c > j ? (c - j + g - 1) / g : 0;
    }
  }
  return finals_from_cuts(runs, cut, d);
}

template <typename Source>
round2_cuts<typename Source::key_type> cut_runs(
    const Source& source, const chunk_plan& plan, std::span<const run> runs,
    std::span<const run> sampled, std::vector<typename Source::key_type> first_candidates)
{
  using K = typename Source::key_type;
  using clock = std::chrono::steady_clock;
  const auto since = [](clock::time_point t) {
    return std::chrono::duration<double>(clock::now() - t).count();
  };
  GPUSORT_EXPECTS(first_candidates.empty() ||
                      first_candidates.size() == plan.d * plan.first_s(),
                  "the first sample read ahead holds first_s() candidates of every run");
  // GPUSORT_DEALT_CUTS=0: every run searched on its own, the A/B of slice_dealt_runs.
  const bool dealt = switch_flag("GPUSORT_DEALT_CUTS", true);
  round2_cuts<K> out;
  const auto choose = [&](std::uint64_t s, candidate_places places, std::vector<K>* read) {
    auto t = clock::now();
    out.splitters = read != nullptr && !read->empty()
                        ? splitters_of(std::span<K>{*read}, plan.d)
                        : choose_splitters(source, sampled, s, plan.d, places);
    out.splitters_seconds = since(t);
    t = clock::now();
    out.finals = dealt ? slice_dealt_runs(source, plan, runs, out.splitters)
                       : slice_runs(source, runs, out.splitters);
    out.cuts_seconds = since(t);
    out.s = s;
  };
  // What the bound promises of every final chunk: at most final_bound() elements, or at most
  // `bound` strictly below its upper splitter (the rest equal to it, which compensation takes).
  const auto kept_bound = [&](const final_chunk& fc) {
    if (fc.size <= plan.final_bound()) return true;
    if (fc.index >= out.splitters.values.size()) return false;
    const auto splitter = out.splitters.values[fc.index];
    std::uint64_t below = 0;
    for (const slice& sl : fc.slices) below += source.lower_bound(sl, 0, splitter);
    return below <= plan.bound;
  };
  if (plan.first_s() < plan.s) {
    choose(plan.first_s(), first_places(plan), &first_candidates);
    if (std::ranges::all_of(out.finals, kept_bound)) return out;
    out.dropped_seconds = out.splitters_seconds + out.cuts_seconds;
    choose(plan.s, candidate_places::piece_ends, nullptr);
  } else {
    choose(plan.s, first_places(plan), &first_candidates);
  }
  return out;
}

run sampled_run(const chunk_plan& plan, std::uint64_t i) noexcept
{
  const std::uint64_t m = plan.chunk_size(i);
  const std::uint64_t g = plan.runs_per_chunk();
  return run{plan.chunk_begin(i) + bin_offset(m, g, plan.sampled_chunk),
             bin_size(m, g, plan.sampled_chunk)};
}

std::vector<run> sampled_chunk_runs(const chunk_plan& plan)
{
  std::vector<run> sampled(plan.d);
  for (std::uint64_t i = 0; i < plan.d; ++i) sampled[i] = sampled_run(plan, i);
  return sampled;
}

std::vector<std::uint64_t> largest_first(const std::vector<final_chunk>& chunks)
{
  std::vector<std::uint64_t> order(chunks.size());
  std::iota(order.begin(), order.end(), std::uint64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::uint64_t a, std::uint64_t b) {
    return chunks[a].size > chunks[b].size;
  });
  return order;
}

#define GPUSORT_INSTANTIATE_SLICING(Source)                                                 \
  template std::vector<final_chunk> slice_runs(const Source&, std::span<const run>,        \
                                               const splitter_set<Source::key_type>&);     \
  template std::vector<final_chunk> slice_dealt_runs(                                      \
      const Source&, const chunk_plan&, std::span<const run>,                               \
      const splitter_set<Source::key_type>&);                                               \
  template round2_cuts<Source::key_type> cut_runs(const Source&, const chunk_plan&,         \
                                                  std::span<const run>, std::span<const run>, \
                                                  std::vector<Source::key_type>);
GPUSORT_FOR_EACH_RUN_SOURCE(GPUSORT_INSTANTIATE_SLICING)
#undef GPUSORT_INSTANTIATE_SLICING

}  // namespace gpusort::detail
