// What every session of the daemon shares: the configuration, the engine, the buffer pool, the
// job queue and the counters behind DAEMON_STATUS. Owned by the daemon's main(); sessions and
// handlers hold a reference.
#pragma once

#include "service/buffer_pool.hpp"
#include "service/job_queue.hpp"

#include <gpusort/config.hpp>
#include <gpusort/gpusort.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace gpusort::service {

struct daemon_context {
  daemon_context(const config& c, engine& e, buffer_pool& p, job_queue& q,
                 std::filesystem::path config_file = {})
      : cfg{c}, config_path{std::move(config_file)}, eng{e}, pool{p}, queue{q},
        devices{e.devices()}
  {
  }

  /// The configuration in force. SIGHUP (server::reload) replaces the keys it can apply at run
  /// time; it does so on the io thread, the only thread that reads this.
  config cfg;
  /// The file `cfg` came from, which SIGHUP reads again; empty: none (tests), nothing to reload.
  const std::filesystem::path config_path;
  engine& eng;
  buffer_pool& pool;
  job_queue& queue;
  const std::vector<std::string> devices;
  const std::chrono::steady_clock::time_point started{std::chrono::steady_clock::now()};

  std::atomic<std::uint64_t> next_job_id{1};
  std::atomic<std::uint64_t> next_session{1};
  std::atomic<std::uint64_t> connections_total{0};
  std::atomic<std::uint32_t> clients_open{0};
};

}  // namespace gpusort::service
