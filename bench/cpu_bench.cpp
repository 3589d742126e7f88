// CPU engine benchmark (issue 23): in one run, on the same generated keys, the engine's direct
// CPU path (the parallel radix sort of core/cpu_sort.cpp, with its passes to and from ordered
// bits) against __gnu_parallel::sort on all cores and, unless skipped, std::sort on one thread:
// u64, u32 and f64 keys and u64/u64 pairs, uniform; then every distribution of u64 keys against
// uniform; then the budget-limited DSPS path on the host device. Every engine result is checked
// by the verifier. Keys are regenerated (deterministic for the seed) before each run instead of
// copied, so that 2^30 u64 keys need 8 GiB for the array and 8 GiB for the sort's buffer (or
// the merge sort's), and 2^29 pairs 16 GiB: --count 1Gi runs on a 24 GiB machine.
//
//   cpu_bench [--count 1Gi] [--pairs-count N] [--dist-count N] [--seed 1] [--budget-fraction 8]
//             [--skip-serial] [--goal 2.5] [--only CASES] [--json FILE] [--machine NAME]
//             [--commit C]
// --only takes a comma-separated subset of u64,u32,f64,pairs,dist,dsps (default: all), for
// measuring one case again without the minutes the others take.
#include "bench/results_format.hpp"
#include "core/generate.hpp"
#include "core/verify.hpp"

#include <gpusort/gpusort.hpp>
#include <gpusort/units.hpp>

#include <omp.h>
#include <parallel/algorithm>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

using gpusort::bench::target;

struct options {
  std::uint64_t count{std::uint64_t{1} << 30};
  std::uint64_t pairs_count{0};  ///< 0: count / 2
  std::uint64_t dist_count{0};   ///< 0: count / 4
  std::uint64_t seed{1};
  std::uint64_t budget_fraction{8};
  bool serial{true};
  std::string only;  ///< empty: every case
  double goal{2.5};
  std::string json, machine{"unknown"}, commit{"unknown"};
};

[[noreturn]] void usage(const char* why)
{
  std::fprintf(stderr,
               "cpu_bench: %s\nusage: cpu_bench [--count N] [--pairs-count N] [--dist-count N] "
               "[--seed S] [--budget-fraction F] [--skip-serial] [--goal X] [--only CASES] "
               "[--json FILE] "
               "[--machine NAME] [--commit C]\n",
               why);
  std::exit(64);
}

options parse(int argc, char** argv)
{
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    auto next = [&]() -> std::string_view {
      if (i + 1 >= argc) usage("missing value");
      return argv[++i];
    };
    auto count = [&](std::string_view what) {
      const auto c = gpusort::parse_count(next());
      if (!c || *c == 0) usage(what.data());
      return *c;
    };
    if (a == "--count") o.count = count("bad --count");
    else if (a == "--pairs-count") o.pairs_count = count("bad --pairs-count");
    else if (a == "--dist-count") o.dist_count = count("bad --dist-count");
    else if (a == "--seed") o.seed = count("bad --seed");
    else if (a == "--budget-fraction") o.budget_fraction = count("bad --budget-fraction");
    else if (a == "--skip-serial") o.serial = false;
    else if (a == "--goal") o.goal = std::atof(std::string{next()}.c_str());
    else if (a == "--only") o.only = "," + std::string{next()} + ",";
    else if (a == "--json") o.json = std::string{next()};
    else if (a == "--machine") o.machine = std::string{next()};
    else if (a == "--commit") o.commit = std::string{next()};
    else usage("unknown argument");
  }
  for (std::size_t at = 1; at < o.only.size();) {
    const std::size_t end = o.only.find(',', at);
    const std::string_view name{o.only.data() + at, end - at};
    if (name != "u64" && name != "u32" && name != "f64" && name != "pairs" && name != "dist" &&
        name != "dsps")
      usage("--only takes u64,u32,f64,pairs,dist,dsps");
    at = end + 1;
  }
  if (o.pairs_count == 0) o.pairs_count = o.count / 2;
  if (o.dist_count == 0) o.dist_count = o.count / 4;
  return o;
}

