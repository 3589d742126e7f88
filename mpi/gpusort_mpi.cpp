// gpusort-mpi: the distributed sort as a program (issue 41).
//
//   mpirun -np R gpusort-mpi sort 'in.%r.bin' --dtype u64 --out 'out.%r.bin'
//
// Each rank reads its shard (a raw little-endian array; %r in a path stands for the rank),
// the ranks sort them together with gpusort::mpi::sort on each host's engine (its GPUs, or the
// CPU), and each rank writes its part: as many elements as it read, every key at most every key
// of the next rank. An output replaces its file only once whole (a temporary, then a rename).
// Rank 0 prints one summary line (--json: a JSON object). A rank's error fails every rank with
// one message and exit status; no rank waits on one that stopped.
#include "mpi/phases.hpp"

#include <gpusort/config.hpp>
#include <gpusort/error.hpp>
#include <gpusort/mpi.hpp>
#include <gpusort/units.hpp>

#include <mpi.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace {

constexpr const char* usage =
    "usage: mpirun -np R gpusort-mpi sort IN --dtype T [--values V --value-bytes 4|8]\n"
    "                  [--out OUT [--values-out VOUT]] [--stable] [--descending]\n"
    "                  [--numpy-floats] [--config FILE] [--round-bytes SIZE] [--json]\n"
    "\n"
    "Sorts the array whose shard on rank r is the file IN with %r replaced by r (a raw\n"
    "little-endian array of T: u32 i32 u64 i64 f32 f64), in place or into OUT; values travel\n"
    "with their keys. Afterwards every key on rank r is at most every key on rank r + 1 and\n"
    "each rank holds as many elements as it read.\n";

struct arguments {
  std::string in, values, out, values_out, config;
  gpusort::dtype type{gpusort::dtype::u64};
  bool has_type{};
  std::uint32_t value_bytes{8};
  gpusort::sort_options options;
  gpusort::mpi::mpi_options how;
  bool json{};
};

/// `pattern` with every %r replaced by the rank.
std::string for_rank(const std::string& pattern, int rank)
{
  std::string out;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '%' && i + 1 < pattern.size() && pattern[i + 1] == 'r') {
      out += std::to_string(rank);
      ++i;
    } else {
      out += pattern[i];
    }
  }
  return out;
}

arguments parse(int argc, char** argv)
{
  using gpusort::invalid_argument;
  if (argc < 3 || std::string{argv[1]} != "sort") throw invalid_argument{usage};
  arguments a;
  a.in = argv[2];
  for (int i = 3; i < argc; ++i) {
    const std::string opt = argv[i];
    const auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw invalid_argument{opt + " needs a value"};
      return argv[++i];
    };
    if (opt == "--dtype") {
      const std::string t = next();
      const std::optional<gpusort::dtype> d = gpusort::parse_dtype(t);
      if (!d) throw invalid_argument{"--dtype: unknown type '" + t + "'"};
      a.type = *d;
      a.has_type = true;
    } else if (opt == "--values") {
      a.values = next();
    } else if (opt == "--value-bytes") {
      const std::string v = next();
      if (v != "4" && v != "8") throw invalid_argument{"--value-bytes takes 4 or 8"};
      a.value_bytes = v == "4" ? 4 : 8;
    } else if (opt == "--out") {
      a.out = next();
    } else if (opt == "--values-out") {
      a.values_out = next();
    } else if (opt == "--stable") {
      a.options.stable = true;
    } else if (opt == "--descending") {
      a.options.direction = gpusort::order::descending;
    } else if (opt == "--numpy-floats") {
      a.options.floats = gpusort::float_order::numpy;
    } else if (opt == "--config") {
      a.config = next();
    } else if (opt == "--round-bytes") {
      const std::string v = next();
      const std::optional<std::uint64_t> b = gpusort::parse_count(v);
      if (!b || *b == 0) throw invalid_argument{"--round-bytes: not a size: '" + v + "'"};
      a.how.round_bytes = *b;
    } else if (opt == "--json") {
      a.json = true;
    } else {
      throw invalid_argument{"unknown option " + opt + "\n" + usage};
    }
  }
  if (!a.has_type) throw invalid_argument{"--dtype is required"};
  if (!a.values_out.empty() && a.out.empty())
    throw invalid_argument{"--values-out goes with --out"};
  if (!a.values_out.empty() && a.values.empty())
    throw invalid_argument{"--values-out needs --values"};
  return a;
}

