// GPU executor benchmark (issue 3): in one run, the pinned copy bandwidth of each GPU, the
// baseline "copy in, CUB radix sort, copy out" from pinned and from pageable memory, the
// parallel CPU sort, and gpusort on u64 uniform keys with the budget forced to 1/8 of the data
// (true out of core) and without, from memory the engine pinned and from plain memory.
// Copy rates on one shared host move by 10-25% between runs, so the baselines count their best
// of several runs (the floor is the fastest the links went, in either kind of pinned memory) and
// gpusort its median after a warm-up run (buffers and the pinned round-1 output cached, as a
// daemon keeps them): a target met here is not met by a lucky run.
// Writes bench/results-style JSON with "executor." targets. Usage: gpu_bench --help; any failure
// (no GPU, a wrong result, out of memory) ends it with one line and exit code 1.
// --compress yes (issue 21) measures instead compressed runs between the rounds: u32 and u64
// keys of several distributions out of core (budget 1/8) with compress_runs off, on and auto,
// against the same PCIe floor, with "compress." targets.
#include "bench/bench_cli.hpp"
#include "bench/results_format.hpp"
#include "core/checks.hpp"
#include "core/cpu_sort.hpp"
#include "core/cuda/chunk_ops.cuh"
#include "core/generate.hpp"
#include "core/stream_copy.hpp"
#include "core/verify.hpp"
#include "pipeline/cuda/cuda_device.hpp"
#include "pipeline/cuda/resources.hpp"

#include <gpusort/error.hpp>
#include <gpusort/gpusort.hpp>
#include <gpusort/log.hpp>
#include <gpusort/units.hpp>

#include <cuda_runtime_api.h>
#include <omp.h>
#include <parallel/algorithm>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
using gpusort::detail::host_buffer;

