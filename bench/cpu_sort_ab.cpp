// The CPU sorter's open questions of issue 23, measured on one machine in one run: the sorter's
// tuning choices (core/cpu_sort.hpp's cpu_sort_tuning) against each other, and its scratch kept
// between sorts, fresh with huge pages (what host_buffer asks for) or fresh in 4 KiB pages (a
// kernel whose transparent huge pages are off). CPU time summed over threads beside wall time,
// since the 2-core development machine is shared and loaded; page faults from getrusage; the
// load average before each trial. Every result is checked for order.
//
//   cpu_sort_ab [--count 256Mi] [--type u64|u32|f64|pairs] [--trials 3] [--threads 0]
//               [--variants old,default] [--scratch kept|fresh|all]
// A variant is "default" (cpu_sort_tuning's defaults), "old" (none of the choices: 8-bit
// digits out of cache, every scatter noting its buckets' varying bits, plain stores: the sorter
// before cpu_sort_tuning) or choices joined by '+': fitted (out-of-cache digits fitted to the
// range), lazy (buckets find their own varying bits), stream (the parallel pass's scatter
// through line buffers and non-temporal stores wherever it moves 64 MiB of keys or more); e.g.
// --variants old,fitted,fitted+lazy,fitted+lazy+stream. Prints one line per trial for each
// combination, alternating them so that load drifts evenly, then each combination's median and
// its ratio to the first variant's. OMP_WAIT_POLICY=passive keeps threads that wait for a
// descheduled one (a loaded machine) from adding their spinning to the CPU time.
#include "core/cpu_sort.hpp"
#include "core/generate.hpp"

#include <gpusort/units.hpp>

#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
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

std::string load_average()
{
  std::ifstream f{"/proc/loadavg"};
  std::string one;
  f >> one;
  return one.empty() ? "?" : one;
}

enum class scratch_kind { kept, fresh_huge, fresh_small };

const char* name_of(scratch_kind s)
{
  return s == scratch_kind::kept ? "kept" : s == scratch_kind::fresh_huge ? "fresh-huge"
                                                                          : "fresh-4KiB";
}

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
               "cpu_sort_ab: %s\nusage: cpu_sort_ab [--count N] [--type u64|u32|f64|pairs] "
               "[--trials T] [--threads T] [--variants old,default,fitted+lazy+stream...] "
               "[--scratch kept|fresh|all]\n",
               why);
  std::exit(64);
}

/// A variant: "default" (cpu_sort_tuning's defaults), or "old" (none of the choices below) or
/// choices joined by '+': fitted, lazy, stream.
std::optional<cpu_sort_tuning> tuning_of(std::string_view variant)
{
  if (variant == "default") return cpu_sort_tuning{};
  cpu_sort_tuning t{.stream_min_bytes = 0, .fitted_digits = false, .lazy_vary = false};
  if (variant == "old") return t;
  for (std::size_t at = 0; at <= variant.size();) {
    const std::size_t end = std::min(variant.find('+', at), variant.size());
    const std::string_view choice = variant.substr(at, end - at);
    if (choice == "fitted") t.fitted_digits = true;
    else if (choice == "lazy") t.lazy_vary = true;
    else if (choice == "stream") t.stream_min_bytes = std::uint64_t{64} << 20;
    else return std::nullopt;
    at = end + 1;
  }
  return t;
}

struct options {
  std::uint64_t n{std::uint64_t{1} << 28};
  std::string type{"u64"};
  std::uint64_t trials{3};
  unsigned threads{0};
  std::vector<std::string> variants{"old", "default"};
  std::vector<scratch_kind> scratch{scratch_kind::kept};
};

options parse(int argc, char** argv)
{
  options o;
  // Flags and their values in pairs.
  for (int i = 1; i < argc; i += 2) {
    const std::string_view a = argv[i];
    if (i + 1 >= argc) usage("missing value");
    const std::string_view v = argv[i + 1];
    const std::optional<std::uint64_t> c = parse_count(v);
    if (a == "--count" && c && *c > 1) {
      o.n = *c;
    } else if (a == "--trials" && c && *c > 0) {
      o.trials = *c;
    } else if (a == "--threads" && c && *c < 4096) {
      o.threads = static_cast<unsigned>(*c);
    } else if (a == "--type" && (v == "u64" || v == "u32" || v == "f64" || v == "pairs")) {
      o.type = std::string{v};
    } else if (a == "--variants") {
      o.variants.clear();
      for (std::size_t at = 0; at <= v.size();) {
        const std::size_t end = std::min(v.find(',', at), v.size());
        o.variants.emplace_back(v.substr(at, end - at));
        if (!tuning_of(o.variants.back()))
          usage("a variant is default, old, or fitted, lazy, stream joined by +");
        at = end + 1;
      }
    } else if (a == "--scratch" && (v == "kept" || v == "fresh" || v == "all")) {
      o.scratch = v == "kept"    ? std::vector{scratch_kind::kept}
                  : v == "fresh" ? std::vector{scratch_kind::fresh_huge}
                                 : std::vector{scratch_kind::kept, scratch_kind::fresh_huge,
                                               scratch_kind::fresh_small};
    } else {
      usage("bad argument");
    }
  }
  return o;
}

