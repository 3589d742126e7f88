// Run codec benchmark (issue 21): what compressing round 1's sorted runs would buy and cost. Per
// key type and distribution, a chunk of the generated input goes through round 1's device steps
// as the pipeline runs them (copy in, keys to ordered bits, CUB's radix sort, dealing into d
// runs), and then the d runs are encoded (core/cuda/run_codec.cuh: one encode_runs call for
// the chunk, as round 1 would before its copy-out) and decoded (one decode_slices launch over
// all d runs, as round 2 would after its copy-in). Reports bytes per key after encoding (stream and the index
// the host keeps) and the encode and decode rates in GB/s of raw keys, on data in GPU memory,
// median of --reps after a warm-up. Every decoded run is compared with the dealt keys.
// Writes bench/results-style JSON with "compress." targets. Usage: codec_bench --help.
#include "bench/bench_cli.hpp"
#include "bench/gpu_timing.hpp"
#include "bench/results_format.hpp"
#include "core/checks.hpp"
#include "core/cuda/chunk_ops.cuh"
#include "core/cuda/ordered_keys.cuh"
#include "core/cuda/run_codec.cuh"
#include "core/generate.hpp"
#include "core/plan/dealing.hpp"
#include "core/run_codec.hpp"
#include "pipeline/cuda/resources.hpp"

#include <gpusort/error.hpp>
#include <gpusort/types.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace codec = gpusort::detail::codec;
using gpusort::bench::target;
using gpusort::bench::usage_error;
using gpusort::cuda::cuda_stream;
using gpusort::cuda::device_buffer;
using gpusort::cuda::pinned_buffer;

/// Pinned host-to-device rate on the H100 with both directions busy (docs: shared/design.md
/// section 1, 46.0 GB/s each way): the copies the codec shortens. The codec shares round 1's
/// compute stage with the sort, which must stay shorter than the chunk's copy-in, so it should
/// run at several times this rate.
constexpr double pcie_gbs = 46.0;
constexpr double codec_rate_goal = 4.0;  ///< times pcie_gbs: at most a quarter of the copy time

struct result {
  double stream_bytes_per_key{}, bytes_per_key{};  // stream alone; stream + index
  double encode_gbs{}, decode_gbs{}, size_gbs{};   // GB/s of raw keys
  double mean_width{};                             // bits per delta over the blocks
  bool verified{};
};

