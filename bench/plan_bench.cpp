// The host's planning between the two rounds as the chunks multiply (issue 44): for N u64 keys
// and a device capacity, the plan the engine makes (d chunks, g runs each, s candidates a run),
// then its steps on runs laid out as round 1 leaves them (each run sorted uniform keys, made by
// the benchmark without a sort), each timed: the run table, the splitters (candidate reads and
// their sort) and the cuts of every run (slice_runs). On the H200 host this is the "round 2
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
    "and the cuts of every run on simulated round-1 runs, the best of --repeat runs each.\n"
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
    double table_s = 1e9, splitters_s = 1e9, cuts_s = 1e9;
    std::uint64_t slices = 0;
    std::vector<std::uint64_t> keys;
    for (int rep = 0; rep < o.repeat; ++rep) {
      auto t0 = clock_type::now();
      const std::vector<run> runs = make_run_table(plan);
      const std::vector<run> new_chunks = transpose(runs, plan.d, g);
      table_s = std::min(table_s, seconds_since(t0));
      if (keys.empty()) keys = simulated_runs(plan, runs);
      const raw_runs<std::uint64_t> source{keys.data()};
      t0 = clock_type::now();
      const splitter_set<std::uint64_t> splitters = choose_splitters(
          source, std::span<const run>{new_chunks.data() + plan.sampled_chunk * plan.d, plan.d},
          plan.s, plan.d);
      splitters_s = std::min(splitters_s, seconds_since(t0));
      t0 = clock_type::now();
      const std::vector<final_chunk> finals = slice_runs(source, runs, splitters);
      cuts_s = std::min(cuts_s, seconds_since(t0));
      slices = 0;
      for (const final_chunk& fc : finals) slices += fc.slices.size();
    }
    const double total = table_s + splitters_s + cuts_s;
    std::printf("capacity %llu: d=%llu g=%llu s=%llu (%llu candidates), bound %llu, %llu slices: "
                "run table %.3f s, splitters %.3f s, cuts %.3f s, %.3f s in all\n",
                static_cast<unsigned long long>(capacity), static_cast<unsigned long long>(plan.d),
                static_cast<unsigned long long>(g), static_cast<unsigned long long>(plan.s),
                static_cast<unsigned long long>(plan.s * plan.d),
                static_cast<unsigned long long>(plan.bound),
                static_cast<unsigned long long>(slices), table_s, splitters_s, cuts_s, total);
    raw << "{\"keys\": " << o.keys << ", \"capacity\": " << capacity << ", \"d\": " << plan.d
        << ", \"g\": " << g << ", \"s\": " << plan.s << ", \"slices\": " << slices
        << ", \"run_table_s\": " << table_s << ", \"splitters_s\": " << splitters_s
        << ", \"cuts_s\": " << cuts_s << "},";
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