double seconds_since(clock_type::time_point t0)
{
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

using gpusort::bench::target;
using gpusort::bench::usage_error;

struct bandwidth {
  double h2d{}, d2h{}, both_each{};
};

constexpr int bandwidth_repeats = 5;

/// The least of `repeats` timings after one untimed warm-up call.
double best_of(int repeats, const std::function<double()>& timed_run)
{
  timed_run();
  double best = timed_run();
  for (int i = 1; i < repeats; ++i) best = std::min(best, timed_run());
  return best;
}

double median(std::vector<double> v)
{
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 == 1 ? v[h] : (v[h - 1] + v[h]) / 2;
}

/// Pinned copy bandwidth of one GPU (GB/s): each direction alone, then both at once. From
/// cudaHostAlloc memory, or (`registered`) from memory the engine pinned the way it pins its own
/// and its users' buffers (mmap, then cudaHostRegister).
bandwidth measure_bandwidth(int dev, std::uint64_t bytes, bool registered = false)
{
  const gpusort::cuda::set_device_guard guard{dev};
  gpusort::cuda::pinned_buffer alloc_in, alloc_out;
  host_buffer reg_in, reg_out;
  void* in = nullptr;
  void* out = nullptr;
  if (registered) {
    reg_in = gpusort::detail::pinned_host_buffer(bytes);
    reg_out = gpusort::detail::pinned_host_buffer(bytes);
    std::memset(reg_in.data(), 1, bytes);  // touched, as a user's data would be
    std::memset(reg_out.data(), 1, bytes);
    in = reg_in.data();
    out = reg_out.data();
  } else {
    alloc_in = gpusort::cuda::pinned_buffer{bytes, cudaHostAllocPortable};
    alloc_out = gpusort::cuda::pinned_buffer{bytes, cudaHostAllocPortable};
    in = alloc_in.data();
    out = alloc_out.data();
  }
  gpusort::cuda::device_buffer d_a{bytes}, d_b{bytes};
  gpusort::cuda::cuda_stream s1, s2;
  auto timed = [&](const std::function<void()>& issue) {
    return best_of(bandwidth_repeats, [&] {
      const auto t0 = clock_type::now();
      issue();
      s1.synchronize();
      s2.synchronize();
      return seconds_since(t0);
    });
  };
  bandwidth b;
  b.h2d = static_cast<double>(bytes) / 1e9 / timed([&] {
    GPUSORT_CUDA_TRY(cudaMemcpyAsync(d_a.data(), in, bytes, cudaMemcpyHostToDevice, s1.value()));
  });
  b.d2h = static_cast<double>(bytes) / 1e9 / timed([&] {
    GPUSORT_CUDA_TRY(cudaMemcpyAsync(out, d_b.data(), bytes, cudaMemcpyDeviceToHost, s2.value()));
  });
  b.both_each = static_cast<double>(bytes) / 1e9 / timed([&] {
    GPUSORT_CUDA_TRY(cudaMemcpyAsync(d_a.data(), in, bytes, cudaMemcpyHostToDevice, s1.value()));
    GPUSORT_CUDA_TRY(cudaMemcpyAsync(out, d_b.data(), bytes, cudaMemcpyDeviceToHost, s2.value()));
  });
  return b;
}

/// Which copies measure_aggregate issues on each GPU.
enum class copy_directions : std::uint8_t { both, h2d, d2h };
/// Where its host side lies: a cudaHostAlloc buffer for each GPU, or one array pinned as the
/// engine pins a caller's (mmap, huge pages advised, cudaHostRegister), each GPU its share of
/// it side by side, as a fitting job on several GPUs copies.
enum class aggregate_memory : std::uint8_t { allocated, registered };

/// Simultaneous copies on every GPU at once (GB/s, all GPUs and directions summed): what the
/// host's memory and root complex allow together, both ways or one way (a fitting job on
/// several GPUs copies in on all of them, then out on all of them: issue 40's floor).
/// `beside`: what every GPU does meanwhile on a stream of its own, as a fitting job sorts its
/// pieces while they copy in and merges its ranges, fetching their parts from the other GPUs,
/// while they copy out: CUB's radix sort of 2^25 u64 keys in device memory back to back, or
/// fetches of the next GPU's 256 MiB in 16 parts, by cudaMemcpyPeerAsync (the copy engines)
/// or by one gather kernel a fetch (the SMs, reading the peer's memory over NVLink).
enum class beside_work : std::uint8_t { nothing, sorts, peer_copies, peer_kernel };

double measure_aggregate(int gpus, std::uint64_t bytes,
                         copy_directions directions = copy_directions::both,
                         aggregate_memory memory = aggregate_memory::allocated,
                         beside_work beside = beside_work::nothing)
{
  constexpr std::uint64_t work_keys = std::uint64_t{1} << 25;
  constexpr std::uint32_t fetch_parts = 16;
  constexpr std::uint64_t part_keys = work_keys / fetch_parts;
  struct lane {
    gpusort::cuda::device_buffer d_a, d_b;
    gpusort::cuda::cuda_stream s1, s2;
    void* h_in{};
    void* h_out{};
    // The work beside the copies: its keys, where it writes, a sort's scratch or a fetch's
    // table of parts.
    gpusort::cuda::device_buffer d_keys, d_alt, d_scratch;
    gpusort::cuda::cuda_stream working;
  };
  const bool working = beside != beside_work::nothing;
  std::vector<gpusort::cuda::pinned_buffer> allocated;
  host_buffer registered;
  if (memory == aggregate_memory::registered)
    registered = gpusort::detail::pinned_host_buffer(2 * static_cast<std::uint64_t>(gpus) * bytes);
  std::vector<lane> lanes;
  for (int g = 0; g < gpus; ++g) {
    const gpusort::cuda::set_device_guard guard{g};
    lane& l = lanes.emplace_back(lane{gpusort::cuda::device_buffer{bytes},
                                      gpusort::cuda::device_buffer{bytes},
                                      gpusort::cuda::cuda_stream{}, gpusort::cuda::cuda_stream{}});
    if (working) {
      l.d_keys = gpusort::cuda::device_buffer{work_keys * 8};
      l.d_alt = gpusort::cuda::device_buffer{work_keys * 8};
      l.d_scratch = gpusort::cuda::device_buffer{
          beside == beside_work::sorts
              ? gpusort::cuda::radix_sort_scratch_bytes(work_keys, 8, 0)
              : fetch_parts * sizeof(gpusort::cuda::gather_slice)};
      GPUSORT_CUDA_TRY(cudaMemset(l.d_keys.data(), 0x5a, work_keys * 8));
    }
    if (memory == aggregate_memory::registered) {
      char* base = registered.as<char>();
      l.h_in = base + static_cast<std::uint64_t>(g) * bytes;
      l.h_out = base + static_cast<std::uint64_t>(gpus + g) * bytes;
    } else {
      l.h_in = allocated.emplace_back(bytes, cudaHostAllocPortable).data();
      l.h_out = allocated.emplace_back(bytes, cudaHostAllocPortable).data();
    }
  }
  const auto peer_of = [&](int g) { return (g + 1) % gpus; };
  if (beside == beside_work::peer_copies || beside == beside_work::peer_kernel) {
    for (int g = 0; g < gpus; ++g) {
      const gpusort::cuda::set_device_guard guard{g};
      const cudaError_t e = cudaDeviceEnablePeerAccess(peer_of(g), 0);
      if (e == cudaErrorPeerAccessAlreadyEnabled)
        cudaGetLastError();
      else
        GPUSORT_CUDA_TRY(e);
      std::vector<gpusort::cuda::gather_slice> table(fetch_parts);
      const char* peer = lanes[static_cast<std::size_t>(peer_of(g))].d_keys.data<char>();
      for (std::uint32_t i = 0; i < fetch_parts; ++i)
        table[i] = {peer + i * part_keys * 8, part_keys, i * part_keys};
      lane& l = lanes[static_cast<std::size_t>(g)];
      GPUSORT_CUDA_TRY(cudaMemcpy(l.d_scratch.data(), table.data(),
                                  table.size() * sizeof(table[0]), cudaMemcpyHostToDevice));
    }
  }
  // The work goes in before the clock starts: its few hundred launches took milliseconds of
  // the host's time against 20-40 ms of copies, which the copies' rate had counted as theirs.
  // Enough of it to outlast the copies: 24 sorts of a few ms each, 64 fetches of 256 MiB at
  // NVLink's few hundred GB/s.
  const auto issue_work = [&] {
    for (int g = 0; g < gpus && working; ++g) {
      const gpusort::cuda::set_device_guard guard{g};
      lane& l = lanes[static_cast<std::size_t>(g)];
      const lane& peer = lanes[static_cast<std::size_t>(peer_of(g))];
      const cudaStream_t s = l.working.value();
      for (int i = 0; i < (beside == beside_work::sorts ? 24 : 64); ++i) {
        if (beside == beside_work::sorts) {
          gpusort::cuda::radix_sort(l.d_keys.data(), l.d_alt.data(), nullptr, nullptr, work_keys,
                                    8, 0, l.d_scratch.data(), l.d_scratch.size(), s);
        } else if (beside == beside_work::peer_copies) {
          for (std::uint64_t p = 0; p < fetch_parts; ++p)
            GPUSORT_CUDA_TRY(cudaMemcpyPeerAsync(l.d_alt.data<char>() + p * part_keys * 8, g,
                                                 peer.d_keys.data<char>() + p * part_keys * 8,
                                                 peer_of(g), part_keys * 8, s));
        } else {
          gpusort::cuda::gather(l.d_scratch.data<gpusort::cuda::gather_slice>(), fetch_parts,
                                part_keys, l.d_alt.data(), 8, s);
        }
      }
    }
  };
  const auto issue_copies = [&] {
    for (int g = 0; g < gpus; ++g) {
      const gpusort::cuda::set_device_guard guard{g};
      lane& l = lanes[static_cast<std::size_t>(g)];
      if (directions != copy_directions::d2h)
        GPUSORT_CUDA_TRY(cudaMemcpyAsync(l.d_a.data(), l.h_in, bytes, cudaMemcpyHostToDevice,
                                         l.s1.value()));
      if (directions != copy_directions::h2d)
        GPUSORT_CUDA_TRY(cudaMemcpyAsync(l.h_out, l.d_b.data(), bytes, cudaMemcpyDeviceToHost,
                                         l.s2.value()));
    }
    for (lane& l : lanes) {
      l.s1.synchronize();
      l.s2.synchronize();
    }
  };
  const double seconds = best_of(bandwidth_repeats, [&] {
    issue_work();
    const auto t0 = clock_type::now();
    issue_copies();
    const double took = seconds_since(t0);
    for (lane& l : lanes) l.working.synchronize();  // the work ends before the next run's
    return took;
  });
  const double ways = directions == copy_directions::both ? 2.0 : 1.0;
  return ways * gpus * static_cast<double>(bytes) / 1e9 / seconds;
}

/// A profiled run's stages as a JSON array, each GPU stage with its steps (the timeline that
/// bench/report.py draws).
std::string profile_json(const gpusort::sort_report& r)
{
  std::ostringstream out;
  out << "[";
  for (std::size_t i = 0; i < r.profile.size(); ++i) {
    const gpusort::stage_profile& p = r.profile[i];
    out << (i > 0 ? ", " : "") << "{\"device\": " << gpusort::bench::json_string(p.device)
        << ", \"round\": " << p.round << ", \"stage\": " << gpusort::bench::json_string(p.stage)
        << ", \"chunks\": " << p.chunks << ", \"bytes\": " << p.bytes
        << ", \"busy_seconds\": " << p.busy_seconds << ", \"first_start\": " << p.first_start
        << ", \"last_end\": " << p.last_end << ", \"round_start\": " << p.round_start
        << ", \"steps\": [";
    for (std::size_t k = 0; k < p.steps.size(); ++k)
      out << (k > 0 ? ", " : "") << "[" << p.steps[k].first << ", " << p.steps[k].second << "]";
    out << "]}";
  }
  out << "]";
  return out.str();
}

/// Whether the CUB baseline's two arrays and its scratch fit GPU 0's free memory now.
bool cub_baseline_fits(std::uint64_t n)
{
  const gpusort::cuda::set_device_guard guard{0};
  std::size_t free_bytes = 0, total_bytes = 0;
  GPUSORT_CUDA_TRY(cudaMemGetInfo(&free_bytes, &total_bytes));
  const std::uint64_t need =
      2 * n * 8 + gpusort::cuda::radix_sort_scratch_bytes(n, 8, 0) + (std::uint64_t{256} << 20);
  return need <= free_bytes;
}

/// The baseline: copy in, cub::DeviceRadixSort, copy out, one GPU, the keys fitting on it.
double cub_baseline(std::uint64_t* keys, std::uint64_t n)
{
  const gpusort::cuda::set_device_guard guard{0};
  gpusort::cuda::device_buffer d_keys{n * 8}, d_alt{n * 8};
  const std::size_t scratch_bytes = gpusort::cuda::radix_sort_scratch_bytes(n, 8, 0);
  gpusort::cuda::device_buffer scratch{scratch_bytes};
  gpusort::cuda::cuda_stream s;
  return best_of(3, [&] {
    const auto t0 = clock_type::now();
    GPUSORT_CUDA_TRY(
        cudaMemcpyAsync(d_keys.data(), keys, n * 8, cudaMemcpyHostToDevice, s.value()));
    const bool alt = gpusort::cuda::radix_sort(d_keys.data(), d_alt.data(), nullptr, nullptr, n, 8,
                                               0, scratch.data(), scratch_bytes, s.value());
    GPUSORT_CUDA_TRY(cudaMemcpyAsync(keys, alt ? d_alt.data() : d_keys.data(), n * 8,
                                     cudaMemcpyDeviceToHost, s.value()));
    s.synchronize();
    return seconds_since(t0);
  });  // sorted keys after the first run: a radix sort costs the same on them
}

/// The GPUs there are; none (or no driver for the CUDA the binary carries) is an error that
/// says so, rather than the first CUDA call's failure deep inside a measurement.
int gpu_count()
{
  int gpus = 0;
  const cudaError_t e = cudaGetDeviceCount(&gpus);
  if (e != cudaSuccess)
    throw std::runtime_error{std::string{"no usable GPU: cudaGetDeviceCount: "} +
                             cudaGetErrorName(e) + ": " + cudaGetErrorString(e)};
  if (gpus == 0) throw std::runtime_error{"no GPU found"};
  return gpus;
}

constexpr const char* usage =
    "usage: gpu_bench [--sizes 1Gi,4Gi] [--cpu-count 1Gi] [--repeat 5] [--json FILE]\n"
    "                 [--machine NAME] [--commit C] [--sweep-chunks 8,16,32]\n"
    "                 [--compare-gather yes|no]\n"
    "       gpu_bench --compress yes [--compress-bytes 8Gi,32Gi] [--repeat 5]\n"
    "                 [--dists uniform,gaussian,sorted,fewunique,bits] [--json FILE] ...\n"
    "       gpu_bench --lean yes [--lean-bytes 32Gi,100Gi] [--host-limit 3584Mi]\n"
    "                 [--lean-memory pageable,pinned] [--repeat 3] [--json FILE] ...\n"
    "       gpu_bench --chunks yes [--chunk-bytes 8Gi,32Gi] [--gpus 1,2] [--incore auto]\n"
    "                 [--kinds u64,u64.stable,f64,f64.stable] [--budgets 1/8,1/256,smallest] ...\n"
    "       gpu_bench --model yes [--chunk-bytes 8Gi,32Gi] [--repeat 3] ...\n"
    "\n"
    "The GPU executor on u64 uniform keys (--sizes: counts of keys) against the PCIe floor, the\n"
    "copy-in / CUB radix sort / copy-out baseline and the parallel CPU sort (--cpu-count keys):\n"
    "out of core with the budget at 1/8 of the data, and not forced; the median of --repeat\n"
    "runs after a warm-up. --sweep-chunks adds out-of-core runs with at least that many chunks,\n"
    "--compare-gather yes one with round 2's gather done by a kernel.\n"
    "--compress yes: only the compressed-runs benchmark (issue 21): u32 and u64 keys of\n"
    "--compress-bytes each (default 8Gi) and each of --dists (gen's distributions, or bits:\n"
    "every bit pattern alike), out of core at budget 1/8, with compress_runs off, on and auto.\n"
    "--lean yes: only the lean path (issue 39): u64 uniform keys of --lean-bytes each in host\n"
    "memory (--lean-memory: plain, or registered with the engine), sorted in place within\n"
    "--host-limit beyond the array, against the PCIe floor, the two-round path at budget 1/8\n"
    "where twice the array fits the host, and with the peak resident memory beyond the array.\n"
    "--model yes: only the time model's check (issue 40): u64 uniform keys of --chunk-bytes\n"
    "each in registered memory, fitting and at budget 1/8 on 1 and 2 GPUs, against\n"
    "engine::plan's prediction from the link and host rates measured in the same run, and the\n"
    "predictions for 4 and 8 GPUs of those rates; each fitting job also against the copy\n"
    "floor at its links' rates and at the one-way rates all GPUs got at once (also measured\n"
    "from one registered array, alone and with every GPU sorting in device memory or fetching\n"
    "from the next GPU, by copies and by a kernel, meanwhile).\n"
    "--chunks yes: only the many-chunks benchmark (issue 44): u64 and f64 uniform keys of\n"
    "--chunk-bytes each in registered memory, stable and not, out of core on the first --gpus\n"
    "GPUs with device_memory_budget at 1/8 of the data, 1/256 of it and (for the smallest\n"
    "size) the smallest budget the planner accepts; the median of --repeat runs after a\n"
    "warm-up, each with its chunk count, and the profile of the last; --incore radix or\n"
    "sample sets the in-core sort of its chunks (auto: the engine's choice); --kinds and\n"
    "--budgets picks them, any 1/K (K from 2 to 65536) besides (1/8 always runs: the others\n"
    "are rated against it).\n"
    "--log debug (any mode) prints the library's debug messages on stderr: which sort took a\n"
    "round's chunks, how many chunks shared a ring slot.\n"
    "exit codes: 0 done, 1 a failure (one line says which), 64 a bad command line\n";

/// K of a --budgets entry "1/K" (2 <= K <= 65536), 0 for anything else.
std::uint64_t budget_fraction(const std::string& b)
{
  if (b.size() < 3 || b.compare(0, 2, "1/") != 0 ||
      b.find_first_not_of("0123456789", 2) != std::string::npos || b.size() > 7)
    return 0;
  const std::uint64_t k = std::stoull(b.substr(2));
  return k >= 2 && k <= 65536 ? k : 0;
}

struct options {
  std::vector<std::uint64_t> sizes{std::uint64_t{1} << 30, std::uint64_t{4} << 30};
  std::uint64_t cpu_count = std::uint64_t{1} << 30;
  std::vector<std::uint64_t> sweep;
  bool compare_gather = false;
  bool compress = false;
  std::vector<std::uint64_t> compress_bytes{std::uint64_t{8} << 30};
  std::vector<std::string> compress_dists{"uniform", "gaussian", "sorted", "fewunique", "bits"};
  int repeat = 5;
  bool lean = false;
  std::vector<std::uint64_t> lean_bytes{std::uint64_t{32} << 30};
  std::uint64_t host_limit = std::uint64_t{3584} << 20;
  std::vector<std::string> lean_memory{"pageable"};
  bool chunks = false;
  gpusort::incore_engine chunk_incore = gpusort::incore_engine::automatic;
  std::vector<std::uint64_t> chunk_bytes{std::uint64_t{8} << 30, std::uint64_t{32} << 30};
  std::vector<std::uint64_t> chunk_gpus{1};
  std::vector<std::string> chunk_kinds{"u64", "u64.stable", "f64", "f64.stable"};
  std::vector<std::string> chunk_budgets{"1/8", "1/256", "smallest"};
  bool model = false;
  bool debug_log = false;
  gpusort::bench::results_options results;
};

void set_option(options& o, std::string_view flag, const std::string& v)
{
  using gpusort::bench::parse_counts;
  using gpusort::bench::parse_one_count;
  if (flag == "--sizes") {
    o.sizes = parse_counts(flag, v);
  } else if (flag == "--cpu-count") {
    o.cpu_count = parse_one_count(flag, v);
  } else if (flag == "--sweep-chunks") {
    o.sweep = parse_counts(flag, v);
  } else if (flag == "--repeat") {
    o.repeat = static_cast<int>(parse_one_count(flag, v, 1000));
  } else if (flag == "--compare-gather") {
    if (v != "yes" && v != "no") throw usage_error{"--compare-gather takes yes or no"};
    o.compare_gather = v == "yes";
  } else if (flag == "--compress") {
    if (v != "yes" && v != "no") throw usage_error{"--compress takes yes or no"};
    o.compress = v == "yes";
  } else if (flag == "--lean") {
    if (v != "yes" && v != "no") throw usage_error{"--lean takes yes or no"};
    o.lean = v == "yes";
  } else if (flag == "--chunks") {
    if (v != "yes" && v != "no") throw usage_error{"--chunks takes yes or no"};
    o.chunks = v == "yes";
  } else if (flag == "--incore") {
    if (v != "auto" && v != "radix" && v != "sample")
      throw usage_error{"--incore takes auto, radix or sample"};
    o.chunk_incore = v == "radix"    ? gpusort::incore_engine::radix
                     : v == "sample" ? gpusort::incore_engine::sample
                                     : gpusort::incore_engine::automatic;
  } else if (flag == "--log") {
    if (v != "debug" && v != "info") throw usage_error{"--log takes debug or info"};
    o.debug_log = v == "debug";
  } else if (flag == "--model") {
    if (v != "yes" && v != "no") throw usage_error{"--model takes yes or no"};
    o.model = v == "yes";
  } else if (flag == "--chunk-bytes") {
    o.chunk_bytes = parse_counts(flag, v);
  } else if (flag == "--gpus") {
    o.chunk_gpus = parse_counts(flag, v);
  } else if (flag == "--kinds") {
    o.chunk_kinds = gpusort::bench::parse_list(
        flag, v,
        [](const std::string& k) {
          return k == "u64" || k == "u64.stable" || k == "f64" || k == "f64.stable";
        },
        " (u64, u64.stable, f64 or f64.stable)");
  } else if (flag == "--budgets") {
    o.chunk_budgets = gpusort::bench::parse_list(
        flag, v, [](const std::string& b) { return b == "smallest" || budget_fraction(b) > 0; },
        " (1/K for K from 2 to 65536, or smallest)");
  } else if (flag == "--lean-bytes") {
    o.lean_bytes = parse_counts(flag, v);
  } else if (flag == "--host-limit") {
    o.host_limit = parse_one_count(flag, v);
  } else if (flag == "--lean-memory") {
    o.lean_memory = gpusort::bench::parse_list(
        flag, v, [](const std::string& m) { return m == "pageable" || m == "pinned"; },
        " (pageable or pinned)");
  } else if (flag == "--compress-bytes") {
    o.compress_bytes = parse_counts(flag, v);
  } else if (flag == "--dists") {
    o.compress_dists = gpusort::bench::parse_list(
        flag, v,
        [](const std::string& d) {
          return d == "bits" || gpusort::parse_distribution(d).has_value();
        },
        " (a distribution of gpusort gen, or bits)");
  }
}

/// Every bit pattern alike: splitmix64 of each word's place, whatever the key width (for
/// floats it holds NaNs of every payload; sorted runs of it still compress, by the bits that
/// the run's length makes common to neighbours: the least compressible input there is).
void fill_bits(void* data, std::uint64_t bytes)
{
  auto* words = static_cast<std::uint64_t*>(data);
  const auto count = static_cast<std::int64_t>(bytes / 8);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < count; ++i) {
    std::uint64_t z = static_cast<std::uint64_t>(i) * 0x9e3779b97f4a7c15ULL + 0x1234567ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    words[i] = z ^ (z >> 31);
  }
}

