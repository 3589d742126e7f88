// What the fault sweeps share (tests/*/fault_*_test.cpp): which call numbers N to fail, bounded
// for CI, and the leak counters read before and after each failed job.
#pragma once

#include "bench/soak_probe.hpp"  // soak_scale(): GPUSORT_SOAK_SCALE, shared with the soak
#include "core/fault.hpp"
#include "pipeline/file_window.hpp"
#include "tests/support/open_fds.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <ostream>
#include <random>
#include <string>
#include <vector>

namespace gpusort::test_support {

/// The calls to fail, from 1 to `count`: every one when there are at most `budget` (scaled by
/// GPUSORT_SOAK_SCALE, 0.25 under asan and 0.1 under tsan; at least 4), else the first, the
/// last and a stride through the rest from an offset drawn from `seed`, so that a seed names
/// the sample and another seed covers other calls.
inline std::vector<std::uint64_t> sweep_points(std::uint64_t count, std::uint64_t budget,
                                               std::uint64_t seed)
{
  const auto scaled = std::max<std::uint64_t>(
      4, static_cast<std::uint64_t>(static_cast<double>(budget) * soak::soak_scale()));
  std::vector<std::uint64_t> points;
  if (count == 0) return points;
  if (count <= scaled) {
    for (std::uint64_t n = 1; n <= count; ++n) points.push_back(n);
    return points;
  }
  const std::uint64_t stride = (count + scaled - 1) / scaled;
  std::mt19937_64 rng{seed};
  points.push_back(1);
  for (std::uint64_t n = 1 + rng() % stride; n <= count; n += stride)
    if (n != 1 && n != count) points.push_back(n);
  points.push_back(count);
  return points;
}

/// What a job may leave behind: descriptors of this process and the pipeline's memory.
struct held_resources {
  std::size_t fds{};
  std::int64_t host{}, pinned{}, device{}, registered{};

  static held_resources now()
  {
    // A job's output mappings are unlocked and unmapped on a thread of their own, after it.
    detail::wait_for_output_releases();
    using detail::bytes_held;
    using detail::held;
    return {open_fd_count(), bytes_held(held::host), bytes_held(held::pinned),
            bytes_held(held::device), bytes_held(held::registered)};
  }
  friend bool operator==(const held_resources&, const held_resources&) = default;
  friend std::ostream& operator<<(std::ostream& os, const held_resources& r)
  {
    return os << "{fds " << r.fds << ", host " << r.host << " B, pinned " << r.pinned
              << " B, device " << r.device << " B, registered " << r.registered << " B}";
  }
};

/// "all:17", "read:3:sticky": a plan as GPUSORT_FAULT spells it, for failure messages.
inline std::string describe(const detail::fault::plan& p)
{
  using detail::fault::scope;
  std::string s = p.group == scope::one    ? std::string{detail::fault::name_of(p.target)}
                  : p.group == scope::cuda ? "cuda"
                  : p.group == scope::io   ? "io"
                                           : "all";
  s += ":" + std::to_string(p.nth);
  if (p.sticky) s += ":sticky";
  if (p.error != 0) s += ":" + std::to_string(p.error);
  return s;
}

}  // namespace gpusort::test_support
