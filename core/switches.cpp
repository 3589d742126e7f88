#include "core/switches.hpp"

#include "core/log.hpp"

#include <gpusort/units.hpp>

#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

namespace gpusort::detail {

std::optional<std::string> switch_text(const char* name)
{
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string{v};
}

void warn_ignored_switch(const char* name, std::string_view value,
                         std::string_view takes) noexcept
{
  static std::mutex mutex;
  static std::set<std::string, std::less<>> warned;
  try {
    const std::lock_guard lock{mutex};
    if (!warned.emplace(name).second) return;
  } catch (...) {  // NOLINT(bugprone-empty-catch): no memory to remember it: warn again
  }
  log(log_level::warn, "{}={} is ignored: it takes {}", name, value, takes);
}

bool switch_flag(const char* name, bool fallback) noexcept
{
  try {
    const std::optional<std::string> v = switch_text(name);
    if (!v) return fallback;
    if (*v == "1") return true;
    if (*v == "0") return false;
    warn_ignored_switch(name, *v, "1 or 0");
  } catch (...) {  // NOLINT(bugprone-empty-catch): no memory to read it: unset
  }
  return fallback;
}

std::optional<std::uint64_t> switch_count(const char* name, std::uint64_t lo,
                                          std::uint64_t hi) noexcept
{
  try {
    const std::optional<std::string> v = switch_text(name);
    if (!v) return std::nullopt;
    const std::optional<std::uint64_t> n = parse_count(*v);
    if (n && *n >= lo && *n <= hi) return n;
    warn_ignored_switch(name, *v,
                        "a count from " + std::to_string(lo) + " to " + std::to_string(hi));
  } catch (...) {  // NOLINT(bugprone-empty-catch): no memory to read it: unset
  }
  return std::nullopt;
}

std::optional<std::string_view> switch_word(const char* name,
                                            std::initializer_list<std::string_view> words) noexcept
{
  try {
    const std::optional<std::string> v = switch_text(name);
    if (!v) return std::nullopt;
    for (const std::string_view w : words)
      if (w == *v) return w;  // the caller's literal: it outlives the call
    std::string takes;
    for (const std::string_view w : words) {
      if (!takes.empty()) takes += ", ";
      takes += w;
    }
    warn_ignored_switch(name, *v, "one of " + takes);
  } catch (...) {  // NOLINT(bugprone-empty-catch): no memory to read it: unset
  }
  return std::nullopt;
}

}  // namespace gpusort::detail
