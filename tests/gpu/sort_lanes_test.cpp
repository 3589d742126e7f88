// Several small tasks in one ring slot, sorted side by side on lanes of their own (issue 44):
// cuda_device::process given tasks much smaller than the ring it keeps for the job (the queue's
// reserve), as a small budget's round 1 gives it, so that a slot takes up to four. Round-1
// tasks (raw keys from pageable memory, dealt into bins) and round-2 tasks (ordered bits
// gathered from many short slices of pinned memory by the kernel, whose tables then share the
// slot's) come out as std::sort and the host's deal make them, with either in-core sort, keys
// alone and pairs; the debug log says that tasks shared slots. Skipped without a GPU.
#include "gpu_test_support.hpp"
#include "tests/support/captured_log.hpp"
#include "tests/support/stable_reference.hpp"

#include "core/generate.hpp"
#include "core/keys.hpp"
#include "core/plan/dealing.hpp"
#include "pipeline/cuda/cuda_device.hpp"

#include <gpusort/gpusort.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <span>
#include <string>
#include <vector>

namespace gpusort {
namespace {

using detail::chunk_task;
using detail::run;
using test::bits_of;
using test::raw_bits;
using test::gpu_test;

template <typename K>
class GpuSortLanes : public gpu_test {};
using key_types = ::testing::Types<std::uint32_t, std::uint64_t, std::int64_t, double>;
TYPED_TEST_SUITE(GpuSortLanes, key_types);

/// Task sizes: one element, primes, around a 64-element boundary (where the next task in a slot
/// begins) and a few large ones, which take a slot alone or with the small ones.
const std::vector<std::uint64_t> task_sizes{1,    2,      3,     63,     64,    65,
                                            4099, 65'537, 7,     131'071, 1'021, 100'003,
                                            5,    262'139, 8'191, 97};

/// Whether GPUSORT_SORT_LANES leaves one task a slot (then no task shares one).
bool lanes_off()
{
  const char* lanes = std::getenv("GPUSORT_SORT_LANES");
  return lanes != nullptr && std::string{lanes} == "1";
}

/// The keys' ordered bits sorted, and back to raw keys: what a task must write, by std::sort.
template <typename K>
std::vector<bits_of<K>> sorted_raw(std::span<const K> keys, const detail::element_layout& layout)
{
  using B = bits_of<K>;
  std::vector<B> ordered(keys.size());
  std::transform(keys.begin(), keys.end(), ordered.begin(), [&](K k) {
    return detail::to_ordered<B>(std::bit_cast<B>(k), layout.keys());
  });
  std::sort(ordered.begin(), ordered.end());
  for (B& b : ordered) b = detail::from_ordered<B>(b, layout.keys());
  return ordered;
}

/// Keys of K ascending, alone or with 8-byte values.
template <typename K>
detail::element_layout layout_of(bool pairs)
{
  return {.type = dtype_of_v<K>,
          .direction = order::ascending,
          .key_bytes = sizeof(K),
          .value_bytes = pairs ? 8U : 0U};
}

/// Runs `tasks` on a fresh GPU device with a ring reserved for four times the largest, and
/// checks that tasks shared slots (unless the lanes are switched off).
void process_small_tasks(incore_engine engine, const detail::element_layout& layout,
                         std::vector<chunk_task> tasks)
{
  detail::cuda_device dev{detail::cuda_device_options{
      .id = 0, .incore = engine, .budget = std::uint64_t{1} << 30}};
  std::uint64_t largest = 0;
  for (const chunk_task& t : tasks) largest = std::max(largest, t.count);
  const sort_options options{.profile = true};
  detail::job_context ctx{options, layout.bytes()};
  const std::size_t count = tasks.size();
  detail::task_queue queue{std::move(tasks), 4 * largest};
  test::captured_log log{log_level::debug};
  dev.process(layout, queue, ctx);
  EXPECT_EQ(log.count("beside another"), lanes_off() ? 0U : 1U);
  // The profile counts every task, not every slot.
  for (const stage_profile& p : ctx.take_profile())
    if (p.stage == "sort") {
      EXPECT_EQ(p.chunks, count);
    }
}

/// Round 1's tasks: raw keys of pageable memory, each sorted and dealt into `bins` (1: not).
template <typename K>
void round_one(incore_engine engine, bool pairs, std::uint64_t bins)
{
  using B = bits_of<K>;
  const detail::element_layout layout = layout_of<K>(pairs);
  const std::uint64_t n = std::accumulate(task_sizes.begin(), task_sizes.end(), std::uint64_t{0});
  std::vector<K> keys(n);
  generate(std::span<K>{keys}, distribution::uniform, n + bins);
  std::vector<std::uint64_t> values(pairs ? n : 0);
  for (std::uint64_t i = 0; i < values.size(); ++i) values[i] = i;
  std::vector<K> out_keys(n);
  std::vector<std::uint64_t> out_values(values.size());
  std::vector<chunk_task> tasks;
  std::uint64_t start = 0;
  for (std::size_t i = 0; i < task_sizes.size(); ++i) {
    const std::uint64_t size = task_sizes[i];
    // Every fourth task's keys five values repeated: ties, which pairs must keep with their keys.
    if (i % 4 == 3)
      for (std::uint64_t x = start; x < start + size; ++x) keys[x] = keys[start + x % 5];
    chunk_task t;
    t.src_keys = keys.data();
    t.src_values = pairs ? values.data() : nullptr;
    t.slices = {run{start, size}};
    t.count = size;
    t.dst_keys = out_keys.data() + start;
    t.dst_values = pairs ? out_values.data() + start : nullptr;
    t.deal_bins = bins;
    tasks.push_back(std::move(t));
    start += size;
  }
  process_small_tasks(engine, layout, std::move(tasks));

  start = 0;
  for (const std::uint64_t size : task_sizes) {
    SCOPED_TRACE("task of " + std::to_string(size) + " at " + std::to_string(start));
    const std::span<const K> in{keys.data() + start, size};
    const std::vector<B> sorted = sorted_raw<K>(in, layout);
    // The deal: sorted element x goes to bin x mod bins, bins one after another.
    std::vector<B> want(size);
    for (std::uint64_t j = 0, at = 0; j < bins; ++j)
      for (std::uint64_t x = j; x < size; x += bins) want[at++] = sorted[x];
    ASSERT_EQ(raw_bits<K>({out_keys.data() + start, size}), want);
    if (pairs) {
      std::vector<bool> seen(size);
      for (std::uint64_t p = start; p < start + size; ++p) {
        const std::uint64_t v = out_values[p];
        ASSERT_TRUE(v >= start && v < start + size) << "value " << v << " left its task";
        ASSERT_FALSE(seen[v - start]) << "value " << v << " twice";
        seen[v - start] = true;
        ASSERT_EQ(std::bit_cast<B>(keys[v]), std::bit_cast<B>(out_keys[p]))
            << "the value at " << p << " left its key";
      }
    }
    start += size;
  }
}

/// Round 2's tasks: ordered bits in pinned (mapped) memory, each task gathering 97 short
/// slices spread over the buffer, written back as raw keys.
template <typename K>
void round_two(incore_engine engine, bool pairs)
{
  using B = bits_of<K>;
  const detail::element_layout layout = layout_of<K>(pairs);
  const std::uint64_t n = std::accumulate(task_sizes.begin(), task_sizes.end(), std::uint64_t{0});
  std::vector<K> raw(n);
  generate(std::span<K>{raw}, distribution::uniform, n * 3);
  detail::host_buffer pinned = detail::pinned_host_buffer(n * (sizeof(B) + 8));
  auto* ordered = static_cast<B*>(pinned.data());
  auto* values = reinterpret_cast<std::uint64_t*>(static_cast<char*>(pinned.data()) +
                                                  n * sizeof(B));
  for (std::uint64_t i = 0; i < n; ++i) {
    ordered[i] = detail::to_ordered<B>(std::bit_cast<B>(raw[i]), layout.keys());
    values[i] = i;
  }
  // Task i takes, from each of 97 stripes of the buffer, its share of that stripe.
  constexpr std::uint64_t stripes = 97;
  std::vector<std::vector<run>> slices(task_sizes.size());
  std::vector<std::uint64_t> counts(task_sizes.size());
  for (std::uint64_t s = 0, at = 0; s < stripes; ++s) {
    for (std::size_t i = 0; i < task_sizes.size(); ++i) {
      const std::uint64_t share = task_sizes[i] / stripes + (s < task_sizes[i] % stripes ? 1 : 0);
      if (share > 0) slices[i].push_back(run{at, share});
      counts[i] += share;
      at += share;
    }
  }
  std::vector<K> out_keys(n);
  std::vector<std::uint64_t> out_values(pairs ? n : 0);
  std::vector<chunk_task> tasks;
  for (std::size_t i = 0, start = 0; i < task_sizes.size(); start += counts[i], ++i) {
    chunk_task t;
    t.src_keys = ordered;
    t.src_values = pairs ? values : nullptr;
    t.src_ordered = true;
    t.slices = slices[i];
    t.count = counts[i];
    t.dst_keys = out_keys.data() + start;
    t.dst_values = pairs ? out_values.data() + start : nullptr;
    tasks.push_back(std::move(t));
  }
  process_small_tasks(engine, layout, std::move(tasks));

  std::uint64_t start = 0;
  for (std::size_t i = 0; i < task_sizes.size(); ++i) {
    SCOPED_TRACE("task " + std::to_string(i) + " of " + std::to_string(counts[i]));
    std::vector<K> in;
    for (const run& r : slices[i])
      for (std::uint64_t x = r.offset; x < r.offset + r.length; ++x) in.push_back(raw[x]);
    ASSERT_EQ(raw_bits<K>({out_keys.data() + start, counts[i]}), sorted_raw<K>(in, layout));
    if (pairs) {
      for (std::uint64_t p = start; p < start + counts[i]; ++p)
        ASSERT_EQ(std::bit_cast<B>(raw[out_values[p]]), std::bit_cast<B>(out_keys[p]))
            << "the value at " << p << " left its key";
    }
    start += counts[i];
  }
}

TYPED_TEST(GpuSortLanes, RoundOneTasksShareSlotsAndComeOutSortedAndDealt)
{
  for (const incore_engine engine : {incore_engine::sample, incore_engine::radix}) {
    for (const bool pairs : {false, true}) {
      for (const std::uint64_t bins : {std::uint64_t{1}, std::uint64_t{3}}) {
        SCOPED_TRACE(std::string{engine == incore_engine::sample ? "sample" : "radix"} +
                     (pairs ? " pairs" : " keys") + " bins " + std::to_string(bins));
        round_one<TypeParam>(engine, pairs, bins);
        if (this->HasFatalFailure()) return;
      }
    }
  }
}

TYPED_TEST(GpuSortLanes, RoundTwoTasksGatherIntoSharedSlotsAndComeOutSorted)
{
  for (const incore_engine engine : {incore_engine::sample, incore_engine::radix}) {
    for (const bool pairs : {false, true}) {
      SCOPED_TRACE(std::string{engine == incore_engine::sample ? "sample" : "radix"} +
                   (pairs ? " pairs" : " keys"));
      round_two<TypeParam>(engine, pairs);
      if (this->HasFatalFailure()) return;
    }
  }
}

}  // namespace
}  // namespace gpusort
