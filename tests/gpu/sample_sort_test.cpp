// The GPU sample sort against the verifier of core/verify.hpp (order and an order-independent
// fingerprint of the (key, value) multiset) and, for the ordered-bits entry, against CUB's radix
// sort: every dtype and order, pairs with 4- and 8-byte values, every distribution of
// core/generate.hpp, sizes around the bucket capacity, the sample size and the level boundaries,
// a few hundred million elements, and 2^31 + 1 elements under GPUSORT_TEST_HUGE=1.
#include "gpu_test_support.hpp"
#include "pipeline/cuda/resources.hpp"

#include "core/cuda/chunk_ops.cuh"
#include "core/cuda/sample_sort.cuh"
#include "core/generate.hpp"
#include "core/keys.hpp"
#include "core/verify.hpp"

#include <gpusort/error.hpp>
#include <gpusort/types.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace gpusort {

static void PrintTo(dtype t, std::ostream* os) { *os << name_of(t); }
static void PrintTo(order dir, std::ostream* os)
{
  *os << (dir == order::ascending ? "ascending" : "descending");
}
static void PrintTo(distribution d, std::ostream* os) { *os << name_of(d); }

namespace {

using cuda::cuda_stream;
using cuda::device_buffer;
using cuda::detail::scan_choice;
using test::max_test_n;

/// Host arrays of one sort: raw key bytes and optional values.
struct host_case {
  dtype type{dtype::u64};
  std::uint64_t n{};
  unsigned value_bytes{};
  std::vector<unsigned char> keys;
  std::vector<unsigned char> values;

