// The host threads a job plans and moves with, from the configuration.
#pragma once

#include <algorithm>
#include <thread>

namespace gpusort::detail {

/// The configured host threads (config::host_threads), else one per core, at least one
/// (hardware_concurrency may answer 0). Not OpenMP's count: asking it starts the OpenMP runtime,
/// which an estimate must not (LLVM's registers itself in a shared memory file, which a process
/// under RLIMIT_FSIZE, like the CLI's tests of a full disk, then faults on before the command can
/// say what it could not write).
[[nodiscard]] inline unsigned host_threads_or_cores(unsigned configured) noexcept
{
  return configured != 0 ? configured : std::max(1U, std::thread::hardware_concurrency());
}

}  // namespace gpusort::detail
