// The median GPU time of a piece of work queued on a stream, for the GPU benchmarks
// (sample_bench, codec_bench): CUDA events around each run, one untimed warm-up first.
#pragma once

#include "pipeline/cuda/resources.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <functional>
#include <vector>

namespace gpusort::bench {

/// Median of `reps` timed runs of `work` on `s` in seconds; `before`, when given, runs before
/// each one untimed (a sort's input put back).
inline double gpu_time_median(cudaStream_t s, int reps, const std::function<void()>& before,
                              const std::function<void()>& work)
{
  using gpusort::cuda::cuda_event;
  using gpusort::cuda::event_timing;
  cuda_event start{event_timing::enabled}, stop{event_timing::enabled};
  std::vector<double> times;
  for (int r = 0; r <= reps; ++r) {
    if (before) before();
    start.record(s);
    work();
    stop.record(s);
    stop.synchronize();
    if (r > 0) times.push_back(gpusort::cuda::elapsed_ms(start, stop) / 1e3);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace gpusort::bench
