// Sorts of rows (issue 42) in the embedded engine, as a program using the library runs them:
//  - records (the sort benchmark's 100-byte records, 10-byte keys, by default) in host memory,
//    sorted in place by sort_records on the default devices, against the best parallel CPU sort
//    of the same records measured in the same run: sort_records on the CPU engine, and GNU's
//    parallel std::sort of (key, row) tuples followed by the same in-place move; the sorted
//    records checked by the independent verifier (core/records.hpp). The rate counts the
//    records' bytes end to end (keys read, order found, records moved); the peak RSS above the
//    records is the job's host memory;
//  - two u64 columns against one u128 column of the same bytes (argsort_rows).
// Writes "rows." targets. Usage: rows_bench --help.
#include "bench/bench_cli.hpp"
#include "bench/results_format.hpp"
#include "core/records.hpp"
#include "pipeline/host_memory.hpp"
#include "pipeline/rows/move_records.hpp"

#include <gpusort/gpusort.hpp>
#include <gpusort/rows.hpp>
#include <gpusort/units.hpp>

#include <omp.h>
#include <parallel/algorithm>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace {

using gpusort::bench::target;
using gpusort::bench::usage_error;

constexpr const char* usage =
    "usage: rows_bench [--records-bytes 1Gi] [--record-bytes 100] [--dist uniform]\n"
    "                  [--columns-bytes 256Mi] [--cpu yes|no] [--gnu yes|no] [--profile no|yes]\n"
    "                  [--repeat 1]"
    "                  [--json FILE]"
    "                  [--machine NAME] [--commit C]\n"
    "\n"
    "Records (--records-bytes of them, --record-bytes each, gensort's layout at 100, a 10-byte\n"
    "key at offset 0 compared as unsigned bytes) sorted in place on the default devices and,\n"
    "with --cpu yes, by the CPU engine and (unless --gnu no) by GNU's parallel std::sort of\n"
    "(key, row) tuples;\n"
    "then two u64 columns of --columns-bytes each against one u128 column of their bytes\n"
    "(0: skip). Times are the best of --repeat runs, each run's printed beside it (the first\n"
    "touches memory no run touched before); each run is verified. --profile yes prints\n"
    "where the last run on the default devices spent its time (the host's stages and the\n"
    "engine's).\n"
    "exit codes: 0 done, 1 a failure (one line says which), 64 a bad command line\n";

struct options {
  std::uint64_t records_bytes{std::uint64_t{1} << 30};
  std::uint32_t record_bytes{100};
  gpusort::distribution dist{gpusort::distribution::uniform};
  std::uint64_t columns_bytes{std::uint64_t{256} << 20};
  bool cpu{true};
  bool gnu{true};
  bool profile{false};
  int repeat{1};
  gpusort::bench::results_options results;
};

void set_option(options& o, std::string_view flag, const std::string& v)
{
  if (flag == "--records-bytes") {
    o.records_bytes = gpusort::bench::parse_one_count(flag, v);
  } else if (flag == "--record-bytes") {
    o.record_bytes = static_cast<std::uint32_t>(gpusort::bench::parse_one_count(flag, v, 4096));
  } else if (flag == "--dist") {
    const auto d = gpusort::parse_distribution(v);
    if (!d || !gpusort::applies_to_records(*d)) throw usage_error{"--dist: bad '" + v + "'"};
    o.dist = *d;
  } else if (flag == "--columns-bytes") {
    o.columns_bytes = v == "0" ? 0 : gpusort::bench::parse_one_count(flag, v);
  } else if (flag == "--cpu") {
    if (v != "yes" && v != "no") throw usage_error{"--cpu takes yes or no"};
    o.cpu = v == "yes";
  } else if (flag == "--gnu") {
    if (v != "yes" && v != "no") throw usage_error{"--gnu takes yes or no"};
    o.gnu = v == "yes";
  } else if (flag == "--profile") {
    if (v != "yes" && v != "no") throw usage_error{"--profile takes yes or no"};
    o.profile = v == "yes";
  } else if (flag == "--repeat") {
    o.repeat = static_cast<int>(gpusort::bench::parse_one_count(flag, v, 100));
  }
}

