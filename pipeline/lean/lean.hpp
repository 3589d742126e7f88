// The lean out-of-core sort (issue 39): DSPS in place, its host memory beyond the array bounded
// by a limit whatever the array's size. docs/design.md, "The lean path", has the outline, the
// host memory traffic it costs and the measurements.
#pragma once

#include "pipeline/device.hpp"
#include "pipeline/executor.hpp"
#include "pipeline/lean/journal.hpp"
#include "pipeline/lean/plan.hpp"

#include <cstdint>
#include <string>
#include <vector>

namespace gpusort::detail::lean {

/// A journal in a file, for an in-place sort of files that a kill -9 must not lose.
struct journal_file {
  int fd{-1};
  std::string name;
  file_identity keys;
  file_identity values;
};

/// The identity of the file behind a file window's address (its fd's st_dev and st_ino, and
/// the window's offset); nullopt for memory.
std::optional<file_identity> identity_of(const void* address);

struct lean_stats {
  plan shape;
  std::uint64_t buckets{};
  std::uint64_t block{};
  std::uint64_t moves{};
  std::uint64_t parked{};
  std::uint64_t evacuated{};
  double permutation_seconds{};
};

/// Sorts `a` (in place, or from its sources into its destinations) by `p` on `devices`:
/// round 1 sorts every chunk into its place moved down by the room, the buckets come from
/// regular samples, the permutation moves them into their places, round 2 sorts each into
/// the array. `layout.stable`: equal keys keep their input order (round 1's sorts are stable
/// and round 2 gathers every bucket's parts in input order). The journal is `file`'s where it
/// is given, else memory. An in-place job that fails is restored (a permutation of its input)
/// before the error leaves.
lean_stats sort_lean(const job_arrays& a, const element_layout& layout, const plan& p,
                     const std::vector<device*>& devices, job_context& ctx,
                     const journal_file* file, unsigned movers, host_buffer* room = nullptr);

}  // namespace gpusort::detail::lean
