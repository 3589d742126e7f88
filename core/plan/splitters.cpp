#include "core/plan/splitters.hpp"

#include <gpusort/error.hpp>

#include <algorithm>

namespace gpusort::detail {

template <typename K>
splitter_set<K> choose_splitters(const K* keys, std::span<const run> sampled_runs,
                                 std::uint64_t s, std::uint64_t d)
{
  GPUSORT_EXPECTS(d >= 2, "splitters need at least two chunks");
  GPUSORT_EXPECTS(s >= 1, "splitters need at least one candidate per run");
  std::vector<K> candidates;
  candidates.reserve(sampled_runs.size() * s);
  for (const run& r : sampled_runs) {
    GPUSORT_EXPECTS(r.length >= s, "every sampled run must hold s candidates");
    for (std::uint64_t x = 0; x < s; ++x)
      candidates.push_back(keys[r.offset + candidate_position(x, s, r.length)]);
  }
  // The candidates are d sorted runs; a plain sort of at most 2^20 keys is cheaper to reason
  // about than a d-way merge and costs milliseconds.
  std::sort(candidates.begin(), candidates.end());

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

template splitter_set<std::uint32_t> choose_splitters(const std::uint32_t*, std::span<const run>,
                                                      std::uint64_t, std::uint64_t);
template splitter_set<std::uint64_t> choose_splitters(const std::uint64_t*, std::span<const run>,
                                                      std::uint64_t, std::uint64_t);

}  // namespace gpusort::detail
