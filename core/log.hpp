// The library's logging inside the tree: detail::log(level, format, args...) formats only when
// the level is on and hands the line to the application's sink (include/gpusort/log.hpp).
#pragma once

#include <gpusort/log.hpp>

#include <fmt/format.h>

#include <string_view>
#include <utility>

namespace gpusort::detail {

[[nodiscard]] bool log_enabled(log_level level) noexcept;
/// Passes one message to the sink; never throws (a failing sink loses the message).
void log_message(log_level level, std::string_view message) noexcept;

template <typename... Args>
void log(log_level level, fmt::format_string<Args...> format, Args&&... args) noexcept
{
  if (!log_enabled(level)) return;
  try {
    log_message(level, fmt::format(format, std::forward<Args>(args)...));
  } catch (...) {  // NOLINT(bugprone-empty-catch): out of memory while formatting a log line
  }
}

}  // namespace gpusort::detail