/// This process's resident memory now ("VmRSS") or at its peak since the last reset ("VmHWM"),
/// in bytes, from /proc/self/status; reset_peak() starts a new peak from now.
std::uint64_t status_bytes(const std::string& field)
{
  std::ifstream in{"/proc/self/status"};
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stoull(line.substr(field.size() + 1)) << 10;
  return 0;
}
void reset_peak() { std::ofstream{"/proc/self/clear_refs"} << "5"; }

/// Host memory, from /proc/meminfo's MemTotal (bytes).
std::uint64_t host_memory_bytes()
{
  std::ifstream in{"/proc/meminfo"};
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemTotal:") return kib << 10;
  return 0;
}

/// The many-chunks benchmark (issue 44): out of core at device budgets of 1/8 and 1/256 of the
/// data and the smallest the planner accepts, u64 and f64, stable and not, on 1 or 2 GPUs; the
/// rate at each small budget against the rate at 1/8 in the same run.
void run_chunks(const options& o, int gpus, std::vector<target>& targets,
                std::ostringstream& raw)
{
  using gpusort::detail::cuda_device;
  for (const std::uint64_t bytes : o.chunk_bytes) {
    const std::uint64_t n = bytes / 8;
    const double gb = static_cast<double>(n) * 8 / 1e9;
    const std::string tag = gpusort::format_bytes(n * 8);
    host_buffer array = gpusort::detail::pinned_host_buffer(n * 8);
    for (const std::uint64_t g : o.chunk_gpus) {
      if (g > static_cast<std::uint64_t>(gpus)) {
        std::printf("%s: %llu GPUs: not measured, the host has %d\n", tag.c_str(),
                    static_cast<unsigned long long>(g), gpus);
        continue;
      }
      gpusort::config base;
      base.devices = gpusort::device_selection::listed;
      base.incore = o.chunk_incore;
      for (std::uint64_t i = 0; i < g; ++i) base.gpu_ids.push_back(static_cast<int>(i));
      for (const char* type : {"u64", "f64"}) {
        for (const bool stable : {false, true}) {
          const std::string kind = std::string{type} + (stable ? ".stable" : "");
          if (std::ranges::find(o.chunk_kinds, kind) == o.chunk_kinds.end()) continue;
          const bool f64 = std::string_view{type} == "f64";
          const gpusort::key_array view{array.data(), n, f64 ? gpusort::dtype::f64
                                                             : gpusort::dtype::u64};
          auto regenerate = [&] {
            if (f64)
              gpusort::generate(std::span<double>{array.as<double>(), n},
                                gpusort::distribution::uniform, 3);
            else
              gpusort::generate(std::span<std::uint64_t>{array.as<std::uint64_t>(), n},
                                gpusort::distribution::uniform, 3);
          };
          regenerate();
          const gpusort::fingerprint before = gpusort::fingerprint_of(view);
          // The smallest budget: the capacity the planner needs, as GPU 0 budgets it.
          const cuda_device probe{{.id = 0}};
          // A stable sort of f64 keys in NumPy's order sorts (code, position) pairs; u64 keys
          // alone are equal only where their bits are, so stable changes nothing for them.
          gpusort::detail::element_layout layout{.type = view.type, .key_bytes = 8,
                                                 .stable = stable && f64};
          if (stable && f64) layout.value_bytes = n <= (std::uint64_t{1} << 32) ? 4 : 8;
          const std::uint64_t smallest = probe.capacity(layout).budget_for(
              gpusort::detail::min_feasible_capacity(n, layout.key_bytes));
          const auto wanted = [&](std::string_view b) {
            return std::ranges::find(o.chunk_budgets, b) != o.chunk_budgets.end();
          };
          std::vector<std::pair<std::string, std::uint64_t>> budgets{{"1/8", bytes / 8}};
          for (const std::string& b : o.chunk_budgets)
            if (b != "1/8" && b != "smallest") budgets.emplace_back(b, bytes / budget_fraction(b));
          if (bytes == o.chunk_bytes.front() && wanted("smallest"))
            budgets.emplace_back("smallest", smallest);
          double rate_eighth = 0;
          for (const auto& [name, budget] : budgets) {
            gpusort::config cfg = base;
            cfg.device_memory_budget = budget;
            gpusort::engine e{cfg};
            gpusort::sort_options opts;
            opts.stable = stable;
            if (f64) opts.floats = gpusort::float_order::numpy;
            std::vector<double> times;
            gpusort::sort_report r;
            const std::string key = "chunks.rate_vs_eighth." + kind + "." + tag + "." +
                                    std::to_string(g) + "gpu.budget_" +
                                    (name == "smallest" ? name : "1_" + name.substr(2));
            for (int rep = 0; rep <= o.repeat; ++rep) {
              regenerate();
              opts.profile = rep == o.repeat;
              try {
                r = f64 ? e.sort(std::span<double>{array.as<double>(), n}, opts)
                        : e.sort(std::span<std::uint64_t>{array.as<std::uint64_t>(), n}, opts);
              } catch (const gpusort::config_error& refused) {
                // A budget the planner refuses: the target is not met, and the reason printed.
                std::printf("%s %s on %llu GPU(s), budget %s (%s): refused: %s\n", tag.c_str(),
                            kind.c_str(), static_cast<unsigned long long>(g), name.c_str(),
                            gpusort::format_bytes(budget).c_str(), refused.what());
                raw << "{\"size\": \"" << tag << "\", \"kind\": \"" << kind
                    << "\", \"gpus\": " << g << ", \"budget\": \"" << name
                    << "\", \"budget_bytes\": " << budget << ", \"refused\": "
                    << gpusort::bench::json_string(refused.what()) << "},";
                targets.push_back({key, "speed ratio", "the same job at device budget 1/8", 0, 0,
                                   name == "smallest" ? 0.5 : 0.7, true});
                times.clear();
                break;
              }
              const auto v =
                  gpusort::verify(view, std::nullopt, gpusort::order::ascending, before);
              if (!v.ok) throw std::runtime_error{tag + " " + kind + " wrong: " + v.message};
              if (rep > 0) times.push_back(r.seconds);
            }
            if (times.empty()) continue;
            const double t = median(times);
            const double rate = gb / t;
            if (name == "1/8") rate_eighth = rate;
            std::printf("%s %s on %llu GPU(s), budget %s (%s): median %.3f s (%.2f GB/s, %.2f "
                        "of 1/8) of %zu, d=%llu\n",
                        tag.c_str(), kind.c_str(), static_cast<unsigned long long>(g),
                        name.c_str(), gpusort::format_bytes(budget).c_str(), t, rate,
                        rate / rate_eighth, times.size(),
                        static_cast<unsigned long long>(r.chunks));
            gpusort::bench::print_profile(r);
            raw << "{\"size\": \"" << tag << "\", \"kind\": \"" << kind
                << "\", \"gpus\": " << g << ", \"budget\": \"" << name
                << "\", \"budget_bytes\": " << budget << ", \"seconds\": " << t
                << ", \"chunks\": " << r.chunks << ", \"profile\": " << profile_json(r)
                << "},";
            if (name == "1/8") continue;
            targets.push_back({key, "speed ratio", "the same job at device budget 1/8", t,
                               rate / rate_eighth, name == "smallest" ? 0.5 : 0.7, true});
          }
        }
      }
    }
  }
}

