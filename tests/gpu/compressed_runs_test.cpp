// Issue 21 on a GPU, below the executor: cuda_device::process given round-1 tasks with an
// encode_target and round-2 tasks with encoded slices, as pipeline/device.hpp's contract spells
// them, so that the device's side is checked whatever the executor makes of it. Round 1's runs
// are decoded with the host reference codec and compared with the host's deal of the sorted
// chunk; round 2 decodes whole runs and pieces of them cut mid-block, mixed with chunks stored
// raw, and its output is compared with std::sort of the same keys. Skipped without a GPU.
#include "gpu_test_support.hpp"
#include "tests/support/stable_reference.hpp"

#include "core/generate.hpp"
#include "core/keys.hpp"
#include "core/plan/dealing.hpp"
#include "core/run_codec.hpp"
#include "pipeline/cuda/cuda_device.hpp"

#include <gpusort/gpusort.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace gpusort {
namespace {

using detail::chunk_task;
using detail::encode_target;
using detail::run;
using test::bits_of;
using test::raw_bits;
using test::gpu_test;
namespace codec = detail::codec;

/// How a round-1 chunk's target reads: every stream pays (on), a stream pays up to 90% of the
/// raw keys (auto), or none does (raw: only a chunk of equal keys, an empty stream, is encoded).
enum class target_mode : std::uint8_t { on, automatic, raw };

/// Keys of a distribution, or (`bits`) every bit pattern alike: NaNs of any payload and sign,
/// infinities, both zeros and each type's extremes among uniform random words.
template <typename K>
std::vector<K> make_keys(std::uint64_t n, std::optional<distribution> dist, std::uint64_t seed)
{
  std::vector<K> keys(n);
  if (dist) {
    generate(std::span<K>{keys}, *dist, seed);
    return keys;
  }
  using B = bits_of<K>;
  std::mt19937_64 rng{seed};
  const B extremes[] = {B{0}, ~B{0}, B{1}, static_cast<B>(~B{0} >> 1),
                        static_cast<B>(B{1} << (sizeof(B) * 8 - 1))};
  for (std::uint64_t i = 0; i < n; ++i) {
    const B b = i % 97 < 5 ? extremes[i % 97] : static_cast<B>(rng());
    keys[i] = std::bit_cast<K>(b);
  }
  return keys;
}

/// One chunk of round 1 as the host sees it once the device is done.
template <typename B>
struct round1_chunk {
  std::uint64_t start{}, count{};
  codec::run_block* index{};  ///< its entries, in the round-1 index (pinned where the keys are)
  encode_target::outcome outcome{};
  encode_target target{};
  std::vector<std::vector<B>> expected_runs;  ///< the sorted chunk's ordered bits, dealt
};

template <typename K>
class GpuCompressedRuns : public gpu_test {};
using key_types = ::testing::Types<std::uint32_t, std::int32_t, std::uint64_t, std::int64_t,
                                   float, double>;
TYPED_TEST_SUITE(GpuCompressedRuns, key_types);

/// Round 1 of two chunks (the second with its own target mode, so that raw and encoded chunks
/// mix) then round 2 of two tasks that together take every run: the first part of each run up
/// to a cut that moves across block boundaries, and the rest.
template <typename K>
void round_trip(detail::cuda_device& dev, std::uint64_t n, std::optional<distribution> dist,
                order dir, std::uint64_t d, target_mode first_mode, target_mode second_mode,
                bool pairs, bool pinned_round1)
{
  using B = bits_of<K>;
  constexpr unsigned kb = sizeof(K);
  const detail::element_layout layout{.type = dtype_of_v<K>,
                                      .direction = dir,
                                      .key_bytes = kb,
                                      .value_bytes = pairs ? 8U : 0U};
  const std::vector<K> keys = make_keys<K>(n, dist, n * 31 + d);
  std::vector<std::uint64_t> values(pairs ? n : 0);
  for (std::uint64_t i = 0; i < values.size(); ++i) values[i] = i;

  // A third and two thirds: each chunk holds at least d keys, as round 1's chunks always do,
  // and the second's stream starts 8-byte aligned, as the codec's format has it.
  std::vector<round1_chunk<B>> chunks(2);
  chunks[0].count = ((n + 2) / 3 + 1) / 2 * 2;
  chunks[1].start = chunks[0].count;
  chunks[1].count = n - chunks[0].count;
  const std::uint64_t entries =
      codec::dealt_blocks(chunks[0].count, d) + codec::dealt_blocks(chunks[1].count, d);

  // The round-1 buffer, keys, values and index: pinned and mapped as the engine makes it (one
  // registration), or pageable.
  const std::uint64_t r1_bytes = n * kb + n * 8 + entries * sizeof(codec::run_block);
  detail::host_buffer pinned;
  std::vector<std::uint64_t> plain;
  char* r1 = nullptr;
  if (pinned_round1) {
    pinned = detail::pinned_host_buffer(r1_bytes);
    r1 = static_cast<char*>(pinned.data());
  } else {
    plain.resize(r1_bytes / 8 + 1);
    r1 = reinterpret_cast<char*>(plain.data());
  }
  auto* r1_index = reinterpret_cast<codec::run_block*>(r1);
  char* r1_values = r1 + entries * sizeof(codec::run_block);  // 8-byte aligned
  char* r1_keys = r1_values + n * 8;
  chunks[0].index = r1_index;
  chunks[1].index = r1_index + codec::dealt_blocks(chunks[0].count, d);
  std::vector<chunk_task> tasks;
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    round1_chunk<B>& ch = chunks[c];
    std::vector<B> ordered(ch.count);
    for (std::uint64_t i = 0; i < ch.count; ++i)
      ordered[i] = detail::to_ordered<B>(std::bit_cast<B>(keys[ch.start + i]), layout.keys());
    std::sort(ordered.begin(), ordered.end());
    std::uint64_t raw_stream = 0;
    for (std::uint64_t j = 0; j < d; ++j) {
      std::vector<B>& r = ch.expected_runs.emplace_back(detail::bin_size(ch.count, d, j));
      for (std::uint64_t x = 0; x < r.size(); ++x) r[x] = ordered[x * d + j];
      raw_stream += codec::encoded_bytes<B>(r);
    }
    const target_mode mode = c == 0 ? first_mode : second_mode;
    ch.target = {.index = ch.index,
                 .raw_above = mode == target_mode::on          ? ~std::uint64_t{0}
                              : mode == target_mode::automatic ? ch.count * kb * 9 / 10
                                                               : 0,
                 .result = &ch.outcome};
    chunk_task t;
    t.src_keys = keys.data();
    t.src_values = pairs ? values.data() : nullptr;
    t.slices = {run{ch.start, ch.count}};
    t.count = ch.count;
    t.dst_keys = r1_keys + ch.start * kb;
    t.dst_values = pairs ? r1_values + ch.start * 8 : nullptr;
    t.dst_ordered = true;
    t.deal_bins = d;
    t.encode = &ch.target;
    tasks.push_back(std::move(t));
    // What the device must decide: the codec's bytes are the host codec's.
    ch.outcome.raw = !(ch.count == 0 || raw_stream <= ch.target.raw_above);
    ch.outcome.stream_bytes = ch.outcome.raw ? 0 : raw_stream;
  }
  const std::vector<encode_target::outcome> predicted{chunks[0].outcome, chunks[1].outcome};
  for (round1_chunk<B>& ch : chunks) ch.outcome = {.stream_bytes = 12345, .raw = true};
  const sort_options options{};
  {
    detail::job_context ctx{options, layout.bytes()};
    detail::task_queue queue{std::move(tasks)};
    dev.process(layout, queue, ctx);
  }

