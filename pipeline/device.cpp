#include "pipeline/device.hpp"

#include "core/checks.hpp"
#include "core/cpu_sort.hpp"
#include "core/keys.hpp"
#include "pipeline/file_window.hpp"

#include <algorithm>
#include <utility>
#include <vector>

namespace gpusort::detail {

namespace {

/// The compensated tail: the splitter's key n times, and the values of the equal elements.
template <typename K, typename V>
void write_tail(const chunk_task& task, const element_layout& layout)
{
  K* dst = static_cast<K*>(task.dst_keys) + task.count;
  const K ordered = static_cast<K>(task.splitter_bits);
  const K key = task.dst_ordered ? ordered : from_ordered<K>(ordered, layout.keys());
  produce_into(dst, task.equal_count, [key](K* out, std::uint64_t, std::uint64_t count) {
    const auto n = static_cast<std::int64_t>(count);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < n; ++i) out[i] = key;
  });
  if constexpr (!std::is_same_v<V, no_value>) {
    V* vdst = static_cast<V*>(task.dst_values) + task.count;
    for (const run& sl : task.equal_slices) {
      host_write(vdst, static_cast<const V*>(task.src_values) + sl.offset, sl.length * sizeof(V));
      vdst += sl.length;
    }
  }
}

}  // namespace

void write_equal_tail(const chunk_task& task, const element_layout& layout)
{
  if (task.equal_count == 0) return;
  visit_layout(layout.key_bytes, layout.value_bytes,
               [&]<typename K, typename V>() { write_tail<K, V>(task, layout); });
}

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

void job_context::add_host_stage(int round, std::string stage, std::uint64_t chunks,
                                 std::uint64_t bytes, double from, double to)
{
  if (!profiling()) return;
  add_profile(stage_profile{.device = "host",
                            .round = round,
                            .stage = std::move(stage),
                            .chunks = chunks,
                            .bytes = bytes,
                            .busy_seconds = to - from,
                            .first_start = from,
                            .last_end = to});
}

void job_context::restart()
{
  const std::lock_guard lock{mutex_};
  aborted_.store(false, std::memory_order_relaxed);
  earlier_ = 0;
  done_ = 0;
}

void job_context::begin_round(int round, std::uint64_t elements, int rounds)
{
  const std::lock_guard lock{mutex_};
  round_ = round;
  rounds_ = rounds;
  earlier_ += done_;
  done_ = 0;
  total_ = elements;
  notify();
}

void job_context::add_done(std::uint64_t elements)
{
  const std::lock_guard lock{mutex_};
  done_ += elements;
  notify();
}

void job_context::notify() const
{
  if (!options_.on_progress) return;
  // The rate over the whole job so far, every round's bytes, as the daemon reports it.
  const double since_start = elapsed();
  const double moved = static_cast<double>((earlier_ + done_) * bytes_per_element_);
  options_.on_progress(progress_event{.round = round_,
                                      .bytes_done = done_ * bytes_per_element_,
                                      .bytes_total = total_ * bytes_per_element_,
                                      .rounds = rounds_,
                                      .rate = since_start > 0 ? moved / since_start : 0.0});
}

int job_context::round() const
{
  const std::lock_guard lock{mutex_};
  return round_;
}

void job_context::add_profile(stage_profile stage)
{
  const std::lock_guard lock{mutex_};
  profile_.push_back(std::move(stage));
}

double seconds_since(std::chrono::steady_clock::time_point start) noexcept
{
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double job_context::elapsed() const noexcept { return seconds_since(start_); }

void job_context::add_round_profile(int round, std::uint64_t chunks, std::uint64_t bytes,
                                    double wall)
{
  add_profile(stage_profile{.device = "all",
                            .round = round,
                            .stage = "round",
                            .chunks = chunks,
                            .bytes = bytes,
                            .busy_seconds = wall,
                            .first_start = 0,
                            .last_end = wall,
                            .round_start = elapsed() - wall,
                            .steps = {}});
}

std::vector<stage_profile> job_context::take_profile()
{
  const std::lock_guard lock{mutex_};
  return std::exchange(profile_, {});
}

const chunk_task* task_queue::pop()
{
  if (!hooks_.prepare) {
    const std::size_t i = next_.fetch_add(1, std::memory_order_relaxed);
    return i < tasks_.size() ? &tasks_[i] : nullptr;
  }
  const std::lock_guard lock{pop_mutex_};
  const std::size_t i = next_.fetch_add(1, std::memory_order_relaxed);
  if (i >= tasks_.size()) return nullptr;
  hooks_.prepare(i, tasks_[i]);
  return &tasks_[i];
}

std::size_t task_queue::index_of(const chunk_task& task) const
{
  const auto index = static_cast<std::size_t>(&task - tasks_.data());
  GPUSORT_EXPECTS(index < tasks_.size(), "a task of another queue");
  return index;
}

void task_queue::wait_to_write(const chunk_task& task, const job_context& ctx)
{
  if (task.write_after != 0) {
    std::unique_lock lock{written_mutex_};
    while (written_prefix_ < task.write_after) {
      // Woken by written(); the timeout lets a cancelled job or a failed device stop the wait.
      written_changed_.wait_for(lock, std::chrono::milliseconds{20});
      lock.unlock();
      ctx.check();
      lock.lock();
    }
  }
  if (hooks_.ready) hooks_.ready(index_of(task));
}

void task_queue::written(const chunk_task& task)
{
  const std::size_t index = index_of(task);
  if (hooks_.written) hooks_.written(index);
  {
    const std::lock_guard lock{written_mutex_};
    written_[index] = true;
    while (written_prefix_ < written_.size() && written_[written_prefix_]) ++written_prefix_;
  }
  written_changed_.notify_all();
}

std::uint64_t task_queue::largest() const noexcept
{
  std::uint64_t m = 0;
  for (const chunk_task& t : tasks_) m = std::max(m, t.count);
  return m;
}

std::size_t task_queue::most_buckets() const noexcept
{
  std::size_t m = 0;
  for (const chunk_task& t : tasks_)
    if (t.scatter != nullptr) m = std::max<std::size_t>(m, t.scatter->buckets->count());
  return m;
}

std::size_t task_queue::most_slices() const noexcept
{
  std::size_t m = 0;
  for (const chunk_task& t : tasks_) {
    m = std::max(m, t.slices.size());
    // A scattering chunk's store tables one slice a bucket (round_store.cpp).
    if (t.scatter != nullptr) m = std::max<std::size_t>(m, t.scatter->buckets->count());
  }
  return std::max(m, hooks_.most_slices);
}

}  // namespace gpusort::detail