/// The permutation's block copies (1 MiB, streaming stores, from every core) alone and while
/// GPU 0 copies both ways from registered memory, and the link alone: whether host memory has
/// room for the permutation beside a round's copies, which is what overlapping them could save.
void measure_copies_beside_link(std::ostringstream& raw)
{
  constexpr std::uint64_t bytes = std::uint64_t{2} << 30;
  constexpr std::uint64_t block = std::uint64_t{1} << 20;
  host_buffer from{bytes}, to{bytes};
  from.populate();
  to.populate();
  std::memset(from.data(), 1, bytes);
  const auto copy_for = [&](double seconds) {  // GB/s of data copied
    std::uint64_t copied = 0;
    const auto t0 = clock_type::now();
    while (seconds_since(t0) < seconds) {
      const auto blocks = static_cast<std::int64_t>(bytes / block);
#pragma omp parallel for schedule(dynamic, 16)
      for (std::int64_t i = 0; i < blocks; ++i)
        gpusort::detail::stream_copy(to.as<char>() + i * block, from.as<char>() + i * block,
                                     block);
      copied += bytes;
    }
    return static_cast<double>(copied) / 1e9 / seconds_since(t0);
  };
  const gpusort::cuda::set_device_guard guard{0};
  host_buffer in = gpusort::detail::pinned_host_buffer(bytes);
  host_buffer out = gpusort::detail::pinned_host_buffer(bytes);
  std::memset(in.data(), 1, bytes);
  std::memset(out.data(), 1, bytes);
  gpusort::cuda::device_buffer d_a{bytes}, d_b{bytes};
  gpusort::cuda::cuda_stream s1, s2;
  std::atomic<bool> stop{false};
  const auto link_until_stopped = [&] {  // GB/s each way
    std::uint64_t moved = 0;
    const auto t0 = clock_type::now();
    while (!stop.load()) {
      GPUSORT_CUDA_TRY(
          cudaMemcpyAsync(d_a.data(), in.data(), bytes, cudaMemcpyHostToDevice, s1.value()));
      GPUSORT_CUDA_TRY(
          cudaMemcpyAsync(out.data(), d_b.data(), bytes, cudaMemcpyDeviceToHost, s2.value()));
      s1.synchronize();
      s2.synchronize();
      moved += bytes;
    }
    return static_cast<double>(moved) / 1e9 / seconds_since(t0);
  };
  const double alone = copy_for(1.0);
  double link_alone = 0;
  {
    std::thread t{[&] { link_alone = link_until_stopped(); }};
    std::this_thread::sleep_for(std::chrono::seconds{1});
    stop = true;
    t.join();
  }
  stop = false;
  double link_beside = 0;
  double beside = 0;
  {
    std::thread t{[&] { link_beside = link_until_stopped(); }};
    beside = copy_for(1.5);
    stop = true;
    t.join();
  }
  std::printf("host memory beside the link: 1 MiB streaming block copies %.1f GB/s alone, %.1f "
              "GB/s while GPU 0 copies both ways; the link %.1f GB/s each way alone, %.1f "
              "beside the copies; host memory moved %.1f GB/s alone, %.1f together\n",
              alone, beside, link_alone, link_beside, 2 * alone,
              2 * beside + 2 * link_beside);
  raw << "{\"block_copy_gbps\": " << alone << ", \"block_copy_beside_link_gbps\": " << beside
      << ", \"link_each_gbps\": " << link_alone << ", \"link_each_beside_copies_gbps\": "
      << link_beside << "},";
}

