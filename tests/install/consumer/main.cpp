// Sorts 1000 u64 keys with the installed engine (gpusort::engine); exits non-zero unless the
// result is the sorted input (compared with std::sort of a copy).
#include <gpusort/gpusort.hpp>
// The other public headers, each on its own, under the consumer's warnings too.
#include <gpusort/config.hpp>
#include <gpusort/error.hpp>
#include <gpusort/types.hpp>
#include <gpusort/units.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <span>
#include <vector>

int main()
{
  try {
    // Through the YAML loader too: gpusort::engine brings the configuration library.
    const gpusort::config cfg = gpusort::parse_config("devices: cpu\nhost_threads: 2\n");
    std::vector<std::uint64_t> keys(1000);
    std::uint64_t x = 0x9E3779B97F4A7C15ULL;
    for (auto& k : keys) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      k = x;
    }
    std::vector<std::uint64_t> expected = keys;
    std::sort(expected.begin(), expected.end());

    gpusort::engine engine{cfg};
    const gpusort::sort_report report = engine.sort(std::span{keys});
    if (!std::is_sorted(keys.begin(), keys.end()) || keys != expected) {
      std::fprintf(stderr, "not sorted\n");
      return 1;
    }
    std::printf("sorted %llu keys on %s\n", static_cast<unsigned long long>(report.elements),
                report.engine.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
}
