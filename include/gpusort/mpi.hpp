// A sort across the ranks of an MPI communicator (issue 41): each rank holds a shard of one
// distributed array; afterwards every key on rank r is at most every key on rank r + 1 (in the
// requested order) and each rank holds as many elements as it started with.
//
//   gpusort::engine eng{cfg};                       // this host's engine: its GPUs or the CPU
//   gpusort::mpi::sort(MPI_COMM_WORLD, eng, {.keys = {shard.data(), shard.size(), gpusort::dtype::u64}});
//
// The field's scheme on this host's engine: each rank sorts its shard, exact splitters come
// from a distributed selection over the sorted shards, the elements move to their ranks with
// MPI_Alltoallv in rounds of a bounded size, and each rank merges the runs it received. With
// `stable`, equal keys keep their global input order (rank, then position). Collective: every
// rank of `comm` calls it with the same options and key type.
#pragma once

#include <gpusort/gpusort.hpp>

#include <mpi.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace gpusort::mpi {

/// An MPI call failed (its error string included).
struct mpi_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct mpi_options {
  /// Bytes one rank sends to one other rank in one round of the exchange (MPI counts are ints).
  std::uint64_t round_bytes{std::uint64_t{256} << 20};
};

/// What the distributed sort did on this rank.
struct mpi_report {
  sort_report local;            ///< the engine's sort of this rank's shard
  std::uint64_t elements{};     ///< this rank's, before and after
  std::uint64_t total{};        ///< every rank's
  std::uint64_t sent{};         ///< elements this rank sent to other ranks
  std::uint64_t exchange_rounds{};
  double select_seconds{};      ///< finding the splitters
  double exchange_seconds{};
  double merge_seconds{};
  double seconds{};             ///< the whole call on this rank
};

/// Sorts the distributed array whose shard on this rank is `job` (in place: keys_out must be
/// null; values of 4 or 8 bytes travel with their keys) with `eng`. Throws
/// gpusort::invalid_argument for a job it cannot run (the same on every rank) and mpi_error
/// where MPI fails.
mpi_report sort(MPI_Comm comm, engine& eng, const sort_job& job, const sort_options& options = {},
                const mpi_options& how = {});

}  // namespace gpusort::mpi