/// The host's memory: a parallel copy of 4 GiB from every core (best of 3), GB/s copied.
double host_copy_gbps()
{
  const std::uint64_t bytes = std::uint64_t{4} << 30;
  host_buffer from{bytes}, to{bytes};
  from.populate();
  to.populate();
  std::memset(from.data(), 1, bytes);
  double gbps = 0;
  for (int i = 0; i < 3; ++i) {
    const auto t0 = clock_type::now();
    gpusort::detail::parallel_copy(to.data(), from.data(), bytes);
    gbps = std::max(gbps, static_cast<double>(bytes) / 1e9 / seconds_since(t0));
  }
  return gbps;
}

/// The time model (issue 40, --model yes): u64 uniform keys of each --chunk-bytes in
/// registered memory, fitting and at budget 1/8, on 1 and 2 GPUs, each the median of --repeat
/// runs after a warm-up against engine::plan's prediction from the rates measured in this run
/// (GPU 0's registered links, the host's copy rate); "multi.model_*" targets within 10%, and
/// the predictions for 4 and 8 GPUs of the same rates; then one profiled run of each job.
void run_model(const options& o, int gpus, const bandwidth& link, std::vector<target>& targets,
               std::ostringstream& raw)
{
  const double host = host_copy_gbps();
  std::printf("host memory: parallel copy %.1f GB/s\n", host);
  // Every GPU copying one way at once: a fitting job's copy in, then its copy out. Each GPU
  // copies `share` in and `share` out, in turn.
  const int together = std::min(2, gpus);
  const std::uint64_t share = std::uint64_t{1} << 30;
  const auto one_way = [&](aggregate_memory memory, beside_work beside) {
    return std::pair{
        measure_aggregate(together, share, copy_directions::h2d, memory, beside),
        measure_aggregate(together, share, copy_directions::d2h, memory, beside)};
  };
  const auto [all_in, all_out] = together > 1
                                     ? one_way(aggregate_memory::allocated, beside_work::nothing)
                                     : std::pair{link.h2d, link.d2h};
  if (together > 1) {
    std::printf("all %d GPUs at once, one way: H2D %.1f GB/s, D2H %.1f GB/s summed\n", together,
                all_in, all_out);
    // The same from one array pinned as the engine pins a caller's, each GPU its share (the
    // fitting jobs copy at 51 GB/s a GPU against 54-55 from cudaHostAlloc), alone and beside
    // each kind of work a fitting job does meanwhile: which of them slows the links?
    raw << "{";
    const std::pair<beside_work, const char*> kinds[] = {
        {beside_work::nothing, "alone"},
        {beside_work::sorts, "every GPU sorting in device memory meanwhile"},
        {beside_work::peer_copies, "every GPU fetching from the next by cudaMemcpyPeerAsync"},
        {beside_work::peer_kernel, "every GPU fetching from the next by a gather kernel"}};
    const char* keys[] = {"registered", "sorting", "peer_copies", "peer_kernel"};
    for (std::size_t k = 0; k < std::size(kinds); ++k) {
      const auto [in, out] = one_way(aggregate_memory::registered, kinds[k].first);
      std::printf("all %d GPUs at once, one way, from one registered array, %s: H2D %.1f GB/s, "
                  "D2H %.1f GB/s summed\n",
                  together, kinds[k].second, in, out);
      raw << (k > 0 ? ", " : "") << "\"all_gpus_" << keys[k] << "_h2d\": " << in
          << ", \"all_gpus_" << keys[k] << "_d2h\": " << out;
    }
    raw << "},";
  }
  raw << "{\"all_gpus_h2d\": " << all_in << ", \"all_gpus_d2h\": " << all_out << "},";
  const auto measured_machine = [&](std::uint32_t k) {
    gpusort::machine_model m = gpusort::machine_model::h200(k);
    m.name = "measured";
    m.link_in = link.h2d;
    m.link_out = link.d2h;
    m.link_both = link.both_each;
    m.host_copy = host;
    return m;
  };
  const auto print_plan = [](const gpusort::job_plan& p) {
    std::printf("    %s, d=%llu:", p.path.c_str(), static_cast<unsigned long long>(p.chunks));
    for (const gpusort::plan_phase& ph : p.phases)
      std::printf(" %s %.3f s;", ph.name.c_str(), ph.seconds);
    std::printf("\n");
  };
  for (const std::uint64_t bytes : o.chunk_bytes) {
    const std::uint64_t n = bytes / 8;
    const std::string tag = gpusort::format_bytes(bytes);
    host_buffer keys = gpusort::detail::pinned_host_buffer(n * 8);
    const std::span<std::uint64_t> view{keys.as<std::uint64_t>(), n};
    for (const bool fitting : {true, false}) {
      const char* what = fitting ? "fitting" : "out_of_core";
      for (std::uint32_t k = 1; k <= static_cast<std::uint32_t>(std::min(2, gpus)); ++k) {
        gpusort::config cfg;
        cfg.devices = gpusort::device_selection::listed;
        for (std::uint32_t g = 0; g < k; ++g) cfg.gpu_ids.push_back(static_cast<int>(g));
        if (!fitting) cfg.device_memory_budget = bytes / 8;
        gpusort::engine e{cfg};
        const gpusort::sort_job job{.keys = {nullptr, n, gpusort::dtype::u64}};
        const gpusort::job_plan p = e.plan(job, {}, measured_machine(k));
        std::vector<double> times;
        gpusort::sort_report r;
        for (int rep = 0; rep <= o.repeat; ++rep) {
          gpusort::generate(view, gpusort::distribution::uniform, 2);
          r = e.sort(view);
          if (rep > 0) times.push_back(r.seconds);
        }
        const double t = median(times);
        const double ratio = p.seconds / t;
        std::printf("%s u64 %s on %u GPU(s): measured %.3f s (%s, d=%llu), predicted %.3f s "
                    "(%s, d=%llu), ratio %.3f\n",
                    tag.c_str(), what, k, t, r.path.c_str(),
                    static_cast<unsigned long long>(r.chunks), p.seconds, p.path.c_str(),
                    static_cast<unsigned long long>(p.chunks), ratio);
        print_plan(p);
        // A last, profiled, run says where the measured time went against the phases; its
        // output is checked (order and fingerprint), as the timed runs' are not.
        gpusort::generate(view, gpusort::distribution::uniform, 2);
        const gpusort::key_array keys_view{view.data(), n, gpusort::dtype::u64};
        const gpusort::fingerprint before = gpusort::fingerprint_of(keys_view);
        const gpusort::sort_report profiled = e.sort(view, {.profile = true});
        const auto checked =
            gpusort::verify(keys_view, std::nullopt, gpusort::order::ascending, before);
        if (!checked.ok)
          throw std::runtime_error{tag + " " + what + " on " + std::to_string(k) +
                                   " GPU(s) sorted wrong: " + checked.message};
        std::printf("  profiled run: %.3f s\n", profiled.seconds);
        gpusort::bench::print_profile(profiled);
        raw << "{\"model\": \"" << what << "\", \"size\": \"" << tag
            << "\", \"gpus\": " << k << ", \"measured_s\": " << t
            << ", \"predicted_s\": " << p.seconds << ", \"chunks\": " << r.chunks
            << ", \"planned_chunks\": " << p.chunks << ", \"profile\": " << profile_json(profiled)
            << "},";
        // Within 10% either way: the ratio's distance from 1, plus 1, at most 1.10.
        targets.push_back({"multi.model_" + std::string{what} + "." + tag + "." +
                               std::to_string(k) + "gpu",
                           "predicted / measured", "the measured median", ratio,
                           1 + std::abs(ratio - 1), 1.10, false});
        if (fitting) {
          // The copy floor: each GPU's share in and out at its links' rates (issue 40's
          // target), and at the rates every GPU got at once in this run (the host's share).
          const double gb = static_cast<double>(bytes) / 1e9;
          const double links = gb / k / link.h2d + gb / k / link.d2h;
          const double at_once = k > 1 ? gb / all_in + gb / all_out : links;
          std::printf("%s u64 fitting on %u GPU(s): %.3f s against the links' copy floor %.3f s "
                      "(%.3fx) and the floor at the rates all %u took at once %.3f s (%.3fx)\n",
                      tag.c_str(), k, t, links, t / links, k, at_once, t / at_once);
          raw << "{\"fitting_floor\": \"" << tag << "\", \"gpus\": " << k
              << ", \"measured_s\": " << t << ", \"links_floor_s\": " << links
              << ", \"at_once_floor_s\": " << at_once << "},";
          targets.push_back({"multi.fitting_vs_copy_floor." + tag + "." + std::to_string(k) +
                                 "gpu",
                             "time ratio", "the links' copy floor", t, t / links, 1.05, false});
        }
      }
      for (const std::uint32_t k : {4U, 8U}) {
        gpusort::config cfg;
        cfg.devices = gpusort::device_selection::cpu;
        if (!fitting) cfg.device_memory_budget = bytes / 8;
        const gpusort::sort_job job{.keys = {nullptr, n, gpusort::dtype::u64}};
        const gpusort::job_plan p = gpusort::engine{cfg}.plan(job, {}, measured_machine(k));
        std::printf("%s u64 %s on %u GPUs of these rates: predicted %.3f s\n", tag.c_str(),
                    what, k, p.seconds);
        print_plan(p);
        raw << "{\"model\": \"" << what << "\", \"size\": \"" << tag
            << "\", \"gpus\": " << k << ", \"predicted_s\": " << p.seconds << "},";
      }
    }
  }
}

