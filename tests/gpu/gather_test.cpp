// Round 2's chunk steps (core/cuda/chunk_ops.cuh) against the host. The radix sort on the low
// bits alone (key_bits: round 2's keys agree above the bits in which their chunk's splitters
// differ), against std::stable_sort. cuda::gather, the kernel round 2 copies its slices with,
// against a gather done on the host with memcpy: slices in device memory and in mapped host
// memory, 4- and 8-byte elements, tables of many short slices (empty ones among them) and of a
// few long ones, with the default tuning and with grids so small that each block (or warp, in
// the warp-a-slice kernel of short slices) walks many slices and strides through long ones (the
// grids are capped since issue 44; every slice must still be copied once). cuda::scatter_lines,
// the scattering store's kernel, against a scatter done on the host.
#include "gpu_test_support.hpp"
#include "pipeline/cuda/resources.hpp"

#include "core/cuda/chunk_ops.cuh"

#include <gpusort/error.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace gpusort {
namespace {

using cuda::cuda_stream;
using cuda::device_buffer;
using cuda::gather_slice;
using cuda::gather_tuning;
using cuda::pinned_buffer;

/// Slice lengths of a table: `short_ones` slices of 0 to 300 elements, then `long_ones` of
/// lengths about the kernel's unrolled strides (a multiple of 4 * 256 and either side of it).
std::vector<std::uint64_t> lengths_of(std::uint32_t short_ones, std::uint32_t long_ones,
                                      std::uint64_t seed)
{
  std::mt19937_64 rng{seed};
  std::vector<std::uint64_t> lengths;
  for (std::uint32_t i = 0; i < short_ones; ++i) lengths.push_back(rng() % 301);
  const std::uint64_t around[] = {4 * 256 - 1, 4 * 256, 4 * 256 + 1, 64 * 256 * 4 + 3, 200003};
  for (std::uint32_t i = 0; i < long_ones; ++i) lengths.push_back(around[i % 5] + rng() % 7);
  return lengths;
}

enum class source_memory { device, mapped_host };

/// Gathers slices of the given lengths, taken from shuffled places of a random source, on the
/// device and on the host, and compares the two outputs byte for byte.
template <typename T>
void expect_gathered(const std::vector<std::uint64_t>& lengths, source_memory where,
                     const gather_tuning& tuning)
{
  std::uint64_t total = 0;
  for (std::uint64_t l : lengths) total += l;
  // The source holds the slices back to back in reverse order, with a gap of 3 after each, so
  // that no slice's source is where its output goes.
  const std::uint64_t source_n = total + 3 * lengths.size() + 1;
  std::mt19937_64 rng{total * 7919 + lengths.size()};
  std::vector<T> source(source_n);
  for (T& v : source) v = static_cast<T>(rng());

  std::vector<gather_slice> table(lengths.size());
  std::vector<std::uint64_t> source_at(lengths.size());
  std::uint64_t at = 0, out_at = 0, longest = 0;
  for (std::size_t i = lengths.size(); i-- > 0;) {
    source_at[i] = at;
    at += lengths[i] + 3;
  }
  std::vector<T> expected(total + 1);
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] > 0)
      std::memcpy(&expected[out_at], &source[source_at[i]], lengths[i] * sizeof(T));
    table[i] = {nullptr, lengths[i], out_at};
    out_at += lengths[i];
    longest = std::max(longest, lengths[i]);
  }

  cuda_stream stream;
  device_buffer d_source;
  pinned_buffer h_source;
  const T* src = nullptr;
  if (where == source_memory::device) {
    d_source = device_buffer{source_n * sizeof(T)};
    ASSERT_EQ(test::copy_to_gpu(d_source.data(), source.data(), source_n * sizeof(T)),
              cudaSuccess);
    src = d_source.data<T>();
  } else {
    h_source = pinned_buffer{source_n * sizeof(T), cudaHostAllocMapped | cudaHostAllocPortable};
    std::memcpy(h_source.data(), source.data(), source_n * sizeof(T));
    void* mapped = nullptr;
    ASSERT_EQ(cudaHostGetDevicePointer(&mapped, h_source.data(), 0), cudaSuccess);
    src = static_cast<const T*>(mapped);
  }
  for (std::size_t i = 0; i < lengths.size(); ++i) table[i].src = src + source_at[i];

  device_buffer d_table{table.size() * sizeof(gather_slice) + 1};
  ASSERT_EQ(test::copy_to_gpu(d_table.data(), table.data(), table.size() * sizeof(gather_slice)),
            cudaSuccess);
  // One element past the output, set to a marker: the kernel must not write it.
  device_buffer d_out{(total + 1) * sizeof(T)};
  ASSERT_EQ(test::fill_gpu(d_out.data(), 0xA5, (total + 1) * sizeof(T)), cudaSuccess);
  cuda::gather(d_table.data<gather_slice>(), static_cast<std::uint32_t>(table.size()), longest,
               d_out.data(), sizeof(T), stream.value(), tuning);
  stream.synchronize();
  std::vector<T> out(total + 1);
  ASSERT_EQ(cudaMemcpy(out.data(), d_out.data(), (total + 1) * sizeof(T), cudaMemcpyDeviceToHost),
            cudaSuccess);
  std::memset(&expected[total], 0xA5, sizeof(T));
  for (std::uint64_t i = 0; i <= total; ++i)
    ASSERT_EQ(out[i], expected[i]) << "element " << i << " of " << total << ", "
                                   << lengths.size() << " slices";
}

