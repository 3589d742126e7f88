// `gpusort status`: the daemon's devices, memory, jobs and totals, for people, as JSON or as
// Prometheus metrics.
#include "client/commands.hpp"

#include "client/commands/common.hpp"

#include <gpusort/client.hpp>
#include <gpusort/units.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpusort::cli {

const command_spec& status_spec()
{
  static const command_spec spec{
      .name = "status",
      .synopsis = "[--socket PATH] [--config FILE] [--json | --prometheus]",
      .description =
          "Asks the daemon (gpusortd) how it is: its devices, memory, shared buffers, clients,\n"
          "the jobs running and queued, and the totals since it started.\n",
      .options = {
          {"socket", "PATH", "the daemon's socket (default: $GPUSORT_SOCKET, else the\n"
                             "configuration's `socket`, /run/gpusort/gpusort.sock)"},
          {"config", "FILE", "configuration, YAML, for the socket path (default:\n"
                             "$GPUSORT_CONFIG)"},
          {"json", "", "print one JSON object with every field"},
          {"prometheus", "", "print the metrics in Prometheus's text format (names\n"
                             "gpusort_*: see the README), for a node exporter's textfile\n"
                             "collector or a scrape wrapper"},
          {"help", "", "show this text"},
      }};
  return spec;
}