/// One chunk of `chunk_keys` keys of type `t` from distribution `d`, dealt into `deal` runs.
template <typename K>
result run_case(gpusort::dtype t, gpusort::distribution d, std::uint64_t chunk_keys,
                std::uint64_t deal, int reps, cudaStream_t s)
{
  const std::uint64_t n = chunk_keys;
  const std::uint64_t bytes = n * sizeof(K);
  std::vector<K> host(n);
  gpusort::generate(gpusort::key_array{host.data(), n, t}, d, 4321);

  // round 1's device steps: ordered bits, sorted, dealt into `deal` runs
  device_buffer keys{bytes}, alt{bytes}, dealt{bytes};
  GPUSORT_CUDA_TRY(cudaMemcpyAsync(keys.data(), host.data(), bytes, cudaMemcpyHostToDevice, s));
  gpusort::cuda::to_ordered(keys.data(), n, t, gpusort::order::ascending, s);
  const std::size_t sort_bytes = gpusort::cuda::radix_sort_scratch_bytes(n, sizeof(K), 0);
  {
    device_buffer sort_scratch{sort_bytes};
    const bool in_alt = gpusort::cuda::radix_sort(keys.data(), alt.data(), nullptr, nullptr, n,
                                                  sizeof(K), 0, sort_scratch.data(), sort_bytes,
                                                  s);
    gpusort::cuda::deal(in_alt ? alt.data() : keys.data(), nullptr, n, deal, dealt.data(),
                        nullptr, sizeof(K), 0, s);
  }

  // the chunk's runs encoded together, as round 1 would before its copy-out: one call, the
  // runs' index entries and streams back to back
  const std::uint64_t blocks = codec::dealt_blocks(n, deal);
  const std::uint64_t room = codec::dealt_bytes_bound(n, deal, sizeof(K));
  device_buffer index{blocks * sizeof(codec::run_block)}, stream{room};
  const std::size_t scratch_bytes = gpusort::cuda::run_codec_scratch_bytes(n, deal);
  device_buffer scratch{scratch_bytes};
  pinned_buffer totals{sizeof(std::uint64_t), cudaHostAllocMapped};
  auto* total = totals.data<std::uint64_t>();
  auto* index_base = index.data<codec::run_block>();

  result r;
  const double gb = static_cast<double>(bytes) / 1e9;
  // the size query alone (auto mode's question), then the whole encoding
  r.size_gbs = gb / gpusort::bench::gpu_time_median(s, reps, {}, [&] {
    gpusort::cuda::encoded_size(dealt.data(), n, deal, sizeof(K), total, scratch.data(),
                                scratch_bytes, s);
  });
  r.encode_gbs = gb / gpusort::bench::gpu_time_median(s, reps, {}, [&] {
    gpusort::cuda::encode_runs(dealt.data(), n, deal, sizeof(K), index_base, stream.data(), room,
                               total, scratch.data(), scratch_bytes, s);
  });
  GPUSORT_CUDA_TRY(cudaStreamSynchronize(s));
  r.stream_bytes_per_key = static_cast<double>(*total) / static_cast<double>(n);
  r.bytes_per_key = r.stream_bytes_per_key + static_cast<double>(blocks) *
                                                 sizeof(codec::run_block) /
                                                 static_cast<double>(n);
  std::vector<codec::run_block> host_index(blocks);
  GPUSORT_CUDA_TRY(cudaMemcpy(host_index.data(), index.data(),
                              host_index.size() * sizeof(codec::run_block),
                              cudaMemcpyDeviceToHost));
  double width_sum = 0;
  for (const codec::run_block& e : host_index) width_sum += e.width;
  r.mean_width = host_index.empty() ? 0 : width_sum / static_cast<double>(host_index.size());

  // decoding: every run whole, one launch, as round 2 decodes a final chunk's slices
  std::vector<codec::encoded_slice> table(deal);
  for (std::uint64_t j = 0; j < deal; ++j) {
    const std::uint64_t b = codec::dealt_first_block(n, deal, j);
    table[j] = {index_base + b, stream.data<std::byte>() + host_index[b].byte_offset, 0,
                gpusort::detail::bin_size(n, deal, j), gpusort::detail::bin_offset(n, deal, j)};
  }
  const std::uint64_t most_blocks = codec::blocks_of(gpusort::detail::bin_size(n, deal, 0));
  device_buffer d_table{deal * sizeof(codec::encoded_slice)};
  GPUSORT_CUDA_TRY(cudaMemcpy(d_table.data(), table.data(), d_table.size(),
                              cudaMemcpyHostToDevice));
  // A pageable copy may return before its DMA lands; `s` does not wait for the legacy stream.
  GPUSORT_CUDA_TRY(cudaDeviceSynchronize());
  device_buffer decoded{bytes};
  GPUSORT_CUDA_TRY(cudaMemsetAsync(decoded.data(), 0, bytes, s));
  r.decode_gbs = gb / gpusort::bench::gpu_time_median(s, reps, {}, [&] {
    gpusort::cuda::decode_slices(d_table.data<codec::encoded_slice>(),
                                 static_cast<std::uint32_t>(deal), most_blocks, decoded.data(),
                                 sizeof(K), s);
  });
  std::vector<K> want(n), got(n);
  GPUSORT_CUDA_TRY(cudaMemcpy(want.data(), dealt.data(), bytes, cudaMemcpyDeviceToHost));
  GPUSORT_CUDA_TRY(cudaMemcpy(got.data(), decoded.data(), bytes, cudaMemcpyDeviceToHost));
  r.verified = want == got;
  return r;
}

constexpr const char* usage =
    "usage: codec_bench [--chunk-keys 256Mi] [--deal 16] [--reps 5]\n"
    "                   [--types u32,u64,f32,f64] [--dists uniform,gaussian,...]\n"
    "                   [--json FILE] [--machine NAME] [--commit C]\n"
    "\n"
    "The run codec on GPU 0: a chunk of --chunk-keys keys of each type and distribution is\n"
    "sorted and dealt into --deal runs on the GPU as round 1 does (runs of chunk/deal keys:\n"
    "256Mi / 16 = 16Mi, the runs of an 8 GiB job of u32 keys on one H100), then encoded in one\n"
    "call and decoded in one launch. Prints bytes per key (stream, and with the host's index)\n"
    "and encode, size-query and decode rates in GB/s of raw keys (median of --reps after a\n"
    "warm-up); every decoded run is compared with its keys. Types: u32 i32 f32 u64 i64 f64;\n"
    "distributions: those of gpusort gen (nanmix for floats only; others skip it).\n"
    "exit codes: 0 done and verified, 1 a failure or a wrong result, 64 a bad command line\n";

constexpr std::string_view key_types[] = {"u32", "i32", "f32", "u64", "i64", "f64"};

struct options {
  std::uint64_t chunk_keys = std::uint64_t{1} << 28;
  std::uint64_t deal = 16;
  int reps = 5;
  std::vector<std::string> types{"u32", "u64", "f32", "f64"};
  std::vector<std::string> dists;  // empty: every distribution
  gpusort::bench::results_options results;
};

void set_option(options& o, std::string_view flag, const std::string& v)
{
  if (flag == "--chunk-keys") {
    o.chunk_keys = gpusort::bench::parse_one_count(flag, v);
  } else if (flag == "--deal") {
    o.deal = gpusort::bench::parse_one_count(flag, v, 65535);
  } else if (flag == "--reps") {
    o.reps = static_cast<int>(gpusort::bench::parse_one_count(flag, v, 1000));
  } else if (flag == "--types") {
    o.types = gpusort::bench::parse_names(flag, v, key_types);
  } else if (flag == "--dists") {
    o.dists = gpusort::bench::parse_distributions(flag, v);
  }
}

