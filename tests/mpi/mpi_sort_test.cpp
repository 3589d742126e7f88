// gpusort::mpi::sort under mpirun (tests/mpi/CMakeLists.txt runs it on 1, 2, 3, 4 and 8 ranks):
// every key type, shards uneven and empty, one rank with everything, every key equal, pairs,
// stable sorts, both orders. Every check gathers the shards to rank 0 and compares them with
// std::stable_sort of the input there (a comparator of its own, NumPy's order for floats),
// never with the code under test; rank 0's verdict goes to every rank, so that all ranks run the
// same collectives and none waits on one that stopped early.
#include "core/generate.hpp"

#include <gpusort/mpi.hpp>

#include <gtest/gtest.h>

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace gpusort {
namespace {

int rank_of() noexcept
{
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int ranks() noexcept
{
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

engine& cpu_engine()
{
  static engine eng{[] {
    config cfg;
    cfg.devices = device_selection::cpu;
    return cfg;
  }()};
  return eng;
}

/// NumPy's order for floats (NaNs last, -0 equal to +0); < for integers.
template <typename K>
bool before(K a, K b, order dir)
{
  if constexpr (std::is_floating_point_v<K>) {
    const bool an = std::isnan(a), bn = std::isnan(b);
    if (an || bn) return !an && bn;  // NaNs last in both orders
    return dir == order::ascending ? a < b : b < a;
  } else {
    return dir == order::ascending ? a < b : b < a;
  }
}

/// The concatenation of every rank's `local` on rank 0 (empty elsewhere).
template <typename T>
std::vector<T> gather(const std::vector<T>& local)
{
  const int me = rank_of();
  const auto n = static_cast<int>(local.size() * sizeof(T));
  std::vector<int> sizes(static_cast<std::size_t>(ranks())), at(sizes.size());
  MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  int total = 0;
  for (std::size_t r = 0; r < sizes.size(); ++r) {
    at[r] = total;
    total += sizes[r];
  }
  std::vector<T> all(me == 0 ? static_cast<std::size_t>(total) / sizeof(T) : 0);
  MPI_Gatherv(local.data(), n, MPI_BYTE, all.data(), sizes.data(), at.data(), MPI_BYTE, 0,
              MPI_COMM_WORLD);
  return all;
}

/// Rank 0's verdict ("" when all is well) on every rank.
std::string share(std::string verdict)
{
  int length = static_cast<int>(verdict.size());
  MPI_Bcast(&length, 1, MPI_INT, 0, MPI_COMM_WORLD);
  verdict.resize(static_cast<std::size_t>(length));
  MPI_Bcast(verdict.data(), length, MPI_CHAR, 0, MPI_COMM_WORLD);
  return verdict;
}

enum class shape { uneven, one_rank_has_all, all_equal, few_keys };

/// This rank's shard for `s`: sizes differ by rank (rank 1 empty where there are several).
template <typename K>
std::vector<K> shard_for(shape s, std::uint64_t seed)
{
  const int me = rank_of();
  std::uint64_t n = 0;
  switch (s) {
    case shape::uneven:
    case shape::few_keys:
      n = ranks() > 1 && me == 1 ? 0 : 1000 + static_cast<std::uint64_t>(me) * 7919 % 20011;
      break;
    case shape::one_rank_has_all: n = me == 0 ? 40'009 : 0; break;
    case shape::all_equal: n = 5'003 + static_cast<std::uint64_t>(me) * 101; break;
  }
  std::vector<K> keys(n);
  if (s == shape::all_equal) {
    std::fill(keys.begin(), keys.end(), static_cast<K>(7));
    return keys;
  }
  const distribution d =
      std::is_floating_point_v<K> ? distribution::nanmix : distribution::uniform;
  generate(std::span<K>{keys}, d, seed + static_cast<std::uint64_t>(me) * 1'000'003);
  if (s == shape::few_keys) {
    for (K& k : keys) {
      if constexpr (std::is_floating_point_v<K>) {
        if (!std::isnan(k)) k = static_cast<K>(std::fmod(std::trunc(k), K{5}));  // -0 too
      } else {
        k = static_cast<K>(k % 5);
      }
    }
  }
  return keys;
}

/// How a check runs the distributed sort: as a sort (values: each element's global input
/// position, when asked) or as the global argsort.
enum class mode { sort, pairs, argsort };

/// The exchange in many rounds and blocks even at these sizes.
constexpr mpi::mpi_options small_rounds{.round_bytes = 4096, .block_bytes = 256,
                                        .merge_threads = 3};

/// Sorts the shards of `keys` across the ranks (`how`; with `balanced`, into equal shares) and
/// checks the result on rank 0 against std::stable_sort of the gathered input: the keys in
/// order, the counts each rank ends with, the pairs whole and, for a stable sort or an argsort,
/// every position exactly.
template <typename K>
std::string sort_and_check(std::vector<K> keys, mode m, const sort_options& options,
                           mpi::mpi_options how = small_rounds)
{
  const std::uint64_t mine = keys.size();
  std::uint64_t before_me = 0;
  MPI_Exscan(&mine, &before_me, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (rank_of() == 0) before_me = 0;
  std::uint64_t total = 0;
  MPI_Allreduce(&mine, &total, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  const auto r = static_cast<std::uint64_t>(rank_of());
  const std::uint64_t after =
      how.balanced ? total / ranks() + (r < total % ranks() ? 1 : 0) : mine;
  how.capacity = std::max(mine, after);
  const std::vector<K> input = gather(keys);

  std::vector<std::uint64_t> values(how.capacity);
  for (std::uint64_t i = 0; i < mine; ++i) values[i] = before_me + i;
  std::vector<K> sorted = keys;  // the argsort's keys stay as they were
  sorted.resize(how.capacity);
  mpi::mpi_report report;
  std::string error;
  try {
    if (m == mode::argsort) {
      report = mpi::argsort(MPI_COMM_WORLD, cpu_engine(), {keys.data(), mine, dtype_of_v<K>},
                            reinterpret_cast<std::int64_t*>(values.data()), options, how);
    } else {
      sort_job job{.keys = {sorted.data(), mine, dtype_of_v<K>}};
      if (m == mode::pairs) job.values = value_array{values.data(), mine, 8};
      report = mpi::sort(MPI_COMM_WORLD, cpu_engine(), job, options, how);
    }
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (!error.empty()) return "rank " + std::to_string(rank_of()) + ": " + error;
  if (report.elements_after != after)
    return "rank " + std::to_string(rank_of()) + " reports " +
           std::to_string(report.elements_after) + " elements after, not " +
           std::to_string(after);
  // Beside the shard: at most 2 * ranks + 4 blocks, 2 * ranks + 1 more per merge thread beyond
  // one (the argsort's copy of the keys besides).
  const auto n_ranks = static_cast<std::uint64_t>(ranks());
  const std::uint64_t threads = how.merge_threads;
  const std::uint64_t bound = (2 * n_ranks + 4 + (threads > 1 ? threads * (2 * n_ranks + 1) : 0)) *
                                  how.block_bytes +
                              (m == mode::argsort ? how.capacity * sizeof(K) : 0);
  if (report.extra_bytes > bound)
    return "rank " + std::to_string(rank_of()) + " took " + std::to_string(report.extra_bytes) +
           " bytes beside its shard, over " + std::to_string(bound);

  sorted.resize(after);
  values.resize(after);
  const bool with_values = m != mode::sort;
  const std::vector<K> out = gather(m == mode::argsort ? keys : sorted);
  const std::vector<std::uint64_t> out_values = with_values ? gather(values) : values;
  const std::vector<std::uint64_t> sizes = gather(std::vector<std::uint64_t>{after});
  std::string verdict;
  if (rank_of() == 0) {
    if (m == mode::argsort && (out.size() != input.size() ||
                               std::memcmp(out.data(), input.data(), out.size() * sizeof(K)) != 0))
      verdict = "the argsort wrote its keys";  // (bytes: NaNs are never == themselves)
    std::vector<std::uint64_t> order(input.size());
    for (std::uint64_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::uint64_t a, std::uint64_t b) {
      return before(input[a], input[b], options.direction);
    });
    const bool exact = options.stable || m == mode::argsort;
    std::uint64_t at = 0;
    for (std::size_t rank = 0; rank < sizes.size() && verdict.empty(); ++rank) {
      const std::uint64_t want = how.balanced ? total / sizes.size() +
                                                    (rank < total % sizes.size() ? 1 : 0)
                                              : 0;
      if (how.balanced && sizes[rank] != want)
        verdict = "rank " + std::to_string(rank) + " ended with " + std::to_string(sizes[rank]) +
                  " elements, not its share " + std::to_string(want);
      at += sizes[rank];
    }
    if (verdict.empty() && at != input.size()) verdict = "the ranks' counts changed the total";
    for (std::uint64_t i = 0; verdict.empty() && i < order.size(); ++i) {
      const K want = input[order[i]];
      const K got = m == mode::argsort ? input[std::min<std::uint64_t>(out_values[i],
                                                                       input.size() - 1)]
                                       : out[i];
      const bool same_key = !before(want, got, options.direction) &&
                            !before(got, want, options.direction);
      if (!same_key) {
        verdict = "the key at global position " + std::to_string(i) + " is out of order";
      } else if (with_values && (out_values[i] >= input.size() ||
                                 std::memcmp(&input[out_values[i]], &got, sizeof(K)) != 0)) {
        verdict = "the pair at global position " + std::to_string(i) + " is torn";
      } else if (with_values && exact && out_values[i] != order[i]) {
        verdict = "equal keys left their input order at global position " + std::to_string(i);
      }
    }
    if (verdict.empty() && with_values) {
      std::vector<std::uint64_t> seen = out_values;
      std::sort(seen.begin(), seen.end());
      for (std::uint64_t i = 0; i < seen.size() && verdict.empty(); ++i)
        if (seen[i] != i) verdict = "a value was lost or doubled";
    }
  }
  return share(verdict);
}

template <typename K>
class MpiSort : public ::testing::Test {};
using key_types = ::testing::Types<std::uint32_t, std::int32_t, std::uint64_t, std::int64_t,
                                   float, double>;
TYPED_TEST_SUITE(MpiSort, key_types);

TYPED_TEST(MpiSort, EveryShapeAndOrderEndsInRankOrderWithTheSameCounts)
{
  for (const shape s : {shape::uneven, shape::one_rank_has_all, shape::all_equal,
                        shape::few_keys}) {
    for (const order dir : {order::ascending, order::descending}) {
      const sort_options options{.direction = dir, .floats = float_order::numpy};
      EXPECT_EQ(sort_and_check(shard_for<TypeParam>(s, 3), mode::sort, options), "")
          << "shape " << static_cast<int>(s)
          << (dir == order::ascending ? " ascending" : " descending");
    }
  }
}

TYPED_TEST(MpiSort, PairsKeepTheirValuesAndAStableSortTheInputOrder)
{
  for (const shape s : {shape::uneven, shape::few_keys, shape::all_equal}) {
    for (const bool stable : {false, true}) {
      const sort_options options{.stable = stable, .floats = float_order::numpy};
      EXPECT_EQ(sort_and_check(shard_for<TypeParam>(s, 5), mode::pairs, options), "")
          << "shape " << static_cast<int>(s) << (stable ? " stable" : "");
    }
  }
}

TYPED_TEST(MpiSort, TheArgsortGivesEveryElementsGlobalInputPosition)
{
  for (const shape s : {shape::uneven, shape::one_rank_has_all, shape::few_keys}) {
    for (const order dir : {order::ascending, order::descending}) {
      const sort_options options{.direction = dir, .floats = float_order::numpy};
      EXPECT_EQ(sort_and_check(shard_for<TypeParam>(s, 7), mode::argsort, options), "")
          << "shape " << static_cast<int>(s)
          << (dir == order::ascending ? " ascending" : " descending");
    }
  }
}

TYPED_TEST(MpiSort, BalancedSharesWhateverTheShardsWere)
{
  for (const shape s : {shape::uneven, shape::one_rank_has_all, shape::all_equal}) {
    for (const mode m : {mode::sort, mode::pairs, mode::argsort}) {
      mpi::mpi_options how = small_rounds;
      how.balanced = true;
      const sort_options options{.stable = m != mode::sort, .floats = float_order::numpy};
      EXPECT_EQ(sort_and_check(shard_for<TypeParam>(s, 9), m, options, how), "")
          << "shape " << static_cast<int>(s) << " mode " << static_cast<int>(m);
    }
  }
}

TYPED_TEST(MpiSort, TheEnginesSortOfTheReceivedRunsKeepsEveryPromise)
{
  // merge_method::engine: the runs end to end, then the engine's (stable) sort in place.
  for (const shape s : {shape::uneven, shape::few_keys, shape::one_rank_has_all}) {
    for (const mode m : {mode::sort, mode::pairs, mode::argsort}) {
      mpi::mpi_options how = small_rounds;
      how.merge = mpi::merge_method::engine;
      how.balanced = s == shape::one_rank_has_all;
      const sort_options options{.stable = m != mode::sort, .floats = float_order::numpy};
      EXPECT_EQ(sort_and_check(shard_for<TypeParam>(s, 13), m, options, how), "")
          << "shape " << static_cast<int>(s) << " mode " << static_cast<int>(m);
    }
  }
}

TEST(MpiSortMemory, BlocksOfOneElementAndTinyRoundsStillMoveEverything)
{
  // The tightest space the exchange and the merge get: blocks of one pair and a staging of
  // a few, so that nearly every round waits on blocks freed by the sends before it.
  mpi::mpi_options how{.round_bytes = 256, .block_bytes = 16};
  for (const unsigned threads : {1u, 4u}) {
    how.merge_threads = threads;
    how.merge = threads == 1 ? mpi::merge_method::cpu : mpi::merge_method::engine;
    for (const shape s : {shape::uneven, shape::one_rank_has_all, shape::few_keys}) {
      std::vector<std::uint64_t> keys = shard_for<std::uint64_t>(s, 11);
      keys.resize(std::min<std::size_t>(keys.size(), 3001));
      EXPECT_EQ(sort_and_check(keys, mode::pairs, {.stable = true}, how), "")
          << "shape " << static_cast<int>(s) << ", " << threads << " merge threads"
          << (how.merge == mpi::merge_method::engine ? ", the engine's sort" : "");
    }
  }
}

TEST(MpiSortRefusals, AJobOneRankCannotRunFailsOnEveryRankWithOneMessage)
{
  // Rank 0 asks for a separate output, which the distributed sort does not take: every rank
  // gets an error naming it, and none waits forever.
  std::vector<std::uint64_t> keys(100, 1), out(100);
  sort_job job{.keys = {keys.data(), keys.size(), dtype::u64}};
  if (rank_of() == 0) job.keys_out = out.data();
  std::string error;
  try {
    mpi::sort(MPI_COMM_WORLD, cpu_engine(), job);
  } catch (const std::exception& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("in place"), std::string::npos) << error;
}

}  // namespace
}  // namespace gpusort

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  // Only rank 0 prints the tests' progress; every rank prints its failures.
  if (gpusort::rank_of() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int failed = RUN_ALL_TESTS();
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return any;
}
