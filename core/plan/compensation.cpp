#include "core/plan/compensation.hpp"

#include "core/checks.hpp"

#include <gpusort/error.hpp>

#include <algorithm>

namespace gpusort::detail {

template <typename K>
compensation_split split_equal(const K* keys, const final_chunk& fc,
                               const splitter_set<K>& splitters, std::uint64_t capacity)
{
  GPUSORT_EXPECTS(fc.index < splitters.values.size(),
                  "only a final chunk with an upper splitter can be compensated");
  const K splitter = splitters.values[fc.index];
  compensation_split out;
  for (const slice& sl : fc.slices) {
    const K* first = keys + sl.offset;
    const K* last = first + sl.length;
    const auto below = static_cast<std::uint64_t>(std::lower_bound(first, last, splitter) - first);
    if (below > 0) out.rest.push_back(slice{sl.offset, below});
    if (below < sl.length) out.equal.push_back(slice{sl.offset + below, sl.length - below});
    out.rest_count += below;
    out.equal_count += sl.length - below;
  }
  GPUSORT_EXPECTS(out.rest_count <= capacity,
                  "the keys strictly between two splitters exceed the plan's bound");
  return out;
}

template compensation_split split_equal(const std::uint32_t*, const final_chunk&,
                                        const splitter_set<std::uint32_t>&, std::uint64_t);
template compensation_split split_equal(const std::uint64_t*, const final_chunk&,
                                        const splitter_set<std::uint64_t>&, std::uint64_t);

}  // namespace gpusort::detail