/// What the speed goals ask of the bytes per key, as a fraction of the raw key: with
/// two of the four crossings shortened to a fraction f, the time is (2 + 2f) / 4 of the floor,
/// so u32 uniform's 0.75x needs f <= 0.5 and u64 uniform's 0.95x f <= 0.9; elsewhere the
/// issue asks for a report, and the goal is only that the codec does not expand the keys.
double fraction_goal(std::string_view type, std::string_view dist)
{
  if (dist == "uniform" && (type == "u32" || type == "i32")) return 0.5;
  if (dist == "uniform" && (type == "u64" || type == "i64")) return 0.9;
  return 1.0;
}

int run(const options& o)
{
  if (o.chunk_keys < o.deal) throw usage_error{"--chunk-keys must be at least --deal"};
  cudaDeviceProp prop{};
  GPUSORT_CUDA_TRY(cudaGetDeviceProperties(&prop, 0));  // first: a host without a GPU says so
  cuda_stream stream;
  const cudaStream_t s = stream.value();
  std::printf("device: %s; chunk %llu keys dealt into %llu runs of ~%llu; block %u keys\n",
              prop.name, static_cast<unsigned long long>(o.chunk_keys),
              static_cast<unsigned long long>(o.deal),
              static_cast<unsigned long long>(o.chunk_keys / o.deal), codec::block_keys);
  std::printf("\n| keys | distribution | bytes/key | of raw | stream bytes/key | mean width | "
              "encode GB/s | size query GB/s | decode GB/s | verified |\n"
              "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n");
  std::vector<target> targets;
  std::ostringstream raw;
  bool all_verified = true;
  for (const std::string& type : o.types) {
    const gpusort::dtype t = *gpusort::parse_dtype(type);  // checked by set_option
    for (const gpusort::distribution d : gpusort::all_distributions) {
      const std::string dist{gpusort::name_of(d)};
      if (!gpusort::applies_to(d, t)) continue;
      if (!o.dists.empty() && std::find(o.dists.begin(), o.dists.end(), dist) == o.dists.end())
        continue;
      const unsigned key_bytes = static_cast<unsigned>(gpusort::size_of(t));
      const result r =
          key_bytes == 4
              ? run_case<std::uint32_t>(t, d, o.chunk_keys, o.deal, o.reps, s)
              : run_case<std::uint64_t>(t, d, o.chunk_keys, o.deal, o.reps, s);
      all_verified = all_verified && r.verified;
      const double fraction = r.bytes_per_key / key_bytes;
      std::printf("| %s | %s | %.3f | %.3f | %.3f | %.1f | %.0f | %.0f | %.0f | %s |\n",
                  type.c_str(), dist.c_str(), r.bytes_per_key, fraction,
                  r.stream_bytes_per_key, r.mean_width, r.encode_gbs, r.size_gbs, r.decode_gbs,
                  r.verified ? "yes" : "NO");
      std::fflush(stdout);
      raw << "{\"keys\": \"" << type << "\", \"distribution\": \"" << dist
          << "\", \"chunk_keys\": " << o.chunk_keys << ", \"runs\": " << o.deal
          << ", \"bytes_per_key\": " << r.bytes_per_key
          << ", \"stream_bytes_per_key\": " << r.stream_bytes_per_key
          << ", \"mean_width\": " << r.mean_width << ", \"encode_gbs\": " << r.encode_gbs
          << ", \"size_query_gbs\": " << r.size_gbs << ", \"decode_gbs\": " << r.decode_gbs
          << ", \"verified\": " << (r.verified ? "true" : "false") << "},";
      const std::string tag = type + "." + dist;
      targets.push_back({"compress.bytes_per_key." + tag, "bytes per key",
                         "the raw key's bytes (fraction: stream and index over them)",
                         r.bytes_per_key, fraction, fraction_goal(type, dist), false});
      const std::string rate_baseline = "46 GB/s, pinned PCIe each way on the H100";
      targets.push_back({"compress.encode_rate." + tag, "GB/s of raw keys", rate_baseline,
                         r.encode_gbs, r.encode_gbs / pcie_gbs, codec_rate_goal, true});
      targets.push_back({"compress.decode_rate." + tag, "GB/s of raw keys", rate_baseline,
                         r.decode_gbs, r.decode_gbs / pcie_gbs, codec_rate_goal, true});
    }
  }
  gpusort::bench::report_results(
      o.results, targets, raw.str(),
      {"\"device\": " + gpusort::bench::json_string(prop.name),
       "\"block_keys\": " + std::to_string(codec::block_keys),
       "\"verified\": " + std::string{all_verified ? "true" : "false"}});
  std::printf("\nevery decoded run equal to its keys: %s\n", all_verified ? "yes" : "NO");
  return all_verified ? 0 : gpusort::bench::exit_failed;
}

}  // namespace

int main(int argc, char** argv)
{
  return gpusort::bench::run_main<options>(
      "codec_bench", usage, argc, argv,
      {"--chunk-keys", "--deal", "--reps", "--types", "--dists"}, set_option, run);
}
