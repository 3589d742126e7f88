// The distributed sort's phases (include/gpusort/mpi.hpp; sort.cpp is the outline): the exact
// splitters (select.cpp), the exchange into blocks (exchange.cpp) and the merge of the received
// runs back into the shard (merge.cpp), over the collectives of collectives.cpp, each of which
// waits at most the job's timeout. Keys are handled as their ordered bits K (core/keys.hpp:
// unsigned, in the job's order), read through `map` from the raw keys the engine sorted.
#pragma once

#include "core/keys.hpp"

#include <gpusort/mpi.hpp>

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace gpusort::detail::mpi {

/// Throws gpusort::mpi::mpi_error naming `what` and MPI's message where rc is not MPI_SUCCESS.
void check(int rc, const char* what);

/// The communicator, this rank's place in it and how long one wait for the others may last.
struct group {
  MPI_Comm comm{MPI_COMM_NULL};
  int rank{};
  int ranks{};
  double timeout_seconds{};  ///< 0: no limit
};
group group_of(MPI_Comm comm, double timeout_seconds);

// The collectives the sort uses, each started nonblocking and waited for with the group's
// timeout, so that a rank that stopped or hangs ends the wait with gpusort::mpi::mpi_timeout
// instead of leaving every other rank blocked. Counts and displacements as MPI takes them.
void allreduce(const group& g, const void* send, void* recv, int count, MPI_Datatype type,
               MPI_Op op, const char* what);
void allgather(const group& g, const void* send, void* recv, int count, MPI_Datatype type,
               const char* what);
void alltoall(const group& g, const void* send, void* recv, int count, MPI_Datatype type,
              const char* what);
/// MPI_Alltoallw from and into MPI_BOTTOM: each peer's datatype names absolute addresses.
void alltoallw(const group& g, const int* send_counts, const int* send_at,
               const MPI_Datatype* send_types, const int* recv_counts, const int* recv_at,
               const MPI_Datatype* recv_types, const char* what);
void bcast(const group& g, void* data, int count, MPI_Datatype type, int root, const char* what);
/// MPI_Exscan, with rank 0's result defined: zeros (of unsigned 64-bit sums).
void exscan_sum(const group& g, const std::uint64_t* send, std::uint64_t* recv, int count,
                const char* what);

/// Runs `step` on every rank; where it threw on any, throws on every rank: the failing rank
/// its own exception, the others an error naming the lowest failing rank and its message.
void agree(const group& g, const char* what, const std::function<void()>& step);

/// Where this rank's sorted shard (raw keys, `map` to ordered bits) is cut for the ranks:
/// cuts[r] to cuts[r + 1] go to rank r (cuts[0] = 0, cuts[ranks] = shard.size()), so that rank
/// r receives exactly targets[r] elements (they sum to the shards' total) and the global order
/// is by key, then rank, then position: exact, whatever the duplicates. Collective.
template <typename K>
std::vector<std::uint64_t> select_cuts(const group& g, std::span<const K> shard,
                                       const key_map<K>& map,
                                       std::span<const std::uint64_t> targets);

/// The rank's buffers seen as blocks of `block` elements for the exchange and the merge, so
/// that neither needs a second copy of the shard: the buffers' whole blocks (ids below
/// shard_blocks()) and a few blocks of its own (the rest), the free ones on a list. The
/// buffers hold `capacity` elements; what lies past their last whole block (the tail) is no
/// block and receives the final part that is short of one.
class block_space {
 public:
  block_space(char* keys, char* values, std::uint64_t capacity, std::uint32_t key_bytes,
              std::uint32_t value_bytes, std::uint64_t block, std::uint64_t extra_blocks);

  [[nodiscard]] std::uint64_t block() const noexcept { return block_; }
  [[nodiscard]] std::uint64_t shard_blocks() const noexcept { return shard_blocks_; }
  [[nodiscard]] std::uint64_t blocks() const noexcept { return shard_blocks_ + extra_; }
  [[nodiscard]] std::uint32_t key_bytes() const noexcept { return key_bytes_; }
  [[nodiscard]] std::uint32_t value_bytes() const noexcept { return value_bytes_; }
  /// The buffers themselves (what the exchange sends from).
  [[nodiscard]] char* shard_keys() const noexcept { return keys_; }
  [[nodiscard]] char* shard_values() const noexcept { return values_; }
  [[nodiscard]] char* keys(std::uint64_t id) const noexcept;
  [[nodiscard]] char* values(std::uint64_t id) const noexcept;
  [[nodiscard]] char* tail_keys() const noexcept
  {
    return keys_ + shard_blocks_ * block_ * key_bytes_;
  }
  [[nodiscard]] char* tail_values() const noexcept
  {
    return values_ + shard_blocks_ * block_ * value_bytes_;
  }

  /// A free block; throws logic_error where there is none (the counting argument in
  /// design.md section 6a failed).
  std::uint64_t take();
  void give(std::uint64_t id);
  /// Takes block `id` where it is free (the merge's final permutation fills given places).
  void claim(std::uint64_t id) noexcept;
  [[nodiscard]] std::uint64_t free_blocks() const noexcept { return free_count_; }
  /// Bytes allocated beside the shard: the blocks of its own.
  [[nodiscard]] std::uint64_t extra_bytes() const noexcept;
  /// Copies block `from` into block `to` (keys and values).
  void copy(std::uint64_t from, std::uint64_t to) const noexcept;

 private:
  char* keys_;
  char* values_;
  std::uint32_t key_bytes_, value_bytes_;
  std::uint64_t block_, shard_blocks_, extra_;
  // std::byte: storage in which the merge's keys and values (K, V) begin their lives.
  std::unique_ptr<std::byte[]> extra_keys_, extra_values_;
  // The free list: ids, some stale (claimed since given), and which ids are free now.
  std::vector<std::uint64_t> free_;
  std::vector<bool> is_free_;
  std::uint64_t free_count_{};
};

/// One received run in a block_space: its blocks in order, all whole but the last.
struct run {
  std::vector<std::uint64_t> blocks;
  std::uint64_t length{};
};

/// What the exchange did on this rank.
struct exchange_counts {
  std::uint64_t rounds{};
};

/// Sends [cuts[r], cuts[r + 1]) of the sorted shard (the first cuts.back() elements of the
/// space's buffers) to rank r and receives from every rank s its run of recv_counts[s]
/// elements into blocks of `space`, in rounds of at most `round_bytes` received per rank: each
/// rank grants its senders only as much as its free blocks hold, and a shard block is free
/// once every element in it was sent. Returns the runs, in rank order. Collective.
std::vector<run> exchange(const group& g, block_space& space,
                          std::span<const std::uint64_t> cuts,
                          std::span<const std::uint64_t> recv_counts, std::uint64_t round_bytes,
                          exchange_counts& counts);

/// The merge's threads: `asked`, or (0) this host's cores over the ranks on it, at most 16.
std::uint64_t merge_threads(unsigned asked, std::uint64_t ranks_here);

/// How many ranks of the group run on this host (by MPI_Get_processor_name). Collective.
std::uint64_t ranks_on_this_host(const group& g);

/// Merges the sorted `runs` of `space` by ordered bits and then run (equal keys keep the runs'
/// order) into the first `total` elements of the space's buffers, on `threads` threads: into
/// free blocks first, then a permutation of those blocks into place. The space needs
/// (2 * runs + 1) blocks per thread beyond one, and about runs + 2, free besides.
template <typename K, typename V>
void merge_runs(block_space& space, std::vector<run>& runs, std::uint64_t total,
                const key_map<K>& map, std::uint64_t threads);

}  // namespace gpusort::detail::mpi
