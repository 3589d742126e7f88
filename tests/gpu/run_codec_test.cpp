// The GPU run codec (core/cuda/run_codec.cuh): its index and stream must equal the host
// reference codec's byte for byte (core/run_codec.hpp, checked on its own against chosen deltas
// in tests/core), and decoding must give back the keys (against the input, never the codec):
// every generator's sorted runs as u32 and u64 ordered bits, sizes around the block, primes and
// a large run, widths 0 to 64 forced by construction, sub-ranges, many slices in one launch,
// index and stream in mapped pinned host memory, and a stream too small for the run.
#include "gpu_test_support.hpp"
#include "pipeline/cuda/resources.hpp"
#include "tests/support/codec_runs.hpp"

#include "core/cuda/run_codec.cuh"
#include "core/plan/dealing.hpp"
#include "core/run_codec.hpp"

#include <gpusort/error.hpp>

#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace gpusort {
namespace {

namespace codec = detail::codec;
using codec::block_keys;
using codec::encoded_slice;
using codec::run_block;
using cuda::cuda_stream;
using cuda::device_buffer;
using cuda::pinned_buffer;

void copy_in(void* dst, const void* src, std::size_t bytes)
{
  if (bytes > 0) {
    // Complete on return (test::copy_to_gpu): DealtRunsEncodeLikeEachRunAloneAndDecode once
    // encoded keys a previous case left in the buffer (its total 7728 bytes too large, H200,
    // 38b01cb).
    ASSERT_EQ(test::copy_to_gpu(dst, src, bytes), cudaSuccess);
  }
}

template <typename T>
std::vector<T> copy_out(const void* src, std::size_t count)
{
  std::vector<T> out(count);
  if (count > 0) {
    EXPECT_EQ(cudaMemcpy(out.data(), src, count * sizeof(T), cudaMemcpyDeviceToHost),
              cudaSuccess);
  }
  return out;
}

/// A run on the device, encoded there.
struct gpu_run {
  std::uint64_t n{};
  device_buffer keys, index, stream;
  std::uint64_t bytes{};
};

template <typename K>
gpu_run encode_on_gpu(const std::vector<K>& keys, cudaStream_t s)
{
  gpu_run r;
  r.n = keys.size();
  r.keys = device_buffer{r.n * sizeof(K)};
  r.index = device_buffer{codec::blocks_of(r.n) * sizeof(run_block)};
  const std::uint64_t capacity = codec::encoded_bytes_bound(r.n, sizeof(K));
  r.stream = device_buffer{capacity};
  copy_in(r.keys.data(), keys.data(), r.n * sizeof(K));
  const std::size_t scratch_bytes = cuda::run_codec_scratch_bytes(r.n);
  device_buffer scratch{scratch_bytes};
  pinned_buffer totals{2 * sizeof(std::uint64_t), cudaHostAllocMapped};
  auto* total = totals.data<std::uint64_t>();
  total[0] = total[1] = ~std::uint64_t{0};
  cuda::encoded_size(r.keys.data(), r.n, 1, sizeof(K), total, scratch.data(), scratch_bytes, s);
  cuda::encode_runs(r.keys.data(), r.n, 1, sizeof(K), r.index.data<run_block>(), r.stream.data(),
                    capacity, total + 1, scratch.data(), scratch_bytes, s);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(total[0], total[1]) << "encoded_size and encode_run disagree";
  r.bytes = total[1];
  return r;
}

/// The GPU's index and stream against the host codec's, then the whole run decoded on the GPU.
template <typename K>
void expect_like_host(const std::vector<K>& keys, const std::string& what)
{
  cuda_stream stream;
  const gpu_run r = encode_on_gpu(keys, stream.value());
  const std::uint64_t blocks = codec::blocks_of(keys.size());
  std::vector<run_block> host_index(blocks);
  std::vector<std::uint64_t> host_words(codec::encoded_bytes_bound(keys.size(), sizeof(K)) / 8);
  const std::uint64_t host_bytes =
      codec::encode<K>(keys, host_index, std::as_writable_bytes(std::span{host_words}));
  ASSERT_EQ(r.bytes, host_bytes) << what;
  const auto index = copy_out<run_block>(r.index.data(), blocks);
  ASSERT_EQ(std::memcmp(index.data(), host_index.data(), blocks * sizeof(run_block)), 0) << what;
  const auto words = copy_out<std::uint64_t>(r.stream.data(), host_bytes / 8);
  for (std::uint64_t i = 0; i < words.size(); ++i)
    ASSERT_EQ(words[i], host_words[i]) << what << ": stream word " << i;

  device_buffer out{keys.size() * sizeof(K)};
  cuda::decode_run({r.index.data<run_block>(), r.stream.data<std::byte>(), 0, keys.size(), 0},
                   sizeof(K), out.data(), stream.value());
  ASSERT_EQ(cudaStreamSynchronize(stream.value()), cudaSuccess);
  ASSERT_EQ(copy_out<K>(out.data(), keys.size()), keys) << what;
}

template <typename K>
class gpu_run_codec : public test::gpu_test {};
using key_widths = ::testing::Types<std::uint32_t, std::uint64_t>;
TYPED_TEST_SUITE(gpu_run_codec, key_widths);

TYPED_TEST(gpu_run_codec, EveryDistributionAndSizeEncodesLikeTheHostAndDecodes)
{
  using K = TypeParam;
  for (const dtype t : test_support::dtypes_of_width<K>()) {
    for (const distribution d : all_distributions) {
      if (!applies_to(d, t)) continue;
      for (const std::uint64_t n : test_support::codec_sizes()) {
        if (n > test::max_test_n()) continue;
        expect_like_host(test_support::sorted_run<K>(t, d, n, n + 5),
                         std::string{name_of(t)} + " " + std::string{name_of(d)} + " n=" +
                             std::to_string(n));
        if (this->HasFatalFailure()) return;
      }
    }
  }
}

TYPED_TEST(gpu_run_codec, EveryWidthFromZeroToTheKeysBits)
{
  using K = TypeParam;
  for (std::uint32_t width = 0; width <= sizeof(K) * 8; ++width) {
    for (const std::uint64_t n : {std::uint64_t{2}, std::uint64_t{block_keys},
                                  std::uint64_t{3 * block_keys + 17}}) {
      const std::vector<K> deltas = test_support::deltas_of_width<K>(width, n, width);
      expect_like_host(test_support::keys_from_deltas<K>(K{3}, deltas),
                       "width " + std::to_string(width) + " n=" + std::to_string(n));
      if (this->HasFatalFailure()) return;
    }
  }
}

TYPED_TEST(gpu_run_codec, UnsortedKeysRoundTripLikeTheHost)
{
  using K = TypeParam;
  std::mt19937_64 rng{5};
  std::vector<K> keys(2 * block_keys + 3);
  for (K& k : keys) k = static_cast<K>(rng());
  expect_like_host(keys, "random bits");
}

/// Round 1's form: a sorted chunk dealt into d runs, encoded in one call. Its index and stream
/// must be each run's host encoding one after another (offsets shifted by the runs before), and
/// every run decodes from its own first entry, all runs in one launch.
TYPED_TEST(gpu_run_codec, DealtRunsEncodeLikeEachRunAloneAndDecode)
{
  using K = TypeParam;
  cuda_stream stream;
  const cudaStream_t s = stream.value();
  for (const std::uint64_t d : {std::uint64_t{1}, std::uint64_t{3}, std::uint64_t{16}}) {
    for (const std::uint64_t m : {std::uint64_t{0}, std::uint64_t{1}, d + 1,
                                  d * block_keys - 1, d * block_keys + 5, std::uint64_t{100003}}) {
      const std::string what = "m=" + std::to_string(m) + " d=" + std::to_string(d);
      const std::vector<K> sorted = test_support::sorted_run<K>(
          test_support::dtypes_of_width<K>()[1], distribution::staggered, m, m + d);
      std::vector<K> dealt(m);
      detail::deal<K, detail::no_value>(sorted.data(), nullptr, m, d, dealt.data(), nullptr);
      // the host's encoding of each run, back to back
      std::vector<run_block> want_index;
      std::vector<std::uint64_t> want_words;
      for (std::uint64_t j = 0; j < d; ++j) {
        const std::span<const K> run{dealt.data() + detail::bin_offset(m, d, j),
                                     detail::bin_size(m, d, j)};
        ASSERT_EQ(want_index.size(), codec::dealt_first_block(m, d, j)) << what;
        std::vector<run_block> index(codec::blocks_of(run.size()));
        std::vector<std::uint64_t> words(codec::encoded_bytes_bound(run.size(), sizeof(K)) / 8);
        const std::uint64_t bytes =
            codec::encode<K>(run, index, std::as_writable_bytes(std::span{words}));
        for (run_block& e : index) e.byte_offset += want_words.size() * 8;
        want_index.insert(want_index.end(), index.begin(), index.end());
        want_words.insert(want_words.end(), words.begin(), words.begin() + bytes / 8);
      }
      ASSERT_EQ(want_index.size(), codec::dealt_blocks(m, d)) << what;

      device_buffer keys{m * sizeof(K)}, index{want_index.size() * sizeof(run_block)},
          stream_bytes{codec::dealt_bytes_bound(m, d, sizeof(K))}, total{sizeof(std::uint64_t)};
      copy_in(keys.data(), dealt.data(), m * sizeof(K));
      const std::size_t scratch_bytes = cuda::run_codec_scratch_bytes(m, d);
      device_buffer scratch{scratch_bytes};
      cuda::encode_runs(keys.data(), m, d, sizeof(K), index.data<run_block>(),
                        stream_bytes.data(), stream_bytes.size(), total.data<std::uint64_t>(),
                        scratch.data(), scratch_bytes, s);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      ASSERT_EQ(copy_out<std::uint64_t>(total.data(), 1)[0], want_words.size() * 8) << what;
      const auto got_index = copy_out<run_block>(index.data(), want_index.size());
      ASSERT_EQ(std::memcmp(got_index.data(), want_index.data(),
                            want_index.size() * sizeof(run_block)),
                0)
          << what;
      ASSERT_EQ(copy_out<std::uint64_t>(stream_bytes.data(), want_words.size()), want_words)
          << what;

      std::vector<encoded_slice> table;
      for (std::uint64_t j = 0; j < d; ++j) {
        const std::uint64_t b = codec::dealt_first_block(m, d, j);
        const std::uint64_t at = b < want_index.size() ? want_index[b].byte_offset : 0;
        table.push_back({index.data<run_block>() + b, stream_bytes.data<std::byte>() + at, 0,
                         detail::bin_size(m, d, j), detail::bin_offset(m, d, j)});
      }
      if (m == 0) continue;  // nothing to decode into
      device_buffer d_table{table.size() * sizeof(encoded_slice)}, out{m * sizeof(K)};
      copy_in(d_table.data(), table.data(), table.size() * sizeof(encoded_slice));
      cuda::decode_slices(d_table.data<encoded_slice>(), static_cast<std::uint32_t>(d),
                          codec::blocks_of(m / d + 1), out.data(), sizeof(K), s);
      ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
      ASSERT_EQ(copy_out<K>(out.data(), m), dealt) << what;
    }
  }
}

/// Random sub-ranges of a run, each decoded from the index entry and stream byte where it
/// starts (as round 2 will copy only the blocks a slice touches), alone and all in one launch.
TYPED_TEST(gpu_run_codec, SlicesDecodeAloneAndManyInOneLaunch)
{
  using K = TypeParam;
  const std::uint64_t n = 9 * block_keys + 77;
  const std::vector<K> keys = test_support::sorted_run<K>(test_support::dtypes_of_width<K>()[0],
                                                          distribution::uniform, n, 9);
  cuda_stream stream;
  const gpu_run r = encode_on_gpu(keys, stream.value());
  const auto index = copy_out<run_block>(r.index.data(), codec::blocks_of(n));
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges{
      {0, 1}, {n - 1, n}, {block_keys - 1, block_keys + 1}, {block_keys, 2 * block_keys},
      {3, 4}, {5, block_keys - 3}, {100, n - 100}, {0, n}, {7, 7}};
  std::mt19937_64 rng{13};
  for (int i = 0; i < 40; ++i) {
    const std::uint64_t a = rng() % (n + 1), b = rng() % (n + 1);
    ranges.emplace_back(std::min(a, b), std::max(a, b));
  }
  std::vector<encoded_slice> table;
  std::vector<K> expected;
  std::uint64_t most_blocks = 0;
  for (const auto& [first, last] : ranges) {
    const std::uint64_t b0 = std::min(first / block_keys, index.size() - 1);
    const encoded_slice s{r.index.data<run_block>() + b0,
                          r.stream.data<std::byte>() + index[b0].byte_offset, first, last,
                          expected.size()};
    device_buffer alone{std::max<std::uint64_t>(last - first, 1) * sizeof(K)};
    cuda::decode_run({s.index, s.stream, first, last, 0}, sizeof(K), alone.data(),
                     stream.value());
    ASSERT_EQ(cudaStreamSynchronize(stream.value()), cudaSuccess);
    const std::vector<K> want(keys.begin() + static_cast<std::ptrdiff_t>(first),
                              keys.begin() + static_cast<std::ptrdiff_t>(last));
    ASSERT_EQ(copy_out<K>(alone.data(), last - first), want) << "[" << first << ", " << last << ")";
    table.push_back(s);
    expected.insert(expected.end(), want.begin(), want.end());
    if (last > first)
      most_blocks = std::max(most_blocks, (last - 1) / block_keys - first / block_keys + 1);
  }
  device_buffer d_table{table.size() * sizeof(encoded_slice)};
  copy_in(d_table.data(), table.data(), table.size() * sizeof(encoded_slice));
  device_buffer out{expected.size() * sizeof(K)};
  cuda::decode_slices(d_table.data<encoded_slice>(), static_cast<std::uint32_t>(table.size()),
                      most_blocks, out.data(), sizeof(K), stream.value());
  ASSERT_EQ(cudaStreamSynchronize(stream.value()), cudaSuccess);
  EXPECT_EQ(copy_out<K>(out.data(), expected.size()), expected);
}

/// Round 2 reads the round-1 buffer in pinned host memory: index and stream there, mapped.
TYPED_TEST(gpu_run_codec, DecodesFromMappedPinnedHostMemory)
{
  using K = TypeParam;
  const std::uint64_t n = 4 * block_keys + 5;
  const std::vector<K> keys = test_support::sorted_run<K>(test_support::dtypes_of_width<K>()[2],
                                                          distribution::gaussian, n, 4);
  const std::uint64_t blocks = codec::blocks_of(n);
  pinned_buffer index{blocks * sizeof(run_block), cudaHostAllocMapped};
  pinned_buffer stream_bytes{codec::encoded_bytes_bound(n, sizeof(K)), cudaHostAllocMapped};
  codec::encode<K>(keys, {index.data<run_block>(), blocks},
                   {stream_bytes.data<std::byte>(), stream_bytes.size()});
  cuda_stream stream;
  device_buffer out{n * sizeof(K)};
  cuda::decode_run({index.data<run_block>(), stream_bytes.data<std::byte>(), 0, n, 0}, sizeof(K),
                   out.data(), stream.value());
  ASSERT_EQ(cudaStreamSynchronize(stream.value()), cudaSuccess);
  EXPECT_EQ(copy_out<K>(out.data(), n), keys);
}

/// A stream under the run's size: nothing written past its capacity, the total says so.
TYPED_TEST(gpu_run_codec, AStreamTooSmallIsNeverOverrun)
{
  using K = TypeParam;
  const std::uint64_t n = 3 * block_keys;
  const std::vector<K> keys = test_support::sorted_run<K>(test_support::dtypes_of_width<K>()[0],
                                                          distribution::uniform, n, 8);
  std::vector<run_block> host_index(codec::blocks_of(n));
  std::vector<std::uint64_t> host_words(codec::encoded_bytes_bound(n, sizeof(K)) / 8);
  const std::uint64_t bytes =
      codec::encode<K>(keys, host_index, std::as_writable_bytes(std::span{host_words}));
  ASSERT_GT(bytes, 16U);
  const std::uint64_t capacity = bytes - 16;  // the last two words do not fit
  cuda_stream stream;
  device_buffer d_keys{n * sizeof(K)}, index{host_index.size() * sizeof(run_block)},
      out{bytes};
  copy_in(d_keys.data(), keys.data(), n * sizeof(K));
  ASSERT_EQ(test::fill_gpu(out.data(), 0xab, bytes), cudaSuccess);
  const std::size_t scratch_bytes = cuda::run_codec_scratch_bytes(n);
  device_buffer scratch{scratch_bytes}, total{sizeof(std::uint64_t)};
  cuda::encode_runs(d_keys.data(), n, 1, sizeof(K), index.data<run_block>(), out.data(),
                    capacity, total.data<std::uint64_t>(), scratch.data(), scratch_bytes,
                    stream.value());
  ASSERT_EQ(cudaStreamSynchronize(stream.value()), cudaSuccess);
  EXPECT_EQ(copy_out<std::uint64_t>(total.data(), 1)[0], bytes);
  const auto words = copy_out<std::uint64_t>(out.data(), bytes / 8);
  for (std::uint64_t i = 0; i < words.size(); ++i)
    EXPECT_EQ(words[i], i < capacity / 8 ? host_words[i] : 0xababababababababULL) << i;
}

TYPED_TEST(gpu_run_codec, BadArgumentsAreClearErrors)
{
  using K = TypeParam;
  cuda_stream stream;
  const std::uint64_t n = block_keys + 1;
  device_buffer keys{n * sizeof(K)}, index{2 * sizeof(run_block)},
      out{codec::encoded_bytes_bound(n, sizeof(K)) + 8};
  const std::size_t scratch_bytes = cuda::run_codec_scratch_bytes(n);
  device_buffer scratch{scratch_bytes};
  const std::uint64_t capacity = codec::encoded_bytes_bound(n, sizeof(K));
  auto encode = [&](unsigned key_bytes, void* stream_at, std::size_t scratch_size) {
    cuda::encode_runs(keys.data(), n, 1, key_bytes, index.data<run_block>(), stream_at,
                      capacity, nullptr, scratch.data(), scratch_size, stream.value());
  };
  EXPECT_THROW(encode(3, out.data(), scratch_bytes), invalid_argument);
  EXPECT_THROW(encode(sizeof(K), out.data<std::byte>() + 4, scratch_bytes), invalid_argument);
  EXPECT_THROW(encode(sizeof(K), out.data(), scratch_bytes - 1), invalid_argument);
  EXPECT_THROW(cuda::encoded_size(keys.data(), n, 1, sizeof(K), nullptr, scratch.data(),
                                  scratch_bytes, stream.value()),
               invalid_argument);
  EXPECT_THROW(cuda::run_codec_scratch_bytes(n, 0), invalid_argument);
  EXPECT_THROW(cuda::encode_runs(keys.data(), n, 0, sizeof(K), index.data<run_block>(),
                                 out.data(), capacity, nullptr, scratch.data(), scratch_bytes,
                                 stream.value()),
               invalid_argument);
  EXPECT_THROW(cuda::decode_run({index.data<run_block>(), out.data<std::byte>(), 5, 4, 0},
                                sizeof(K), keys.data(), stream.value()),
               invalid_argument);
  EXPECT_THROW(cuda::decode_slices(nullptr, 1, 1, keys.data(), sizeof(K), stream.value()),
               invalid_argument);
  ASSERT_EQ(cudaStreamSynchronize(stream.value()), cudaSuccess);
}

}  // namespace
}  // namespace gpusort
