// gpusort::mpi::sort (include/gpusort/mpi.hpp): the outline. Every step that can fail on one
// rank is followed by an agreement (agree), so that a rank's error fails the job on every rank
// with that one message instead of leaving the others waiting in the next collective.
#include "mpi/phases.hpp"

#include "core/keys.hpp"
#include "pipeline/host_memory.hpp"

#include <gpusort/error.hpp>
#include <gpusort/mpi.hpp>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <exception>
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

place place_of(MPI_Comm comm)
{
  place p;
  check(MPI_Comm_rank(comm, &p.rank), "MPI_Comm_rank");
  check(MPI_Comm_size(comm, &p.ranks), "MPI_Comm_size");
  return p;
}

namespace {

double since(std::chrono::steady_clock::time_point t)
{
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

/// What every rank must agree on: the key type, the value width and the options that order.
struct signature {
  std::int32_t type, value_bytes, direction, floats, stable;
  bool operator==(const signature&) const = default;
};

template <typename K, typename V>
void exchange_and_merge(MPI_Comm comm, const sort_job& job, const key_map<K>& map,
                        const std::vector<std::uint64_t>& cuts,
                        const std::vector<std::uint64_t>& recv_counts,
                        const gpusort::mpi::mpi_options& how, gpusort::mpi::mpi_report& report)
{
  const std::uint64_t n = job.keys.count;
  auto* keys = static_cast<K*>(const_cast<void*>(job.keys.data));
  V* values = nullptr;
  if constexpr (!std::is_same_v<V, no_value>)
    values = static_cast<V*>(const_cast<void*>(job.values->data));
  std::vector<K> got_keys;
  std::vector<V> got_values;
  auto start = std::chrono::steady_clock::now();
  agree(comm, "making the exchange's buffers", [&] {
    got_keys.resize(n);
    if constexpr (!std::is_same_v<V, no_value>) got_values.resize(n);
  });
  report.exchange_rounds = exchange(comm, reinterpret_cast<const char*>(keys),
                                    reinterpret_cast<char*>(got_keys.data()), sizeof(K), cuts,
                                    recv_counts, how.round_bytes);
  if constexpr (!std::is_same_v<V, no_value>)
    exchange(comm, reinterpret_cast<const char*>(values),
             reinterpret_cast<char*>(got_values.data()), sizeof(V), cuts, recv_counts,
             how.round_bytes);
  report.exchange_seconds = since(start);
  start = std::chrono::steady_clock::now();
  std::vector<std::uint64_t> first(recv_counts.size() + 1, 0);
  for (std::size_t r = 0; r < recv_counts.size(); ++r) first[r + 1] = first[r] + recv_counts[r];
  merge_runs<K, V>(got_keys, std::span<const V>{got_values}, first, map, keys, values);
  report.merge_seconds = since(start);
}

}  // namespace

}  // namespace gpusort::detail::mpi

namespace gpusort::mpi {

mpi_report sort(MPI_Comm comm, engine& eng, const sort_job& job, const sort_options& options,
                const mpi_options& how)
{
  using namespace gpusort::detail::mpi;
  using gpusort::detail::key_map;
  const auto start = std::chrono::steady_clock::now();
  const place me = place_of(comm);
  mpi_report report;
  report.elements = job.keys.count;

  // The job, checked on every rank and agreed: one refusal fails them all alike.
  agree(comm, "checking the job", [&] {
    if (job.keys_out != nullptr || job.values_out != nullptr)
      throw invalid_argument{"mpi::sort sorts each shard in place: keys_out must be null"};
    if (job.keys.count > 0 && job.keys.data == nullptr)
      throw invalid_argument{"mpi::sort: keys.data is null"};
    if (job.values && (job.values->count != job.keys.count ||
                       (job.values->value_bytes != 4 && job.values->value_bytes != 8) ||
                       (job.keys.count > 0 && job.values->data == nullptr)))
      throw invalid_argument{"mpi::sort: values must be as many as the keys, of 4 or 8 bytes"};
    if (how.round_bytes == 0) throw invalid_argument{"mpi::sort: round_bytes must be positive"};
    // MPI_Alltoallv's displacements are ints (in elements): a shard of up to 2^31 - 1.
    if (job.keys.count > static_cast<std::uint64_t>(INT_MAX))
      throw invalid_argument{"mpi::sort: a shard of more than 2^31 - 1 elements"};
  });
  const signature mine{static_cast<std::int32_t>(job.keys.type),
                       static_cast<std::int32_t>(job.values ? job.values->value_bytes : 0),
                       static_cast<std::int32_t>(options.direction),
                       static_cast<std::int32_t>(options.floats), options.stable ? 1 : 0};
  std::vector<signature> all(static_cast<std::size_t>(me.ranks));
  check(MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, comm),
        "MPI_Allgather (the jobs' types and options)");
  agree(comm, "checking the ranks agree", [&] {
    if (std::any_of(all.begin(), all.end(), [&](const signature& s) { return !(s == mine); }))
      throw invalid_argument{"mpi::sort: every rank must give the same key type, value width "
                             "and order options"};
  });

  // 1. Each rank sorts its shard on its host's engine.
  agree(comm, "the local sort", [&] { report.local = eng.sort(job, options); });

  // 2. Every rank's count: rank r ends with as many as it started with.
  std::vector<std::uint64_t> counts(static_cast<std::size_t>(me.ranks));
  check(MPI_Allgather(&report.elements, 1, MPI_UINT64_T, counts.data(), 1, MPI_UINT64_T, comm),
        "MPI_Allgather (the shards' sizes)");
  for (const std::uint64_t c : counts) report.total += c;

  const std::size_t key_bytes = size_of(job.keys.type);
  const std::size_t value_bytes = job.values ? job.values->value_bytes : 0;
  detail::visit_layout(key_bytes, value_bytes, [&]<typename K, typename V>() {
    // 3. The exact splitters: where this rank's sorted shard is cut for every rank.
    const key_map<K> map = detail::ordered_map<K>(
        {.type = job.keys.type, .dir = options.direction, .floats = options.floats,
         .canonical = true},
        true);
    auto t = std::chrono::steady_clock::now();
    const std::span<const K> shard{static_cast<const K*>(job.keys.data), job.keys.count};
    const std::vector<std::uint64_t> cuts = select_cuts<K>(comm, shard, map, counts);
    std::vector<std::uint64_t> send(static_cast<std::size_t>(me.ranks));
    std::vector<std::uint64_t> recv(send.size());
    for (std::size_t r = 0; r < send.size(); ++r) send[r] = cuts[r + 1] - cuts[r];
    check(MPI_Alltoall(send.data(), 1, MPI_UINT64_T, recv.data(), 1, MPI_UINT64_T, comm),
          "MPI_Alltoall (the exchange's counts)");
    report.select_seconds = since(t);
    // What the selection promises, checked before a byte moves: this rank receives exactly
    // as many elements as it gave (its buffers are sized so).
    agree(comm, "the splitters", [&] {
      std::uint64_t receiving = 0;
      for (const std::uint64_t c : recv) receiving += c;
      if (receiving != report.elements)
        throw logic_error{"mpi::sort: rank " + std::to_string(me.rank) + " would receive " +
                          std::to_string(receiving) + " elements for its " +
                          std::to_string(report.elements)};
    });
    report.sent = report.elements - send[static_cast<std::size_t>(me.rank)];
    // 4. The exchange, and 5. the merge of the received runs into the shard.
    exchange_and_merge<K, V>(comm, job, map, cuts, recv, how, report);
  });
  report.seconds = since(start);
  return report;
}

}  // namespace gpusort::mpi
