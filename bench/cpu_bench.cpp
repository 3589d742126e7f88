// CPU engine benchmark: one run times, on the same generated keys, std::sort on one thread,
// the parallel CPU sort on all cores, the engine's direct CPU path (which wraps that parallel
// sort: the target is to stay within 10% of it) and the budget-limited DSPS path on the host
// device. Every result is checked by the verifier. Keys are regenerated before each run
// (deterministic for the seed) instead of copied, so that 1 Gi u64 keys need 8 GiB for the
// array and 8 GiB for DSPS's round-1 output, not a third copy.
//
//   cpu_bench [--count 1Gi] [--seed 1] [--budget-fraction 8] [--skip-serial] [--json FILE]
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
#include <fstream>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace {

struct measurement {
  std::string name;
  double seconds{};
  std::string note;
};

struct options {
  std::uint64_t count{std::uint64_t{1} << 30};
  std::uint64_t seed{1};
  std::uint64_t budget_fraction{8};
  bool serial{true};
  std::string json;
};

[[noreturn]] void usage(const char* why)
{
  std::fprintf(stderr,
               "cpu_bench: %s\nusage: cpu_bench [--count N] [--seed S] [--budget-fraction F] "
               "[--skip-serial] [--json FILE]\n",
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
    if (a == "--count") {
      const auto c = gpusort::parse_count(next());
      if (!c) usage("bad --count");
      o.count = *c;
    } else if (a == "--seed") {
      const auto c = gpusort::parse_count(next());
      if (!c) usage("bad --seed");
      o.seed = *c;
    } else if (a == "--budget-fraction") {
      const auto c = gpusort::parse_count(next());
      if (!c || *c == 0) usage("bad --budget-fraction");
      o.budget_fraction = *c;
    } else if (a == "--skip-serial") {
      o.serial = false;
    } else if (a == "--json") {
      o.json = std::string{next()};
    } else {
      usage("unknown argument");
    }
  }
  return o;
}

double time_it(const std::function<void()>& f)
{
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv)
{
  const options opt = parse(argc, argv);
  const std::uint64_t n = opt.count;
  std::vector<std::uint64_t> keys(n);
  const gpusort::key_array view{keys.data(), n, gpusort::dtype::u64};
  auto regenerate = [&] {
    gpusort::generate(std::span<std::uint64_t>{keys}, gpusort::distribution::uniform, opt.seed);
  };
  regenerate();
  const gpusort::fingerprint original = gpusort::fingerprint_of(view);
  auto check = [&](const std::string& what) {
    const auto v = gpusort::verify(view, std::nullopt, gpusort::order::ascending, original);
    if (!v.ok) {
      std::fprintf(stderr, "cpu_bench: %s produced a wrong result: %s\n", what.c_str(),
                   v.message.c_str());
      std::exit(1);
    }
  };

  std::vector<measurement> results;
  const int threads = omp_get_max_threads();
  std::printf("cpu_bench: %llu u64 uniform keys (%s), %d threads\n",
              static_cast<unsigned long long>(n), gpusort::format_bytes(n * 8).c_str(), threads);

  if (opt.serial) {
    results.push_back({"std::sort, 1 thread",
                       time_it([&] { std::sort(keys.begin(), keys.end()); }), ""});
    check("std::sort");
    regenerate();
  }
  results.push_back({"__gnu_parallel::sort, all cores", time_it([&] {
                       __gnu_parallel::sort(keys.begin(), keys.end(),
                                            __gnu_parallel::multiway_mergesort_tag(
                                                static_cast<__gnu_parallel::_ThreadIndex>(threads)));
                     }),
                     ""});
  check("__gnu_parallel::sort");
  regenerate();

  gpusort::config direct_cfg;
  direct_cfg.devices = gpusort::device_selection::cpu;
  gpusort::engine direct{direct_cfg};
  const auto direct_report = direct.sort(std::span<std::uint64_t>{keys});
  results.push_back({"gpusort engine, direct CPU path", direct_report.seconds, direct_report.engine});
  check("direct engine");
  regenerate();

  gpusort::config dsps_cfg = direct_cfg;
  // "Device" budget: the host device keeps two buffers per chunk, so 1/F of the data per chunk.
  dsps_cfg.device_memory_budget = std::max<std::uint64_t>(n * 8 / opt.budget_fraction * 2, 1 << 20);
  gpusort::engine dsps{dsps_cfg};
  const auto dsps_report = dsps.sort(std::span<std::uint64_t>{keys});
  results.push_back({"gpusort engine, DSPS on the host device (budget " +
                         gpusort::format_bytes(*dsps_cfg.device_memory_budget) + ")",
                     dsps_report.seconds,
                     "d=" + std::to_string(dsps_report.chunks) +
                         ", compensated=" + std::to_string(dsps_report.compensated_chunks)});
  check("DSPS engine");

  const double parallel = results[opt.serial ? 1 : 0].seconds;
  std::printf("\n| run | seconds | Mkeys/s | GB/s | vs parallel sort | note |\n"
              "| --- | ---: | ---: | ---: | ---: | --- |\n");
  for (const measurement& m : results)
    std::printf("| %s | %.3f | %.1f | %.2f | %.2fx | %s |\n", m.name.c_str(), m.seconds,
                static_cast<double>(n) / m.seconds / 1e6,
                static_cast<double>(n * 8) / m.seconds / 1e9, parallel / m.seconds,
                m.note.c_str());
  const double direct_ratio = results[opt.serial ? 2 : 1].seconds / parallel;
  const bool met = direct_ratio <= 1.10;
  std::printf("\ntarget: direct path within 10%% of the parallel sort: %.3fx the time -> %s\n",
              direct_ratio, met ? "met" : "MISSED");

  if (!opt.json.empty()) {
    std::ofstream out{opt.json};
    out << "{\n  \"elements\": " << n << ",\n  \"threads\": " << threads << ",\n  \"runs\": [\n";
    for (std::size_t i = 0; i < results.size(); ++i)
      out << "    {\"name\": \"" << results[i].name << "\", \"seconds\": " << results[i].seconds
          << "}" << (i + 1 < results.size() ? "," : "") << "\n";
    out << "  ],\n  \"targets\": [{\"name\": \"cpu.direct_vs_parallel_sort\", \"value\": "
        << direct_ratio << ", \"unit\": \"time ratio\", \"baseline\": \"__gnu_parallel::sort\", "
        << "\"ratio\": " << direct_ratio << ", \"target\": 1.10, \"met\": "
        << (met ? "true" : "false") << "}]\n}\n";
  }
  return 0;
}
