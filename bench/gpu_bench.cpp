// GPU executor benchmark (issue 3): in one run, the pinned copy bandwidth of each GPU, the
// baseline "copy in, CUB radix sort, copy out" from pinned and from pageable memory, the
// parallel CPU sort, and gpusort on u64 uniform keys with the budget forced to 1/8 of the data
// (true out of core) and without, from memory the engine pinned and from plain memory. Each
// gpusort configuration runs twice and the second (warm: pinned round-1 output cached) counts.
// Writes bench/results-style JSON with "executor." targets.
//
//   gpu_bench [--sizes 1Gi,4Gi] [--cpu-count 1Gi] [--json FILE] [--machine NAME] [--commit C]
#include "core/cuda/chunk_ops.cuh"
#include "core/generate.hpp"
#include "core/verify.hpp"
#include "pipeline/cuda/cuda_device.hpp"
#include "pipeline/cuda/resources.hpp"

#include <gpusort/error.hpp>
#include <gpusort/gpusort.hpp>
#include <gpusort/units.hpp>

#include <cuda_runtime_api.h>
#include <omp.h>
#include <parallel/algorithm>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
using gpusort::detail::host_buffer;

double seconds_since(clock_type::time_point t0)
{
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

struct target {
  std::string name, unit, baseline;
  double value{}, ratio{}, goal{};
  bool higher_is_better{true};
  [[nodiscard]] bool met() const { return higher_is_better ? ratio >= goal : ratio <= goal; }
};

struct bandwidth {
  double h2d{}, d2h{}, both_each{};
};

/// Pinned copy bandwidth of one GPU (GB/s): each direction alone, then both at once.
bandwidth measure_bandwidth(int dev, std::uint64_t bytes)
{
  const gpusort::cuda::set_device_guard guard{dev};
  gpusort::cuda::pinned_buffer h_in{bytes, cudaHostAllocPortable}, h_out{bytes, cudaHostAllocPortable};
  gpusort::cuda::device_buffer d_a{bytes}, d_b{bytes};
  gpusort::cuda::cuda_stream s1, s2;
  auto timed = [&](const std::function<void()>& issue) {
    issue();  // warm-up
    s1.synchronize();
    s2.synchronize();
    const auto t0 = clock_type::now();
    issue();
    s1.synchronize();
    s2.synchronize();
    return seconds_since(t0);
  };
  bandwidth b;
  b.h2d = static_cast<double>(bytes) / 1e9 / timed([&] {
    GPUSORT_CUDA_TRY(cudaMemcpyAsync(d_a.data(), h_in.data(), bytes, cudaMemcpyHostToDevice, s1.value()));
  });
  b.d2h = static_cast<double>(bytes) / 1e9 / timed([&] {
    GPUSORT_CUDA_TRY(cudaMemcpyAsync(h_out.data(), d_b.data(), bytes, cudaMemcpyDeviceToHost, s2.value()));
  });
  b.both_each = static_cast<double>(bytes) / 1e9 / timed([&] {
    GPUSORT_CUDA_TRY(cudaMemcpyAsync(d_a.data(), h_in.data(), bytes, cudaMemcpyHostToDevice, s1.value()));
    GPUSORT_CUDA_TRY(cudaMemcpyAsync(h_out.data(), d_b.data(), bytes, cudaMemcpyDeviceToHost, s2.value()));
  });
  return b;
}

/// The baseline: copy in, cub::DeviceRadixSort, copy out, one GPU, the keys fitting on it.
double cub_baseline(std::uint64_t* keys, std::uint64_t n)
{
  const gpusort::cuda::set_device_guard guard{0};
  gpusort::cuda::device_buffer d_keys{n * 8}, d_alt{n * 8};
  const std::size_t scratch_bytes = gpusort::cuda::radix_sort_scratch_bytes(n, 8, 0);
  gpusort::cuda::device_buffer scratch{scratch_bytes};
  gpusort::cuda::cuda_stream s;
  auto run = [&] {
    GPUSORT_CUDA_TRY(cudaMemcpyAsync(d_keys.data(), keys, n * 8, cudaMemcpyHostToDevice, s.value()));
    const bool alt = gpusort::cuda::radix_sort(d_keys.data(), d_alt.data(), nullptr, nullptr, n, 8,
                                               0, scratch.data(), scratch_bytes, s.value());
    GPUSORT_CUDA_TRY(cudaMemcpyAsync(keys, alt ? d_alt.data() : d_keys.data(), n * 8,
                                     cudaMemcpyDeviceToHost, s.value()));
    s.synchronize();
  };
  run();  // warm-up (module load), on the same data: sorting sorted keys costs the same
  const auto t0 = clock_type::now();
  run();
  return seconds_since(t0);
}

std::vector<std::uint64_t> parse_sizes(const std::string& text)
{
  std::vector<std::uint64_t> out;
  std::stringstream ss{text};
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto c = gpusort::parse_count(item);
    if (!c) {
      std::fprintf(stderr, "gpu_bench: bad size %s\n", item.c_str());
      std::exit(64);
    }
    out.push_back(*c);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv)
{
  std::vector<std::uint64_t> sizes{std::uint64_t{1} << 30, std::uint64_t{4} << 30};
  std::uint64_t cpu_count = std::uint64_t{1} << 30;
  std::string json, machine = "unknown", commit = "unknown";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--sizes") sizes = parse_sizes(v);
    else if (a == "--cpu-count") cpu_count = parse_sizes(v).front();
    else if (a == "--json") json = v;
    else if (a == "--machine") machine = v;
    else if (a == "--commit") commit = v;
    else { std::fprintf(stderr, "gpu_bench: unknown argument %s\n", a.c_str()); return 64; }
  }
  int gpus = 0;
  GPUSORT_CUDA_TRY(cudaGetDeviceCount(&gpus));
  std::vector<target> targets;
  std::ostringstream raw;

  // Bandwidth: each GPU alone, and all at once for the aggregate.
  double sum_both = 0;
  for (int g = 0; g < gpus; ++g) {
    const bandwidth b = measure_bandwidth(g, std::uint64_t{1} << 30);
    std::printf("GPU %d pinned: H2D %.1f GB/s, D2H %.1f GB/s, both at once %.1f GB/s each way\n",
                g, b.h2d, b.d2h, b.both_each);
    raw << "{\"gpu\": " << g << ", \"h2d\": " << b.h2d << ", \"d2h\": " << b.d2h
        << ", \"both_each\": " << b.both_each << "},";
    if (g == 0) sum_both = 2 * b.both_each;
  }

  // CPU baseline.
  std::vector<std::uint64_t> cpu_keys(cpu_count);
  gpusort::generate(std::span<std::uint64_t>{cpu_keys}, gpusort::distribution::uniform, 1);
  auto t0 = clock_type::now();
  __gnu_parallel::sort(cpu_keys.begin(), cpu_keys.end());
  const double cpu_seconds = seconds_since(t0);
  const double cpu_rate = static_cast<double>(cpu_count) * 8 / cpu_seconds / 1e9;
  std::printf("parallel CPU sort, %d threads: %llu keys in %.3f s (%.2f GB/s)\n",
              omp_get_max_threads(), static_cast<unsigned long long>(cpu_count), cpu_seconds, cpu_rate);
  cpu_keys = {};

  for (const std::uint64_t n : sizes) {
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
      if (!v.ok) {
        std::fprintf(stderr, "gpu_bench: %s wrong: %s\n", what, v.message.c_str());
        std::exit(1);
      }
    };

    // Baselines, where the keys fit one GPU twice over.
    double cub_pinned = 0, cub_pageable = 0;
    {
      cub_pinned = cub_baseline(keys, n);
      check("CUB baseline");
      std::vector<std::uint64_t> pageable(keys, keys + n);
      cub_pageable = cub_baseline(pageable.data(), n);
    }
    std::printf("%s: CUB copy-sort-copy pinned %.3f s (%.1f GB/s), pageable %.3f s (%.1f GB/s)\n",
                tag.c_str(), cub_pinned, gb / cub_pinned, cub_pageable, gb / cub_pageable);

    auto run_engine = [&](gpusort::config cfg, const char* what) {
      gpusort::engine e{cfg};
      gpusort::sort_report r;
      for (int rep = 0; rep < 2; ++rep) {
        regenerate();
        r = e.sort(std::span<std::uint64_t>{keys, n});
        check(what);
      }
      std::printf("%s: gpusort %s: %.3f s (%.1f GB/s), d=%llu, rounds %d, %zu GPU(s)\n", tag.c_str(),
                  what, r.seconds, gb / r.seconds, static_cast<unsigned long long>(r.chunks), r.rounds,
                  r.devices.size());
      return r;
    };
    gpusort::config one;
    one.devices = gpusort::device_selection::listed;
    one.gpu_ids = {0};
    gpusort::config forced = one;
    forced.device_memory_budget = n * 8 / 8 * gpusort::detail::cuda_device::buffers_per_element +
                                  (std::uint64_t{256} << 20);
    const auto r_forced = run_engine(forced, "out of core (budget 1/8), 1 GPU");
    const auto r_free = run_engine(one, "not forced, 1 GPU");
    const double floor_s = 4 * gb / sum_both;
    targets.push_back({"executor.out_of_core_vs_pcie_floor." + tag, "time ratio",
                       "4N / (simultaneous H2D+D2H, both directions summed)", r_forced.seconds,
                       r_forced.seconds / floor_s, 1.15, false});
    targets.push_back({"executor.not_forced_vs_cub_pinned." + tag, "speed ratio",
                       "copy in, cub::DeviceRadixSort, copy out (pinned)", r_free.seconds,
                       cub_pinned / r_free.seconds, 1.0, true});
    targets.push_back({"executor.vs_parallel_cpu_sort." + tag, "speed ratio",
                       "__gnu_parallel::sort, all cores (rate at --cpu-count)", gb / r_free.seconds,
                       (gb / r_free.seconds) / cpu_rate, 25.0, true});
    if (gpus >= 2) {
      gpusort::config two = forced;
      two.gpu_ids = {0, 1};
      const auto r_two = run_engine(two, "out of core (budget 1/8), 2 GPUs");
      targets.push_back({"executor.two_gpus_out_of_core_vs_one." + tag, "speed ratio",
                         "the same forced job on 1 GPU", r_two.seconds,
                         r_forced.seconds / r_two.seconds, 1.35, true});
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

  std::printf("\n| target | value | ratio | goal | met |\n| --- | ---: | ---: | ---: | --- |\n");
  for (const target& t : targets)
    std::printf("| %s | %.3f | %.3f | %s %.2f | %s |\n", t.name.c_str(), t.value, t.ratio,
                t.higher_is_better ? ">=" : "<=", t.goal, t.met() ? "yes" : "NO");
  if (!json.empty()) {
    std::time_t now = std::time(nullptr);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%d", std::gmtime(&now));
    std::ofstream out{json};
    out << "{\n  \"commit\": \"" << commit << "\",\n  \"machine\": \"" << machine
        << "\",\n  \"date\": \"" << date << "\",\n  \"targets\": [\n";
    for (std::size_t i = 0; i < targets.size(); ++i) {
      const target& t = targets[i];
      out << "    {\"name\": \"" << t.name << "\", \"value\": " << t.value << ", \"unit\": \""
          << t.unit << "\", \"baseline\": \"" << t.baseline << "\", \"ratio\": " << t.ratio
          << ", \"target\": " << t.goal << ", \"met\": " << (t.met() ? "true" : "false") << "}"
          << (i + 1 < targets.size() ? "," : "") << "\n";
    }
    std::string r = raw.str();
    if (!r.empty()) r.pop_back();
    out << "  ],\n  \"raw\": [" << r << "]\n}\n";
  }
  return 0;
}
