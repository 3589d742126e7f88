// `gpusort plan`: what a sort would do and take, without sorting: the path, the chunks, the
// smallest device budget that works, the host memory and the time model's prediction, on this
// machine's engine or on a hypothetical machine described by its rates.
#include "client/commands.hpp"

#include "client/commands/common.hpp"

#include <gpusort/gpusort.hpp>
#include <gpusort/units.hpp>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace gpusort::cli {

const command_spec& plan_spec()
{
  static const command_spec spec{
      .name = "plan",
      .synopsis = "(--count N | --bytes B | --largest) --dtype T [--value-bytes 4|8] [--stable]\n"
                  "       [--argsort]\n"
                  "       [--config FILE] [--device-budget B] [--host-memory-budget B]\n"
                  "       [--gpus K [--link-in R] [--link-out R] [--link-both R] [--host R]\n"
                  "       [--host-dma R] [--peer R] [--pageable]] [--json]",
      .description =
          "Says what `gpusort sort --local` would do with an array of this shape, without\n"
          "one: the path (in core, resident, two rounds, direct, lean, or none where no plan\n"
          "fits the budget), the chunks and bins, the smallest device budget that works, the\n"
          "host memory beyond the arrays, and the predicted seconds phase by phase from the\n"
          "time model (docs/design.md, \"The time model\"). By default the machine is this\n"
          "one's engine (the H200's measured rates for its GPUs; the CPU's rough ones without).\n"
          "--gpus describes a hypothetical machine instead: K H200-like GPUs (0: the CPU),\n"
          "whose rates (GB/s) the other options replace. --largest plans the largest job of\n"
          "this shape that the GPUs sort in one round trip (the resident path), found by\n"
          "bisection over the element count.\n",
      .options = {
          {"count", "N", "elements, e.g. 1Gi"},
          {"bytes", "B", "the keys' size instead, e.g. 8GiB (a whole number of keys)"},
          {"largest", "", "the largest job of this shape sorted in one round trip on GPUs"},
          {"dtype", "T", "key type: u32 i32 u64 i64 f32 f64"},
          {"value-bytes", "4|8", "values of this width beside the keys (default: keys alone)"},
          {"stable", "", "a stable sort"},
          {"argsort", "", "an argsort (its indices of --value-bytes, default 8)"},
          {"config", "FILE", "configuration, YAML (default: $GPUSORT_CONFIG)"},
          {"device-budget", "B", "device memory budget per device (replaces the config's)"},
          {"host-memory-budget", "B", "host memory the job may take beyond its arrays"},
          {"gpus", "K", "a hypothetical machine of K GPUs (0: the CPU engine)"},
          {"link-in", "R", "its host-to-device rate per GPU, GB/s"},
          {"link-out", "R", "its device-to-host rate per GPU, GB/s"},
          {"link-both", "R", "its rate each way with both directions at once, GB/s"},
          {"host", "R", "its host memory copy rate from every core, GB/s"},
          {"host-dma", "R", "its host memory read plus written for the GPUs' copies, GB/s"},
          {"peer", "R", "its GPU-to-GPU rate each way, GB/s"},
          {"pageable", "", "the arrays are pageable (staged), not page-locked"},
          {"json", "", "print one JSON object"},
          {"help", "", "show this text"},
      }};
  return spec;
}

namespace {

std::uint64_t bytes_option(const parsed_args& a, std::string_view name)
{
  const std::string text = a.require(name);
  const std::optional<std::uint64_t> b = parse_bytes(text);
  if (!b)
    throw cli_error{exit_usage, fmt::format("bad --{} '{}' (e.g. 512MiB, 8GiB)", name, text)};
  return *b;
}

double rate_option(const parsed_args& a, std::string_view name, double otherwise)
{
  const std::optional<std::string> text = a.get(name);
  if (!text) return otherwise;
  double v = 0;
  const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), v);
  if (ec != std::errc{} || end != text->data() + text->size() || !std::isfinite(v) || v <= 0)
    throw cli_error{exit_usage, fmt::format("bad --{} '{}' (a rate in GB/s, e.g. 55.5)", name,
                                            *text)};
  return v;
}

