// The programs' log and the library's in it (gpusortd and gpusort log through spdlog): spdlog's
// level for a configured log_level, the library's messages sent into the program's logger, and
// one call that sets both levels, so that the library says what the program would.
#pragma once

#include <gpusort/config.hpp>
#include <gpusort/log.hpp>

#include <spdlog/spdlog.h>

#include <string_view>

namespace gpusort::detail {

inline spdlog::level::level_enum spdlog_level(log_level level) noexcept
{
  static constexpr spdlog::level::level_enum levels[] = {
      spdlog::level::trace, spdlog::level::debug, spdlog::level::info,
      spdlog::level::warn,  spdlog::level::err,   spdlog::level::off};
  return levels[static_cast<int>(level)];
}

/// The library's messages (devices found, failures it cannot throw) into spdlog's default
/// logger, which the program has set up.
inline void send_library_log_to_spdlog()
{
  set_log_sink([](log_level level, std::string_view message) {
    spdlog::log(spdlog_level(level), "{}", message);
  });
}

/// The program's level and the library's, together.
inline void set_program_log_level(log_level level)
{
  spdlog::set_level(spdlog_level(level));
  set_log_level(level);
}

}  // namespace gpusort::detail
