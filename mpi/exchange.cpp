// The exchange (phases.hpp): MPI_Alltoallw in rounds straight into blocks, so that a rank holds
// its shard plus a bound (a few blocks) however much it receives, and nothing is copied twice.
// Each round the receivers grant their senders what their free blocks hold (MPI_Alltoall of the
// grants), the senders send that much from the front of each of their segments, and every shard
// block whose elements have all left becomes free for what arrives next. design.md section 6a
// shows that some rank can always grant while anything is left to move, so the rounds end.
#include "mpi/phases.hpp"

#include <gpusort/error.hpp>

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>
#include <tuple>
#include <utility>

namespace gpusort::detail::mpi {

namespace {

/// The pieces of memory one peer's part of a round sends or receives, as one MPI datatype over
/// absolute addresses (MPI_BOTTOM): keys first, then values, so that both arrays and any number
/// of blocks travel in one MPI_Ialltoallw without a staging copy. Freed with the round.
class pieces {
 public:
  pieces() = default;
  ~pieces()
  {
    if (type_ != MPI_DATATYPE_NULL) MPI_Type_free(&type_);
  }
  pieces(const pieces&) = delete;
  pieces& operator=(const pieces&) = delete;

  void add_key(const char* at, std::uint64_t bytes) { add(keys_, at, bytes); }
  void add_value(const char* at, std::uint64_t bytes) { add(values_, at, bytes); }

  /// The datatype (MPI_BYTE where there is nothing) and its count (0 or 1).
  std::pair<MPI_Datatype, int> commit()
  {
    std::vector<int> lengths;
    std::vector<MPI_Aint> at;
    for (const auto* l : {&keys_, &values_}) {
      for (const auto& [address, bytes] : *l) {
        at.push_back(address);
        lengths.push_back(bytes);
      }
    }
    if (lengths.empty()) return {MPI_BYTE, 0};
    check(MPI_Type_create_hindexed(static_cast<int>(lengths.size()), lengths.data(), at.data(),
                                   MPI_BYTE, &type_),
          "MPI_Type_create_hindexed");
    check(MPI_Type_commit(&type_), "MPI_Type_commit");
    return {type_, 1};
  }

 private:
  using piece_list = std::vector<std::pair<MPI_Aint, int>>;
  static void add(piece_list& l, const char* at, std::uint64_t bytes)
  {
    if (bytes == 0) return;
    MPI_Aint address{};
    check(MPI_Get_address(at, &address), "MPI_Get_address");
    l.emplace_back(address, static_cast<int>(bytes));  // at most round_bytes < 2^31
  }
  piece_list keys_, values_;
  MPI_Datatype type_{MPI_DATATYPE_NULL};
};

}  // namespace

std::vector<run> exchange(const group& g, block_space& space,
                          std::span<const std::uint64_t> cuts,
                          std::span<const std::uint64_t> recv_counts, std::uint64_t round_bytes,
                          exchange_counts& counts)
{
  const auto ranks = static_cast<std::size_t>(g.ranks);
  const std::uint64_t b = space.block();
  const std::uint32_t kb = space.key_bytes(), vb = space.value_bytes();
  const std::uint64_t round_cap = std::max<std::uint64_t>(1, round_bytes / (kb + vb));

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
  std::vector<std::uint64_t> grant(ranks), allowed(ranks), open(ranks);
  std::vector<int> send_count(ranks), recv_count(ranks), zeros(ranks, 0);
  std::vector<MPI_Datatype> send_type(ranks), recv_type(ranks);
  for (std::uint64_t round = 0;; ++round) {
    // What this rank takes from each sender this round: what its free blocks (and the room
    // left in each run's last block) hold, within round_bytes. Every sender still sending
    // gets an equal share of the blocks first, so that all pairs move at once (one sender
    // taking the whole pool would leave the others idle), then the rest goes in turn from a
    // sender that differs by round and by rank, so that the receivers' leftovers spread too.
    std::uint64_t blocks = space.free_blocks(), room = round_cap;
    std::uint64_t local[2] = {0, 0};  // elements left to receive, granted now
    std::uint64_t active = 0;
    for (std::size_t s = 0; s < ranks; ++s) {
      local[0] += left[s];
      grant[s] = 0;
      // Room left in the run's last block: what its grant fills before taking blocks.
      open[s] = runs[s].length % b == 0 ? 0 : b - runs[s].length % b;
      if (left[s] > 0) ++active;
    }
    const auto give = [&](std::size_t s, std::uint64_t most_blocks) {
      const std::uint64_t more = std::min({left[s] - grant[s], room, open[s] + most_blocks * b});
      const std::uint64_t into_open = std::min(more, open[s]);
      const std::uint64_t new_blocks = (more - into_open + b - 1) / b;
      // The last new block's unfilled part is open room for a later grant this round.
      open[s] = open[s] - into_open + new_blocks * b - (more - into_open);
      blocks -= new_blocks;
      grant[s] += more;
      room -= more;
    };
    if (active > 0) {
      const std::uint64_t share = blocks / active;
      for (std::size_t s = 0; s < ranks; ++s)
        if (left[s] > 0) give(s, share);
      for (std::size_t k = 0; k < ranks; ++k) {
        const std::size_t s = (round + static_cast<std::size_t>(g.rank) + k) % ranks;
        if (left[s] > grant[s]) give(s, blocks);
      }
    }
    for (std::size_t s = 0; s < ranks; ++s) local[1] += grant[s];
    std::uint64_t global[2] = {0, 0};
    allreduce(g, local, global, 2, MPI_UINT64_T, MPI_SUM, "MPI_Allreduce (the exchange's rounds)");
    if (global[0] == 0) break;
    if (global[1] == 0)
      throw logic_error{"mpi::sort: no rank has room to receive in round " +
                        std::to_string(round) + " with " + std::to_string(global[0]) +
                        " elements left to move"};
    alltoall(g, grant.data(), allowed.data(), 1, MPI_UINT64_T, "MPI_Alltoall (the grants)");

    // Where everything goes: each sender's part from the front of its segment, each
    // receiver's into its run's last block and then blocks taken now (the grants fit them).
    std::vector<pieces> out(ranks), in(ranks);
    for (std::size_t r = 0; r < ranks; ++r) {
      out[r].add_key(space.shard_keys() + next[r] * kb, allowed[r] * kb);
      if (vb > 0) out[r].add_value(space.shard_values() + next[r] * vb, allowed[r] * vb);
      for (std::uint64_t todo = grant[r]; todo > 0;) {
        const std::uint64_t fill = runs[r].length % b;
        if (fill == 0) runs[r].blocks.push_back(space.take());
        const std::uint64_t n = std::min(todo, b - fill);
        const std::uint64_t id = runs[r].blocks.back();
        in[r].add_key(space.keys(id) + fill * kb, n * kb);
        if (vb > 0) in[r].add_value(space.values(id) + fill * vb, n * vb);
        runs[r].length += n;
        todo -= n;
      }
      std::tie(send_type[r], send_count[r]) = out[r].commit();
      std::tie(recv_type[r], recv_count[r]) = in[r].commit();
    }
    alltoallw(g, send_count.data(), zeros.data(), send_type.data(), recv_count.data(),
              zeros.data(), recv_type.data(), "MPI_Alltoallw (the elements)");
    for (std::size_t r = 0; r < ranks; ++r) {
      sent(next[r], allowed[r]);
      next[r] += allowed[r];
      left[r] -= grant[r];
    }
    counts.rounds = round + 1;
  }
  return runs;
}

}  // namespace gpusort::detail::mpi
