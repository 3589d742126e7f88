#include "pipeline/device.hpp"

#include <algorithm>

namespace gpusort::detail {

job_context::job_context(const sort_options& options, std::uint64_t bytes_per_element)
    : options_{options}, bytes_per_element_{bytes_per_element}
{
}

void job_context::check() const
{
  if (options_.cancel.cancelled()) throw cancelled{"the sort was cancelled"};
  if (aborted_.load(std::memory_order_relaxed))
    throw cancelled{"the sort was stopped because another device failed"};
}

void job_context::begin_round(int round, std::uint64_t elements)
{
  const std::lock_guard lock{mutex_};
  round_ = round;
  done_ = 0;
  total_ = elements;
  if (options_.on_progress)
    options_.on_progress(progress_event{round_, 0, total_ * bytes_per_element_});
}

void job_context::add_done(std::uint64_t elements)
{
  const std::lock_guard lock{mutex_};
  done_ += elements;
  if (options_.on_progress)
    options_.on_progress(
        progress_event{round_, done_ * bytes_per_element_, total_ * bytes_per_element_});
}

std::uint64_t task_queue::largest() const noexcept
{
  std::uint64_t m = 0;
  for (const chunk_task& t : tasks_) m = std::max(m, t.count);
  return m;
}

}  // namespace gpusort::detail
