// The in-place move of records by a permutation alone (pipeline/rows/move_records.hpp's
// permute_records), as sort_records runs it when the host memory limit leaves no room for a
// second copy: rows_bench reaches it only under such a limit, and then behind a whole sort.
// Records of --record-bytes each, every byte made from its row, moved by a permutation of a
// given shape (uniform random; a reversal, whose pairs no breakpoint cuts; a random pairing,
// which leaves nearly every cycle to the second pass; one long shift), then every byte checked.
// Usage: permute_bench --help.
#include "bench/bench_cli.hpp"
#include "pipeline/host_memory.hpp"
#include "pipeline/rows/move_records.hpp"

#include <gpusort/units.hpp>

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using gpusort::bench::usage_error;

constexpr const char* usage =
    "usage: permute_bench [--records-bytes 2Gi] [--record-bytes 100] [--perm random]\n"
    "                     [--saved-bytes 64Mi] [--index-bytes 4] [--gather no] [--repeat 1]\n"
    "\n"
    "Moves --records-bytes of records (--record-bytes each) in place by a permutation with\n"
    "permute_records, keeping --saved-bytes of breakpoint records (sort_records keeps 64Mi),\n"
    "and prints ns per row, the best of --repeat runs; each run is checked byte for byte.\n"
    "--perm: random (uniform), reverse, pairs (a random pairing: N/2 two-cycles), shift\n"
    "(records[i] = records[i + 1]: one cycle), or a comma-separated list of them.\n"
    "--index-bytes: 4 (uint32, what sort_records takes below 2^32 rows) or 8.\n"
    "--gather yes: also gather_records into a second copy (what sort_records does where the\n"
    "limit has room for one), the rate a move bound by the memory's throughput gets.\n"
    "exit codes: 0 done, 1 a failure (one line says which), 64 a bad command line\n";

struct options {
  std::uint64_t records_bytes{std::uint64_t{2} << 30};
  std::uint32_t record_bytes{100};
  std::vector<std::string> perms{"random"};
  std::uint64_t saved_bytes{std::uint64_t{64} << 20};
  std::uint32_t index_bytes{4};
  bool gather{false};
  int repeat{1};
  gpusort::bench::results_options results;
};

void set_option(options& o, std::string_view flag, const std::string& v)
{
  if (flag == "--records-bytes") {
    o.records_bytes = gpusort::bench::parse_one_count(flag, v);
  } else if (flag == "--record-bytes") {
    o.record_bytes = static_cast<std::uint32_t>(gpusort::bench::parse_one_count(flag, v, 1 << 20));
    if (o.record_bytes < 4) throw usage_error{"--record-bytes: at least 4"};
  } else if (flag == "--perm") {
    o.perms = gpusort::bench::split_list(v);
    for (const auto& p : o.perms)
      if (p != "random" && p != "reverse" && p != "pairs" && p != "shift")
        throw usage_error{"--perm: bad '" + p + "'"};
  } else if (flag == "--saved-bytes") {
    o.saved_bytes = gpusort::bench::parse_one_count(flag, v);
  } else if (flag == "--index-bytes") {
    o.index_bytes = static_cast<std::uint32_t>(gpusort::bench::parse_one_count(flag, v, 8));
    if (o.index_bytes != 4 && o.index_bytes != 8) throw usage_error{"--index-bytes: 4 or 8"};
  } else if (flag == "--gather") {
    if (v != "yes" && v != "no") throw usage_error{"--gather takes yes or no"};
    o.gather = v == "yes";
  } else if (flag == "--repeat") {
    o.repeat = static_cast<int>(gpusort::bench::parse_one_count(flag, v, 100));
  }
}

/// The bytes of row `id`'s record: its index in the first (up to) 8 bytes, then words of a hash
/// of it, so that a record moved to the wrong row or torn is caught anywhere in it.
void fill_record(unsigned char* p, std::uint64_t id, std::uint32_t r) noexcept
{
  std::uint64_t word = id;
  for (std::uint32_t k = 0; k < r; k += 8) {
    std::memcpy(p + k, &word, std::min<std::uint32_t>(8, r - k));
    word = (word ^ word >> 29) * 0xbf58476d1ce4e5b9ull + 0x9e3779b97f4a7c15ull;
  }
}

void fill_records(unsigned char* records, std::uint64_t n, std::uint32_t r)
{
  const auto count = static_cast<std::int64_t>(n);
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < count; ++i)
    fill_record(records + static_cast<std::uint64_t>(i) * r, static_cast<std::uint64_t>(i), r);
}