/// The keys of one trial in order, by their own type's comparison.
template <typename K>
bool ordered(const std::vector<K>& keys, dtype t)
{
  for (std::size_t i = 1; i < keys.size(); ++i) {
    if constexpr (sizeof(K) == 8) {
      if (t == dtype::f64) {
        double a = 0, b = 0;
        std::memcpy(&a, &keys[i - 1], sizeof a);
        std::memcpy(&b, &keys[i], sizeof b);
        if (b < a) return false;
        continue;
      }
    }
    if (keys[i] < keys[i - 1]) return false;
  }
  return true;
}

struct sample {
  double wall{}, cpu_ns{};
};

double median(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

template <typename K>
int run(const options& o)
{
  const std::uint64_t n = o.n;
  const bool pairs = o.type == "pairs";
  const dtype t = o.type == "f64" ? dtype::f64 : o.type == "u32" ? dtype::u32 : dtype::u64;
  const key_order k{.type = t, .dir = order::ascending};
  std::vector<K> keys(n);
  std::vector<std::uint64_t> values(pairs ? n : 0);
  const std::size_t bytes = pairs ? cpu_sort_scratch_bytes<K, std::uint64_t>(n)
                                  : cpu_sort_scratch_bytes<K, no_value>(n);
  void* const kept = map_scratch(bytes, true);
  std::memset(kept, 1, bytes);
  std::printf("cpu_sort_ab: %s, %llu elements, %u threads (0: all), THP: see "
              "/sys/kernel/mm/transparent_hugepage\n",
              o.type.c_str(), static_cast<unsigned long long>(n), o.threads);
  std::map<std::pair<std::string, std::string>, std::vector<sample>> results;
  for (std::uint64_t trial = 0; trial < o.trials; ++trial)
    for (const scratch_kind s : o.scratch)
      for (const std::string& variant : o.variants) {
        const cpu_sort_tuning tuning = *tuning_of(variant);
        generate(key_array{keys.data(), n, t}, distribution::uniform, trial + 1);
        for (std::uint64_t i = 0; i < values.size(); ++i) values[i] = i;
        const std::string load = load_average();
        const double cpu0 = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
        const double wall0 = clock_seconds(CLOCK_MONOTONIC);
        const long faults0 = minor_faults();
        void* scratch = s == scratch_kind::kept ? kept
                                                : map_scratch(bytes, s == scratch_kind::fresh_huge);
        if (pairs)
          cpu_sort<K, std::uint64_t>(keys.data(), values.data(), n, scratch, o.threads, tuning);
        else
          cpu_sort<K, no_value>(keys.data(), nullptr, n, scratch, o.threads, k, false, tuning);
        if (scratch != kept) munmap(scratch, bytes);
        const double cpu = clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
        const double wall = clock_seconds(CLOCK_MONOTONIC) - wall0;
        const long faults = minor_faults() - faults0;
        if (!ordered(keys, t)) {
          std::fprintf(stderr, "cpu_sort_ab: %s, trial %llu left the keys out of order\n",
                       variant.c_str(), static_cast<unsigned long long>(trial));
          return 1;
        }
        const double ns = cpu * 1e9 / static_cast<double>(n);
        results[{name_of(s), variant}].push_back({wall, ns});
        std::printf("  trial %llu  %-18s scratch %-11s %7.3f s wall %7.2f ns/elem CPU %8ld "
                    "faults  load %s\n",
                    static_cast<unsigned long long>(trial), variant.c_str(), name_of(s), wall,
                    ns, faults, load.c_str());
        std::fflush(stdout);
      }
  munmap(kept, bytes);
  std::printf("medians (ratio: the variant's time over %s's; below 1 is faster)\n",
              o.variants.front().c_str());
  for (const scratch_kind s : o.scratch) {
    const std::vector<sample>& base = results[{name_of(s), o.variants.front()}];
    const auto field = [](const std::vector<sample>& v, double sample::*f) {
      std::vector<double> x;
      for (const sample& e : v) x.push_back(e.*f);
      return median(x);
    };
    for (const std::string& variant : o.variants) {
      const std::vector<sample>& v = results[{name_of(s), variant}];
      const double wall = field(v, &sample::wall), cpu = field(v, &sample::cpu_ns);
      std::printf("  %-18s scratch %-11s %7.3f s wall (%.3f) %7.2f ns/elem CPU (%.3f)\n",
                  variant.c_str(), name_of(s), wall, wall / field(base, &sample::wall), cpu,
                  cpu / field(base, &sample::cpu_ns));
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv)
{
  const options o = parse(argc, argv);
  return o.type == "u32" ? run<std::uint32_t>(o) : run<std::uint64_t>(o);
}
