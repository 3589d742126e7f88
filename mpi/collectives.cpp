// The collectives of the distributed sort (phases.hpp), each waited for with a deadline: MPI's
// blocking collectives wait forever for a rank that hangs, and a rank that died is noticed only
// where the launcher kills the job. Nonblocking calls polled with MPI_Test make every wait
// bounded; the polling yields the core, as Open MPI's own waits do when oversubscribed.
#include "mpi/phases.hpp"

#include <gpusort/error.hpp>

#include <sched.h>

#include <chrono>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace gpusort::detail::mpi {

void check(int rc, const char* what)
{
  if (rc == MPI_SUCCESS) return;
  char message[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  MPI_Error_string(rc, message, &length);
  throw gpusort::mpi::mpi_error{std::string{"mpi::sort: "} + what + " failed: " +
                                std::string(message, static_cast<std::size_t>(length))};
}

group group_of(MPI_Comm comm, double timeout_seconds)
{
  group g{.comm = comm, .timeout_seconds = timeout_seconds};
  check(MPI_Comm_rank(comm, &g.rank), "MPI_Comm_rank");
  check(MPI_Comm_size(comm, &g.ranks), "MPI_Comm_size");
  return g;
}

namespace {

/// Polls before a wait starts yielding the core.
constexpr unsigned spin_polls = 2000;

/// Waits for `request` (started by `rc`'s call) at most the group's timeout.
void wait(const group& g, int rc, MPI_Request& request, const char* what)
{
  check(rc, what);
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  for (unsigned polls = 0;; ++polls) {
    int done = 0;
    check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), what);
    if (done != 0) return;
    // The clock every 256 polls: a transfer progresses only inside MPI_Test.
    if (g.timeout_seconds > 0 && polls % 256 == 255 &&
        std::chrono::duration<double>(clock::now() - start).count() > g.timeout_seconds) {
      char seconds[32];
      std::snprintf(seconds, sizeof seconds, "%g", g.timeout_seconds);
      throw gpusort::mpi::mpi_timeout{
          "mpi::sort: rank " + std::to_string(g.rank) + " waited " + seconds + " s in " +
          what + " for the other ranks: one of them stopped or hangs (the job cannot go on)"};
    }
    // Spin first (a collective of ranks that are all running ends within microseconds),
    // then give the core away between polls, for ranks that share cores or a slow peer.
    if (polls >= spin_polls) sched_yield();
  }
}

}  // namespace

void allreduce(const group& g, const void* send, void* recv, int count, MPI_Datatype type,
               MPI_Op op, const char* what)
{
  MPI_Request r{};
  wait(g, MPI_Iallreduce(send, recv, count, type, op, g.comm, &r), r, what);
}

void allgather(const group& g, const void* send, void* recv, int count, MPI_Datatype type,
               const char* what)
{
  MPI_Request r{};
  wait(g, MPI_Iallgather(send, count, type, recv, count, type, g.comm, &r), r, what);
}

void alltoall(const group& g, const void* send, void* recv, int count, MPI_Datatype type,
              const char* what)
{
  MPI_Request r{};
  wait(g, MPI_Ialltoall(send, count, type, recv, count, type, g.comm, &r), r, what);
}

void alltoallw(const group& g, const int* send_counts, const int* send_at,
               const MPI_Datatype* send_types, const int* recv_counts, const int* recv_at,
               const MPI_Datatype* recv_types, const char* what)
{
  MPI_Request r{};
  wait(g,
       MPI_Ialltoallw(MPI_BOTTOM, send_counts, send_at, send_types, MPI_BOTTOM, recv_counts,
                      recv_at, recv_types, g.comm, &r),
       r, what);
}

void bcast(const group& g, void* data, int count, MPI_Datatype type, int root, const char* what)
{
  MPI_Request r{};
  wait(g, MPI_Ibcast(data, count, type, root, g.comm, &r), r, what);
}

void exscan_sum(const group& g, const std::uint64_t* send, std::uint64_t* recv, int count,
                const char* what)
{
  MPI_Request r{};
  wait(g, MPI_Iexscan(send, recv, count, MPI_UINT64_T, MPI_SUM, g.comm, &r), r, what);
  if (g.rank == 0) std::fill(recv, recv + count, std::uint64_t{0});  // undefined there
}

std::uint64_t ranks_on_this_host(const group& g)
{
  char mine[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  check(MPI_Get_processor_name(mine, &length), "MPI_Get_processor_name");
  std::vector<char> all(static_cast<std::size_t>(g.ranks) * MPI_MAX_PROCESSOR_NAME);
  allgather(g, mine, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR,
            "MPI_Allgather (the ranks' hosts)");
  std::uint64_t here = 0;
  for (int r = 0; r < g.ranks; ++r)
    if (std::strncmp(mine, all.data() + static_cast<std::size_t>(r) * MPI_MAX_PROCESSOR_NAME,
                     MPI_MAX_PROCESSOR_NAME) == 0)
      ++here;
  return here;
}

void agree(const group& g, const char* what, const std::function<void()>& step)
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
  const int mine = failure ? g.rank : g.ranks;
  int lowest = g.ranks;
  allreduce(g, &mine, &lowest, 1, MPI_INT, MPI_MIN, "MPI_Allreduce (agreement)");
  if (lowest == g.ranks) return;
  // The lowest failing rank's message, for everyone's error.
  int length = lowest == g.rank ? static_cast<int>(message.size()) : 0;
  bcast(g, &length, 1, MPI_INT, lowest, "MPI_Bcast (the error's length)");
  std::string text(static_cast<std::size_t>(length), '\0');
  if (lowest == g.rank) text = message;
  bcast(g, text.data(), length, MPI_CHAR, lowest, "MPI_Bcast (the error)");
  if (failure) std::rethrow_exception(failure);
  throw gpusort::mpi::mpi_error{"mpi::sort: " + std::string{what} + " failed on rank " +
                                std::to_string(lowest) + ": " + text};
}

}  // namespace gpusort::detail::mpi
