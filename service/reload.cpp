#include "service/reload.hpp"

#include "config/schema.hpp"

#include <algorithm>
#include <array>
#include <utility>

namespace gpusort::service {

namespace {

/// A key the daemon applies at run time, and how its value passes from one configuration to
/// another. Each is read where it is used, on the io thread (peer checks and the connection
/// limit at accept, the shutdown keys at SIGTERM), or pushed into what uses it (the log level
/// into spdlog, the job limits into the queue), so a new value needs nothing more.
struct runtime_key {
  std::string_view name;
  void (*take)(config& to, const config& from);
};

template <auto member>
void take(config& to, const config& from)
{
  to.*member = from.*member;
}

constexpr std::array runtime_keys{
    runtime_key{"allowed_uids", take<&config::allowed_uids>},
    runtime_key{"allowed_gids", take<&config::allowed_gids>},
    runtime_key{"max_connections", take<&config::max_connections>},
    runtime_key{"max_queued_jobs", take<&config::max_queued_jobs>},
    runtime_key{"admission", take<&config::admission>},
    runtime_key{"host_memory_budget", take<&config::host_memory_budget>},
    runtime_key{"shutdown", take<&config::on_shutdown>},
    runtime_key{"shutdown_timeout", take<&config::shutdown_timeout>},
    runtime_key{"log_level", take<&config::level>},
};

const runtime_key* find_runtime_key(std::string_view name) noexcept
{
  const auto it = std::find_if(runtime_keys.begin(), runtime_keys.end(),
                               [&](const runtime_key& k) { return k.name == name; });
  return it == runtime_keys.end() ? nullptr : &*it;
}

std::string joined(const std::vector<std::string>& names)
{
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

}  // namespace

reload_plan plan_reload(const config& running, const config& loaded)
{
  reload_plan plan{.next = running, .applied = {}, .need_restart = {}};
  // Every key of the schema, compared as the YAML it writes: a key added to the schema later is
  // compared too, and needs a restart until it is listed above.
  for (const detail::key_spec& key : detail::config_keys()) {
    if (key.write(running) == key.write(loaded)) continue;
    if (const runtime_key* k = find_runtime_key(key.name)) {
      k->take(plan.next, loaded);
      plan.applied.emplace_back(key.name);
    } else {
      plan.need_restart.emplace_back(key.name);
    }
  }
  return plan;
}

bool reloadable(std::string_view key) noexcept { return find_runtime_key(key) != nullptr; }

std::string describe(const reload_plan& plan, std::string_view file)
{
  std::string line = "configuration reloaded from " + std::string{file} + ": ";
  if (plan.applied.empty() && plan.need_restart.empty()) return line + "nothing changed";
  line += plan.applied.empty() ? "nothing applied" : "applied " + joined(plan.applied);
  if (!plan.need_restart.empty())
    line += "; changed but kept until a restart: " + joined(plan.need_restart);
  return line;
}

}  // namespace gpusort::service
