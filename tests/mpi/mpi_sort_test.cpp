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

/// Sorts the shards of `keys` (and values: each element's global input position) across the
/// ranks and checks the result on rank 0 against std::stable_sort of the gathered input.
template <typename K>
std::string sort_and_check(std::vector<K> keys, bool with_values, const sort_options& options)
{
  const std::uint64_t mine = keys.size();
  std::uint64_t before_me = 0;
  MPI_Exscan(&mine, &before_me, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
  if (rank_of() == 0) before_me = 0;
  std::vector<std::uint64_t> values(mine);
  for (std::uint64_t i = 0; i < mine; ++i) values[i] = before_me + i;
  const std::vector<K> input = gather(keys);

  sort_job job{.keys = {keys.data(), mine, dtype_of_v<K>}};
  if (with_values) job.values = value_array{values.data(), mine, 8};
  mpi::mpi_report report;
  std::string error;
  try {
    report = mpi::sort(MPI_COMM_WORLD, cpu_engine(), job, options,
                       {.round_bytes = 4096});  // many rounds even at these sizes
  } catch (const std::exception& e) {
    error = e.what();
  }
  if (!error.empty()) return "rank " + std::to_string(rank_of()) + ": " + error;

  const std::vector<K> out = gather(keys);
  const std::vector<std::uint64_t> out_values = with_values ? gather(values) : values;
  const std::vector<std::uint64_t> sizes = gather(std::vector<std::uint64_t>{keys.size()});
  const std::vector<std::uint64_t> given = gather(std::vector<std::uint64_t>{mine});
  std::string verdict;
  if (rank_of() == 0) {
    if (sizes != given) verdict = "a rank ended with another count than it started with";
    std::vector<std::uint64_t> order(input.size());
    for (std::uint64_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](std::uint64_t a, std::uint64_t b) {
      return before(input[a], input[b], options.direction);
    });
    for (std::uint64_t i = 0; verdict.empty() && i < order.size(); ++i) {
      const K want = input[order[i]];
      const K got = out[i];
      const bool same_key = !before(want, got, options.direction) &&
                            !before(got, want, options.direction);
      if (!same_key) {
        verdict = "the key at global position " + std::to_string(i) + " is out of order";
      } else if (with_values && (out_values[i] >= input.size() ||
                                 std::memcmp(&input[out_values[i]], &got, sizeof(K)) != 0)) {
        verdict = "the pair at global position " + std::to_string(i) + " is torn";
      } else if (with_values && options.stable && out_values[i] != order[i]) {
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
      EXPECT_EQ(sort_and_check(shard_for<TypeParam>(s, 3), false, options), "")
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
      EXPECT_EQ(sort_and_check(shard_for<TypeParam>(s, 5), true, options), "")
          << "shape " << static_cast<int>(s) << (stable ? " stable" : "");
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
