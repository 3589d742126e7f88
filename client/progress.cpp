#include "client/progress.hpp"

#include <cstdio>
#include <string>

namespace gpusort::cli {

void progress_bar::update(const progress_event& e)
{
  const auto now = std::chrono::steady_clock::now();
  if (e.round != round_) {
    round_ = e.round;
    round_start_ = now;
  }
  const bool done = e.bytes_done == e.bytes_total;
  // Redrawing more than ten times a second only costs time.
  if (drawn_ && !done && now - last_draw_ < std::chrono::milliseconds{100}) return;
  last_draw_ = now;
  const double fraction =
      e.bytes_total > 0 ? static_cast<double>(e.bytes_done) / static_cast<double>(e.bytes_total)
                        : 1.0;
  constexpr int width = 30;
  const int filled = static_cast<int>(fraction * width);
  std::string bar(static_cast<std::size_t>(filled), '#');
  bar.resize(width, '.');
  const double seconds = std::chrono::duration<double>(now - round_start_).count();
  const double rate = seconds > 0 ? static_cast<double>(e.bytes_done) / seconds / 1e9 : 0.0;
  const char* label = e.round == 0 ? "sort   " : (e.round == 1 ? "round 1" : "round 2");
  std::fprintf(stderr, "\r%s [%s] %5.1f%% %6.2f GB/s", label, bar.c_str(), fraction * 100.0,
               rate);
  std::fflush(stderr);
  drawn_ = true;
}

void progress_bar::finish()
{
  if (drawn_) std::fputc('\n', stderr);
  drawn_ = false;
}

}  // namespace gpusort::cli
