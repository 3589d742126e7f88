// The progress bar of `gpusort sort`: one line on stderr, redrawn in place, for terminals.
#pragma once

#include <gpusort/gpusort.hpp>

#include <chrono>
#include <cstdio>

namespace gpusort::cli {

/// Bytes in a GiB: rates are shown in GiB/s beside sizes in binary units (format_bytes).
inline constexpr double gibibyte = 1024.0 * 1024.0 * 1024.0;

class progress_bar {
 public:
  /// Draws on `stream` (stderr) only when `enabled`.
  progress_bar(bool enabled, std::FILE* stream) : enabled_{enabled}, stream_{stream} {}
  ~progress_bar() { finish(); }
  progress_bar(const progress_bar&) = delete;
  progress_bar& operator=(const progress_bar&) = delete;

  [[nodiscard]] bool enabled() const noexcept { return enabled_; }
  /// Redraws the line: the round, its percentage and rate so far, the time since the sort
  /// began and, once a twentieth of the job is done, an estimate of the time left (over both
  /// rounds when the event says the job has two). Called by the engine's workers, one at a time.
  void update(const progress_event& event);
  /// Ends the line so that what follows starts on a fresh one.
  void finish() noexcept;

 private:
  bool enabled_;
  std::FILE* stream_;
  bool drawn_{};
  int round_{-1};
  std::chrono::steady_clock::time_point start_{};
  std::chrono::steady_clock::time_point round_start_{};
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace gpusort::cli