  // Round 1: each run decoded by the host codec (or read raw) equals the host's deal.
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    const round1_chunk<B>& ch = chunks[c];
    SCOPED_TRACE("round-1 chunk " + std::to_string(c));
    ASSERT_EQ(ch.outcome.raw, predicted[c].raw);
    ASSERT_EQ(ch.outcome.stream_bytes, predicted[c].stream_bytes);
    const char* stream = r1_keys + ch.start * kb;
    for (std::uint64_t j = 0; j < d; ++j) {
      const std::vector<B>& want = ch.expected_runs[j];
      std::vector<B> got(want.size());
      if (ch.outcome.raw) {
        std::memcpy(got.data(), stream + detail::bin_offset(ch.count, d, j) * kb,
                    want.size() * kb);
      } else if (!want.empty()) {
        const codec::run_block* first = ch.index + codec::dealt_first_block(ch.count, d, j);
        codec::decode<B>({first, reinterpret_cast<const std::byte*>(stream) + first->byte_offset,
                          0, want.size(), 0},
                         std::span<B>{got});
      }
      ASSERT_EQ(got, want) << "run " << j << " of " << d;
    }
  }

  // Round 2: two tasks; task 0 takes each run up to a cut, task 1 the rest.
  std::vector<chunk_task> round2(2);
  std::vector<std::vector<B>> expected(2);
  for (std::size_t c = 0; c < chunks.size(); ++c) {
    const round1_chunk<B>& ch = chunks[c];
    const char* stream = r1_keys + ch.start * kb;
    for (std::uint64_t j = 0; j < d; ++j) {
      const std::uint64_t len = ch.expected_runs[j].size();
      // Cuts at, just before and just past block boundaries, and mid-block.
      const std::uint64_t cut = std::min<std::uint64_t>(
          len, (j % 4 == 0 ? codec::block_keys : j % 4 == 1 ? codec::block_keys - 1
                                               : j % 4 == 2 ? codec::block_keys + 1
                                                            : 777) *
                   (1 + j % 3));
      const std::uint64_t run_offset = ch.start + detail::bin_offset(ch.count, d, j);
      for (std::size_t part = 0; part < 2; ++part) {
        const std::uint64_t from = part == 0 ? 0 : cut, to = part == 0 ? cut : len;
        chunk_task& t = round2[part];
        t.slices.push_back(run{run_offset + from, to - from});
        codec::encoded_slice e{nullptr, nullptr, from, to, t.count};
        if (!ch.outcome.raw && to > from) {
          const codec::run_block* first = ch.index +
                                          codec::dealt_first_block(ch.count, d, j) +
                                          from / codec::block_keys;
          e.index = first;
          e.stream = reinterpret_cast<const std::byte*>(stream) + first->byte_offset;
        } else if (!ch.outcome.raw) {
          e.index = ch.index;  // an empty encoded slice decodes nothing
          e.stream = reinterpret_cast<const std::byte*>(stream);
        }
        t.encoded.push_back(e);
        t.count += to - from;
        expected[part].insert(expected[part].end(), ch.expected_runs[j].begin() + from,
                              ch.expected_runs[j].begin() + to);
      }
    }
  }
  // Every task gets keys from both chunks; where both were stored raw, its encoded entries are
  // all null (copied as without compression).
  std::vector<std::vector<K>> out_keys(2);
  std::vector<std::vector<std::uint64_t>> out_values(2);
  for (std::size_t part = 0; part < 2; ++part) {
    chunk_task& t = round2[part];
    out_keys[part].resize(t.count);
    out_values[part].resize(pairs ? t.count : 0);
    t.src_keys = r1_keys;
    t.src_values = pairs ? r1_values : nullptr;
    t.src_ordered = true;
    t.dst_keys = out_keys[part].data();
    t.dst_values = pairs ? out_values[part].data() : nullptr;
    t.dst_ordered = false;
  }
  {
    // A task of no keys is never made (its cut took whole runs).
    std::vector<chunk_task> nonempty;
    for (chunk_task& t : round2)
      if (t.count > 0) nonempty.push_back(std::move(t));
    const sort_options profiled{.profile = true};
    detail::job_context ctx{profiled, layout.bytes()};
    detail::task_queue queue{std::move(nonempty)};
    dev.process(layout, queue, ctx);
    // Equal keys encode to index entries alone: decoded on the GPU from the mapped buffer, round
    // 2 reads those (24 bytes a run here), where the host's decoding would copy in every key.
    if (pinned_round1 && dist == distribution::zero) {
      std::uint64_t decode_bytes = 0;
      for (const stage_profile& p : ctx.take_profile())
        if (p.stage == "decode") decode_bytes += p.bytes;
      EXPECT_GT(decode_bytes, 0U);
      EXPECT_LT(decode_bytes, n * kb) << "decoded on the host, not from the mapped buffer";
    }
  }
  // Each task's output is its keys in order, checked against std::sort in the job's order on
  // the raw keys, bit for bit; each value is its key's input position, once.
  for (std::size_t part = 0; part < 2; ++part) {
    SCOPED_TRACE("round-2 task " + std::to_string(part));
    std::vector<K> want(expected[part].size());
    std::transform(expected[part].begin(), expected[part].end(), want.begin(), [&](B o) {
      return std::bit_cast<K>(detail::from_ordered<B>(o, layout.keys()));
    });
    std::sort(want.begin(), want.end(), [&](K a, K b) {
      return test::key_before(a, b, dir, float_order::total);
    });
    ASSERT_EQ(raw_bits<K>(out_keys[part]), raw_bits<K>(want));
    if (pairs) {
      std::vector<bool> seen(n);
      for (std::uint64_t p = 0; p < out_values[part].size(); ++p) {
        const std::uint64_t v = out_values[part][p];
        ASSERT_LT(v, n);
        ASSERT_FALSE(seen[v]) << "value " << v << " twice";
        seen[v] = true;
        ASSERT_EQ(std::bit_cast<B>(keys[v]), std::bit_cast<B>(out_keys[part][p]))
            << "the value at " << p << " left its key";
      }
    }
  }
}