double time_it(const std::function<void()>& f)
{
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct row {
  std::string name;
  std::uint64_t n{};
  std::uint64_t bytes{};
  double seconds{};
};

std::vector<row> rows;

void add_row(std::string name, std::uint64_t n, std::uint64_t bytes, double seconds)
{
  std::printf("  %-44s %12llu %9.3f s %8.1f Mkeys/s\n", name.c_str(),
              static_cast<unsigned long long>(n), seconds,
              static_cast<double>(n) / seconds / 1e6);
  std::fflush(stdout);
  rows.push_back({std::move(name), n, bytes, seconds});
}

void check(const gpusort::key_array& keys, const std::optional<gpusort::value_array>& values,
           const gpusort::fingerprint& before, const std::string& what)
{
  const auto v = gpusort::verify(keys, values, gpusort::order::ascending, before);
  if (!v.ok) {
    std::fprintf(stderr, "cpu_bench: %s produced a wrong result: %s\n", what.c_str(),
                 v.message.c_str());
    std::exit(1);
  }
}

gpusort::engine cpu_engine(std::optional<std::uint64_t> budget = std::nullopt)
{
  gpusort::config cfg;
  cfg.devices = gpusort::device_selection::cpu;
  cfg.device_memory_budget = budget;
  return gpusort::engine{cfg};
}

/// Keys of type K: the baselines and the engine on the same generated data. Returns the engine's
/// speed-up over __gnu_parallel::sort.
template <typename K>
double keys_case(const char* type_name, std::uint64_t n, const options& o)
{
  std::vector<K> keys(n);
  const gpusort::key_array view{keys.data(), n, gpusort::dtype_of_v<K>};
  const auto regenerate = [&] {
    gpusort::generate(std::span<K>{keys}, gpusort::distribution::uniform, o.seed);
  };
  regenerate();
  const gpusort::fingerprint before = gpusort::fingerprint_of(view);
  const std::string tag = std::string{type_name} + " uniform";
  const int threads = omp_get_max_threads();
  if (o.serial) {
    add_row("std::sort 1 thread, " + tag, n, n * sizeof(K),
            time_it([&] { std::sort(keys.begin(), keys.end()); }));
    regenerate();
  }
  const double parallel = time_it([&] {
    __gnu_parallel::sort(keys.begin(), keys.end(),
                         __gnu_parallel::multiway_mergesort_tag(
                             static_cast<__gnu_parallel::_ThreadIndex>(threads)));
  });
  add_row("__gnu_parallel::sort, " + tag, n, n * sizeof(K), parallel);
  regenerate();
  gpusort::engine eng = cpu_engine();
  const double engine_seconds = eng.sort(std::span<K>{keys}).seconds;
  add_row("gpusort engine (direct CPU path), " + tag, n, n * sizeof(K), engine_seconds);
  check(view, std::nullopt, before, tag);
  return parallel / engine_seconds;
}

}  // namespace

