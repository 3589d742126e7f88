// Descriptor-leak checks shared by the tests of proto/ and service/.
#pragma once

#include <cstddef>
#include <filesystem>

namespace gpusort::test_support {

/// Open descriptors of this process, from the kernel's own list (the directory iterator's own
/// descriptor counts alike every time).
inline std::size_t open_fd_count()
{
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator{"/proc/self/fd"})
    ++n;
  return n;
}

}  // namespace gpusort::test_support
