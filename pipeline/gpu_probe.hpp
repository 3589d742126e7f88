// Which GPUs this process can use. Host-only on purpose: the CLI, the daemon and the engine's
// device selection ask without including any CUDA header, and a build without CUDA answers with
// an empty list (gpu_probe_none.cpp) instead of failing to link.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpusort::detail {

struct gpu_info {
  int id{};  // CUDA runtime ordinal, after CUDA_VISIBLE_DEVICES
  std::string name;
  std::uint64_t total_memory{};
  std::uint64_t free_memory{};
  int cc_major{};
  int cc_minor{};
  int multiprocessors{};
};

struct gpu_probe_result {
  std::vector<gpu_info> gpus;
  // Why the list is empty or shorter than the device count ("built without CUDA", the CUDA
  // error of a missing driver, ...); empty when every device was usable.
  std::string note;
};

/// Never throws and never aborts: no driver, no device or a broken device become a note, so
/// that callers can fall back to the host device.
gpu_probe_result probe_gpus() noexcept;

}  // namespace gpusort::detail
