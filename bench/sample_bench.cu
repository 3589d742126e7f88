// Sample sort benchmark (issue 4): Gkeys/s of the GPU sample sort, cub::DeviceRadixSort and
// cub::DeviceMergeSort on data already in GPU memory, for u32, u64, f32, f64 keys and u64/u64
// pairs, on uniform, gaussian, staggered, sorted, zero and detdupes, at 2^26 and 2^29 elements.
// Every sample-sort result is verified (order + fingerprint). Also the device's copy bandwidth
// and, per case, the bytes the sample sort moves per key against it (what bounds it).
// Writes bench/results-style JSON with "sample." targets and prints a Markdown table. Usage:
// sample_bench --help; any failure (no GPU, out of memory) ends it with one line and exit code
// 1, a wrong result with exit code 1 after the table.
#include "bench/bench_cli.hpp"
#include "bench/gpu_timing.hpp"
#include "bench/results_format.hpp"
#include "core/checks.hpp"
#include "core/cuda/sample_sort.cuh"
#include "core/generate.hpp"
#include "core/keys.hpp"
#include "core/verify.hpp"
#include "pipeline/cuda/resources.hpp"

#include <gpusort/error.hpp>
#include <gpusort/types.hpp>
#include <gpusort/units.hpp>

#include <cub/device/device_merge_sort.cuh>
#include <cub/device/device_radix_sort.cuh>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace {

using gpusort::cuda::cuda_stream;
using gpusort::cuda::device_buffer;

using gpusort::bench::target;
using gpusort::bench::usage_error;

struct less_op {
  template <typename T>
  __host__ __device__ bool operator()(const T& a, const T& b) const
  {
    return a < b;
  }
};

/// Device-to-device copy bandwidth (GB/s, bytes read plus written).
double copy_bandwidth(cudaStream_t s)
{
  const std::uint64_t bytes = std::uint64_t{2} << 30;
  device_buffer a{bytes}, b{bytes};
  GPUSORT_CUDA_TRY(cudaMemsetAsync(a.data(), 1, bytes, s));
  const double t = gpusort::bench::gpu_time_median(s, 5, [] {}, [&] {
    GPUSORT_CUDA_TRY(cudaMemcpyAsync(b.data(), a.data(), bytes, cudaMemcpyDeviceToDevice, s));
  });
  return 2.0 * static_cast<double>(bytes) / t / 1e9;
}

struct result {
  double sample{}, radix{}, merge{};  // Gkeys/s
  double bytes_per_key{};             // sample sort, modelled
  int levels{};
};

