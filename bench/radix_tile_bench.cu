// Onesweep tiles for small chunks (issue 44): microseconds per radix sort of n keys already in GPU
// memory, CUB's own onesweep tiles (SM90, 64-bit keys: 384 threads of 15) against smaller ones
// made by giving CUB's dispatch a policy hub of our own, for the layouts the engine sorts (u32
// and u64 keys, alone and with 4- or 8-byte values) at the chunk sizes of small device budgets
// and beyond. Two timings per case: one sort alone between events (the host's launches of
// CUB's dozen steps included, as a chunk's sort meets them) and a batch of sorts queued back to
// back (the GPU's own time). Every variant's result is checked against std::stable_sort before
// it is timed. Prints a Markdown table; exit code 1 on a wrong result.
//
// Why it exists: a chunk of 262K 64-bit keys is 46 of CUB's tiles on an H200's 132 SMs, and its
// sort took about 100 us, most of it independent of the keys, so smaller tiles looked like a way
// to fill the GPU. Measured (h200x2-20261130-s11/call2): they are slower at every size (262K u64:
// CUB's 107 us a sort in a batch, 2048-key tiles 104-107, 1024-key tiles 121-153, 512-key 196;
// 674K: 130 against 155-313), so the engine keeps CUB's tiles. A pass's time is the chain of
// its tiles' decoupled look-back, which more tiles lengthen; what would shorten a small chunk's
// sort is fewer passes over global memory, not more blocks.
//
//   radix_tile_bench [--sizes 262144,674000,...] [--reps 15] [--batch 16]
#include "bench/bench_cli.hpp"
#include "bench/gpu_timing.hpp"
#include "core/checks.hpp"
#include "pipeline/cuda/resources.hpp"

#include <gpusort/error.hpp>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/dispatch/dispatch_radix_sort.cuh>
#include <cub/device/dispatch/tuning/tuning_radix_sort.cuh>

#include <cuda/std/type_traits>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace {

using gpusort::cuda::cuda_stream;
using gpusort::cuda::device_buffer;

/// A onesweep tile: `threads` a block and `items` a thread, both nominal for 4-byte elements as
/// CUB states them (8-byte keys or values get half the items).
template <int Threads, int Items>
struct onesweep_tile {
  static constexpr int threads = Threads;
  static constexpr int items = Items;
};

/// CUB's radix policy hub for K, V and Offset with `Tile` in place of its onesweep policy, for
/// every architecture (one terminal policy: the kernels are compiled per architecture anyway).
template <typename K, typename V, typename Offset, typename Tile>
struct tiled_radix_policy_hub {
  using cub_hub = cub::detail::radix::policy_hub<K, V, Offset>;
  static constexpr bool keys_only = ::cuda::std::is_same_v<V, cub::NullType>;
  using cub_policy = typename cub_hub::template OnesweepSmallKeyTunedPolicy<
      cub::detail::radix::sm90_small_key_tuning<sizeof(K), keys_only ? 0 : sizeof(V),
                                                sizeof(Offset)>>;
  using dominant = ::cuda::std::_If<(sizeof(V) > sizeof(K)), V, K>;

  struct policy : cub::ChainedPolicy<900, policy, policy>, cub_policy {
    using OnesweepPolicy = cub::AgentRadixSortOnesweepPolicy<
        Tile::threads, Tile::items, dominant, 1, cub::RADIX_RANK_MATCH_EARLY_COUNTS_ANY,
        cub::BLOCK_SCAN_RAKING_MEMOIZE, cub::RADIX_SORT_STORE_DIRECT,
        cub_policy::ONESWEEP_RADIX_BITS>;
  };
  using MaxPolicy = policy;
};

/// Ascending radix sort of `n` keys over double buffers (values move along; V = cub::NullType
/// for keys alone) on bits [0, end_bit), with `Tile`'s onesweep tiles; `d_temp` null: the size
/// query. 32-bit offsets (the bench's sizes are far below 2^31; CUB's own dispatch, variant
/// "cub", takes 64-bit ones, as the engine's radix_sort does).
template <typename Tile, typename K, typename V>
cudaError_t tiled_radix_sort(void* d_temp, std::size_t& temp_bytes, cub::DoubleBuffer<K>& keys,
                             cub::DoubleBuffer<V>& values, std::uint32_t n, int end_bit,
                             cudaStream_t stream)
{
  using hub = tiled_radix_policy_hub<K, V, std::uint32_t, Tile>;
  return cub::DispatchRadixSort<cub::SortOrder::Ascending, K, V, std::uint32_t,
                                cub::detail::identity_decomposer_t,
                                hub>::Dispatch(d_temp, temp_bytes, keys, values, n, 0, end_bit,
                                               /*is_overwrite_okay=*/true, stream);
}


/// A variant: CUB's dispatch (Tile void) or CUB's kernels on `Tile`.
template <typename Tile>
struct variant {
  using tile = Tile;
};

