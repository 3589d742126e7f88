#include "core/plan/compensation.hpp"

#include "core/checks.hpp"

#include <gpusort/error.hpp>

#include <algorithm>

namespace gpusort::detail {

template <typename Source>
compensation_split split_equal(const Source& source, const final_chunk& fc,
                               const splitter_set<typename Source::key_type>& splitters,
                               std::uint64_t capacity)
{
  GPUSORT_EXPECTS(fc.index < splitters.values.size(),
                  "only a final chunk with an upper splitter can be compensated");
  const auto splitter = splitters.values[fc.index];
  compensation_split out;
  for (const slice& sl : fc.slices) {
    const std::uint64_t below = source.lower_bound(sl, 0, splitter);
    if (below > 0) out.rest.push_back(slice{sl.offset, below});
    if (below < sl.length) out.equal.push_back(slice{sl.offset + below, sl.length - below});
    out.rest_count += below;
    out.equal_count += sl.length - below;
  }
  GPUSORT_EXPECTS(out.rest_count <= capacity,
                  "the keys strictly between two splitters exceed the plan's bound");
  return out;
}

#define GPUSORT_INSTANTIATE_COMPENSATION(Source)                                    \
  template compensation_split split_equal(const Source&, const final_chunk&,       \
                                          const splitter_set<Source::key_type>&, \
                                          std::uint64_t);
GPUSORT_FOR_EACH_RUN_SOURCE(GPUSORT_INSTANTIATE_COMPENSATION)
#undef GPUSORT_INSTANTIATE_COMPENSATION

}  // namespace gpusort::detail
