// Compensation (GPUMemSort section 4.3, as design.md section 2 runs it): keys equal to a
// splitter break the final-chunk bound. A final chunk larger than the device capacity is split
// into the elements equal to its upper splitter (a tail of each sorted slice, found by binary
// search) and the rest; only the rest is sorted, and the output range's tail is filled with the
// splitter value (the values of those elements are carried along unsorted).
#pragma once

#include "core/plan/slicing.hpp"

#include <cstdint>
#include <vector>

namespace gpusort::detail {

struct compensation_split {
  std::vector<slice> rest;   ///< keys strictly below the splitter: to sort
  std::vector<slice> equal;  ///< keys equal to the splitter: to the tail
  std::uint64_t rest_count{};
  std::uint64_t equal_count{};
};

/// Whether final chunk `fc` must be compensated on a device holding `capacity` elements.
constexpr bool needs_compensation(const final_chunk& fc, std::uint64_t capacity) noexcept
{
  return fc.size > capacity;
}

/// Splits `fc`, whose slices `source` reads (run_source.hpp), by its upper splitter. The plan's bound guarantees rest_count <= capacity;
/// a violation is a logic_error, never a silent overflow of the device buffer.
template <typename Source>
compensation_split split_equal(const Source& source, const final_chunk& fc,
                               const splitter_set<typename Source::key_type>& splitters,
                               std::uint64_t capacity);

}  // namespace gpusort::detail