template <typename Tile>
std::string variant_name()
{
  if constexpr (std::is_void_v<Tile>)
    return "cub";
  else
    return std::to_string(Tile::threads) + "x" + std::to_string(Tile::items);
}

template <typename Tile, typename K, typename V>
void sort_once(void* d_temp, std::size_t& bytes, cub::DoubleBuffer<K>& keys,
               cub::DoubleBuffer<V>& values, std::uint64_t n, cudaStream_t s)
{
  if constexpr (std::is_void_v<Tile>) {
    const auto count = static_cast<std::int64_t>(n);
    if constexpr (std::is_same_v<V, cub::NullType>)
      GPUSORT_CUDA_TRY(cub::DeviceRadixSort::SortKeys(d_temp, bytes, keys, count, 0,
                                                      int{sizeof(K) * 8}, s));
    else
      GPUSORT_CUDA_TRY(cub::DeviceRadixSort::SortPairs(d_temp, bytes, keys, values, count, 0,
                                                       int{sizeof(K) * 8}, s));
  } else {
    GPUSORT_CUDA_TRY(tiled_radix_sort<Tile>(
        d_temp, bytes, keys, values, static_cast<std::uint32_t>(n), int{sizeof(K) * 8}, s));
  }
}

struct options {
  std::vector<std::uint64_t> sizes{65'536,    131'072,   262'144,   524'288,    674'000,
                                   1'048'576, 2'097'152, 4'194'304, 16'777'216, 134'217'728};
  int reps{15};
  int batch{16};
};

bool all_ok = true;

/// One layout: every variant at every size.
template <typename K, typename V, typename... Variants>
void run_layout(const char* layout, const options& o)
{
  constexpr bool keys_only = std::is_same_v<V, cub::NullType>;
  using VS = std::conditional_t<keys_only, std::uint32_t, V>;  // storage when keys alone
  cuda_stream stream;
  const cudaStream_t s = stream.value();
  for (const std::uint64_t n : o.sizes) {
    std::mt19937_64 rng{n};
    std::vector<K> keys(n);
    for (auto& k : keys) k = static_cast<K>(rng());
    std::vector<VS> vals(n);
    std::iota(vals.begin(), vals.end(), VS{0});
    // A batch of inputs side by side where they fit in 1 GiB, else one.
    const int batch = n * (sizeof(K) + sizeof(VS)) * o.batch <= (std::uint64_t{1} << 30)
                          ? o.batch
                          : 1;
    device_buffer in_k{n * sizeof(K) * batch}, in_v{n * sizeof(VS) * batch};
    device_buffer k{n * sizeof(K)}, k_alt{n * sizeof(K)}, v{n * sizeof(VS)},
        v_alt{n * sizeof(VS)};
    for (int b = 0; b < batch; ++b) {
      GPUSORT_CUDA_TRY(cudaMemcpy(static_cast<K*>(in_k.data()) + b * n, keys.data(),
                                  n * sizeof(K), cudaMemcpyHostToDevice));
      GPUSORT_CUDA_TRY(cudaMemcpy(static_cast<VS*>(in_v.data()) + b * n, vals.data(),
                                  n * sizeof(VS), cudaMemcpyHostToDevice));
    }
    // std::stable_sort's order, the check of every variant (a radix sort is stable).
    std::vector<std::uint32_t> order;
    if (n <= (std::uint64_t{1} << 24)) {
      order.resize(n);
      std::iota(order.begin(), order.end(), 0U);
      std::stable_sort(order.begin(), order.end(),
                       [&](std::uint32_t a, std::uint32_t b) { return keys[a] < keys[b]; });
    }
    auto one = [&]<typename Variant>() {
      using Tile = typename Variant::tile;
      std::size_t bytes = 0;
      {
        cub::DoubleBuffer<K> kb;
        cub::DoubleBuffer<V> vb;
        sort_once<Tile>(nullptr, bytes, kb, vb, n, s);
      }
      device_buffer temp{bytes + 1};
      auto reset = [&](int b) {
        GPUSORT_CUDA_TRY(cudaMemcpyAsync(k.data(), static_cast<K*>(in_k.data()) + b * n,
                                         n * sizeof(K), cudaMemcpyDeviceToDevice, s));
        GPUSORT_CUDA_TRY(cudaMemcpyAsync(v.data(), static_cast<VS*>(in_v.data()) + b * n,
                                         n * sizeof(VS), cudaMemcpyDeviceToDevice, s));
      };
      bool alt = false;
      auto sort = [&](K* kp, VS* vp) {
        cub::DoubleBuffer<K> kb{kp, static_cast<K*>(k_alt.data())};
        cub::DoubleBuffer<V> vb;
        if constexpr (!keys_only) vb = cub::DoubleBuffer<V>{vp, static_cast<V*>(v_alt.data())};
        std::size_t b2 = bytes;
        sort_once<Tile>(temp.data(), b2, kb, vb, n, s);
        alt = kb.selector != 0;
      };
      // Check first.
      bool ok = true;
      if (!order.empty()) {
        reset(0);
        sort(static_cast<K*>(k.data()), static_cast<VS*>(v.data()));
        GPUSORT_CUDA_TRY(cudaStreamSynchronize(s));
        std::vector<K> got(n);
        std::vector<VS> got_v(n);
        GPUSORT_CUDA_TRY(cudaMemcpy(got.data(), (alt ? k_alt : k).data(), n * sizeof(K),
                                    cudaMemcpyDeviceToHost));
        if (!keys_only)
          GPUSORT_CUDA_TRY(cudaMemcpy(got_v.data(), (alt ? v_alt : v).data(), n * sizeof(VS),
                                      cudaMemcpyDeviceToHost));
        for (std::uint64_t i = 0; i < n && ok; ++i)
          ok = got[i] == keys[order[i]] && (keys_only || got_v[i] == vals[order[i]]);
        all_ok = all_ok && ok;
      }
      const double alone = gpusort::bench::gpu_time_median(
          s, o.reps, [&] { reset(0); },
          [&] { sort(static_cast<K*>(k.data()), static_cast<VS*>(v.data())); });
      // A batch: the sorts queued back to back, each on its own input.
      std::vector<double> batch_times;
      for (int r = 0; r < 3; ++r)
        batch_times.push_back(gpusort::bench::gpu_time_median(s, 1, nullptr, [&] {
          for (int b = 0; b < batch; ++b)
            sort(static_cast<K*>(in_k.data()) + b * n, static_cast<VS*>(in_v.data()) + b * n);
        }) / batch);
      std::sort(batch_times.begin(), batch_times.end());
      std::printf("| %s | %llu | %s | %.1f | %.1f | %.2f | %zu | %s |\n", layout,
                  static_cast<unsigned long long>(n), variant_name<Tile>().c_str(), alone * 1e6,
                  batch_times[1] * 1e6, static_cast<double>(n) / alone / 1e9, bytes,
                  order.empty() ? "not checked" : (ok ? "ok" : "WRONG"));
      std::fflush(stdout);
      // The batch sorted its inputs in place: put them back for the next variant.
      for (int b = 0; b < batch; ++b) {
        GPUSORT_CUDA_TRY(cudaMemcpy(static_cast<K*>(in_k.data()) + b * n, keys.data(),
                                    n * sizeof(K), cudaMemcpyHostToDevice));
        GPUSORT_CUDA_TRY(cudaMemcpy(static_cast<VS*>(in_v.data()) + b * n, vals.data(),
                                    n * sizeof(VS), cudaMemcpyHostToDevice));
      }
    };
    (one.template operator()<Variants>(), ...);
  }
}

