// The distributed sort's phases (include/gpusort/mpi.hpp; sort.cpp is the outline): the exact
// splitters (select.cpp), the exchange (exchange.cpp) and the merge (merge.cpp). Keys are
// handled as their ordered bits K (core/keys.hpp: unsigned, in the job's order), read through
// `map` from the raw keys the engine sorted.
#pragma once

#include "core/keys.hpp"

#include <gpusort/mpi.hpp>

#include <mpi.h>

#include <cstdint>
#include <exception>
#include <string>
#include <span>
#include <vector>

namespace gpusort::detail::mpi {

/// Throws gpusort::mpi::mpi_error naming `what` and MPI's message where rc is not MPI_SUCCESS.
void check(int rc, const char* what);

/// This rank's number and the communicator's size.
struct place {
  int rank{};
  int ranks{};
};
place place_of(MPI_Comm comm);

/// Runs `step` on every rank; where it threw on any, throws on every rank: the failing rank
/// its own exception, the others an error naming the lowest failing rank and its message.
template <typename F>
void agree(MPI_Comm comm, const char* what, F&& step)
{
  std::exception_ptr failure;
  std::string message;
  try {
    step();
  } catch (const std::exception& e) {
    failure = std::current_exception();
    message = e.what();
  } catch (...) {
    failure = std::current_exception();
    message = "an unknown error";
  }
  const place me = place_of(comm);
  const int mine = failure ? me.rank : me.ranks;
  int lowest = me.ranks;
  check(MPI_Allreduce(&mine, &lowest, 1, MPI_INT, MPI_MIN, comm), "MPI_Allreduce (agreement)");
  if (lowest == me.ranks) return;
  // The lowest failing rank's message, for everyone's error.
  int length = lowest == me.rank ? static_cast<int>(message.size()) : 0;
  check(MPI_Bcast(&length, 1, MPI_INT, lowest, comm), "MPI_Bcast (the error's length)");
  std::string text(static_cast<std::size_t>(length), '\0');
  if (lowest == me.rank) text = message;
  check(MPI_Bcast(text.data(), length, MPI_CHAR, lowest, comm), "MPI_Bcast (the error)");
  if (failure) std::rethrow_exception(failure);
  throw gpusort::mpi::mpi_error{"mpi::sort: " + std::string{what} + " failed on rank " +
                                std::to_string(lowest) + ": " + text};
}


/// Where this rank's sorted shard (raw keys, `map` to ordered bits) is cut for the ranks:
/// cuts[r] to cuts[r + 1] go to rank r (cuts[0] = 0, cuts[ranks] = shard.size()), so that rank
/// r receives exactly counts[r] elements (every rank's shard size, in rank order) and the
/// global order is by key, then rank, then position: exact, whatever the duplicates. Collective.
template <typename K>
std::vector<std::uint64_t> select_cuts(MPI_Comm comm, std::span<const K> shard,
                                       const key_map<K>& map,
                                       std::span<const std::uint64_t> counts);

/// Sends [cuts[r], cuts[r + 1]) of `data` (elements of `bytes` each) to rank r, and receives
/// into `received` (as many elements as this rank had) the runs of every rank in rank order;
/// recv_counts[r]: elements from rank r. At most `round_bytes` per pair and round. Returns the
/// rounds it took. Collective.
std::uint64_t exchange(MPI_Comm comm, const char* data, char* received, std::uint64_t bytes,
                       std::span<const std::uint64_t> cuts,
                       std::span<const std::uint64_t> recv_counts, std::uint64_t round_bytes);

/// Merges the sorted runs of `keys` (raw, run r at [first[r], first[r + 1])) into `out_keys`,
/// by ordered bits and then run (equal keys keep the runs' order), values alongside.
template <typename K, typename V>
void merge_runs(std::span<const K> keys, std::span<const V> values,
                std::span<const std::uint64_t> first, const key_map<K>& map, K* out_keys,
                V* out_values);

}  // namespace gpusort::detail::mpi
