#include "pipeline/lean/buckets.hpp"

#include "core/checks.hpp"
#include "core/plan/splitters.hpp"

#include <gpusort/error.hpp>

#include <algorithm>
#include <exception>

namespace gpusort::detail::lean {

namespace {

/// Ordered bits of the key at x.
template <typename K>
struct ordered_reader {
  const space& s;
  key_map<K> forward;
  [[nodiscard]] K operator()(std::uint64_t x) const { return forward(read_key<K>(s, x)); }
};

/// First position in [lo, hi) of the sorted range at x whose key is not below `v` (above it
/// when `upper`).
template <typename K>
std::uint64_t search(const ordered_reader<K>& key, std::uint64_t x, std::uint64_t lo,
                     std::uint64_t hi, K v, bool upper)
{
  while (lo < hi) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    const K at = key(x + mid);
    if (upper ? at <= v : at < v)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/// Runs body(j) for every chunk from every core; the first exception is rethrown.
template <typename F>
void for_each_chunk(std::uint64_t chunks, F&& body)
{
  std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic)
  for (std::int64_t j = 0; j < static_cast<std::int64_t>(chunks); ++j) {
    try {
      body(static_cast<std::uint64_t>(j));
    } catch (...) {
#pragma omp critical(lean_buckets_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

/// Appends `b` to `out`, cut into buckets of at most `limit` where its keys are all equal.
void add_bucket(std::vector<bucket>& out, bucket b, std::uint64_t limit)
{
  if (b.size == 0) return;
  if (!b.equal || b.size <= limit) {
    GPUSORT_EXPECTS(b.size <= limit, "a splitter interval holds more than the plan's bound");
    out.push_back(std::move(b));
    return;
  }
  bucket part{.equal = true};
  for (piece pc : b.pieces) {
    while (pc.length > 0) {
      const std::uint64_t take = std::min(pc.length, limit - part.size);
      part.pieces.push_back(piece{pc.x, take});
      part.size += take;
      pc.x += take;
      pc.length -= take;
      if (part.size == limit) {
        out.push_back(std::move(part));
        part = bucket{.equal = true};
      }
    }
  }
  if (part.size > 0) out.push_back(std::move(part));
}

}  // namespace

template <typename K>
std::vector<bucket> make_buckets(const plan& p, const space& s, const key_order& k)
{
  const ordered_reader<K> key{s, ordered_map<K>(k, true)};

  // Regular samples of every sorted chunk (candidate_position: the last key of each of s
  // equal parts), sorted; the splitters at regular ranks, each value once.
  std::vector<std::uint64_t> first(p.chunks + 1, 0);
  for (std::uint64_t j = 0; j < p.chunks; ++j) first[j + 1] = first[j] + p.samples_of(j);
  std::vector<K> candidates(first[p.chunks]);
  for_each_chunk(p.chunks, [&](std::uint64_t j) {
    const std::uint64_t len = p.chunk_size(j);
    const std::uint64_t count = p.samples_of(j);
    for (std::uint64_t t = 0; t < count; ++t)
      candidates[first[j] + t] = key(p.chunk_begin(j) + candidate_position(t, count, len));
  });
  std::sort(candidates.begin(), candidates.end());
  std::vector<K> splitters;
  const std::uint64_t c = candidates.size();
  for (std::uint64_t i = 1; i < p.intervals; ++i) {
    const K v = candidates[static_cast<std::uint64_t>(static_cast<uint128>(i) * c / p.intervals)];
    if (splitters.empty() || splitters.back() != v) splitters.push_back(v);
  }
  std::vector<K>().swap(candidates);

  // Every chunk cut at each splitter: [lo, hi) of the keys equal to it.
  const std::uint64_t u = splitters.size();
  std::vector<std::uint64_t> cuts(p.chunks * 2 * u);
  for_each_chunk(p.chunks, [&](std::uint64_t j) {
    const std::uint64_t x = p.chunk_begin(j);
    const std::uint64_t len = p.chunk_size(j);
    std::uint64_t from = 0;
    for (std::uint64_t i = 0; i < u; ++i) {
      const std::uint64_t lo = search(key, x, from, len, splitters[i], false);
      const std::uint64_t hi = search(key, x, lo, len, splitters[i], true);
      cuts[(j * u + i) * 2] = lo;
      cuts[(j * u + i) * 2 + 1] = hi;
      from = hi;
    }
  });

  // In key order: the interval below splitter 0, splitter 0's equal keys, the next interval...
  std::vector<bucket> buckets;
  for (std::uint64_t i = 0; i <= u; ++i) {
    for (const bool equal : {false, true}) {
      if (equal && i == u) break;
      bucket b{.equal = equal};
      for (std::uint64_t j = 0; j < p.chunks; ++j) {
        const std::uint64_t* at = &cuts[j * u * 2];
        std::uint64_t begin = 0;
        std::uint64_t end = 0;
        if (equal) {
          begin = at[i * 2];
          end = at[i * 2 + 1];
        } else {
          begin = i == 0 ? 0 : at[(i - 1) * 2 + 1];
          end = i == u ? p.chunk_size(j) : at[i * 2];
        }
        if (end > begin) {
          b.pieces.push_back(piece{p.chunk_begin(j) + begin, end - begin});
          b.size += end - begin;
        }
      }
      add_bucket(buckets, std::move(b), p.bucket_limit);
    }
  }
  std::uint64_t out = 0;
  for (bucket& b : buckets) {
    b.out = out;
    out += b.size;
  }
  GPUSORT_EXPECTS(out == p.n, "the buckets do not hold every element");
  GPUSORT_EXPECTS(buckets.size() <= p.most_buckets(), "more buckets than the plan allows");
  return buckets;
}

std::uint64_t layout_buckets(const plan& p, std::vector<bucket>& buckets)
{
  // k*: the bucket whose output holds position `room` of the array.
  std::uint64_t shift_from = p.room;  // out of k*
  for (const bucket& b : buckets)
    if (b.out <= p.room && p.room < b.out + b.size) shift_from = b.out;
  for (bucket& b : buckets)
    b.source = b.out < shift_from ? b.out : p.room + b.out - shift_from;
  // Round 2 writes bucket k over the sources of later buckets only when its source lies at
  // least its size below its output: the room is at least twice any bucket.
  GPUSORT_EXPECTS(shift_from >= p.bucket_limit || shift_from == p.room,
                  "the room is too small for the buckets");
  return p.room + p.n - shift_from;
}

std::vector<bucket_place> places_of(const std::vector<bucket>& buckets)
{
  std::vector<bucket_place> places;
  places.reserve(buckets.size());
  for (const bucket& b : buckets)
    places.push_back(bucket_place{.out = b.out, .size = b.size, .source = b.source});
  return places;
}

template std::vector<bucket> make_buckets<std::uint32_t>(const plan&, const space&,
                                                         const key_order&);
template std::vector<bucket> make_buckets<std::uint64_t>(const plan&, const space&,
                                                         const key_order&);

}  // namespace gpusort::detail::lean
