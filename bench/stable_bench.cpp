// Stable sort and argsort against the plain sort, in the embedded engine (issue 19): what the
// (key, position) pairs, the tie pass and the gathers of pipeline/stable.cpp cost. For each size
// and key type (f64 and i64, uniform keys with NaNs and zeros of both signs mixed into the
// floats) on memory the engine registered (as the daemon's shared buffers are) and on plain
// pageable memory: the plain sort, the sort in NumPy's order, the stable sort in NumPy's order,
// the argsort (int64 indices) and the stable sort of (key, u64) pairs, each the median of
// --repeat runs after a warm-up. Rates count the keys' bytes. Writes "stable." targets: each
// rate against the plain sort's on the same memory (the issue asks 0.6 of it).
// Usage: stable_bench --help. Runs on whatever devices the default configuration finds.
#include "bench/bench_cli.hpp"
#include "bench/results_format.hpp"
#include "core/generate.hpp"

#include <gpusort/gpusort.hpp>
#include <gpusort/units.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

using gpusort::bench::target;
using gpusort::bench::usage_error;

constexpr const char* usage =
    "usage: stable_bench [--sizes 64Mi,1Gi] [--repeat 3] [--budget-fraction 0|8] [--json FILE]\n"
    "                    [--machine NAME] [--commit C]\n"
    "\n"
    "The plain sort, NumPy's order, the stable sort, argsort and stable pairs of the embedded\n"
    "engine on f64 and i64 keys (--sizes: bytes of keys), on registered and on pageable memory;\n"
    "the median of --repeat runs after a warm-up. --budget-fraction 8 limits each device to\n"
    "1/8 of the keys (out of core); 0 (the default) leaves the budget automatic.\n"
    "exit codes: 0 done, 1 a failure (one line says which), 64 a bad command line\n";

struct options {
  std::vector<std::uint64_t> sizes{std::uint64_t{64} << 20, std::uint64_t{1} << 30};
  int repeat = 3;
  std::uint64_t budget_fraction = 0;
  gpusort::bench::results_options results;
};

void set_option(options& o, std::string_view flag, const std::string& v)
{
  if (flag == "--sizes") {
    o.sizes = gpusort::bench::parse_counts(flag, v);
  } else if (flag == "--repeat") {
    o.repeat = static_cast<int>(gpusort::bench::parse_one_count(flag, v, 100));
  } else if (flag == "--budget-fraction") {
    o.budget_fraction = v == "0" ? 0 : gpusort::bench::parse_one_count(flag, v, 1024);
  }
}

double median(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// Uniform keys; one float in 64 a NaN of either sign or a zero of either sign, so that the
/// NumPy order's canonical runs have work to do.
template <typename K>
void fill(std::vector<K>& keys, std::uint64_t seed)
{
  gpusort::generate(std::span<K>{keys}, gpusort::distribution::uniform, seed);
  if constexpr (std::is_floating_point_v<K>) {
    const K specials[] = {std::numeric_limits<K>::quiet_NaN(),
                          -std::numeric_limits<K>::quiet_NaN(), K{0.0}, K{-0.0}};
    for (std::size_t i = 0; i < keys.size(); i += 64) keys[i] = specials[(i / 64) % 4];
  }
}

template <typename K>
void run_type(const options& o, gpusort::engine& eng, std::uint64_t bytes, bool registered,
              std::vector<target>& targets, std::ostringstream& raw)
{
  const std::uint64_t n = bytes / sizeof(K);
  const gpusort::dtype type = gpusort::dtype_of_v<K>;
  std::vector<K> keys(n);
  std::vector<K> original(n);
  std::vector<std::int64_t> idx(n);
  std::vector<std::uint64_t> values(n);
  fill(original, 7);
  std::optional<gpusort::host_registration> reg_keys;
  std::optional<gpusort::host_registration> reg_idx;
  std::optional<gpusort::host_registration> reg_values;
  if (registered) {
    reg_keys = eng.register_host(keys.data(), n * sizeof(K));
    reg_idx = eng.register_host(idx.data(), n * sizeof(std::int64_t));
    reg_values = eng.register_host(values.data(), n * sizeof(std::uint64_t));
  }
  const std::string memory = registered ? "registered" : "pageable";
  const std::string tag = std::string{gpusort::name_of(type)} + "." + memory + "." +
                          gpusort::format_bytes(bytes);
  const double gb = static_cast<double>(bytes) / 1e9;

  const auto measure = [&](const std::string& what, const std::function<void()>& job) {
    std::vector<double> times;
    for (int rep = 0; rep <= o.repeat; ++rep) {
      std::memcpy(keys.data(), original.data(), n * sizeof(K));
      for (std::uint64_t i = 0; i < n; ++i) values[i] = i;
      const auto t0 = std::chrono::steady_clock::now();
      job();
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (rep > 0) times.push_back(s);
    }
    const double s = median(times);
    std::printf("%-34s %-16s %8.3f s %7.2f GB/s\n", tag.c_str(), what.c_str(), s, gb / s);
    raw << "{\"case\": \"" << tag << "\", \"job\": \"" << what << "\", \"seconds\": " << s
        << "},";
    return s;
  };
  const gpusort::key_array view{keys.data(), n, type};
  const double plain = measure("sort", [&] { eng.sort(gpusort::sort_job{.keys = view}); });
  const gpusort::sort_options numpy{.floats = gpusort::float_order::numpy};
  gpusort::sort_options stable = numpy;
  stable.stable = true;
  const double np_order =
      measure("sort numpy", [&] { eng.sort(gpusort::sort_job{.keys = view}, numpy); });
  const double stable_s =
      measure("stable numpy", [&] { eng.sort(gpusort::sort_job{.keys = view}, stable); });
  const double argsort_s = measure("argsort", [&] {
    eng.argsort(gpusort::argsort_job{.keys = view, .indices_out = idx.data()}, numpy);
  });
  const double pairs_s = measure("stable pairs", [&] {
    eng.sort(gpusort::sort_job{.keys = view,
                               .values = gpusort::value_array{values.data(), n, 8}},
             stable);
  });
  const auto add = [&](const std::string& what, double s, double goal) {
    targets.push_back({"stable." + what + "_vs_sort." + tag, "speed ratio",
                       "the plain sort of the same keys on the same memory", gb / s, plain / s,
                       goal, true});
  };
  add("numpy_order", np_order, 0.95);
  add("stable", stable_s, 0.6);
  add("argsort", argsort_s, 0.6);
  add("stable_pairs", pairs_s, 0.0);
}

int run(const options& o)
{
  std::vector<target> targets;
  std::ostringstream raw;
  for (const std::uint64_t bytes : o.sizes) {
    gpusort::config cfg;
    // About three buffers of a chunk per device and room for the sorters' scratch, as
    // gpu_bench forces its budget.
    if (o.budget_fraction > 0)
      cfg.device_memory_budget = bytes / o.budget_fraction * 3 + (std::uint64_t{256} << 20);
    gpusort::engine eng{cfg};
    for (const bool registered : {true, false}) {
      run_type<double>(o, eng, bytes, registered, targets, raw);
      run_type<std::int64_t>(o, eng, bytes, registered, targets, raw);
    }
  }
  gpusort::bench::report_results(o.results, targets, raw.str());
  return 0;
}

}  // namespace

int main(int argc, char** argv)
{
  return gpusort::bench::run_main<options>("stable_bench", usage, argc, argv,
                                           {"--sizes", "--repeat", "--budget-fraction"},
                                           set_option, run);
}
