// The library's messages kept for a test's scope, for tests that check what the library said
// (the GPU fault sweep's warnings, the sort a GPU took for a round's chunks).
#pragma once

#include <gpusort/log.hpp>

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace gpusort::test {

class captured_log {
 public:
  /// Keeps every message at `level` and above (the library's level for the scope).
  explicit captured_log(log_level level = get_log_level()) : before_{get_log_level()}
  {
    set_log_level(level);
    set_log_sink([this](log_level, std::string_view message) { lines_.emplace_back(message); });
  }
  ~captured_log()
  {
    set_log_sink({});
    set_log_level(before_);
  }
  captured_log(const captured_log&) = delete;
  captured_log& operator=(const captured_log&) = delete;
  captured_log(captured_log&&) = delete;
  captured_log& operator=(captured_log&&) = delete;

  /// Messages that contain `part`.
  [[nodiscard]] std::size_t count(std::string_view part) const
  {
    return static_cast<std::size_t>(std::count_if(lines_.begin(), lines_.end(), [&](const auto& l) {
      return l.find(part) != std::string::npos;
    }));
  }
  void clear() { lines_.clear(); }

 private:
  log_level before_;
  std::vector<std::string> lines_;
};

}  // namespace gpusort::test
