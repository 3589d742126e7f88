// What SIGHUP changes. The daemon re-reads the configuration file it was started with and takes
// the keys it can apply while it runs (who may connect, the limits on connections and jobs,
// what SIGTERM does, the log level); a change to any other key (the devices and the engine's
// settings, the pool, the socket, the worker count) needs a restart, and until then the daemon
// keeps the value it started with. Pure: the server reads the file and applies the result.
#pragma once

#include <gpusort/config.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace gpusort::service {

struct reload_plan {
  config next;  ///< the running configuration with the file's values of the run-time keys
  std::vector<std::string> applied;       ///< changed keys taken from the file, in key order
  std::vector<std::string> need_restart;  ///< changed keys left at their running values
};

/// Compares every key of `running` and `loaded` (the file, freshly parsed).
reload_plan plan_reload(const config& running, const config& loaded);

/// Whether a change of `key` takes effect on SIGHUP.
bool reloadable(std::string_view key) noexcept;

/// The one log line of a reload: what was applied, what needs a restart.
std::string describe(const reload_plan& plan, std::string_view file);

}  // namespace gpusort::service
