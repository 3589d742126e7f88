#include "pipeline/lean/plan.hpp"

#include "pipeline/lean/space.hpp"

#include "core/checks.hpp"

#include <gpusort/error.hpp>
#include <gpusort/units.hpp>

#include <algorithm>
#include <bit>
#include <optional>
#include <span>
#include <string>

namespace gpusort::detail::lean {

namespace {

constexpr std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) noexcept
{
  return a / b + (a % b != 0 ? 1 : 0);
}

constexpr std::uint64_t pow2_floor(std::uint64_t v) noexcept
{
  return v == 0 ? 0 : std::bit_floor(v);
}

/// Sample candidates over all chunks: enough that the sample's slack (about n / s in every
/// bucket) stays a few percent of a bucket, few enough that sorting them on the host takes
/// milliseconds and reading them from a file a few hundred thousand positioned reads.
constexpr std::uint64_t total_candidates = std::uint64_t{1} << 20;
/// Most chunks: the piece table holds chunks x buckets entries.
constexpr std::uint64_t max_chunks = 4096;
/// Largest block of the permutation: 1 MiB of elements moves at memory speed per copy, and a
/// chunk stays a multiple of it.
constexpr std::uint64_t max_block_bytes = std::uint64_t{1} << 20;

/// The plan for chunks of about `wanted` elements, or nullopt where none exists for them (too
/// many chunks, or a sample too thin for buckets of bucket_limit).
std::optional<plan> plan_for(const plan_request& r, std::uint64_t wanted, std::uint64_t rooms,
                             std::uint64_t per_room)
{
  const std::uint64_t e = r.layout.bytes();
  const std::uint64_t g = std::max<std::uint64_t>(r.devices, 1);
  std::uint64_t block_cap = pow2_floor(std::max<std::uint64_t>(max_block_bytes / e, 1));
  block_cap = std::min(block_cap, pow2_floor(std::max<std::uint64_t>(wanted, 1)));
  plan p;
  p.n = r.n;
  p.chunk = wanted / block_cap * block_cap;
  if (p.chunk == 0) return std::nullopt;
  p.room = rooms * g * p.chunk;
  if (p.room >= r.n) return std::nullopt;  // the room would hold the array: not a lean job
  p.chunks = ceil_div(r.n, p.chunk);
  if (p.chunks > max_chunks || p.chunks < 2) return std::nullopt;
  // Buckets of at most half the room (the permutation's round-2 shift; a quarter where the
  // gathering round 2 clears places ahead: gather_buckets_per_room) and what a device holds; a
  // room larger than that is storage for the permutation's fragments (small devices, many
  // chunks).
  p.gather = r.gather;
  p.bucket_limit = std::min(p.room / per_room, r.capacity);
  // 32 candidates per chunk and chunk keep the sample's slack near 1/16 of a bucket (the
  // bound below); more only cost reads and the candidates' sort.
  p.samples = std::min({p.chunk, 32 * p.chunks,
                        std::max<std::uint64_t>(total_candidates / p.chunks, 1)});
  // Elements of one open splitter interval, at most (ceil(C/B) + d) * ceil(m/s): each chunk
  // holds at most (c + 1) candidate gaps of it, where c of its candidates fall inside, and
  // the chunks' c add up to less than the candidates between two splitters.
  const std::uint64_t gap = ceil_div(p.chunk, p.samples);
  const std::uint64_t per_interval = p.bucket_limit / gap;
  if (per_interval <= p.chunks) return std::nullopt;
  const std::uint64_t candidates = (p.chunks - 1) * p.samples + p.samples_of(p.chunks - 1);
  p.intervals = std::max<std::uint64_t>(ceil_div(candidates, per_interval - p.chunks), 1);

  // Blocks: the storage at the array's end (at least the room less a bucket_limit, see
  // buckets.hpp; half of it counted here) takes the mixed blocks (one at most per piece) and the
  // blocks a bucket has beyond its targets (two at most), with spares for the movers. The
  // permutation picks its block once it knows the pieces (this is the worst case); the tables
  // are planned for it.
  const std::uint64_t buckets = p.most_buckets();
  const std::uint64_t pieces = p.chunks * buckets;
  const std::uint64_t takers = pieces + 2 * buckets + 2 * r.movers + 4;
  // Gathering needs below each place a bucket's blocks, one more per chunk (a block that holds
  // the bucket's first elements and the next bucket's last) and a few at the ends: the room
  // less a bucket holds twice that (gather.cpp, clear).
  p.block = std::min(block_cap, pow2_floor((p.room - p.bucket_limit) / 2 /
                                           (p.gather ? p.chunks + 4 : takers)));
  if (p.block == 0) return std::nullopt;

  const bool stable = r.layout.stable;
  const std::uint64_t blocks = p.blocks();
  // Slices of one round-2 task: one, or (stable, gathering) its blocks and pieces in input
  // order.
  const std::uint64_t slices =
      stable || p.gather ? p.bucket_limit / p.block + 2 * p.chunks + 4 : 1;
  const std::uint64_t device =
      r.device_host_bytes ? r.device_host_bytes(std::max(p.chunk, p.bucket_limit), slices) : 0;
  // Three bits per block (the journal's map, the movers' two); the empty blocks of the places
  // at the start (the free end, the mixed blocks: 8 bytes each); per piece its range in a
  // sequence, its index entry, its fragment (48); with (stable) each block's round-2 slice and
  // part (16 + 24); the candidates and their sort; the bucket table; a bounce buffer per
  // mover; slack for small tables.
  // Gathering: in the journal the place of every block of round 1 and every piece (8 and 16,
  // and 8 per bucket); per block its place, occupant, lowest bucket, a free list entry and the
  // index by bucket (40), and every task's slices (24 per block and piece).
  const std::uint64_t gathering =
      p.gather ? blocks * (8 + 40 + 24) + (p.chunks + 1) * buckets * 16 + buckets * 8 +
                     pieces * (24 + 24)
               : 0;
  const std::uint64_t tables = blocks / 2 + (p.room / p.block + pieces) * 8 + pieces * 48 +
                               (stable ? blocks * 40 : 0) + gathering +
                               2 * candidates * r.layout.key_bytes + buckets * 96 +
                               r.movers * std::min(bounce_bytes, block_cap * e) +
                               (std::uint64_t{64} << 10);
  p.host_bytes = p.room * e + device + tables;
  return p;
}

/// Buckets per room to try (plan.hpp, gather_buckets_per_room).
std::span<const std::uint64_t> buckets_per_room(const plan_request& r) noexcept
{
  static constexpr std::uint64_t permuting[] = {2};
  if (r.gather) return gather_buckets_per_room;
  return permuting;
}

/// Rooms to try, in chunks per device.
constexpr std::uint64_t room_multiples[] = {1, 2, 4, 8, 16, 32, 64};

/// Chunk sizes to try, from the largest that could work down, about 6% apart.
template <typename F>
void for_each_chunk_size(const plan_request& r, F&& f)
{
  const std::uint64_t g = std::max<std::uint64_t>(r.devices, 1);
  std::uint64_t m = std::min(r.capacity, (r.n - 1) / g);
  m = std::min(m, 2 * r.capacity / g);  // bucket_limit = g * m / 2 within the capacity
  while (m >= 1) {
    if (!f(m)) return;
    const std::uint64_t next = m - std::max<std::uint64_t>(m / 16, 1);
    if (next >= m) return;
    m = next;
  }
}

}  // namespace

