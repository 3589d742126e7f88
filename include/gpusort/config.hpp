// The configuration of an engine or daemon, and its YAML loader (library gpusort::config).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpusort {

enum class device_selection : std::uint8_t {
  automatic,  ///< every GPU found; the CPU when there is none
  cpu,        ///< the host device only
  listed,     ///< the GPU ids in config::gpu_ids
};

/// How a GPU sorts a chunk that lies in its memory.
enum class incore_engine : std::uint8_t {
  automatic,  ///< the faster of the two for the key type, as measured by bench/gpu_bench
  radix,      ///< cub::DeviceRadixSort
  sample,     ///< the GPU sample sort (Leischner, Osipov and Sanders)
};

enum class log_level : std::uint8_t { trace, debug, info, warn, error, off };

struct config {
  device_selection devices{device_selection::automatic};
  std::vector<int> gpu_ids;  ///< when devices == listed
  /// Memory one device may use for a job, in bytes. nullopt ("auto"): on a GPU what it has
  /// free less a margin; on the CPU no limit, so the engine sorts in place directly.
  std::optional<std::uint64_t> device_memory_budget;
  /// Elements per round-1 chunk in bytes. nullopt ("auto"): the planner picks from the budget.
  std::optional<std::uint64_t> chunk_bytes;
  std::uint64_t pinned_pool_bytes{std::uint64_t{4} << 30};
  unsigned host_threads{0};  ///< 0: every core
  std::string socket{"/run/gpusort/gpusort.sock"};
  incore_engine incore{incore_engine::automatic};
  log_level level{log_level::info};

  bool operator==(const config&) const = default;
};

/// Parses YAML text. `source` names the text in error messages (a file name).
/// Throws gpusort::config_error naming the key, line and column of the first problem.
config parse_config(std::string_view yaml, std::string_view source = "<config>");

/// Reads and parses a YAML file; throws gpusort::config_error.
config load_config(const std::filesystem::path& path);

/// The configuration as YAML, every key present (what parse_config would read back).
std::string to_yaml(const config& cfg);

std::string_view name_of(log_level level) noexcept;

}  // namespace gpusort
