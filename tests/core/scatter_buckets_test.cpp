// The scattered rounds' buckets (core/plan/scatter_buckets): the tuning's arithmetic, the cuts of
// a sample, the slices of a sorted chunk and the chunk-ordered places. Every expectation comes
// from a brute-force count or a hand-worked figure, not from the code under test.
#include "core/plan/scatter_buckets.hpp"

#include <gpusort/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace gpusort::detail {
namespace {

using keys_t = std::vector<std::uint64_t>;
constexpr std::uint64_t max32 = 0xFFFFFFFFULL;
constexpr std::uint64_t max64 = std::numeric_limits<std::uint64_t>::max();
constexpr std::array<std::uint64_t, 3> job_sizes{1'000'000, std::uint64_t{1} << 30, 3'000'000'007};
constexpr std::array<std::uint64_t, 4> capacities{1000, 65536, 786432, std::uint64_t{1} << 24};

/// m distinct keys drawn uniformly from [0, top), sorted.
keys_t distinct_sample(std::uint64_t m, std::uint64_t top, std::uint64_t seed)
{
  std::mt19937_64 rng{seed};
  keys_t s;
  while (s.size() < m) {
    while (s.size() < m) s.push_back(rng() % top);
    std::sort(s.begin(), s.end());
    s.erase(std::unique(s.begin(), s.end()), s.end());
  }
  return s;
}

/// Keys k with lower[b] <= k < lower[b + 1] (the last bucket unbounded), by scanning them all.
std::uint64_t brute_count(const keys_t& keys, const scatter_buckets& bk, std::uint64_t b)
{
  const bool last = b + 1 == bk.count();
  return static_cast<std::uint64_t>(std::count_if(keys.begin(), keys.end(), [&](std::uint64_t k) {
    return bk.lower[b] <= k && (last || k < bk.lower[b + 1]);
  }));
}

/// The bucket whose bounds hold k, by a linear walk.
std::uint64_t bucket_of(const scatter_buckets& bk, std::uint64_t k)
{
  std::uint64_t b = 0;
  while (b + 1 < bk.count() && bk.lower[b + 1] <= k) ++b;
  return b;
}

/// Sample keys in each bucket, by one walk of the sorted sample (brute_count per bucket would
/// take B times as long: minutes under a sanitizer at thousands of buckets).
keys_t counts_by_walk(const keys_t& sorted, const scatter_buckets& bk)
{
  keys_t counts(bk.count(), 0);
  std::uint64_t b = 0;
  for (const std::uint64_t k : sorted) {
    while (b + 1 < bk.count() && bk.lower[b + 1] <= k) ++b;
    if (k >= bk.lower[b]) ++counts[b];
  }
  return counts;
}

/// What every cut keeps: bounds increasing, every sample key in a bucket, regions one after
/// another from the formula, within the capacity and of at most q sample keys unless equal
/// (aligned bounds, which move keys between buckets, only the capacity).
void expect_well_formed(const keys_t& s, const scatter_buckets& bk, std::uint64_t n,
                        std::uint64_t capacity, const scatter_tuning& t)
{
  ASSERT_GT(bk.count(), 0U);
  ASSERT_EQ(bk.equal.size(), bk.count());
  ASSERT_EQ(bk.region.size(), bk.count() + 1);
  EXPECT_EQ(bk.region[0], 0U);
  for (std::uint64_t b = 0; b + 1 < bk.count(); ++b) EXPECT_LT(bk.lower[b], bk.lower[b + 1]);
  const keys_t counts = counts_by_walk(s, bk);
  std::uint64_t total = 0;
  for (std::uint64_t b = 0; b < bk.count(); ++b) {
    const std::uint64_t c = counts[b];
    const auto cd = static_cast<double>(c);
    const double want = std::ceil((cd + t.z * std::sqrt(cd) + t.z * t.z) /
                                  static_cast<double>(s.size()) * static_cast<double>(n));
    const std::uint64_t room = bk.region[b + 1] - bk.region[b];
    EXPECT_EQ(room, std::min(n, static_cast<std::uint64_t>(want))) << "bucket " << b;
    if (bk.equal[b] == 0) {
      if (!t.prefix_bounds) {
        EXPECT_LE(c, t.samples_per_bucket) << "bucket " << b;
      }
      EXPECT_LE(room, capacity) << "bucket " << b;
    }
    total += c;
  }
  EXPECT_EQ(total, s.size());
}

std::uint64_t equal_buckets(const scatter_buckets& bk)
{
  return static_cast<std::uint64_t>(std::count(bk.equal.begin(), bk.equal.end(), 1));
}

TEST(ScatterTuning, RegionMatchesHandWorkedFigures)
{
  const scatter_tuning t;  // q 1024, z 5: a full bucket grows by (1024 + 160 + 25) / 1024
  EXPECT_EQ(t.region(1024, 40960, 4096), 12090U);
  EXPECT_EQ(t.region(0, 4096, 1024), 100U);     // z^2 only
  EXPECT_EQ(t.region(100, 1 << 20, 1 << 14), 11200U);  // (100 + 50 + 25) * 64
  EXPECT_EQ(t.region(1024, 100, 1024), 100U);   // 119, capped at n
  EXPECT_EQ(t.region(3, 777, 0), 777U);         // no sample: the whole job
}

TEST(ScatterTuning, MeanBucketKeepsFullRegionWithinCapacity)
{
  const scatter_tuning t;
  for (const std::uint64_t n : job_sizes)
    for (const std::uint64_t cap : capacities) {
      const std::uint64_t m = t.samples(n, cap);
      EXPECT_EQ(m % t.samples_per_bucket, 0U);
      EXPECT_LE(t.region(t.samples_per_bucket, n, m), cap) << n << " keys, capacity " << cap;
      // Not needlessly small either, where many buckets make the rounding up cheap.
      if (n >= 64 * cap) {
        EXPECT_GT(t.region(t.samples_per_bucket, n, m), cap * 8 / 10) << n << ", " << cap;
      }
    }
}

TEST(ScatterTuning, Round1ElementsHoldTheRegionsOfADistinctSample)
{
  const scatter_tuning t;
  for (const std::uint64_t n : job_sizes)
    for (const std::uint64_t cap : capacities) {
      const std::uint64_t m = t.samples(n, cap);
      if (m > (std::uint64_t{1} << 21)) continue;  // too big a sample for a unit test
      const keys_t s = distinct_sample(m, max64, n ^ cap);
      const scatter_buckets bk = make_scatter_buckets(s, n, cap, 64, t);
      const std::uint64_t r1 = t.round1_elements(n, cap);
      EXPECT_GE(r1, n);
      EXPECT_GE(r1, bk.region_elements()) << n << " keys, capacity " << cap;
    }
}

TEST(ScatterBuckets, DistinctSampleCutsEveryQKeys)
{
  const std::uint64_t n = 10'000'000, cap = 65536;
  scatter_tuning t;
  t.prefix_bounds = false;  // the sample's own cuts (the aligned ones: PrefixBounds* below)
  for (const unsigned bits : {32U, 64U}) {
    const keys_t s = distinct_sample(t.samples(n, cap), bits == 32 ? max32 + 1 : max64, bits);
    const scatter_buckets bk = make_scatter_buckets(s, n, cap, bits, t);
    EXPECT_EQ(bk.lower[0], 0U);  // the first bucket takes the keys below the sample's least
    EXPECT_EQ(bk.count(), s.size() / t.samples_per_bucket);
    EXPECT_EQ(equal_buckets(bk), 0U);
    expect_well_formed(s, bk, n, cap, t);
  }
}

TEST(ScatterBuckets, HeavyKeyGetsAnEqualBucket)
{
  const std::uint64_t n = 10'000'000, cap = 65536;
  const scatter_tuning t;
  const std::uint64_t m = t.samples(n, cap);
  keys_t s = distinct_sample(m - m * 4 / 10, 1'000'000, 5);
  std::erase(s, 12345);
  s.insert(s.end(), m - s.size(), 12345);  // 40% of the sample
  std::sort(s.begin(), s.end());
  const scatter_buckets bk = make_scatter_buckets(s, n, cap, 64, t);
  expect_well_formed(s, bk, n, cap, t);
  EXPECT_EQ(bk.lower[0], 0U);
  EXPECT_EQ(equal_buckets(bk), 1U);
  const std::uint64_t b = bucket_of(bk, 12345);
  EXPECT_EQ(bk.lower[b], 12345U);
  EXPECT_EQ(bk.equal[b], 1);
  ASSERT_LT(b + 1, bk.count());
  EXPECT_EQ(bk.lower[b + 1], 12346U);
}

TEST(ScatterBuckets, LightRunsAreNeverSplit)
{
  const std::uint64_t n = 10'000'000, cap = 65536;
  const scatter_tuning t;
  keys_t s(t.samples(n, cap));
  for (std::uint64_t i = 0; i < s.size(); ++i) s[i] = 2 * i;
  // Runs of 2 to q/2 - 1 equal keys every 600 to 800 places: many straddle a cut.
  std::mt19937_64 rng{11};
  for (std::uint64_t p = 300; p + t.samples_per_bucket < s.size(); p += 600 + rng() % 200) {
    const std::uint64_t len = 2 + rng() % (t.samples_per_bucket / 2 - 2);
    std::fill_n(s.begin() + static_cast<std::ptrdiff_t>(p), len, s[p]);
  }
  const scatter_buckets bk = make_scatter_buckets(s, n, cap, 64, t);
  expect_well_formed(s, bk, n, cap, t);
  EXPECT_EQ(equal_buckets(bk), 0U);
  std::uint64_t short_buckets = 0;  // cuts moved back: the runs did straddle some
  for (std::uint64_t b = 0; b + 1 < bk.count(); ++b)
    short_buckets += brute_count(s, bk, b) < t.samples_per_bucket ? 1 : 0;
  EXPECT_GT(short_buckets, 0U);
  for (std::uint64_t i = 1; i < s.size(); ++i) {
    if (s[i] == s[i - 1]) {
      EXPECT_EQ(bucket_of(bk, s[i]), bucket_of(bk, s[i - 1])) << s[i];
    }
  }
}

TEST(ScatterBuckets, RunsOfHalfQOrMoreAreHeavy)
{
  const std::uint64_t n = 10'000'000, cap = 65536;
  const scatter_tuning t;
  const std::uint64_t q = t.samples_per_bucket;
  keys_t s(t.samples(n, cap));
  for (std::uint64_t i = 0; i < s.size(); ++i) s[i] = 2 * i;
  const auto run = [&](std::uint64_t p, std::uint64_t len) {
    std::fill_n(s.begin() + static_cast<std::ptrdiff_t>(p), len, s[p]);
    return s[p];
  };
  // Worked by hand: q/2 keys across the cut at q (heavy, the next cut at 5q/4 + q), q/2 - 1
  // across that one (light, the cut moves to its start), then more than q keys starting just
  // where a bucket does (heavy, with no empty bucket before it).
  const std::uint64_t half = run(q - q / 4, q / 2);
  const std::uint64_t light = run(2 * q + q / 4 - 100, q / 2 - 1);
  const std::uint64_t from_cut = run(3 * q + q / 4 - 100, q + 500);
  const scatter_buckets bk = make_scatter_buckets(s, n, cap, 64, t);
  expect_well_formed(s, bk, n, cap, t);
  EXPECT_EQ(equal_buckets(bk), 2U);
  EXPECT_EQ(bk.equal[bucket_of(bk, half)], 1);
  EXPECT_EQ(bk.lower[bucket_of(bk, light)], light);
  EXPECT_EQ(bk.equal[bucket_of(bk, light)], 0);
  EXPECT_EQ(bk.lower[bucket_of(bk, from_cut)], from_cut);
  EXPECT_EQ(bk.equal[bucket_of(bk, from_cut)], 1);
}

TEST(ScatterBuckets, AllEqualSample)
{
  const scatter_tuning t;
  const keys_t s(t.samples(1'000'000, 65536), 7);
  const scatter_buckets bk = make_scatter_buckets(s, 1'000'000, 65536, 64, t);
  const std::uint64_t b = bucket_of(bk, 7);
  ASSERT_LE(b, 1U);  // at most [0, 7) before it
  EXPECT_EQ(bk.lower[0], b == 0 ? 7U : 0U);
  EXPECT_EQ(bk.lower[b], 7U);
  EXPECT_EQ(bk.equal[b], 1);
  ASSERT_EQ(b + 2, bk.count());  // then one bucket from 8 up
  EXPECT_EQ(bk.lower[b + 1], 8U);
  EXPECT_EQ(bk.equal[b + 1], 0);
}

// A key the sample missed below a heavy first key, or between two heavy keys side by side, has a
// bucket of its own: the cut of a chunk puts every key below lower[b + 1] in bucket b, and an
// equal bucket's keys go out as its one key (a sample of only 7s once gave the equal bucket
// lower bound 0's place, and an input 3 came out as 7).
TEST(ScatterBuckets, KeysBelowOrBetweenHeavyKeysStayOutOfTheirEqualBuckets)
{
  const scatter_tuning t;
  const std::uint64_t m = t.samples(1'000'000, 65536);
  const keys_t first(m, 7);
  const scatter_buckets bk = make_scatter_buckets(first, 1'000'000, 65536, 64, t);
  EXPECT_EQ(bk.lower[0], 0U);
  const keys_t input{3, 7, 7, 9};
  keys_t counts(bk.count());
  bucket_counts<std::uint64_t>(input, bk, counts);
  EXPECT_EQ(counts[bucket_of(bk, 7)], 2U);
  // Half 20s, half 30s: the keys 21..29 lie between two equal buckets.
  keys_t pair(m, 20);
  std::fill(pair.begin() + static_cast<std::ptrdiff_t>(m / 2), pair.end(), 30);
  const scatter_buckets two = make_scatter_buckets(pair, 1'000'000, 65536, 64, t);
  expect_well_formed(pair, two, 1'000'000, 65536, t);
  EXPECT_EQ(equal_buckets(two), 2U);
  const keys_t between{20, 25, 30};
  keys_t held(two.count());
  bucket_counts<std::uint64_t>(between, two, held);
  EXPECT_EQ(held[bucket_of(two, 20)], 1U);
  EXPECT_EQ(held[bucket_of(two, 30)], 1U);
  EXPECT_EQ(two.equal[bucket_of(two, 25)], 0);
}

TEST(ScatterBuckets, HeavyGreatestKeyEndsTheBuckets)
{
  const scatter_tuning t;
  const std::uint64_t n = 1'000'000, cap = 65536, m = t.samples(n, cap);
  for (const unsigned bits : {32U, 64U}) {
    const std::uint64_t top = bits == 32 ? max32 : max64;
    keys_t s = distinct_sample(m - m * 4 / 10, top, bits);  // all below top
    s.insert(s.end(), m - s.size(), top);
    const scatter_buckets bk = make_scatter_buckets(s, n, cap, bits, t);
    expect_well_formed(s, bk, n, cap, t);
    EXPECT_EQ(bk.lower.back(), top) << bits;
    EXPECT_EQ(bk.equal.back(), 1) << bits;
    for (const std::uint64_t l : bk.lower) EXPECT_LE(l, top) << bits;
    EXPECT_EQ(bk.differing_bits(bk.count() - 1, bits), 0U);  // a single key
  }
}

TEST(ScatterBuckets, ProbesAndDifferingBits)
{
  const scatter_tuning t;
  for (const unsigned bits : {32U, 64U}) {
    const std::uint64_t top = bits == 32 ? max32 : max64;
    keys_t s = distinct_sample(t.samples(1'000'000, 65536), top, 3);
    s.insert(s.end(), 2000, s[s.size() / 2]);  // and an equal bucket
    std::sort(s.begin(), s.end());
    const scatter_buckets bk = make_scatter_buckets(s, 1'000'000, 65536, bits, t);
    const auto probes = bk.probes();
    ASSERT_EQ(probes.size(), bk.count() - 1);
    EXPECT_TRUE(std::equal(probes.begin(), probes.end(), bk.lower.begin() + 1));
    for (std::uint64_t b = 0; b < bk.count(); ++b) {
      const std::uint64_t lo = bk.lower[b];
      const std::uint64_t hi = b + 1 < bk.count() ? bk.lower[b + 1] - 1 : top;
      unsigned d = 0;  // the fewest low bits that, dropped, leave lo and hi alike
      while (d < 64 && (lo >> d) != (hi >> d)) ++d;
      EXPECT_EQ(bk.differing_bits(b, bits), d) << "bucket " << b << " of " << bits << " bits";
    }
  }
}

TEST(ScatterBuckets, RejectsBadSamples)
{
  EXPECT_THROW((void)make_scatter_buckets(keys_t{}, 1000, 1000, 64), gpusort::logic_error);
  EXPECT_THROW((void)make_scatter_buckets(keys_t{1, 5, 3, 9}, 1000, 1000, 64),
               gpusort::logic_error);
  EXPECT_THROW((void)make_scatter_buckets(keys_t{1, 3, 5}, 1000, 1000, 16), gpusort::logic_error);
}

/// Aligned bounds (scatter_tuning::prefix_bounds): every bound past the first a multiple of
/// 2^(width - sort_bits), sort_bits a whole number of bytes below the width, no equal bucket,
/// the buckets well formed, their regions within what round1_elements counts.
void expect_aligned(const keys_t& s, const scatter_buckets& bk, std::uint64_t n,
                    std::uint64_t capacity, const scatter_tuning& t, unsigned width)
{
  ASSERT_EQ(bk.sort_bits % 8, 0U);
  ASSERT_GT(bk.sort_bits, 0U);
  ASSERT_LT(bk.sort_bits, width) << "aligned at all";
  const std::uint64_t low = (std::uint64_t{1} << (width - bk.sort_bits)) - 1;
  EXPECT_EQ(bk.lower[0], 0U);
  for (std::uint64_t b = 0; b < bk.count(); ++b) {
    EXPECT_EQ(bk.lower[b] & low, 0U) << "bucket " << b;
    EXPECT_EQ(bk.equal[b], 0) << "bucket " << b;
  }
  expect_well_formed(s, bk, n, capacity, t);
  EXPECT_LE(bk.region_elements(), t.round1_elements(n, capacity));
}

TEST(ScatterBuckets, PrefixBoundsAlignToTheFewestTopBitsThatFit)
{
  scatter_tuning t;
  t.prefix_bounds = true;
  for (const unsigned width : {32U, 64U}) {
    const std::uint64_t top = width == 64 ? max64 : max32;
    // 8 GiB of u64 at 1/256 (786432-element tasks, 1.6M sample keys) and 64M keys in tasks
    // of 65536 (1.2M sample keys, 1200 buckets).
    for (const auto& [n, capacity] : {std::pair{std::uint64_t{1} << 30, std::uint64_t{786432}},
                                      std::pair{std::uint64_t{1} << 26, std::uint64_t{65536}}}) {
      const std::uint64_t m = t.samples(n, capacity);
      const keys_t s = distinct_sample(m, top, width + capacity);
      const scatter_buckets bk = make_scatter_buckets(s, n, capacity, width, t);
      SCOPED_TRACE(std::to_string(width) + "-bit keys, capacity " + std::to_string(capacity));
      expect_aligned(s, bk, n, capacity, t, width);
      // Uniform keys: the finer cut leaves a bucket room for q/16 = 64 more sample keys, and
      // a 24-bit prefix's cell holds about one of them here (a 16-bit one about 25), so at
      // most 24 bits are needed.
      EXPECT_LE(bk.sort_bits, 24U);
      // The same sample cut as plain buckets of cut_every() keys, then aligned by hand: at
      // sort_bits the bounds are bk's, and at a byte fewer some bucket outgrows the capacity.
      scatter_tuning plain = t;
      plain.prefix_bounds = false;
      plain.samples_per_bucket = t.cut_every();
      const scatter_buckets cut = make_scatter_buckets(s, n, capacity, width, plain);
      const auto aligned = [&](unsigned bits) {
        const std::uint64_t low = (std::uint64_t{1} << (width - bits)) - 1;
        keys_t lower{0};
        for (std::uint64_t b = 1; b < cut.count(); ++b)
          if ((cut.lower[b] & ~low) != lower.back()) lower.push_back(cut.lower[b] & ~low);
        return lower;
      };
      EXPECT_EQ(aligned(bk.sort_bits), bk.lower);
      if (bk.sort_bits > 8) {
        scatter_buckets fewer;
        fewer.lower = aligned(bk.sort_bits - 8);
        fewer.equal.assign(fewer.lower.size(), 0);
        std::uint64_t largest = 0;
        for (const std::uint64_t c : counts_by_walk(s, fewer))
          largest = std::max(largest, t.region(c, n, m));
        EXPECT_GT(largest, capacity) << "a byte fewer would have fit";
      }
    }
  }
}

TEST(ScatterBuckets, PrefixBoundsLeaveHeavyKeysAndAFullWidthAlone)
{
  scatter_tuning t;
  t.prefix_bounds = true;
  t.samples_per_bucket = 16;
  // A heavy key: its equal bucket holds one key, which no prefix of fewer bits than the width
  // can bound, so the buckets stay as cut and round 1 sorts on every bit.
  keys_t s;
  for (std::uint64_t i = 0; i < 200; ++i) s.push_back(i * 1000);
  s.insert(s.end(), 40, 77777);
  std::sort(s.begin(), s.end());
  const scatter_buckets heavy = make_scatter_buckets(s, 100'000, 100'000, 64, t);
  ASSERT_GT(equal_buckets(heavy), 0U);
  EXPECT_EQ(heavy.sort_bits, 64U);
  // Without the switch the bounds are the sample's and sort_bits the width.
  scatter_tuning plain;
  plain.prefix_bounds = false;
  plain.samples_per_bucket = 16;
  const keys_t distinct = distinct_sample(400, max32, 5);
  const scatter_buckets as_cut = make_scatter_buckets(distinct, 100'000, 100'000, 32, plain);
  EXPECT_EQ(as_cut.sort_bits, 32U);
  for (std::uint64_t b = 1; b < as_cut.count(); ++b)
    EXPECT_EQ(as_cut.lower[b], distinct[b * 16]) << "cut every q keys";
}

// Round 1 on a GPU with aligned bounds sorts a chunk on its top sort_bits bits alone and finds
// the slices by binary search (count_below_runs): the counts must be the buckets' own. Here a
// chunk of keys with many equal top bits, stably sorted on those bits alone, then bucket_counts.
TEST(ScatterBuckets, AChunkInOrderOfItsTopBitsIsCutAtAlignedBounds)
{
  scatter_tuning t;
  t.prefix_bounds = true;
  t.samples_per_bucket = 64;
  std::mt19937_64 rng{23};
  for (const unsigned width : {32U, 64U}) {
    const std::uint64_t top = width == 64 ? max64 : max32;
    // Keys clustered in a few hundred top-byte cells, so cells hold many of them.
    keys_t keys(50'000);
    for (auto& k : keys) k = (rng() % 300) * (top / 300) + rng() % (top / 300 / 7);
    keys_t sample;
    for (std::uint64_t i = 0; i < keys.size(); i += 11) sample.push_back(keys[i]);
    std::sort(sample.begin(), sample.end());
    const scatter_buckets bk = make_scatter_buckets(sample, keys.size(), keys.size(), width, t);
    ASSERT_LT(bk.sort_bits, width) << width;
    const unsigned shift = width - bk.sort_bits;
    std::stable_sort(keys.begin(), keys.end(),
                     [&](std::uint64_t a, std::uint64_t b) { return (a >> shift) < (b >> shift); });
    ASSERT_FALSE(std::is_sorted(keys.begin(), keys.end())) << "a test of a partial order";
    keys_t counts(bk.count());
    if (width == 64) {
      bucket_counts<std::uint64_t>(keys, bk, counts);
    } else {
      const std::vector<std::uint32_t> narrow(keys.begin(), keys.end());
      bucket_counts<std::uint32_t>(narrow, bk, counts);
    }
    for (std::uint64_t b = 0; b < bk.count(); ++b)
      EXPECT_EQ(counts[b], brute_count(keys, bk, b)) << width << "-bit, bucket " << b;
  }
}

template <typename K>
class ScatterBucketCounts : public ::testing::Test {};
using key_types = ::testing::Types<std::uint32_t, std::uint64_t>;
TYPED_TEST_SUITE(ScatterBucketCounts, key_types);

TYPED_TEST(ScatterBucketCounts, MatchBruteForce)
{
  using K = TypeParam;
  const std::uint64_t top = std::numeric_limits<K>::max();
  std::mt19937_64 rng{17};
  // Duplicates, a heavy key, the width's extremes, keys on the bounds.
  std::vector<K> keys(6000);
  for (K& k : keys) k = static_cast<K>(rng() % 3 == 0 ? 1000 : rng() % 2500);
  keys.insert(keys.end(), {K{0}, static_cast<K>(top), static_cast<K>(top - 1)});
  std::sort(keys.begin(), keys.end());
  const keys_t wide(keys.begin(), keys.end());
  keys_t sample;
  for (std::uint64_t i = 5; i < keys.size(); i += 13) sample.push_back(keys[i]);
  scatter_tuning t;
  t.samples_per_bucket = 16;  // many buckets from a small sample
  const scatter_buckets from_sample =
      make_scatter_buckets(sample, keys.size(), keys.size(), sizeof(K) * 8, t);
  ASSERT_GT(equal_buckets(from_sample), 0U);
  scatter_buckets by_hand;
  by_hand.lower = {0, 10, 11, 1000, 1001, top};
  by_hand.equal.assign(by_hand.lower.size(), 0);
  for (const scatter_buckets* bk : std::array{&from_sample, &std::as_const(by_hand)}) {
    keys_t counts(bk->count(), 99);
    bucket_counts<K>(keys, *bk, counts);
    std::uint64_t total = 0;
    for (std::uint64_t b = 0; b < bk->count(); ++b) {
      EXPECT_EQ(counts[b], brute_count(wide, *bk, b)) << "bucket " << b;
      total += counts[b];
    }
    EXPECT_EQ(total, keys.size());
    keys_t none(bk->count(), 99);
    bucket_counts<K>(std::span<const K>{}, *bk, none);
    EXPECT_EQ(none, keys_t(bk->count(), 0));
  }
}

/// Two buckets with regions [0, 10) and [10, 25); three chunks' counts and places (by hand).
scatter_buckets two_buckets()
{
  return scatter_buckets{.lower = {0, 1000}, .equal = {0, 0}, .region = {0, 10, 25}};
}
const std::vector<keys_t> chunk_counts{{3, 4}, {2, 5}, {4, 1}};
const std::vector<keys_t> chunk_places{{0, 10}, {3, 14}, {5, 19}};
void no_check() {}

TEST(ScatterPlaces, PlacesInChunkOrder)
{
  const scatter_buckets bk = two_buckets();
  scatter_places places{bk, 3};
  for (std::uint64_t c = 0; c < 3; ++c) {
    keys_t at(2, 99);
    places.place(c, chunk_counts[c], at, no_check);
    EXPECT_EQ(at, chunk_places[c]) << "chunk " << c;
  }
  EXPECT_EQ(places.filled(0), 9U);
  EXPECT_EQ(places.filled(1), 10U);
}

TEST(ScatterPlaces, ChunkOrderHoldsAcrossThreads)
{
  const scatter_buckets bk = two_buckets();
  scatter_places places{bk, 3};
  std::vector<keys_t> at(3, keys_t(2, 99));
  std::vector<std::thread> threads;
  // The last chunk asks first, chunk 0 last: the later ones must wait for it.
  for (std::uint64_t c = 3; c-- > 0;) {
    threads.emplace_back([&, c] { places.place(c, chunk_counts[c], at[c], no_check); });
    std::this_thread::sleep_for(std::chrono::milliseconds{20});
  }
  for (std::thread& th : threads) th.join();
  for (std::uint64_t c = 0; c < 3; ++c) EXPECT_EQ(at[c], chunk_places[c]) << "chunk " << c;
  EXPECT_EQ(places.filled(0), 9U);
  EXPECT_EQ(places.filled(1), 10U);
}

TEST(ScatterPlaces, OverflowThrowsAndStaysThrown)
{
  const scatter_buckets bk = two_buckets();
  keys_t at(2);
  scatter_places over{bk, 3};
  EXPECT_THROW(over.place(0, keys_t{11, 0}, at, no_check), scatter_overflow);  // room for 10
  EXPECT_THROW(over.place(1, keys_t{0, 0}, at, no_check), scatter_overflow);
  scatter_places full{bk, 3};
  full.place(0, keys_t{10, 15}, at, no_check);  // exactly full: fits
  EXPECT_EQ(at, (keys_t{0, 10}));
  EXPECT_THROW(full.place(1, keys_t{0, 1}, at, no_check), scatter_overflow);
  EXPECT_THROW(full.place(2, keys_t{0, 0}, at, no_check), scatter_overflow);
}

TEST(ScatterPlaces, FailingCheckEndsTheWait)
{
  const scatter_buckets bk = two_buckets();
  scatter_places places{bk, 3};
  keys_t at(2);
  int calls = 0;
  // As a job's check does once another device failed: chunk 0 will never be placed.
  const auto check = [&] {
    if (++calls >= 3) throw gpusort::cancelled{"a device failed"};
  };
  EXPECT_THROW(places.place(1, chunk_counts[1], at, check), gpusort::cancelled);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(places.filled(0), 0U);
}

}  // namespace
}  // namespace gpusort::detail
