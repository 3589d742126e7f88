// The exchange (phases.hpp): MPI_Alltoallv in rounds into blocks, so that a rank holds its shard
// plus a bound (a round's staging and a few blocks) however much it receives. Each round the
// receivers grant their senders what their free blocks hold (MPI_Alltoall of the grants), the
// senders send that much from the front of each of their segments, and every shard block whose
// elements have all left becomes free for what arrives next. design.md section 6a shows that
// some rank can always grant while anything is left to move, so the rounds end.
#include "mpi/phases.hpp"

#include <gpusort/error.hpp>

#include <algorithm>
#include <climits>
#include <cstring>
#include <optional>
#include <string>

namespace gpusort::detail::mpi {

namespace {

/// An MPI datatype of one element (`bytes` contiguous bytes), freed with the exchange.
class element_type {
 public:
  explicit element_type(std::uint64_t bytes)
  {
    check(MPI_Type_contiguous(static_cast<int>(bytes), MPI_BYTE, &type_), "MPI_Type_contiguous");
    check(MPI_Type_commit(&type_), "MPI_Type_commit");
  }
  ~element_type() { MPI_Type_free(&type_); }
  element_type(const element_type&) = delete;
  element_type& operator=(const element_type&) = delete;
  [[nodiscard]] MPI_Datatype get() const noexcept { return type_; }

 private:
  MPI_Datatype type_{MPI_DATATYPE_NULL};
};

/// Appends `count` elements of the staging buffers at `at` to run `r`, block by block.
void append(block_space& space, run& r, const char* keys, const char* values, std::uint64_t at,
            std::uint64_t count)
{
  const std::uint64_t b = space.block();
  const std::uint32_t kb = space.key_bytes(), vb = space.value_bytes();
  while (count > 0) {
    const std::uint64_t fill = r.length % b;
    if (fill == 0) r.blocks.push_back(space.take());
    const std::uint64_t n = std::min(count, b - fill);
    const std::uint64_t id = r.blocks.back();
    std::memcpy(space.keys(id) + fill * kb, keys + at * kb, n * kb);
    if (vb > 0) std::memcpy(space.values(id) + fill * vb, values + at * vb, n * vb);
    r.length += n;
    at += n;
    count -= n;
  }
}

}  // namespace

std::vector<run> exchange(const group& g, block_space& space, std::span<const std::uint64_t> cuts,
                          std::span<const std::uint64_t> recv_counts, std::uint64_t round_bytes,
                          exchange_counts& counts)
{
  const auto ranks = static_cast<std::size_t>(g.ranks);
  const std::uint64_t b = space.block();
  const std::uint32_t kb = space.key_bytes(), vb = space.value_bytes();
  const element_type key_type{kb};
  std::optional<element_type> value_type;
  if (vb > 0) value_type.emplace(vb);
  // The staging: round_bytes, or what this rank receives in all where that is less.
  std::uint64_t receiving = 0;
  for (const std::uint64_t c : recv_counts) receiving += c;
  const std::uint64_t stage = std::clamp<std::uint64_t>(std::min(round_bytes / (kb + vb), receiving),
                                                        1, static_cast<std::uint64_t>(INT_MAX));
  std::vector<char> stage_keys(stage * kb), stage_values(stage * vb);
  counts.staging_bytes = stage * (kb + vb);

  // Elements of each shard block not sent yet; blocks beyond the shard's data are free now.
  const std::uint64_t shard = cuts.back();
  std::vector<std::uint64_t> unsent(space.shard_blocks());
  for (std::uint64_t id = 0; id < unsent.size(); ++id) {
    const std::uint64_t first = id * b;
    unsent[id] = first < shard ? std::min(b, shard - first) : 0;
    if (unsent[id] == 0) space.give(id);
  }
  const auto sent = [&](std::uint64_t at, std::uint64_t count) {
    for (std::uint64_t id = at / b; count > 0 && id < unsent.size(); ++id) {
      const std::uint64_t n = std::min(count, (id + 1) * b - at);
      unsent[id] -= n;
      if (unsent[id] == 0) space.give(id);
      at += n;
      count -= n;
    }
  };

  std::vector<run> runs(ranks);
  std::vector<std::uint64_t> left(recv_counts.begin(), recv_counts.end());
  std::vector<std::uint64_t> next(cuts.begin(), cuts.end() - 1);  // each segment's front
  std::vector<std::uint64_t> grant(ranks), allowed(ranks);
  std::vector<int> send_counts(ranks), send_at(ranks), recv_now(ranks), recv_at(ranks);
  for (std::uint64_t round = 0;; ++round) {
    // What this rank takes from each sender this round: what its free blocks (and the room
    // left in each run's last block) hold, within the staging; the first sender asked turns
    // with the round, so that no sender waits on the others' grants for long.
    std::uint64_t blocks = space.free_blocks(), room = stage;
    std::uint64_t local[2] = {0, 0};  // elements left to receive, granted now
    for (std::size_t k = 0; k < ranks; ++k) {
      const std::size_t s = (round + k) % ranks;
      local[0] += left[s];
      const std::uint64_t open = runs[s].length % b == 0 ? 0 : b - runs[s].length % b;
      grant[s] = std::min({left[s], room, open + blocks * b});
      if (grant[s] > open) blocks -= (grant[s] - open + b - 1) / b;
      room -= grant[s];
      local[1] += grant[s];
    }
    std::uint64_t global[2] = {0, 0};
    allreduce(g, local, global, 2, MPI_UINT64_T, MPI_SUM, "MPI_Allreduce (the exchange's rounds)");
    if (global[0] == 0) break;
    if (global[1] == 0)
      throw logic_error{"mpi::sort: no rank has room to receive in round " +
                        std::to_string(round) + " with " + std::to_string(global[0]) +
                        " elements left to move"};
    alltoall(g, grant.data(), allowed.data(), 1, MPI_UINT64_T, "MPI_Alltoall (the grants)");
    int at = 0;
    for (std::size_t r = 0; r < ranks; ++r) {
      send_counts[r] = static_cast<int>(allowed[r]);
      send_at[r] = static_cast<int>(next[r]);  // a shard has at most INT_MAX elements
      recv_now[r] = static_cast<int>(grant[r]);
      recv_at[r] = at;
      at += recv_now[r];
    }
    alltoallv(g, space.shard_keys(), send_counts.data(), send_at.data(), stage_keys.data(),
              recv_now.data(), recv_at.data(), key_type.get(), "MPI_Alltoallv (the keys)");
    if (vb > 0)
      alltoallv(g, space.shard_values(), send_counts.data(), send_at.data(), stage_values.data(),
                recv_now.data(), recv_at.data(), value_type->get(), "MPI_Alltoallv (the values)");
    for (std::size_t r = 0; r < ranks; ++r) {
      sent(next[r], allowed[r]);
      next[r] += allowed[r];
    }
    for (std::size_t s = 0; s < ranks; ++s) {
      append(space, runs[s], stage_keys.data(), stage_values.data(),
             static_cast<std::uint64_t>(recv_at[s]), grant[s]);
      left[s] -= grant[s];
    }
    counts.rounds = round + 1;
  }
  return runs;
}

}  // namespace gpusort::detail::mpi