/// The hypothetical machine the options describe, or nullopt for this engine's.
std::optional<machine_model> machine_option(const parsed_args& a, unsigned threads)
{
  const bool rates = a.has("link-in") || a.has("link-out") || a.has("link-both") ||
                     a.has("host") || a.has("host-dma") || a.has("peer") || a.has("pageable");
  if (!a.has("gpus")) {
    if (rates) throw cli_error{exit_usage, "rates describe a machine: give --gpus with them"};
    return std::nullopt;
  }
  const std::string text = a.require("gpus");
  const std::optional<std::uint64_t> k = parse_count(text);
  if (!k || *k > 4096) throw cli_error{exit_usage, "bad --gpus '" + text + "' (0 to 4096)"};
  machine_model m = *k == 0 ? machine_model::host(threads)
                            : machine_model::h200(static_cast<std::uint32_t>(*k));
  if (*k != 0) m.name = fmt::format("{} H200-like GPU{}", *k, *k == 1 ? "" : "s");
  m.link_in = rate_option(a, "link-in", m.link_in);
  m.link_out = rate_option(a, "link-out", m.link_out);
  m.link_both = rate_option(a, "link-both", m.link_both);
  m.host_copy = rate_option(a, "host", m.host_copy);
  m.host_dma = rate_option(a, "host-dma", m.host_dma);
  m.peer = rate_option(a, "peer", m.peer);
  m.pinned = !a.has("pageable");
  return m;
}

nlohmann::ordered_json machine_json(const machine_model& m)
{
  return {{"name", m.name},
          {"gpus", m.gpus},
          {"link_in", m.link_in},
          {"link_out", m.link_out},
          {"link_both", m.link_both},
          {"host_copy", m.host_copy},
          {"host_dma", m.host_dma},
          {"peer", m.peer},
          {"sort_rate", m.sort_rate},
          {"gather_rate", m.gather_rate},
          {"chunk_seconds", m.chunk_seconds},
          {"slice_seconds", m.slice_seconds},
          {"candidate_seconds", m.candidate_seconds},
          {"cut_seconds", m.cut_seconds},
          {"scatter_seconds", m.scatter_seconds},
          {"scatter_rate", m.scatter_rate},
          {"bucket_seconds", m.bucket_seconds},
          {"pinned", m.pinned}};
}

void print_plan(const job_plan& p, bool json, bool described)
{
  if (json) {
    nlohmann::ordered_json phases = nlohmann::ordered_json::array();
    for (const plan_phase& ph : p.phases)
      phases.push_back({{"name", ph.name}, {"seconds", ph.seconds}});
    print_json(stdout, {{"path", p.path},
                        {"refusal", p.refusal},
                        {"elements", p.elements},
                        {"bytes", p.bytes},
                        {"chunks", p.chunks},
                        {"bins", p.bins},
                        {"rounds", p.rounds},
                        {"candidates", p.candidates},
                        {"slices", p.slices},
                        {"buckets", p.buckets},
                        {"devices", p.devices},
                        {"device_budget", p.device_budget},
                        {"smallest_budget", p.smallest_budget},
                        {"host_memory_bytes", p.host_memory.fast_bytes},
                        {"lean_host_memory_bytes", p.host_memory.lean_bytes},
                        {"host_memory_limit", p.host_memory_limit},
                        {"seconds", p.seconds},
                        {"phases", phases},
                        {"machine", machine_json(p.machine)}});
    return;
  }
  std::printf("path: %s\n", p.path.c_str());
  if (!p.refusal.empty()) std::printf("refused: %s\n", p.refusal.c_str());
  std::printf("elements: %llu (%s)\n", static_cast<unsigned long long>(p.elements),
              format_bytes(p.bytes).c_str());
  std::printf("chunks: %llu, bins %llu, rounds %d, candidates %llu, slices %llu, devices %u\n",
              static_cast<unsigned long long>(p.chunks), static_cast<unsigned long long>(p.bins),
              p.rounds, static_cast<unsigned long long>(p.candidates),
              static_cast<unsigned long long>(p.slices), p.devices);
  // The scattered rounds: buckets from a sample before round 1 (candidates: the sample).
  if (p.buckets > 0)
    std::printf("scattered rounds: %llu buckets\n", static_cast<unsigned long long>(p.buckets));
  std::printf("device budget: %s per device; the smallest that works: %s (%llu bytes)\n",
              p.device_budget == 0 ? "unlimited" : format_bytes(p.device_budget).c_str(),
              format_bytes(p.smallest_budget).c_str(),
              static_cast<unsigned long long>(p.smallest_budget));
  const std::uint64_t fast = p.host_memory.fast_bytes;
  if (fast == 0 && p.host_memory.lean_bytes == 0 && p.elements > 1)
    std::printf("host memory beyond the arrays: not known for another machine's host\n");
  else
    std::printf("host memory beyond the arrays: %s (lean: %s), limit %s\n",
                fast == std::numeric_limits<std::uint64_t>::max() ? "no plan"
                                                                  : format_bytes(fast).c_str(),
                p.host_memory.lean_bytes == 0 ? "none"
                                              : format_bytes(p.host_memory.lean_bytes).c_str(),
                format_bytes(p.host_memory_limit).c_str());
  if (p.path == "none") return;
  std::printf("predicted: %.3f s\n", p.seconds);
  for (const plan_phase& ph : p.phases)
    std::printf("  %-16s %8.3f s\n", ph.name.c_str(), ph.seconds);
  const machine_model& m = p.machine;
  if (m.gpus == 0)
    std::printf("rates (%s, the CPU): sort %.2f GB/s, host copy %.1f GB/s\n", m.name.c_str(),
                m.sort_rate, m.host_copy);
  else
    std::printf("rates (%s, %u GPU%s): link in %.1f, out %.1f, both %.1f each way, host copy "
                "%.1f, host DMA %.0f, peer %.0f, sort %.0f GB/s; arrays %s\n",
                m.name.c_str(), m.gpus, m.gpus == 1 ? "" : "s", m.link_in, m.link_out,
                m.link_both, m.host_copy, m.host_dma, m.peer, m.sort_rate,
                m.pinned ? "pinned" : "pageable");
  if (described && m.gpus > 0)
    std::printf("note: a described GPU's capacity leaves out its sort's scratch, which only a\n"
                "GPU can size: a real one needs a few MiB more at the smallest budgets (8 GiB of\n"
                "u64 on an H200 needed 23.03 MiB where a described one said 19.03 MiB)\n");
}

