// Invariants of the DSPS planner, checked on simulated runs: the test sorts and deals chunks
// itself with std::sort, so the planner's functions meet real sorted runs.
#include "core/plan/chunk_plan.hpp"
#include "core/plan/compensation.hpp"
#include "core/plan/dealing.hpp"
#include "core/plan/run_source.hpp"
#include "core/plan/slicing.hpp"
#include "core/plan/splitters.hpp"
#include "core/plan/tuning.hpp"

#include <gpusort/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <map>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace gpusort::detail {
namespace {

using keys_t = std::vector<std::uint64_t>;

enum class shape { distinct, random, all_equal, few_unique, one_heavy, sorted_distinct };

keys_t make_keys(std::uint64_t n, shape sh, std::uint64_t seed)
{
  std::mt19937_64 rng{seed};
  keys_t k(n);
  switch (sh) {
    case shape::distinct:
      std::iota(k.begin(), k.end(), std::uint64_t{1000});
      std::shuffle(k.begin(), k.end(), rng);
      break;
    case shape::sorted_distinct: std::iota(k.begin(), k.end(), std::uint64_t{0}); break;
    case shape::random:
      for (auto& x : k) x = rng() % (n + 1);  // duplicates, but few of each
      break;
    case shape::all_equal: std::fill(k.begin(), k.end(), 77); break;
    case shape::few_unique:
      for (auto& x : k) x = (rng() % 4) * 1000;
      break;
    case shape::one_heavy:  // half the keys share one value in the middle of the range
      for (auto& x : k) x = (rng() & 1) ? 500 : rng() % 1000;
      break;
  }
  return k;
}

/// Round 1 as a device would run it, done by the test with std::sort.
keys_t simulate_round1(const keys_t& input, const chunk_plan& plan)
{
  keys_t out(input.size());
  for (std::uint64_t i = 0; i < plan.d; ++i) {
    const std::uint64_t b = plan.chunk_begin(i), m = plan.chunk_size(i);
    keys_t chunk(input.begin() + static_cast<std::ptrdiff_t>(b),
                 input.begin() + static_cast<std::ptrdiff_t>(b + m));
    std::sort(chunk.begin(), chunk.end());
    // Naive dealing written out by position, independent of deal()'s bin arithmetic.
    const std::uint64_t g = plan.runs_per_chunk();
    std::uint64_t at = b;
    for (std::uint64_t j = 0; j < g; ++j)
      for (std::uint64_t x = j; x < m; x += g) out[at++] = chunk[x];
  }
  return out;
}

/// A compressed job's round-1 output, made by the test from `t` (simulate_round1's) with the
/// host codec, run by run: every chunk encoded except those in `raw` (left raw, as a chunk whose
/// stream did not pay), each run's stream behind the one before it in the chunk's stream.
struct encoded_output {
  std::vector<std::vector<codec::run_block>> index;
  std::vector<std::vector<std::uint64_t>> streams;  // 64-bit words: 8-byte aligned
  std::vector<stored_chunk> chunks;
};

encoded_output encode_round1(const keys_t& t, const chunk_plan& plan,
                             const std::vector<std::uint64_t>& raw)
{
  encoded_output out;
  out.index.resize(plan.d);
  out.streams.resize(plan.d);
  out.chunks.resize(plan.d);
  for (std::uint64_t i = 0; i < plan.d; ++i) {
    const std::uint64_t m = plan.chunk_size(i);
    out.streams[i].resize(m + 1);
    out.chunks[i].stream = reinterpret_cast<const std::byte*>(out.streams[i].data());
    if (std::find(raw.begin(), raw.end(), i) != raw.end()) continue;
    const std::uint64_t g = plan.runs_per_chunk();
    out.index[i].resize(codec::dealt_blocks(m, g));
    auto* stream = reinterpret_cast<std::byte*>(out.streams[i].data());
    std::uint64_t at = 0;
    for (std::uint64_t j = 0; j < g; ++j) {
      const std::uint64_t len = bin_size(m, g, j);
      const std::span<codec::run_block> entries{
          out.index[i].data() + codec::dealt_first_block(m, g, j), codec::blocks_of(len)};
      const std::uint64_t bytes = codec::encode(
          std::span<const std::uint64_t>{t.data() + plan.chunk_begin(i) + bin_offset(m, g, j),
                                         len},
          entries, std::span<std::byte>{stream + at, (m + 1) * 8 - at});
      for (codec::run_block& e : entries) e.byte_offset += at;
      at += bytes;
    }
    out.chunks[i].index = out.index[i].data();
  }
  return out;
}

struct planned {
  chunk_plan plan;
  keys_t t;
  std::vector<run> runs;
  splitter_set<std::uint64_t> splitters;
  std::vector<final_chunk> finals;
  std::uint64_t s{};  ///< candidates per run the splitters came from
};

/// The sampled new chunk's runs.
std::span<const run> sampled_runs(const std::vector<run>& new_chunks, const chunk_plan& plan)
{
  return {new_chunks.data() + plan.sampled_chunk * plan.d, plan.d};
}

/// Element sizes that make the planner deal into d bins (0), into one (8: the short runs of
/// these tests' sizes are far below plan_tuning::min_slice_bytes) and into a few (64 KiB: slices
/// of 4 elements count as long enough).
constexpr std::uint64_t dealing_sizes[] = {0, 8, std::uint64_t{64} << 10};

planned plan_and_slice(const keys_t& input, std::uint64_t capacity, std::uint64_t element_bytes)
{
  planned p;
  p.plan = make_plan(input.size(), device_capacity{.elements = capacity, .bytes_per_element = 8},
                     std::nullopt, element_bytes);
  if (p.plan.in_core()) return p;
  p.t = simulate_round1(input, p.plan);
  p.runs = make_run_table(p.plan);
  const auto new_chunks = transpose(p.runs, p.plan.d, p.plan.runs_per_chunk());
  // As round 2 cuts them (the usual sample first where the bound needs more candidates).
  round2_cuts<std::uint64_t> cuts = cut_runs(raw_runs<std::uint64_t>{p.t.data()}, p.plan,
                                             p.runs, sampled_runs(new_chunks, p.plan));
  p.splitters = std::move(cuts.splitters);
  p.finals = std::move(cuts.finals);
  p.s = cuts.s;
  return p;
}

/// The keys of final chunk `fc` of `p` strictly below its upper splitter (all of them in the
/// last chunk), counted key by key: what the plan's bound holds to at most `bound`.
std::uint64_t strictly_below(const planned& p, const final_chunk& fc)
{
  std::uint64_t strict = 0;
  for (const slice& sl : fc.slices)
    for (std::uint64_t x = sl.offset; x < sl.offset + sl.length; ++x)
      if (fc.index + 1 == p.plan.d || p.t[x] < p.splitters.values[fc.index]) ++strict;
  return strict;
}

/// Whether every final chunk of `p` keeps what the plan's bound promises.
bool keeps_the_bound(const planned& p)
{
  return std::all_of(p.finals.begin(), p.finals.end(), [&](const final_chunk& fc) {
    return strictly_below(p, fc) <= p.plan.bound;
  });
}

TEST(ChunkPlan, ChunksCoverTheInputAndFit)
{
  for (const std::uint64_t bytes : dealing_sizes) {
    for (std::uint64_t n : {0ULL, 1ULL, 7ULL, 1000ULL, 65'537ULL, 1'000'003ULL, 50'000'000ULL}) {
      for (std::uint64_t cap : {n + 1, n, n / 2 + 1, n / 3 + 7, n / 16 + 5}) {
        if (cap == 0) continue;
        chunk_plan plan;
        try {
          plan = make_plan(n, device_capacity{.elements = cap, .bytes_per_element = 8},
                           std::nullopt, bytes);
        } catch (const config_error&) {
          EXPECT_LT(cap, min_feasible_capacity(n, bytes)) << n << " " << cap;
          continue;
        }
        EXPECT_EQ(plan.in_core(), n <= cap);
        std::uint64_t next = 0;
        for (std::uint64_t i = 0; i < plan.d; ++i) {
          EXPECT_EQ(plan.chunk_begin(i), next);
          EXPECT_LE(plan.chunk_size(i), cap);
          next += plan.chunk_size(i);
        }
        EXPECT_EQ(next, n);
        if (!plan.in_core()) {
          EXPECT_GE(plan.s, 1U);
          const std::uint64_t g = plan.runs_per_chunk();
          EXPECT_EQ(g, bins_for(n, plan.d, bytes));
          EXPECT_EQ(plan.sampled_chunk, g - 1);
          EXPECT_LE(plan.s, shortest_sampled_run(n, plan.d, g));
          // The usual sample where its bound fits, else the fewest more that fit.
          const std::uint64_t usual = std::min(shortest_sampled_run(n, plan.d, g),
                                               plan_tuning::max_total_candidates / plan.d);
          if (strict_interval_bound(n, plan.d, usual, g) < cap) {
            EXPECT_EQ(plan.s, usual);
          } else {
            EXPECT_LE(plan.s * plan.d, plan_tuning::max_total_candidates_small_budget);
            EXPECT_GE(strict_interval_bound(n, plan.d, plan.s - 1, g), cap);
          }
          EXPECT_LT(plan.bound, cap);
          EXPECT_EQ(plan.bound, strict_interval_bound(n, plan.d, plan.s, g));
        }
      }
    }
  }
}

TEST(ChunkPlan, TooSmallABudgetNamesTheSmallestThatWorks)
{
  for (const std::uint64_t bytes : dealing_sizes) {
    for (std::uint64_t n : {5'000ULL, 123'457ULL, 10'000'000ULL, 1ULL << 33}) {
      const std::uint64_t need = min_feasible_capacity(n, bytes);
      ASSERT_LT(need, n);
      const device_capacity ok{.elements = need, .bytes_per_element = 16, .fixed_bytes = 4096};
      EXPECT_NO_THROW(make_plan(n, ok, std::nullopt, bytes));
      const device_capacity short_by_one{.elements = need - 1, .bytes_per_element = 16,
                                         .fixed_bytes = 4096};
      try {
        make_plan(n, short_by_one, std::nullopt, bytes);
        ADD_FAILURE() << "a capacity below the minimum must be refused for n = " << n;
      } catch (const config_error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("smallest budget that works"), std::string::npos) << msg;
        EXPECT_NE(msg.find(std::to_string(ok.budget_for(need)) + " bytes"), std::string::npos)
            << msg;
      }
    }
  }
  // Feasibility needs far less than a fraction of N (design.md section 3): about 2 N^(2/3)
  // elements with DSPS's d bins, less where a small budget samples more candidates.
  const double n = std::ldexp(1.0, 33);
  EXPECT_LT(static_cast<double>(min_feasible_capacity(1ULL << 33)), 4.0 * std::cbrt(n * n));
}

// Issue 44: many chunks deal into fewer bins so that round 2's slices stay long; few chunks of
// long runs keep DSPS's d bins.
TEST(ChunkPlan, ManyChunksDealIntoFewerBinsSoThatSlicesStayLong)
{
  const std::uint64_t slice = plan_tuning::min_slice_bytes;
  for (const std::uint64_t bytes : {4ULL, 8ULL, 16ULL})
    for (const std::uint64_t n : {1ULL << 20, 1ULL << 27, 1ULL << 30, 1ULL << 32})
      for (const std::uint64_t d : {2ULL, 8ULL, 32ULL, 100ULL, 377ULL, 683ULL, 4096ULL}) {
        const std::uint64_t g = bins_for(n, d, bytes);
        ASSERT_GE(g, 1U);
        ASSERT_LE(g, d);
        // Long enough where dealing at all (an average slice of n / (d^2 g) elements) ...
        if (g > 1) {
          EXPECT_GE(n / d / d / g * bytes, slice) << n << " " << d << " " << bytes;
        }
        // ... and no fewer bins than that allows.
        if (g < d) {
          EXPECT_LT(n / d / d / (g + 1) * bytes, slice) << n << " " << d << " " << bytes;
        }
      }
  EXPECT_EQ(bins_for(1ULL << 30, 32, 8), 32U);  // 8 GiB of u64 in 32 chunks: DSPS as it was
  EXPECT_EQ(bins_for(1ULL << 28, 377, 8), 1U);   // the 2 GiB of f64 in 377 chunks
  EXPECT_EQ(bins_for(1ULL << 30, 377, 0), 377U);  // no element size: always d
  // A budget too small for the usual 2^20 candidates takes more, as few as its bound needs:
  // 32 GiB of u64 on 3M elements of capacity (about a 128 MiB GPU budget).
  const std::uint64_t big = std::uint64_t{1} << 32;
  const chunk_plan small = make_plan(big, device_capacity{.elements = 3'000'000}, std::nullopt, 8);
  EXPECT_GT(small.s * small.d, plan_tuning::max_total_candidates);
  EXPECT_LE(small.s * small.d, plan_tuning::max_total_candidates_small_budget);
  EXPECT_LT(small.bound, small.capacity);
  EXPECT_GE(strict_interval_bound(big, small.d, small.s - 1, small.runs_per_chunk()),
            small.capacity);
  // The case planned: d * g slices per final chunk instead of d^2, and still a plan.
  const chunk_plan p = make_plan(1ULL << 28, device_capacity{.elements = 1ULL << 20},
                                 std::nullopt, 8);
  EXPECT_GE(p.d, 256U);
  EXPECT_EQ(p.runs_per_chunk(), 1U);
  EXPECT_LT(p.bound, p.capacity);
}

TEST(ChunkPlan, ChunkLimitRaisesTheChunkCount)
{
  const chunk_plan p = make_plan(1'000'000, device_capacity{.elements = 1'000'000}, 100'000);
  EXPECT_GE(p.d, 10U);
  for (std::uint64_t i = 0; i < p.d; ++i) EXPECT_LE(p.chunk_size(i), 100'000U);
}

TEST(ChunkPlan, AChunkLimitTooSmallToSampleFallsBackToTheSmallestChunksThatWork)
{
  const chunk_plan p = make_plan(1000, device_capacity{.elements = 500}, 1);
  ASSERT_FALSE(p.in_core());
  EXPECT_GE(p.s, 1U);
  EXPECT_LT(p.bound, 500U);
  // No plan with more chunks exists at this capacity.
  for (std::uint64_t d = p.d + 1; d <= plan_tuning::max_chunks; ++d) {
    const std::uint64_t s = std::min(shortest_sampled_run(1000, d),
                                     plan_tuning::max_total_candidates_small_budget / d);
    if (s == 0) break;
    EXPECT_GE(strict_interval_bound(1000, d, s), 500U) << d;
  }
  EXPECT_TRUE(make_plan(3, device_capacity{.elements = 100}, 1).in_core());
}

TEST(Dealing, BinsPartitionTheChunk)
{
  for (std::uint64_t m : {0ULL, 1ULL, 5ULL, 16ULL, 17ULL, 1001ULL})
    for (std::uint64_t d : {1ULL, 2ULL, 3ULL, 16ULL, 40ULL}) {
      std::uint64_t total = 0;
      for (std::uint64_t j = 0; j < d; ++j) {
        EXPECT_EQ(bin_offset(m, d, j), total);
        std::uint64_t expect = 0;
        for (std::uint64_t x = 0; x < m; ++x) expect += (x % d == j) ? 1 : 0;
        EXPECT_EQ(bin_size(m, d, j), expect) << m << " " << d << " " << j;
        total += bin_size(m, d, j);
      }
      EXPECT_EQ(total, m);
    }
}

TEST(Dealing, DealMatchesTheDefinition)
{
  for (std::uint64_t m : {0ULL, 1ULL, 10ULL, 1000ULL, 4099ULL})
    for (std::uint64_t d : {1ULL, 2ULL, 7ULL, 16ULL}) {
      keys_t in(m);
      std::vector<std::uint32_t> vin(m);
      std::iota(in.begin(), in.end(), std::uint64_t{0});
      std::iota(vin.begin(), vin.end(), 0U);
      keys_t out(m);
      std::vector<std::uint32_t> vout(m);
      deal<std::uint64_t, std::uint32_t>(in.data(), vin.data(), m, d, out.data(), vout.data());
      std::uint64_t at = 0;
      for (std::uint64_t j = 0; j < d; ++j)
        for (std::uint64_t x = j; x < m; x += d, ++at) {
          ASSERT_EQ(out[at], x);
          ASSERT_EQ(vout[at], x);
        }
    }
}

TEST(Dealing, TransposeSwapsTheRunTable)
{
  for (const std::uint64_t g : {0ULL, 1ULL, 3ULL}) {
    chunk_plan plan = make_plan(100'000, device_capacity{.elements = 20'000});
    plan.bins = g;
    const std::uint64_t bins = plan.runs_per_chunk();
    const auto table = make_run_table(plan);
    ASSERT_EQ(table.size(), plan.d * bins);
    const auto t = transpose(table, plan.d, bins);
    for (std::uint64_t i = 0; i < plan.d; ++i)
      for (std::uint64_t j = 0; j < bins; ++j) EXPECT_EQ(t[j * plan.d + i], table[i * bins + j]);
    EXPECT_EQ(transpose(t, bins, plan.d), table);
    // The runs tile the round-1 output exactly.
    std::vector<run> sorted_runs = table;
    std::sort(sorted_runs.begin(), sorted_runs.end(),
              [](const run& a, const run& b) { return a.offset < b.offset; });
    std::uint64_t next = 0;
    for (const run& r : sorted_runs) {
      EXPECT_EQ(r.offset, next);
      next += r.length;
    }
    EXPECT_EQ(next, plan.n);
  }
}

TEST(Splitters, CandidatesAreEquidistantAndEndAtTheRunEnd)
{
  for (std::uint64_t len : {1ULL, 5ULL, 64ULL, 1000ULL})
    for (std::uint64_t s = 1; s <= std::min<std::uint64_t>(len, 40); ++s) {
      std::uint64_t prev = 0;
      for (std::uint64_t x = 0; x < s; ++x) {
        const std::uint64_t p = candidate_position(x, s, len);
        ASSERT_LT(p, len);
        if (x > 0) {
          ASSERT_GT(p, prev);
          ASSERT_LE(p - prev, (len + s - 1) / s);
        }
        prev = p;
      }
      EXPECT_EQ(candidate_position(s - 1, s, len), len - 1);
    }
}

TEST(Splitters, RegularRanksAndEstCounts)
{
  // Two runs of 0..9 with s = 5: candidates 1,3,5,7,9 twice; d = 2 -> splitter at rank 5.
  keys_t keys;
  for (int r = 0; r < 2; ++r)
    for (std::uint64_t v = 0; v < 10; ++v) keys.push_back(v);
  const std::vector<run> runs{{0, 10}, {10, 10}};
  const auto sp = choose_splitters(raw_runs<std::uint64_t>{keys.data()}, runs, 5, 2);
  ASSERT_EQ(sp.values.size(), 1U);
  EXPECT_EQ(sp.values[0], 5U);  // sorted candidates 1,1,3,3,5,5,...: 5th is 5
  EXPECT_EQ(sp.est[0], 2U);
}

class PlannerInvariants : public ::testing::TestWithParam<shape> {};

TEST_P(PlannerInvariants, EveryElementLandsOnceInOrderedBoundedFinalChunks)
{
  const shape sh = GetParam();
  std::uint64_t compensated_total = 0;
  for (const std::uint64_t bytes : dealing_sizes) {
    for (std::uint64_t n : {1'000ULL, 4'099ULL, 30'011ULL, 200'003ULL}) {
      const std::uint64_t minimum = min_feasible_capacity(n, bytes);
      for (std::uint64_t cap : {minimum, minimum + 17, minimum * 2, n / 2}) {
        if (cap < minimum || cap >= n) continue;
        const keys_t input = make_keys(n, sh, n * 31 + cap);
        const planned p = plan_and_slice(input, cap, bytes);
        ASSERT_FALSE(p.plan.in_core());
        ASSERT_EQ(p.finals.size(), p.plan.d);

        // Every element lands in exactly one final chunk: the slices tile the round-1 output.
        std::vector<std::uint8_t> hit(n, 0);
        std::uint64_t offset = 0;
        for (const final_chunk& fc : p.finals) {
          EXPECT_EQ(fc.out_offset, offset);
          std::uint64_t size = 0;
          for (const slice& sl : fc.slices)
            for (std::uint64_t x = sl.offset; x < sl.offset + sl.length; ++x) {
              ASSERT_EQ(hit[x], 0) << "element " << x << " in two final chunks";
              hit[x] = 1;
              ++size;
            }
          EXPECT_EQ(size, fc.size);
          offset += fc.size;
        }
        EXPECT_EQ(offset, n);
        EXPECT_TRUE(std::all_of(hit.begin(), hit.end(), [](std::uint8_t h) { return h == 1; }));

        // Final chunks are ordered: chunk k holds keys in (splitter[k-1], splitter[k]].
        for (const final_chunk& fc : p.finals)
          for (const slice& sl : fc.slices)
            for (std::uint64_t x = sl.offset; x < sl.offset + sl.length; ++x) {
              if (fc.index > 0) { ASSERT_GT(p.t[x], p.splitters.values[fc.index - 1]); }
              if (fc.index + 1 < p.plan.d) { ASSERT_LE(p.t[x], p.splitters.values[fc.index]); }
            }

        // Round 2's radix sort passes only over the bits differing_bits names: the chunk's
        // least and greatest keys (and so all between) agree above them.
        for (const final_chunk& fc : p.finals) {
          if (fc.size == 0) continue;
          std::uint64_t least = ~std::uint64_t{0}, greatest = 0;
          for (const slice& sl : fc.slices)
            for (std::uint64_t x = sl.offset; x < sl.offset + sl.length; ++x) {
              least = std::min(least, p.t[x]);
              greatest = std::max(greatest, p.t[x]);
            }
          ASSERT_LE(std::bit_width(least ^ greatest), differing_bits(p.splitters, fc.index))
              << "final chunk " << fc.index << " of " << p.plan.d;
        }

        // The same planning on the runs compressed (chunk 0 left raw) gives the same answers.
        const encoded_output enc = encode_round1(p.t, p.plan, {0});
        const encoded_runs<std::uint64_t> source{p.plan, p.t.data(), enc.chunks};
        const auto new_chunks = transpose(p.runs, p.plan.d, p.plan.runs_per_chunk());
        const round2_cuts<std::uint64_t> cuts =
            cut_runs(source, p.plan, p.runs, sampled_runs(new_chunks, p.plan));
        EXPECT_EQ(cuts.splitters.values, p.splitters.values);
        EXPECT_EQ(cuts.splitters.est, p.splitters.est);
        const std::vector<final_chunk>& finals = cuts.finals;
        ASSERT_EQ(finals.size(), p.finals.size());
        for (std::uint64_t k = 0; k < finals.size(); ++k) {
          EXPECT_EQ(finals[k].size, p.finals[k].size);
          EXPECT_EQ(finals[k].out_offset, p.finals[k].out_offset);
          EXPECT_EQ(finals[k].slices, p.finals[k].slices);
          if (needs_compensation(p.finals[k], cap)) {
            const auto on_raw =
                split_equal(raw_runs<std::uint64_t>{p.t.data()}, p.finals[k], p.splitters, cap);
            const auto on_encoded = split_equal(source, p.finals[k], p.splitters, cap);
            EXPECT_EQ(on_encoded.rest, on_raw.rest);
            EXPECT_EQ(on_encoded.equal, on_raw.equal);
          }
        }

        for (const final_chunk& fc : p.finals) {
          // The bound holds on keys strictly between splitters, whatever the duplicates.
          const std::uint64_t strict = strictly_below(p, fc);
          EXPECT_LE(strict, p.plan.bound);
          if (sh == shape::distinct || sh == shape::sorted_distinct) {
            EXPECT_LE(fc.size, p.plan.final_bound());
            EXPECT_FALSE(needs_compensation(fc, cap)) << "distinct keys never compensate";
          }
          // Compensation exactly when the chunk would overflow the device.
          EXPECT_EQ(needs_compensation(fc, cap), fc.size > cap);
          if (needs_compensation(fc, cap)) {
            ++compensated_total;
            const auto split =
                split_equal(raw_runs<std::uint64_t>{p.t.data()}, fc, p.splitters, cap);
            EXPECT_EQ(split.rest_count, strict);
            EXPECT_LE(split.rest_count, cap);
            EXPECT_EQ(split.rest_count + split.equal_count, fc.size);
            for (const slice& sl : split.equal)
              for (std::uint64_t x = sl.offset; x < sl.offset + sl.length; ++x)
                ASSERT_EQ(p.t[x], p.splitters.values[fc.index]);
            for (const slice& sl : split.rest)
              for (std::uint64_t x = sl.offset; x < sl.offset + sl.length; ++x)
                ASSERT_LT(p.t[x], p.splitters.values[fc.index]);
          }
        }
      }
    }
  }
  if (sh == shape::all_equal || sh == shape::few_unique || sh == shape::one_heavy) {
    EXPECT_GT(compensated_total, 0U) << "heavy duplicates must force compensation";
  }
}

// Where a small budget's bound needs many more candidates than the usual 2^20 (about (2N/c)^2),
// round 2 cuts with the usual sample at random places of the runs and keeps it where its final
// chunks keep the bound: on keys that are not adversarial it does, and the plan between the
// rounds reads and sorts a few times fewer candidates (issue 44). Where they do not (here a
// sample of one candidate a run), the bound's own sample cuts, and the bound holds either way.
TEST(CutRuns, TheUsualSampleCutsWhereItKeepsTheBoundElseTheBoundsOwnDoes)
{
  const std::uint64_t n = (std::uint64_t{1} << 22) + 15;
  for (const shape sh : {shape::random, shape::sorted_distinct, shape::few_unique,
                         shape::one_heavy}) {
    SCOPED_TRACE("shape " + std::to_string(static_cast<int>(sh)));
    const std::uint64_t cap = min_feasible_capacity(n, 8) * 21 / 20;
    const keys_t input = make_keys(n, sh, 44);
    planned p = plan_and_slice(input, cap, 8);
    ASSERT_GT(p.plan.s, p.plan.quick_s) << "the bound must need more than the usual sample";
    ASSERT_GT(p.plan.quick_s, 0U);
    EXPECT_EQ(p.s, p.plan.quick_s) << "d = " << p.plan.d;
    EXPECT_TRUE(keeps_the_bound(p));
    std::uint64_t total = 0;
    for (const final_chunk& fc : p.finals) total += fc.size;
    EXPECT_EQ(total, n);

    // One candidate a run cannot cut random keys into d evenly sized chunks: the bound's
    // sample does instead. (Keys of few values it cuts at those values, which compensation
    // takes, and sorted keys, each run a range of its own, within the bound: kept there.)
    if (sh != shape::random) continue;
    chunk_plan coarse = p.plan;
    coarse.quick_s = 1;
    const auto new_chunks = transpose(p.runs, coarse.d, coarse.runs_per_chunk());
    round2_cuts<std::uint64_t> cuts = cut_runs(raw_runs<std::uint64_t>{p.t.data()}, coarse,
                                               p.runs, sampled_runs(new_chunks, coarse));
    EXPECT_EQ(cuts.s, coarse.s);
    EXPECT_GT(cuts.dropped_seconds, 0.0);
    p.splitters = std::move(cuts.splitters);
    p.finals = std::move(cuts.finals);
    EXPECT_TRUE(keeps_the_bound(p));
    // And the bound's sample alone (quick_s 0) gives the same splitters as after the drop.
    chunk_plan bounds_only = p.plan;
    bounds_only.quick_s = 0;
    const round2_cuts<std::uint64_t> alone = cut_runs(
        raw_runs<std::uint64_t>{p.t.data()}, bounds_only, p.runs,
        sampled_runs(new_chunks, bounds_only));
    EXPECT_EQ(alone.splitters.values, p.splitters.values);
    EXPECT_EQ(alone.dropped_seconds, 0.0);
  }
}

// Round 1 reads round 2's sample behind it chunk by chunk (pipeline/sample_behind.hpp), finding
// run i of the sampled new chunk from the plan alone: it must be the transposed table's run.
TEST(CutRuns, TheSampledRunOfAChunkIsTheTransposedTablesRow)
{
  for (const std::uint64_t element_bytes : dealing_sizes)
    for (const std::uint64_t n : {1'000'003ULL, 4'194'304ULL, 7'777'777ULL})
      for (const std::uint64_t c : {n / 3, n / 17 + 5, std::uint64_t{0}}) {
        // 0: the smallest capacity that works, the most chunks.
        const std::uint64_t cap = std::max(c, min_feasible_capacity(n, element_bytes));
        const chunk_plan plan = make_plan(
            n, device_capacity{.elements = cap, .bytes_per_element = 8}, std::nullopt,
            element_bytes);
        if (plan.in_core()) continue;
        const std::vector<run> runs = make_run_table(plan);
        const std::vector<run> new_chunks = transpose(runs, plan.d, plan.runs_per_chunk());
        const std::span<const run> sampled = sampled_runs(new_chunks, plan);
        for (std::uint64_t i = 0; i < plan.d; ++i)
          ASSERT_EQ(sampled_run(plan, i), sampled[i])
              << "n " << n << ", d " << plan.d << ", g " << plan.runs_per_chunk() << ", run " << i;
        ASSERT_EQ(sampled_chunk_runs(plan), std::vector<run>(sampled.begin(), sampled.end()));
      }
}

// Candidates read before the rounds' plan (as round 1 reads them behind it) cut exactly as the
// sample read between the rounds: piece ends where the first sample is the bound's, random
// places where it is the usual one tried first (and the bound's after it, read then).
TEST(CutRuns, TheFirstSampleReadAheadCutsAsTheSampleReadBetweenTheRounds)
{
  const std::uint64_t n = (std::uint64_t{1} << 22) + 15;
  for (const bool small_budget : {false, true}) {
    SCOPED_TRACE(small_budget ? "small budget: the usual sample first" : "the bound's sample");
    const std::uint64_t cap = small_budget ? min_feasible_capacity(n, 8) * 21 / 20 : n / 9;
    const keys_t input = make_keys(n, shape::random, 7);
    const planned p = plan_and_slice(input, cap, 8);
    ASSERT_FALSE(p.plan.in_core());
    EXPECT_EQ(first_places(p.plan) == candidate_places::random, small_budget);
    const auto new_chunks = transpose(p.runs, p.plan.d, p.plan.runs_per_chunk());
    const std::span<const run> sampled = sampled_runs(new_chunks, p.plan);
    const std::uint64_t s = p.plan.first_s();
    std::vector<std::uint64_t> ahead(p.plan.d * s);
    if (small_budget) {
      const std::vector<std::uint64_t> none_read(p.plan.d, 0);
      read_sample(raw_runs<std::uint64_t>{p.t.data()}, sampled, s, candidate_places::random,
                  std::span<const std::uint64_t>{none_read}, ahead.data());
    } else {
      // The candidates' places as splitters.hpp defines them, read key by key.
      for (std::uint64_t i = 0; i < p.plan.d; ++i)
        for (std::uint64_t x = 0; x < s; ++x)
          ahead[i * s + x] = p.t[sampled[i].offset + candidate_position(x, s, sampled[i].length)];
    }
    const round2_cuts<std::uint64_t> cuts =
        cut_runs(raw_runs<std::uint64_t>{p.t.data()}, p.plan, p.runs, sampled, ahead);
    EXPECT_EQ(cuts.splitters.values, p.splitters.values);
    EXPECT_EQ(cuts.splitters.est, p.splitters.est);
    EXPECT_EQ(cuts.s, p.s);
    ASSERT_EQ(cuts.finals.size(), p.finals.size());
    for (std::uint64_t k = 0; k < cuts.finals.size(); ++k) {
      EXPECT_EQ(cuts.finals[k].size, p.finals[k].size) << k;
      EXPECT_EQ(cuts.finals[k].slices, p.finals[k].slices) << k;
    }
    // A sample of another size is refused rather than cut.
    ahead.pop_back();
    EXPECT_THROW((void)cut_runs(raw_runs<std::uint64_t>{p.t.data()}, p.plan, p.runs, sampled,
                                ahead),
                 logic_error);
  }
}

// A sample partly read (a reader behind round 1 stopped between groups, or inside a run's
// last group): read_sample reads each run from its first unread candidate on, and only that.
TEST(Splitters, ASampleReadInPartIsCompletedFromEachRunsFirstUnreadCandidate)
{
  const std::uint64_t s = 3 * candidate_group + 100;
  std::vector<run> runs;
  std::uint64_t at = 0;
  for (const std::uint64_t len : {s, s + 1, 5 * s + 3, 40 * s, 7 * s})
    runs.push_back(run{at, len}), at += len;
  keys_t keys(at);
  for (std::uint64_t p = 0; p < at; ++p) keys[p] = 3 * p + 1;  // sorted within every run
  const std::vector<std::uint64_t> first{0, s, candidate_group, candidate_group + 1, s - 1};
  constexpr std::uint64_t unread = ~std::uint64_t{0};
  std::vector<std::uint64_t> out(runs.size() * s, unread);
  read_sample(raw_runs<std::uint64_t>{keys.data()}, std::span<const run>{runs}, s,
              candidate_places::piece_ends, std::span<const std::uint64_t>{first}, out.data());
  for (std::uint64_t i = 0; i < runs.size(); ++i)
    for (std::uint64_t x = 0; x < s; ++x) {
      const std::uint64_t want =
          x < first[i] ? unread : keys[runs[i].offset + candidate_position(x, s, runs[i].length)];
      ASSERT_EQ(out[i * s + x], want) << "run " << i << ", candidate " << x;
    }
  const std::vector<std::uint64_t> too_few(runs.size() - 1, 0);
  EXPECT_THROW(read_sample(raw_runs<std::uint64_t>{keys.data()}, std::span<const run>{runs}, s,
                           candidate_places::piece_ends, std::span<const std::uint64_t>{too_few},
                           out.data()),
               logic_error);
}

// Few chunks take their splitters by selection rather than by sorting the candidates (at d = 11
// the sort of 2^20 was most of the plan between the rounds): the same splitters and counts as
// the sorted candidates give, checked against std::sort, on keys of every spread, u32 and u64.
template <typename K>
void check_selection_against_the_sort(std::uint64_t d, std::uint64_t s, std::uint64_t spread,
                                      std::uint64_t seed)
{
  std::mt19937_64 rng{seed};
  std::vector<K> candidates(d * s);
  for (K& k : candidates) {
    const std::uint64_t r = rng();
    // spread 0: the whole range, extremes included; else values below `spread`.
    k = static_cast<K>(spread == 0 ? (r % 7 == 0 ? ~std::uint64_t{0} : r % 5 == 0 ? 0 : r)
                                   : r % spread);
  }
  for (std::uint64_t i = 0; i < d; ++i)
    std::sort(candidates.begin() + static_cast<std::ptrdiff_t>(i * s),
              candidates.begin() + static_cast<std::ptrdiff_t>((i + 1) * s));
  std::vector<K> sorted = candidates;
  std::sort(sorted.begin(), sorted.end());
  const splitter_set<K> got = splitters_by_selection(std::span<const K>{candidates}, d);
  ASSERT_EQ(got.values.size(), d - 1);
  ASSERT_EQ(got.est.size(), d - 1);
  for (std::uint64_t k = 0; k + 1 < d; ++k) {
    const K want = sorted[(k + 1) * s - 1];
    ASSERT_EQ(got.values[k], want) << "d " << d << ", s " << s << ", splitter " << k;
    ASSERT_EQ(got.est[k], static_cast<std::uint64_t>(
                              std::count(sorted.begin(), sorted.end(), want)))
        << "d " << d << ", s " << s << ", splitter " << k;
  }
}

TEST(Splitters, FewChunksSelectTheSplittersTheSortedCandidatesGive)
{
  std::uint64_t seed = 1;
  for (const std::uint64_t d : {2ULL, 3ULL, 11ULL, 37ULL, 100ULL})
    for (const std::uint64_t s : {1ULL, 2ULL, 7ULL, 1000ULL, 4099ULL})
      for (const std::uint64_t spread : {0ULL, 1ULL, 3ULL, 1000ULL}) {
        check_selection_against_the_sort<std::uint32_t>(d, s, spread, ++seed);
        check_selection_against_the_sort<std::uint64_t>(d, s, spread, ++seed);
      }
  // Where selection pays: few chunks of long runs; not thousands of chunks of short ones.
  EXPECT_TRUE(splitters_by_selection_pays(11, 95'325));
  EXPECT_TRUE(splitters_by_selection_pays(37, 28'339));
  EXPECT_FALSE(splitters_by_selection_pays(1594, 657));
  EXPECT_FALSE(splitters_by_selection_pays(4096, 256));
  // And splitters_of takes whichever pays, with the same result.
  std::vector<std::uint64_t> candidates(11 * 5000);
  std::mt19937_64 rng{99};
  for (std::uint64_t& k : candidates) k = rng() % 20'000;
  for (std::uint64_t i = 0; i < 11; ++i)
    std::sort(candidates.begin() + static_cast<std::ptrdiff_t>(i * 5000),
              candidates.begin() + static_cast<std::ptrdiff_t>((i + 1) * 5000));
  const splitter_set<std::uint64_t> selected =
      splitters_by_selection(std::span<const std::uint64_t>{candidates}, 11);
  const splitter_set<std::uint64_t> of = splitters_of(std::span<std::uint64_t>{candidates}, 11);
  EXPECT_EQ(of.values, selected.values);
  EXPECT_EQ(of.est, selected.est);
}

TEST(Splitters, RandomCandidatesStayInTheirPiecesOfTheRun)
{
  for (std::uint64_t len : {1ULL, 5ULL, 64ULL, 1000ULL, 1'000'003ULL})
    for (std::uint64_t s = 1; s <= std::min<std::uint64_t>(len, 40); ++s)
      for (std::uint64_t x = 0; x < s; ++x)
        for (const std::uint64_t draw : {0ULL, 1ULL, 12345ULL, ~0ULL}) {
          const std::uint64_t p = random_candidate_position(x, s, len, draw);
          ASSERT_GE(p, x * len / s);
          ASSERT_LT(p, (x + 1) * len / s);
        }
}

INSTANTIATE_TEST_SUITE_P(Shapes, PlannerInvariants,
                         ::testing::Values(shape::distinct, shape::sorted_distinct, shape::random,
                                           shape::all_equal, shape::few_unique,
                                           shape::one_heavy));

// The encoded run source against the plain array it was made from: keys by position, both
// bounds from any start in any piece of a run, round 2's slices and restore's ranges decoded.
TEST(EncodedRuns, ReadSearchAndDecodeLikeThePlainArray)
{
  for (const shape sh : {shape::random, shape::few_unique, shape::sorted_distinct}) {
    // Runs of 1, 2047, 2048, 2049 and many blocks: d = 2 and 3 over 4 * 2048 * d^2 + 3 keys.
    // Dealt into d bins, into one (no dealing) and into two of three.
    for (const auto& [d, g] : {std::pair{2ULL, 0ULL}, std::pair{3ULL, 0ULL}, std::pair{3ULL, 1ULL},
                              std::pair{3ULL, 2ULL}}) {
      const std::uint64_t n = 4 * codec::block_keys * d * d + 3;
      SCOPED_TRACE("d=" + std::to_string(d) + " g=" + std::to_string(g) + " shape " +
                   std::to_string(static_cast<int>(sh)));
      const chunk_plan plan{.n = n, .capacity = n, .d = d, .bins = g};
      const keys_t t = simulate_round1(make_keys(n, sh, n + d), plan);
      const encoded_output enc = encode_round1(t, plan, {d - 1});
      const encoded_runs<std::uint64_t> source{plan, t.data(), enc.chunks};
      const raw_runs<std::uint64_t> raw{t.data()};
      std::mt19937_64 rng{d};
      for (const run& r : make_run_table(plan)) {
        std::vector<std::uint64_t> got(r.length);
        source.read(r, r.length, [](std::uint64_t x) { return x; }, got.data());
        ASSERT_TRUE(std::equal(got.begin(), got.end(), t.begin() + static_cast<long>(r.offset)));
        // Pieces of the run: the whole, one key, across a block boundary, at its end.
        const std::uint64_t cut = std::min<std::uint64_t>(r.length - 1, codec::block_keys - 5);
        for (const run piece : {r, run{r.offset + cut, 1}, run{r.offset + cut, r.length - cut}}) {
          for (int probe = 0; probe < 40; ++probe) {
            const std::uint64_t pick = t[piece.offset + rng() % piece.length];
            const std::uint64_t key = pick + (rng() % 3) - 1;
            const std::uint64_t from = rng() % (piece.length + 1);
            EXPECT_EQ(source.lower_bound(piece, from, key), raw.lower_bound(piece, from, key));
            EXPECT_EQ(source.upper_bound(piece, from, key), raw.upper_bound(piece, from, key));
          }
          std::vector<std::uint64_t> decoded(piece.length + 3, 0);
          const codec::encoded_slice sl = source.slice_of(piece, 3);
          if (sl.index == nullptr) continue;  // the raw chunk: its keys are read in place
          codec::decode<std::uint64_t>(sl, std::span<std::uint64_t>{decoded});
          EXPECT_TRUE(std::equal(decoded.begin() + 3, decoded.end(),
                                 t.begin() + static_cast<long>(piece.offset)));
        }
      }
      for (int range = 0; range < 20; ++range) {
        const std::uint64_t first = rng() % n;
        const std::uint64_t count = range == 0 ? n - first : rng() % (n - first + 1);
        std::vector<std::uint64_t> got(count);
        source.decode_range(range == 0 ? 0 : first, range == 0 ? n : count,
                            range == 0 ? (got.resize(n), got.data()) : got.data());
        const std::uint64_t from = range == 0 ? 0 : first;
        EXPECT_TRUE(std::equal(got.begin(), got.end(), t.begin() + static_cast<long>(from)));
      }
    }
  }
}

TEST(Splitters, DifferingBitsAreThoseInWhichAChunksBoundsDiffer)
{
  // Chunk k lies between splitters k - 1 and k; the first from 0, the last up to the greatest.
  const splitter_set<std::uint64_t> s{.values = {0x10, 0x1F, 0x20, 0x20}, .est = {1, 1, 1, 1}};
  EXPECT_EQ(differing_bits(s, 0), 5U);   // 0 .. 0x10
  EXPECT_EQ(differing_bits(s, 1), 4U);   // 0x10 .. 0x1F
  EXPECT_EQ(differing_bits(s, 2), 6U);   // 0x1F .. 0x20
  EXPECT_EQ(differing_bits(s, 3), 0U);   // 0x20 .. 0x20: every key equal
  EXPECT_EQ(differing_bits(s, 4), 64U);  // 0x20 .. the greatest u64
  const splitter_set<std::uint32_t> narrow{.values = {0x80000000U}, .est = {1}};
  EXPECT_EQ(differing_bits(narrow, 0), 32U);
  EXPECT_EQ(differing_bits(narrow, 1), 31U);
  const splitter_set<std::uint32_t> one_chunk{};
  EXPECT_EQ(differing_bits(one_chunk, 0), 32U);
}

// Round 2 cuts each chunk's dealt bins from one search in bin 0 and a few keys of the others
// (slice_dealt_runs): every run's cut must still be the count of its keys at most the splitter,
// counted here key by key, for every number of bins (one; fewer than d; d; as many as the
// smallest chunk holds keys, and one fewer, so that bins hold one key or two), chunks of sizes
// not a multiple of g, every shape, and splitters below, among and above the keys, repeated
// ones included; on raw runs and on encoded ones.
TEST(Slicing, DealtCutsCountEachRunsKeysAtMostTheSplitter)
{
  for (const shape sh : {shape::random, shape::few_unique, shape::all_equal,
                         shape::sorted_distinct, shape::one_heavy}) {
    for (const std::uint64_t n : {1'000ULL, 30'011ULL}) {
      chunk_plan base = make_plan(n, device_capacity{.elements = n / 5 + 3, .bytes_per_element = 8},
                                  std::nullopt, 8);
      ASSERT_FALSE(base.in_core());
      std::uint64_t smallest_chunk = n;
      for (std::uint64_t i = 0; i < base.d; ++i)
        smallest_chunk = std::min(smallest_chunk, base.chunk_size(i));
      const std::uint64_t most_bins = smallest_chunk;  // every run holds a key (a plan's rule)
      for (const std::uint64_t bins : {std::uint64_t{1}, std::uint64_t{3}, std::uint64_t{0},
                                       most_bins - 1, most_bins}) {
        chunk_plan plan = base;
        plan.bins = bins;
        const std::uint64_t g = plan.runs_per_chunk();
        SCOPED_TRACE("shape " + std::to_string(static_cast<int>(sh)) + " n " +
                     std::to_string(n) + " d " + std::to_string(plan.d) + " g " +
                     std::to_string(g));
        const keys_t input = make_keys(n, sh, n + g);
        const keys_t t = simulate_round1(input, plan);
        const std::vector<run> runs = make_run_table(plan);
        // Splitters: the chunks' own keys, with values below and above them all and repeats.
        std::mt19937_64 rng{g * 7 + n};
        splitter_set<std::uint64_t> splitters;
        for (std::uint64_t k = 0; k + 1 < plan.d; ++k) {
          const std::uint64_t pick = rng() % 8;
          splitters.values.push_back(pick == 0   ? 0
                                     : pick == 1 ? ~std::uint64_t{0}
                                                 : input[rng() % n]);
        }
        std::sort(splitters.values.begin(), splitters.values.end());
        if (plan.d > 3) splitters.values[1] = splitters.values[2];
        splitters.est.assign(splitters.values.size(), 0);

        const encoded_output enc = encode_round1(t, plan, {0});
        const std::vector<final_chunk> on_raw =
            slice_dealt_runs(raw_runs<std::uint64_t>{t.data()}, plan, runs, splitters);
        const std::vector<final_chunk> on_encoded = slice_dealt_runs(
            encoded_runs<std::uint64_t>{plan, t.data(), enc.chunks}, plan, runs, splitters);
        ASSERT_EQ(on_raw.size(), plan.d);
        for (std::uint64_t k = 0; k < plan.d; ++k) {
          // The slices of final chunk k, expected: in every run, from the count of its keys
          // at most splitter k-1 to the count at most splitter k.
          std::vector<slice> expected;
          std::uint64_t size = 0;
          for (const run& r : runs) {
            const auto at_most = [&](std::uint64_t j) -> std::uint64_t {
              if (j + 1 == plan.d) return r.length;
              std::uint64_t count = 0;
              for (std::uint64_t x = 0; x < r.length; ++x)
                count += t[r.offset + x] <= splitters.values[j] ? 1 : 0;
              return count;
            };
            const std::uint64_t lo = k == 0 ? 0 : at_most(k - 1);
            const std::uint64_t hi = at_most(k);
            if (hi > lo) expected.push_back(slice{r.offset + lo, hi - lo});
            size += hi - lo;
          }
          EXPECT_EQ(on_raw[k].slices, expected) << "final chunk " << k;
          EXPECT_EQ(on_raw[k].size, size) << "final chunk " << k;
          EXPECT_EQ(on_encoded[k].slices, expected) << "final chunk " << k << ", encoded";
        }
      }
    }
  }
}

TEST(Slicing, LargestFirstOrdersBySize)
{
  std::vector<final_chunk> c(4);
  c[0].size = 3;
  c[1].size = 9;
  c[2].size = 1;
  c[3].size = 9;
  EXPECT_EQ(largest_first(c), (std::vector<std::uint64_t>{1, 3, 0, 2}));
}

}  // namespace
}  // namespace gpusort::detail
