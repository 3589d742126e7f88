#include "client/progress.hpp"

#include <string>

namespace gpusort::cli {

void progress_bar::update(const progress_event& event)
{
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
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
  const double rate = seconds > 0 ? static_cast<double>(event.bytes_done) / seconds / 1e9 : 0.0;
  // Round 0 is the direct in-core sort; 1 and 2 are the passes of the out-of-core sort.
  const std::string label =
      event.round == 0 ? "in-core sort" : "round " + std::to_string(event.round) + "/2";
  std::fprintf(stream_, "\r%-12s [%s] %5.1f%% %8.2f GB/s", label.c_str(), bar.c_str(),
               fraction * 100.0, rate);
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