namespace {

/// A label value as Prometheus's text format wants it: backslash, quote and newline escaped.
std::string label_value(std::string_view v)
{
  std::string out;
  for (const char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

/// The daemon's status as Prometheus metrics (text format 0.0.4): gauges for what is now,
/// counters (_total) for what happened since the daemon started.
std::string prometheus_text(const client::daemon_status& st)
{
  std::string out;
  const auto metric = [&out](std::string_view name, std::string_view type, std::string_view help,
                             const std::vector<std::pair<std::string, double>>& samples) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
    for (const auto& [labels, value] : samples)
      out += fmt::format("{}{} {}\n", name, labels, value);
  };
  const auto one = [](double v) {
    return std::vector<std::pair<std::string, double>>{{"", v}};
  };
  const auto d = [](std::uint64_t v) { return static_cast<double>(v); };
  metric("gpusort_info", "gauge", "The daemon's version (the value is always 1).",
         {{fmt::format("{{version=\"{}\"}}", label_value(st.server_version)), 1.0}});
  metric("gpusort_uptime_seconds", "gauge", "Seconds since the daemon started.",
         one(st.uptime_seconds));
  std::vector<std::pair<std::string, double>> total, free_bytes, budget, running;
  for (const auto& dev : st.devices) {
    const std::string labels = fmt::format("{{device=\"{}\",model=\"{}\"}}",
                                           label_value(dev.name), label_value(dev.model));
    total.emplace_back(labels, d(dev.memory_total));
    free_bytes.emplace_back(labels, d(dev.memory_free));
    budget.emplace_back(labels, d(dev.memory_budget));
    running.emplace_back(labels, d(dev.running_jobs));
  }
  metric("gpusort_device_memory_total_bytes", "gauge", "Memory of each device.", total);
  metric("gpusort_device_memory_free_bytes", "gauge", "Free memory of each device.", free_bytes);
  metric("gpusort_device_memory_budget_bytes", "gauge",
         "The memory budget of each device (0: automatic).", budget);
  metric("gpusort_device_running_jobs", "gauge", "Jobs running on each device.", running);
  metric("gpusort_host_memory_budget_bytes", "gauge", "host_memory_budget of the jobs together.",
         one(d(st.host_memory_budget)));
  metric("gpusort_host_memory_used_bytes", "gauge", "Host memory the running jobs hold.",
         one(d(st.host_memory_used)));
  metric("gpusort_pinned_pool_bytes", "gauge", "pinned_pool_bytes of the shared buffers.",
         one(d(st.pinned_pool_bytes)));
  metric("gpusort_pinned_pool_used_bytes", "gauge", "Pinned memory of the live shared buffers.",
         one(d(st.pinned_pool_used)));
  metric("gpusort_shared_buffers", "gauge", "Shared buffers in use.", one(d(st.buffers)));
  metric("gpusort_clients", "gauge", "Connected clients.", one(d(st.clients)));
  metric("gpusort_jobs", "gauge", "Jobs now, by state.",
         {{"{state=\"queued\"}", d(st.queued_jobs)}, {"{state=\"running\"}", d(st.running_jobs)}});
  const auto& t = st.totals;
  metric("gpusort_jobs_submitted_total", "counter", "Jobs submitted since the daemon started.",
         one(d(t.jobs_submitted)));
  metric("gpusort_jobs_finished_total", "counter", "Jobs that ended, by outcome.",
         {{"{outcome=\"succeeded\"}", d(t.jobs_succeeded)},
          {"{outcome=\"failed\"}", d(t.jobs_failed)},
          {"{outcome=\"cancelled\"}", d(t.jobs_cancelled)}});
  metric("gpusort_jobs_rejected_total", "counter", "Jobs refused at admission.",
         one(d(t.jobs_rejected)));
  metric("gpusort_sorted_bytes_total", "counter", "Bytes of keys and values sorted.",
         one(d(t.bytes_sorted)));
  metric("gpusort_connections_total", "counter", "Connections accepted.",
         one(d(t.connections)));
  return out;
}

}  // namespace

int run_status(const std::vector<std::string>& args)
{
  const std::optional<parsed_args> parsed = parse_or_help(args, status_spec());
  if (!parsed) return exit_ok;
  const parsed_args& a = *parsed;
  if (!a.positionals.empty())
    throw cli_error{exit_usage, "status takes no file, got '" + a.positionals.front() + "'"};
  const std::string socket = socket_option(a);
  client::connection conn = connect_daemon(socket, "is gpusortd running?");
  client::daemon_status st;
  try {
    st = conn.status();
  } catch (const client::error& e) {
    throw cli_error{exit_runtime, std::string{"status failed: "} + e.what()};
  }
  const auto job_json = [](const client::job_info& j) {
    return nlohmann::ordered_json{{"job_id", j.job_id},
                          {"state", client::name_of(j.state)},
                          {"dtype", j.type ? name_of(*j.type) : "?"},
                          {"count", j.count},
                          {"bytes", j.bytes},
                          {"queue_position", j.queue_position},
                          {"round", j.round},
                          {"bytes_done", j.bytes_done},
                          {"bytes_total", j.bytes_total},
                          {"seconds", j.seconds},
                          {"client_pid", j.client_pid},
                          {"host_memory", j.host_memory},
                          {"lean", j.lean}};
  };
  if (a.has("json") && a.has("prometheus"))
    throw cli_error{exit_usage, "--json and --prometheus are two formats: choose one"};
  if (a.has("prometheus")) {
    fmt::print("{}", prometheus_text(st));
    std::fflush(stdout);
    return exit_ok;
  }
  if (a.has("json")) {
    nlohmann::ordered_json devices = nlohmann::ordered_json::array();
    for (const auto& d : st.devices)
      devices.push_back({{"name", d.name},
                         {"model", d.model},
                         {"memory_total", d.memory_total},
                         {"memory_free", d.memory_free},
                         {"memory_budget", d.memory_budget},
                         {"running_jobs", d.running_jobs}});
    nlohmann::ordered_json jobs = nlohmann::ordered_json::array();
    for (const auto& j : st.jobs) jobs.push_back(job_json(j));
    const auto& t = st.totals;
    print_json(stdout, {{"server_version", st.server_version},
                        {"uptime_seconds", st.uptime_seconds},
                        {"devices", std::move(devices)},
                        {"host_memory_budget", st.host_memory_budget},
                        {"host_memory_used", st.host_memory_used},
                        {"pinned_pool_bytes", st.pinned_pool_bytes},
                        {"pinned_pool_used", st.pinned_pool_used},
                        {"buffers", st.buffers},
                        {"clients", st.clients},
                        {"queued_jobs", st.queued_jobs},
                        {"running_jobs", st.running_jobs},
                        {"jobs", std::move(jobs)},
                        {"totals",
                         {{"jobs_submitted", t.jobs_submitted},
                          {"jobs_succeeded", t.jobs_succeeded},
                          {"jobs_failed", t.jobs_failed},
                          {"jobs_cancelled", t.jobs_cancelled},
                          {"jobs_rejected", t.jobs_rejected},
                          {"bytes_sorted", t.bytes_sorted},
                          {"connections", t.connections}}}});
    std::fflush(stdout);
    return exit_ok;
  }
  fmt::print("gpusortd {} at {}, up {:.1f} s\n", st.server_version, socket, st.uptime_seconds);
  for (const auto& d : st.devices) {
    fmt::print("device {}{}: ", d.name, d.model.empty() ? "" : " (" + d.model + ")");
    if (d.memory_total != 0)
      fmt::print("memory {} total, {} free, ", format_bytes(d.memory_total),
                 format_bytes(d.memory_free));
    fmt::print("budget {}, {} running\n",
               d.memory_budget == 0 ? std::string{"auto"} : format_bytes(d.memory_budget),
               plural(d.running_jobs, "job"));
  }
  fmt::print("host memory: {} used of {} (host_memory_budget)\n",
             format_bytes(st.host_memory_used), format_bytes(st.host_memory_budget));
  fmt::print("shared buffers: {} in use, {} of {} (pinned_pool_bytes)\n", st.buffers,
             format_bytes(st.pinned_pool_used), format_bytes(st.pinned_pool_bytes));
  fmt::print("clients: {}\n", st.clients);
  fmt::print("jobs: {} running, {} queued\n", st.running_jobs, st.queued_jobs);
  for (const auto& j : st.jobs) {
    const double percent = j.bytes_total == 0 ? 0.0
                                              : 100.0 * static_cast<double>(j.bytes_done) /
                                                    static_cast<double>(j.bytes_total);
    fmt::print("  job {} {}: {} {} keys ({}), pid {}, ", j.job_id, client::name_of(j.state),
               j.count, j.type ? name_of(*j.type) : "?", format_bytes(j.bytes), j.client_pid);
    if (j.state == client::job_state::queued)
      fmt::print("position {}, ", j.queue_position);
    else
      fmt::print("round {} {:.0f}%, ", j.round, percent);
    fmt::print("host memory {}{}, {:.1f} s\n", format_bytes(j.host_memory),
               j.lean ? " (lean)" : "", j.seconds);
  }
  const auto& t = st.totals;
  fmt::print("totals: {} submitted, {} succeeded, {} failed, {} cancelled, {} rejected, {} "
             "sorted, {}\n",
             t.jobs_submitted, t.jobs_succeeded, t.jobs_failed, t.jobs_cancelled,
             t.jobs_rejected, format_bytes(t.bytes_sorted), plural(t.connections, "connection"));
  std::fflush(stdout);
  return exit_ok;
}

}  // namespace gpusort::cli
