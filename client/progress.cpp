#include "client/progress.hpp"

#include <algorithm>

#include <string>

namespace gpusort::cli {

void progress_bar::update(const progress_event& event)
{
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (round_ < 0) start_ = now;
  if (event.round != round_) {
    round_ = event.round;
    round_start_ = now;
  } else if (event.bytes_done < event.bytes_total &&
             now - last_draw_ < std::chrono::milliseconds{100}) {
    return;  // more than ten redraws a second only cost time; a round's end is always drawn
  }
  last_draw_ = now;
  const double fraction = event.bytes_total > 0 ? static_cast<double>(event.bytes_done) /
                                                      static_cast<double>(event.bytes_total)
                                                : 1.0;
  constexpr int width = 30;
  std::string bar(static_cast<std::size_t>(fraction * width), '#');
  bar.resize(width, '.');
  const double seconds = std::chrono::duration<double>(now - round_start_).count();
  const double rate =
      seconds > 0 ? static_cast<double>(event.bytes_done) / seconds / gibibyte : 0.0;
  // Round 0 is the direct in-core sort; a job of one round (rounds 1) is a round trip through
  // the GPUs; 1 and 2 of 2 are the passes of the out-of-core sort; the lean path's three are
  // its two rounds with the permutation between them. A daemon that does not say how many
  // rounds there are sends rounds 0.
  const bool lean = event.rounds == 3;
  const std::string label =
      event.round == 0 || event.rounds == 1 ? "in-core sort"
      : lean && event.round == 2            ? "permutation"
      : "round " + std::to_string(lean && event.round == 3 ? 2 : event.round) + "/2";
  // The job's share done: both rounds move the same bytes, so each is half of a two-round job;
  // the lean path's permutation, a host pass, took about a third of a round on the H200 host
  // (bench/results/h200-20261129-lean/), a seventh of the job.
  double job_fraction = -1.0;  // unknown: no estimate
  if (event.rounds == 2) {
    job_fraction = (event.round - 1 + fraction) / 2.0;
  } else if (lean) {
    constexpr double share[] = {0.0, 3.0 / 7, 1.0 / 7, 3.0 / 7};
    const int r = std::clamp(event.round, 1, 3);
    job_fraction = share[r] * fraction;
    for (int earlier = 1; earlier < r; ++earlier) job_fraction += share[earlier];
  } else if (event.rounds == 1 || event.round == 0) {
    job_fraction = fraction;
  }
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  std::string times = " " + std::to_string(static_cast<long long>(elapsed)) + " s";
  if (job_fraction >= 0.05 && job_fraction < 1.0) {
    const double left = elapsed * (1.0 - job_fraction) / job_fraction;
    times += ", about " + std::to_string(static_cast<long long>(left + 0.5)) + " s left";
  }
  std::fprintf(stream_, "\r%-12s [%s] %5.1f%% %8.2f GiB/s%-22s", label.c_str(), bar.c_str(),
               fraction * 100.0, rate, times.c_str());
  std::fflush(stream_);
  drawn_ = true;
}

void progress_bar::finish() noexcept
{
  if (drawn_) {
    std::fputc('\n', stream_);
    std::fflush(stream_);
  }
  drawn_ = false;
}

}  // namespace gpusort::cli
