// Faulting pages in before the driver pins them (pipeline/host_memory.hpp): the caller's data
// must come through unchanged at any address and length. engine::register_host used to pass a
// std::vector's data (not page-aligned) to madvise, which refused it, and the fallback then
// wrote a zero into every page of the caller's array (gpu_test.RegisteredHostMemory..., H100).
#include "pipeline/host_memory.hpp"

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace gpusort::detail {
namespace {

std::vector<std::uint8_t> pattern(std::size_t n)
{
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(i * 131 + 7) | 1;
  return v;
}

TEST(PopulatePages, TheCallersDataIsUnchangedAtAnyAddressAndLength)
{
  // Offsets inside a page and lengths from one byte to several 2 MiB pieces and a page past.
  for (const std::size_t offset : {std::size_t{0}, std::size_t{1}, std::size_t{16},
                                   std::size_t{4095}}) {
    for (const std::size_t bytes : {std::size_t{1}, std::size_t{4096}, std::size_t{4097},
                                    (std::size_t{5} << 20) + 123}) {
      const std::vector<std::uint8_t> want = pattern(offset + bytes + 64);
      std::vector<std::uint8_t> got = want;
      populate_pages(got.data() + offset, bytes, page_contents::data);
      ASSERT_EQ(got, want) << "offset " << offset << ", " << bytes << " bytes";
    }
  }
}

TEST(PopulatePages, FreshMemoryIsFaultedInAndStaysZero)
{
  host_buffer b{(std::size_t{3} << 20) + 4096};
  b.populate();
  const auto* p = b.as<std::uint8_t>();
  for (std::size_t i = 0; i < b.size(); i += 4096) ASSERT_EQ(p[i], 0) << i;
}

TEST(Round1Pinning, ByJobPinsOnlyAJobOfSmallChunksAndTheOthersAsTheySay)
{
  constexpr std::uint64_t mib = std::uint64_t{1} << 20;
  // A small device budget's chunks (5 MiB at 1/256 of 8 GiB) and just below the bound: pinned.
  EXPECT_TRUE(pins_round1(round1_memory::by_job, 5 * mib));
  EXPECT_TRUE(pins_round1(round1_memory::by_job, round1_pin_below_chunk_bytes - 1));
  // From the bound up (1/8 of 8 GiB: 200 MiB chunks), and the lean path's room: pageable.
  EXPECT_FALSE(pins_round1(round1_memory::by_job, round1_pin_below_chunk_bytes));
  EXPECT_FALSE(pins_round1(round1_memory::by_job, 200 * mib));
  EXPECT_FALSE(pins_round1(round1_memory::by_job, ~std::uint64_t{0}));
  for (const std::uint64_t chunk : {std::uint64_t{1}, 5 * mib, 200 * mib, ~std::uint64_t{0}}) {
    EXPECT_TRUE(pins_round1(round1_memory::automatic, chunk));
    EXPECT_TRUE(pins_round1(round1_memory::pinned, chunk));
    EXPECT_FALSE(pins_round1(round1_memory::pageable, chunk));
  }
}

}  // namespace
}  // namespace gpusort::detail
