// A one-line progress bar on stderr for terminals.
#pragma once

#include <gpusort/gpusort.hpp>

#include <chrono>

namespace gpusort::cli {

class progress_bar {
 public:
  explicit progress_bar(bool enabled) : enabled_{enabled} {}
  [[nodiscard]] bool enabled() const noexcept { return enabled_; }
  void update(const progress_event& e);
  void finish();

 private:
  bool enabled_;
  bool drawn_{};
  int round_{-1};
  std::chrono::steady_clock::time_point round_start_{};
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace gpusort::cli
