// Stable sorts, argsort and NumPy's float order on the CPU engine, against std::stable_sort
// references (tests/support/stable_reference.hpp). Run twice by ctest: the default configuration
// and a tiny budget, where ties cross chunk boundaries and splitters in both rounds.
#include "test_budget.hpp"

#include "tests/support/stable_reference.hpp"

#include "pipeline/file_window.hpp"

#include <gpusort/error.hpp>
#include <gpusort/gpusort.hpp>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

namespace gpusort {
namespace {

template <typename K>
class StableKeys : public ::testing::Test {};
using key_types = ::testing::Types<std::uint32_t, std::int32_t, std::uint64_t, std::int64_t,
                                   float, double>;
TYPED_TEST_SUITE(StableKeys, key_types);

// 0, 1, 2, a prime, around the tiny capacity, and enough for 16+ chunks of pairs.
const std::vector<std::uint64_t> sizes{0, 1, 2, 1009, test::tiny_capacity - 1,
                                       test::tiny_capacity, test::tiny_capacity + 1, 100'003};

TYPED_TEST(StableKeys, EveryOrderMeetsTheReference)
{
  using K = TypeParam;
  for (const std::uint64_t n : sizes) {
    // Keys with a position beside them: the element size of the pairs the engine sorts.
    engine eng{test::config_for(n, sizeof(K) + 8, n == test::tiny_capacity)};
    for (const std::uint64_t distinct : {std::uint64_t{3}, std::uint64_t{1000}}) {
      const std::vector<K> keys = test::tied_keys<K>(n, distinct, n * 31 + distinct);
      for (const order dir : {order::ascending, order::descending}) {
        for (const float_order floats : {float_order::total, float_order::numpy}) {
          SCOPED_TRACE("n=" + std::to_string(n) + " distinct=" + std::to_string(distinct) +
                       (dir == order::ascending ? " asc" : " desc") +
                       (floats == float_order::numpy ? " numpy" : " total"));
          test::check_stable_contract(eng, keys, dir, floats);
        }
      }
    }
  }
}

TEST(Argsort, RefusesBadIndicesAndNullArrays)
{
  engine eng{test::config_for(10, 16)};
  std::vector<double> keys(10, 1.0);
  std::vector<std::int64_t> idx(10);
  const key_array view{keys.data(), keys.size(), dtype::f64};
  EXPECT_THROW(eng.argsort({.keys = view, .indices_out = idx.data(), .index_bytes = 2}),
               invalid_argument);
  EXPECT_THROW(eng.argsort({.keys = view, .indices_out = nullptr}), invalid_argument);
  EXPECT_THROW(eng.argsort({.keys = {nullptr, 10, dtype::f64}, .indices_out = idx.data()}),
               invalid_argument);
  // Nothing written by a refused job.
  EXPECT_EQ(idx, std::vector<std::int64_t>(10, 0));
  const sort_report r = eng.argsort({.keys = {nullptr, 0, dtype::f64}, .indices_out = nullptr});
  EXPECT_EQ(r.elements, 0U);
}

TEST(Argsort, ReadsAndWritesFiles)
{
  const std::uint64_t n = 50'021;
  const std::vector<float> keys = test::tied_keys<float>(n, 7, 5);
  const auto dir = std::filesystem::temp_directory_path();
  const std::string pid = std::to_string(::getpid());
  const std::string in_path = (dir / ("gpusort-argsort-in-" + pid)).string();
  const std::string out_path = (dir / ("gpusort-argsort-out-" + pid)).string();
  const int in_fd = ::open(in_path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  const int out_fd = ::open(out_path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(in_fd, 0);
  ASSERT_GE(out_fd, 0);
  ASSERT_EQ(::pwrite(in_fd, keys.data(), n * sizeof(float), 0),
            static_cast<ssize_t>(n * sizeof(float)));
  ASSERT_EQ(::ftruncate(out_fd, static_cast<off_t>(n * 16)), 0);
  {
    const file_array in{in_fd, 0, n * sizeof(float), "keys"};
    const file_array idx_file{out_fd, 0, n * 8, "indices"};
    const file_array keys_file{out_fd, n * 8, n * sizeof(float), "sorted keys"};
    engine eng{test::config_for(n, 12)};
    eng.argsort({.keys = {in.data(), n, dtype::f32},
                 .indices_out = idx_file.data(),
                 .index_bytes = 8,
                 .keys_out = keys_file.data()},
                {.floats = float_order::numpy});
  }
  std::vector<std::uint64_t> idx(n);
  std::vector<float> sorted(n);
  ASSERT_EQ(::pread(out_fd, idx.data(), n * 8, 0), static_cast<ssize_t>(n * 8));
  ASSERT_EQ(::pread(out_fd, sorted.data(), n * sizeof(float), static_cast<off_t>(n * 8)),
            static_cast<ssize_t>(n * sizeof(float)));
  const std::vector<std::uint64_t> ref =
      test::reference_argsort(keys, order::ascending, float_order::numpy);
  EXPECT_EQ(idx, ref);
  std::vector<float> ref_keys(n);
  for (std::uint64_t i = 0; i < n; ++i) ref_keys[i] = keys[ref[i]];
  EXPECT_TRUE(test::equal_bytes(sorted, ref_keys));
  ::close(in_fd);
  ::close(out_fd);
  std::filesystem::remove(in_path);
  std::filesystem::remove(out_path);
}

}  // namespace
}  // namespace gpusort