std::string case_name(std::optional<distribution> dist, order dir, std::uint64_t n,
                      std::uint64_t d, bool pairs, bool pinned)
{
  return std::string{dist ? name_of(*dist) : "bits"} +
         (dir == order::ascending ? " asc" : " desc") + " n=" + std::to_string(n) +
         " d=" + std::to_string(d) + (pairs ? " pairs" : "") + (pinned ? "" : " pageable");
}

TYPED_TEST(GpuCompressedRuns, RoundOneEncodesAndRoundTwoDecodesEveryDistribution)
{
  using K = TypeParam;
  detail::cuda_device dev{detail::cuda_device_options{.id = 0, .budget = std::uint64_t{1} << 30}};
  std::vector<std::optional<distribution>> dists{std::nullopt};
  for (const distribution dist : all_distributions)
    if (applies_to(dist, dtype_of_v<K>)) dists.emplace_back(dist);
  const target_mode modes[] = {target_mode::on, target_mode::automatic, target_mode::raw};
  unsigned turn = 0;
  for (const std::optional<distribution>& dist : dists) {
    for (const order dir : {order::ascending, order::descending}) {
      // Runs around a block at d = 2 (6144: chunks of 2048 and 4096 keys, runs of 1024 and
      // 2048), a prime, and runs of many blocks.
      for (const std::uint64_t n : {std::uint64_t{4095}, std::uint64_t{4097}, std::uint64_t{6144},
                                    std::uint64_t{100'003}, std::uint64_t{1'000'003}}) {
        if (n > test::max_test_n()) continue;
        for (const std::uint64_t d : {std::uint64_t{2}, std::uint64_t{7}, std::uint64_t{64}}) {
          if (n > 100'003 && d != 7) continue;  // the large size once: host time
          ++turn;
          const bool pairs = turn % 2 == 0;
          SCOPED_TRACE(case_name(dist, dir, n, d, pairs, true));
          round_trip<K>(dev, n, dist, dir, d, modes[turn % 3], modes[(turn / 3) % 3], pairs,
                        true);
          if (this->HasFatalFailure()) return;
        }
      }
    }
  }
}

TYPED_TEST(GpuCompressedRuns, APageableRoundOneBufferDecodesOnTheHost)
{
  using K = TypeParam;
  detail::cuda_device dev{detail::cuda_device_options{.id = 0, .budget = std::uint64_t{1} << 30}};
  for (const std::uint64_t n : {std::uint64_t{4097}, std::uint64_t{100'003}}) {
    for (const bool pairs : {false, true}) {
      SCOPED_TRACE(case_name(distribution::uniform, order::ascending, n, 7, pairs, false));
      round_trip<K>(dev, n, distribution::uniform, order::ascending, 7, target_mode::on,
                    target_mode::raw, pairs, false);
      if (this->HasFatalFailure()) return;
    }
  }
}

/// Round 2 of a final chunk takes d^2 slices: more than one decode launch holds (65535).
TEST_F(gpu_test, CompressedRunsDecodeMoreSlicesThanOneLaunchHolds)
{
  if (test::max_test_n() < 400'000) GTEST_SKIP() << "GPUSORT_TEST_MAX_N below the case";
  detail::cuda_device dev{detail::cuda_device_options{.id = 0, .budget = std::uint64_t{1} << 30}};
  // 2 chunks x 40'000 runs x 2 parts: 80'000 slices per task, 10 keys a run.
  round_trip<std::uint32_t>(dev, 800'000, distribution::uniform, order::ascending, 40'000,
                            target_mode::on, target_mode::automatic, false, true);
}

}  // namespace
}  // namespace gpusort