int main(int argc, char** argv)
{
  const options o = parse(argc, argv);
  std::printf("cpu_bench: %llu keys, %d threads\n", static_cast<unsigned long long>(o.count),
              omp_get_max_threads());
  std::vector<target> targets;
  const auto speedup_target = [&](const std::string& name, double ratio) {
    targets.push_back(target{.name = name,
                             .unit = "x __gnu_parallel::sort",
                             .baseline = "__gnu_parallel::sort, all cores",
                             .value = ratio,
                             .ratio = ratio,
                             .goal = o.goal,
                             .higher_is_better = true});
  };
  const auto wanted = [&](std::string_view name) {
    return o.only.empty() || o.only.find("," + std::string{name} + ",") != std::string::npos;
  };
  if (wanted("u64"))
    speedup_target("cpu.u64_vs_gnu_parallel", keys_case<std::uint64_t>("u64", o.count, o));
  if (wanted("u32"))
    speedup_target("cpu.u32_vs_gnu_parallel", keys_case<std::uint32_t>("u32", o.count, o));
  if (wanted("f64"))
    speedup_target("cpu.f64_vs_gnu_parallel", keys_case<double>("f64", o.count, o));

  // u64/u64 pairs: the baseline sorts (key, value) records by key.
  if (wanted("pairs")) {
    const std::uint64_t n = o.pairs_count;
    std::vector<std::uint64_t> keys, values;
    const auto regenerate = [&] {
      keys.resize(n);
      values.resize(n);
      gpusort::generate(std::span<std::uint64_t>{keys}, gpusort::distribution::uniform, o.seed);
      gpusort::generate_values(gpusort::value_array{values.data(), n, 8}, o.seed);
    };
    // The records are made from the arrays, which are then freed and made again from the seed
    // for the engine: at most 32n bytes at once (the records and the merge sort's copy of them;
    // 16 GiB at 2^29 pairs), not 48n with the arrays kept beside them (OOM-killed at 2^29 on a
    // 24 GiB machine).
    double parallel = 0;
    {
      regenerate();
      std::vector<std::pair<std::uint64_t, std::uint64_t>> records(n);
      for (std::uint64_t i = 0; i < n; ++i) records[i] = {keys[i], values[i]};
      std::vector<std::uint64_t>().swap(keys);
      std::vector<std::uint64_t>().swap(values);
      parallel = time_it([&] {
        __gnu_parallel::sort(records.begin(), records.end(),
                             [](const auto& a, const auto& b) { return a.first < b.first; },
                             __gnu_parallel::multiway_mergesort_tag(
                                 static_cast<__gnu_parallel::_ThreadIndex>(omp_get_max_threads())));
      });
    }
    regenerate();
    add_row("__gnu_parallel::sort, u64/u64 pairs uniform", n, n * 16, parallel);
    const gpusort::key_array kv{keys.data(), n, gpusort::dtype::u64};
    const gpusort::value_array vv{values.data(), n, 8};
    const gpusort::fingerprint before = gpusort::fingerprint_of(kv, vv);
    gpusort::engine eng = cpu_engine();
    const double seconds =
        eng.sort_pairs(std::span<std::uint64_t>{keys}, std::span<std::uint64_t>{values}).seconds;
    add_row("gpusort engine (direct CPU path), u64/u64 pairs uniform", n, n * 16, seconds);
    check(kv, vv, before, "pairs");
    speedup_target("cpu.pairs_u64_vs_gnu_parallel", parallel / seconds);
  }

  // Every distribution of u64 keys against uniform: none may be more than 1.5x slower.
  if (wanted("dist")) {
    const std::uint64_t n = o.dist_count;
    std::vector<std::uint64_t> keys(n);
    const gpusort::key_array view{keys.data(), n, gpusort::dtype::u64};
    gpusort::engine eng = cpu_engine();
    double uniform = 0;
    for (const gpusort::distribution d : gpusort::all_distributions) {
      if (!gpusort::applies_to(d, gpusort::dtype::u64)) continue;
      gpusort::generate(std::span<std::uint64_t>{keys}, d, o.seed);
      const gpusort::fingerprint before = gpusort::fingerprint_of(view);
      const double seconds = eng.sort(std::span<std::uint64_t>{keys}).seconds;
      check(view, std::nullopt, before, std::string{gpusort::name_of(d)});
      add_row("gpusort engine, u64 " + std::string{gpusort::name_of(d)}, n, n * 8, seconds);
      if (d == gpusort::distribution::uniform) {
        uniform = seconds;
        continue;
      }
      targets.push_back(target{.name = "cpu.dist." + std::string{gpusort::name_of(d)},
                               .unit = "x uniform's time",
                               .baseline = "u64 uniform, same size",
                               .value = seconds,
                               .ratio = seconds / uniform,
                               .goal = 1.5,
                               .higher_is_better = false});
    }
  }

  // The out-of-core path on the host device (both rounds use the same sorter).
  if (wanted("dsps")) {
    const std::uint64_t n = o.dist_count;
    std::vector<std::uint64_t> keys(n);
    gpusort::generate(std::span<std::uint64_t>{keys}, gpusort::distribution::uniform, o.seed);
    const gpusort::key_array view{keys.data(), n, gpusort::dtype::u64};
    const gpusort::fingerprint before = gpusort::fingerprint_of(view);
    // The host device keeps two buffers per chunk: a budget of 2/F of the data gives chunks of
    // 1/F.
    gpusort::engine eng =
        cpu_engine(std::max<std::uint64_t>(n * 8 / o.budget_fraction * 2, 1 << 20));
    const gpusort::sort_report r = eng.sort(std::span<std::uint64_t>{keys});
    check(view, std::nullopt, before, "DSPS");
    add_row("gpusort engine, DSPS on the host device (d=" + std::to_string(r.chunks) +
                "), u64 uniform",
            n, n * 8, r.seconds);
  }

  const int met = gpusort::bench::print_targets(targets, "value");
  std::printf("\n%d of %zu targets met\n", met, targets.size());
  if (!o.json.empty()) {
    std::ostringstream raw;
    for (std::size_t i = 0; i < rows.size(); ++i)
      raw << (i > 0 ? "," : "") << "{\"name\": \"" << rows[i].name << "\", \"n\": " << rows[i].n
          << ", \"seconds\": " << rows[i].seconds << "}";
    gpusort::bench::write_results(o.json, o.commit, o.machine, targets, raw.str(),
                                  {"\"threads\": " + std::to_string(omp_get_max_threads())});
  }
  return 0;
}