using gather_case = std::tuple<unsigned, source_memory, int>;

class gpu_gather : public test::gpu_test, public ::testing::WithParamInterface<gather_case> {};

/// The tunings a case runs with: the default (a warp a slice for the tables of short slices), a
/// grid of one block that walks every slice, a small one (two blocks a slice at most, three in
/// all) with blocks of one warp, both of those with every table a block a slice; a warp a slice
/// for every table, long slices too (each lane strides through them), on one block of one warp
/// that walks every slice; on 3 blocks of 40 threads (whole warps: 32 each); and the default's
/// warps on 8 blocks of 1024 threads (GPUSORT_GATHER_BLOCKS=8 GPUSORT_GATHER_THREADS=1024).
gather_tuning tuning_of(int which)
{
  switch (which) {
    case 0: return {};
    case 1:
      return {.threads_per_block = 256, .max_blocks_per_slice = 1, .max_blocks = 1,
              .warp_slice_elements = 0};
    case 2:
      return {.threads_per_block = 32, .max_blocks_per_slice = 2, .max_blocks = 3,
              .warp_slice_elements = 0};
    case 3:
      return {.threads_per_block = 32, .warp_slice_elements = UINT32_MAX, .max_warp_blocks = 1};
    case 4:
      return {.threads_per_block = 40, .warp_slice_elements = UINT32_MAX, .max_warp_blocks = 3};
    default:
      return {.threads_per_block = 1024, .max_blocks = 8, .max_warp_blocks = 8};
  }
}

TEST_P(gpu_gather, CopiesEverySliceOnceAgainstTheHost)
{
  const auto [element_bytes, where, which] = GetParam();
  const gather_tuning tuning = tuning_of(which);
  // Round 2 at d = 2643: that many slices of about 150 elements (and empty ones), then a few
  // long ones alone, then both in one table; and a table of one slice.
  const std::vector<std::vector<std::uint64_t>> tables = {
      lengths_of(2643, 0, 1), lengths_of(0, 10, 2), lengths_of(700, 5, 3), {1}, {0, 0, 5}};
  for (const auto& lengths : tables) {
    if (element_bytes == 4)
      expect_gathered<std::uint32_t>(lengths, where, tuning);
    else
      expect_gathered<std::uint64_t>(lengths, where, tuning);
    if (HasFatalFailure()) return;
  }
}

std::string gather_case_name(const ::testing::TestParamInfo<gather_case>& param)
{
  const auto [bytes, where, which] = param.param;
  const char* tunings[] = {"default",    "one_block",  "small_grid",
                           "warps_only", "warps_grid", "wide_blocks"};
  return std::to_string(bytes * 8) + "bit_" +
         (where == source_memory::device ? "device" : "mapped") + "_" + tunings[which];
}

INSTANTIATE_TEST_SUITE_P(
    Tables, gpu_gather,
    ::testing::Combine(::testing::Values(4U, 8U),
                       ::testing::Values(source_memory::device, source_memory::mapped_host),
                       ::testing::Values(0, 1, 2, 3, 4, 5)),
    gather_case_name);