std::vector<char> read_file(const std::string& path, std::uint64_t element_bytes)
{
  std::ifstream in{path, std::ios::binary | std::ios::ate};
  if (!in) throw gpusort::io_error{"cannot open " + path};
  const auto size = static_cast<std::uint64_t>(in.tellg());
  if (size % element_bytes != 0)
    throw gpusort::invalid_argument{path + ": " + std::to_string(size) +
                                    " bytes is not a whole number of " +
                                    std::to_string(element_bytes) + "-byte elements"};
  std::vector<char> data(size);
  in.seekg(0);
  if (size > 0 && !in.read(data.data(), static_cast<std::streamsize>(size)))
    throw gpusort::io_error{"cannot read " + path};
  return data;
}

/// Writes `data` to `path` through a temporary beside it, renamed into place once whole.
void write_file(const std::string& path, const std::vector<char>& data)
{
  const std::string temporary = path + ".gpusort-mpi-" + std::to_string(::getpid()) + ".tmp";
  {
    std::ofstream out{temporary, std::ios::binary | std::ios::trunc};
    if (!out) throw gpusort::io_error{"cannot write " + temporary};
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    out.flush();
    if (!out) {
      std::filesystem::remove(temporary);
      throw gpusort::io_error{"cannot write " + temporary};
    }
  }
  std::error_code ec;
  std::filesystem::rename(temporary, path, ec);
  if (ec) {
    std::filesystem::remove(temporary);
    throw gpusort::io_error{"cannot rename " + temporary + " to " + path + ": " + ec.message()};
  }
}

int exit_code(const std::exception& e)
{
  if (dynamic_cast<const gpusort::invalid_argument*>(&e) != nullptr) return 64;
  if (dynamic_cast<const gpusort::io_error*>(&e) != nullptr) return 74;
  if (dynamic_cast<const gpusort::config_error*>(&e) != nullptr) return 78;
  return 70;
}

int run(int argc, char** argv)
{
  using namespace gpusort;
  const detail::mpi::place me = detail::mpi::place_of(MPI_COMM_WORLD);
  arguments a;
  std::vector<char> keys, values;
  std::optional<engine> eng;
  detail::mpi::agree(MPI_COMM_WORLD, "reading the shards", [&] {
    a = parse(argc, argv);
    config cfg = a.config.empty() ? config{} : load_config(a.config);
    eng.emplace(std::move(cfg));
    keys = read_file(for_rank(a.in, me.rank), size_of(a.type));
    if (!a.values.empty()) {
      values = read_file(for_rank(a.values, me.rank), a.value_bytes);
      if (values.size() / a.value_bytes != keys.size() / size_of(a.type))
        throw invalid_argument{for_rank(a.values, me.rank) + " holds another count of values"};
    }
  });
  const std::uint64_t n = keys.size() / size_of(a.type);
  sort_job job{.keys = {keys.data(), n, a.type}};
  if (!a.values.empty()) job.values = value_array{values.data(), n, a.value_bytes};
  const mpi::mpi_report r = mpi::sort(MPI_COMM_WORLD, *eng, job, a.options, a.how);
  detail::mpi::agree(MPI_COMM_WORLD, "writing the parts", [&] {
    write_file(for_rank(a.out.empty() ? a.in : a.out, me.rank), keys);
    if (!a.values.empty())
      write_file(for_rank(a.values_out.empty() ? a.values : a.values_out, me.rank), values);
  });
  double slowest = 0;
  MPI_Reduce(&r.seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  std::uint64_t sent = 0;
  MPI_Reduce(&r.sent, &sent, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
  if (me.rank == 0) {
    const double bytes =
        static_cast<double>(r.total) * static_cast<double>(size_of(a.type) +
                                                           (a.values.empty() ? 0 : a.value_bytes));
    if (a.json)
      std::printf("{\"ranks\":%d,\"elements\":%llu,\"seconds\":%.6f,\"sent\":%llu,"
                  "\"rate\":%.1f}\n",
                  me.ranks, static_cast<unsigned long long>(r.total), slowest,
                  static_cast<unsigned long long>(sent), slowest > 0 ? bytes / slowest : 0.0);
    else
      std::printf("sorted %llu elements on %d ranks in %.3f s (%s/s), %llu moved between ranks\n",
                  static_cast<unsigned long long>(r.total), me.ranks, slowest,
                  format_bytes(static_cast<std::uint64_t>(slowest > 0 ? bytes / slowest : 0))
                      .c_str(),
                  static_cast<unsigned long long>(sent));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int code = 0;
  try {
    code = run(argc, argv);
  } catch (const std::exception& e) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    // Every rank got the same error: rank 0 says it once.
    if (rank == 0) std::cerr << "gpusort-mpi: " << e.what() << "\n";
    code = exit_code(e);
  }
  MPI_Finalize();
  return code;
}
