// Small GPU jobs of mixed layouts reuse what the GPU keeps (issue 25: about 60 ms a small job in
// gpusortd on the H100). Buffers sized exactly for each job were replaced whenever a job needed
// more of any one of them (a pairs job after a keys-only one, another key width or sorter),
// and with them 256 MiB of pinned staging. Counted through the fault seams (core/fault.hpp):
// once a GPU has sorted every kind of job at its largest size, the same jobs in another order
// allocate neither pinned nor device memory and register nothing, and every result is right.
// Skips without a GPU.
#include "gpu_test_support.hpp"

#include "core/fault.hpp"

#include <gpusort/gpusort.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace gpusort {
namespace {

using detail::fault::site;
using test::gpu_test;

/// The kinds of a daemon's small jobs (bench/soak.cpp mixes the same).
enum class kind : std::uint8_t { u32_keys, f64_keys, u64_pairs, i32_u64_pairs, stable_pairs,
                                 argsort_u32 };
constexpr kind all_kinds[] = {kind::u32_keys,      kind::f64_keys,     kind::u64_pairs,
                              kind::i32_u64_pairs, kind::stable_pairs, kind::argsort_u32};

struct small_job {
  kind k;
  std::uint64_t n;
};

/// Keys with ties (a stable order is then visible) from a seeded generator.
template <typename K>
std::vector<K> tied_keys(std::uint64_t n, std::uint64_t seed)
{
  std::mt19937_64 rng{seed};
  std::vector<K> keys(n);
  for (K& k : keys) k = static_cast<K>(static_cast<std::int64_t>(rng() % 1000) - 300);
  return keys;
}

/// Sorts pairs (in place, pageable memory: through the GPU's staging) and checks them: `stable`,
/// exactly the stable order; else keys in order and the same multiset of pairs.
template <typename K, typename V>
void sort_pairs(engine& eng, std::uint64_t n, bool stable, std::uint64_t seed,
                const std::string& what)
{
  std::vector<K> keys = tied_keys<K>(n, seed);
  std::vector<V> values(n);
  std::iota(values.begin(), values.end(), V{0});
  std::vector<std::pair<K, V>> expected(n);
  for (std::uint64_t i = 0; i < n; ++i) expected[i] = {keys[i], values[i]};
  eng.sort({.keys = {keys.data(), n, dtype_of_v<K>}, .values = value_array{values.data(), n,
                                                                           sizeof(V)}},
           {.stable = stable});
  std::vector<std::pair<K, V>> got(n);
  for (std::uint64_t i = 0; i < n; ++i) got[i] = {keys[i], values[i]};
  if (stable) {
    std::stable_sort(expected.begin(), expected.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
  } else {
    ASSERT_TRUE(std::is_sorted(keys.begin(), keys.end())) << what;
    std::sort(expected.begin(), expected.end());
    std::sort(got.begin(), got.end());
  }
  EXPECT_TRUE(got == expected) << what;
}

template <typename K>
void sort_keys(engine& eng, std::uint64_t n, std::uint64_t seed, const std::string& what)
{
  std::vector<K> keys = tied_keys<K>(n, seed);
  std::vector<K> expected = keys;
  std::sort(expected.begin(), expected.end());
  eng.sort({.keys = {keys.data(), n, dtype_of_v<K>}});
  EXPECT_TRUE(keys == expected) << what;
}

void argsort_u32(engine& eng, std::uint64_t n, std::uint64_t seed, const std::string& what)
{
  const std::vector<std::uint32_t> keys = tied_keys<std::uint32_t>(n, seed);
  std::vector<std::int64_t> indices(n, -1);
  eng.argsort({.keys = {const_cast<std::uint32_t*>(keys.data()), n, dtype::u32},
               .indices_out = indices.data()});
  std::vector<std::int64_t> expected(n);
  std::iota(expected.begin(), expected.end(), std::int64_t{0});
  std::stable_sort(expected.begin(), expected.end(),
                   [&](std::int64_t a, std::int64_t b) { return keys[a] < keys[b]; });
  EXPECT_TRUE(indices == expected) << what;
}

void run_job(engine& eng, const small_job& j, std::uint64_t seed)
{
  const std::string what = "kind " + std::to_string(static_cast<int>(j.k)) + ", n " +
                           std::to_string(j.n);
  switch (j.k) {
    case kind::u32_keys: sort_keys<std::uint32_t>(eng, j.n, seed, what); break;
    case kind::f64_keys: sort_keys<double>(eng, j.n, seed, what); break;
    case kind::u64_pairs: sort_pairs<std::uint64_t, std::uint64_t>(eng, j.n, false, seed, what);
      break;
    case kind::i32_u64_pairs:
      sort_pairs<std::int32_t, std::uint64_t>(eng, j.n, false, seed, what);
      break;
    case kind::stable_pairs: sort_pairs<float, std::uint32_t>(eng, j.n, true, seed, what); break;
    case kind::argsort_u32: argsort_u32(eng, j.n, seed, what); break;
  }
}

TEST_F(gpu_test, SmallJobsOfMixedLayoutsReuseThePinnedStagingAndDeviceBuffers)
{
  config cfg;
  cfg.devices = device_selection::listed;
  cfg.gpu_ids = {0};
  engine eng{cfg};
  // 0 and 1 element, primes, and up to 1 MiB of u64 pairs: the small jobs of the GPU soak.
  const std::uint64_t sizes[] = {0, 1, 257, 4099, 30011, 65537};
  std::vector<small_job> jobs;
  for (const std::uint64_t n : sizes)
    for (const kind k : all_kinds) jobs.push_back({k, std::min(n, test::max_test_n())});

  // First pass: in growing size, every kind after every other: what the GPU keeps grows.
  std::uint64_t seed = 1;
  for (const small_job& j : jobs) run_job(eng, j, seed++);

  // Second pass, in another order: a keys-only job after a pairs job and the other way round,
  // large after small. Nothing new to allocate.
  std::shuffle(jobs.begin(), jobs.end(), std::mt19937_64{25});
  const std::int64_t pinned_before = detail::bytes_held(detail::held::pinned);
  const std::int64_t device_before = detail::bytes_held(detail::held::device);
  const detail::fault::armed counting{detail::fault::plan{.group = detail::fault::scope::all}};
  for (const small_job& j : jobs) run_job(eng, j, seed++);
  EXPECT_EQ(detail::fault::calls(site::pinned_alloc), 0U)
      << "pinned allocations in the second pass: " << detail::fault::summary();
  EXPECT_EQ(detail::fault::calls(site::device_alloc), 0U)
      << "device allocations in the second pass: " << detail::fault::summary();
  EXPECT_EQ(detail::fault::calls(site::host_register), 0U)
      << "host registrations in the second pass: " << detail::fault::summary();
  EXPECT_EQ(detail::bytes_held(detail::held::pinned), pinned_before);
  EXPECT_EQ(detail::bytes_held(detail::held::device), device_before);
}

// An out-of-core job between small in-core ones: the ring of chunk buffers and the resident
// sort's buffers stay side by side where the budget holds both (each used to free the other),
// and share the one staging.
TEST_F(gpu_test, OutOfCoreAndInCoreJobsInTurnKeepBothKindsOfBuffers)
{
  config cfg;
  cfg.devices = device_selection::listed;
  cfg.gpu_ids = {0};
  cfg.chunk_bytes = std::uint64_t{1} << 20;  // more than 1 MiB of a job: out of core
  engine eng{cfg};
  const std::uint64_t big = std::min<std::uint64_t>(std::uint64_t{1} << 22, test::max_test_n());
  // The same jobs twice: the out-of-core job's gather tables grow with its slices, which its
  // keys decide.
  const auto in_turn = [&] {
    sort_keys<std::uint64_t>(eng, 5003, 1, "in core");
    sort_keys<std::uint64_t>(eng, big, 2, "out of core");
    sort_pairs<std::uint64_t, std::uint64_t>(eng, 3001, false, 3, "pairs in core");
  };
  in_turn();
  const detail::fault::armed counting{detail::fault::plan{.group = detail::fault::scope::all}};
  in_turn();
  EXPECT_EQ(detail::fault::calls(site::pinned_alloc), 0U) << detail::fault::summary();
  EXPECT_EQ(detail::fault::calls(site::device_alloc), 0U) << detail::fault::summary();
  EXPECT_EQ(detail::fault::calls(site::host_register), 0U) << detail::fault::summary();
}

}  // namespace
}  // namespace gpusort