TEST(gpu_gather_arguments, BadWidthsTablesAndTuningsAreRefusedBeforeAnyLaunch)
{
  // Checked before anything touches a GPU, so they run on CI's hosts too.
  const gather_slice* none = nullptr;
  EXPECT_THROW(cuda::gather(none, 1, 1, nullptr, 2, nullptr), invalid_argument);
  EXPECT_THROW(cuda::gather(none, 65536, 1, nullptr, 8, nullptr), invalid_argument);
  EXPECT_THROW(cuda::gather(none, 1, 1, nullptr, 8, nullptr, {.threads_per_block = 0}),
               invalid_argument);
  EXPECT_THROW(cuda::gather(none, 1, 1, nullptr, 8, nullptr, {.max_blocks_per_slice = 0}),
               invalid_argument);
  EXPECT_THROW(cuda::gather(none, 1, 1, nullptr, 8, nullptr, {.max_blocks = 0}),
               invalid_argument);
  EXPECT_THROW(cuda::gather(none, 1, 1, nullptr, 8, nullptr, {.max_warp_blocks = 0}),
               invalid_argument);
  // Nothing to copy: no launch, no error, whatever the pointers.
  EXPECT_NO_THROW(cuda::gather(none, 0, 1, nullptr, 8, nullptr));
  EXPECT_NO_THROW(cuda::gather(none, 3, 0, nullptr, 8, nullptr));
}

// ---- the scattering store's kernel ----

class gpu_scatter_lines : public test::gpu_test {};

/// cuda::scatter_lines against a scatter done on the host: a source in device memory holding
/// the slices back to back (a sorted chunk cut into buckets), each slice to a place of its own
/// in mapped host memory, in shuffled order with a gap of 1 to 5 elements before each whose
/// marker must stay, and one past the end; elements of `eb` bytes on `blocks` blocks.
void expect_scattered(const std::vector<std::uint64_t>& lengths, unsigned eb, unsigned blocks)
{
  std::uint64_t total = 0;
  for (std::uint64_t l : lengths) total += l;
  std::mt19937_64 rng{total * 31 + eb * 7 + blocks};
  std::vector<unsigned char> source(total * eb + 1);
  for (auto& b : source) b = static_cast<unsigned char>(rng());
  std::vector<std::size_t> order(lengths.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<std::uint64_t> place(lengths.size());
  std::uint64_t out_n = 0;
  for (const std::size_t i : order) {
    out_n += 1 + rng() % 5;
    place[i] = out_n;
    out_n += lengths[i];
  }
  ++out_n;
  std::vector<unsigned char> expected(out_n * eb, 0xA5);
  device_buffer d_source{source.size()};
  ASSERT_EQ(test::copy_to_gpu(d_source.data(), source.data(), source.size()),
            cudaSuccess);
  std::vector<gather_slice> table(lengths.size());
  std::uint64_t from = 0;
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] > 0)
      std::memcpy(&expected[place[i] * eb], &source[from * eb], lengths[i] * eb);
    table[i] = {d_source.data<char>() + from * eb, lengths[i], place[i]};
    from += lengths[i];
  }
  pinned_buffer out{out_n * eb, cudaHostAllocMapped | cudaHostAllocPortable};
  std::memset(out.data(), 0xA5, out_n * eb);
  void* mapped = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(&mapped, out.data(), 0), cudaSuccess);
  device_buffer d_table{table.size() * sizeof(gather_slice) + 1};
  ASSERT_EQ(test::copy_to_gpu(d_table.data(), table.data(), table.size() * sizeof(gather_slice)),
            cudaSuccess);
  cuda_stream stream;
  cuda::scatter_lines(d_table.data<gather_slice>(), static_cast<std::uint32_t>(table.size()),
                      mapped, eb, blocks, stream.value());
  stream.synchronize();
  const auto* got = out.data<unsigned char>();
  const auto [a, b] = std::mismatch(expected.begin(), expected.end(), got);
  ASSERT_TRUE(a == expected.end())
      << "byte " << (a - expected.begin()) << " of " << expected.size() << ": " << eb
      << "-byte elements, " << lengths.size() << " slices, " << blocks << " blocks";
}