double seconds_since(std::chrono::steady_clock::time_point t)
{
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

/// Resets the peak RSS (VmHWM) to the current RSS (Linux 4.0+), so that a run's peak is its own.
void reset_peak_rss() { std::ofstream{"/proc/self/clear_refs"} << "5"; }

std::uint64_t rss_field(const char* name)
{
  std::ifstream status{"/proc/self/status"};
  std::string line;
  while (std::getline(status, line))
    if (line.rfind(name, 0) == 0) return std::stoull(line.substr(std::strlen(name))) * 1024;
  return 0;
}

/// The best parallel CPU sort of the benchmark's records we know besides the engine: tuples of
/// the key's first 8 bytes (big-endian), its last 2 and the row, by GNU's parallel multiway
/// mergesort, then the records moved in place as sort_records moves them.
struct tuple {
  std::uint64_t hi;
  std::uint32_t row;
  std::uint16_t lo;
  bool operator<(const tuple& o) const noexcept
  {
    return hi != o.hi ? hi < o.hi : lo != o.lo ? lo < o.lo : row < o.row;
  }
};

void gnu_parallel_sort(unsigned char* records, std::uint64_t n, std::uint32_t r)
{
  std::vector<tuple> t(n);
  const auto count = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < count; ++i) {
    const unsigned char* p = records + static_cast<std::uint64_t>(i) * r;
    std::uint64_t hi;
    std::memcpy(&hi, p, 8);
    t[static_cast<std::size_t>(i)] = {__builtin_bswap64(hi), static_cast<std::uint32_t>(i),
                                      static_cast<std::uint16_t>(p[8] << 8 | p[9])};
  }
  __gnu_parallel::sort(t.begin(), t.end());
  std::vector<std::uint32_t> perm(n);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < count; ++i)
    perm[static_cast<std::size_t>(i)] = t[static_cast<std::size_t>(i)].row;
  t = {};
  gpusort::detail::permute_records(records, n, r, perm.data(), std::uint64_t{64} << 20);
}

struct records_run {
  double seconds{};
  std::uint64_t peak_above{};  ///< peak RSS above the records, bytes
  std::string path;
};

