// The CPU sorter's open questions of issue 23, measured on one machine in one run: the maps to
// and from ordered bits fused into the sort's first and last passes or as passes of their own,
// and the sort's scratch kept between sorts, fresh with huge pages (what host_buffer asks for)
// or fresh in 4 KiB pages (a kernel whose transparent huge pages are off). CPU time summed over
// threads beside wall time, since the 2-core development machine is shared and loaded; page
// faults from getrusage. Every result is checked for order.
//
//   cpu_sort_ab [--count 256Mi] [--type f64|u64|pairs] [--trials 3]
// Prints one line per trial for each combination, alternating them so that load drifts evenly.
#include "core/cpu_sort.hpp"
#include "core/generate.hpp"

#include <gpusort/units.hpp>

#include <sys/mman.h>
#include <sys/resource.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace gpusort;
using namespace gpusort::detail;

double clock_seconds(clockid_t id)
{
  timespec t{};
  clock_gettime(id, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

long minor_faults()
{
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return r.ru_minflt;
}

enum class scratch_kind { kept, fresh_huge, fresh_small };

/// Scratch as the engine's host_buffer makes it (anonymous mapping, huge pages advised) or with
/// huge pages refused.
void* map_scratch(std::size_t bytes, bool huge)
{
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    std::perror("cpu_sort_ab: mmap");
    std::exit(70);
  }
  (void)madvise(p, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
  return p;
}

[[noreturn]] void usage(const char* why)
{
  std::fprintf(stderr,
               "cpu_sort_ab: %s\nusage: cpu_sort_ab [--count N] [--type f64|u64|pairs] "
               "[--trials T]\n",
               why);
  std::exit(64);
}

}  // namespace

int main(int argc, char** argv)
{
  std::uint64_t n = std::uint64_t{1} << 28;
  std::string type = "f64";
  std::uint64_t trials = 3;
  // Flags and their values in pairs.
  for (int i = 1; i < argc; i += 2) {
    const std::string_view a = argv[i];
    if (i + 1 >= argc) usage("missing value");
    const std::optional<std::uint64_t> c = parse_count(argv[i + 1]);
    if (a == "--count" && c && *c > 1) n = *c;
    else if (a == "--trials" && c && *c > 0) trials = *c;
    else if (a == "--type") type = argv[i + 1];
    else usage("bad argument");
  }
  if (type != "f64" && type != "u64" && type != "pairs") usage("--type takes f64, u64, pairs");
  const bool pairs = type == "pairs";
  const dtype t = type == "f64" ? dtype::f64 : dtype::u64;
  const key_order k{.type = t, .dir = order::ascending};
  std::vector<std::uint64_t> keys(n), values(pairs ? n : 0);
  const std::size_t bytes = pairs ? cpu_sort_scratch_bytes<std::uint64_t, std::uint64_t>(n)
                                  : cpu_sort_scratch_bytes<std::uint64_t, no_value>(n);
  void* const kept = map_scratch(bytes, true);
  std::memset(kept, 1, bytes);
  std::printf("cpu_sort_ab: %s, %llu elements, THP: see /sys/kernel/mm/transparent_hugepage\n",
              type.c_str(), static_cast<unsigned long long>(n));
  for (std::uint64_t trial = 0; trial < trials; ++trial)
    for (const bool fused : {true, false})
      for (const scratch_kind s :
           {scratch_kind::kept, scratch_kind::fresh_huge, scratch_kind::fresh_small}) {
        if (!fused && (pairs || t == dtype::u64)) continue;  // nothing to map
        if (!fused && s != scratch_kind::kept) continue;     // the maps' A/B needs one scratch
        generate(key_array{keys.data(), n, t}, distribution::uniform, trial + 1);
        for (std::uint64_t i = 0; i < values.size(); ++i) values[i] = i;
        const double cpu0 = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
        const double wall0 = clock_seconds(CLOCK_MONOTONIC);
        const long faults0 = minor_faults();
        void* scratch = s == scratch_kind::kept ? kept
                                                : map_scratch(bytes, s == scratch_kind::fresh_huge);
        if (pairs) {
          cpu_sort<std::uint64_t, std::uint64_t>(keys.data(), values.data(), n, scratch, 0);
        } else if (fused) {
          cpu_sort<std::uint64_t, no_value>(keys.data(), nullptr, n, scratch, 0, k, false);
        } else {
          to_ordered_bits<std::uint64_t>(keys.data(), keys.data(), n, k);
          cpu_sort<std::uint64_t, no_value>(keys.data(), nullptr, n, scratch, 0);
          from_ordered_bits<std::uint64_t>(keys.data(), keys.data(), n, k);
        }
        if (scratch != kept) munmap(scratch, bytes);
        const double cpu = clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
        const double wall = clock_seconds(CLOCK_MONOTONIC) - wall0;
        const long faults = minor_faults() - faults0;
        bool ordered = true;
        for (std::uint64_t i = 1; i < n && ordered; ++i) {
          if (t == dtype::f64) {
            double a = 0, b = 0;
            std::memcpy(&a, &keys[i - 1], sizeof a);
            std::memcpy(&b, &keys[i], sizeof b);
            ordered = !(b < a);
          } else {
            ordered = keys[i - 1] <= keys[i];
          }
        }
        if (!ordered) {
          std::fprintf(stderr, "cpu_sort_ab: trial %llu left the keys out of order\n",
                       static_cast<unsigned long long>(trial));
          return 1;
        }
        const char* scratch_name = s == scratch_kind::kept         ? "kept"
                                   : s == scratch_kind::fresh_huge ? "fresh, huge pages"
                                                                   : "fresh, 4 KiB pages";
        std::printf("  trial %llu  maps %-8s scratch %-18s %7.3f s wall %7.2f ns/elem CPU %8ld "
                    "faults\n",
                    static_cast<unsigned long long>(trial),
                    pairs || t == dtype::u64 ? "none" : fused ? "fused" : "passes",
                    scratch_name, wall, cpu * 1e9 / static_cast<double>(n), faults);
        std::fflush(stdout);
      }
  munmap(kept, bytes);
  return 0;
}