template <typename K, typename V>
void run_all(const char* layout, const options& o)
{
  run_layout<K, V, variant<void>, variant<onesweep_tile<256, 16>>, variant<onesweep_tile<256, 8>>,
             variant<onesweep_tile<384, 8>>, variant<onesweep_tile<128, 16>>,
             variant<onesweep_tile<512, 8>>, variant<onesweep_tile<128, 8>>>(layout, o);
}

}  // namespace

int main(int argc, char** argv)
try {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help") {
      std::puts("radix_tile_bench [--sizes N,N,...] [--reps R] [--batch B]\n"
                "us per radix sort of n keys in GPU memory, CUB's tiles against smaller ones,\n"
                "one sort alone and a batch of B back to back; results checked first.");
      return 0;
    }
    if (i + 1 >= argc) throw gpusort::bench::usage_error{a + " needs a value"};
    const std::string value = argv[++i];
    if (a == "--sizes")
      o.sizes = gpusort::bench::parse_counts("--sizes", value);
    else if (a == "--reps")
      o.reps = std::max(1, std::stoi(value));
    else if (a == "--batch")
      o.batch = std::max(1, std::stoi(value));
    else
      throw gpusort::bench::usage_error{"unknown option " + a};
  }
  std::puts("| layout | n | tile (threads x items, 4-byte nominal) | us alone | us in a batch | "
            "Gkeys/s alone | scratch bytes | check |");
  std::puts("| --- | ---: | --- | ---: | ---: | ---: | ---: | --- |");
  run_all<std::uint64_t, cub::NullType>("u64", o);
  run_all<std::uint64_t, std::uint32_t>("u64+u32", o);
  run_all<std::uint64_t, std::uint64_t>("u64+u64", o);
  run_all<std::uint32_t, cub::NullType>("u32", o);
  return all_ok ? 0 : 1;
} catch (const gpusort::bench::usage_error& e) {
  std::fprintf(stderr, "radix_tile_bench: %s (see --help)\n", e.what());
  return 64;
} catch (const std::exception& e) {
  std::fprintf(stderr, "radix_tile_bench: %s\n", e.what());
  return 1;
}
