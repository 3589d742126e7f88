// gpusort::mpi::sort (include/gpusort/mpi.hpp): the outline. Every step that can fail on one
// rank is followed by an agreement (agree), so that a rank's error fails the job on every rank
// with that one message instead of leaving the others waiting in the next collective.
#include "mpi/phases.hpp"

#include "core/keys.hpp"

#include <gpusort/error.hpp>
#include <gpusort/mpi.hpp>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace gpusort::detail::mpi {

namespace {

double since(std::chrono::steady_clock::time_point t)
{
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

/// What every rank must agree on: the key type, the value width and the options that order.
struct signature {
  std::int32_t type, value_bytes, direction, floats, stable, balanced;
  bool operator==(const signature&) const = default;
};

std::vector<std::uint64_t> counts_of(const group& g, std::uint64_t count)
{
  std::vector<std::uint64_t> counts(static_cast<std::size_t>(g.ranks));
  allgather(g, &count, counts.data(), 1, MPI_UINT64_T, "MPI_Allgather (the shards' sizes)");
  return counts;
}

/// Rank r's share of `total` elements in a balanced sort.
std::uint64_t share_of(std::uint64_t total, int ranks, int r)
{
  const auto n = static_cast<std::uint64_t>(ranks);
  return total / n + (static_cast<std::uint64_t>(r) < total % n ? 1 : 0);
}

/// The checks every rank makes of its own job, agreed.
void check_job(const group& g, const sort_job& job, const gpusort::mpi::mpi_options& how,
               std::uint64_t share)
{
  agree(g, "checking the job", [&] {
    if (job.keys_out != nullptr || job.values_out != nullptr)
      throw invalid_argument{"mpi::sort sorts each shard in place: keys_out must be null"};
    // The buffers hold the shard and, balanced, the rank's share (at least the shard).
    const std::uint64_t capacity = how.capacity == 0 ? job.keys.count : how.capacity;
    if (capacity > 0 && job.keys.data == nullptr)
      throw invalid_argument{"mpi::sort: keys.data is null"};
    if (job.values && (job.values->count != job.keys.count ||
                       (job.values->value_bytes != 4 && job.values->value_bytes != 8) ||
                       (job.keys.count > 0 && job.values->data == nullptr)))
      throw invalid_argument{"mpi::sort: values must be as many as the keys, of 4 or 8 bytes"};
    // A round's and a block's bytes are MPI int counts.
    if (how.round_bytes == 0 || how.block_bytes == 0 || how.round_bytes > INT_MAX ||
        how.block_bytes > INT_MAX)
      throw invalid_argument{"mpi::sort: round_bytes and block_bytes must be from 1 to 2^31 - 1"};
    if (how.timeout_seconds < 0)
      throw invalid_argument{"mpi::sort: timeout_seconds must not be negative"};
    if (capacity < job.keys.count)
      throw invalid_argument{"mpi::sort: capacity " + std::to_string(capacity) +
                             " is below the shard's " + std::to_string(job.keys.count) +
                             " elements"};
    if (capacity < share)
      throw invalid_argument{"mpi::sort: rank " + std::to_string(g.rank) + "'s buffers hold " +
                             std::to_string(capacity) + " elements, short of its balanced " +
                             "share of " + std::to_string(share) + " (mpi_options::capacity)"};
  });
}

/// The exchange's block, in elements: block_bytes, or less where the shard is small (the
/// blocks of its own then take at most a quarter of it).
std::uint64_t block_of(const gpusort::mpi::mpi_options& how, std::uint64_t capacity,
                       std::uint64_t element_bytes, std::uint64_t extra_blocks)
{
  const std::uint64_t most = std::max<std::uint64_t>(1, how.block_bytes / element_bytes);
  const std::uint64_t small = (capacity + 4 * extra_blocks - 1) / (4 * extra_blocks);
  return std::clamp<std::uint64_t>(small, 1, most);
}

/// Whether the received runs go to the engine's sort rather than the CPU's merge.
bool merge_on_engine(gpusort::mpi::merge_method m, const engine& eng)
{
  if (m != gpusort::mpi::merge_method::automatic) return m == gpusort::mpi::merge_method::engine;
  const std::vector<std::string> devices = eng.devices();
  return std::any_of(devices.begin(), devices.end(),
                     [](const std::string& d) { return d.rfind("cuda", 0) == 0; });
}

}  // namespace

}  // namespace gpusort::detail::mpi