template <typename Key, typename Value>
result run_case(gpusort::dtype t, gpusort::distribution d, std::uint64_t n, int reps,
                cudaStream_t s, bool& all_verified)
{
  constexpr bool pairs = !std::is_void_v<Value>;
  using value_t = std::conditional_t<pairs, Value, char>;
  constexpr unsigned value_bytes = pairs ? sizeof(value_t) : 0;
  std::vector<Key> host(n);
  gpusort::generate(std::span<Key>{host}, d, 1234);
  std::vector<value_t> host_values(pairs ? n : 0);
  if constexpr (pairs)
    gpusort::generate_values(gpusort::value_array{host_values.data(), n, value_bytes}, 99);
  const gpusort::key_array view{host.data(), n, t};
  const std::optional<gpusort::value_array> vview =
      pairs ? std::optional<gpusort::value_array>{gpusort::value_array{host_values.data(), n,
                                                                        value_bytes}}
            : std::nullopt;
  const gpusort::fingerprint before = gpusort::fingerprint_of(view, vview);

  const std::uint64_t kb = n * sizeof(Key), vb = n * value_bytes;
  device_buffer src{kb}, keys{kb}, alt{kb}, vsrc{vb}, vals{vb}, valt{vb};
  GPUSORT_CUDA_TRY(cudaMemcpy(src.data(), host.data(), kb, cudaMemcpyHostToDevice));
  if constexpr (pairs)
    GPUSORT_CUDA_TRY(cudaMemcpy(vsrc.data(), host_values.data(), vb, cudaMemcpyHostToDevice));
  // A pageable copy may return before its DMA lands; `s` does not wait for the legacy stream.
  GPUSORT_CUDA_TRY(cudaDeviceSynchronize());
  auto restore = [&] {
    GPUSORT_CUDA_TRY(cudaMemcpyAsync(keys.data(), src.data(), kb, cudaMemcpyDeviceToDevice, s));
    if constexpr (pairs)
      GPUSORT_CUDA_TRY(
          cudaMemcpyAsync(vals.data(), vsrc.data(), vb, cudaMemcpyDeviceToDevice, s));
  };
  result r;
  const double gkeys = static_cast<double>(n) / 1e9;

  // sample sort, through the typed entry
  {
    const std::size_t bytes =
        gpusort::cuda::sample_sort_scratch_bytes(n, sizeof(Key), value_bytes);
    device_buffer scratch{bytes};
    bool in_alt = false;
    const double sec = gpusort::bench::gpu_time_median(s, reps, restore, [&] {
      in_alt = gpusort::cuda::sample_sort(t, gpusort::order::ascending, keys.data(), alt.data(),
                                          vals.data(), valt.data(), n, value_bytes,
                                          scratch.data(), bytes, s);
    });
    r.sample = gkeys / sec;
    GPUSORT_CUDA_TRY(cudaStreamSynchronize(s));
    GPUSORT_CUDA_TRY(cudaMemcpy(host.data(), in_alt ? alt.data() : keys.data(), kb,
                                cudaMemcpyDeviceToHost));
    if constexpr (pairs)
      GPUSORT_CUDA_TRY(cudaMemcpy(host_values.data(), in_alt ? valt.data() : vals.data(), vb,
                                  cudaMemcpyDeviceToHost));
    const auto v = gpusort::verify(view, vview, gpusort::order::ascending, before);
    if (!v.ok) {
      std::fprintf(stderr, "sample_bench: sample sort WRONG (%s %s n=%llu): %s\n",
                   std::string{gpusort::name_of(t)}.c_str(),
                   std::string{gpusort::name_of(d)}.c_str(), static_cast<unsigned long long>(n),
                   v.message.c_str());
      all_verified = false;
    }
    int major = 0, dev = 0;
    GPUSORT_CUDA_TRY(cudaGetDevice(&dev));
    GPUSORT_CUDA_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    const auto shape =
        gpusort::cuda::detail::sample_sort_shape_of(n, sizeof(Key), value_bytes, major);
    r.levels = shape.levels;
    // per level: keys read twice (histogram, scatter) and written once, values read and written
    // once; the bucket sort reads and writes everything once (floats and signed keys are mapped
    // to ordered bits and back as the passes read and write them: no bytes of their own)
    const double kw = sizeof(Key), vw = value_bytes;
    r.bytes_per_key = shape.levels * (3 * kw + 2 * vw) + 2 * (kw + vw);
  }
  // CUB radix sort, on the native key type
  {
    cub::DoubleBuffer<Key> kbuf{keys.data<Key>(), alt.data<Key>()};
    cub::DoubleBuffer<value_t> vbuf{vals.data<value_t>(), valt.data<value_t>()};
    std::size_t bytes = 0;
    if constexpr (pairs)
      GPUSORT_CUDA_TRY(cub::DeviceRadixSort::SortPairs(nullptr, bytes, kbuf, vbuf,
                                                       static_cast<std::int64_t>(n), 0,
                                                       int{sizeof(Key) * 8}, s));
    else
      GPUSORT_CUDA_TRY(cub::DeviceRadixSort::SortKeys(nullptr, bytes, kbuf,
                                                      static_cast<std::int64_t>(n), 0,
                                                      int{sizeof(Key) * 8}, s));
    device_buffer scratch{bytes};
    const double sec = gpusort::bench::gpu_time_median(s, reps, restore, [&] {
      kbuf.selector = 0;
      vbuf.selector = 0;
      if constexpr (pairs)
        GPUSORT_CUDA_TRY(cub::DeviceRadixSort::SortPairs(scratch.data(), bytes, kbuf, vbuf,
                                                         static_cast<std::int64_t>(n), 0,
                                                         int{sizeof(Key) * 8}, s));
      else
        GPUSORT_CUDA_TRY(cub::DeviceRadixSort::SortKeys(scratch.data(), bytes, kbuf,
                                                        static_cast<std::int64_t>(n), 0,
                                                        int{sizeof(Key) * 8}, s));
    });
    r.radix = gkeys / sec;
  }
  // CUB merge sort (the comparison peer), NaN-free data
  {
    std::size_t bytes = 0;
    if constexpr (pairs)
      GPUSORT_CUDA_TRY(cub::DeviceMergeSort::SortPairs(nullptr, bytes, keys.data<Key>(),
                                                       vals.data<value_t>(),
                                                       static_cast<std::int64_t>(n), less_op{}, s));
    else
      GPUSORT_CUDA_TRY(cub::DeviceMergeSort::SortKeys(nullptr, bytes, keys.data<Key>(),
                                                      static_cast<std::int64_t>(n), less_op{}, s));
    device_buffer scratch{bytes};
    const double sec = gpusort::bench::gpu_time_median(s, reps, restore, [&] {
      if constexpr (pairs)
        GPUSORT_CUDA_TRY(cub::DeviceMergeSort::SortPairs(scratch.data(), bytes, keys.data<Key>(),
                                                         vals.data<value_t>(),
                                                         static_cast<std::int64_t>(n), less_op{},
                                                         s));
      else
        GPUSORT_CUDA_TRY(cub::DeviceMergeSort::SortKeys(scratch.data(), bytes, keys.data<Key>(),
                                                        static_cast<std::int64_t>(n), less_op{},
                                                        s));
    });
    r.merge = gkeys / sec;
  }
  return r;
}

