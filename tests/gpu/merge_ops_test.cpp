// cuda::count_below_runs, the step of the resident sort's cut (issue 40): for every run and
// probe, the run's keys below the probe and at most it, against std::lower_bound and
// std::upper_bound on the host. Runs of 0, 1, primes and many keys, with repeated values,
// more runs than one launch takes (32), probes at the extremes, on keys in the runs and
// between them, read from and written to mapped pinned memory as the cut does; 32- and 64-bit
// ordered bits. Skipped without a GPU.
#include "gpu_test_support.hpp"
#include "pipeline/cuda/resources.hpp"

#include "core/cuda/merge_ops.cuh"

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace gpusort {
namespace {

using cuda::cuda_stream;
using cuda::device_buffer;
using cuda::pinned_buffer;

template <typename K>
class GpuCountBelowRuns : public test::gpu_test {};
using key_types = ::testing::Types<std::uint32_t, std::uint64_t>;
TYPED_TEST_SUITE(GpuCountBelowRuns, key_types);

template <typename K>
void expect_counts(const std::vector<std::uint64_t>& lengths, std::uint32_t probe_count)
{
  std::mt19937_64 rng{lengths.size() * 131 + probe_count};
  // Values from a small range in every other run: repeated keys, and probes equal to them.
  std::vector<std::vector<K>> runs(lengths.size());
  std::uint64_t total = 0;
  for (std::size_t q = 0; q < runs.size(); ++q) {
    runs[q].resize(lengths[q]);
    for (K& k : runs[q]) k = q % 2 == 0 ? static_cast<K>(rng()) : static_cast<K>(rng() % 50);
    std::sort(runs[q].begin(), runs[q].end());
    total += lengths[q];
  }
  std::vector<std::uint64_t> probes(probe_count);
  for (std::uint32_t t = 0; t < probe_count; ++t) {
    switch (t % 5) {
      case 0: probes[t] = 0; break;
      case 1: probes[t] = std::numeric_limits<K>::max(); break;
      case 2: probes[t] = rng() % 50; break;
      case 3: probes[t] = static_cast<K>(rng()); break;
      default: {
        const std::vector<K>& r = runs[t % runs.size()];
        probes[t] = r.empty() ? 7 : r[rng() % r.size()];
      }
    }
  }

  device_buffer d_keys{std::max<std::uint64_t>(total, 1) * sizeof(K)};
  std::vector<cuda::key_run> table;
  std::uint64_t at = 0;
  for (const std::vector<K>& r : runs) {
    if (!r.empty()) {
      ASSERT_EQ(test::copy_to_gpu(d_keys.data<K>() + at, r.data(), r.size() * sizeof(K)),
                cudaSuccess);
    }
    table.push_back({d_keys.data<K>() + at, r.size()});
    at += r.size();
  }
  // Probes, then each run's counts (below, then at most) and a marker word past them, in
  // mapped pinned memory, as the resident sort lays out its words; a stride one word wider
  // than the counts leaves a gap that must stay untouched.
  const std::uint64_t stride = 2 * std::uint64_t{probe_count} + 1;
  const std::uint64_t words = probe_count + runs.size() * stride + 1;
  pinned_buffer words_host{words * sizeof(std::uint64_t),
                           cudaHostAllocMapped | cudaHostAllocPortable};
  auto* w = words_host.data<std::uint64_t>();
  std::fill(w, w + words, ~std::uint64_t{0} - 1);
  std::copy(probes.begin(), probes.end(), w);
  void* mapped = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(&mapped, w, 0), cudaSuccess);
  auto* d_words = static_cast<std::uint64_t*>(mapped);
  cuda_stream stream;
  cuda::count_below_runs(table, sizeof(K), d_words, d_words + probe_count, stride, probe_count,
                         stream.value());
  stream.synchronize();

  for (std::size_t q = 0; q < runs.size(); ++q) {
    const std::uint64_t* counts = w + probe_count + q * stride;
    for (std::uint32_t t = 0; t < probe_count; ++t) {
      const auto v = static_cast<K>(probes[t]);
      const auto below = static_cast<std::uint64_t>(
          std::lower_bound(runs[q].begin(), runs[q].end(), v) - runs[q].begin());
      const auto at_most = static_cast<std::uint64_t>(
          std::upper_bound(runs[q].begin(), runs[q].end(), v) - runs[q].begin());
      ASSERT_EQ(counts[t], below) << "run " << q << " of " << runs[q].size() << ", probe " << v;
      ASSERT_EQ(counts[probe_count + t], at_most)
          << "run " << q << " of " << runs[q].size() << ", probe " << v;
    }
    ASSERT_EQ(counts[2 * probe_count], ~std::uint64_t{0} - 1) << "the gap after run " << q;
  }
  ASSERT_EQ(w[words - 1], ~std::uint64_t{0} - 1) << "the word past the last run";
}

TYPED_TEST(GpuCountBelowRuns, CountsKeysBelowAndAtMostEveryProbeInEveryRun)
{
  expect_counts<TypeParam>({0}, 5);
  expect_counts<TypeParam>({1, 2, 3}, 1);
  expect_counts<TypeParam>({97, 0, 4099, 1, 100'003, 65'536}, 37);
  // 41 runs: two launches, the second at run 32.
  std::vector<std::uint64_t> many;
  for (std::uint64_t q = 0; q < 41; ++q) many.push_back(q * q * 7 + q % 3);
  expect_counts<TypeParam>(many, 90);
}

}  // namespace
}  // namespace gpusort