TEST_F(gpu_scatter_lines, WritesEverySliceToItsPlaceAndNothingElse)
{
  // Round 1 of a scattering round at 4096 buckets (slices of 0 to 300 elements, most lines
  // split between two slices), a few long slices (a warp strides through them), both, one.
  const std::vector<std::vector<std::uint64_t>> tables = {
      lengths_of(4096, 0, 5), lengths_of(0, 6, 6), lengths_of(900, 4, 7), {1}, {0, 3, 0}};
  for (const unsigned eb : {4U, 8U, 16U})
    for (const unsigned blocks : {1U, 3U, 8U, 132U})
      for (const auto& lengths : tables) {
        expect_scattered(lengths, eb, blocks);
        if (HasFatalFailure()) return;
      }
}

TEST(gpu_scatter_lines_arguments, BadWidthsAndGridsAreRefusedBeforeAnyLaunch)
{
  const gather_slice* none = nullptr;
  EXPECT_THROW(cuda::scatter_lines(none, 1, nullptr, 2, 8, nullptr), invalid_argument);
  EXPECT_THROW(cuda::scatter_lines(none, 1, nullptr, 12, 8, nullptr), invalid_argument);
  EXPECT_THROW(cuda::scatter_lines(none, 1, nullptr, 8, 0, nullptr), invalid_argument);
  EXPECT_NO_THROW(cuda::scatter_lines(none, 0, nullptr, 8, 8, nullptr));
}

// ---- the radix sort on the low bits ----

class gpu_radix_low_bits : public test::gpu_test {};

