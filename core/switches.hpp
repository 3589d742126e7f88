// Measurement switches: environment variables that replace one tuned choice of the engine for an
// A/B run (GPUSORT_TMPFS_MAKERS=4, GPUSORT_COPY_NT=0, ...), so that one call on a GPU host can
// interleave two variants of the same binaries. They are not configuration: a deployment sets
// config keys (config/schema.cpp), and a switch that is not set leaves the default that the
// measurements behind it chose. docs/design.md, "Measurement switches", lists every one.
//
// One reader for all of them, so that they agree on what a value means: a flag is 1 or 0, a
// count is a number (k, Mi, ... as parse_count reads them) within the switch's bounds, a word is
// one of the switch's words. A value the switch does not know is ignored, with one warning per
// switch through the library's logger, instead of being read as whatever its call site happened
// to test for. Reading a switch never throws: without memory to read it, it is unset.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace gpusort::detail {

/// The switch's value when set and not empty, else nullopt (throws only std::bad_alloc).
[[nodiscard]] std::optional<std::string> switch_text(const char* name);

/// A flag: true for 1, false for 0, `fallback` when unset or (with a warning) anything else.
[[nodiscard]] bool switch_flag(const char* name, bool fallback) noexcept;

/// A count within [lo, hi]; nullopt when unset or (with a warning) not such a count.
[[nodiscard]] std::optional<std::uint64_t> switch_count(const char* name, std::uint64_t lo,
                                                        std::uint64_t hi) noexcept;

/// One of `words`; nullopt when unset or (with a warning) none of them.
[[nodiscard]] std::optional<std::string_view> switch_word(
    const char* name, std::initializer_list<std::string_view> words) noexcept;

/// Logs, once per switch for the process's life, that its value was ignored and what it takes.
void warn_ignored_switch(const char* name, std::string_view value,
                         std::string_view takes) noexcept;

}  // namespace gpusort::detail
