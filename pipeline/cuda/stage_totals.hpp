// Per-stage totals of one GPU in one round, for sort_options::profile: the out-of-core ring and
// the resident sort both time their copy-in, sort and copy-out work with events and report it
// the same way, with every piece of work kept for a timeline (a few per chunk: only profiled
// jobs make any of this).
#pragma once

#include "pipeline/device.hpp"

#include <gpusort/gpusort.hpp>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

namespace gpusort::detail {

/// encode and decode: round 1's encoding of a compressed job's runs (after the sort, on the
/// compute stream) and round 2's decoding of them (on the copy-in stream, in place of the copy
/// of the keys), apart from the stages they sit in, so that a profile shows what the codec costs.
enum class gpu_stage : unsigned { copy_in, sort, copy_out, encode, decode };
inline constexpr unsigned gpu_stage_count = 5;

/// The stage's name in profiles ("copy in", "sort", ...).
[[nodiscard]] constexpr const char* stage_name(gpu_stage st) noexcept
{
  constexpr std::array<const char*, gpu_stage_count> names{"copy in", "sort", "copy out",
                                                            "encode", "decode"};
  return names[static_cast<unsigned>(st)];
}

class stage_totals {
 public:
  /// One piece of work of `st` on `chunks` chunks, from `begin` to `end` seconds after the
  /// round's origin.
  void add(gpu_stage st, double begin, double end, std::uint64_t bytes,
           std::uint64_t chunks = 1) noexcept
  {
    stage_profile& p = stages_[static_cast<unsigned>(st)];
    p.first_start = p.steps.empty() ? begin : std::min(p.first_start, begin);
    p.last_end = std::max(p.last_end, end);
    p.busy_seconds += end - begin;
    p.bytes += bytes;
    p.chunks += chunks;
    p.steps.emplace_back(begin, end);
  }
  /// Every stage that did work, into the job's profile; `round_start`: seconds from the job's
  /// start to the origin of the times given to add().
  void report(job_context& ctx, const std::string& device, int round, double round_start) const
  {
    for (unsigned st = 0; st < gpu_stage_count; ++st) {
      if (stages_[st].chunks == 0) continue;
      stage_profile p = stages_[st];
      p.device = device;
      p.round = round;
      p.stage = stage_name(static_cast<gpu_stage>(st));
      p.round_start = round_start;
      ctx.add_profile(std::move(p));
    }
  }

 private:
  std::array<stage_profile, gpu_stage_count> stages_{};
};

}  // namespace gpusort::detail