/// The largest element count whose plan is the resident path (one round trip on the GPUs), by
/// bisection: the resident sort takes a job while each GPU's share fits its buffers, so the
/// path is resident up to one count and not beyond it (issue 40: the largest job that fits).
template <typename PlanOf>
std::uint64_t largest_resident(const PlanOf& plan_of)
{
  const auto resident = [&](std::uint64_t n) { return plan_of(n).path == "resident"; };
  std::uint64_t lo = 1;
  if (!resident(lo))
    throw cli_error{exit_usage, "--largest needs GPUs: this engine's (or the described machine's) "
                                "jobs do not run on the resident path (describe GPUs with --gpus K)"};
  std::uint64_t hi = 2;
  while (resident(hi)) {
    lo = hi;
    if (hi > (std::uint64_t{1} << 50))
      throw cli_error{exit_runtime, "--largest found no end to the resident path"};
    hi *= 2;
  }
  while (hi - lo > 1) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    (resident(mid) ? lo : hi) = mid;
  }
  return lo;
}

}  // namespace

int run_plan(const std::vector<std::string>& args)
{
  const std::optional<parsed_args> parsed = parse_or_help(args, plan_spec());
  if (!parsed) return exit_ok;
  const parsed_args& a = *parsed;
  if (!a.positionals.empty())
    throw cli_error{exit_usage, "plan takes no file: '" + a.positionals.front() + "'"};
  const dtype type = dtype_option(a);
  const bool largest = a.has("largest");
  if (int{a.has("count")} + int{a.has("bytes")} + int{largest} != 1)
    throw cli_error{exit_usage,
                    "give the size as --count N or --bytes B, or ask for --largest (one of them)"};
  std::uint64_t count = 0;  // --largest: found below, once the engine is there
  if (a.has("count")) {
    count = count_option(a);
  } else if (a.has("bytes")) {
    const std::uint64_t bytes = bytes_option(a, "bytes");
    if (bytes % size_of(type) != 0)
      throw cli_error{exit_usage, fmt::format("--bytes {} is not a whole number of {}-byte keys",
                                              bytes, size_of(type))};
    count = bytes / size_of(type);
  }
  const std::optional<std::uint32_t> value_bytes = optional_value_bytes_option(a);
  config cfg = load_cli_config(a);
  if (a.has("device-budget")) cfg.device_memory_budget = bytes_option(a, "device-budget");
  sort_options options{.stable = a.has("stable")};
  if (a.has("host-memory-budget"))
    options.host_memory_limit = bytes_option(a, "host-memory-budget");
  const std::optional<machine_model> machine = machine_option(a, cfg.host_threads);
  // A hypothetical machine's plan needs no GPU here: the CPU engine makes its decisions.
  if (machine) cfg.devices = device_selection::cpu;
  const engine e{cfg};
  const auto plan_of = [&](std::uint64_t n) {
    if (a.has("argsort")) {
      const argsort_job job{.keys = {nullptr, n, type}, .index_bytes = value_bytes.value_or(8)};
      return machine ? e.plan(job, options, *machine) : e.plan(job, options);
    }
    sort_job job{.keys = {nullptr, n, type}};
    if (value_bytes) job.values = value_array{nullptr, n, *value_bytes};
    return machine ? e.plan(job, options, *machine) : e.plan(job, options);
  };
  if (largest) count = largest_resident(plan_of);
  print_plan(plan_of(count), a.has("json"), a.has("gpus"));
  return exit_ok;
}

}  // namespace gpusort::cli
