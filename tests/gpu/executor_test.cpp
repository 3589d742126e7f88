// The engine on GPUs: every key type, order and distribution through the two-round pipeline,
// pairs, pinned and pageable inputs, several GPUs, a budget above the GPU's memory, and an array
// past 2^32 elements. Checked by the order-plus-fingerprint verifier; skipped without a GPU.
#include "gpu_test_support.hpp"
#include "resident_gpus.hpp"
#include "tests/support/captured_log.hpp"
#include "tests/support/rows_reference.hpp"
#include "tests/support/stable_reference.hpp"

#include "core/generate.hpp"
#include "core/keys.hpp"
#include "core/verify.hpp"
#include "core/cuda/chunk_ops.cuh"
#include "core/cuda/sample_sort.cuh"
#include "core/fault.hpp"
#include "pipeline/cuda/cuda_device.hpp"
#include "pipeline/cuda/resident.hpp"
#include "pipeline/file_window.hpp"

#include <gpusort/gpusort.hpp>
#include <gpusort/rows.hpp>

#include <gtest/gtest.h>

#include <linux/magic.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <type_traits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpusort {
namespace {

using test::gpu_test;

/// GPUSORT_TEST_SMALL=1: only sizes up to about ten thousand, for compute-sanitizer's memcheck
/// and racecheck, which run kernels tens of times slower.
bool small_only() { return std::getenv("GPUSORT_TEST_SMALL") != nullptr; }

/// A GPU configuration whose chunk limit forces at least 16 chunks for n elements and whose
/// budget leaves a capacity of about n/8 elements, so that heavy duplicates must compensate.
/// The budget covers what cuda_device reserves besides chunks: its margin and the sort's scratch
/// for that capacity (the larger of the two in-core sorters'). Scratch for all n elements, as
/// this once reserved, left a capacity of a third of n or more, and grew with the sorters'
/// scratch until no chunk of detdupes overflowed.
config forced_out_of_core(std::uint64_t n, unsigned key_bytes, unsigned value_bytes = 0)
{
  const std::uint64_t element_bytes = key_bytes + value_bytes;
  const std::uint64_t capacity = std::max<std::uint64_t>(n / 8, 4096);
  config cfg;
  cfg.devices = device_selection::listed;
  cfg.gpu_ids = {0};
  cfg.chunk_bytes = std::max<std::uint64_t>(4096, (n + 15) / 16 * element_bytes);
  const std::uint64_t scratch =
      std::max(cuda::radix_sort_scratch_bytes(capacity, key_bytes, value_bytes),
               cuda::sample_sort_scratch_bytes(capacity, key_bytes, value_bytes));
  cfg.device_memory_budget =
      detail::ring_budget(key_bytes, value_bytes, capacity, scratch);
  return cfg;
}

/// Inputs that must overflow a final chunk at a capacity of n/8: a value with more than n/8
/// copies (fewunique's 16 values have n/16 each, so it need not compensate here).
bool heavy(distribution d)
{
  return d == distribution::zero || d == distribution::detdupes;
}

/// Copies of the most frequent key of a heavy distribution: all of zero's, half of detdupes'.
std::uint64_t heaviest(distribution d, std::uint64_t n)
{
  return d == distribution::zero ? n : n / 2;
}

/// The capacity GPU 0 grants keys of `key_bytes` under `cfg`'s budget: at least n/8 with
/// forced_out_of_core, more where the buffers' whole pages hold more (small n).
std::uint64_t gpu_capacity(const config& cfg, std::uint32_t key_bytes)
{
  const detail::cuda_device dev{
      detail::cuda_device_options{.id = 0, .budget = cfg.device_memory_budget}};
  return dev.capacity(detail::element_layout{.key_bytes = key_bytes}).elements;
}

template <typename K>
class GpuEngineKeys : public gpu_test {};
using key_types = ::testing::Types<std::uint32_t, std::int32_t, std::uint64_t, std::int64_t,
                                   float, double>;
TYPED_TEST_SUITE(GpuEngineKeys, key_types);

TYPED_TEST(GpuEngineKeys, EveryDistributionAndOrderOutOfCoreAndInCore)
{
  using K = TypeParam;
  for (const distribution dist : all_distributions) {
    if (!applies_to(dist, dtype_of_v<K>)) continue;
    for (const order dir : {order::ascending, order::descending}) {
      for (const std::uint64_t n : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{1000},
                                    std::uint64_t{999'983}, std::uint64_t{3'000'017}}) {
        if (small_only() && n > 10'000) continue;
        for (const bool forced : {true, false}) {
          SCOPED_TRACE(std::string{name_of(dist)} + (dir == order::ascending ? " asc" : " desc") +
                       " n=" + std::to_string(n) + (forced ? " forced" : " default"));
          std::vector<K> keys(n);
          generate(std::span<K>{keys}, dist, n + 3);
          const key_array view{keys.data(), n, dtype_of_v<K>};
          const fingerprint before = fingerprint_of(view);
          config cfg = forced ? forced_out_of_core(n, sizeof(K)) : config{};
          const sort_report r = engine{cfg}.sort(sort_job{.keys = view}, {.direction = dir});
          const verify_result v = verify(view, std::nullopt, dir, before);
          ASSERT_TRUE(v.ok) << v.message << " (d=" << r.chunks << ")";
          EXPECT_EQ(r.engine, "gpu-dsps");
          if (forced && n >= 999'983) {
            EXPECT_EQ(r.rounds, 2);
            EXPECT_GE(r.chunks, 16U);
            if (heavy(dist) && heaviest(dist, n) > gpu_capacity(cfg, sizeof(K))) {
              // DSPS compensates; the scattered rounds give the key a bucket of its own.
              EXPECT_GT(r.compensated_chunks + r.equal_buckets, 0U);
            }
          }
          if (!forced && n > 0) {
            EXPECT_EQ(r.rounds, 1);
          }
        }
      }
    }
  }
}

TYPED_TEST(GpuEngineKeys, EveryInCoreEngineOutOfCoreAndInCore)
{
  using K = TypeParam;
  for (const incore_engine sorter : {incore_engine::sample, incore_engine::radix}) {
    for (const distribution dist : {distribution::uniform, distribution::gaussian,
                                    distribution::zero, distribution::detdupes,
                                    distribution::sorted, distribution::fewunique}) {
      if (!applies_to(dist, dtype_of_v<K>)) continue;
      for (const std::uint64_t n : {std::uint64_t{65'537}, std::uint64_t{3'000'017}}) {
        if (small_only() && n > 10'000) continue;
        for (const bool forced : {true, false}) {
          SCOPED_TRACE(std::string{name_of(dist)} + " n=" + std::to_string(n) +
                       (sorter == incore_engine::sample ? " sample" : " radix") +
                       (forced ? " forced" : " default"));
          std::vector<K> keys(n);
          generate(std::span<K>{keys}, dist, n + 5);
          const key_array view{keys.data(), n, dtype_of_v<K>};
          const fingerprint before = fingerprint_of(view);
          config cfg = forced ? forced_out_of_core(n, sizeof(K)) : config{};
          cfg.incore = sorter;
          engine{cfg}.sort(sort_job{.keys = view}, {.direction = order::descending});
          const verify_result v = verify(view, std::nullopt, order::descending, before);
          ASSERT_TRUE(v.ok) << v.message;
        }
      }
    }
  }
}

template <typename K, typename V>
void check_pairs(const config& cfg, std::uint64_t n, distribution dist, order dir, bool separate)
{
  SCOPED_TRACE(std::string{name_of(dist)} + " n=" + std::to_string(n) + " vb=" +
               std::to_string(sizeof(V)));
  std::vector<K> keys(n), kout(separate ? n : 0);
  std::vector<V> values(n), vout(separate ? n : 0);
  generate(std::span<K>{keys}, dist, 17);
  generate_values(value_array{values.data(), n, sizeof(V)}, 18);
  const std::vector<K> original_keys = keys;
  const key_array kv{keys.data(), n, dtype_of_v<K>};
  const value_array vv{values.data(), n, sizeof(V)};
  const fingerprint before = fingerprint_of(kv, vv);
  sort_job job{.keys = kv, .values = vv};
  if (separate) {
    job.keys_out = kout.data();
    job.values_out = vout.data();
  }
  engine{cfg}.sort(job, {.direction = dir});
  const verify_result v =
      verify(key_array{separate ? kout.data() : keys.data(), n, dtype_of_v<K>},
             value_array{separate ? vout.data() : values.data(), n, sizeof(V)}, dir, before);
  ASSERT_TRUE(v.ok) << v.message;
  if (separate) {
    EXPECT_EQ(std::memcmp(keys.data(), original_keys.data(), n * sizeof(K)), 0);
  }
}

TYPED_TEST(GpuEngineKeys, PairsTravelTogether)
{
  using K = TypeParam;
  for (const distribution dist : {distribution::uniform, distribution::zero,
                                  distribution::detdupes, distribution::sorted}) {
    const std::uint64_t n = 2'000'003;
    check_pairs<K, std::uint32_t>(forced_out_of_core(n, sizeof(K), 4), n, dist,
                                  order::ascending, false);
    check_pairs<K, std::uint64_t>(forced_out_of_core(n, sizeof(K), 8), n, dist,
                                  order::descending, true);
    check_pairs<K, std::uint64_t>(config{}, n, dist, order::ascending, true);
  }
}

/// Registered bytes an engine of `cfg` holds after sorting n keys of K out of core (its
/// staging, and a pinned round-1 buffer where it keeps one).
template <typename K>
std::int64_t registered_after_a_job(config cfg, std::uint64_t n)
{
  const std::int64_t before = detail::bytes_held(detail::held::registered);
  std::vector<K> keys(n);
  generate(std::span<K>{keys}, distribution::uniform, 41);
  engine eng{cfg};
  eng.sort(sort_job{.keys = key_array{keys.data(), n, dtype_of_v<K>}});
  return detail::bytes_held(detail::held::registered) - before;
}

/// A pageable round-1 buffer (config round1_buffer, what `gpusort sort --local` keeps): round 1
/// stores the runs through the staging, and round 2 gathers each task's slices into whole
/// pinned pieces (staging::gather_in), raw and compressed (decoded on the host), keys alone and
/// pairs, in place and into separate outputs. Nothing of it is registered: an engine that pins
/// the buffer holds at least its bytes more.
TYPED_TEST(GpuEngineKeys, APageableRound1BufferIsStagedBothWays)
{
  using K = TypeParam;
  for (const run_compression compress : {run_compression::off, run_compression::on}) {
    for (const distribution dist : {distribution::uniform, distribution::zero,
                                    distribution::detdupes, distribution::sorted,
                                    distribution::fewunique, distribution::gaussian}) {
      if (!applies_to(dist, dtype_of_v<K>)) continue;
      for (const order dir : {order::ascending, order::descending}) {
        for (const std::uint64_t n : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{4099},
                                      std::uint64_t{999'983}, std::uint64_t{3'000'017}}) {
          if (small_only() && n > 10'000) continue;
          SCOPED_TRACE(std::string{name_of(dist)} + (dir == order::ascending ? " asc" : " desc") +
                       " n=" + std::to_string(n) +
                       (compress == run_compression::on ? " compressed" : " raw"));
          std::vector<K> keys(n), out(n);
          generate(std::span<K>{keys}, dist, n + 43);
          const std::vector<K> original = keys;
          const key_array view{keys.data(), n, dtype_of_v<K>};
          const fingerprint before = fingerprint_of(view);
          config cfg = forced_out_of_core(n, sizeof(K));
          cfg.round1_buffer = round1_memory::pageable;
          cfg.compress_runs = compress;
          const bool separate = n % 2 == 1;
          const sort_report r =
              engine{cfg}.sort(sort_job{.keys = view, .keys_out = separate ? out.data() : nullptr},
                               {.direction = dir});
          const verify_result v =
              verify(key_array{separate ? out.data() : keys.data(), n, dtype_of_v<K>},
                     std::nullopt, dir, before);
          ASSERT_TRUE(v.ok) << v.message << " (d=" << r.chunks << ")";
          if (separate) {
            EXPECT_EQ(std::memcmp(keys.data(), original.data(), n * sizeof(K)), 0);
          }
          if (n >= 999'983) {
            EXPECT_EQ(r.rounds, 2);
          }
        }
      }
    }
  }
  if (small_only()) return;
  for (const distribution dist : {distribution::uniform, distribution::detdupes}) {
    const std::uint64_t n = 2'000'003;
    config cfg = forced_out_of_core(n, sizeof(K), 8);
    cfg.round1_buffer = round1_memory::pageable;
    check_pairs<K, std::uint64_t>(cfg, n, dist, order::descending, true);
    check_pairs<K, std::uint64_t>(cfg, n, dist, order::ascending, false);
  }
  const std::uint64_t n = 3'000'017;
  config pinned = forced_out_of_core(n, sizeof(K));
  pinned.round1_buffer = round1_memory::pinned;
  config pageable = pinned;
  pageable.round1_buffer = round1_memory::pageable;
  EXPECT_GE(registered_after_a_job<K>(pinned, n) - registered_after_a_job<K>(pageable, n),
            static_cast<std::int64_t>(n * sizeof(K)));
  // by-job (what --local runs): this job's chunks are far below 32 MiB, so it pins.
  config by_job = pinned;
  by_job.round1_buffer = round1_memory::by_job;
  EXPECT_GE(registered_after_a_job<K>(by_job, n) - registered_after_a_job<K>(pageable, n),
            static_cast<std::int64_t>(n * sizeof(K)));
}

template <typename K, typename V>
void check_resident(const std::vector<detail::cuda_device*>& gpus, std::uint64_t n,
                    distribution dist, order dir, bool pinned, bool separate)
{
  constexpr unsigned vb = std::is_same_v<V, detail::no_value> ? 0 : sizeof(V);
  SCOPED_TRACE(std::string{name_of(dist)} + " n=" + std::to_string(n) + " vb=" +
               std::to_string(vb) + " gpus=" + std::to_string(gpus.size()) +
               (pinned ? " pinned" : " pageable") + (separate ? " separate" : " in place") +
               (dir == order::ascending ? " asc" : " desc"));
  const std::uint64_t bytes = n * (sizeof(K) + vb);
  detail::host_buffer in = pinned ? detail::pinned_host_buffer(bytes) : detail::host_buffer{bytes};
  detail::host_buffer out = separate ? (pinned ? detail::pinned_host_buffer(bytes)
                                               : detail::host_buffer{bytes})
                                     : detail::host_buffer{};
  auto* keys = in.as<K>();
  void* values = vb > 0 ? static_cast<void*>(in.as<char>() + n * sizeof(K)) : nullptr;
  generate(std::span<K>{keys, n}, dist, n + 29);
  const key_array kv{keys, n, dtype_of_v<K>};
  std::optional<value_array> vv;
  if (vb > 0) {
    vv = value_array{values, n, vb};
    generate_values(*vv, 31);
  }
  const fingerprint before = fingerprint_of(kv, vv);
  detail::job_arrays a{.src_keys = keys, .src_values = values, .dst_keys = keys,
                       .dst_values = values, .n = n};
  if (separate) {
    a.dst_keys = out.data();
    a.dst_values = vb > 0 ? static_cast<void*>(out.as<char>() + n * sizeof(K)) : nullptr;
  }
  const detail::element_layout layout{.type = dtype_of_v<K>, .direction = dir,
                                      .key_bytes = sizeof(K), .value_bytes = vb};
  const sort_options options{.direction = dir};
  detail::job_context ctx{options, layout.bytes()};
  detail::sort_resident(a, layout, gpus, ctx);
  const verify_result v =
      verify(key_array{a.dst_keys, n, dtype_of_v<K>},
             vb > 0 ? std::optional<value_array>{value_array{a.dst_values, n, vb}} : std::nullopt,
             dir, before);
  ASSERT_TRUE(v.ok) << v.message;
  if (separate) {
    EXPECT_TRUE(fingerprint_of(kv, vv) == before);  // the input is never written
  }
}

TEST_F(gpu_test, ResidentSortMergesPiecesAndSplitsTheLastMerge)
{
  for (const std::size_t count : {std::size_t{1}, std::size_t{2}, std::size_t{4}}) {
    if (test::probed_gpus().gpus.size() < count) continue;
    const auto owned = test::small_piece_gpus(count);
    std::vector<detail::cuda_device*> gpus;
    for (const auto& g : owned) gpus.push_back(g.get());
    for (const distribution dist : {distribution::uniform, distribution::zero,
                                    distribution::detdupes, distribution::sorted,
                                    distribution::reverse, distribution::fewunique}) {
      // 1 element per GPU at least; piece counts 1 to 7, odd ones included; range splits.
      for (const std::uint64_t n : {std::uint64_t{4}, std::uint64_t{999}, std::uint64_t{3'001},
                                    std::uint64_t{7'919}, std::uint64_t{1'000'003}}) {
        if (small_only() && n > 10'000) continue;
        check_resident<std::uint64_t, detail::no_value>(gpus, n, dist, order::ascending, true,
                                                        false);
        check_resident<std::int32_t, detail::no_value>(gpus, n, dist, order::descending, false,
                                                       true);
        check_resident<double, std::uint32_t>(gpus, n, dist, order::ascending, false, false);
        check_resident<std::uint32_t, std::uint64_t>(gpus, n, dist, order::descending, true,
                                                     true);
      }
    }
    check_resident<float, detail::no_value>(gpus, small_only() ? 9'001 : 2'000'001,
                                            distribution::nanmix, order::descending, true, false);
  }
}

TEST_F(gpu_test, TwoGpusSortAJobThatFitsInOneRoundTrip)
{
  if (test::probed_gpus().gpus.size() < 2) GTEST_SKIP() << "needs two GPUs";
  const std::uint64_t n = 60'000'000;  // 480 MB: a share for each GPU
  detail::host_buffer in = detail::pinned_host_buffer(n * 8);
  auto* keys = in.as<std::uint64_t>();
  generate(std::span<std::uint64_t>{keys, n}, distribution::staggered, 44);
  const key_array view{keys, n, dtype::u64};
  const fingerprint before = fingerprint_of(view);
  config cfg;
  cfg.devices = device_selection::listed;
  cfg.gpu_ids = {0, 1};
  const sort_report r = engine{cfg}.sort(sort_job{.keys = view}, {.profile = true});
  EXPECT_EQ(r.rounds, 1);
  EXPECT_TRUE(verify(view, std::nullopt, order::ascending, before).ok);
  std::size_t sorting_devices = 0;
  for (const stage_profile& p : r.profile) sorting_devices += p.stage == "sort" ? 1 : 0;
  EXPECT_EQ(sorting_devices, 2U);
}

TEST_F(gpu_test, ProfileTellsWhereEachStageSpentItsTime)
{
  const std::uint64_t n = 20'000'000;
  std::vector<std::uint64_t> keys(n);
  for (const bool forced : {false, true}) {
    generate(std::span<std::uint64_t>{keys}, distribution::uniform, 45);
    config cfg = forced ? forced_out_of_core(n, 8) : config{};
    const sort_report r = engine{cfg}.sort(std::span<std::uint64_t>{keys}, {.profile = true});
    EXPECT_EQ(r.rounds, forced ? 2 : 1);
    for (const int round : {1, 2}) {
      if (round > r.rounds) continue;
      for (const char* stage : {"copy in", "sort", "copy out", "round"}) {
        const auto it = std::find_if(r.profile.begin(), r.profile.end(), [&](const auto& p) {
          return p.round == round && p.stage == stage;
        });
        ASSERT_NE(it, r.profile.end()) << stage << " of round " << round;
        EXPECT_GT(it->busy_seconds, 0.0) << stage;
        EXPECT_LE(it->first_start, it->last_end) << stage;
        EXPECT_GT(it->bytes, 0U) << stage;
      }
    }
    // The timeline: one step per ring slot of each GPU stage, within the stage's span, summing
    // to its busy time, and the rounds in order on the job's clock.
    double round_1_start = -1;
    for (const stage_profile& p : r.profile) {
      if (p.stage == "round" && p.round == 1) round_1_start = p.round_start;
      if (p.stage == "round" && p.round == 2) {
        EXPECT_GT(p.round_start, round_1_start);
      }
      if (p.device == "all" || p.device == "host") {
        EXPECT_TRUE(p.steps.empty()) << p.stage;
        continue;
      }
      // A step a ring slot: small chunks (the scattered rounds' small buckets) share one.
      ASSERT_GE(p.steps.size(), 1U) << p.stage << " of round " << p.round;
      ASSERT_LE(p.steps.size(), p.chunks) << p.stage << " of round " << p.round;
      EXPECT_GE(p.round_start, 0.0) << p.stage;
      double busy = 0;
      for (const auto& [start, end] : p.steps) {
        EXPECT_LE(p.first_start, start) << p.stage;
        EXPECT_LE(start, end) << p.stage;
        EXPECT_LE(end, p.last_end) << p.stage;
        busy += end - start;
      }
      EXPECT_NEAR(busy, p.busy_seconds, 1e-9 + 1e-9 * p.busy_seconds) << p.stage;
    }
  }
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
}

TEST_F(gpu_test, AJobThatFitsReportsProgressWhileItRuns)
{
  // Pageable keys, so that the copies are staged and the progress follows them; 20M keys make
  // several pieces. Events climb, end at the total, and some come before the end.
  const std::uint64_t n = small_only() ? 3'000'000 : 20'000'000;
  std::vector<std::uint64_t> keys(n);
  generate(std::span<std::uint64_t>{keys}, distribution::uniform, 46);
  std::vector<progress_event> events;
  const sort_report r = engine{config{}}.sort(
      std::span<std::uint64_t>{keys},
      sort_options{.on_progress = [&](const progress_event& e) { events.push_back(e); }});
  ASSERT_EQ(r.rounds, 1);
  ASSERT_FALSE(events.empty());
  std::uint64_t last = 0, before_end = 0;
  for (const progress_event& e : events) {
    EXPECT_EQ(e.round, 1);
    EXPECT_EQ(e.rounds, 1);
    EXPECT_EQ(e.bytes_total, n * 8);
    EXPECT_GE(e.bytes_done, last);
    last = e.bytes_done;
    if (e.bytes_done > 0 && e.bytes_done < e.bytes_total) ++before_end;
  }
  EXPECT_EQ(last, n * 8);
  EXPECT_GT(before_end, 0U) << "only the end was reported";
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
}

TEST_F(gpu_test, PinnedInputsCopyDirectly)
{
  const std::uint64_t n = 50'000'000;
  detail::host_buffer in = detail::pinned_host_buffer(n * 8);
  detail::host_buffer out = detail::pinned_host_buffer(n * 8);
  auto* keys = in.as<std::uint64_t>();
  generate(std::span<std::uint64_t>{keys, n}, distribution::gaussian, 4);
  const key_array view{keys, n, dtype::u64};
  const fingerprint before = fingerprint_of(view);
  const sort_report r = engine{forced_out_of_core(n, 8)}.sort(
      sort_job{.keys = view, .keys_out = out.data()});
  EXPECT_GE(r.chunks, 16U);
  EXPECT_TRUE(verify(key_array{out.data(), n, dtype::u64}, std::nullopt, order::ascending,
                     before)
                  .ok);
}

/// Arrays in files (file_array) through the GPU's staging: read into the pinned pieces, written
/// from them, in one round trip and out of core, in place and into another file; all-equal
/// keys make round 2 write compensated tails into the output file.
template <typename K, typename V>
void check_files(std::uint64_t n, distribution dist, bool out_of_core, bool separate,
                 const std::string& folder = "/tmp")
{
  constexpr unsigned vb = std::is_same_v<V, detail::no_value> ? 0 : sizeof(V);
  SCOPED_TRACE(std::string{name_of(dist)} + " n=" + std::to_string(n) + " vb=" +
               std::to_string(vb) + (out_of_core ? " out of core" : " in core") +
               (separate ? " separate" : " in place"));
  std::vector<K> keys(n);
  std::vector<std::uint64_t> values(vb > 0 ? n : 0);
  generate(std::span<K>{keys}, dist, n + 41);
  std::optional<value_array> vv;
  if (vb > 0) {
    vv = value_array{values.data(), n, vb};
    generate_values(*vv, 43);
  }
  const fingerprint before = fingerprint_of(key_array{keys.data(), n, dtype_of_v<K>}, vv);
  std::string name = folder + "/gpusort-gpu-file-XXXXXX";
  const int fd = ::mkstemp(name.data());
  ASSERT_GE(fd, 0);
  ::unlink(name.c_str());
  // Input keys at 24, values behind them; outputs after both, the file sized first (as the CLI
  // does, so that a tmpfs output's pages are made as 2 MiB pages and locked for the GPU).
  const std::uint64_t kbytes = n * sizeof(K), vbytes = n * vb, at = 24;
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(at + 2 * (kbytes + vbytes))), 0);
  ASSERT_EQ(::pwrite(fd, keys.data(), kbytes, at), static_cast<ssize_t>(kbytes));
  if (vb > 0) {
    ASSERT_EQ(::pwrite(fd, values.data(), vbytes, at + kbytes), static_cast<ssize_t>(vbytes));
  }
  const std::uint64_t out_at = at + kbytes + vbytes;
  {
    const file_array kin{fd, at, kbytes, "keys"}, vin{fd, at + kbytes, vbytes, "values"};
    const file_array kout{fd, out_at, kbytes, "keys out"};
    const file_array vout{fd, out_at + kbytes, vbytes, "values out"};
    sort_job job{.keys = {kin.data(), n, dtype_of_v<K>}};
    if (vb > 0) job.values = value_array{vin.data(), n, vb};
    if (separate) {
      job.keys_out = kout.data();
      if (vb > 0) job.values_out = vout.data();
    }
    config cfg = out_of_core ? forced_out_of_core(n, sizeof(K), vb) : config{};
    cfg.devices = device_selection::listed;
    cfg.gpu_ids = {0};
    const sort_report r = engine{cfg}.sort(job);
    EXPECT_EQ(r.rounds, out_of_core ? 2 : 1);
  }
  const std::uint64_t result_at = separate ? out_at : at;
  std::vector<K> sorted(n);
  std::vector<std::uint64_t> sorted_values(vb > 0 ? n : 0);
  ASSERT_EQ(::pread(fd, sorted.data(), kbytes, result_at), static_cast<ssize_t>(kbytes));
  if (vb > 0) {
    ASSERT_EQ(::pread(fd, sorted_values.data(), vbytes, result_at + kbytes),
              static_cast<ssize_t>(vbytes));
  }
  if (separate) {
    std::vector<K> left(n);
    ASSERT_EQ(::pread(fd, left.data(), kbytes, at), static_cast<ssize_t>(kbytes));
    EXPECT_EQ(std::memcmp(left.data(), keys.data(), kbytes), 0) << "the input file changed";
  }
  ::close(fd);
  std::optional<value_array> sv;
  if (vb > 0) sv = value_array{sorted_values.data(), n, vb};
  const verify_result v =
      verify(key_array{sorted.data(), n, dtype_of_v<K>}, sv, order::ascending, before);
  ASSERT_TRUE(v.ok) << v.message;
}

TEST_F(gpu_test, ArraysInFilesGoThroughTheStaging)
{
  const std::uint64_t big = small_only() ? 10'007 : 20'000'003;
  for (const bool out_of_core : {false, true}) {
    for (const bool separate : {false, true}) {
      check_files<std::uint64_t, detail::no_value>(big, distribution::uniform, out_of_core,
                                                   separate);
      check_files<float, detail::no_value>(big, distribution::zero, out_of_core, separate);
      check_files<std::int32_t, std::uint64_t>(big / 3, distribution::fewunique, out_of_core,
                                               separate);
      check_files<double, std::uint64_t>(1, distribution::uniform, false, separate);
    }
  }
}

/// A file's keys take DSPS on GPUs where the same keys in memory take the scattered rounds
/// (their sample would read the file a key at a time), and its round-1 buffer is the data's
/// size, not the regions': the memory estimate says so and the output is right.
TEST_F(gpu_test, AFileInputRunsDspsWithARoundOneBufferOfItsSize)
{
  const std::uint64_t n = small_only() ? 1 << 20 : 4 << 20;
  std::vector<std::uint64_t> keys(n);
  generate(std::span<std::uint64_t>{keys}, distribution::uniform, 57);
  const fingerprint before = fingerprint_of(key_array{keys.data(), n, dtype::u64});
  std::string name = "/tmp/gpusort-gpu-scatter-file-XXXXXX";
  const int fd = ::mkstemp(name.data());
  ASSERT_GE(fd, 0);
  ::unlink(name.c_str());
  const std::uint64_t bytes = n * 8;
  ASSERT_EQ(::ftruncate(fd, static_cast<off_t>(2 * bytes)), 0);
  ASSERT_EQ(::pwrite(fd, keys.data(), bytes, 0), static_cast<ssize_t>(bytes));
  config cfg;
  cfg.devices = device_selection::listed;
  cfg.gpu_ids = {0};
  cfg.chunk_bytes = bytes / 600;  // d about 600: past min_chunks (512), as a small budget cuts
  engine e{cfg};
  std::vector<std::uint64_t> in_memory = keys;
  const sort_job memory_job{.keys = {in_memory.data(), n, dtype::u64}};
  const std::uint64_t memory_bytes = e.estimate_memory(memory_job).fast_bytes;
  const sort_report rm = e.sort(memory_job);
  if (rm.scatter_buckets == 0) {
    ::close(fd);
    GTEST_SKIP() << "the scattered rounds are off here (GPUSORT_SCATTER)";
  }
  EXPECT_GE(rm.chunks, 512U);
  {
    const file_array in{fd, 0, bytes, "keys"}, out{fd, bytes, bytes, "keys out"};
    const sort_job file_job{.keys = {in.data(), n, dtype::u64}, .keys_out = out.data()};
    const std::uint64_t file_bytes = e.estimate_memory(file_job).fast_bytes;
    // The regions' slack is about 19% of the data; DSPS's round-1 buffer has none.
    EXPECT_GE(memory_bytes, file_bytes + bytes / 8)
        << "in memory " << memory_bytes << " B, from a file " << file_bytes << " B";
    const sort_report rf = e.sort(file_job);
    EXPECT_EQ(rf.scatter_buckets, 0U);
    EXPECT_EQ(rf.rounds, 2U);
    EXPECT_EQ(rf.chunks, rm.chunks);
  }
  std::vector<std::uint64_t> sorted(n);
  ASSERT_EQ(::pread(fd, sorted.data(), bytes, static_cast<off_t>(bytes)),
            static_cast<ssize_t>(bytes));
  ::close(fd);
  const verify_result v =
      verify(key_array{sorted.data(), n, dtype::u64}, std::nullopt, order::ascending, before);
  EXPECT_TRUE(v.ok) << v.message;
  EXPECT_EQ(sorted, in_memory) << "the same keys sort alike by either path";
}

/// Outputs in tmpfs: the copy engines write the locked 64 MiB units of their 2 MiB pages
/// directly (pipeline/file_window.hpp) and the staging the rest, in one round trip and out of
/// core, keys alone and pairs, with compensated tails; every result checked, every lock undone.
/// GPUSORT_OUTPUT_LOCK as `value` (null: unset) while it lives: the engines made meanwhile read it.
class output_lock_setting {
 public:
  explicit output_lock_setting(const char* value)
  {
    if (const char* v = std::getenv(name)) before_ = v;
    if (value != nullptr)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~output_lock_setting()
  {
    if (before_)
      ::setenv(name, before_->c_str(), 1);
    else
      ::unsetenv(name);
  }
  output_lock_setting(const output_lock_setting&) = delete;
  output_lock_setting& operator=(const output_lock_setting&) = delete;

 private:
  static constexpr const char* name = "GPUSORT_OUTPUT_LOCK";
  std::optional<std::string> before_;
};

/// The tmpfs outputs of every kind of job, fitting and out of core: staged by default, written
/// by the copy engines into their locked pages with GPUSORT_OUTPUT_LOCK=1; right either way.
TEST_F(gpu_test, TmpfsOutputsAreStagedOrWithLockingWrittenByTheCopyEnginesIntoTheirPages)
{
  struct statfs fs {};
  if (::statfs("/dev/shm", &fs) != 0 || fs.f_type != TMPFS_MAGIC)
    GTEST_SKIP() << "no tmpfs at /dev/shm";
  // Small: 72 MB of u64 keys, one whole 64 MiB unit after the head (the sanitizer's size).
  const std::uint64_t big = small_only() ? 9'000'007 : 40'000'003;
  const std::int64_t registered_before = detail::bytes_held(detail::held::registered);
  for (const char* lock : {static_cast<const char*>(nullptr), "1"}) {
    const output_lock_setting setting{lock};
    const std::uint64_t locked_before = detail::tmpfs_locked_bytes();
    for (const bool out_of_core : {false, true}) {
      check_files<std::uint64_t, detail::no_value>(big, distribution::uniform, out_of_core, true,
                                                   "/dev/shm");
      check_files<double, std::uint64_t>(big / 2, distribution::zero, out_of_core, true,
                                         "/dev/shm");
      check_files<std::int32_t, std::uint32_t>(big, distribution::fewunique, out_of_core, true,
                                               "/dev/shm");
    }
    if (lock == nullptr)
      EXPECT_EQ(detail::tmpfs_locked_bytes(), locked_before) << "an output was locked unasked";
    else
      EXPECT_GT(detail::tmpfs_locked_bytes(), locked_before) << "no output page was locked";
    detail::wait_for_output_releases();
    EXPECT_EQ(detail::bytes_held(detail::held::registered), registered_before);
  }
}

TEST_F(gpu_test, RegisteredHostMemoryIsPinnedForEveryGpuUntilReleased)
{
  const std::uint64_t n = 30'000'000;
  std::vector<std::uint64_t> keys(n);
  std::vector<std::uint64_t> out(n);
  generate(std::span<std::uint64_t>{keys}, distribution::uniform, 12);
  const key_array view{keys.data(), n, dtype::u64};
  const fingerprint before = fingerprint_of(view);
  engine e{forced_out_of_core(n, 8)};
  {
    const host_registration in_reg = e.register_host(keys.data(), n * 8);
    host_registration out_reg = e.register_host(out.data(), n * 8);
    EXPECT_TRUE(in_reg.pinned());
    EXPECT_TRUE(out_reg.pinned());
    EXPECT_TRUE(detail::is_pinned(keys.data()));
    EXPECT_TRUE(detail::is_pinned(out.data() + n - 1));
    EXPECT_THROW((void)e.register_host(keys.data(), n * 8), cuda_error);  // already registered
    const sort_report r = e.sort(sort_job{.keys = view, .keys_out = out.data()});
    EXPECT_GE(r.chunks, 16U);
    EXPECT_TRUE(
        verify(key_array{out.data(), n, dtype::u64}, std::nullopt, order::ascending, before).ok);
    host_registration moved = std::move(out_reg);
    EXPECT_TRUE(moved.pinned());
    EXPECT_FALSE(out_reg.pinned());  // NOLINT(bugprone-use-after-move): the moved-from state
  }
  EXPECT_FALSE(detail::is_pinned(keys.data()));
  EXPECT_FALSE(detail::is_pinned(out.data()));
  EXPECT_TRUE(fingerprint_of(view) == before);  // a separate output never writes the input
}

TEST_F(gpu_test, ABudgetAboveTheGpuShrinksAndSucceeds)
{
  const std::uint64_t n = 20'000'000;
  std::vector<std::int64_t> keys(n);
  generate(std::span<std::int64_t>{keys}, distribution::uniform, 5);
  const key_array view{keys.data(), n, dtype::i64};
  const fingerprint before = fingerprint_of(view);
  config cfg;
  cfg.device_memory_budget = std::uint64_t{1} << 50;  // 1 PiB
  engine{cfg}.sort(std::span<std::int64_t>{keys});
  EXPECT_TRUE(verify(view, std::nullopt, order::ascending, before).ok);
}

/// Sorts `job` with `cfg`; when the budget is refused, retries once with the budget the error
/// names, which must work. Returns how many attempts it took.
int sort_or_retry_with_the_named_budget(config cfg, const sort_job& job)
{
  try {
    engine{cfg}.sort(job);
    return 1;
  } catch (const config_error& e) {
    const std::string msg = e.what();
    const auto at = msg.find('(', msg.find("smallest budget that works is"));
    if (at == std::string::npos) throw;
    cfg.device_memory_budget = std::stoull(msg.substr(at + 1));
    engine{cfg}.sort(job);  // must not throw
    return 2;
  }
}

TEST_F(gpu_test, ASmallJobAlwaysSortsAndTheNamedBudgetWorks)
{
  const std::uint64_t n = small_only() ? 2'000'003 : 20'000'003;
  for (const incore_engine with : {incore_engine::radix, incore_engine::sample}) {
    SCOPED_TRACE(with == incore_engine::radix ? "radix" : "sample");
    config cfg;
    cfg.incore = with;
    cfg.device_memory_budget = detail::cuda_device::budget_margin / 2;  // below the margin
    // Two elements, any budget.
    std::vector<std::uint64_t> two{7, 3};
    engine{cfg}.sort(std::span<std::uint64_t>{two});
    EXPECT_EQ(two, (std::vector<std::uint64_t>{3, 7}));
    // Keys of every width and pairs: refused with a budget that then works.
    std::vector<std::uint32_t> u32(n);
    generate(std::span<std::uint32_t>{u32}, distribution::uniform, 61);
    const key_array k32{u32.data(), n, dtype::u32};
    fingerprint before = fingerprint_of(k32);
    EXPECT_EQ(sort_or_retry_with_the_named_budget(cfg, sort_job{.keys = k32}), 2);
    EXPECT_TRUE(verify(k32, std::nullopt, order::ascending, before).ok);

    std::vector<double> f64(n / 4);
    std::vector<std::uint32_t> values(n / 4);
    generate(std::span<double>{f64}, distribution::nanmix, 62);
    generate_values(value_array{values.data(), values.size(), 4}, 63);
    const key_array kf{f64.data(), f64.size(), dtype::f64};
    const value_array v{values.data(), values.size(), 4};
    before = fingerprint_of(kf, v);
    EXPECT_EQ(sort_or_retry_with_the_named_budget(cfg, sort_job{.keys = kf, .values = v}), 2);
    EXPECT_TRUE(verify(kf, v, order::ascending, before).ok);
  }
}

/// Device memory GPU 0 has free now (cudaMemGetInfo: whole pages, as the driver maps them).
std::uint64_t free_device_bytes()
{
  const cuda::set_device_guard on{0};
  std::size_t free = 0, total = 0;
  EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
  return free;
}

// Issue 44: the device budget is a hard bound on what the engine holds on a GPU, counted as the
// driver counts it (whole pages), at the smallest budget the engine names and at small
// fractions of the data. The engine keeps its buffers from job to job, so what it holds after
// a job is the most it held during it. Kernels load lazily and take device memory for their
// code: a first engine runs the same job before the measured one.
/// At a budget near the smallest, the sample sort's scratch leaves room for far smaller chunks
/// than the radix sort's: the engine's own choice (incore auto) takes the radix sort's plan
/// where it has at most two thirds of the chunks of the sample sort's, both forced at the same
/// budget, and keeps the configured sorter's otherwise. Plans over budgets from the smallest to
/// four times it, then a sort at one budget of each kind.
TEST_F(gpu_test, AtASmallBudgetTheChunksGoToTheSortWithFarFewerOfThem)
{
  // 8 GiB, as gpu_bench --chunks: at 32 MiB, 1594 chunks with the radix sort and 2643 with the
  // sample sort on an H200 while the sample sort's scratch was the largest of every policy
  // built; since it is the GPU's own policy's, both plan 1594 there, and the rule below is
  // checked at every budget whichever side each falls on.
  const std::uint64_t n = small_only() ? 8'000'009 : std::uint64_t{1} << 30;
  std::vector<std::uint64_t> keys(n);
  const key_array k{keys.data(), n, dtype::u64};
  config cfg;
  cfg.devices = device_selection::listed;
  cfg.gpu_ids = {0};
  cfg.device_memory_budget = n * 8;  // only to ask for the smallest
  const std::uint64_t smallest = engine{cfg}.plan(sort_job{.keys = k}).smallest_budget;
  const auto plan_with = [&](incore_engine with, std::uint64_t budget) {
    cfg.incore = with;
    cfg.device_memory_budget = budget;
    return engine{cfg}.plan(sort_job{.keys = k});
  };
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  const bool sample_first = cuda::sample_sort_preferred(8, 0, major);
  std::optional<std::uint64_t> radix_budget, sample_budget;
  for (std::uint64_t step = 8; step <= 32; ++step) {
    const std::uint64_t budget = smallest * step / 8;
    SCOPED_TRACE("budget " + std::to_string(budget));
    const job_plan chosen = plan_with(incore_engine::automatic, budget);
    const job_plan radix = plan_with(incore_engine::radix, budget);
    const job_plan sample = plan_with(incore_engine::sample, budget);
    if (chosen.path != "two rounds") continue;
    if (!sample_first || 3 * radix.chunks <= 2 * sample.chunks) {
      EXPECT_EQ(chosen.chunks, radix.chunks) << "sample " << sample.chunks;
      if (sample_first && !radix_budget) radix_budget = budget;
    } else {
      EXPECT_EQ(chosen.chunks, sample.chunks) << "radix " << radix.chunks;
      if (!sample_budget) sample_budget = budget;
    }
  }
  // Sorting as planned, at a budget of each kind.
  for (const std::optional<std::uint64_t>& budget : {radix_budget, sample_budget}) {
    if (!budget) continue;
    generate(std::span<std::uint64_t>{keys}, distribution::uniform, 73);
    const fingerprint before = fingerprint_of(k);
    const std::uint64_t planned = plan_with(incore_engine::automatic, *budget).chunks;
    const sort_report r = engine{cfg}.sort(sort_job{.keys = k});
    EXPECT_EQ(r.chunks, planned) << "budget " << *budget;
    EXPECT_TRUE(verify(k, std::nullopt, order::ascending, before).ok) << "budget " << *budget;
  }
}

TEST_F(gpu_test, OutOfCoreFloatKeysTakeTheRadixSortAndIntegersTheFasterOne)
{
  // Issue 44 (h200x2-20261130-s13/call2): out of core, f64 keys sorted faster with the radix
  // sort at every budget measured, u64 keys with the sample sort where its chunks are as few.
  const std::uint64_t n = small_only() ? 8'000'009 : std::uint64_t{1} << 27;
  int major = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0), cudaSuccess);
  const auto run = [&]<typename K>(dtype t) {
    std::vector<K> keys(n);
    generate(std::span<K>{keys}, distribution::uniform, 75);
    const key_array k{keys.data(), n, t};
    const fingerprint before = fingerprint_of(k);
    config cfg;
    cfg.devices = device_selection::listed;
    cfg.gpu_ids = {0};
    cfg.device_memory_budget = n * sizeof(K);  // only to ask for the smallest
    cfg.device_memory_budget =
        std::max(engine{cfg}.plan(sort_job{.keys = k}).smallest_budget, n * sizeof(K) / 64);
    const job_plan planned = engine{cfg}.plan(sort_job{.keys = k});
    EXPECT_EQ(planned.path, "two rounds");
    const test::captured_log log{log_level::debug};
    const sort_report r = engine{cfg}.sort(sort_job{.keys = k});
    EXPECT_EQ(r.chunks, planned.chunks);
    EXPECT_TRUE(verify(k, std::nullopt, order::ascending, before).ok);
    cfg.incore = incore_engine::sample;
    const std::uint64_t sample_chunks = engine{cfg}.plan(sort_job{.keys = k}).chunks;
    cfg.incore = incore_engine::radix;
    const std::uint64_t radix_chunks = engine{cfg}.plan(sort_job{.keys = k}).chunks;
    const bool sample = t == dtype::u64 && cuda::sample_sort_preferred(8, 0, major) &&
                        2 * sample_chunks < 3 * radix_chunks;
    SCOPED_TRACE(std::string{name_of(t)} + ": " + std::to_string(sample_chunks) +
                 " chunks with the sample sort, " + std::to_string(radix_chunks) + " radix");
    EXPECT_EQ(log.count(" chunks with the "), 2U) << "one line a round";
    EXPECT_EQ(log.count(sample ? "with the sample sort" : "with the radix sort"), 2U);
    EXPECT_EQ(r.chunks, sample ? sample_chunks : radix_chunks);
  };
  run.template operator()<double>(dtype::f64);
  run.template operator()<std::uint64_t>(dtype::u64);
}

TEST_F(gpu_test, TheGpuHoldsNoMoreThanItsBudget)
{
  const std::uint64_t n = small_only() ? 4'000'037 : 64'000'037;
  std::vector<double> keys(n), original(n);
  std::vector<std::uint32_t> values(n);
  generate(std::span<double>{original}, distribution::nanmix, 71);
  generate_values(value_array{values.data(), n, 4}, 72);
  for (const incore_engine with : {incore_engine::radix, incore_engine::sample}) {
    for (const bool pairs : {false, true}) {
      const key_array k{keys.data(), n, dtype::f64};
      const value_array v{values.data(), n, 4};
      const sort_job job = pairs ? sort_job{.keys = k, .values = v} : sort_job{.keys = k};
      config cfg;
      cfg.devices = device_selection::listed;
      cfg.gpu_ids = {0};
      cfg.incore = with;
      const std::uint64_t bytes = n * (pairs ? 12 : 8);
      cfg.device_memory_budget = bytes;  // only to ask for the smallest
      const std::uint64_t smallest = engine{cfg}.plan(job).smallest_budget;
      for (const std::uint64_t budget : {smallest, smallest * 3 / 2, bytes / 8}) {
        SCOPED_TRACE(std::string{with == incore_engine::radix ? "radix" : "sample"} +
                     (pairs ? " pairs" : " keys") + ", budget " + std::to_string(budget));
        cfg.device_memory_budget = budget;
        keys = original;
        engine{cfg}.sort(job);  // loads the kernels
        keys = original;
        const fingerprint before = fingerprint_of(k, pairs ? std::optional{v} : std::nullopt);
        const std::uint64_t free_before = free_device_bytes();
        engine measured{cfg};
        const sort_report r = measured.sort(job);
        const std::uint64_t free_after = free_device_bytes();
        EXPECT_EQ(r.rounds, 2);
        const std::uint64_t held = free_before > free_after ? free_before - free_after : 0;
        EXPECT_LE(held, budget) << "held " << held << " bytes";
        EXPECT_TRUE(verify(k, pairs ? std::optional{v} : std::nullopt, order::ascending, before)
                        .ok);
      }
    }
  }
}

TEST_F(gpu_test, AJobOfFourFifthsOfTheBudgetSortsInOneRoundTripWithinIt)
{
  // Issue 40: the resident sort holds its share and one piece-sized work array (1.125 times
  // the data at eight pieces) beside the sort's scratch (the sample sort's, about half a
  // piece of u64 keys), where it held the share twice: a job of 4/5 of the budget runs in one
  // round trip now, and the GPU holds no more than the budget. (5/6 left f64 keys alone 5 MB
  // short: h200x2-20261130-s12/call1.)
  const std::uint64_t n = (std::uint64_t{1} << 27) + 17;  // eight pieces, 32 ranges
  std::vector<double> keys(n), original(n);
  std::vector<std::uint32_t> values(n);
  generate(std::span<double>{original}, distribution::nanmix, 73);
  generate_values(value_array{values.data(), n, 4}, 74);
  for (const bool pairs : {false, true}) {
    const key_array k{keys.data(), n, dtype::f64};
    const value_array v{values.data(), n, 4};
    const sort_job job = pairs ? sort_job{.keys = k, .values = v} : sort_job{.keys = k};
    const std::uint64_t bytes = n * (pairs ? 12 : 8);
    config cfg;
    cfg.devices = device_selection::listed;
    cfg.gpu_ids = {0};
    cfg.device_memory_budget = bytes * 5 / 4;
    SCOPED_TRACE(pairs ? "pairs" : "keys");
    keys = original;
    const fingerprint before = fingerprint_of(k, pairs ? std::optional{v} : std::nullopt);
    const std::uint64_t free_before = free_device_bytes();
    engine measured{cfg};
    EXPECT_EQ(measured.plan(job).path, "resident");
    const sort_report r = measured.sort(job);
    const std::uint64_t free_after = free_device_bytes();
    EXPECT_EQ(r.rounds, 1);
    const std::uint64_t held = free_before > free_after ? free_before - free_after : 0;
    EXPECT_LE(held, *cfg.device_memory_budget) << "held " << held << " bytes";
    EXPECT_GE(held, bytes) << "held " << held << " bytes";
    EXPECT_TRUE(
        verify(k, pairs ? std::optional{v} : std::nullopt, order::ascending, before).ok);
  }
}

TEST_F(gpu_test, TwoGpusShareTheChunks)
{
  if (test::probed_gpus().gpus.size() < 2) GTEST_SKIP() << "needs two GPUs";
  const std::uint64_t n = 100'000'000;
  std::vector<double> keys(n);
  generate(std::span<double>{keys}, distribution::nanmix, 6);
  const key_array view{keys.data(), n, dtype::f64};
  const fingerprint before = fingerprint_of(view);
  config cfg = forced_out_of_core(n, 8);
  cfg.gpu_ids = {0, 1};
  const sort_report r = engine{cfg}.sort(std::span<double>{keys}, {.direction = order::descending});
  EXPECT_EQ(r.devices.size(), 2U);
  EXPECT_TRUE(verify(view, std::nullopt, order::descending, before).ok);
}

TEST_F(gpu_test, PastTwoToTheThirtyTwoElements)
{
  if (std::getenv("GPUSORT_TEST_HUGE") == nullptr)
    GTEST_SKIP() << "set GPUSORT_TEST_HUGE=1 (needs about 40 GiB of host memory)";
  const std::uint64_t n = (std::uint64_t{1} << 32) + 1001;
  std::vector<std::uint32_t> keys(n);
  generate(std::span<std::uint32_t>{keys}, distribution::uniform, 7);
  const key_array view{keys.data(), n, dtype::u32};
  const fingerprint before = fingerprint_of(view);
  config cfg;
  cfg.devices = device_selection::listed;
  cfg.gpu_ids = {0};
  cfg.device_memory_budget = std::uint64_t{8} << 30;  // about 2 GiB chunks: d >= 8
  const sort_report r = engine{cfg}.sort(std::span<std::uint32_t>{keys});
  EXPECT_EQ(r.rounds, 2);
  EXPECT_TRUE(verify(view, std::nullopt, order::ascending, before).ok);
}

/// The stable contract (stable sort, argsort, NumPy's float order) of `eng` on n keys with 3
/// and with 5000 distinct values, in both orders and both float orders; `what` names the setup.
template <typename K>
void check_stable_ties(engine& eng, std::uint64_t n, const std::string& what)
{
  for (const std::uint64_t distinct : {std::uint64_t{3}, std::uint64_t{5000}}) {
    const std::vector<K> keys = test::tied_keys<K>(n, distinct, n + distinct);
    for (const order dir : {order::ascending, order::descending}) {
      for (const float_order floats : {float_order::total, float_order::numpy}) {
        SCOPED_TRACE(what + " n=" + std::to_string(n) + " distinct=" + std::to_string(distinct) +
                     (dir == order::ascending ? " asc" : " desc") +
                     (floats == float_order::numpy ? " numpy" : " total"));
        test::check_stable_contract(eng, keys, dir, floats);
      }
    }
  }
}

// Stable sorts, argsort and NumPy's float order on the GPU engine, with both in-core sorters,
// in core and out of core (ties across chunks, splitters and compensated final chunks), against
// std::stable_sort references.
TYPED_TEST(GpuEngineKeys, StableArgsortAndNumpyOrderMeetTheReference)
{
  using K = TypeParam;
  for (const incore_engine sorter : {incore_engine::sample, incore_engine::radix}) {
    for (const bool out_of_core : {false, true}) {
      for (const std::uint64_t n : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{1009},
                                    std::uint64_t{300'007}}) {
        config cfg = out_of_core ? forced_out_of_core(n, sizeof(K), 8) : config{};
        cfg.devices = device_selection::listed;
        cfg.gpu_ids = {0};
        cfg.incore = sorter;
        engine eng{cfg};
        check_stable_ties<K>(eng, n,
                             std::string{sorter == incore_engine::sample ? "sample" : "radix"} +
                                 (out_of_core ? " out of core" : " in core"));
      }
    }
  }
}

// An argsort that fits the GPU runs in one round trip with positions made on the device, and is
// stable without a pass on the host (radix sort, merges taking the earlier run on ties).
TEST_F(gpu_test, ArgsortThatFitsRunsResidentAndStable)
{
  const std::uint64_t n = 3'000'017;  // several resident pieces, merged
  const std::vector<double> keys = test::tied_keys<double>(n, 50, 9);
  config cfg;
  cfg.devices = device_selection::listed;
  cfg.gpu_ids = {0};
  cfg.incore = incore_engine::sample;  // stable jobs take the radix sort anyway
  engine eng{cfg};
  for (const order dir : {order::ascending, order::descending}) {
    std::vector<std::int64_t> idx(n, -1);
    std::vector<double> sorted(n);
    const sort_report r = eng.argsort(
        {.keys = {const_cast<double*>(keys.data()), n, dtype::f64},
         .indices_out = idx.data(),
         .keys_out = sorted.data()},
        {.direction = dir, .floats = float_order::numpy});
    EXPECT_EQ(r.engine, "gpu-resident-argsort");
    const std::vector<std::uint64_t> ref =
        test::reference_argsort(keys, dir, float_order::numpy);
    EXPECT_EQ(idx, std::vector<std::int64_t>(ref.begin(), ref.end()));
    std::vector<double> ref_keys(n);
    for (std::uint64_t i = 0; i < n; ++i) ref_keys[i] = keys[ref[i]];
    EXPECT_TRUE(test::equal_bytes(sorted, ref_keys));
  }
}

// Compressed runs (issue 21) through the engine: compress_runs on, auto and off at a budget
// that forces two rounds, checked like every other job. Until the executor reads the key these
// jobs run uncompressed and pass all the same; a job that did compress shows "encode" in round 1
// and "decode" in round 2 of its profile, and one with compress_runs off never does.
// tests/gpu/compressed_runs_test.cpp checks the device's side below the executor.
const char* name_of(run_compression c)
{
  return c == run_compression::on ? "on" : c == run_compression::off ? "off" : "auto";
}

bool has_stage(const sort_report& r, int round, const char* stage)
{
  return std::any_of(r.profile.begin(), r.profile.end(), [&](const stage_profile& p) {
    return p.round == round && p.stage == stage && p.device != "all";
  });
}

/// Device bytes of `stage` in `round` (every GPU).
std::uint64_t stage_bytes(const sort_report& r, int round, const char* stage)
{
  std::uint64_t bytes = 0;
  for (const stage_profile& p : r.profile)
    if (p.round == round && p.stage == stage && p.device != "all") bytes += p.bytes;
  return bytes;
}

TYPED_TEST(GpuEngineKeys, CompressedRunsSortEveryDistributionAndOrder)
{
  using K = TypeParam;
  for (const run_compression mode :
       {run_compression::on, run_compression::automatic, run_compression::off}) {
    // 16 chunks of 8192 keys (4 codec blocks) and one key either side; a prime.
    for (const std::uint64_t n : {std::uint64_t{131'071}, std::uint64_t{131'072},
                                  std::uint64_t{131'073}, std::uint64_t{999'983}}) {
      if (small_only() && n > 10'000) continue;
      config cfg = forced_out_of_core(n, sizeof(K));
      cfg.compress_runs = mode;
      engine eng{cfg};  // one per budget: its pinned staging and round-1 buffer serve every job
      for (const distribution dist : all_distributions) {
        if (!applies_to(dist, dtype_of_v<K>)) continue;
        for (const order dir : {order::ascending, order::descending}) {
          SCOPED_TRACE(std::string{name_of(dist)} + (dir == order::ascending ? " asc" : " desc") +
                       " n=" + std::to_string(n) + " compress_runs=" + name_of(mode));
          std::vector<K> keys(n);
          generate(std::span<K>{keys}, dist, n + 11);
          const key_array view{keys.data(), n, dtype_of_v<K>};
          const fingerprint before = fingerprint_of(view);
          const sort_report r =
              eng.sort(sort_job{.keys = view}, {.direction = dir, .profile = true});
          const verify_result v = verify(view, std::nullopt, dir, before);
          ASSERT_TRUE(v.ok) << v.message << " (d=" << r.chunks << ")";
          EXPECT_EQ(r.rounds, 2);
          const bool encoded = has_stage(r, 1, "encode");
          if (mode == run_compression::off) {
            EXPECT_FALSE(encoded);
            EXPECT_FALSE(has_stage(r, 2, "decode"));
          }
          // Sorted keys dealt into d runs compress (deltas of d keys' spacing, not a key's
          // width): round 1 copies out less than the raw keys, index included. Not under auto,
          // which keeps raw what stays above auto_compress_percent (sorted runs do).
          if (encoded && mode == run_compression::on && dist == distribution::sorted) {
            EXPECT_LT(stage_bytes(r, 1, "copy out"), n * sizeof(K));
          }
          // Round 2 decodes, unless every key equals a splitter: compensation then writes the
          // splitter's key from the host and no device reads a stream (distribution zero).
          if (encoded && mode == run_compression::on && r.compensated_chunks == 0) {
            EXPECT_TRUE(has_stage(r, 2, "decode"));
          }
        }
      }
    }
  }
}

TYPED_TEST(GpuEngineKeys, CompressedRunsCarryPairsAndStayStable)
{
  using K = TypeParam;
  for (const run_compression mode : {run_compression::on, run_compression::automatic}) {
    SCOPED_TRACE(std::string{"compress_runs="} + name_of(mode));
    for (const distribution dist : {distribution::uniform, distribution::zero,
                                    distribution::detdupes, distribution::sorted}) {
      const std::uint64_t n = small_only() ? 10'007 : 1'000'003;
      config with_u32 = forced_out_of_core(n, sizeof(K), 4);
      config with_u64 = forced_out_of_core(n, sizeof(K), 8);
      with_u32.compress_runs = with_u64.compress_runs = mode;
      check_pairs<K, std::uint32_t>(with_u32, n, dist, order::ascending, false);
      check_pairs<K, std::uint64_t>(with_u64, n, dist, order::descending, true);
    }
    const std::uint64_t n = small_only() ? 1009 : 300'007;
    config cfg = forced_out_of_core(n, sizeof(K), 8);
    cfg.compress_runs = mode;
    engine eng{cfg};
    check_stable_ties<K>(eng, n, "stable, out of core");
  }
}

/// Sorts of rows (issue 42) on the GPU, in one round trip and out of core with 16+ chunks:
/// every layout of the CPU engine's contract against std::stable_sort, and a lexsort of
/// columns whose first words tie in large groups.
TEST_F(gpu_test, RowsMatchTheStableReferenceInAndOutOfCore)
{
  const std::vector<std::uint64_t> sizes =
      small_only() ? std::vector<std::uint64_t>{1009} : std::vector<std::uint64_t>{1009, 200'003};
  for (const std::uint64_t n : sizes) {
    for (const bool forced : {false, true}) {
      // The first words' argsort: (u64 word, position) pairs.
      engine eng{forced ? forced_out_of_core(n, 8, 8) : config{}};
      for (const test::layout_case& c : test::layouts()) {
        if (c.record_bytes == 4096 && n > 5000) continue;
        for (const std::uint64_t distinct : {std::uint64_t{3}, std::uint64_t{0}}) {
          for (const float_order floats : {float_order::total, float_order::numpy}) {
            SCOPED_TRACE(test::trace(c, n, distinct, floats) + (forced ? " out of core" : ""));
            const test::bytes_t records =
                test::make_records(n, c.record_bytes, c.fields, distinct, n + 11);
            const test::bytes_t expected = test::gathered(
                records, c.record_bytes,
                test::reference_order(records, c.record_bytes, c.fields, floats));
            test::bytes_t sorted = records;
            sort_records(eng, {sorted.data(), n, c.record_bytes}, c.fields, nullptr,
                         {.floats = floats});
            ASSERT_TRUE(test::equal_bytes(sorted, expected));
          }
        }
      }
      std::vector<std::uint32_t> a(n);
      std::vector<double> b(n);
      for (std::uint64_t i = 0; i < n; ++i) {
        a[i] = static_cast<std::uint32_t>(i * 2654435761u % 3);
        b[i] = static_cast<double>((i * 40503u) % 1000) - 500.0;
      }
      std::vector<std::uint64_t> expected(n);
      std::iota(expected.begin(), expected.end(), std::uint64_t{0});
      std::stable_sort(expected.begin(), expected.end(), [&](std::uint64_t x, std::uint64_t y) {
        return a[x] != a[y] ? a[x] > a[y] : b[x] < b[y];
      });
      std::vector<std::uint64_t> perm(n);
      argsort_rows(eng, {n, {column(a, order::descending), column(b)}}, perm.data());
      EXPECT_EQ(perm, expected) << "n=" << n << (forced ? " out of core" : "");
    }
  }
}

}  // namespace
}  // namespace gpusort
