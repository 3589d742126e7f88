// Round 2's first sample read behind round 1 (DSPS on raw runs). Run i of the sampled new chunk
// is bin sampled_chunk of chunk i's round-1 output, final once round 1 stored that chunk; so
// its candidates are read then, on a thread of their own, while the devices take the later
// chunks. Between the rounds only the runs not read yet, the candidates' sort and the cuts are
// left: at budget 1/8 on an H200 host (d = 11) the splitters took 0.006-0.029 s between rounds
// of 0.19 s each, the copy engines idle (bench/results/h200-20261201-s21, call 3).
#pragma once

#include "core/plan/chunk_plan.hpp"
#include "core/plan/slicing.hpp"

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>
#include <vector>

namespace gpusort::detail {

/// Whether round 1 reads round 2's sample behind it (GPUSORT_SAMPLE_BEHIND, default 1; 0 reads
/// it between the rounds, the A/B).
[[nodiscard]] bool sample_behind_enabled() noexcept;

template <typename K>
class sample_behind {
 public:
  /// The candidates of `plan`'s first sample (cut_runs: plan.first_s() a run, first_places)
  /// from the round-1 keys at `keys`, which must outlive this object.
  sample_behind(const chunk_plan& plan, const K* keys);
  /// Stops the reader (a failed round 1): it ends the run it reads.
  ~sample_behind();
  sample_behind(const sample_behind&) = delete;
  sample_behind& operator=(const sample_behind&) = delete;

  /// Chunk i of round 1 holds its result in host memory (task_hooks::written, any thread).
  void written(std::size_t chunk);

  /// Once round 1 has ended: the candidates, d times plan.first_s(), run i's at i * s. The
  /// reader stops after the group of candidates it reads (candidate_group), and what is not
  /// read yet (the last chunks' runs, mostly) is read now, on every core. Called once.
  [[nodiscard]] std::vector<K> take();

  /// Runs whose candidates were read while round 1 ran so far (final after take()).
  [[nodiscard]] std::uint64_t read_behind() const noexcept { return read_behind_.load(); }

 private:
  void read_written();
  void stop() noexcept;

  std::uint64_t s_;
  candidate_places places_;
  const K* keys_;
  std::vector<run> sampled_;
  std::vector<K> candidates_;
  /// Run i's candidates before this one are in (s: all); the reader's alone until joined.
  std::vector<std::uint64_t> first_unread_;
  std::atomic<std::uint64_t> read_behind_{0};
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::size_t> written_;
  std::atomic<bool> stop_{false};  ///< set under mutex_; the reader checks it between groups
  std::thread reader_;  ///< last: it starts once the rest exists
};

}  // namespace gpusort::detail
