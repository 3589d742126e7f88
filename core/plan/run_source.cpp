#include "core/plan/run_source.hpp"

#include "core/checks.hpp"

#include <gpusort/error.hpp>

namespace gpusort::detail {

namespace {

/// Which of the parts of sizes q + 1 (the first `larger` ones) then q holds position `at`:
/// the inverse of chunk_plan::chunk_begin and bin_offset alike.
constexpr std::uint64_t part_of(std::uint64_t at, std::uint64_t q, std::uint64_t larger) noexcept
{
  const std::uint64_t in_larger = larger * (q + 1);
  return at < in_larger ? at / (q + 1) : larger + (at - in_larger) / q;
}

}  // namespace

template <typename K>
encoded_runs<K>::encoded_runs(const chunk_plan& plan, const K* keys,
                              std::vector<stored_chunk> chunks)
    : plan_{plan}, raw_{keys}, chunks_{std::move(chunks)}
{
  GPUSORT_EXPECTS(chunks_.size() == plan.d, "an encoded round-1 output needs one entry a chunk");
  GPUSORT_EXPECTS(plan.n >= plan.d * plan.runs_per_chunk(),
                  "every run of an out-of-core plan holds a key");
}

template <typename K>
typename encoded_runs<K>::place encoded_runs<K>::locate(std::uint64_t offset) const
{
  GPUSORT_EXPECTS(offset < plan_.n, "a position past the round-1 output");
  const std::uint64_t d = plan_.d;
  const std::uint64_t g = plan_.runs_per_chunk();
  const std::uint64_t i = part_of(offset, plan_.n / d, plan_.n % d);
  const std::uint64_t begin = plan_.chunk_begin(i);
  const std::uint64_t m = plan_.chunk_size(i);
  const std::uint64_t j = part_of(offset - begin, m / g, m % g);
  const std::uint64_t run_begin = begin + bin_offset(m, g, j);
  return place{.chunk = chunks_[i],
               .chunk_keys = m,
               .bin = j,
               .run_begin = run_begin,
               .run_length = bin_size(m, g, j),
               .in_run = offset - run_begin};
}

template <typename K>
std::span<const codec::run_block> encoded_runs<K>::run_index(const place& p) const
{
  const std::uint64_t g = plan_.runs_per_chunk();
  return {p.chunk.index + codec::dealt_first_block(p.chunk_keys, g, p.bin),
          codec::blocks_of(p.run_length)};
}

template <typename K>
codec::encoded_slice encoded_runs<K>::slice_at(const place& p, std::uint64_t first,
                                               std::uint64_t last,
                                               std::uint64_t dst_offset) const
{
  if (p.chunk.index == nullptr) return {nullptr, nullptr, first, last, dst_offset};
  const std::span<const codec::run_block> index = run_index(p);
  const std::uint64_t b0 = first / codec::block_keys;
  // An empty slice at a run's end names no block: nothing of it is read.
  const std::byte* stream = b0 < index.size() ? p.chunk.stream + index[b0].byte_offset : nullptr;
  return {index.data() + b0, stream, first, last, dst_offset};
}

template <typename K>
std::uint64_t encoded_runs<K>::bound(const run& r, std::uint64_t from, K key, bool upper) const
{
  if (from >= r.length) return r.length;
  const place p = locate(r.offset);
  if (p.chunk.index == nullptr)
    return upper ? raw_.upper_bound(r, from, key) : raw_.lower_bound(r, from, key);
  // Only the blocks that hold [from, r.length) of the piece are searched (slicing starts each
  // search where the last one ended); the stream offsets of their entries count from the
  // chunk's stream, so a part of the run's index is an index as good as the whole.
  const std::uint64_t lo = p.in_run + from;
  const std::uint64_t hi = p.in_run + r.length;
  const std::uint64_t first_block = lo / codec::block_keys;
  const std::uint64_t end_block = (hi - 1) / codec::block_keys + 1;
  const std::uint64_t base = first_block * codec::block_keys;
  const std::span<const codec::run_block> index =
      run_index(p).subspan(first_block, end_block - first_block);
  const std::uint64_t keys = std::min(p.run_length, end_block * codec::block_keys) - base;
  const std::uint64_t in_run =
      base + (upper ? codec::upper_bound<K>(index, p.chunk.stream, keys, key)
                    : codec::lower_bound<K>(index, p.chunk.stream, keys, key));
  // The piece is sorted and lies inside the run: its answer is the run's, clamped to it.
  return std::clamp(in_run, lo, hi) - p.in_run;
}

template <typename K>
codec::encoded_slice encoded_runs<K>::slice_of(const run& r, std::uint64_t dst_offset) const
{
  if (r.length == 0) return {nullptr, nullptr, 0, 0, dst_offset};
  const place p = locate(r.offset);
  GPUSORT_EXPECTS(p.in_run + r.length <= p.run_length, "a slice must lie inside one run");
  return slice_at(p, p.in_run, p.in_run + r.length, dst_offset);
}

template <typename K>
void encoded_runs<K>::decode_range(std::uint64_t first, std::uint64_t count, K* out) const
{
  GPUSORT_EXPECTS(first + count <= plan_.n, "a range past the round-1 output");
  // The range's pieces, one per run it crosses, decoded in parallel.
  std::vector<run> pieces;
  for (std::uint64_t at = first; at < first + count;) {
    const place p = locate(at);
    const std::uint64_t take = std::min(p.run_begin + p.run_length, first + count) - at;
    pieces.push_back(run{at, take});
    at += take;
  }
  const auto n = static_cast<std::int64_t>(pieces.size());
#pragma omp parallel for schedule(dynamic)
  for (std::int64_t k = 0; k < n; ++k) {
    const run& piece = pieces[static_cast<std::size_t>(k)];
    K* dst = out + (piece.offset - first);
    const codec::encoded_slice s = slice_of(piece, 0);
    if (s.index == nullptr)
      raw_.read(piece, piece.length, [](std::uint64_t t) { return t; }, dst);
    else
      codec::decode<K>(s, std::span<K>{dst, piece.length});
  }
}

template class encoded_runs<std::uint32_t>;
template class encoded_runs<std::uint64_t>;

}  // namespace gpusort::detail