plan make_plan(const plan_request& r)
{
  GPUSORT_EXPECTS(r.n >= 2 && r.capacity >= 1, "a lean job needs elements and a device");
  // A room of one chunk per device, or more: more costs memory and buys larger blocks (the
  // storage grows with the room, the pieces shrink with the buckets), and where the devices are
  // small against the array, room for the fragments at all; the larger chunks win, and among
  // equal chunks the smaller buckets (tried first) that let a gathering round 2 run ahead.
  std::optional<plan> best;
  for (const std::uint64_t rooms : room_multiples) {
    for (const std::uint64_t per_room : buckets_per_room(r)) {
      for_each_chunk_size(r, [&](std::uint64_t m) {
        const std::optional<plan> p = plan_for(r, m, rooms, per_room);
        if (p && p->host_bytes <= r.host_limit) {
          if (!best || p->chunk > best->chunk) best = p;
          return false;
        }
        return true;
      });
    }
  }
  if (best) return *best;
  const std::uint64_t least = least_host_bytes(r);
  if (least == 0)
    throw config_error{"host_memory_limit: no lean plan exists for " + std::to_string(r.n) +
                       " elements on devices of " + std::to_string(r.capacity) +
                       " elements (too many chunks); raise device_memory_budget"};
  throw config_error{"host_memory_limit: " + format_bytes(r.host_limit) +
                     " beyond the array cannot sort " + std::to_string(r.n) + " elements of " +
                     std::to_string(r.layout.bytes()) +
                     " bytes in place; the smallest limit that works is " + format_bytes(least) +
                     " (" + std::to_string(least) + " bytes)"};
}

std::uint64_t least_host_bytes(const plan_request& r)
{
  std::uint64_t least = 0;
  for (const std::uint64_t rooms : room_multiples)
    for (const std::uint64_t per_room : buckets_per_room(r))
      for_each_chunk_size(r, [&](std::uint64_t m) {
        if (const std::optional<plan> p = plan_for(r, m, rooms, per_room))
          if (least == 0 || p->host_bytes < least) least = p->host_bytes;
        return true;
      });
  return least;
}

}  // namespace gpusort::detail::lean
