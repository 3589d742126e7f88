// The library's own messages: a few lines about the devices it found and about failures that
// cannot be thrown (a CUDA error in a destructor, an input that could not be restored). Quiet by
// default: warnings and errors only, one line each on stderr ("gpusort: warning: ..."). An
// application sends them where its own log goes with set_log_sink, and chooses how much it
// wants with set_log_level; gpusortd and the gpusort command do both from their configuration.
#pragma once

#include <gpusort/config.hpp>  // log_level

#include <functional>
#include <string_view>

namespace gpusort {

/// Receives each message at or above the log level, one at a time (calls never overlap), from
/// whichever thread logged it. Must not throw.
using log_sink = std::function<void(log_level level, std::string_view message)>;

/// Where the library's messages go from now on; an empty sink restores the default (stderr).
void set_log_sink(log_sink sink);

/// The least level passed on; log_level::off silences the library. The default is warn.
void set_log_level(log_level level) noexcept;
[[nodiscard]] log_level get_log_level() noexcept;

}  // namespace gpusort