/// n pairs of keys that share everything above their low `bits` bits (many equal ones among
/// them) and positions as values, sorted with key_bits = `bits` and with every bit; both must
/// equal std::stable_sort's result (the radix sort keeps equal keys in order).
void expect_low_bits_sort(std::uint64_t n, unsigned bits, std::uint64_t prefix)
{
  std::mt19937_64 rng{n * 131 + bits};
  const std::uint64_t mask = bits == 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
  std::vector<std::uint64_t> keys(n);
  for (auto& k : keys) k = (prefix & ~mask) | (rng() % 3 == 0 ? mask / 3 : rng() & mask);
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0U);
  std::vector<std::uint32_t> expected = order;
  std::stable_sort(expected.begin(), expected.end(),
                   [&](std::uint32_t a, std::uint32_t b) { return keys[a] < keys[b]; });
  for (const unsigned key_bits : {bits, 0U}) {
    device_buffer k{n * 8 + 8}, k_alt{n * 8 + 8}, v{n * 4 + 4}, v_alt{n * 4 + 4};
    const std::size_t scratch_bytes = cuda::radix_sort_scratch_bytes(n, 8, 4);
    device_buffer scratch{scratch_bytes + 1};
    ASSERT_EQ(test::copy_to_gpu(k.data(), keys.data(), n * 8), cudaSuccess);
    ASSERT_EQ(test::copy_to_gpu(v.data(), order.data(), n * 4), cudaSuccess);
    cuda_stream stream;
    const bool alt = cuda::radix_sort(k.data(), k_alt.data(), v.data(), v_alt.data(), n, 8, 4,
                                      scratch.data(), scratch_bytes, stream.value(), key_bits);
    stream.synchronize();
    std::vector<std::uint64_t> sorted(n);
    std::vector<std::uint32_t> values(n);
    ASSERT_EQ(cudaMemcpy(sorted.data(), (alt ? k_alt : k).data(), n * 8, cudaMemcpyDeviceToHost),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpy(values.data(), (alt ? v_alt : v).data(), n * 4, cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (std::uint64_t i = 0; i < n; ++i) {
      ASSERT_EQ(values[i], expected[i]) << "n=" << n << " bits=" << bits << " key_bits="
                                        << key_bits << " at " << i;
      ASSERT_EQ(sorted[i], keys[expected[i]]) << "n=" << n << " bits=" << bits << " at " << i;
    }
  }
}

TEST_F(gpu_radix_low_bits, SortsOnTheLowBitsAloneAndKeepsEqualKeysInOrder)
{
  // 1 bit (every key one of two), a digit and a half, round 2's 54 at d = 1594, and all 64.
  for (const unsigned bits : {1U, 12U, 54U, 64U})
    for (const std::uint64_t n : {1ULL, 1000ULL, 673'217ULL}) {
      expect_low_bits_sort(n, bits, 0xB7E1'5162'8AED'2A6AULL);
      if (HasFatalFailure()) return;
    }
}

/// n keys of `width` bits with positions as values, sorted from `begin_bit` up (round 1 of a
/// scattering job with aligned bounds): keys and positions must equal std::stable_sort's by
/// the top bits alone (equal top bits keep input order, whatever their low bits).
template <typename K>
void expect_top_bits_sort(std::uint64_t n, unsigned begin_bit)
{
  std::mt19937_64 rng{n * 7 + begin_bit};
  std::vector<K> keys(n);
  // A few hundred values of the top bits, so that many keys share them.
  for (auto& k : keys) k = static_cast<K>(rng() % 300 * (~K{0} / 300) + rng() % 1000);
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0U);
  std::vector<std::uint32_t> expected = order;
  std::stable_sort(expected.begin(), expected.end(), [&](std::uint32_t a, std::uint32_t b) {
    return (keys[a] >> begin_bit) < (keys[b] >> begin_bit);
  });
  device_buffer k{n * sizeof(K) + 8}, k_alt{n * sizeof(K) + 8}, v{n * 4 + 4}, v_alt{n * 4 + 4};
  const std::size_t scratch_bytes = cuda::radix_sort_scratch_bytes(n, sizeof(K), 4);
  device_buffer scratch{scratch_bytes + 1};
  ASSERT_EQ(test::copy_to_gpu(k.data(), keys.data(), n * sizeof(K)),
            cudaSuccess);
  ASSERT_EQ(test::copy_to_gpu(v.data(), order.data(), n * 4), cudaSuccess);
  cuda_stream stream;
  const bool alt = cuda::radix_sort(k.data(), k_alt.data(), v.data(), v_alt.data(), n, sizeof(K),
                                    4, scratch.data(), scratch_bytes, stream.value(), 0, begin_bit);
  stream.synchronize();
  std::vector<K> sorted(n);
  std::vector<std::uint32_t> values(n);
  ASSERT_EQ(cudaMemcpy(sorted.data(), (alt ? k_alt : k).data(), n * sizeof(K),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(values.data(), (alt ? v_alt : v).data(), n * 4, cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (std::uint64_t i = 0; i < n; ++i) {
    ASSERT_EQ(values[i], expected[i]) << "n=" << n << " begin_bit=" << begin_bit << " at " << i;
    ASSERT_EQ(sorted[i], keys[expected[i]]) << "n=" << n << " begin_bit=" << begin_bit;
  }
}

TEST_F(gpu_radix_low_bits, SortsOnTheTopBitsAloneAndKeepsTheirTiesInOrder)
{
  for (const std::uint64_t n : {1ULL, 1000ULL, 673'217ULL}) {
    for (const unsigned begin_bit : {8U, 16U, 24U}) {
      expect_top_bits_sort<std::uint32_t>(n, begin_bit);
      if (HasFatalFailure()) return;
    }
    for (const unsigned begin_bit : {8U, 40U, 48U, 56U}) {
      expect_top_bits_sort<std::uint64_t>(n, begin_bit);
      if (HasFatalFailure()) return;
    }
  }
}

TEST(gpu_radix_low_bits_arguments, MoreBitsThanTheKeyHasAreRefused)
{
  // Checked before anything touches a GPU.
  EXPECT_THROW(cuda::radix_sort(nullptr, nullptr, nullptr, nullptr, 1, 4, 0, nullptr, 0, nullptr,
                                33),
               invalid_argument);
  EXPECT_THROW(cuda::radix_sort(nullptr, nullptr, nullptr, nullptr, 1, 8, 0, nullptr, 0, nullptr,
                                65),
               invalid_argument);
  // A first bit at or past the last: nothing to sort on.
  EXPECT_THROW(cuda::radix_sort(nullptr, nullptr, nullptr, nullptr, 1, 4, 0, nullptr, 0, nullptr,
                                0, 32),
               invalid_argument);
  EXPECT_THROW(cuda::radix_sort(nullptr, nullptr, nullptr, nullptr, 1, 8, 0, nullptr, 0, nullptr,
                                20, 20),
               invalid_argument);
}

}  // namespace
}  // namespace gpusort
