// Sorts of rows (include/gpusort/rows.hpp) on the CPU engine against std::stable_sort with a
// comparator written here from each type's definition (tests/support/stable_reference.hpp's
// key_before for the six key types, unsigned bytes, 128-bit halves), never with the words the
// engine compares. Run twice by ctest: the default configuration and a tiny budget, where the
// first words' argsort runs out of core with many chunks.
#include "test_budget.hpp"

#include "tests/support/rows_reference.hpp"

#include "pipeline/rows/move_records.hpp"
#include "pipeline/rows/refine.hpp"

#include <gpusort/error.hpp>
#include <gpusort/rows.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace gpusort {
namespace {

using test::bytes_t;
using test::gathered;
using test::layout_case;
using test::reference_order;

const std::vector<std::uint64_t> sizes{0, 1, 2, 1009, test::tiny_capacity - 1,
                                       test::tiny_capacity + 1, 30'011};

/// An engine for `n` rows: the first words' argsort is (u64 key, position) pairs.
config config_for_rows(std::uint64_t n) { return test::config_for(n, 16); }

TEST(RowsRecords, EveryLayoutMatchesTheStableReference)
{
  for (const layout_case& c : test::layouts()) {
    for (const std::uint64_t n : sizes) {
      if (c.record_bytes == 4096 && n > 5000) continue;  // 120 MiB of records: enough smaller
      engine eng{config_for_rows(n)};
      for (const std::uint64_t distinct : {std::uint64_t{3}, std::uint64_t{0}}) {
        for (const float_order floats : {float_order::total, float_order::numpy}) {
          SCOPED_TRACE(test::trace(c, n, distinct, floats));
          const bytes_t records = test::make_records(n, c.record_bytes, c.fields, distinct, n + 7);
          const bytes_t expected =
              gathered(records, c.record_bytes,
                       reference_order(records, c.record_bytes, c.fields, floats));
          bytes_t out(records.size());
          const record_array in{records.data(), n, c.record_bytes};
          const sort_report rep = sort_records(eng, in, c.fields, out.data(), {.floats = floats});
          EXPECT_EQ(rep.elements, n);
          EXPECT_EQ(rep.bytes, records.size());
          ASSERT_TRUE(test::equal_bytes(out, expected));
          // In place, as a second copy, and as cycles walked where the limit has no room for
          // the copy beside the permutation (large records and many of them: small records
          // cannot hold their words within that limit, and a handful of rows cannot hold the
          // engine's fixed costs, and say so).
          const std::uint64_t no_copy = records.size() + n * sizeof(std::uint32_t) - 1;
          for (const std::uint64_t limit : {std::uint64_t{1} << 40, no_copy}) {
            bytes_t again = records;
            try {
              sort_records(eng, {again.data(), n, c.record_bytes}, c.fields, nullptr,
                           {.floats = floats, .host_memory_limit = limit});
            } catch (const config_error& e) {
              EXPECT_TRUE(limit == no_copy && (c.record_bytes < 100 || n < 1009)) << e.what();
              EXPECT_NE(std::string{e.what()}.find("host_memory_limit"), std::string::npos);
              ASSERT_TRUE(test::equal_bytes(again, records));
              continue;
            }
            ASSERT_TRUE(test::equal_bytes(again, expected)) << "limit " << limit;
          }
        }
      }
    }
  }
}

TEST(RowsColumns, LexsortOfColumnsMatchesTheStableReference)
{
  for (const std::uint64_t n : sizes) {
    engine eng{config_for_rows(n)};
    std::mt19937_64 rng{n};
    // Three columns: few distinct u64 values, f64 with NaNs and zeros, i32 descending.
    std::vector<std::uint64_t> a(n);
    std::vector<double> b(n);
    std::vector<std::int32_t> c(n);
    for (std::uint64_t i = 0; i < n; ++i) {
      a[i] = rng() % 4 << 62;
      const std::uint64_t k = rng() % 9;
      b[i] = k == 0 ? std::nan("") : k == 1 ? -std::nan("") : k == 2 ? -0.0 : k == 3 ? 0.0
                                                                              : double(k % 3);
      c[i] = static_cast<std::int32_t>(rng() % 5) - 2;
    }
    for (const float_order floats : {float_order::total, float_order::numpy}) {
      SCOPED_TRACE("n=" + std::to_string(n));
      std::vector<std::uint64_t> expected(n);
      std::iota(expected.begin(), expected.end(), std::uint64_t{0});
      std::stable_sort(expected.begin(), expected.end(), [&](std::uint64_t x, std::uint64_t y) {
        if (a[x] != a[y]) return a[x] < a[y];
        if (test::key_before(b[x], b[y], order::ascending, floats)) return true;
        if (test::key_before(b[y], b[x], order::ascending, floats)) return false;
        return c[x] > c[y];
      });
      const row_keys keys{n, {column(a), column(b), column(c, order::descending)}};
      std::vector<std::uint64_t> perm(n);
      argsort_rows(eng, keys, perm.data(), 8, {.floats = floats});
      EXPECT_EQ(perm, expected);
      std::vector<std::uint32_t> perm32(n);
      argsort_rows(eng, keys, perm32.data(), 4, {.floats = floats});
      EXPECT_TRUE(std::equal(perm32.begin(), perm32.end(), expected.begin()));
    }
  }
}

TEST(RowsColumns, TwoU64ColumnsEqualOneU128Column)
{
  // The same bytes as two columns (high, low) and as one u128 (low, high) sort alike.
  const std::uint64_t n = 20'011;
  engine eng{config_for_rows(n)};
  std::mt19937_64 rng{5};
  std::vector<std::uint64_t> hi(n), lo(n), wide(2 * n);
  for (std::uint64_t i = 0; i < n; ++i) {
    hi[i] = rng() % 7;
    lo[i] = rng();
    wide[2 * i] = lo[i];
    wide[2 * i + 1] = hi[i];
  }
  std::vector<std::uint64_t> by_columns(n), by_u128(n);
  argsort_rows(eng, {n, {column(hi), column(lo)}}, by_columns.data());
  argsort_rows(eng, {n, {{wide.data(), 16, {column_type::u128}}}}, by_u128.data());
  EXPECT_EQ(by_columns, by_u128);
  EXPECT_TRUE(std::is_sorted(by_columns.begin(), by_columns.end(), [&](auto x, auto y) {
    return hi[x] != hi[y] ? hi[x] < hi[y] : lo[x] < lo[y];
  }));
}

TEST(RowsRefine, LargeTiedGroupsGoThroughTheEngineWordAfterWord)
{
  // Rows equal in their first three words and differing in the fourth, in groups above a
  // small engine threshold: every level of the refinement's large path runs.
  for (const std::uint64_t n : {std::uint64_t{1}, std::uint64_t{1000}, std::uint64_t{30'011}}) {
    engine eng{config_for_rows(n)};
    const std::vector<key_field> fields{{column_type::bytes, 0, 29}};
    std::mt19937_64 rng{n};
    bytes_t records(n * 32);
    for (std::uint64_t i = 0; i < n; ++i) {
      unsigned char* p = records.data() + i * 32;
      std::memset(p, 0x5a, 24);
      p[10] = static_cast<unsigned char>(rng() % 2);  // two groups of n/2 in the first word
      for (int k = 24; k < 32; ++k) p[k] = static_cast<unsigned char>(rng() % 3);
    }
    const auto keys = record_keys({records.data(), n, 32}, fields);
    const detail::row_words words{keys, float_order::total};
    std::vector<std::uint64_t> perm(n);
    detail::argsort_words(eng, words, n, perm.data(), {}, {.engine_group_rows = 16});
    EXPECT_EQ(perm, reference_order(records, 32, fields, float_order::total)) << "n=" << n;
  }
}

/// Moves `records` (of `r` bytes each) in place by `perm` with `saved` bytes of breakpoint
/// room, with 64- and 32-bit indices, and checks both against the gather.
void expect_permuted(const bytes_t& records, std::uint32_t r,
                     const std::vector<std::uint64_t>& perm, std::uint64_t saved)
{
  const std::uint64_t n = perm.size();
  const bytes_t expected = gathered(records, r, perm);
  bytes_t work = records;
  detail::permute_records(work.data(), n, r, perm.data(), saved);
  ASSERT_TRUE(test::equal_bytes(work, expected)) << "n=" << n << " r=" << r
                                                 << " saved=" << saved;
  const std::vector<std::uint32_t> perm32(perm.begin(), perm.end());
  work = records;
  detail::permute_records(work.data(), n, r, perm32.data(), saved);
  ASSERT_TRUE(test::equal_bytes(work, expected)) << "uint32 n=" << n << " r=" << r
                                                 << " saved=" << saved;
}

bytes_t random_bytes(std::uint64_t bytes, std::mt19937_64& rng)
{
  bytes_t out(bytes);
  for (auto& b : out) b = static_cast<unsigned char>(rng());
  return out;
}

TEST(RowsMove, InPlacePermutationOfEveryShape)
{
  // Reversal (pairs no breakpoint cuts), identity, one long cycle, strides, random, cycles of
  // 1 to 9 random rows (most cut by no breakpoint, rotated over several turns), two long
  // cycles each way (with one breakpoint, one of them is cut by none and longer than pass 2
  // searches: pass 3's); breakpoint room of one record up to all of them.
  for (const std::uint64_t n : {std::uint64_t{2}, std::uint64_t{3}, std::uint64_t{1009},
                                std::uint64_t{70'001}}) {
    std::mt19937_64 rng{n};
    std::vector<std::vector<std::uint64_t>> perms;
    std::vector<std::uint64_t> p(n);
    std::iota(p.begin(), p.end(), std::uint64_t{0});
    perms.push_back(p);
    std::reverse(p.begin(), p.end());
    perms.push_back(p);
    for (std::uint64_t i = 0; i < n; ++i) p[i] = (i + 1) % n;
    perms.push_back(p);
    for (std::uint64_t i = 0; i < n; ++i) p[i] = (i * 7919) % n;  // n prime or coprime
    if (std::gcd(n, std::uint64_t{7919}) == 1) perms.push_back(p);
    std::iota(p.begin(), p.end(), std::uint64_t{0});
    std::shuffle(p.begin(), p.end(), rng);
    perms.push_back(p);
    const std::vector<std::uint64_t> order = p;
    for (std::uint64_t i = 0; i < n;) {
      const std::uint64_t len = std::min<std::uint64_t>(1 + rng() % 9, n - i);
      for (std::uint64_t k = 0; k < len; ++k) p[order[i + k]] = order[i + (k + 1) % len];
      i += len;
    }
    perms.push_back(p);
    for (std::uint64_t i = 0; i < n; ++i) p[i] = i + 2 < n ? i + 2 : i % 2;  // evens, odds up
    perms.push_back(p);
    for (std::uint64_t i = 0; i < n; ++i) p[i] = i >= 2 ? i - 2 : (n - 1 - i) / 2 * 2 + i;
    perms.push_back(p);  // and down
    for (const auto& perm : perms) {
      for (const std::uint32_t r : {4u, 12u, 100u}) {
        const bytes_t records = random_bytes(n * r, rng);
        for (const std::uint64_t saved : {std::uint64_t{1}, std::uint64_t{r} * 7, n * r})
          expect_permuted(records, r, perm, saved);
        std::vector<std::uint32_t> perm32(perm.begin(), perm.end());
        bytes_t out(records.size());
        detail::gather_records(records.data(), n, r, perm32.data(), out.data());
        ASSERT_TRUE(test::equal_bytes(out, gathered(records, r, perm)));
      }
    }
  }
}

TEST(RowsMove, InPlacePermutationOfFewRows)
{
  // Every permutation of up to 6 rows, with breakpoint room from none (one breakpoint in a
  // window of every row) to more than every row (a breakpoint at each: walks end at once).
  std::mt19937_64 rng{6};
  for (std::uint64_t n = 0; n <= 6; ++n) {
    std::vector<std::uint64_t> perm(n);
    std::iota(perm.begin(), perm.end(), std::uint64_t{0});
    do {
      for (const std::uint32_t r : {4u, 12u, 100u}) {
        const bytes_t records = random_bytes(n * r, rng);
        for (const std::uint64_t saved : {std::uint64_t{0}, std::uint64_t{r} - 1, std::uint64_t{r},
                                          std::uint64_t{r} * 2, n * r, n * r * 10})
          expect_permuted(records, r, perm, saved);
      }
    } while (std::next_permutation(perm.begin(), perm.end()));
  }
}

TEST(RowsMove, InPlacePermutationOfLargeRecords)
{
  // Few rows of records from a page to a MiB: pass 2 holds fewer of them side by side.
  std::mt19937_64 rng{4096};
  for (const auto& [r, n] : {std::pair{4096u, std::uint64_t{300}},
                             std::pair{65'537u, std::uint64_t{33}},
                             std::pair{1u << 20, std::uint64_t{6}}}) {
    std::vector<std::vector<std::uint64_t>> perms;
    std::vector<std::uint64_t> p(n);
    std::iota(p.begin(), p.end(), std::uint64_t{0});
    std::reverse(p.begin(), p.end());
    perms.push_back(p);
    for (std::uint64_t i = 0; i < n; ++i) p[i] = (i + 1) % n;
    perms.push_back(p);
    std::shuffle(p.begin(), p.end(), rng);
    perms.push_back(p);
    const bytes_t records = random_bytes(n * r, rng);
    for (const auto& perm : perms)
      for (const std::uint64_t saved : {std::uint64_t{1}, std::uint64_t{r}, std::uint64_t{r} * 3,
                                        n * r})
        expect_permuted(records, r, perm, saved);
  }
}

/// The host's stages a profiled sort of records reports, in order, each once.
std::vector<std::string> host_stages_of(const sort_report& r)
{
  std::vector<std::string> names;
  for (const stage_profile& p : r.profile)
    if (p.stage.rfind("rows: ", 0) == 0) names.push_back(p.stage);
  return names;
}

TEST(RowsProfile, EveryHostStageOfAMoveIsInTheReport)
{
  // The sort benchmark's records: 100 bytes, a 10-byte key at the start.
  const std::vector<key_field> key{{column_type::bytes, 0, 10}};
  const std::uint64_t n = 30'011;
  const bytes_t records = test::make_records(n, 100, key, 0, 5);
  const bytes_t expected = gathered(records, 100, reference_order(records, 100, key, {}));
  engine eng{config_for_rows(n)};
  const std::vector<std::string> order{"rows: fresh pages of the order",
                                       "rows: fresh pages of the sorted words",
                                       "rows: first words", "rows: order of the first words",
                                       "rows: ties", "rows: large ties"};
  const auto then = [&](std::vector<std::string> moves) {
    std::vector<std::string> all = order;
    all.insert(all.end(), moves.begin(), moves.end());
    return all;
  };
  bytes_t out(records.size());
  sort_report r = sort_records(eng, {records.data(), n, 100}, key, out.data(), {.profile = true});
  EXPECT_TRUE(test::equal_bytes(out, expected));
  EXPECT_EQ(host_stages_of(r), then({"rows: gather"}));
  // In place through a copy: its pages made first (a fault inside the gather stalls its reads).
  bytes_t again = records;
  r = sort_records(eng, {again.data(), n, 100}, key, nullptr, {.profile = true});
  EXPECT_TRUE(test::equal_bytes(again, expected));
  EXPECT_EQ(host_stages_of(r),
            then({"rows: fresh pages of the copy", "rows: gather", "rows: copy back"}));
  // In place with no room for the copy: the cycles walked.
  again = records;
  r = sort_records(eng, {again.data(), n, 100}, key, nullptr,
                   {.profile = true, .host_memory_limit = records.size() + n * 4 - 1});
  EXPECT_TRUE(test::equal_bytes(again, expected));
  EXPECT_EQ(host_stages_of(r), then({"rows: permute"}));
  // Not asked for: none.
  again = records;
  r = sort_records(eng, {again.data(), n, 100}, key, nullptr);
  EXPECT_TRUE(host_stages_of(r).empty());
}

TEST(RowsErrors, BadSpecificationsAreRefusedAndNothingChanges)
{
  engine eng{config_for_rows(10)};
  bytes_t records(10 * 12, 7);
  const bytes_t before = records;
  const record_array in{records.data(), 10, 12};
  const auto refused = [&](std::vector<key_field> fields, const std::string& says,
                           sort_options o = {}) {
    try {
      sort_records(eng, in, fields, nullptr, o);
      ADD_FAILURE() << "accepted: " << says;
    } catch (const invalid_argument& e) {
      EXPECT_NE(std::string{e.what()}.find(says), std::string::npos) << e.what();
    }
    EXPECT_EQ(records, before);
  };
  refused({{column_type::u64, 8}}, "beyond the 12-byte record");
  refused({{column_type::bytes, 2, 11}}, "beyond the 12-byte record");
  refused({{column_type::bytes, 0, 0}}, "a length of 0");
  refused({{column_type::u32, 0, 8}}, "its length is 4 bytes");
  refused({}, "at least one key");
  refused({{column_type::u32, 0}}, "each key's order", {.direction = order::descending});
  EXPECT_THROW(sort_records(eng, {records.data(), 10, 0}, {{{column_type::u32}}}),
               invalid_argument);
  EXPECT_THROW(sort_records(eng, in, {{{column_type::u32}}}, records.data() + 12),
               invalid_argument);
  std::vector<std::uint64_t> perm(10);
  const row_keys keys{10, {{records.data(), 12, {column_type::u32}}}};
  EXPECT_THROW(argsort_rows(eng, keys, perm.data(), 3), invalid_argument);
  EXPECT_THROW(argsort_rows(eng, keys, nullptr), invalid_argument);
  EXPECT_THROW(argsort_rows(eng, {10, {{records.data(), 0, {column_type::u32}}}}, perm.data()),
               invalid_argument);
  EXPECT_EQ(parse_column_type("u128"), column_type::u128);
  EXPECT_EQ(parse_column_type("bytes"), column_type::bytes);
  EXPECT_FALSE(parse_column_type("u16"));
}

}  // namespace
}  // namespace gpusort
