#include "core/log.hpp"

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>
#include <utility>

namespace gpusort {

namespace {

std::atomic<log_level> current_level{log_level::warn};

/// The sink and the mutex that keeps its calls apart (an application's sink need not be
/// thread-safe, and stderr lines must not interleave).
struct sink_state {
  std::mutex mutex;
  log_sink sink;
};

sink_state& state()
{
  static sink_state s;
  return s;
}

const char* label(log_level level) noexcept
{
  switch (level) {
    case log_level::trace: return "trace";
    case log_level::debug: return "debug";
    case log_level::info: return "info";
    case log_level::warn: return "warning";
    case log_level::error: return "error";
    case log_level::off: break;
  }
  return "";
}

}  // namespace

void set_log_sink(log_sink sink)
{
  sink_state& s = state();
  const std::lock_guard lock{s.mutex};
  s.sink = std::move(sink);
}

void set_log_level(log_level level) noexcept { current_level.store(level); }

log_level get_log_level() noexcept { return current_level.load(); }

namespace detail {

bool log_enabled(log_level level) noexcept
{
  const log_level least = current_level.load(std::memory_order_relaxed);
  return level != log_level::off && least != log_level::off && level >= least;
}

void log_message(log_level level, std::string_view message) noexcept
{
  sink_state& s = state();
  const std::lock_guard lock{s.mutex};
  try {
    if (s.sink) {
      s.sink(level, message);
      return;
    }
    std::fprintf(stderr, "gpusort: %s: %.*s\n", label(level), static_cast<int>(message.size()),
                 message.data());
  } catch (...) {  // NOLINT(bugprone-empty-catch): a sink that throws loses its message
  }
}

}  // namespace detail

}  // namespace gpusort