int run(const options& o)
{
  const std::vector<gpusort::key_field> key{{gpusort::column_type::bytes, 0, 10}};
  const std::uint32_t r = o.record_bytes;
  if (r < 10) throw usage_error{"--record-bytes: at least 10 (the key's)"};
  const std::uint64_t n = o.records_bytes / r;
  const std::uint64_t bytes = n * r;
  gpusort::engine gpu{gpusort::config{}};
  std::string devices;
  for (const auto& d : gpu.devices()) devices += (devices.empty() ? "" : ",") + d;
  std::printf("rows_bench: %s of %u-byte records (%llu), %s keys, devices %s, %d threads\n",
              gpusort::format_bytes(bytes).c_str(), r, static_cast<unsigned long long>(n),
              std::string{gpusort::name_of(o.dist)}.c_str(), devices.c_str(),
              omp_get_max_threads());
  gpusort::detail::host_buffer records{bytes};
  auto* data = records.as<unsigned char>();
  gpusort::generate_records(data, n, r, o.dist, 42);
  const gpusort::records_checksum original = gpusort::checksum_records({data, n, r});
  {
    // A warm-up: CUDA's start and the engine's first allocations are not the sort's.
    std::vector<unsigned char> small(std::size_t{1} << 20);
    gpusort::generate_records(small.data(), small.size() / r, r, o.dist, 7);
    gpusort::sort_records(gpu, {small.data(), small.size() / r, r}, key);
  }
  std::ostringstream raw;
  std::vector<target> targets;
  const auto timed = [&](const std::string& name, auto&& sort) {
    records_run best;
    std::string each;
    for (int k = 0; k < o.repeat; ++k) {
      gpusort::generate_records(data, n, r, o.dist, 42);
      reset_peak_rss();
      const std::uint64_t before = rss_field("VmRSS:");
      const auto start = std::chrono::steady_clock::now();
      std::string path = sort();
      const double s = seconds_since(start);
      const std::uint64_t peak = rss_field("VmHWM:");
      const gpusort::records_check check = gpusort::verify_records({data, n, r}, key, original);
      if (!check.ok) throw std::runtime_error{name + ": " + check.message};
      if (k == 0 || s < best.seconds) best = {s, peak > before ? peak - before : 0, path};
      char t[32];
      std::snprintf(t, sizeof t, "%s%.3f", k == 0 ? "" : ", ", s);
      each += t;
    }
    std::printf("  %-34s %8.3f s  %6.2f GB/s  peak RSS +%s  %s%s\n", name.c_str(), best.seconds,
                static_cast<double>(bytes) / best.seconds / 1e9,
                gpusort::format_bytes(best.peak_above).c_str(), best.path.c_str(),
                o.repeat > 1 ? (" (runs: " + each + " s)").c_str() : "");
    raw << "{\"case\": " << gpusort::bench::json_string(name) << ", \"bytes\": " << bytes
        << ", \"record_bytes\": " << r << ", \"seconds\": " << best.seconds
        << ", \"peak_rss_above_bytes\": " << best.peak_above << "},";
    return best.seconds;
  };
  gpusort::sort_report profiled;
  const double engine_s = timed("sort_records (default devices)", [&] {
    gpusort::sort_options opts;
    opts.profile = o.profile;
    profiled = gpusort::sort_records(gpu, {data, n, r}, key, nullptr, opts);
    return profiled.engine + " " + profiled.path;
  });
  if (o.profile) gpusort::bench::print_profile(profiled);
  targets.push_back({"rows.records_rate", "GB/s", "12 GB/s of records end to end",
                     static_cast<double>(bytes) / engine_s / 1e9,
                     static_cast<double>(bytes) / engine_s / 1e9 / 12.0, 1.0, true});
  if (o.cpu) {
    gpusort::config cpu_cfg;
    cpu_cfg.devices = gpusort::device_selection::cpu;
    gpusort::engine cpu{cpu_cfg};
    const double cpu_engine_s = timed("sort_records (CPU engine)", [&] {
      const auto rep = gpusort::sort_records(cpu, {data, n, r}, key);
      return rep.engine + " " + rep.path;
    });
    double best_cpu = cpu_engine_s;
    if (o.gnu && n < (std::uint64_t{1} << 32)) {
      const double gnu_s = timed("GNU parallel sort of tuples", [&] {
        gnu_parallel_sort(data, n, r);
        return std::string{"__gnu_parallel::sort"};
      });
      best_cpu = std::min(best_cpu, gnu_s);
    }
    targets.push_back({"rows.records_vs_cpu", "x", "the best parallel CPU sort, same run",
                       best_cpu / engine_s, best_cpu / engine_s, 5.0, true});
  }
  records = gpusort::detail::host_buffer{};

  if (o.columns_bytes > 0) {
    const std::uint64_t m = o.columns_bytes / 8;
    std::vector<std::uint64_t> hi(m), lo(m), wide(2 * m);
    gpusort::generate(std::span<std::uint64_t>{hi}, gpusort::distribution::uniform, 3);
    gpusort::generate(std::span<std::uint64_t>{lo}, gpusort::distribution::uniform, 4);
    const auto count = static_cast<std::int64_t>(m);
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < count; ++i) {
      wide[2 * static_cast<std::size_t>(i)] = lo[static_cast<std::size_t>(i)];
      wide[2 * static_cast<std::size_t>(i) + 1] = hi[static_cast<std::size_t>(i)];
    }
    const std::uint32_t index_bytes = m < (std::uint64_t{1} << 32) ? 4 : 8;
    std::vector<unsigned char> perm_a(m * index_bytes), perm_b(m * index_bytes);
    const auto best_of = [&](auto&& f) {
      double best = 0;
      for (int k = 0; k < o.repeat; ++k) {
        const auto start = std::chrono::steady_clock::now();
        f();
        const double s = seconds_since(start);
        if (k == 0 || s < best) best = s;
      }
      return best;
    };
    const double two = best_of([&] {
      gpusort::argsort_rows(gpu, {m, {gpusort::column(hi), gpusort::column(lo)}}, perm_a.data(),
                            index_bytes);
    });
    const double one = best_of([&] {
      gpusort::argsort_rows(gpu, {m, {{wide.data(), 16, {gpusort::column_type::u128}}}},
                            perm_b.data(), index_bytes);
    });
    if (perm_a != perm_b) throw std::runtime_error{"two u64 columns and one u128 disagree"};
    std::printf("  two u64 columns of %s: %.3f s; one u128 column: %.3f s (%.2fx)\n",
                gpusort::format_bytes(o.columns_bytes).c_str(), two, one, two / one);
    raw << "{\"case\": \"two u64 columns\", \"bytes\": " << 2 * m * 8 << ", \"seconds\": " << two
        << "}, {\"case\": \"one u128 column\", \"bytes\": " << 2 * m * 8
        << ", \"seconds\": " << one << "},";
    targets.push_back({"rows.two_columns_vs_u128", "x", "one u128 column of the same bytes",
                       two / one, two / one, 1.3, false});
  }
  gpusort::bench::report_results(o.results, targets, raw.str());
  return 0;
}

}  // namespace

int main(int argc, char** argv)
{
  return gpusort::bench::run_main<options>(
      "rows_bench", usage, argc, argv,
      {"--records-bytes", "--record-bytes", "--dist", "--columns-bytes", "--cpu", "--gnu",
       "--profile", "--repeat"},
      set_option, run);
}
