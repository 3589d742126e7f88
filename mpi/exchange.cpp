// The exchange (phases.hpp): MPI_Alltoallv in rounds, each pair moving at most round_bytes a
// round, so that MPI's int counts hold and no transport buffers a whole shard at once.
#include "mpi/phases.hpp"

#include <gpusort/error.hpp>

#include <algorithm>
#include <climits>
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

int as_int(std::uint64_t v, const char* what)
{
  if (v > static_cast<std::uint64_t>(INT_MAX))
    throw invalid_argument{std::string{"mpi::sort: "} + what + " exceeds MPI's int counts"};
  return static_cast<int>(v);
}

}  // namespace

std::uint64_t exchange(MPI_Comm comm, const char* data, char* received, std::uint64_t bytes,
                       std::span<const std::uint64_t> cuts,
                       std::span<const std::uint64_t> recv_counts, std::uint64_t round_bytes)
{
  const place me = place_of(comm);
  const auto ranks = static_cast<std::size_t>(me.ranks);
  const element_type type{bytes};
  const std::uint64_t cap =
      std::clamp<std::uint64_t>(round_bytes / bytes, 1, static_cast<std::uint64_t>(INT_MAX));
  std::vector<std::uint64_t> recv_first(ranks + 1, 0);
  std::uint64_t longest = 0;
  for (std::size_t r = 0; r < ranks; ++r) {
    recv_first[r + 1] = recv_first[r] + recv_counts[r];
    longest = std::max({longest, cuts[r + 1] - cuts[r], recv_counts[r]});
  }
  std::uint64_t most = 0;
  check(MPI_Allreduce(&longest, &most, 1, MPI_UINT64_T, MPI_MAX, comm),
        "MPI_Allreduce (the exchange's rounds)");
  const std::uint64_t rounds = (most + cap - 1) / cap;
  std::vector<int> send_counts(ranks), send_at(ranks), recv_counts_now(ranks), recv_at(ranks);
  for (std::uint64_t round = 0; round < rounds; ++round) {
    const std::uint64_t skip = round * cap;
    for (std::size_t r = 0; r < ranks; ++r) {
      const std::uint64_t send = cuts[r + 1] - cuts[r];
      send_counts[r] = static_cast<int>(send > skip ? std::min(cap, send - skip) : 0);
      send_at[r] = as_int(cuts[r] + std::min(skip, send), "a shard's elements");
      recv_counts_now[r] =
          static_cast<int>(recv_counts[r] > skip ? std::min(cap, recv_counts[r] - skip) : 0);
      recv_at[r] = as_int(recv_first[r] + std::min(skip, recv_counts[r]), "a shard's elements");
    }
    check(MPI_Alltoallv(data, send_counts.data(), send_at.data(), type.get(), received,
                        recv_counts_now.data(), recv_at.data(), type.get(), comm),
          "MPI_Alltoallv");
  }
  return rounds;
}

}  // namespace gpusort::detail::mpi
