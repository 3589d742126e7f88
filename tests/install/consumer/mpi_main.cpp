// A program that sorts across MPI ranks with the installed package: each rank sorts 1000 keys
// of its own with gpusort::mpi::sort on the CPU; afterwards no key of rank r exceeds one of rank
// r + 1, which the ranks check with each other. Run under mpiexec; prints "ok" on rank 0.
#include <gpusort/mpi.hpp>

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int rank = 0, ranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &ranks);
  std::vector<std::uint64_t> keys(1000);
  for (std::size_t i = 0; i < keys.size(); ++i)
    keys[i] = (i * 2654435761u + static_cast<std::uint64_t>(rank) * 97) % 5000;
  gpusort::config cfg;
  cfg.devices = gpusort::device_selection::cpu;
  gpusort::engine eng{cfg};
  gpusort::mpi::sort(MPI_COMM_WORLD, eng,
                     {.keys = {keys.data(), keys.size(), gpusort::dtype::u64}});
  // Each rank's first key to the rank below, which checks it against its own last.
  std::uint64_t above = UINT64_MAX;
  MPI_Sendrecv(keys.data(), 1, MPI_UINT64_T, rank > 0 ? rank - 1 : MPI_PROC_NULL, 0, &above, 1,
               MPI_UINT64_T, rank + 1 < ranks ? rank + 1 : MPI_PROC_NULL, 0, MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
  int bad = std::is_sorted(keys.begin(), keys.end()) && keys.back() <= above ? 0 : 1;
  int any = 0;
  MPI_Allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (rank == 0) std::printf(any == 0 ? "ok: %d ranks sorted\n" : "FAILED on %d ranks\n", ranks);
  MPI_Finalize();
  return any;
}
