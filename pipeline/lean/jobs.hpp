// The engine's jobs on the lean path (lean.hpp): a sort (keys or pairs, in place or into
// separate outputs, stable or not, either float order) and an argsort, each planned within a
// host memory limit, or refused up front naming what it needs.
#pragma once

#include "pipeline/device.hpp"
#include "pipeline/file_window.hpp"
#include "pipeline/host_memory.hpp"
#include "pipeline/lean/plan.hpp"

#include <gpusort/gpusort.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

namespace gpusort::detail::lean {

/// What the engine lends a lean job.
struct engine_parts {
  std::vector<device*> devices;
  bool gpus{};
  std::mutex* gpu_mutex{};  ///< GPU jobs run one at a time
  std::shared_ptr<page_locker> locker;
  unsigned threads{};  ///< host threads (0: every core)
  /// A GPU engine's room for jobs on memory, kept from job to job (pinned where the round-1
  /// buffer would be: the copy engines then reach it directly, and its pages are made once):
  /// a buffer of at least the bytes asked, used under gpu_mutex. Null: each job makes its own.
  std::function<host_buffer*(std::uint64_t bytes)> room{};
};

/// The lean plan of a job of `n` elements of `layout` on `parts`' devices within `limit`
/// bytes; throws config_error naming the least limit that works.
plan plan_job(const engine_parts& parts, std::uint64_t n, const element_layout& layout,
              std::uint64_t limit);
/// The least host memory a lean job of `n` elements of `layout` takes; 0 where none works.
std::uint64_t least_bytes(const engine_parts& parts, std::uint64_t n,
                          const element_layout& layout);

/// engine::sort on the lean path, within `limit` bytes beyond the arrays.
sort_report run_sort(const engine_parts& parts, const sort_job& job, const sort_options& options,
                     std::uint64_t limit);

/// engine::argsort on the lean path: the keys copied to keys_out, the positions made in
/// indices_out, and the pairs sorted there stably. Needs keys_out (refused without).
sort_report run_argsort(const engine_parts& parts, const argsort_job& job,
                        const sort_options& options, std::uint64_t limit);

/// Why an argsort cannot run lean, or "" where it can.
std::string argsort_refusal(const argsort_job& job);

}  // namespace gpusort::detail::lean
