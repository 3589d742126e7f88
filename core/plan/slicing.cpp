#include "core/plan/slicing.hpp"

#include <gpusort/error.hpp>

#include <algorithm>
#include <numeric>

namespace gpusort::detail {

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
    for (std::uint64_t k = 0; k + 1 < d; ++k) {
      // Splitters are non-decreasing, so each search starts where the last one ended.
      from = source.upper_bound(runs[r], from, splitters.values[k]);
      c[k + 1] = from;
    }
    c[d] = runs[r].length;
  }

  std::vector<final_chunk> chunks(d);
  std::uint64_t offset = 0;
  for (std::uint64_t k = 0; k < d; ++k) {
    final_chunk& fc = chunks[k];
    fc.index = k;
    fc.out_offset = offset;
    for (std::uint64_t r = 0; r < nruns; ++r) {
      const std::uint64_t lo = cut[r * (d + 1) + k];
      const std::uint64_t hi = cut[r * (d + 1) + k + 1];
      if (hi > lo) fc.slices.push_back(slice{runs[r].offset + lo, hi - lo});
      fc.size += hi - lo;
    }
    offset += fc.size;
  }
  return chunks;
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

#define GPUSORT_INSTANTIATE_SLICING(Source)                                          \
  template std::vector<final_chunk> slice_runs(const Source&, std::span<const run>, \
                                               const splitter_set<Source::key_type>&);
GPUSORT_FOR_EACH_RUN_SOURCE(GPUSORT_INSTANTIATE_SLICING)
#undef GPUSORT_INSTANTIATE_SLICING

}  // namespace gpusort::detail
