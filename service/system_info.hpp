// What the daemon reports about its host in DAEMON_STATUS: memory and the CPU model, from /proc.
#pragma once

#include <cstdint>
#include <string>

namespace gpusort::service {

struct host_memory {
  std::uint64_t total{};      ///< MemTotal
  std::uint64_t available{};  ///< MemAvailable: what can be had without swapping
};

/// From /proc/meminfo; zeros when it cannot be read.
host_memory read_host_memory() noexcept;

/// The "model name" of the first CPU in /proc/cpuinfo; empty when unknown.
std::string cpu_model();

/// Half of the physical memory: the default host_memory_budget.
std::uint64_t default_host_budget() noexcept;

}  // namespace gpusort::service
