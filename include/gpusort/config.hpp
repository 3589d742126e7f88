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
  /// the faster of the two for the key type, as measured by bench/gpu_bench; out of core, the
  /// radix sort where its smaller scratch gives a job at most two thirds of the chunks
  automatic,
  radix,      ///< cub::DeviceRadixSort
  sample,     ///< the GPU sample sort (Leischner, Osipov and Sanders)
};

/// Whether round 1 of an out-of-core job compresses its sorted keys before they cross PCIe and
/// while they wait in host memory (issue 21; the codec is core/run_codec.hpp, design.md section
/// 3 says how the rounds use it). Jobs that fit one device never compress.
enum class run_compression : std::uint8_t {
  off,        ///< runs travel as ordered bits
  on,         ///< every chunk's runs are encoded
  automatic,  ///< encoded, but a chunk whose stream keeps over 10% of its bytes stays raw
};

/// Where round 1 of an out-of-core job on GPUs leaves its sorted runs: host memory of the
/// job's size, the round-1 buffer.
enum class round1_memory : std::uint8_t {
  /// Pinned by an engine that runs many jobs (the daemon, the library), `by_job` for a one-shot
  /// `gpusort sort --local`.
  automatic,
  /// Its pages made and registered with the GPUs before the first such job and kept for the
  /// engine's life: the copy engines move the runs straight in and out.
  pinned,
  /// Pageable (kept for the engine's life too, but never registered): round 1 stores and
  /// round 2 gathers through the pinned staging, so that a one-shot job pays neither the
  /// registration nor its undoing.
  pageable,
  /// Pinned for a job whose chunks are smaller than 32 MiB (a small device budget: through the
  /// staging, each chunk's hand-offs cost more than the registration saves), else pageable.
  by_job,
};

enum class log_level : std::uint8_t { trace, debug, info, warn, error, off };

/// What the daemon does with a job that fits its host memory budget, but not now.
enum class admission_policy : std::uint8_t {
  wait,    ///< queue it until running jobs free enough memory
  reject,  ///< answer REJECTED_BUSY at once; the client retries
};

/// What the daemon does with running and queued jobs when it is told to stop (SIGTERM).
enum class shutdown_policy : std::uint8_t {
  drain,   ///< let running and queued jobs finish, up to shutdown_timeout, then cancel the rest
  cancel,  ///< cancel every job at once
};

struct config {
  device_selection devices{device_selection::automatic};
  std::vector<int> gpu_ids;  ///< when devices == listed
  /// Memory one device may use for a job, in bytes. nullopt ("auto"): on a GPU what it has
  /// free less a margin; on the CPU no limit, so the engine sorts in place directly.
  std::optional<std::uint64_t> device_memory_budget;
  /// Elements per round-1 chunk in bytes. nullopt ("auto"): the planner picks from the budget.
  std::optional<std::uint64_t> chunk_bytes;
  /// Page-locked host memory for the daemon's shared buffers together, in bytes. nullopt
  /// ("auto"): half of the physical memory, so that a shared buffer as large as a job that
  /// host_memory_budget admits can be had with the default configuration.
  std::optional<std::uint64_t> pinned_pool_bytes;
  unsigned host_threads{0};  ///< 0: every core
  std::string socket{"/run/gpusort/gpusort.sock"};
  /// Peers the daemon serves (SO_PEERCRED): a uid in allowed_uids or a gid in allowed_gids.
  /// Both empty: only the daemon's own uid and root.
  std::vector<std::uint32_t> allowed_uids;
  std::vector<std::uint32_t> allowed_gids;
  unsigned max_connections{128};  ///< clients connected at once; more are refused
  unsigned max_running_jobs{2};   ///< CPU jobs sorting at once (GPU jobs: always one at a time)
  unsigned max_queued_jobs{64};   ///< jobs waiting for admission; more get REJECTED_BUSY
  admission_policy admission{admission_policy::wait};
  /// Host memory beyond their arrays that jobs may use, in bytes: in an engine (the library,
  /// `gpusort sort --local`) each job's, in the daemon its jobs' together (staging copies of
  /// files and the engine's working memory). A job whose fastest path needs more runs on the
  /// lean path (in place, within the limit), or is refused naming what it needs. nullopt
  /// ("auto"): half of the physical memory.
  std::optional<std::uint64_t> host_memory_budget;
  shutdown_policy on_shutdown{shutdown_policy::drain};
  unsigned shutdown_timeout{30};  ///< seconds SIGTERM waits for jobs before cancelling them
  incore_engine incore{incore_engine::automatic};
  run_compression compress_runs{run_compression::off};
  round1_memory round1_buffer{round1_memory::automatic};
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
std::string_view name_of(admission_policy policy) noexcept;
std::string_view name_of(shutdown_policy policy) noexcept;

}  // namespace gpusort