/// The permutation in memory like sort_records' (host_buffer: huge pages where the kernel has
/// them), whose random reads a std::vector's small pages would slow with misses of the TLB.
template <typename Index>
gpusort::detail::host_buffer make_perm(const std::string& shape, std::uint64_t n)
{
  gpusort::detail::host_buffer buffer{n * sizeof(Index)};
  const std::span<Index> perm{buffer.as<Index>(), n};
  std::iota(perm.begin(), perm.end(), Index{0});
  std::mt19937_64 rng{42};
  if (shape == "random") {
    std::shuffle(perm.begin(), perm.end(), rng);
  } else if (shape == "reverse") {
    std::reverse(perm.begin(), perm.end());
  } else if (shape == "pairs") {
    std::vector<Index> order(perm.begin(), perm.end());
    std::shuffle(order.begin(), order.end(), rng);
    for (std::uint64_t k = 0; k + 1 < n; k += 2) {
      perm[order[k]] = order[k + 1];
      perm[order[k + 1]] = order[k];
    }
  } else {
    for (std::uint64_t i = 0; i < n; ++i) perm[i] = static_cast<Index>((i + 1) % n);
  }
  return buffer;
}

/// The first row whose record is not the one the permutation brings there, or n.
template <typename Index>
std::uint64_t first_wrong(const unsigned char* records, std::uint64_t n, std::uint32_t r,
                          const Index* perm)
{
  std::uint64_t wrong = n;
  const auto count = static_cast<std::int64_t>(n);
#pragma omp parallel
  {
    std::vector<unsigned char> expected(r);
#pragma omp for schedule(static) reduction(min : wrong)
    for (std::int64_t i = 0; i < count; ++i) {
      const auto u = static_cast<std::uint64_t>(i);
      fill_record(expected.data(), perm[u], r);
      if (std::memcmp(expected.data(), records + u * r, r) != 0) wrong = std::min(wrong, u);
    }
  }
  return wrong;
}

void print_rate(const std::string& what, double seconds, std::uint64_t n, std::uint32_t r)
{
  std::printf("  %-16s %8.3f s  %7.1f ns/row  %6.2f GB/s of records\n", what.c_str(), seconds,
              seconds * 1e9 / static_cast<double>(n),
              static_cast<double>(n * r) / seconds / 1e9);
}

template <typename Index>
void run_shape(const options& o, const std::string& shape, unsigned char* records,
               std::uint64_t n)
{
  const std::uint32_t r = o.record_bytes;
  const gpusort::detail::host_buffer perm_buffer = make_perm<Index>(shape, n);
  const Index* perm = perm_buffer.as<Index>();
  const auto timed = [&](const std::string& what, auto&& move, const unsigned char* moved) {
    double best = 0;
    for (int k = 0; k < o.repeat; ++k) {
      fill_records(records, n, r);
      const auto start = std::chrono::steady_clock::now();
      move();
      const double s =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const std::uint64_t wrong = first_wrong(moved, n, r, perm);
      if (wrong != n)
        throw std::runtime_error{what + ": row " + std::to_string(wrong) +
                                 " holds a wrong record"};
      if (k == 0 || s < best) best = s;
    }
    print_rate(what, best, n, r);
  };
  timed(shape, [&] { gpusort::detail::permute_records(records, n, r, perm, o.saved_bytes); },
        records);
  if (o.gather) {
    gpusort::detail::host_buffer out{n * r};
    out.populate();  // as the first gather into a fresh buffer would not: its faults are not
                     // the move's
    timed(shape + " gather",
          [&] { gpusort::detail::gather_records(records, n, r, perm, out.as<unsigned char>()); },
          out.as<unsigned char>());
  }
}

int run(const options& o)
{
  const std::uint32_t r = o.record_bytes;
  const std::uint64_t n = o.records_bytes / r;
  if (o.index_bytes == 4 && n > UINT32_MAX) throw usage_error{"--index-bytes 4: < 2^32 rows"};
  std::printf("permute_bench: %s of %u-byte records (%llu rows), %s saved, uint%u perm, "
              "%d threads\n",
              gpusort::format_bytes(n * r).c_str(), r, static_cast<unsigned long long>(n),
              gpusort::format_bytes(o.saved_bytes).c_str(), 8 * o.index_bytes,
              omp_get_max_threads());
  gpusort::detail::host_buffer records{n * r};
  for (const std::string& shape : o.perms) {
    if (o.index_bytes == 4) run_shape<std::uint32_t>(o, shape, records.as<unsigned char>(), n);
    else run_shape<std::uint64_t>(o, shape, records.as<unsigned char>(), n);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv)
{
  return gpusort::bench::run_main<options>(
      "permute_bench", usage, argc, argv,
      {"--records-bytes", "--record-bytes", "--perm", "--saved-bytes", "--index-bytes",
       "--gather", "--repeat"},
      set_option, run);
}