/// The lean path (issue 39): each size sorted in place within o.host_limit, from plain memory
/// or memory registered with the engine, against the 4N floor and (where two arrays fit the
/// host) the two-round path at budget 1/8, with the peak resident memory beyond the array.
void run_lean(const options& o, double sum_both, std::vector<target>& targets,
              std::ostringstream& raw)
{
  // The host's memory: its bytes read plus written bound what the lean path's staged copies
  // and its permutation can move.
  {
    const double copy_gbps = host_copy_gbps();
    std::printf("host memory: parallel copy %.1f GB/s (%.1f GB/s read plus written), %d "
                "threads\n",
                copy_gbps, 2 * copy_gbps, omp_get_max_threads());
    raw << "{\"host_copy_gbps\": " << copy_gbps << "},";
    measure_copies_beside_link(raw);
  }
  for (const std::uint64_t bytes : o.lean_bytes) {
    const std::uint64_t n = bytes / 8;
    const double gb = static_cast<double>(n) * 8 / 1e9;
    const std::string tag = gpusort::format_bytes(n * 8);
    const double floor_s = 4 * gb / sum_both;
    host_buffer array{n * 8};
    array.populate();
    auto* keys = array.as<std::uint64_t>();
    const gpusort::key_array view{keys, n, gpusort::dtype::u64};
    auto regenerate = [&] {
      gpusort::generate(std::span<std::uint64_t>{keys, n}, gpusort::distribution::uniform, 2);
    };
    regenerate();
    const gpusort::fingerprint before = gpusort::fingerprint_of(view);
    for (const std::string& memory : o.lean_memory) {
      gpusort::config one;
      one.devices = gpusort::device_selection::listed;
      one.gpu_ids = {0};
      gpusort::engine e{one};
      gpusort::host_registration pinned;
      if (memory == "pinned") pinned = e.register_host(keys, n * 8);
      // One run where --repeat is 1 (100 GiB regenerates slowly), else a warm-up and the median.
      auto timed = [&](gpusort::engine& eng, const gpusort::sort_options& opts,
                       const std::string& what) {
        std::vector<double> times;
        gpusort::sort_report r;
        std::uint64_t peak = 0;
        const int runs = o.repeat == 1 ? 1 : o.repeat + 1;
        for (int rep = 0; rep < runs; ++rep) {
          regenerate();
          reset_peak();
          const std::uint64_t rss = status_bytes("VmRSS");
          gpusort::sort_options profiled = opts;
          profiled.profile = rep + 1 == runs;  // the last run says where its time went
          r = eng.sort(std::span<std::uint64_t>{keys, n}, profiled);
          peak = std::max(peak, status_bytes("VmHWM") - std::min(rss, status_bytes("VmHWM")));
          const auto v = gpusort::verify(view, std::nullopt, gpusort::order::ascending, before);
          if (!v.ok) throw std::runtime_error{what + " wrong: " + v.message};
          if (runs == 1 || rep > 0) times.push_back(r.seconds);
        }
        gpusort::bench::print_profile(r);
        r.seconds = median(times);
        std::printf("%s %s: %s: median %.3f s (%.1f GB/s, %.2f of the floor) of %zu, d=%llu, "
                    "path %s, host memory %s planned, peak resident %s beyond the array\n",
                    tag.c_str(), memory.c_str(), what.c_str(), r.seconds, gb / r.seconds,
                    r.seconds / floor_s, times.size(), static_cast<unsigned long long>(r.chunks),
                    r.path.c_str(), gpusort::format_bytes(r.host_memory_bytes).c_str(),
                    gpusort::format_bytes(peak).c_str());
        raw << "{\"size\": \"" << tag << "\", \"bytes\": " << n * 8 << ", \"memory\": \""
            << memory << "\", \"run\": " << gpusort::bench::json_string(what)
            << ", \"seconds\": " << r.seconds
            << ", \"min_s\": " << *std::min_element(times.begin(), times.end())
            << ", \"max_s\": " << *std::max_element(times.begin(), times.end())
            << ", \"chunks\": " << r.chunks << ", \"path\": \"" << r.path
            << "\", \"host_memory_bytes\": " << r.host_memory_bytes
            << ", \"peak_rss_beyond_array\": " << peak << ", \"floor_s\": " << floor_s << "},";
        return std::pair{r, peak};
      };
      gpusort::sort_options lean_options;
      lean_options.host_memory_limit = o.host_limit;
      // Lean whatever the job's size: a job that fits the GPU would take one round trip.
      ::setenv("GPUSORT_LEAN", "1", 1);
      const auto [lean, peak] = timed(e, lean_options, "lean, limit " +
                                                           gpusort::format_bytes(o.host_limit));
      ::unsetenv("GPUSORT_LEAN");
      const std::string key = tag + "." + memory;
      targets.push_back({"lean.time_vs_floor." + key, "time ratio",
                         "4N / (simultaneous H2D+D2H, both directions summed)", lean.seconds,
                         lean.seconds / floor_s, bytes <= (std::uint64_t{32} << 30) ? 1.3 : 1.5,
                         false});
      targets.push_back({"lean.peak_rss_beyond_array." + key, "GiB", "the array's own pages",
                         static_cast<double>(peak) / (1 << 30),
                         static_cast<double>(peak) / (1 << 30), 4.0, false});
      if (2.2 * static_cast<double>(bytes) < static_cast<double>(host_memory_bytes())) {
        gpusort::config forced = one;
        forced.device_memory_budget =
            n * 8 / 8 * gpusort::detail::cuda_device::buffers_per_element +
            (std::uint64_t{256} << 20);
        gpusort::engine two_rounds{forced};
        gpusort::host_registration pinned_too;
        if (memory == "pinned") {
          pinned = {};  // one registration at a time
          pinned_too = two_rounds.register_host(keys, n * 8);
        }
        const auto [fast, fast_peak] =
            timed(two_rounds, {}, "two rounds (round-1 buffer), budget 1/8");
        targets.push_back({"lean.vs_two_rounds." + key, "time ratio",
                           "the two-round path at budget 1/8 (round-1 buffer of the array's size)",
                           lean.seconds, lean.seconds / fast.seconds, 1.2, false});
        (void)fast_peak;
      }
    }
  }
}

/// Bytes one round's stage moved on every GPU, from a profiled run.
std::uint64_t stage_bytes(const gpusort::sort_report& r, int round, const char* stage)
{
  std::uint64_t bytes = 0;
  for (const gpusort::stage_profile& p : r.profile)
    if (p.round == round && p.stage == stage && p.device != "all") bytes += p.bytes;
  return bytes;
}

/// One compress_runs setting on one input: the median of `repeats` runs after a warm-up, and
/// what a last, profiled, run copied out in round 1 (keys: index and stream where encoded).
struct compress_run {
  double seconds{};
  std::uint64_t round1_out_bytes{};
  bool encoded{};
};