/// "2^26" for powers of two, else the number.
std::string size_name(std::uint64_t n)
{
  if ((n & (n - 1)) == 0) {
    int bits = 0;
    while ((std::uint64_t{1} << bits) < n) ++bits;
    return "2^" + std::to_string(bits);
  }
  return std::to_string(n);
}

constexpr const char* usage =
    "usage: sample_bench [--sizes 64Mi,512Mi] [--reps 3] [--types u32,u64,f32,f64,pairs]\n"
    "                    [--dists uniform,gaussian,staggered,sorted,zero,detdupes]\n"
    "                    [--json FILE] [--machine NAME] [--commit C]\n"
    "\n"
    "Gkeys/s of the GPU sample sort, cub::DeviceRadixSort and cub::DeviceMergeSort on data in\n"
    "GPU 0's memory, for each size (a count of keys), key type and distribution; the median of\n"
    "--reps runs after a warm-up. Every sample-sort result is verified.\n"
    "exit codes: 0 done and verified, 1 a failure or a wrong result, 64 a bad command line\n";

constexpr std::string_view key_types[] = {"u32", "u64", "f32", "f64", "pairs"};

struct options {
  std::vector<std::uint64_t> sizes{std::uint64_t{1} << 26, std::uint64_t{1} << 29};
  std::vector<std::string> types{key_types, key_types + std::size(key_types)};
  std::vector<std::string> dists{"uniform", "gaussian", "staggered", "sorted", "zero", "detdupes"};
  int reps = 3;
  gpusort::bench::results_options results;
};

void set_option(options& o, std::string_view flag, const std::string& v)
{
  if (flag == "--sizes") {
    o.sizes = gpusort::bench::parse_counts(flag, v);
  } else if (flag == "--reps") {
    o.reps = static_cast<int>(gpusort::bench::parse_one_count(flag, v, 1000));
  } else if (flag == "--types") {
    o.types = gpusort::bench::parse_names(flag, v, key_types);
  } else if (flag == "--dists") {
    o.dists = gpusort::bench::parse_distributions(flag, v);
  }
}

