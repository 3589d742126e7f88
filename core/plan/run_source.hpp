// Where the planner reads the sorted runs of the round-1 output (issue 21): splitter sampling,
// round-2 slicing and compensation read keys by position and find them by binary search. A run
// source answers those questions for any sorted piece of one run (a run, or a slice of it,
// named by its offset and length in the round-1 output) whether the runs lie raw (raw_runs) or
// as round 1 encoded them (encoded_runs: core/run_codec.hpp's blocks, chunk by chunk), so that
// the algorithms of splitters.hpp, slicing.hpp and compensation.hpp exist once for both.
#pragma once

#include "core/plan/chunk_plan.hpp"
#include "core/plan/dealing.hpp"
#include "core/run_codec.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace gpusort::detail {

/// Runs of ordered bits lying raw in memory: the round-1 output of an uncompressed job.
template <typename K>
class raw_runs {
 public:
  using key_type = K;
  explicit raw_runs(const K* keys) noexcept : keys_{keys} {}

  /// out[t] = key pos(t) of the sorted piece `r`, for t < count; pos increases with t.
  template <typename Pos>
  void read(const run& r, std::uint64_t count, Pos&& pos, K* out) const
  {
    for (std::uint64_t t = 0; t < count; ++t) out[t] = keys_[r.offset + pos(t)];
  }
  /// The first position in [from, r.length] of the sorted piece `r` whose key is not below
  /// `key` (upper_bound: above it).
  [[nodiscard]] std::uint64_t lower_bound(const run& r, std::uint64_t from, K key) const
  {
    const K* first = keys_ + r.offset;
    return static_cast<std::uint64_t>(std::lower_bound(first + from, first + r.length, key) -
                                      first);
  }
  [[nodiscard]] std::uint64_t upper_bound(const run& r, std::uint64_t from, K key) const
  {
    const K* first = keys_ + r.offset;
    return static_cast<std::uint64_t>(std::upper_bound(first + from, first + r.length, key) -
                                      first);
  }

 private:
  const K* keys_;
};

/// One chunk of a compressed job's round-1 output as round 1 left it: its dealt runs encoded
/// (index entries, and the stream at the chunk's raw place), or its keys raw at that place.
struct stored_chunk {
  const codec::run_block* index{};  ///< codec::dealt_blocks(m, d) entries; null: stored raw
  const std::byte* stream{};  ///< the chunk's stream (encode_target::stream), or its raw keys
};

/// The round-1 output of a compressed job: chunk i of `plan` holds its m keys dealt into d runs
/// at plan.chunk_begin(i), encoded or raw as `chunks[i]` says. Every run of the run table
/// (make_run_table) maps to (chunk, bin); a piece of a run finds its blocks through
/// codec::dealt_first_block, and the host decodes at most a block's prefix per key it reads by
/// position and one block per search.
template <typename K>
class encoded_runs {
 public:
  using key_type = K;
  /// `keys`: the round-1 output's key region (where raw chunks lie); `chunks`: plan.d entries.
  encoded_runs(const chunk_plan& plan, const K* keys, std::vector<stored_chunk> chunks);

  template <typename Pos>
  void read(const run& r, std::uint64_t count, Pos&& pos, K* out) const
  {
    if (count == 0) return;
    const place p = locate(r.offset);
    if (p.chunk.index == nullptr) return raw_.read(r, count, pos, out);
    // Positions increase: each block is decoded once, up to the last position read in it.
    std::vector<K> block(codec::block_keys);
    std::uint64_t t = 0;
    while (t < count) {
      const std::uint64_t b = (p.in_run + pos(t)) / codec::block_keys;
      const std::uint64_t block_start = b * codec::block_keys;
      std::uint64_t last = t;
      while (last + 1 < count && (p.in_run + pos(last + 1)) / codec::block_keys == b) ++last;
      const std::uint64_t upto = p.in_run + pos(last) + 1;
      codec::decode<K>(slice_at(p, block_start, upto, 0), std::span<K>{block});
      for (; t <= last; ++t) out[t] = block[p.in_run + pos(t) - block_start];
    }
  }
  [[nodiscard]] std::uint64_t lower_bound(const run& r, std::uint64_t from, K key) const
  {
    return bound(r, from, key, false);
  }
  [[nodiscard]] std::uint64_t upper_bound(const run& r, std::uint64_t from, K key) const
  {
    return bound(r, from, key, true);
  }

  /// Where the keys of the sorted piece `r` are, for a device's round-2 gather (its index null
  /// when r's chunk is stored raw), with `dst_offset` for their place in the gathered keys.
  [[nodiscard]] codec::encoded_slice slice_of(const run& r, std::uint64_t dst_offset) const;
  /// Keys [first, first + count) of the round-1 output (ordered bits, dealt runs) into out:
  /// what restoring an in-place job's input reads.
  void decode_range(std::uint64_t first, std::uint64_t count, K* out) const;

 private:
  /// The run that holds position `offset` of the round-1 output.
  struct place {
    stored_chunk chunk;
    std::uint64_t chunk_keys;   ///< m of the chunk
    std::uint64_t bin;          ///< j: the run's bin
    std::uint64_t run_begin;    ///< the run's offset in the round-1 output
    std::uint64_t run_length;   ///< its keys
    std::uint64_t in_run;       ///< `offset` counted from the run's start
  };
  [[nodiscard]] place locate(std::uint64_t offset) const;
  /// lower_bound, or upper_bound when `upper`.
  [[nodiscard]] std::uint64_t bound(const run& r, std::uint64_t from, K key, bool upper) const;
  /// The run's blocks (index from its first block, stream from the chunk's start).
  [[nodiscard]] std::span<const codec::run_block> run_index(const place& p) const;
  /// Keys [first, last) of p's run (counted from its start) as an encoded_slice.
  [[nodiscard]] codec::encoded_slice slice_at(const place& p, std::uint64_t first,
                                              std::uint64_t last,
                                              std::uint64_t dst_offset) const;

  chunk_plan plan_;
  raw_runs<K> raw_;
  std::vector<stored_chunk> chunks_;
};

/// Applies M(Source) to every run source the planner's algorithms are instantiated for.
#define GPUSORT_FOR_EACH_RUN_SOURCE(M)                  \
  M(::gpusort::detail::raw_runs<std::uint32_t>)         \
  M(::gpusort::detail::raw_runs<std::uint64_t>)         \
  M(::gpusort::detail::encoded_runs<std::uint32_t>)     \
  M(::gpusort::detail::encoded_runs<std::uint64_t>)

}  // namespace gpusort::detail