/// Issue 21's benchmark (--compress yes): u32 and u64 keys of each distribution, out of core on
/// GPU 0 at a budget of 1/8 of the data, with compress_runs off, on and auto; targets against
/// the 4N PCIe floor (`sum_both`: H2D + D2H at once, GB/s) and against compression off.
void run_compress(const options& o, double sum_both, std::vector<target>& targets,
                  std::ostringstream& raw)
{
  using gpusort::run_compression;
  static constexpr std::pair<run_compression, const char*> modes[] = {
      {run_compression::off, "off"}, {run_compression::on, "on"},
      {run_compression::automatic, "auto"}};
  for (const std::uint64_t bytes : o.compress_bytes) {
    const std::string tag = gpusort::format_bytes(bytes);
    const double gb = static_cast<double>(bytes) / 1e9;
    const double floor_s = 4 * gb / sum_both;
    host_buffer pinned = gpusort::detail::pinned_host_buffer(bytes);
    for (const auto& [type, key_bytes] : {std::pair{gpusort::dtype::u32, 4U},
                                          std::pair{gpusort::dtype::u64, 8U}}) {
      const std::uint64_t n = bytes / key_bytes;
      const std::string type_name = type == gpusort::dtype::u32 ? "u32" : "u64";
      const gpusort::key_array view{pinned.data(), n, type};
      gpusort::config cfg;
      cfg.devices = gpusort::device_selection::listed;
      cfg.gpu_ids = {0};
      cfg.device_memory_budget = bytes / 8 * gpusort::detail::cuda_device::buffers_per_element +
                                 (std::uint64_t{256} << 20);
      for (const std::string& dist : o.compress_dists) {
        const std::string what = type_name + "_" + dist;
        auto regenerate = [&] {
          if (dist == "bits") fill_bits(pinned.data(), n * key_bytes);
          else gpusort::generate(view, *gpusort::parse_distribution(dist), 2);
        };
        regenerate();
        const gpusort::fingerprint before = gpusort::fingerprint_of(view);
        auto check = [&] {
          const auto v = gpusort::verify(view, std::nullopt, gpusort::order::ascending, before);
          if (!v.ok) throw std::runtime_error{what + " " + tag + " wrong: " + v.message};
        };
        std::vector<compress_run> runs;
        for (const auto& [mode, mode_name] : modes) {
          cfg.compress_runs = mode;
          gpusort::engine e{cfg};
          std::vector<double> times;
          gpusort::sort_report r;
          for (int rep = 0; rep <= o.repeat; ++rep) {
            regenerate();
            r = e.sort(gpusort::sort_job{.keys = view});
            check();
            if (rep > 0) times.push_back(r.seconds);
          }
          regenerate();
          const gpusort::sort_report profiled =
              e.sort(gpusort::sort_job{.keys = view}, {.profile = true});
          check();
          const compress_run c{
              .seconds = median(times),
              .round1_out_bytes = stage_bytes(profiled, 1, "copy out"),
              .encoded = std::any_of(profiled.profile.begin(), profiled.profile.end(),
                                     [](const auto& p) { return p.stage == "encode"; })};
          runs.push_back(c);
          std::printf("%s %s compress_runs=%s: median %.3f s (%.2f of the floor) of %d "
                      "[%.3f, %.3f], d=%llu, round 1 out %.3f bytes a key%s\n",
                      tag.c_str(), what.c_str(), mode_name, c.seconds, c.seconds / floor_s,
                      o.repeat, *std::min_element(times.begin(), times.end()),
                      *std::max_element(times.begin(), times.end()),
                      static_cast<unsigned long long>(r.chunks),
                      static_cast<double>(c.round1_out_bytes) / static_cast<double>(n),
                      c.encoded ? "" : " (nothing encoded)");
          gpusort::bench::print_profile(profiled);
          raw << "{\"size\": \"" << tag << "\", \"bytes\": " << bytes << ", \"keys\": "
              << gpusort::bench::json_string(what) << ", \"compress_runs\": \"" << mode_name
              << "\", \"seconds\": " << c.seconds << ", \"floor_s\": " << floor_s
              << ", \"chunks\": " << r.chunks << ", \"round1_out_bytes\": " << c.round1_out_bytes
              << ", \"encoded\": " << (c.encoded ? "true" : "false")
              << ", \"profile\": " << profile_json(profiled) << "},";
        }
        const compress_run& off = runs[0];
        const compress_run& on = runs[1];
        const compress_run& automatic = runs[2];
        targets.push_back({"compress.round1_bytes_per_key." + what + "." + tag, "bytes per key",
                           "the raw keys (compress_runs on; index included)",
                           static_cast<double>(on.round1_out_bytes) / static_cast<double>(n),
                           static_cast<double>(on.round1_out_bytes) /
                               static_cast<double>(n * key_bytes),
                           1.0, false});
        if (dist == "uniform")
          targets.push_back({"compress.time_vs_floor." + what + "." + tag, "time ratio",
                             "4N / (simultaneous H2D+D2H, both directions summed); auto",
                             automatic.seconds, automatic.seconds / floor_s,
                             key_bytes == 4 ? 0.75 : 0.95, false});
        if (dist == "bits" && key_bytes == 8)
          targets.push_back({"compress.incompressible_vs_off." + tag, "time ratio",
                             "the same job with compress_runs off; auto, u64 bits",
                             automatic.seconds, automatic.seconds / off.seconds, 1.03, false});
      }
    }
  }
}