int run(const options& o)
{
  // Before any other CUDA call, so that a host without a GPU or driver is told so by this one.
  cudaDeviceProp prop{};
  GPUSORT_CUDA_TRY(cudaGetDeviceProperties(&prop, 0));
  cuda_stream stream;
  const cudaStream_t s = stream.value();
  const double bandwidth = copy_bandwidth(s);
  std::printf("device: %s, %d SMs; device-to-device copy %.0f GB/s (read + write)\n", prop.name,
              prop.multiProcessorCount, bandwidth);

  std::vector<target> targets;
  std::ostringstream raw;
  bool all_verified = true;
  std::printf("\n| keys | distribution | n | sample Gkeys/s | radix Gkeys/s | merge Gkeys/s | "
              "vs merge | vs radix | levels | bytes/key | GB/s moved | of copy bw |\n"
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | "
              "---: |\n");
  for (const std::uint64_t n : o.sizes) {
    const std::string size_tag = size_name(n);
    for (const std::string& type : o.types) {
      std::map<std::string, double> rate_of;
      for (const std::string& dist_name : o.dists) {
        const auto d = gpusort::parse_distribution(dist_name);  // checked by set_option
        result r;
        if (type == "u32")
          r = run_case<std::uint32_t, void>(gpusort::dtype::u32, *d, n, o.reps, s, all_verified);
        else if (type == "u64")
          r = run_case<std::uint64_t, void>(gpusort::dtype::u64, *d, n, o.reps, s, all_verified);
        else if (type == "f32")
          r = run_case<float, void>(gpusort::dtype::f32, *d, n, o.reps, s, all_verified);
        else if (type == "f64")
          r = run_case<double, void>(gpusort::dtype::f64, *d, n, o.reps, s, all_verified);
        else if (type == "pairs")
          r = run_case<std::uint64_t, std::uint64_t>(gpusort::dtype::u64, *d, n, o.reps, s,
                                                     all_verified);
        else
          throw std::logic_error{"no case for key type " + type};  // set_option checked it
        const double moved = r.sample * r.bytes_per_key;
        std::printf("| %s | %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f | %d | %.0f | %.0f | "
                    "%.0f%% |\n",
                    type.c_str(), dist_name.c_str(), size_tag.c_str(), r.sample, r.radix, r.merge,
                    r.sample / r.merge, r.sample / r.radix, r.levels, r.bytes_per_key, moved,
                    100.0 * moved / bandwidth);
        std::fflush(stdout);
        raw << "{\"keys\": \"" << type << "\", \"distribution\": \"" << dist_name
            << "\", \"n\": " << n << ", \"sample_gkeys\": " << r.sample
            << ", \"radix_gkeys\": " << r.radix << ", \"merge_gkeys\": " << r.merge
            << ", \"levels\": " << r.levels << ", \"bytes_per_key\": " << r.bytes_per_key
            << ", \"moved_gbs\": " << moved << "},";
        rate_of[dist_name] = r.sample;
        const std::string tag = type + "." + dist_name + "." + size_tag;
        targets.push_back({"sample.vs_merge_sort." + tag, "speed ratio",
                           "cub::DeviceMergeSort, same data, same GPU", r.sample,
                           r.sample / r.merge, 2.0, true});
        if (type != "u32" && type != "f32")
          targets.push_back({"sample.vs_radix_sort." + tag, "speed ratio",
                             "cub::DeviceRadixSort, same data, same GPU", r.sample,
                             r.sample / r.radix, 1.0, true});
      }
      if (rate_of.count("uniform") != 0) {
        for (const auto& [dist_name, rate] : rate_of) {
          if (dist_name == "uniform") continue;
          targets.push_back({"sample.slowdown_vs_uniform." + type + "." + dist_name + "." +
                                 size_tag,
                             "time ratio", "the sample sort on uniform keys, same type and size",
                             rate, rate_of["uniform"] / rate, 1.5, false});
        }
      }
    }
  }

  const int met = gpusort::bench::print_targets(targets, "value (Gkeys/s)");
  std::printf("\n%d of %zu targets met; every sample-sort result verified: %s\n", met,
              targets.size(), all_verified ? "yes" : "NO");
  if (!o.results.json.empty()) {
    std::string r = raw.str();
    if (!r.empty()) r.pop_back();
    gpusort::bench::write_results(
        o.results.json, o.results.commit, o.results.machine, targets, r,
        {"\"device\": \"" + std::string{prop.name} + "\"",
         "\"copy_bandwidth_gbs\": " + std::to_string(bandwidth),
         "\"verified\": " + std::string{all_verified ? "true" : "false"}});
  }
  return all_verified ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv)
{
  return gpusort::bench::run_main<options>("sample_bench", usage, argc, argv,
                                           {"--sizes", "--reps", "--types", "--dists"},
                                           set_option, run);
}
