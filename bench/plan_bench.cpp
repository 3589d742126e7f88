// The host's planning between the two rounds as the chunks multiply (issue 44): for N u64 keys
// and a device capacity, the plan the engine makes (d chunks, g runs each, s candidates a run),
// then its steps on runs laid out as round 1 leaves them (each run sorted uniform keys, made by
// the benchmark without a sort), each timed: the run table, the splitters (candidate reads and
// their sort) and the cuts of every run (cut_runs: the usual sample first where the bound needs
// more candidates, then again with the bound's alone). On the H200 host this is the "round 2
// plan" stage of a profile (0.4-0.8 s at d = 1685-4096); here it runs on the CPUs alone, so
// that a change to the planning can be measured on any machine. Usage: plan_bench --help.
#include "bench/bench_cli.hpp"
#include "core/plan/chunk_plan.hpp"
#include "core/plan/dealing.hpp"
#include "core/plan/run_source.hpp"
#include "core/plan/slicing.hpp"
#include "core/plan/splitters.hpp"

#include <gpusort/error.hpp>

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0)
{
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

constexpr const char* usage =
    "usage: plan_bench [--keys 256Mi] [--capacities 4Mi,1Mi,256Ki,64Ki] [--repeat 3]\n"
    "                  [--json FILE] [--machine NAME] [--commit C]\n"
    "\n"
    "The host's planning between the rounds for --keys u64 keys at each device capacity\n"
    "(elements a chunk may hold): the plan (d, g, s, bound), then the run table, the splitters\n"
    "and the cuts of every run on simulated round-1 runs, the best of --repeat runs each: as\n"
    "round 2 makes them (the usual sample first where the bound needs more candidates, kept\n"
    "where its final chunks keep the bound) and with the bound's candidates alone.\n"
    "A capacity too small for two rounds is reported with the smallest that works.\n"
    "exit codes: 0 done, 1 a failure (one line says which), 64 a bad command line\n";

struct options {
  std::uint64_t keys = std::uint64_t{256} << 20;
  std::vector<std::uint64_t> capacities{std::uint64_t{4} << 20, std::uint64_t{1} << 20,
                                        std::uint64_t{256} << 10, std::uint64_t{64} << 10};
  int repeat = 3;
  gpusort::bench::results_options results;
};

void set_option(options& o, std::string_view flag, const std::string& v)
{
  if (flag == "--keys") o.keys = gpusort::bench::parse_one_count(flag, v);
  if (flag == "--capacities") o.capacities = gpusort::bench::parse_counts(flag, v);
  if (flag == "--repeat")
    o.repeat = static_cast<int>(gpusort::bench::parse_one_count(flag, v, 100));
}

/// Round 1's output for `plan`: every run of the run table sorted, uniform over the key range
/// (increments drawn per run: the runs of one chunk interleave as dealt runs do).
std::vector<std::uint64_t> simulated_runs(const gpusort::detail::chunk_plan& plan,
                                          const std::vector<gpusort::detail::run>& runs)
{
  std::vector<std::uint64_t> keys(plan.n);
  const auto count = static_cast<std::int64_t>(runs.size());
#pragma omp parallel for schedule(dynamic, 16)
  for (std::int64_t r = 0; r < count; ++r) {
    const gpusort::detail::run& run = runs[static_cast<std::size_t>(r)];
    std::mt19937_64 rng{static_cast<std::uint64_t>(r) + 1};
    const std::uint64_t step = std::numeric_limits<std::uint64_t>::max() / (run.length + 1) * 2;
    std::uniform_int_distribution<std::uint64_t> inc{0, step};
    std::uint64_t at = 0;
    for (std::uint64_t i = 0; i < run.length; ++i) {
      const std::uint64_t next = at + inc(rng);
      at = next < at ? std::numeric_limits<std::uint64_t>::max() : next;  // saturate
      keys[run.offset + i] = at;
    }
  }
  return keys;
}

int run_bench(const options& o)
{
  using namespace gpusort::detail;
  using gpusort::detail::run;
  std::vector<gpusort::bench::target> targets;
  std::ostringstream raw;
  std::printf("plan_bench: %llu u64 keys, %d threads\n", static_cast<unsigned long long>(o.keys),
              omp_get_max_threads());
  for (const std::uint64_t capacity : o.capacities) {
    chunk_plan plan;
    try {
      plan = make_plan(o.keys, device_capacity{.elements = capacity, .bytes_per_element = 8},
                       std::nullopt, 8);
    } catch (const gpusort::config_error&) {
      std::printf("capacity %llu: no two-round plan; the smallest capacity is %llu\n",
                  static_cast<unsigned long long>(capacity),
                  static_cast<unsigned long long>(min_feasible_capacity(o.keys, 8)));
      continue;
    }
    if (plan.in_core()) {
      std::printf("capacity %llu: in core\n", static_cast<unsigned long long>(capacity));
      continue;
    }
    const std::uint64_t g = plan.runs_per_chunk();
    std::vector<std::uint64_t> keys;
    // The plan as round 2 makes it (the usual sample first, cut_runs), then with the bound's
    // candidates alone (quick_s = 0), as it was made before.
    for (const bool usual_first : {true, false}) {
      chunk_plan as_run = plan;
      if (!usual_first) as_run.quick_s = 0;
      double table_s = 1e9, dropped_s = 1e9, splitters_s = 1e9, cuts_s = 1e9;
      std::uint64_t slices = 0, used_s = 0, largest = 0;
      for (int rep = 0; rep < o.repeat; ++rep) {
        const auto t0 = clock_type::now();
        const std::vector<run> runs = make_run_table(as_run);
        const std::vector<run> new_chunks = transpose(runs, as_run.d, g);
        table_s = std::min(table_s, seconds_since(t0));
        if (keys.empty()) keys = simulated_runs(as_run, runs);
        const raw_runs<std::uint64_t> source{keys.data()};
        const round2_cuts<std::uint64_t> cuts = cut_runs(
            source, as_run, runs,
            std::span<const run>{new_chunks.data() + as_run.sampled_chunk * as_run.d, as_run.d});
        dropped_s = std::min(dropped_s, cuts.dropped_seconds);
        splitters_s = std::min(splitters_s, cuts.splitters_seconds);
        cuts_s = std::min(cuts_s, cuts.cuts_seconds);
        used_s = cuts.s;
        slices = largest = 0;
        for (const final_chunk& fc : cuts.finals) {
          slices += fc.slices.size();
          largest = std::max(largest, fc.size);
        }
      }
      const double total = table_s + dropped_s + splitters_s + cuts_s;
      std::printf("capacity %llu%s: d=%llu g=%llu s=%llu of %llu (%llu candidates), bound %llu, "
                  "largest final %llu, %llu slices: run table %.3f s, dropped sample %.3f s, "
                  "splitters %.3f s, cuts %.3f s, %.3f s in all\n",
                  static_cast<unsigned long long>(capacity),
                  usual_first ? "" : " (the bound's candidates only)",
                  static_cast<unsigned long long>(plan.d), static_cast<unsigned long long>(g),
                  static_cast<unsigned long long>(used_s), static_cast<unsigned long long>(plan.s),
                  static_cast<unsigned long long>(used_s * plan.d),
                  static_cast<unsigned long long>(plan.bound),
                  static_cast<unsigned long long>(largest), static_cast<unsigned long long>(slices),
                  table_s, dropped_s, splitters_s, cuts_s, total);
      raw << "{\"keys\": " << o.keys << ", \"capacity\": " << capacity
          << ", \"usual_sample_first\": " << (usual_first ? "true" : "false")
          << ", \"d\": " << plan.d << ", \"g\": " << g << ", \"s\": " << used_s
          << ", \"bound_s\": " << plan.s << ", \"largest_final\": " << largest
          << ", \"slices\": " << slices << ", \"run_table_s\": " << table_s
          << ", \"dropped_s\": " << dropped_s << ", \"splitters_s\": " << splitters_s
          << ", \"cuts_s\": " << cuts_s << "},";
      if (plan.first_s() == plan.s) break;  // one way only
    }
  }
  gpusort::bench::report_results(o.results, targets, raw.str());
  return 0;
}

}  // namespace

int main(int argc, char** argv)
{
  return gpusort::bench::run_main<options>("plan_bench", usage, argc, argv,
                                           {"--keys", "--capacities", "--repeat"}, set_option,
                                           run_bench);
}
