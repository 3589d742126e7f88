// What SIGHUP takes from a re-read configuration file (service/reload.hpp), without a daemon:
// the run-time keys are applied, every other changed key is named as needing a restart and
// keeps its running value, and the log line says both.
#include "service/reload.hpp"

#include "config/schema.hpp"
#include "core/program_log.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace gpusort::service {
namespace {

using names = std::vector<std::string>;

TEST(Reload, NothingChanged)
{
  const config running = parse_config("devices: cpu\nlog_level: warn\n");
  const reload_plan plan = plan_reload(running, running);
  EXPECT_TRUE(plan.applied.empty());
  EXPECT_TRUE(plan.need_restart.empty());
  EXPECT_EQ(plan.next, running);
  EXPECT_EQ(describe(plan, "/etc/g.yaml"),
            "configuration reloaded from /etc/g.yaml: nothing changed");
}

TEST(Reload, RunTimeKeysAreAppliedOthersKeptAndNamed)
{
  const config running = parse_config("devices: cpu\npinned_pool_bytes: 1GiB\nallowed_uids: [7]\n");
  const config loaded = parse_config(
      "devices: cpu\npinned_pool_bytes: 2GiB\nallowed_uids: [7, 8]\nallowed_gids: [100]\n"
      "log_level: debug\nmax_running_jobs: 5\nhost_memory_budget: 8GiB\n");
  const reload_plan plan = plan_reload(running, loaded);
  EXPECT_EQ(plan.applied,
            (names{"allowed_uids", "allowed_gids", "host_memory_budget", "log_level"}));
  EXPECT_EQ(plan.need_restart, (names{"pinned_pool_bytes", "max_running_jobs"}));
  EXPECT_EQ(plan.next.allowed_uids, (std::vector<std::uint32_t>{7, 8}));
  EXPECT_EQ(plan.next.allowed_gids, (std::vector<std::uint32_t>{100}));
  EXPECT_EQ(plan.next.level, log_level::debug);
  EXPECT_EQ(plan.next.host_memory_budget, std::uint64_t{8} << 30);
  EXPECT_EQ(plan.next.pinned_pool_bytes, std::uint64_t{1} << 30) << "kept until a restart";
  EXPECT_EQ(plan.next.max_running_jobs, 2u);
  EXPECT_EQ(describe(plan, "g.yaml"),
            "configuration reloaded from g.yaml: applied allowed_uids, allowed_gids, "
            "host_memory_budget, log_level; changed but kept until a restart: "
            "pinned_pool_bytes, max_running_jobs");
}

TEST(Reload, OnlyRestartKeysChanged)
{
  const reload_plan plan =
      plan_reload(parse_config("socket: /a.sock\n"), parse_config("socket: /b.sock\n"));
  EXPECT_EQ(plan.need_restart, (names{"socket"}));
  EXPECT_EQ(plan.next.socket, "/a.sock");
  EXPECT_EQ(describe(plan, "g.yaml"), "configuration reloaded from g.yaml: nothing applied; "
                                      "changed but kept until a restart: socket");
}

// Every key of the schema, each changed at once: each lands in exactly one list, and the next
// configuration holds the file's value exactly for the keys applied.
TEST(Reload, EveryKeyIsEitherAppliedOrKept)
{
  const config running{};
  const config loaded = parse_config(
      "devices: cpu\ndevice_memory_budget: 1GiB\nchunk_bytes: 64MiB\npinned_pool_bytes: 1GiB\n"
      "host_threads: 3\nsocket: /tmp/x.sock\nallowed_uids: [1]\nallowed_gids: [2]\n"
      "max_connections: 5\nmax_running_jobs: 3\nmax_queued_jobs: 9\nadmission: reject\n"
      "host_memory_budget: 2GiB\nshutdown: cancel\nshutdown_timeout: 4\nincore_engine: radix\n"
      "compress_runs: on\nround1_buffer: pageable\nlog_level: trace\n");
  const reload_plan plan = plan_reload(running, loaded);
  EXPECT_EQ(plan.applied.size() + plan.need_restart.size(), detail::config_keys().size());
  for (const detail::key_spec& key : detail::config_keys()) {
    ASSERT_NE(key.write(running), key.write(loaded)) << key.name << " is not changed here";
    const config& expected = reloadable(key.name) ? loaded : running;
    EXPECT_EQ(key.write(plan.next), key.write(expected)) << key.name;
  }
  EXPECT_EQ(plan.applied,
            (names{"allowed_uids", "allowed_gids", "max_connections", "max_queued_jobs",
                   "admission", "host_memory_budget", "shutdown", "shutdown_timeout",
                   "log_level"}));
  EXPECT_EQ(plan.need_restart,
            (names{"devices", "device_memory_budget", "chunk_bytes", "pinned_pool_bytes",
                   "host_threads", "socket", "max_running_jobs", "incore_engine",
                   "compress_runs", "round1_buffer"}));
}

TEST(Reload, LogLevels)
{
  EXPECT_EQ(detail::spdlog_level(log_level::trace), spdlog::level::trace);
  EXPECT_EQ(detail::spdlog_level(log_level::warn), spdlog::level::warn);
  EXPECT_EQ(detail::spdlog_level(log_level::error), spdlog::level::err);
  EXPECT_EQ(detail::spdlog_level(log_level::off), spdlog::level::off);
}

}  // namespace
}  // namespace gpusort::service
