// How a GPU sizes the buffers it keeps from job to job (pipeline/cuda/buffer_sizes.hpp): each
// grows to the largest any job needed, ahead of need where the budget has room, so that a mix
// of small jobs of other layouts reallocates a few times and not on most jobs (issue 25).
// Plain arithmetic: runs on any machine; tests/gpu/kept_buffers_test.cpp counts the
// allocations of real jobs on a GPU.
#include "pipeline/cuda/buffer_sizes.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <iostream>
#include <random>
#include <vector>

namespace gpusort::detail {
namespace {

constexpr std::uint64_t MiB = std::uint64_t{1} << 20;
constexpr std::uint64_t lots = std::uint64_t{64} << 30;  // room for anything below

TEST(BufferSizes, CoversAndTotal)
{
  const buffer_sizes held{.keys = 100, .values = 0, .scratch = 50};
  EXPECT_TRUE(held.covers({.keys = 100, .values = 0, .scratch = 50}));
  EXPECT_TRUE(held.covers({.keys = 1, .values = 0, .scratch = 0}));
  EXPECT_FALSE(held.covers({.keys = 101, .values = 0, .scratch = 0}));
  EXPECT_FALSE(held.covers({.keys = 1, .values = 1, .scratch = 0}));  // pairs after keys alone
  EXPECT_FALSE(held.covers({.keys = 1, .values = 0, .scratch = 51}));  // another sorter
  // Each buffer takes whole 2 MiB pages of the device; a buffer of no bytes takes none.
  EXPECT_EQ(held.total(2), 3 * device_page_bytes);
  EXPECT_EQ((buffer_sizes{.keys = 8, .values = 4, .scratch = 1}.total(4)), 9 * device_page_bytes);
  EXPECT_EQ((buffer_sizes{.keys = 2 * MiB, .values = 0, .scratch = 2 * MiB + 1}.total(3)),
            3 * 2 * MiB + 4 * MiB);
}

TEST(BufferSizes, BuffersTakeWholePages)
{
  EXPECT_EQ(device_pages(0), 0U);
  EXPECT_EQ(device_pages(1), device_page_bytes);
  EXPECT_EQ(device_pages(device_page_bytes - 1), device_page_bytes);
  EXPECT_EQ(device_pages(device_page_bytes), device_page_bytes);
  EXPECT_EQ(device_pages(device_page_bytes + 1), 2 * device_page_bytes);
  EXPECT_EQ(device_pages(5 * MiB), 6 * MiB);
}

TEST(BufferSizes, TheTablesHoldEverySliceATaskCanHave)
{
  // Up to max_chunks slices a task at small capacities: 3 slots x 4096 x 88 bytes, a page.
  EXPECT_EQ(ring_table_bytes(8, 1, 3), device_page_bytes);
  EXPECT_EQ(ring_table_bytes(8, std::uint64_t{1} << 19, 3), device_page_bytes);
  // Beyond, a slice per min_slice_bytes of the task (bins_for keeps slices that long): 2^30
  // u64 keys a task have 32768 slices, 8.25 MiB of tables for three slots.
  const std::uint64_t big = std::uint64_t{1} << 30;
  const std::uint64_t slices = big * 8 / plan_tuning::min_slice_bytes + 1;
  EXPECT_GE(ring_table_bytes(8, big, 3), 3 * slices * table_entry_bytes);
  EXPECT_LT(ring_table_bytes(8, big, 3), 3 * slices * table_entry_bytes + device_page_bytes);
}

TEST(BufferSizes, LargestFittingIsTheLastCountWithinTheBudget)
{
  const auto need = [](std::uint64_t c) { return buffer_sizes{.keys = 8 * c}.total(4); };
  const std::uint64_t budget = 32 * MiB;
  const std::uint64_t c = largest_fitting(budget, 32, need);
  EXPECT_EQ(c, MiB);  // four buffers of 8 MiB
  EXPECT_LE(need(c), budget);
  EXPECT_GT(need(c + 1), budget);  // four of 8 MiB and 8 bytes take 40 MiB
  EXPECT_EQ(largest_fitting(budget - 1, 32, need), 3 * MiB / 4);  // four of 6 MiB
  EXPECT_EQ(largest_fitting(0, 32, need), 0U);
}

TEST(BufferSizes, GrowsAheadOfNeedFromNothing)
{
  EXPECT_EQ(grown_bytes(0, 0), 0U);
  EXPECT_EQ(grown_bytes(0, 1), min_grown_bytes);
  EXPECT_EQ(grown_bytes(0, min_grown_bytes), min_grown_bytes);
  EXPECT_EQ(grown_bytes(0, min_grown_bytes + 1), 2 * min_grown_bytes);
  EXPECT_EQ(grown_bytes(0, 100 * MiB + 3), 128 * MiB);
  EXPECT_EQ(grown_bytes(128 * MiB, 100 * MiB), 128 * MiB);  // enough: kept as it is
  const std::uint64_t huge = (std::uint64_t{1} << 62) + 1;  // no power of two above it
  EXPECT_EQ(grown_bytes(0, huge), huge);
  // Keys alone need no values: none are allocated.
  EXPECT_EQ(grown_sizes({}, {.keys = 4096, .values = 0, .scratch = 513}, 2, lots),
            (buffer_sizes{.keys = min_grown_bytes, .values = 0, .scratch = min_grown_bytes}));
}

TEST(BufferSizes, OnlyWhatAJobLacksGrowsAndTheRestIsKept)
{
  const buffer_sizes held{.keys = 64 * MiB, .values = 0, .scratch = 16 * MiB};
  // Smaller pairs after larger keys alone: the keys and scratch stay, values come.
  EXPECT_EQ(grown_sizes(held, {.keys = 3 * MiB, .values = 3 * MiB, .scratch = MiB}, 2, lots),
            (buffer_sizes{.keys = 64 * MiB, .values = 8 * MiB, .scratch = 16 * MiB}));
  // Larger keys alone after that: the values are kept for the next pairs job.
  const buffer_sizes with_values{.keys = 64 * MiB, .values = 8 * MiB, .scratch = 16 * MiB};
  EXPECT_EQ(grown_sizes(with_values, {.keys = 65 * MiB, .values = 0, .scratch = MiB}, 2, lots),
            (buffer_sizes{.keys = 128 * MiB, .values = 8 * MiB, .scratch = 16 * MiB}));
}

TEST(BufferSizes, TheBudgetBoundsTheGrowth)
{
  const buffer_sizes held{.keys = 64 * MiB, .values = 0, .scratch = 0};
  const buffer_sizes need{.keys = 65 * MiB, .values = 20 * MiB, .scratch = 0};
  // Ahead of need: 2 x (128 + 32) MiB; the larger of each: 2 x (65 + 20) MiB; exactly: the same
  // here, since the job needs more keys than are kept.
  EXPECT_EQ(grown_sizes(held, need, 2, 320 * MiB),
            (buffer_sizes{.keys = 128 * MiB, .values = 32 * MiB, .scratch = 0}));
  EXPECT_EQ(grown_sizes(held, need, 2, 319 * MiB), (buffer_sizes{.keys = 65 * MiB,
                                                                  .values = 20 * MiB,
                                                                  .scratch = 0}));
  // Room for what the job needs but not beside what is kept: exactly the job's sizes.
  const buffer_sizes wide{.keys = 512 * MiB, .values = 0, .scratch = 0};
  const buffer_sizes pairs{.keys = 10 * MiB, .values = 10 * MiB, .scratch = 0};
  EXPECT_EQ(grown_sizes(wide, pairs, 2, 100 * MiB), pairs);
  // No room at all (a budget under the margin, where a small job still sorts): the job's sizes.
  EXPECT_EQ(grown_sizes({}, pairs, 4, 0), pairs);
}

/// The GPU soak's mix (bench/soak.cpp): jobs of 1 KiB to 1 MiB and one in fifty of 1 to
/// 16 MiB; 4- and 8-byte keys; keys alone and, three in ten, pairs; scratch of the shape of the
/// two sorters' (the sample sort's lists grow with the count, 64-bit keys take it on an H100;
/// the radix sort's barely grow). Returns the reallocations: jobs whose needs the sizes kept
/// so far do not cover.
template <typename Policy>
int reallocations(Policy&& next)
{
  std::mt19937_64 rng{25};
  buffer_sizes held{};
  int count = 0;
  for (int job = 0; job < 2000; ++job) {
    const bool medium = rng() % 50 == 0;
    const std::uint64_t bytes = medium ? MiB << (rng() % 5) : std::uint64_t{1024} << (rng() % 11);
    const std::uint64_t key_bytes = rng() % 2 == 0 ? 4 : 8;
    const std::uint64_t value_bytes = rng() % 10 < 7 ? 0 : (rng() % 2 == 0 ? 4 : 8);
    const std::uint64_t n = bytes / (key_bytes + value_bytes);
    const std::uint64_t scratch = key_bytes == 8 ? n * 13 / 10 + (64 << 10) : n / 16 + 4096;
    const buffer_sizes need{.keys = n * key_bytes, .values = n * value_bytes,
                            .scratch = scratch};
    if (held.covers(need)) continue;
    held = next(held, need);
    ++count;
  }
  return count;
}

TEST(BufferSizes, TheSoaksMixReallocatesAFewTimesWhereExactSizesDidHundredsOfTimes)
{
  const int exact = reallocations([](const buffer_sizes&, const buffer_sizes& need) {
    return need;  // what the GPU did before: the new job's exact sizes
  });
  const int grown = reallocations([](const buffer_sizes& held, const buffer_sizes& need) {
    return grown_sizes(held, need, 2, lots);
  });
  std::cout << "reallocations in 2000 jobs: " << exact << " with exact sizes, " << grown
            << " grown\n";
  EXPECT_GT(exact, 400);
  // The first job, the first pairs job after keys alone, and the medium jobs' powers of two
  // up to 16 MiB (keys, values, scratch).
  EXPECT_LE(grown, 10);
}

// ---- the resident sort's buffers (issue 40: the largest job that fits) ----

TEST(ResidentTuning, PiecesAndRangesCutTheShareIntoAtMostSoManyOfAtLeastSoMany)
{
  const resident_tuning t;  // pieces of at least 2^24 elements, up to 16; ranges 2^22, up to 48
  EXPECT_EQ(t.piece_elements(0), 0U);
  EXPECT_EQ(t.piece_elements(1), 1U);
  EXPECT_EQ(t.piece_elements((std::uint64_t{1} << 25) - 1), (std::uint64_t{1} << 25) - 1);
  EXPECT_EQ(t.piece_elements(std::uint64_t{1} << 25), std::uint64_t{1} << 24);
  EXPECT_EQ(t.piece_elements(std::uint64_t{1} << 30), std::uint64_t{1} << 26);  // 16 pieces
  EXPECT_EQ(t.piece_elements(1000000007), 62500001U);  // 16 pieces, the last shorter
  EXPECT_EQ(t.range_elements(std::uint64_t{1} << 30), 22369622U);  // 48 ranges
  EXPECT_EQ(t.range_elements(std::uint64_t{3} << 22), std::uint64_t{1} << 22);
  EXPECT_EQ(t.range_elements(5), 5U);  // one range
  // The parts always cover the share, within the count allowed.
  for (std::uint64_t share : {1ULL, 7ULL, 1000ULL, 16777217ULL, 33554431ULL, 123456789ULL,
                              8770000000ULL}) {
    for (const std::uint64_t part : {t.piece_elements(share), t.range_elements(share)}) {
      EXPECT_GE(part, 1U) << share;
      EXPECT_LE((share + part - 1) / part, std::max(t.max_pieces, t.max_ranges)) << share;
    }
    EXPECT_LE((share + t.piece_elements(share) - 1) / t.piece_elements(share), t.max_pieces);
    EXPECT_LE((share + t.range_elements(share) - 1) / t.range_elements(share), t.max_ranges);
  }
  // A tuning of zeros still cuts (one part of at least one element).
  const resident_tuning zero{.min_piece_elements = 0, .max_pieces = 0,
                             .min_range_elements = 0, .max_ranges = 0};
  EXPECT_EQ(zero.piece_elements(10), 10U);
  EXPECT_EQ(zero.range_elements(10), 10U);
}

TEST(ResidentSizes, TheShareAndTheLargerOfAPieceAndTheRing)
{
  const resident_tuning t;
  // 2^30 u64 keys: 8 GiB of runs, a work array of max(2^26, 3 * 22369622) keys, 512 MiB and
  // 16 bytes (whole pages: 514 MiB).
  const std::uint64_t n = std::uint64_t{1} << 30;
  const resident_sizes keys = resident_need(8, 0, n, 3 * MiB, t, 1);
  EXPECT_EQ(keys.runs, (buffer_sizes{.keys = 8 * n, .values = 0, .scratch = 3 * MiB}));
  EXPECT_EQ(keys.work, (buffer_sizes{.keys = 8 * 67108866, .values = 0, .scratch = 0}));
  EXPECT_EQ(keys.total(), 8 * n + 514 * MiB + 4 * MiB);
  // 1.0625 times the data beside the scratch and a page: what lets the largest job hold 60%
  // and more of a GPU's memory in keys (two arrays of the share had held under half).
  const double per_key =
      static_cast<double>(keys.total() - 6 * MiB) / static_cast<double>(8 * n);
  EXPECT_DOUBLE_EQ(per_key, 1.0625);
  // Pairs: values alike.
  const resident_sizes pairs = resident_need(4, 8, n, 0, t, 1);
  EXPECT_EQ(pairs.work, (buffer_sizes{.keys = 4 * 67108866, .values = 8 * 67108866,
                                      .scratch = 0}));
  // Fewer pieces than ranges fill the ring: a tuning of 2 pieces and 4 ranges holds 3/4 of
  // the share in the ring.
  const resident_tuning few{.min_piece_elements = 1, .max_pieces = 2, .min_range_elements = 1,
                            .max_ranges = 4};
  EXPECT_EQ(resident_need(8, 0, 1000, 0, few, 1).work.keys, 8U * 750);
  // A share of one piece and one range: the alternate is the share (two arrays, as a small
  // job always had); shared with other GPUs, its range merges in two buffers.
  EXPECT_EQ(resident_need(8, 0, 1000, 0, t, 1).work.keys, 8U * 1000);
  EXPECT_EQ(resident_need(8, 0, 1000, 0, t, 2).work.keys, 8U * 2000);
  EXPECT_EQ(resident_ring_buffers(1000, t, 1), 1U);
  EXPECT_EQ(resident_ring_buffers(1000, t, 2), 2U);
  EXPECT_EQ(resident_ring_buffers(0, t, 1), 0U);
  // One range of several pieces merges in two; several ranges take three.
  EXPECT_EQ(resident_ring_buffers(1000, few, 1), 3U);
  const resident_tuning one_range{.min_piece_elements = 1, .max_pieces = 4,
                                  .min_range_elements = 1, .max_ranges = 1};
  EXPECT_EQ(resident_ring_buffers(1000, one_range, 1), 2U);
}

TEST(ResidentSizes, GrowLikeTheRingsBuffers)
{
  const resident_tuning t;
  const resident_sizes small = resident_need(8, 0, 1000, 4096, t, 1);
  const resident_sizes big = resident_need(8, 8, 1 << 20, 4096, t, 1);
  EXPECT_TRUE(big.covers(resident_need(8, 8, 1 << 19, 4096, t, 1)));
  EXPECT_FALSE(small.covers(big));
  const auto total = [](const resident_sizes& s) { return s.total(); };
  // Ahead of need where the room allows: powers of two, at least 8 MiB each.
  const resident_sizes ahead = grown_within(small, big, lots, total);
  EXPECT_TRUE(ahead.covers(big));
  EXPECT_EQ(ahead.runs.keys, 8 * MiB);
  EXPECT_EQ(ahead.work.values, 8 * MiB);
  // Exactly the need where nothing more fits.
  EXPECT_EQ(grown_within(small, big, big.total(), total), big);
}

}  // namespace
}  // namespace gpusort::detail
