// The device transforms against the host transforms of core/keys.hpp (tested on their own in
// tests/core), the CPU engine's (core/cpu_sort.hpp) and hand-written key orders (IEEE 754
// totalOrder, two's complement).
#include "gpu_test_support.hpp"
#include "pipeline/cuda/resources.hpp"

#include "core/cpu_sort.hpp"
#include "core/cuda/ordered_keys.cuh"
#include "core/keys.hpp"

#include <gpusort/error.hpp>
#include <gpusort/types.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace gpusort {

// Readable parameters in test names and ctest's listing (found by ADL, so in gpusort itself).
static void PrintTo(dtype t, std::ostream* os) { *os << name_of(t); }
static void PrintTo(order dir, std::ostream* os)
{
  *os << (dir == order::ascending ? "ascending" : "descending");
}

namespace {

using cuda::cuda_stream;
using cuda::device_buffer;
using cuda::transform_tuning;

template <typename Bits>
std::vector<Bits> special_bits()
{
  if constexpr (sizeof(Bits) == 4) {
    return {0x7fc00000U, 0xffc00000U, 0x7f800001U, 0xff800001U, 0x7fffffffU, 0xffffffffU,
            0x7f800000U, 0xff800000U, 0x00000000U, 0x80000000U, 0x00000001U, 0x80000001U,
            0x007fffffU, 0x807fffffU, 0x3f800000U, 0xbf800000U, 0x7f7fffffU, 0xff7fffffU};
  } else {
    return {0x7ff8000000000000U, 0xfff8000000000000U, 0x7ff0000000000001U,
            0xfff0000000000001U, 0x7fffffffffffffffU, 0xffffffffffffffffU,
            0x7ff0000000000000U, 0xfff0000000000000U, 0x0000000000000000U,
            0x8000000000000000U, 0x0000000000000001U, 0x8000000000000001U,
            0x000fffffffffffffU, 0x800fffffffffffffU, 0x3ff0000000000000U,
            0xbff0000000000000U, 0x7fefffffffffffffU, 0xffefffffffffffffU};
  }
}

// Random bits (NaNs with random payloads among them) with every fifth key a special value.
template <typename Bits>
std::vector<Bits> random_bits(std::uint64_t n, std::uint64_t seed)
{
  std::mt19937_64 rng{seed};
  const std::vector<Bits> specials = special_bits<Bits>();
  std::vector<Bits> keys(n);
  for (std::uint64_t i = 0; i < n; ++i) {
    keys[i] = (i % 5 == 2) ? specials[rng() % specials.size()] : static_cast<Bits>(rng());
  }
  return keys;
}

// Copies `input` to the device at an offset of `offset` keys past a 256-byte-aligned start (so
// that the kernel's scalar head is exercised), applies the transform, and copies back.
template <typename Bits>
std::vector<Bits> run_on_device(const std::vector<Bits>& input, std::uint64_t offset, dtype t,
                                order dir, bool forward, const transform_tuning& tuning = {})
{
  const std::uint64_t n = input.size();
  device_buffer buffer{(n + offset + 1) * sizeof(Bits)};
  cuda_stream stream;
  Bits* const keys = buffer.data<Bits>() + offset;
  const std::uint64_t bytes = n * sizeof(Bits);
  std::vector<Bits> output(n);
  EXPECT_EQ(cudaMemcpyAsync(keys, input.data(), bytes, cudaMemcpyHostToDevice, stream.value()),
            cudaSuccess);
  if (forward) {
    cuda::to_ordered(keys, n, t, dir, stream.value(), tuning);
  } else {
    cuda::from_ordered(keys, n, t, dir, stream.value(), tuning);
  }
  EXPECT_EQ(cudaMemcpyAsync(output.data(), keys, bytes, cudaMemcpyDeviceToHost, stream.value()),
            cudaSuccess);
  stream.synchronize();
  return output;
}

template <typename Bits>
void expect_matches_host(dtype t, order dir, bool forward, std::uint64_t n, std::uint64_t offset,
                         const transform_tuning& tuning = {})
{
  const std::vector<Bits> input = random_bits<Bits>(n, n * 131 + offset);
  const std::vector<Bits> output = run_on_device(input, offset, t, dir, forward, tuning);
  for (std::uint64_t i = 0; i < n; ++i) {
    const Bits expected = forward ? detail::to_ordered<Bits>(input[i], t, dir)
                                  : detail::from_ordered<Bits>(input[i], t, dir);
    ASSERT_EQ(output[i], expected) << name_of(t) << (dir == order::ascending ? " asc" : " desc")
                                   << (forward ? " to" : " from") << " n=" << n
                                   << " offset=" << offset << " at " << i << " input "
                                   << std::hex << input[i];
  }
}

// ---- every dtype x order x direction, against the host transforms ----

using transform_case = std::tuple<dtype, order, bool>;

class gpu_ordered_keys : public test::gpu_test,
                         public ::testing::WithParamInterface<transform_case> {};

TEST_P(gpu_ordered_keys, matches_host_transform_for_odd_sizes_and_offsets)
{
  const auto [t, dir, forward] = GetParam();
  for (const std::uint64_t n : {1ULL, 2ULL, 3ULL, 5ULL, 7ULL, 8ULL, 9ULL, 31ULL, 1001ULL,
                                65537ULL, (1ULL << 20) + 7}) {
    for (const std::uint64_t offset : {0ULL, 1ULL, 2ULL, 3ULL}) {
      if (size_of(t) == 4) {
        expect_matches_host<std::uint32_t>(t, dir, forward, n, offset);
      } else {
        expect_matches_host<std::uint64_t>(t, dir, forward, n, offset);
      }
      if (HasFatalFailure()) return;
    }
  }
}

TEST_P(gpu_ordered_keys, small_grids_stride_over_the_whole_array)
{
  const auto [t, dir, forward] = GetParam();
  for (const transform_tuning tuning :
       {transform_tuning{32, 1, 1}, transform_tuning{64, 3, 2}, transform_tuning{1024, 1, 3}}) {
    if (size_of(t) == 4) {
      expect_matches_host<std::uint32_t>(t, dir, forward, 100003, 1, tuning);
    } else {
      expect_matches_host<std::uint64_t>(t, dir, forward, 100003, 1, tuning);
    }
    if (HasFatalFailure()) return;
  }
}

TEST_P(gpu_ordered_keys, zero_keys_launch_nothing_and_touch_nothing)
{
  const auto [t, dir, forward] = GetParam();
  cuda_stream stream;
  device_buffer buffer{64};
  std::vector<unsigned char> pattern(64, 0x3D);
  ASSERT_EQ(cudaMemcpy(buffer.data(), pattern.data(), 64, cudaMemcpyHostToDevice), cudaSuccess);
  if (forward) {
    cuda::to_ordered(buffer.data(), 0, t, dir, stream.value());
    cuda::to_ordered(nullptr, 0, t, dir, stream.value());
  } else {
    cuda::from_ordered(buffer.data(), 0, t, dir, stream.value());
    cuda::from_ordered(nullptr, 0, t, dir, stream.value());
  }
  stream.synchronize();
  std::vector<unsigned char> back(64);
  ASSERT_EQ(cudaMemcpy(back.data(), buffer.data(), 64, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, pattern);
}

// ---- out of place: what the resident engine's final stage runs, and may run again ----

/// The key orders of `t`: totalOrder, and for floats NumPy's order, plain and canonical.
std::vector<detail::key_order> key_orders(dtype t, order dir)
{
  std::vector<detail::key_order> orders{{.type = t, .dir = dir}};
  if (is_float(t)) {
    orders.push_back({.type = t, .dir = dir, .floats = float_order::numpy});
    orders.push_back({.type = t, .dir = dir, .floats = float_order::numpy, .canonical = true});
  }
  return orders;
}

std::string describe(const detail::key_order& k)
{
  return std::string{name_of(k.type)} + (k.dir == order::ascending ? " asc" : " desc") +
         (k.numpy_floats() ? (k.canonical ? " numpy canonical" : " numpy") : "");
}

/// Copies a device range to a new host vector.
template <typename Bits>
std::vector<Bits> fetch(const Bits* d, std::uint64_t count, cudaStream_t s)
{
  std::vector<Bits> host(count);
  EXPECT_EQ(cudaMemcpyAsync(host.data(), d, count * sizeof(Bits), cudaMemcpyDeviceToHost, s),
            cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  return host;
}

/// The out-of-place transform of `input`, from `src_offset` keys past a 256-byte boundary into
/// another buffer at `dst_offset` keys past one, run twice on the same source (the second must
/// give the same keys: a retried stage), checked against the CPU's transform; the source and the
/// guard keys around the destination must be as they were.
template <typename Bits>
void expect_out_of_place_matches_cpu(const detail::key_order& k, bool forward, std::uint64_t n,
                                     std::uint64_t src_offset, std::uint64_t dst_offset,
                                     const transform_tuning& tuning = {})
{
  const std::string context = describe(k) + (forward ? " to" : " from") + " n=" +
                              std::to_string(n) + " src+" + std::to_string(src_offset) +
                              " dst+" + std::to_string(dst_offset);
  const std::vector<Bits> input = random_bits<Bits>(n, n * 7 + src_offset * 3 + dst_offset);
  std::vector<Bits> expected(n);
  if (forward) {
    detail::to_ordered_bits(input.data(), expected.data(), n, k);
  } else {
    detail::from_ordered_bits(input.data(), expected.data(), n, k);
  }
  constexpr std::uint64_t guard = 5;
  constexpr Bits pattern = static_cast<Bits>(0xA5A5A5A5A5A5A5A5ULL);
  const std::uint64_t dst_keys = dst_offset + n + guard;
  device_buffer src_buffer{(src_offset + n + 1) * sizeof(Bits)};
  device_buffer dst_buffer{dst_keys * sizeof(Bits)};
  cuda_stream stream;
  const cudaStream_t s = stream.value();
  Bits* const src = src_buffer.data<Bits>() + src_offset;
  Bits* const dst = dst_buffer.data<Bits>() + dst_offset;
  const std::vector<Bits> guards(dst_keys, pattern);
  ASSERT_EQ(cudaMemcpyAsync(src, input.data(), n * sizeof(Bits), cudaMemcpyHostToDevice, s),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(dst_buffer.data(), guards.data(), dst_keys * sizeof(Bits),
                            cudaMemcpyHostToDevice, s),
            cudaSuccess);
  for (int run = 1; run <= 2; ++run) {
    if (forward) {
      cuda::to_ordered(src, dst, n, k, s, tuning);
    } else {
      cuda::from_ordered(src, dst, n, k, s, tuning);
    }
    const std::vector<Bits> all = fetch(dst_buffer.data<Bits>(), dst_keys, s);
    for (std::uint64_t i = 0; i < dst_keys; ++i) {
      const bool inside = i >= dst_offset && i < dst_offset + n;
      const Bits want = inside ? expected[i - dst_offset] : pattern;
      ASSERT_EQ(all[i], want) << context << ", run " << run << ": destination key " << i
                              << (inside ? "" : " (a guard)") << std::hex << ", input "
                              << (inside ? input[i - dst_offset] : Bits{});
    }
    ASSERT_EQ(fetch(src, n, s), input) << context << ", run " << run << ": the source changed";
  }
}

/// The same keys given as source and destination: exactly the in-place transform.
template <typename Bits>
void expect_same_array_is_in_place(const detail::key_order& k, bool forward, std::uint64_t n,
                                   std::uint64_t offset)
{
  const std::vector<Bits> input = random_bits<Bits>(n, n + offset + 11);
  std::vector<Bits> expected(n);
  if (forward) {
    detail::to_ordered_bits(input.data(), expected.data(), n, k);
  } else {
    detail::from_ordered_bits(input.data(), expected.data(), n, k);
  }
  device_buffer buffer{(offset + n + 1) * sizeof(Bits)};
  cuda_stream stream;
  const cudaStream_t s = stream.value();
  Bits* const keys = buffer.data<Bits>() + offset;
  ASSERT_EQ(cudaMemcpyAsync(keys, input.data(), n * sizeof(Bits), cudaMemcpyHostToDevice, s),
            cudaSuccess);
  if (forward) {
    cuda::to_ordered(keys, keys, n, k, s);
  } else {
    cuda::from_ordered(keys, keys, n, k, s);
  }
  ASSERT_EQ(fetch(keys, n, s), expected) << describe(k) << " n=" << n << " offset=" << offset;
}

TEST_P(gpu_ordered_keys, out_of_place_matches_the_cpu_and_leaves_the_source)
{
  const auto [t, dir, forward] = GetParam();
  // Same alignment (vectors), then different alignments modulo 16 bytes (key by key).
  const std::vector<std::pair<std::uint64_t, std::uint64_t>> offsets{
      {0, 0}, {1, 1}, {3, 3}, {0, 1}, {1, 0}, {2, 3}};
  for (const detail::key_order& k : key_orders(t, dir)) {
    for (const std::uint64_t n : {1ULL, 2ULL, 3ULL, 7ULL, 9ULL, 31ULL, 1001ULL, 65537ULL,
                                  (1ULL << 20) + 7}) {
      for (const auto& [src_offset, dst_offset] : offsets) {
        if (size_of(t) == 4) {
          expect_out_of_place_matches_cpu<std::uint32_t>(k, forward, n, src_offset, dst_offset);
        } else {
          expect_out_of_place_matches_cpu<std::uint64_t>(k, forward, n, src_offset, dst_offset);
        }
        if (HasFatalFailure()) return;
      }
    }
    // Small grids stride over every key, on both paths.
    for (const transform_tuning tuning : {transform_tuning{32, 1, 1}, transform_tuning{64, 3, 2}}) {
      for (const std::uint64_t dst_offset : {1ULL, 2ULL}) {
        if (size_of(t) == 4) {
          expect_out_of_place_matches_cpu<std::uint32_t>(k, forward, 100003, 1, dst_offset,
                                                         tuning);
        } else {
          expect_out_of_place_matches_cpu<std::uint64_t>(k, forward, 100003, 1, dst_offset,
                                                         tuning);
        }
        if (HasFatalFailure()) return;
      }
    }
  }
}

TEST_P(gpu_ordered_keys, out_of_place_with_the_same_keys_is_the_in_place_transform)
{
  const auto [t, dir, forward] = GetParam();
  for (const detail::key_order& k : key_orders(t, dir)) {
    for (const std::uint64_t n : {1ULL, 5ULL, 1001ULL, (1ULL << 20) + 7}) {
      for (const std::uint64_t offset : {0ULL, 1ULL, 3ULL}) {
        if (size_of(t) == 4) {
          expect_same_array_is_in_place<std::uint32_t>(k, forward, n, offset);
        } else {
          expect_same_array_is_in_place<std::uint64_t>(k, forward, n, offset);
        }
        if (HasFatalFailure()) return;
      }
    }
  }
}

std::string case_name(const ::testing::TestParamInfo<transform_case>& info)
{
  const auto [t, dir, forward] = info.param;
  return std::string{name_of(t)} + (dir == order::ascending ? "_asc" : "_desc") +
         (forward ? "_to" : "_from");
}

INSTANTIATE_TEST_SUITE_P(all, gpu_ordered_keys,
                         ::testing::Combine(::testing::ValuesIn(all_dtypes),
                                            ::testing::Values(order::ascending,
                                                              order::descending),
                                            ::testing::Bool()),
                         case_name);

// ---- independent references: the key order itself ----

// Keys in strictly ascending key order (floats by totalOrder: -NaN < -inf < ... < +inf < +NaN).
template <typename Key>
std::vector<Key> ascending_keys()
{
  using lim = std::numeric_limits<Key>;
  if constexpr (std::is_floating_point_v<Key>) {
    const Key nan = lim::quiet_NaN();
    return {-nan,      -lim::infinity(), -lim::max(), Key(-1.5), -lim::min(), -lim::denorm_min(),
            Key(-0.0), Key(0.0),         lim::denorm_min(),     lim::min(),  Key(1.5),
            lim::max(), lim::infinity(), nan};
  } else if constexpr (std::is_signed_v<Key>) {
    return {lim::min(), Key(lim::min() + 1), Key(-2), Key(-1), Key(0), Key(1), Key(lim::max())};
  } else {
    return {Key(0), Key(1), Key(2), Key(lim::max() / 2), Key(lim::max() / 2 + 1), lim::max()};
  }
}

class gpu_ordered_keys_order : public test::gpu_test {};

template <typename Key>
void expect_device_bits_follow_key_order()
{
  using bits_t = detail::bits_t<sizeof(Key)>;
  const std::vector<Key> keys = ascending_keys<Key>();
  std::vector<bits_t> raw(keys.size());
  std::transform(keys.begin(), keys.end(), raw.begin(),
                 [](Key k) { return std::bit_cast<bits_t>(k); });
  const dtype t = dtype_of_v<Key>;

  const std::vector<bits_t> asc = run_on_device(raw, 0, t, order::ascending, true);
  const std::vector<bits_t> desc = run_on_device(raw, 0, t, order::descending, true);
  for (std::size_t i = 1; i < keys.size(); ++i) {
    EXPECT_LT(asc[i - 1], asc[i]) << name_of(t) << " ascending, keys " << i - 1 << " and " << i;
    EXPECT_GT(desc[i - 1], desc[i]) << name_of(t) << " descending, keys " << i - 1 << " and " << i;
  }
  // and back to the very same bits, NaN payloads and signed zeros included
  EXPECT_EQ(run_on_device(asc, 0, t, order::ascending, false), raw);
  EXPECT_EQ(run_on_device(desc, 0, t, order::descending, false), raw);
}

TEST_F(gpu_ordered_keys_order, ordered_bits_follow_the_key_order)
{
  expect_device_bits_follow_key_order<std::uint32_t>();
  expect_device_bits_follow_key_order<std::int32_t>();
  expect_device_bits_follow_key_order<std::uint64_t>();
  expect_device_bits_follow_key_order<std::int64_t>();
  expect_device_bits_follow_key_order<float>();
  expect_device_bits_follow_key_order<double>();
}

TEST_F(gpu_ordered_keys_order, round_trip_restores_random_bits)
{
  for (const dtype t : all_dtypes) {
    for (const order dir : {order::ascending, order::descending}) {
      if (size_of(t) == 4) {
        const auto in = random_bits<std::uint32_t>(70001, 5);
        EXPECT_EQ(run_on_device(run_on_device(in, 3, t, dir, true), 1, t, dir, false), in);
      } else {
        const auto in = random_bits<std::uint64_t>(70001, 6);
        EXPECT_EQ(run_on_device(run_on_device(in, 1, t, dir, true), 0, t, dir, false), in);
      }
    }
  }
}

// Past 2^32 keys: a 32-bit index anywhere would leave the keys beyond it untouched or wrap onto
// the first ones (transforming those twice, which undoes them). Needs about 16 GiB.
TEST_F(gpu_ordered_keys_order, more_than_two_to_the_32_keys)
{
  constexpr std::uint64_t n = (std::uint64_t{1} << 32) + 37;
  // initcheck tracks every byte: 17 GB under it did not finish the sanitizer run
  if (n > test::max_test_n()) GTEST_SKIP() << "GPUSORT_TEST_MAX_N is below " << n;
  constexpr std::uint64_t offset = 1;  // a scalar head as well
  const std::uint64_t bytes = (n + offset) * sizeof(std::uint32_t);
  std::size_t free_bytes = 0;
  std::size_t total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  if (free_bytes < bytes + (std::uint64_t{1} << 30))
    GTEST_SKIP() << "needs " << (bytes >> 20) << " MiB of free GPU memory, "
                 << (free_bytes >> 20) << " MiB free";

  device_buffer buffer{bytes};
  cuda_stream stream;
  auto* const keys = buffer.data<std::uint32_t>() + offset;
  ASSERT_EQ(cudaMemsetAsync(keys, 0x5A, n * sizeof(std::uint32_t), stream.value()), cudaSuccess);
  cuda::cuda_event start{cuda::event_timing::enabled};
  cuda::cuda_event stop{cuda::event_timing::enabled};
  start.record(stream.value());
  cuda::to_ordered(keys, n, dtype::i32, order::ascending, stream.value());
  stop.record(stream.value());
  stop.synchronize();
  const double seconds = cuda::elapsed_ms(start, stop) / 1000.0;
  std::cout << "to_ordered of " << n << " i32 keys: " << seconds * 1000.0 << " ms, "
            << 2.0 * static_cast<double>(n * sizeof(std::uint32_t)) / seconds / 1e9
            << " GB/s read+write\n";

  // i32 ascending flips the sign bit: 0x5A5A5A5A -> 0xDA5A5A5A, everywhere exactly once.
  // memcmp against a reference piece keeps the check fast in unoptimized test builds.
  constexpr std::uint64_t piece = std::uint64_t{1} << 26;
  constexpr std::uint32_t expected = 0xDA5A5A5AU;
  const std::vector<std::uint32_t> reference(piece, expected);
  cuda::pinned_buffer host{piece * sizeof(std::uint32_t)};
  for (std::uint64_t begin = 0; begin < n; begin += piece) {
    const std::uint64_t count = std::min(piece, n - begin);
    ASSERT_EQ(cudaMemcpyAsync(host.data(), keys + begin, count * sizeof(std::uint32_t),
                              cudaMemcpyDeviceToHost, stream.value()),
              cudaSuccess);
    stream.synchronize();
    const auto* p = host.data<std::uint32_t>();
    if (std::memcmp(p, reference.data(), count * sizeof(std::uint32_t)) != 0) {
      const auto* bad = std::find_if(p, p + count, [](std::uint32_t k) { return k != expected; });
      FAIL() << "key " << begin + static_cast<std::uint64_t>(bad - p) << " is " << std::hex
             << *bad;
    }
  }
}

// Source and destination side by side in one allocation: they touch but do not overlap.
TEST_F(gpu_ordered_keys_order, out_of_place_into_the_keys_right_after_the_source)
{
  constexpr std::uint64_t n = 1003;
  const std::vector<std::uint64_t> input = random_bits<std::uint64_t>(n, 17);
  const detail::key_order k{.type = dtype::f64, .dir = order::descending};
  std::vector<std::uint64_t> expected(n);
  detail::to_ordered_bits(input.data(), expected.data(), n, k);
  device_buffer buffer{2 * n * sizeof(std::uint64_t)};
  cuda_stream stream;
  const cudaStream_t s = stream.value();
  auto* const src = buffer.data<std::uint64_t>();
  ASSERT_EQ(cudaMemcpyAsync(src, input.data(), n * 8, cudaMemcpyHostToDevice, s), cudaSuccess);
  cuda::to_ordered(src, src + n, n, k, s);
  EXPECT_EQ(fetch(src + n, n, s), expected);
  EXPECT_EQ(fetch(src, n, s), input);
}

// ---- argument checks: no GPU needed, they fail before any CUDA call ----

TEST(ordered_keys_arguments, null_misaligned_and_bad_tuning_are_rejected)
{
  EXPECT_THROW(cuda::to_ordered(nullptr, 4, dtype::f32, order::ascending, nullptr),
               invalid_argument);
  EXPECT_THROW(cuda::from_ordered(nullptr, 4, dtype::i64, order::descending, nullptr),
               invalid_argument);
  auto* const misaligned = reinterpret_cast<void*>(std::uintptr_t{0x1004});
  EXPECT_THROW(cuda::to_ordered(misaligned, 4, dtype::f64, order::ascending, nullptr),
               invalid_argument);
  EXPECT_THROW(cuda::to_ordered(nullptr, 0, dtype::i32, order::ascending, nullptr,
                                transform_tuning{48, 1, 1}),
               invalid_argument);
  EXPECT_THROW(cuda::to_ordered(nullptr, 0, dtype::i32, order::ascending, nullptr,
                                transform_tuning{2048, 1, 1}),
               invalid_argument);
  EXPECT_THROW(cuda::to_ordered(nullptr, 0, dtype::i32, order::ascending, nullptr,
                                transform_tuning{256, 0, 1}),
               invalid_argument);
  EXPECT_THROW(cuda::to_ordered(nullptr, 0, dtype::i32, order::ascending, nullptr,
                                transform_tuning{256, 1, 0}),
               invalid_argument);
  // identity (u32/u64 ascending) and n == 0 return without touching memory or the runtime
  EXPECT_NO_THROW(cuda::to_ordered(nullptr, 0, dtype::f32, order::descending, nullptr));
  EXPECT_NO_THROW(cuda::to_ordered(misaligned, 9, dtype::u64, order::ascending, nullptr));
}

TEST(ordered_keys_arguments, out_of_place_checks_both_arrays_and_their_overlap)
{
  const detail::key_order f64{.type = dtype::f64, .dir = order::descending};
  const detail::key_order u64{.type = dtype::u64, .dir = order::ascending};
  auto* const a = reinterpret_cast<std::uint64_t*>(std::uintptr_t{0x10000});
  auto* const b = reinterpret_cast<std::uint64_t*>(std::uintptr_t{0x20000});
  auto* const misaligned = reinterpret_cast<void*>(std::uintptr_t{0x20004});
  EXPECT_THROW(cuda::from_ordered(nullptr, b, 4, f64, nullptr), invalid_argument);
  EXPECT_THROW(cuda::from_ordered(a, nullptr, 4, f64, nullptr), invalid_argument);
  EXPECT_THROW(cuda::to_ordered(misaligned, b, 4, f64, nullptr), invalid_argument);
  EXPECT_THROW(cuda::to_ordered(a, misaligned, 4, f64, nullptr), invalid_argument);
  // Arrays that partly overlap, either way round, by one key or all but one.
  EXPECT_THROW(cuda::from_ordered(a, a + 1, 4, f64, nullptr), invalid_argument);
  EXPECT_THROW(cuda::from_ordered(a + 1, a, 4, f64, nullptr), invalid_argument);
  EXPECT_THROW(cuda::to_ordered(a, a + 3, 4, f64, nullptr), invalid_argument);
  // An identity map out of place copies the keys, so its arrays are checked too...
  EXPECT_THROW(cuda::from_ordered(nullptr, b, 4, u64, nullptr), invalid_argument);
  EXPECT_THROW(cuda::from_ordered(a, a + 2, 4, u64, nullptr), invalid_argument);
  EXPECT_THROW(cuda::to_ordered(misaligned, b, 4, u64, nullptr), invalid_argument);
  // ... and in place it does nothing, as the in-place form (misaligned keys included).
  EXPECT_NO_THROW(cuda::from_ordered(misaligned, misaligned, 9, u64, nullptr));
  EXPECT_NO_THROW(cuda::from_ordered(nullptr, nullptr, 0, f64, nullptr));
  EXPECT_NO_THROW(cuda::to_ordered(a, a + 1, 0, f64, nullptr));
  EXPECT_THROW(cuda::to_ordered(a, b, 0, f64, nullptr, transform_tuning{48, 1, 1}),
               invalid_argument);
}

}  // namespace
}  // namespace gpusort
