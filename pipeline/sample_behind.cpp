#include "pipeline/sample_behind.hpp"

#include "core/plan/run_source.hpp"
#include "core/plan/splitters.hpp"
#include "core/checks.hpp"
#include "core/switches.hpp"

#include <gpusort/error.hpp>

#include <algorithm>

namespace gpusort::detail {

bool sample_behind_enabled() noexcept { return switch_flag("GPUSORT_SAMPLE_BEHIND", true); }

template <typename K>
sample_behind<K>::sample_behind(const chunk_plan& plan, const K* keys)
    : s_{plan.first_s()},
      places_{first_places(plan)},
      keys_{keys},
      sampled_(sampled_chunk_runs(plan)),
      candidates_(plan.d * plan.first_s()),
      first_unread_(plan.d, 0)
{
  GPUSORT_EXPECTS(plan.d >= 2 && s_ >= 1, "a sample behind round 1 needs two rounds");
  for (const run& r : sampled_)
    GPUSORT_EXPECTS(r.length >= s_, "every sampled run must hold s candidates");
  reader_ = std::thread{[this] { read_written(); }};
}

template <typename K>
sample_behind<K>::~sample_behind()
{
  stop();
}

template <typename K>
void sample_behind<K>::stop() noexcept
{
  {
    // Set under the mutex, so that the reader cannot miss it between its check and its wait.
    const std::scoped_lock lock{mutex_};
    stop_ = true;
  }
  changed_.notify_all();
  if (reader_.joinable()) reader_.join();
}

template <typename K>
void sample_behind<K>::written(std::size_t chunk)
{
  GPUSORT_EXPECTS(chunk < sampled_.size(), "round 1 wrote a chunk the plan does not have");
  {
    const std::scoped_lock lock{mutex_};
    written_.push_back(chunk);
  }
  changed_.notify_one();
}

template <typename K>
void sample_behind<K>::read_written()
{
  const raw_runs<K> source{keys_};
  for (;;) {
    std::size_t i = 0;
    {
      std::unique_lock lock{mutex_};
      changed_.wait(lock, [&] { return stop_.load() || !written_.empty(); });
      // Stopping leaves what is queued to take(), which reads it on every core.
      if (stop_.load()) return;
      i = written_.front();
      written_.pop_front();
    }
    // One thread, in order of position, a group at a time: the rounds' own threads keep the
    // cores they need, and take() waits for one group at most.
    std::uint64_t& x = first_unread_[i];
    while (x < s_) {
      if (stop_.load(std::memory_order_relaxed)) return;
      const std::uint64_t count = std::min(candidate_group, s_ - x);
      read_candidates(source, sampled_[i], s_, places_, x, count, candidates_.data() + i * s_ + x);
      x += count;
      if (x == s_) ++read_behind_;
    }
  }
}

template <typename K>
std::vector<K> sample_behind<K>::take()
{
  stop();
  read_sample(raw_runs<K>{keys_}, std::span<const run>{sampled_}, s_, places_,
              std::span<const std::uint64_t>{first_unread_}, candidates_.data());
  return std::move(candidates_);
}

template class sample_behind<std::uint32_t>;
template class sample_behind<std::uint64_t>;

}  // namespace gpusort::detail