  [[nodiscard]] key_array key_view() { return {keys.data(), n, type}; }
  [[nodiscard]] std::optional<value_array> value_view()
  {
    if (value_bytes == 0) return std::nullopt;
    return value_array{values.data(), n, value_bytes};
  }
};

host_case make_case(dtype t, distribution d, std::uint64_t n, unsigned value_bytes,
                    std::uint64_t seed)
{
  host_case c;
  c.type = t;
  c.n = n;
  c.value_bytes = value_bytes;
  c.keys.resize(std::max<std::uint64_t>(n, 1) * size_of(t));
  if (n > 0) generate(c.key_view(), d, seed);
  if (value_bytes != 0) {
    c.values.resize(std::max<std::uint64_t>(n, 1) * value_bytes);
    if (n > 0) generate_values(*c.value_view(), seed + 17);
  }
  return c;
}

/// Sorts the case on the device through the typed entry (with `levels` distribution levels
/// forced, if not negative, and the scans forced unless predicted) and copies the result back
/// over it. poison >= 0: the scratch is filled with that byte first (what an earlier sort left
/// there must not matter); otherwise it is fresh, so that compute-sanitizer's initcheck sees
/// any read of scratch that the sort did not write first.
void sort_on_device(host_case& c, order dir, std::uint64_t seed = cuda::default_sample_seed,
                    int levels = -1, scan_choice scans = scan_choice::predicted, int poison = -1)
{
  const std::uint64_t key_bytes = c.n * size_of(c.type);
  const std::uint64_t value_bytes = c.n * c.value_bytes;
  device_buffer keys{key_bytes};
  device_buffer keys_alt{key_bytes};
  device_buffer values{value_bytes};
  device_buffer values_alt{value_bytes};
  const std::size_t scratch_bytes = cuda::sample_sort_scratch_bytes(
      c.n, static_cast<unsigned>(size_of(c.type)), c.value_bytes);
  device_buffer scratch{scratch_bytes};
  cuda_stream stream;
  if (poison >= 0) {
    ASSERT_EQ(cudaMemsetAsync(scratch.data(), poison, scratch_bytes, stream.value()), cudaSuccess);
  }
  ASSERT_EQ(cudaMemcpyAsync(keys.data(), c.keys.data(), key_bytes, cudaMemcpyHostToDevice,
                            stream.value()),
            cudaSuccess);
  if (value_bytes != 0) {
    ASSERT_EQ(cudaMemcpyAsync(values.data(), c.values.data(), value_bytes,
                              cudaMemcpyHostToDevice, stream.value()),
              cudaSuccess);
  }
  const bool alt =
      levels < 0 && scans == scan_choice::predicted
          ? cuda::sample_sort(c.type, dir, keys.data(), keys_alt.data(), values.data(),
                              values_alt.data(), c.n, c.value_bytes, scratch.data(),
                              scratch_bytes, stream.value(), seed)
          : cuda::detail::sample_sort_with_levels(c.type, dir, keys.data(), keys_alt.data(),
                                                  values.data(), values_alt.data(), c.n,
                                                  c.value_bytes, scratch.data(), scratch_bytes,
                                                  stream.value(), seed, levels, scans);
  ASSERT_EQ(cudaMemcpyAsync(c.keys.data(), alt ? keys_alt.data() : keys.data(), key_bytes,
                            cudaMemcpyDeviceToHost, stream.value()),
            cudaSuccess);
  if (value_bytes != 0) {
    ASSERT_EQ(cudaMemcpyAsync(c.values.data(), alt ? values_alt.data() : values.data(),
                              value_bytes, cudaMemcpyDeviceToHost, stream.value()),
              cudaSuccess);
  }
  stream.synchronize();
}

void expect_sorts(dtype t, order dir, distribution d, std::uint64_t n, unsigned value_bytes,
                  std::uint64_t seed = 1, int levels = -1,
                  scan_choice scans = scan_choice::predicted)
{
  host_case c = make_case(t, d, n, value_bytes, seed);
  const fingerprint before = fingerprint_of(c.key_view(), c.value_view());
  sort_on_device(c, dir, cuda::default_sample_seed, levels, scans);
  const verify_result v = verify(c.key_view(), c.value_view(), dir, before);
  EXPECT_TRUE(v.ok) << name_of(t) << (dir == order::ascending ? " asc " : " desc ") << name_of(d)
                    << " n=" << n << " values=" << value_bytes << " levels=" << levels << ": "
                    << v.message;
}

// ---- every dtype x order x distribution, keys only and pairs ----

using dist_case = std::tuple<dtype, order, distribution>;

class gpu_sample_sort_dist : public test::gpu_test,
                             public ::testing::WithParamInterface<dist_case> {};

TEST_P(gpu_sample_sort_dist, keys_and_pairs_over_one_and_two_levels)
{
  const auto [t, dir, d] = GetParam();
  if (!applies_to(d, t)) GTEST_SKIP() << "distribution not defined for this key type";
  for (const std::uint64_t n : {1'000'003ULL, 3'000'017ULL}) {
    expect_sorts(t, dir, d, n, 0);
    expect_sorts(t, dir, d, n, 4, 2);
    expect_sorts(t, dir, d, n, 8, 3);
  }
}

std::string dist_name(const ::testing::TestParamInfo<dist_case>& info)
{
  const auto [t, dir, d] = info.param;
  return std::string{name_of(t)} + (dir == order::ascending ? "_asc_" : "_desc_") +
         std::string{name_of(d)};
}

INSTANTIATE_TEST_SUITE_P(all, gpu_sample_sort_dist,
                         ::testing::Combine(::testing::ValuesIn(all_dtypes),
                                            ::testing::Values(order::ascending,
                                                              order::descending),
                                            ::testing::ValuesIn(all_distributions)),
                         dist_name);

// ---- sizes: empty, tiny, primes, the bucket capacity M (16 Ki keys alone, 4 Ki pairs on sm_90;
// 8 Ki and 4 Ki on sm_80), the small class (2 Ki / 1 Ki), the sample a*k (7680 / 3840), level
// boundaries ----

std::vector<std::uint64_t> boundary_sizes()
{
  std::vector<std::uint64_t> sizes{0, 1, 2, 3, 31, 32, 33, 1000, 7919, 104729, 1299709};
  for (const std::uint64_t m : {1024ULL, 2048ULL, 3840ULL, 4096ULL, 7680ULL, 8192ULL, 16384ULL,
                                32768ULL, 8192ULL * 256, 16384ULL * 256, 8192ULL * 128 * 3})
    for (const std::int64_t delta : {-1LL, 0LL, 1LL})
      sizes.push_back(static_cast<std::uint64_t>(static_cast<std::int64_t>(m) + delta));
  return sizes;
}

class gpu_sample_sort_sizes : public test::gpu_test,
                              public ::testing::WithParamInterface<dtype> {};

TEST_P(gpu_sample_sort_sizes, boundary_sizes_keys_and_pairs)
{
  const dtype t = GetParam();
  for (const std::uint64_t n : boundary_sizes()) {
    expect_sorts(t, order::ascending, distribution::uniform, n, 0, n);
    expect_sorts(t, order::descending, distribution::gaussian, n, 8, n + 1);
    expect_sorts(t, order::ascending, distribution::detdupes, n, 4, n + 2);
    if (HasFailure()) return;
  }
}

std::string dtype_name(const ::testing::TestParamInfo<dtype>& info)
{
  return std::string{name_of(info.param)};
}

INSTANTIATE_TEST_SUITE_P(all, gpu_sample_sort_sizes, ::testing::ValuesIn(all_dtypes),
                         dtype_name);

// ---- the ordered-bits entry against CUB's radix sort and std::sort, key for key ----

template <typename Bits>
void expect_matches_radix_sort(std::vector<Bits> keys, const std::string& what)
{
  const std::uint64_t n = keys.size();
  const std::uint64_t bytes = n * sizeof(Bits);
  device_buffer a{bytes}, a_alt{bytes}, b{bytes}, b_alt{bytes};
  constexpr auto width = static_cast<unsigned>(sizeof(Bits));
  const std::size_t sample_bytes = cuda::sample_sort_scratch_bytes(n, width, 0);
  const std::size_t radix_bytes = cuda::radix_sort_scratch_bytes(n, width, 0);
  device_buffer sample_scratch{sample_bytes}, radix_scratch{radix_bytes};
  cuda_stream stream;
  // what earlier users left in the buffers must not matter: fill them with garbage
  for (device_buffer* buffer : {&a_alt, &b_alt, &sample_scratch, &radix_scratch})
    ASSERT_EQ(test::fill_gpu(buffer->data(), 0xa5, buffer->size()), cudaSuccess);
  ASSERT_EQ(test::copy_to_gpu(a.data(), keys.data(), bytes), cudaSuccess);
  ASSERT_EQ(test::copy_to_gpu(b.data(), keys.data(), bytes), cudaSuccess);
  // a pageable copy may return before its DMA lands, and the non-blocking stream does not wait
  // for the legacy stream: without this the radix sort once read b early (after other tests)
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const bool sample_alt = cuda::sample_sort(a.data(), a_alt.data(), nullptr, nullptr, n, width,
                                            0, sample_scratch.data(), sample_bytes,
                                            stream.value());
  {
    // the sample sort touches nothing of the radix sort's input
    stream.synchronize();
    std::vector<Bits> untouched(n);
    ASSERT_EQ(cudaMemcpy(untouched.data(), b.data(), bytes, cudaMemcpyDeviceToHost),
              cudaSuccess);
    EXPECT_TRUE(untouched == keys) << "radix input changed, " << what;
  }
  const bool radix_alt = cuda::radix_sort(b.data(), b_alt.data(), nullptr, nullptr, n, width, 0,
                                          radix_scratch.data(), radix_bytes, stream.value());
  stream.synchronize();
  std::vector<Bits> from_sample(n), from_radix(n);
  ASSERT_EQ(cudaMemcpy(from_sample.data(), sample_alt ? a_alt.data() : a.data(), bytes,
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(from_radix.data(), radix_alt ? b_alt.data() : b.data(), bytes,
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  std::sort(keys.begin(), keys.end());
  EXPECT_TRUE(from_sample == keys) << "against std::sort, " << what;
  EXPECT_TRUE(from_sample == from_radix) << "against CUB, " << what;
  EXPECT_TRUE(from_radix == keys) << "CUB against std::sort, " << what;
}

template <typename Bits>
void expect_matches_radix_sort(std::uint64_t n, std::uint64_t seed, std::uint64_t modulus)
{
  std::mt19937_64 rng{seed};
  std::vector<Bits> keys(n);
  for (auto& k : keys) k = static_cast<Bits>(modulus == 0 ? rng() : rng() % modulus);
  expect_matches_radix_sort(std::move(keys),
                            "n=" + std::to_string(n) + " modulus=" + std::to_string(modulus));
}

class gpu_sample_sort_bits : public test::gpu_test {};

TEST_F(gpu_sample_sort_bits, ordered_bits_match_std_sort_and_cub)
{
  for (const std::uint64_t n : {5ULL, 4097ULL, 65537ULL, 2'000'003ULL}) {
    for (const std::uint64_t modulus : {0ULL, 2ULL, 17ULL, 1000ULL, 1ULL << 20}) {
      expect_matches_radix_sort<std::uint32_t>(n, n + modulus, modulus);
      expect_matches_radix_sort<std::uint64_t>(n, n * 3 + modulus, modulus);
    }
  }
}

// ---- reproducibility: the same seed gives the same output, values included ----

TEST_F(gpu_sample_sort_bits, the_same_seed_gives_the_same_pairs)
{
  for (const distribution d : {distribution::detdupes, distribution::fewunique}) {
    host_case first = make_case(dtype::u32, d, 2'500'000, 8, 4);
    host_case second = first;
    sort_on_device(first, order::ascending, 99);
    sort_on_device(second, order::ascending, 99);
    EXPECT_TRUE(first.keys == second.keys && first.values == second.values) << name_of(d);
    const fingerprint fp = fingerprint_of(second.key_view(), second.value_view());
    EXPECT_TRUE(verify(first.key_view(), first.value_view(), order::ascending, fp).ok);
  }
}

// ---- other seeds sort as well ----

TEST_F(gpu_sample_sort_bits, any_seed_sorts)
{
  for (const std::uint64_t seed : {0ULL, 1ULL, 0xffffffffffffffffULL}) {
    host_case c = make_case(dtype::f64, distribution::staggered, 1'500'000, 4, seed);
    const fingerprint before = fingerprint_of(c.key_view(), c.value_view());
    sort_on_device(c, order::descending, seed);
    EXPECT_TRUE(verify(c.key_view(), c.value_view(), order::descending, before).ok) << seed;
  }
}

// ---- every path at small sizes: the set compute-sanitizer runs (GPUSORT_TEST_MAX_N caps it) ----

TEST_F(gpu_sample_sort_bits, small_sizes_over_every_path)
{
  for (const std::uint64_t n : {1ULL, 100ULL, 1025ULL, 8193ULL, 16385ULL, 70001ULL, 300007ULL,
                                1100003ULL, 2600011ULL}) {
    if (n > max_test_n()) continue;
    for (const distribution d : {distribution::uniform, distribution::zero,
                                 distribution::detdupes, distribution::fewunique,
                                 distribution::sorted}) {
      for (const unsigned value_bytes : {0U, 4U, 8U}) {
        expect_sorts(dtype::u32, order::ascending, d, n, value_bytes, n + value_bytes);
        expect_sorts(dtype::f64, order::descending, d, n, value_bytes, n + value_bytes + 1);
      }
    }
  }
}

// Too few levels leave segments above the bucket capacity: the one-block fallback sorts them
// (and moves them to the result buffers); the copy of finished equal-key ranges is exercised by
// the odd level count.
template <typename Bits, typename Value>
void expect_pairs_sort(std::vector<Bits> keys, int levels, const std::string& what)
{
  const std::uint64_t n = keys.size();
  std::vector<Value> values(n);
  for (std::uint64_t i = 0; i < n; ++i)
    values[i] = static_cast<Value>(keys[i] * 3 + 1);  // a function of the key: checkable
  const std::uint64_t kb = n * sizeof(Bits), vb = n * sizeof(Value);
  device_buffer k{kb}, k_alt{kb}, v{vb}, v_alt{vb};
  constexpr auto key_width = static_cast<unsigned>(sizeof(Bits));
  constexpr auto value_width = static_cast<unsigned>(sizeof(Value));
  const std::size_t bytes = cuda::sample_sort_scratch_bytes(n, key_width, value_width);
  device_buffer scratch{bytes};
  cuda_stream stream;
  ASSERT_EQ(test::copy_to_gpu(k.data(), keys.data(), kb), cudaSuccess);
  ASSERT_EQ(test::copy_to_gpu(v.data(), values.data(), vb), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // see expect_matches_radix_sort
  const bool alt = cuda::detail::sample_sort_with_levels(
      key_width == 4 ? dtype::u32 : dtype::u64, order::ascending, k.data(), k_alt.data(),
      v.data(), v_alt.data(), n, value_width, scratch.data(), bytes, stream.value(),
      cuda::default_sample_seed, levels);
  stream.synchronize();
  std::vector<Bits> out_keys(n);
  std::vector<Value> out_values(n);
  ASSERT_EQ(cudaMemcpy(out_keys.data(), alt ? k_alt.data() : k.data(), kb, cudaMemcpyDeviceToHost),
            cudaSuccess);
  ASSERT_EQ(
      cudaMemcpy(out_values.data(), alt ? v_alt.data() : v.data(), vb, cudaMemcpyDeviceToHost),
      cudaSuccess);
  std::sort(keys.begin(), keys.end());
  EXPECT_TRUE(out_keys == keys) << what << " n=" << n << " levels=" << levels;
  for (std::uint64_t i = 0; i < n; ++i) {
    ASSERT_EQ(out_values[i], static_cast<Value>(out_keys[i] * 3 + 1))
        << what << ": value at " << i;
  }
}

template <typename Bits, typename Value>
void expect_fallback_sorts(std::uint64_t n, int levels, std::uint64_t modulus)
{
  std::mt19937_64 rng{n + static_cast<std::uint64_t>(levels)};
  std::vector<Bits> keys(n);
  for (auto& k : keys) k = static_cast<Bits>(rng() % modulus);
  expect_pairs_sort<Bits, Value>(std::move(keys), levels, "modulus " + std::to_string(modulus));
}

TEST_F(gpu_sample_sort_bits, too_few_levels_take_the_fallback)
{
  // modulus 300 at 3 M elements: about 10 K copies of each key, too few for an equality bucket
  // at level 0 but enough for one above half the capacity at level 1 (the copy path)
  for (const std::uint64_t modulus : {3ULL, 300ULL, 1000ULL, ~0ULL}) {
    expect_fallback_sorts<std::uint32_t, std::uint32_t>(50'001, 0, modulus);
    expect_fallback_sorts<std::uint64_t, std::uint64_t>(40'009, 0, modulus);
    if (max_test_n() >= 3'000'017) {
      for (const int levels : {1, 2}) {
        expect_fallback_sorts<std::uint32_t, std::uint64_t>(3'000'017, levels, modulus);
        expect_fallback_sorts<std::uint64_t, std::uint32_t>(3'000'017, levels, modulus);
      }
    }
  }
}

// Raw keys (floats, signed, descending) are mapped to ordered bits where the passes read the
// input and back where they write the result: the fallback after 0 levels (raw keys in the
// primary buffer), after 1 level (in the result buffer), after 2; finished equal-key buckets in
// the result buffer (zero, level 0) and in the primary buffer (fewunique, level 1).
TEST_F(gpu_sample_sort_bits, raw_keys_on_every_path)
{
  for (const auto& [n, levels] : {std::pair{40'009ULL, 0}, std::pair{3'000'017ULL, 1},
                                  std::pair{3'000'017ULL, 2}, std::pair{3'000'017ULL, -1}}) {
    if (n > max_test_n()) continue;
    for (const distribution d :
         {distribution::uniform, distribution::zero, distribution::fewunique}) {
      expect_sorts(dtype::f64, order::descending, d, n, 0, n + 1, levels);
      expect_sorts(dtype::i32, order::ascending, d, n, 8, n + 2, levels);
      expect_sorts(dtype::f32, order::ascending, d, n, 4, n + 3, levels);
    }
  }
}

// The counted scan (counted_sum_kernel and the two after it) takes levels whose segments split
// into fewer than k buckets and the spare level, which seldom finds tiles: here every level
// takes it, level 0 too, with at most one chunk of counters a block and, at 2^25 keys (4096
// tiles of up to 512 counters), with several.
TEST_F(gpu_sample_sort_bits, counted_scan_on_every_level)
{
  for (const std::uint64_t n : {40'009ULL, 3'000'017ULL}) {
    if (n > max_test_n()) continue;
    for (const distribution d :
         {distribution::uniform, distribution::zero, distribution::staggered}) {
      expect_sorts(dtype::u32, order::ascending, d, n, 0, n + 1, -1, scan_choice::counted);
      expect_sorts(dtype::f64, order::descending, d, n, 8, n + 2, -1, scan_choice::counted);
    }
  }
  constexpr std::uint64_t large = (std::uint64_t{1} << 25) + 3;
  if (large > max_test_n()) return;
  expect_sorts(dtype::u32, order::ascending, distribution::uniform, large, 0, 7, -1,
               scan_choice::counted);
  expect_sorts(dtype::f32, order::descending, distribution::gaussian, large, 4, 8, -1,
               scan_choice::counted);
}

// CUB's scan over the host's bound, which the predicted choice takes past level 0 only at a few
// hundred million elements, on every level: the bound holds more counters than the level's
// segments have, and the tile map zeroes the rest, so that the scan reads nothing unwritten
// (initcheck, with fresh scratch) and the level's offsets stay right. Zero and fewunique leave
// few segments for level 1, most of the bound unused; 1,000,003 pairs on sm_90 take three
// levels (the spare one).
TEST_F(gpu_sample_sort_bits, bound_scan_on_every_level)
{
  for (const std::uint64_t n : {16'385ULL, 40'009ULL, 1'000'003ULL, 3'000'017ULL}) {
    if (n > max_test_n()) continue;
    for (const distribution d : {distribution::uniform, distribution::zero,
                                 distribution::fewunique, distribution::staggered}) {
      expect_sorts(dtype::u32, order::ascending, d, n, 0, n + 1, -1, scan_choice::bound);
      expect_sorts(dtype::f64, order::descending, d, n, 8, n + 2, -1, scan_choice::bound);
      expect_sorts(dtype::i32, order::ascending, d, n, 4, n + 3, -1, scan_choice::bound);
    }
  }
}

// Nothing the sort reads of its scratch may be left from before it: pairs (ranked
// deterministically) sorted over scratch full of zeros and over scratch full of ones come out
// byte for byte the same, and sorted, at one level, two and the spare, with either scan.
TEST_F(gpu_sample_sort_bits, what_the_scratch_held_does_not_matter)
{
  for (const std::uint64_t n : {16'385ULL, 70'001ULL, 1'000'003ULL}) {
    if (n > max_test_n()) continue;
    for (const scan_choice scans : {scan_choice::predicted, scan_choice::bound}) {
      for (const distribution d : {distribution::uniform, distribution::detdupes}) {
        host_case input = make_case(dtype::u32, d, n, 8, n);
        const fingerprint fp = fingerprint_of(input.key_view(), input.value_view());
        host_case zeros = input;
        host_case ones = input;
        sort_on_device(zeros, order::ascending, cuda::default_sample_seed, -1, scans, 0x00);
        sort_on_device(ones, order::ascending, cuda::default_sample_seed, -1, scans, 0xff);
        EXPECT_TRUE(zeros.keys == ones.keys && zeros.values == ones.values)
            << name_of(d) << " n=" << n;
        EXPECT_TRUE(verify(zeros.key_view(), zeros.value_view(), order::ascending, fp).ok)
            << name_of(d) << " n=" << n;
      }
    }
  }
}

// Key buffers 4 bytes past a 16-byte boundary (a caller's sub-range): the distribution passes
// read such tiles key by key, not as vectors, at every level.
TEST_F(gpu_sample_sort_bits, buffers_off_a_vector_boundary)
{
  constexpr std::uint64_t n = 1'000'003;
  std::mt19937_64 rng{n};
  std::vector<std::uint32_t> keys(n);
  for (auto& k : keys) k = static_cast<std::uint32_t>(rng());
  device_buffer k{(n + 1) * 4}, k_alt{(n + 1) * 4};
  auto* in = static_cast<std::uint32_t*>(k.data()) + 1;
  auto* in_alt = static_cast<std::uint32_t*>(k_alt.data()) + 1;
  const std::size_t bytes = cuda::sample_sort_scratch_bytes(n, 4, 0);
  device_buffer scratch{bytes};
  cuda_stream stream;
  ASSERT_EQ(test::copy_to_gpu(in, keys.data(), n * 4), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the pageable copy's DMA has landed
  const bool alt = cuda::sample_sort(dtype::u32, order::ascending, in, in_alt, nullptr, nullptr,
                                     n, 0, scratch.data(), bytes, stream.value(),
                                     cuda::default_sample_seed);
  stream.synchronize();
  std::vector<std::uint32_t> out(n);
  ASSERT_EQ(cudaMemcpy(out.data(), alt ? in_alt : in, n * 4, cudaMemcpyDeviceToHost),
            cudaSuccess);
  std::sort(keys.begin(), keys.end());
  EXPECT_TRUE(out == keys);
}

// Uniform floats crowd the cells of their ordered bits, so level 0 indexes the cells by value,
// clamped between the smallest and the largest splitter: NaNs of both signs, infinities and
// both zeros, one key in 4000 (too few to be splitters), go through that clamp.
TEST_F(gpu_sample_sort_bits, value_cells_take_nans_and_infinities)
{
  constexpr std::uint64_t n = 3'000'017;
  if (n > max_test_n()) GTEST_SKIP() << "GPUSORT_TEST_MAX_N is below " << n;
  for (const dtype t : {dtype::f32, dtype::f64}) {
    for (const order dir : {order::ascending, order::descending}) {
      host_case c = make_case(t, distribution::uniform, n, 4, n + size_of(t));
      std::mt19937_64 rng{n};
      for (std::uint64_t i = 0; i < n / 4000; ++i) {
        const std::uint64_t at = rng() % n;
        const double special[] = {std::numeric_limits<double>::quiet_NaN(),
                                  -std::numeric_limits<double>::quiet_NaN(),
                                  std::numeric_limits<double>::infinity(),
                                  -std::numeric_limits<double>::infinity(), 0.0, -0.0};
        const double v = special[i % 6];
        if (t == dtype::f32) {
          const auto f = static_cast<float>(v);
          std::memcpy(c.keys.data() + at * 4, &f, 4);
        } else {
          std::memcpy(c.keys.data() + at * 8, &v, 8);
        }
      }
      const fingerprint before = fingerprint_of(c.key_view(), c.value_view());
      sort_on_device(c, dir);
      const verify_result v = verify(c.key_view(), c.value_view(), dir, before);
      EXPECT_TRUE(v.ok) << name_of(t) << (dir == order::ascending ? " asc" : " desc") << ": "
                        << v.message;
    }
  }
}

// The bucket sort of one job (n below the capacity: no levels): one counting pass over the top
// log2(capacity) bits of the bits that differ, then runs of keys agreeing in those bits sorted
// by one thread each; a run above 16 keys sends the job back to LSD passes over all bits. Keys
// sit in every `spacing`-th value of the top 8 bits, so runs grow with n * spacing; seven copies
// of the largest key make one run of equal keys, with their values (a function of the key)
// checked.
template <typename Bits, typename Value>
void expect_digit_paths_sort(std::uint64_t n, unsigned spacing, std::uint64_t seed)
{
  constexpr int top = 8 * sizeof(Bits) - 8;
  std::mt19937_64 rng{seed};
  std::vector<Bits> keys(n);
  for (auto& k : keys) {
    const auto digit = static_cast<Bits>(rng() % (256 / spacing) * spacing);
    k = static_cast<Bits>(digit << top | static_cast<Bits>(rng() & ((Bits{1} << top) - 1)));
  }
  for (int i = 0; i < 7; ++i) keys[rng() % n] = static_cast<Bits>(~Bits{0});
  expect_pairs_sort<Bits, Value>(std::move(keys), -1, "spacing " + std::to_string(spacing));
}

/// A job whose keys all but a few agree in their top bits: the LSD fallback.
template <typename Bits, typename Value>
void expect_skewed_job_sorts(std::uint64_t n, std::uint64_t seed)
{
  std::mt19937_64 rng{seed};
  std::vector<Bits> keys(n);
  for (auto& k : keys) k = static_cast<Bits>(rng() % 65536);
  for (int i = 0; i < 10; ++i) keys[rng() % n] = static_cast<Bits>(~Bits{0} - rng() % 3);
  expect_pairs_sort<Bits, Value>(std::move(keys), -1, "skewed");
}

TEST_F(gpu_sample_sort_bits, bucket_sort_digit_paths_and_fallback)
{
  // 6000 and 2600 pairs: one job of the large class, with runs of up to a few keys; 700: the
  // small class
  for (const auto& [n, spacing] : {std::pair{6000ULL, 1U}, std::pair{6000ULL, 2U},
                                   std::pair{6000ULL, 8U}, std::pair{2600ULL, 8U},
                                   std::pair{700ULL, 2U}}) {
    expect_digit_paths_sort<std::uint32_t, std::uint32_t>(n, spacing, n + spacing);
    expect_digit_paths_sort<std::uint32_t, std::uint64_t>(n, spacing, n + spacing + 1);
    expect_digit_paths_sort<std::uint64_t, std::uint32_t>(n, spacing, n + spacing + 2);
    expect_digit_paths_sort<std::uint64_t, std::uint64_t>(n, spacing, n + spacing + 3);
  }
  for (const std::uint64_t n : {700ULL, 6000ULL}) {
    expect_skewed_job_sorts<std::uint32_t, std::uint32_t>(n, n);
    expect_skewed_job_sorts<std::uint64_t, std::uint64_t>(n, n + 1);
  }
}

// Keys alone whose low bits all agree: each digit of a bucket sort's top pass can then hold
// only equal keys, and the keys skip counting their places in their runs (floats on a grid
// coarser than their spacing, multiples of a power of two). Copies of each key fill runs longer
// than the counting takes. One key with other low bits puts the job back on the counting path.
template <typename Bits>
void expect_agreed_bits_sort(std::uint64_t n, std::uint64_t modulus, int low_bits, bool odd_one,
                             std::uint64_t seed)
{
  std::mt19937_64 rng{seed};
  const auto low = static_cast<Bits>(0x5a5a5a5a5a5a5a5aULL & ((Bits{1} << low_bits) - 1));
  std::vector<Bits> keys(n);
  for (auto& k : keys) k = static_cast<Bits>(static_cast<Bits>(rng() % modulus) << low_bits | low);
  if (odd_one) keys[rng() % n] ^= Bits{1};
  const std::string what = "agreed " + std::to_string(low_bits) + " bits, modulus " +
                           std::to_string(modulus) + (odd_one ? ", one odd key" : "") +
                           ", n=" + std::to_string(n);
  expect_matches_radix_sort(keys, what);
  // pairs count their places whatever the bits (equal keys keep their input order)
  expect_pairs_sort<Bits, std::uint32_t>(std::move(keys), -1, what);
}

TEST_F(gpu_sample_sort_bits, agreed_low_bits_skip_the_counting)
{
  // 6000: one job; 40,009 and 3,000,017: one and two levels. Modulus 700 at 6000 keys: runs of
  // about 9 copies; 1000 at 3 M: about 3000 copies, equality buckets; 2^20: few copies.
  for (const std::uint64_t n : {6000ULL, 40'009ULL, 3'000'017ULL}) {
    if (n > max_test_n()) continue;
    for (const std::uint64_t modulus : {700ULL, 1000ULL, 1ULL << 20}) {
      for (const bool odd_one : {false, true}) {
        expect_agreed_bits_sort<std::uint32_t>(n, modulus, 12, odd_one, n + modulus);
        expect_agreed_bits_sort<std::uint32_t>(n, modulus, 1, odd_one, n + modulus + 1);
        expect_agreed_bits_sort<std::uint64_t>(n, modulus, 40, odd_one, n + modulus + 2);
      }
    }
  }
}

// One key in a hundred far above the rest: the splitter range is wide, the other splitters
// crowd the first cells, and their keys take the tree walk instead of the cell compares.
template <typename Bits>
void expect_outliers_sort(std::uint64_t n, std::uint64_t seed)
{
  std::mt19937_64 rng{seed};
  std::vector<Bits> keys(n);
  for (auto& k : keys) {
    const bool far = rng() % 100 == 0;
    k = static_cast<Bits>(far ? ~Bits{0} - rng() % 1000 : rng() % 4096);
  }
  expect_pairs_sort<Bits, std::uint32_t>(std::move(keys), -1, "outliers");
}

TEST_F(gpu_sample_sort_bits, far_outliers_crowd_the_cells)
{
  for (const std::uint64_t n : {70'001ULL, 3'000'017ULL}) {
    if (n > max_test_n()) continue;
    expect_outliers_sort<std::uint32_t>(n, n);
    expect_outliers_sort<std::uint64_t>(n, n + 1);
  }
}

// ---- large: a few hundred million, and past 2^31 ----

bool fits_device(std::uint64_t bytes)
{
  std::size_t free_bytes = 0, total_bytes = 0;
  return cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess &&
         free_bytes > bytes + (std::uint64_t{1} << 30);
}

TEST_F(gpu_sample_sort_bits, three_hundred_million_keys_and_pairs)
{
  constexpr std::uint64_t n = 300'000'000;
  if (n > max_test_n()) GTEST_SKIP() << "GPUSORT_TEST_MAX_N is below " << n;
  if (!fits_device(n * 2 * 16 + n)) GTEST_SKIP() << "needs about 10 GiB of GPU memory";
  expect_sorts(dtype::u32, order::ascending, distribution::uniform, n, 0, 11);
  expect_sorts(dtype::f64, order::descending, distribution::gaussian, n, 8, 12);
  expect_sorts(dtype::i64, order::ascending, distribution::detdupes, n, 0, 13);
}

TEST_F(gpu_sample_sort_bits, two_to_the_31_plus_one_keys)
{
  if (std::getenv("GPUSORT_TEST_HUGE") == nullptr)
    GTEST_SKIP() << "set GPUSORT_TEST_HUGE=1 (needs about 30 GiB of host and GPU memory)";
  constexpr std::uint64_t n = (std::uint64_t{1} << 31) + 1;
  if (n > max_test_n()) GTEST_SKIP() << "GPUSORT_TEST_MAX_N is below " << n;
  if (!fits_device(n * 4 * 2 + n)) GTEST_SKIP() << "needs about 18 GiB of GPU memory";
  expect_sorts(dtype::u32, order::ascending, distribution::uniform, n, 0, 21);
}

// ---- arguments: no GPU needed, they fail before any CUDA call ----

TEST(sample_sort_arguments, bad_widths_null_buffers_and_small_scratch_are_rejected)
{
  EXPECT_THROW((void)cuda::sample_sort_scratch_bytes(10, 2, 0), invalid_argument);
  EXPECT_THROW((void)cuda::sample_sort_scratch_bytes(10, 4, 2), invalid_argument);
  int dummy = 0;
  EXPECT_THROW(cuda::sample_sort(nullptr, nullptr, nullptr, nullptr, 10, 4, 0, &dummy, 1 << 20,
                                 nullptr),
               invalid_argument);
  EXPECT_THROW(cuda::sample_sort(&dummy, &dummy, nullptr, nullptr, 10, 4, 8, &dummy, 1 << 20,
                                 nullptr),
               invalid_argument);
  EXPECT_THROW(
      cuda::sample_sort(&dummy, &dummy, nullptr, nullptr, 10, 4, 0, nullptr, 1 << 20, nullptr),
      invalid_argument);
  EXPECT_THROW(cuda::sample_sort(&dummy, &dummy, nullptr, nullptr, 10, 8, 3, &dummy, 0, nullptr),
               invalid_argument);
  // nothing to sort: no launch, no CUDA call, the result stays in the primary buffers
  EXPECT_FALSE(cuda::sample_sort(nullptr, nullptr, nullptr, nullptr, 0, 8, 8, nullptr, 0, nullptr));
  EXPECT_FALSE(cuda::sample_sort(dtype::f32, order::descending, nullptr, nullptr, nullptr, nullptr,
                                 0, 0, nullptr, 0, nullptr));
  EXPECT_THROW((void)cuda::sample_sort_preferred(4, 3, 9), invalid_argument);
}

// The level count of the bulk of the data on sm_90 (16 Ki keys alone a bucket, 4 Ki pairs):
// counted to 3/4 of the capacity, 1.25 * 2^29 keys alone take two levels; counted to half the
// capacity (2^16 buckets of 8 Ki) they took three.
TEST(sample_sort_arguments, levels_of_an_average_segment)
{
  using cuda::detail::sample_sort_shape_of;
  constexpr std::uint64_t past_two_to_the_29 = std::uint64_t{5} << 27;
  EXPECT_EQ(sample_sort_shape_of(16384, 8, 0, 9).levels, 0);
  EXPECT_EQ(sample_sort_shape_of(16385, 8, 0, 9).levels, 1);
  EXPECT_EQ(sample_sort_shape_of(std::uint64_t{1} << 26, 4, 0, 9).levels, 2);
  EXPECT_EQ(sample_sort_shape_of(std::uint64_t{1} << 29, 8, 0, 9).levels, 2);
  EXPECT_EQ(sample_sort_shape_of(past_two_to_the_29, 8, 0, 9).levels, 2);
  EXPECT_EQ(sample_sort_shape_of(past_two_to_the_29, 4, 0, 9).levels, 2);
  EXPECT_EQ(sample_sort_shape_of(std::uint64_t{1} << 29, 8, 8, 9).levels, 3);
  // launched: those and one spare level, none where one block sorts everything
  EXPECT_EQ(sample_sort_shape_of(std::uint64_t{1} << 29, 8, 0, 9).launched_levels, 3);
  EXPECT_EQ(sample_sort_shape_of(std::uint64_t{1} << 29, 8, 8, 9).launched_levels, 4);
  EXPECT_EQ(sample_sort_shape_of(16384, 8, 0, 9).launched_levels, 0);
}

class gpu_sample_sort_scratch : public test::gpu_test {};

// The size query asks CUB for its scan's scratch, which needs the runtime: a GPU test.
TEST_F(gpu_sample_sort_scratch, scratch_stays_below_the_data)
{
  // the pipeline sizes chunks from this query: at most about one more copy of the data
  for (const std::uint64_t n : {1ULL << 20, 1ULL << 28, 3'000'000'017ULL}) {
    for (const unsigned key_bytes : {4U, 8U}) {
      for (const unsigned value_bytes : {0U, 4U, 8U}) {
        const std::size_t bytes = cuda::sample_sort_scratch_bytes(n, key_bytes, value_bytes);
        EXPECT_LT(bytes, n * (key_bytes + value_bytes)) << key_bytes << "/" << value_bytes;
        EXPECT_GT(bytes, 0U);
      }
    }
  }
}

TEST_F(gpu_sample_sort_scratch, too_small_scratch_is_rejected)
{
  const std::uint64_t n = 100'000;
  device_buffer keys{n * 4}, alt{n * 4};
  const std::size_t bytes = cuda::sample_sort_scratch_bytes(n, 4, 0);
  device_buffer scratch{bytes};
  EXPECT_THROW(cuda::sample_sort(keys.data(), alt.data(), nullptr, nullptr, n, 4, 0,
                                 scratch.data(), bytes / 2, nullptr),
               invalid_argument);
}

}  // namespace
}  // namespace gpusort
