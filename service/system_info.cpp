#include "service/system_info.hpp"

#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string_view>

namespace gpusort::service {

host_memory read_host_memory() noexcept
{
  host_memory m;
  try {
    std::ifstream in{"/proc/meminfo"};
    std::string key;
    std::uint64_t kib = 0;
    std::string unit;
    while (in >> key >> kib) {
      std::getline(in, unit);
      if (key == "MemTotal:") m.total = kib * 1024;
      if (key == "MemAvailable:") m.available = kib * 1024;
    }
  } catch (...) {  // a status field, not worth failing a request for
  }
  return m;
}

std::string cpu_model()
{
  std::ifstream in{"/proc/cpuinfo"};
  for (std::string line; std::getline(in, line);) {
    if (!line.starts_with("model name")) continue;
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::size_t start = line.find_first_not_of(' ', colon + 1);
    return start == std::string::npos ? std::string{} : line.substr(start);
  }
  return {};
}

std::uint64_t default_host_budget() noexcept
{
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return std::uint64_t{1} << 30;
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page) / 2;
}

}  // namespace gpusort::service