namespace gpusort::mpi {

std::uint64_t balanced_share(MPI_Comm comm, std::uint64_t count)
{
  using namespace gpusort::detail::mpi;
  const group g = group_of(comm, 0);
  const std::vector<std::uint64_t> counts = counts_of(g, count);
  return share_of(std::accumulate(counts.begin(), counts.end(), std::uint64_t{0}), g.ranks,
                  g.rank);
}

mpi_report sort(MPI_Comm comm, engine& eng, const sort_job& job, const sort_options& options,
                const mpi_options& how)
{
  using namespace gpusort::detail::mpi;
  using gpusort::detail::key_map;
  const auto start = std::chrono::steady_clock::now();
  const group g = group_of(comm, how.timeout_seconds);
  mpi_report report;
  report.elements = job.keys.count;

  // Every rank's count, and the count each is to end with.
  const std::vector<std::uint64_t> counts = counts_of(g, report.elements);
  report.total = std::accumulate(counts.begin(), counts.end(), std::uint64_t{0});
  std::vector<std::uint64_t> targets = counts;
  if (how.balanced)
    for (int r = 0; r < g.ranks; ++r)
      targets[static_cast<std::size_t>(r)] = share_of(report.total, g.ranks, r);
  report.elements_after = targets[static_cast<std::size_t>(g.rank)];

  // The job, checked on every rank and agreed: one refusal fails them all alike.
  check_job(g, job, how, report.elements_after);
  const signature mine{static_cast<std::int32_t>(job.keys.type),
                       static_cast<std::int32_t>(job.values ? job.values->value_bytes : 0),
                       static_cast<std::int32_t>(options.direction),
                       static_cast<std::int32_t>(options.floats), options.stable ? 1 : 0,
                       how.balanced ? 1 : 0};
  std::vector<signature> all(static_cast<std::size_t>(g.ranks));
  allgather(g, &mine, all.data(), sizeof mine, MPI_BYTE,
            "MPI_Allgather (the jobs' types and options)");
  agree(g, "checking the ranks agree", [&] {
    if (std::any_of(all.begin(), all.end(), [&](const signature& s) { return !(s == mine); }))
      throw invalid_argument{"mpi::sort: every rank must give the same key type, value width "
                             "and order options"};
  });

  // 1. Each rank sorts its shard on its host's engine.
  agree(g, "the local sort", [&] { report.local = eng.sort(job, options); });
  if (g.ranks == 1) {  // the shard is the array
    report.seconds = since(start);
    return report;
  }

  const std::size_t key_bytes = size_of(job.keys.type);
  const std::size_t value_bytes = job.values ? job.values->value_bytes : 0;
  detail::visit_layout(key_bytes, value_bytes, [&]<typename K, typename V>() {
    // 2. The exact splitters: where this rank's sorted shard is cut for every rank.
    const key_map<K> map = detail::ordered_map<K>(
        {.type = job.keys.type, .dir = options.direction, .floats = options.floats,
         .canonical = true},
        true);
    auto t = std::chrono::steady_clock::now();
    const std::span<const K> shard{static_cast<const K*>(job.keys.data), job.keys.count};
    const std::vector<std::uint64_t> cuts = select_cuts<K>(g, shard, map, targets);
    std::vector<std::uint64_t> send(static_cast<std::size_t>(g.ranks));
    std::vector<std::uint64_t> recv(send.size());
    for (std::size_t r = 0; r < send.size(); ++r) send[r] = cuts[r + 1] - cuts[r];
    alltoall(g, send.data(), recv.data(), 1, MPI_UINT64_T, "MPI_Alltoall (the exchange's counts)");
    report.select_seconds = since(t);
    // What the selection promises, checked before a byte moves: this rank receives exactly
    // its target.
    agree(g, "the splitters", [&] {
      const std::uint64_t receiving = std::accumulate(recv.begin(), recv.end(), std::uint64_t{0});
      if (receiving != report.elements_after)
        throw logic_error{"mpi::sort: rank " + std::to_string(g.rank) + " would receive " +
                          std::to_string(receiving) + " elements for its " +
                          std::to_string(report.elements_after)};
    });
    report.sent = report.elements - send[static_cast<std::size_t>(g.rank)];

    // 3. The exchange into blocks of the shard's buffers, and 4. the merge of the received
    // runs back into the shard.
    const std::uint64_t capacity = how.capacity == 0 ? job.keys.count : how.capacity;
    // The exchange needs 2 * ranks + 4 blocks of its own to always progress, the merge's
    // threads 2 * ranks + 1 each beyond one (design.md section 6a counts them).
    const auto ranks = static_cast<std::uint64_t>(g.ranks);
    const std::uint64_t threads = merge_threads(how.merge_threads, ranks_on_this_host(g));
    const std::uint64_t extra_blocks =
        2 * ranks + 4 + (threads > 1 ? threads * (2 * ranks + 1) : 0);
    std::optional<block_space> space;
    agree(g, "making the exchange's blocks", [&] {
      space.emplace(static_cast<char*>(const_cast<void*>(job.keys.data)),
                    job.values ? static_cast<char*>(const_cast<void*>(job.values->data))
                               : nullptr,
                    capacity,
                    static_cast<std::uint32_t>(sizeof(K)),
                    static_cast<std::uint32_t>(value_bytes),
                    block_of(how, capacity, sizeof(K) + value_bytes, extra_blocks),
                    extra_blocks);
    });
    t = std::chrono::steady_clock::now();
    exchange_counts moved;
    std::vector<run> runs = exchange(g, *space, cuts, recv, how.round_bytes, moved);
    report.exchange_rounds = moved.rounds;
    report.extra_bytes = space->extra_bytes();
    report.exchange_seconds = since(t);
    t = std::chrono::steady_clock::now();
    report.merged_by_engine = merge_on_engine(how.merge, eng);
    // One agreement whichever way each rank orders its runs (ranks may differ: GPU hosts and
    // CPU hosts in one job).
    agree(g, "ordering the received runs", [&] {
      if (!report.merged_by_engine) {
        merge_runs<K, V>(*space, runs, report.elements_after, map, threads);
        return;
      }
      // The runs end to end in rank order (a merge of keys that all compare equal), then the
      // engine's sort in place: with `stable`, equal keys keep (rank, position).
      merge_runs<K, V>(*space, runs, report.elements_after, key_map<K>{.nan_code = 0},
                       threads);
      sort_job received = job;
      received.keys.count = report.elements_after;
      if (received.values) received.values->count = report.elements_after;
      report.final_sort = eng.sort(received, options);
    });
    report.merge_seconds = since(t);
  });
  report.seconds = since(start);
  return report;
}

mpi_report argsort(MPI_Comm comm, engine& eng, const key_array& keys, std::int64_t* indices,
                   const sort_options& options, const mpi_options& how)
{
  using namespace gpusort::detail::mpi;
  const group g = group_of(comm, how.timeout_seconds);
  const std::uint64_t n = keys.count;
  const std::uint64_t capacity = std::max(n, how.capacity);
  std::vector<char> scratch;
  agree(g, "copying the keys", [&] {
    if (n > 0 && (keys.data == nullptr || indices == nullptr))
      throw invalid_argument{"mpi::argsort: keys.data and indices must not be null"};
    scratch.resize(capacity * size_of(keys.type));
    if (n > 0) std::memcpy(scratch.data(), keys.data, n * size_of(keys.type));
  });
  std::uint64_t before = 0;
  exscan_sum(g, &n, &before, 1, "MPI_Exscan (the shards' offsets)");
  for (std::uint64_t i = 0; i < n; ++i) indices[i] = static_cast<std::int64_t>(before + i);
  sort_options stable = options;
  stable.stable = true;
  mpi_options with_capacity = how;
  with_capacity.capacity = capacity;
  const sort_job job{.keys = {scratch.data(), n, keys.type},
                     .values = value_array{indices, n, 8}};
  mpi_report report = sort(comm, eng, job, stable, with_capacity);
  report.extra_bytes += scratch.size();
  return report;
}

}  // namespace gpusort::mpi