int run(const options& o)
{
  if (o.debug_log) gpusort::set_log_level(gpusort::log_level::debug);
  const int gpus = gpu_count();
  std::vector<target> targets;
  std::ostringstream raw;

  // Bandwidth: each GPU alone, and all at once for the aggregate.
  // The floor is the best both-ways rate of GPU 0 in either kind of pinned memory.
  double sum_both = 0;
  for (int g = 0; g < gpus; ++g) {
    const bandwidth b = measure_bandwidth(g, std::uint64_t{1} << 30);
    std::printf("GPU %d pinned: H2D %.1f GB/s, D2H %.1f GB/s, both at once %.1f GB/s each way\n",
                g, b.h2d, b.d2h, b.both_each);
    raw << "{\"gpu\": " << g << ", \"h2d\": " << b.h2d << ", \"d2h\": " << b.d2h
        << ", \"both_each\": " << b.both_each << "},";
    if (g == 0) sum_both = 2 * b.both_each;
  }
  bandwidth registered;
  {
    const bandwidth r = registered = measure_bandwidth(0, std::uint64_t{1} << 30, true);
    std::printf("GPU 0 memory pinned by the engine (mmap + cudaHostRegister): H2D %.1f GB/s, "
                "D2H %.1f GB/s, both at once %.1f GB/s each way\n",
                r.h2d, r.d2h, r.both_each);
    raw << "{\"gpu\": 0, \"registered\": true, \"h2d\": " << r.h2d << ", \"d2h\": " << r.d2h
        << ", \"both_each\": " << r.both_each << "},";
    sum_both = std::max(sum_both, 2 * r.both_each);
  }
  std::printf("PCIe floor from %.1f GB/s both directions summed (best of %d runs)\n", sum_both,
              bandwidth_repeats);
  if (o.model) {
    run_model(o, gpus, registered, targets, raw);
    gpusort::bench::report_results(o.results, targets, raw.str());
    return 0;
  }
  if (o.lean) {
    run_lean(o, sum_both, targets, raw);
    gpusort::bench::report_results(o.results, targets, raw.str());
    return 0;
  }
  if (o.chunks) {
    run_chunks(o, gpus, targets, raw);
    gpusort::bench::report_results(o.results, targets, raw.str());
    return 0;
  }
  if (o.compress) {
    run_compress(o, sum_both, targets, raw);
    gpusort::bench::report_results(o.results, targets, raw.str());
    return 0;
  }
  if (gpus > 1) {
    const double all = measure_aggregate(gpus, std::uint64_t{1} << 30);
    std::printf("all %d GPUs at once, H2D and D2H each: %.1f GB/s summed over every direction\n",
                gpus, all);
    raw << "{\"all_gpus_both_directions_summed\": " << all << "},";
  }

  // CPU baseline.
  std::vector<std::uint64_t> cpu_keys(o.cpu_count);
  gpusort::generate(std::span<std::uint64_t>{cpu_keys}, gpusort::distribution::uniform, 1);
  auto t0 = clock_type::now();
  __gnu_parallel::sort(cpu_keys.begin(), cpu_keys.end());
  const double cpu_seconds = seconds_since(t0);
  const double cpu_rate = static_cast<double>(o.cpu_count) * 8 / cpu_seconds / 1e9;
  std::printf("parallel CPU sort, %d threads: %llu keys in %.3f s (%.2f GB/s)\n",
              omp_get_max_threads(), static_cast<unsigned long long>(o.cpu_count), cpu_seconds,
              cpu_rate);
  raw << "{\"cpu_parallel_sort_bytes\": " << o.cpu_count * 8 << ", \"seconds\": " << cpu_seconds
      << ", \"threads\": " << omp_get_max_threads() << "},";
  cpu_keys = {};

  for (const std::uint64_t n : o.sizes) {
    const double gb = static_cast<double>(n) * 8 / 1e9;
    const std::string tag = gpusort::format_bytes(n * 8);
    host_buffer pinned = gpusort::detail::pinned_host_buffer(n * 8);
    auto* keys = pinned.as<std::uint64_t>();
    const gpusort::key_array view{keys, n, gpusort::dtype::u64};
    auto regenerate = [&] {
      gpusort::generate(std::span<std::uint64_t>{keys, n}, gpusort::distribution::uniform, 2);
    };
    regenerate();
    const gpusort::fingerprint before = gpusort::fingerprint_of(view);
    auto check = [&](const char* what) {
      const auto v = gpusort::verify(view, std::nullopt, gpusort::order::ascending, before);
      if (!v.ok) throw std::runtime_error{std::string{what} + " wrong: " + v.message};
    };

    // Baselines, where the keys fit one GPU twice over (0: not measured).
    double cub_pinned = 0, cub_pageable = 0;
    if (cub_baseline_fits(n)) {
      cub_pinned = cub_baseline(keys, n);
      check("CUB baseline");
      std::vector<std::uint64_t> pageable(keys, keys + n);
      cub_pageable = cub_baseline(pageable.data(), n);
      std::printf("%s: CUB copy-sort-copy pinned %.3f s (%.1f GB/s), pageable %.3f s "
                  "(%.1f GB/s)\n",
                  tag.c_str(), cub_pinned, gb / cub_pinned, cub_pageable, gb / cub_pageable);
    } else {
      std::printf("%s: CUB copy-sort-copy not measured: two arrays do not fit GPU 0\n",
                  tag.c_str());
    }

    // One warm-up run, then the median of `repeats` timed runs; a last, profiled, run says where
    // the time went.
    auto run_engine = [&](gpusort::config cfg, const std::string& what, int repeats) {
      gpusort::engine e{cfg};
      gpusort::sort_report r;
      std::vector<double> times;
      for (int rep = 0; rep <= repeats; ++rep) {
        regenerate();
        r = e.sort(std::span<std::uint64_t>{keys, n});
        check(what.c_str());
        if (rep > 0) times.push_back(r.seconds);
      }
      r.seconds = median(times);
      std::printf("%s: gpusort %s: median %.3f s (%.1f GB/s) of %d [%.3f, %.3f], d=%llu, "
                  "rounds %d, %zu GPU(s)\n",
                  tag.c_str(), what.c_str(), r.seconds, gb / r.seconds, repeats,
                  *std::min_element(times.begin(), times.end()),
                  *std::max_element(times.begin(), times.end()),
                  static_cast<unsigned long long>(r.chunks), r.rounds, r.devices.size());
      regenerate();
      const gpusort::sort_report profiled =
          e.sort(std::span<std::uint64_t>{keys, n}, {.profile = true});
      check(what.c_str());
      std::printf("  profiled run: %.3f s\n", profiled.seconds);
      gpusort::bench::print_profile(profiled);
      raw << "{\"size\": \"" << tag << "\", \"bytes\": " << n * 8 << ", \"run\": "
          << gpusort::bench::json_string(what) << ", \"gpus\": " << r.devices.size()
          << ", \"budget\": " << cfg.device_memory_budget.value_or(0)
          << ", \"seconds\": " << r.seconds
          << ", \"min_s\": " << *std::min_element(times.begin(), times.end())
          << ", \"max_s\": " << *std::max_element(times.begin(), times.end())
          << ", \"chunks\": " << r.chunks << ", \"rounds\": " << r.rounds
          << ", \"profiled_s\": " << profiled.seconds
          << ", \"profile\": " << profile_json(profiled) << "},";
      return r;
    };
    gpusort::config one;
    one.devices = gpusort::device_selection::listed;
    one.gpu_ids = {0};
    gpusort::config forced = one;
    forced.device_memory_budget = n * 8 / 8 * gpusort::detail::cuda_device::buffers_per_element +
                                  (std::uint64_t{256} << 20);
    // Round 2's gather: copy engines against a kernel reading mapped memory (design.md 1).
    if (o.compare_gather) {
      ::setenv("GPUSORT_GATHER", "kernel", 1);
      const auto r_kernel = run_engine(forced, "out of core, gather by kernel, 1 GPU", 3);
      ::unsetenv("GPUSORT_GATHER");
      raw << "{\"size\": \"" << tag << "\", \"gather_kernel_s\": " << r_kernel.seconds
          << "},";
    }
    // The chunk count's trade-off (pipeline fill and drain against d^3 slices in round 2).
    for (const std::uint64_t chunks : o.sweep) {
      const std::string value = std::to_string(chunks);
      ::setenv("GPUSORT_PIPELINE_CHUNKS", value.c_str(), 1);
      const auto r = run_engine(forced, "out of core, at least " + value + " chunks", 3);
      raw << "{\"size\": \"" << tag << "\", \"chunks\": " << r.chunks
          << ", \"out_of_core_s\": " << r.seconds << "},";
    }
    ::unsetenv("GPUSORT_PIPELINE_CHUNKS");
    const auto r_forced = run_engine(forced, "out of core (budget 1/8), 1 GPU", o.repeat);
    const auto r_free = run_engine(one, "not forced, 1 GPU", o.repeat);
    const double floor_s = 4 * gb / sum_both;
    targets.push_back({"executor.out_of_core_vs_pcie_floor." + tag, "time ratio",
                       "4N / (simultaneous H2D+D2H, both directions summed)", r_forced.seconds,
                       r_forced.seconds / floor_s, 1.15, false});
    if (cub_pinned > 0)
      targets.push_back({"executor.not_forced_vs_cub_pinned." + tag, "speed ratio",
                         "copy in, cub::DeviceRadixSort, copy out (pinned)", r_free.seconds,
                         cub_pinned / r_free.seconds, 1.0, true});
    targets.push_back({"executor.vs_parallel_cpu_sort." + tag, "speed ratio",
                       "__gnu_parallel::sort, all cores (rate at --cpu-count)", gb / r_free.seconds,
                       (gb / r_free.seconds) / cpu_rate, 25.0, true});
    if (gpus >= 2) {
      gpusort::config two = forced;
      two.gpu_ids = {0, 1};
      const auto r_two = run_engine(two, "out of core (budget 1/8), 2 GPUs", o.repeat);
      targets.push_back({"executor.two_gpus_out_of_core_vs_one." + tag, "speed ratio",
                         "the same forced job on 1 GPU", r_two.seconds,
                         r_forced.seconds / r_two.seconds, 1.35, true});
      gpusort::config two_free = one;
      two_free.gpu_ids = {0, 1};
      const auto r_two_free = run_engine(two_free, "not forced, 2 GPUs", o.repeat);
      if (cub_pinned > 0)
        targets.push_back({"executor.two_gpus_fits_vs_one_gpu_cub_pinned." + tag, "speed ratio",
                           "copy in, cub::DeviceRadixSort, copy out (pinned, 1 GPU)",
                           r_two_free.seconds, cub_pinned / r_two_free.seconds, 1.6, true});
    }
    if (gpus > 2) {  // every GPU: reported in "raw" (bench/report.py), no target yet
      gpusort::config all_forced = forced, all_free = one;
      all_forced.gpu_ids.clear();
      for (int g = 0; g < gpus; ++g) all_forced.gpu_ids.push_back(g);
      all_free.gpu_ids = all_forced.gpu_ids;
      const std::string count = std::to_string(gpus);
      run_engine(all_forced, "out of core (budget 1/8), " + count + " GPUs", o.repeat);
      run_engine(all_free, "not forced, " + count + " GPUs", o.repeat);
    }
    // Pageable input, staged: reported without a target.
    {
      std::vector<std::uint64_t> pageable(n);
      gpusort::generate(std::span<std::uint64_t>{pageable}, gpusort::distribution::uniform, 2);
      gpusort::engine e{forced};
      e.sort(std::span<std::uint64_t>{pageable});
      gpusort::generate(std::span<std::uint64_t>{pageable}, gpusort::distribution::uniform, 2);
      const auto r = e.sort(std::span<std::uint64_t>{pageable});
      std::printf("%s: gpusort out of core from pageable memory (staged): %.3f s (%.1f GB/s)\n",
                  tag.c_str(), r.seconds, gb / r.seconds);
      raw << "{\"size\": \"" << tag << "\", \"pageable_out_of_core_s\": " << r.seconds << "},";
    }
    raw << "{\"size\": \"" << tag << "\", \"cub_pinned_s\": " << cub_pinned
        << ", \"cub_pageable_s\": " << cub_pageable << ", \"forced_s\": " << r_forced.seconds
        << ", \"free_s\": " << r_free.seconds << ", \"floor_s\": " << floor_s << "},";
  }

  gpusort::bench::report_results(o.results, targets, raw.str());
  return 0;
}

}  // namespace

int main(int argc, char** argv)
{
  return gpusort::bench::run_main<options>(
      "gpu_bench", usage, argc, argv,
      {"--sizes", "--cpu-count", "--repeat", "--sweep-chunks", "--compare-gather", "--compress",
       "--compress-bytes", "--dists", "--lean", "--lean-bytes", "--host-limit", "--lean-memory",
       "--chunks", "--chunk-bytes", "--gpus", "--model", "--incore", "--kinds", "--budgets",
       "--log"},
      set_option,
      run);
}
