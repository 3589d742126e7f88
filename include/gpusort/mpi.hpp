// A sort across the ranks of an MPI communicator (issue 41): each rank holds a shard of one
// distributed array; afterwards every key on rank r is at most every key on rank r + 1 (in the
// requested order) and each rank holds as many elements as it started with (or, with
// `balanced`, an equal share).
//
//   gpusort::engine eng{cfg};                       // this host's engine: its GPUs or the CPU
//   gpusort::mpi::sort(MPI_COMM_WORLD, eng,
//                      {.keys = {shard.data(), shard.size(), gpusort::dtype::u64}});
//
// The field's scheme on this host's engine: each rank sorts its shard, exact splitters come
// from a distributed selection over the sorted shards, the elements move to their ranks with
// MPI_Alltoallw in rounds, and each rank merges the runs it received back into its shard. With
// `stable`, equal keys keep their global input order (rank, then position).
//
// Memory: beside the shard a rank holds 2 * ranks + 4 blocks of at most block_bytes, and
// 2 * ranks + 1 more for each thread of the merge beyond one
// (mpi_report::extra_bytes says how much it took; the exchange receives into the blocks its own
// sends freed, the merge writes into the blocks it consumed), and what the local sort takes (the
// engine's; its host_memory_budget bounds it). Collective: every rank of `comm` calls
// it with the same options and key type. Every wait for the other ranks ends within
// timeout_seconds; after an mpi_timeout (or an mpi_error from MPI itself) the ranks are out of
// step, and the caller ends the job (MPI_Abort). Errors one rank meets on its own (a bad job, a
// failed local sort) are agreed: every rank throws, the others naming the failing rank, and the
// communicator stays usable.
#pragma once

#include <gpusort/gpusort.hpp>

#include <mpi.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace gpusort::mpi {

/// An MPI call failed (its error string included), or another rank's error ended the job here.
struct mpi_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A wait for the other ranks outlasted mpi_options::timeout_seconds: a rank stopped or hangs.
struct mpi_timeout : mpi_error {
  using mpi_error::mpi_error;
};

/// How a rank puts the runs it received in order (mpi_options::merge).
enum class merge_method {
  automatic,  ///< `engine` where the engine has a GPU, else `cpu`
  cpu,        ///< a k-way merge on the host's cores
  engine,     ///< the runs laid end to end, then the engine sorts them (stably where asked)
};

struct mpi_options {
  /// Bytes (keys and values) one rank receives at most in one round of the exchange (below
  /// 2^31); a round also moves at most what the free blocks hold.
  std::uint64_t round_bytes{std::uint64_t{256} << 20};
  /// The exchange's and the merge's block (below 2^31; smaller for small shards, so that the
  /// blocks of its own take a quarter of the shard at most). Bigger blocks: fewer rounds.
  std::uint64_t block_bytes{std::uint64_t{2} << 20};
  /// How the received runs are put in order: a GPU sorts them at its link's rate, where a
  /// merge on the CPU runs at its memory's (slower than a GPU engine's sort for a few cores).
  merge_method merge{merge_method::automatic};
  /// Threads of the merge of the received runs; 0: the host's cores over the ranks on it, at
  /// most 16. Each thread beyond one takes 2 * ranks + 1 blocks more.
  unsigned merge_threads{0};
  /// The longest one wait for the other ranks may last (they may still be sorting their
  /// shards); 0: no limit.
  double timeout_seconds{900};
  /// Every rank ends with total / ranks elements (the first total % ranks one more) instead of
  /// its own count; its buffers must then hold `capacity` elements, at least that share.
  bool balanced{false};
  /// Elements the shard's buffers (keys and values) hold; 0: its count.
  std::uint64_t capacity{0};
};

/// What the distributed sort did on this rank.
struct mpi_report {
  sort_report local;            ///< the engine's sort of this rank's shard
  std::uint64_t elements{};     ///< this rank's, before
  std::uint64_t elements_after{};  ///< and after (the same unless balanced)
  std::uint64_t total{};        ///< every rank's
  std::uint64_t sent{};         ///< elements this rank sent to other ranks
  std::uint64_t exchange_rounds{};
  std::uint64_t extra_bytes{};  ///< host memory beside the shard: the blocks of its own
  double select_seconds{};      ///< finding the splitters
  double exchange_seconds{};
  double merge_seconds{};       ///< putting the received runs in order, either way
  bool merged_by_engine{};      ///< merge_method::engine ran
  sort_report final_sort;       ///< the engine's sort of the received runs, where it ran
  double seconds{};             ///< the whole call on this rank
};

/// Sorts the distributed array whose shard on this rank is `job` (in place: keys_out must be
/// null; values of 4 or 8 bytes travel with their keys) with `eng`. Throws
/// gpusort::invalid_argument for a job it cannot run (on every rank alike), mpi_error where MPI
/// fails or another rank's error ended the job, mpi_timeout where a rank stopped answering.
mpi_report sort(MPI_Comm comm, engine& eng, const sort_job& job, const sort_options& options = {},
                const mpi_options& how = {});

/// The global argsort: `indices` (as many as this rank's keys, int64) receives, for this rank's
/// part of the sorted order, each element's position in the distributed input (rank 0's
/// elements first, then rank 1's, ...); equal keys by that position. The keys are not written
/// (they are copied: one more shard of keys in memory). With `balanced`, `indices` must hold
/// how.capacity entries, at least the rank's share.
mpi_report argsort(MPI_Comm comm, engine& eng, const key_array& keys, std::int64_t* indices,
                   const sort_options& options = {}, const mpi_options& how = {});

/// The count this rank holds after a balanced sort of shards of `count` elements. Collective.
std::uint64_t balanced_share(MPI_Comm comm, std::uint64_t count);

}  // namespace gpusort::mpi
