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

#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <memory>

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
    "                  [--out OUT [--values-out VOUT]] [--argsort --out OUT] [--stable]\n"
    "                  [--descending] [--numpy-floats] [--balanced] [--config FILE]\n"
    "                  [--round-bytes SIZE] [--block-bytes SIZE] [--timeout SECONDS]\n"
    "                  [--merge auto|cpu|engine] [--json]\n"
    "\n"
    "Sorts the array whose shard on rank r is the file IN with %r replaced by r (a raw\n"
    "little-endian array of T: u32 i32 u64 i64 f32 f64), in place or into OUT; values travel\n"
    "with their keys. Afterwards every key on rank r is at most every key on rank r + 1 and\n"
    "each rank holds as many elements as it read (--balanced: an equal share). --argsort\n"
    "writes to OUT, instead of keys, each element's int64 position in the whole input (the\n"
    "shards in rank order). A wait for the other ranks longer than --timeout (900 s; 0: none)\n"
    "ends the job on every rank. --merge: how a rank orders the runs it received: the\n"
    "engine's sort (auto where it has a GPU) or a merge on the CPU.\n";

struct arguments {
  std::string in, values, out, values_out, config;
  gpusort::dtype type{gpusort::dtype::u64};
  bool has_type{};
  std::uint32_t value_bytes{8};
  gpusort::sort_options options;
  gpusort::mpi::mpi_options how;
  bool json{}, argsort{};
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
    } else if (opt == "--block-bytes") {
      const std::string v = next();
      const std::optional<std::uint64_t> b = gpusort::parse_count(v);
      if (!b || *b == 0) throw invalid_argument{"--block-bytes: not a size: '" + v + "'"};
      a.how.block_bytes = *b;
    } else if (opt == "--timeout") {
      const std::string v = next();
      char* end = nullptr;
      const double t = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(t >= 0))
        throw invalid_argument{"--timeout: not a number of seconds: '" + v + "'"};
      a.how.timeout_seconds = t;
    } else if (opt == "--merge") {
      const std::string v = next();
      if (v == "auto")
        a.how.merge = gpusort::mpi::merge_method::automatic;
      else if (v == "cpu")
        a.how.merge = gpusort::mpi::merge_method::cpu;
      else if (v == "engine")
        a.how.merge = gpusort::mpi::merge_method::engine;
      else
        throw invalid_argument{"--merge takes auto, cpu or engine"};
    } else if (opt == "--balanced") {
      a.how.balanced = true;
    } else if (opt == "--argsort") {
      a.argsort = true;
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
  if (a.argsort && (a.out.empty() || !a.values.empty()))
    throw invalid_argument{"--argsort writes indices to --out, and takes no --values"};
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

/// An output written beside its file under a temporary name, put in place by commit() once
/// every rank has written all of its own (so that a failure anywhere leaves every file as it
/// was), removed otherwise.
class pending_output {
 public:
  pending_output(std::string path, const char* data, std::uint64_t bytes)
      : path_{std::move(path)},
        temporary_{path_ + ".gpusort-mpi-" + std::to_string(::getpid()) + ".tmp"}
  {
    std::ofstream out{temporary_, std::ios::binary | std::ios::trunc};
    if (!out) throw gpusort::io_error{"cannot write " + temporary_};
    out.write(data, static_cast<std::streamsize>(bytes));
    out.flush();
    if (!out) {
      std::filesystem::remove(temporary_);
      throw gpusort::io_error{"cannot write " + temporary_};
    }
  }
  ~pending_output()
  {
    std::error_code ec;
    if (!committed_) std::filesystem::remove(temporary_, ec);
  }
  pending_output(const pending_output&) = delete;
  pending_output& operator=(const pending_output&) = delete;

  void commit()
  {
    std::error_code ec;
    std::filesystem::rename(temporary_, path_, ec);
    if (ec)
      throw gpusort::io_error{"cannot rename " + temporary_ + " to " + path_ + ": " +
                              ec.message()};
    committed_ = true;
  }

 private:
  std::string path_, temporary_;
  bool committed_{};
};

/// A test's fault, from GPUSORT_MPI_FAULT=kill:R or hang:R: rank R kills itself (SIGKILL) or
/// stops answering once the shards are read, as a crashed or stuck host would, so that the
/// tests see every other rank end with one error and no file changed.
void injected_fault(int rank)
{
  const char* spec = std::getenv("GPUSORT_MPI_FAULT");
  if (spec == nullptr) return;
  const std::string s{spec};
  const auto colon = s.find(':');
  if (colon == std::string::npos || std::to_string(rank) != s.substr(colon + 1)) return;
  if (s.substr(0, colon) == "kill") std::raise(SIGKILL);
  if (s.substr(0, colon) == "hang")
    for (;;) ::pause();
}

int exit_code(const std::exception& e)
{
  if (dynamic_cast<const gpusort::invalid_argument*>(&e) != nullptr) return 64;
  if (dynamic_cast<const gpusort::io_error*>(&e) != nullptr) return 74;
  if (dynamic_cast<const gpusort::config_error*>(&e) != nullptr) return 78;
  return 70;
}

int run(int argc, char** argv, double& timeout)
{
  using namespace gpusort;
  const detail::mpi::group world = detail::mpi::group_of(MPI_COMM_WORLD, 0);
  const int rank = world.rank;
  arguments a;
  std::vector<char> keys, values;
  std::optional<engine> eng;
  detail::mpi::agree(world, "reading the shards", [&] {
    a = parse(argc, argv);
    timeout = a.how.timeout_seconds;
    config cfg = a.config.empty() ? config{} : load_config(a.config);
    eng.emplace(std::move(cfg));
    keys = read_file(for_rank(a.in, rank), size_of(a.type));
    if (!a.values.empty()) {
      values = read_file(for_rank(a.values, rank), a.value_bytes);
      if (values.size() / a.value_bytes != keys.size() / size_of(a.type))
        throw invalid_argument{for_rank(a.values, rank) + " holds another count of values"};
    }
  });
  injected_fault(rank);
  const std::uint64_t key_bytes = size_of(a.type);
  const std::uint64_t n = keys.size() / key_bytes;
  const std::uint64_t after = a.how.balanced ? mpi::balanced_share(MPI_COMM_WORLD, n) : n;
  a.how.capacity = std::max(n, after);
  mpi::mpi_report r;
  std::vector<char> indices;
  if (a.argsort) {
    indices.resize(a.how.capacity * sizeof(std::int64_t));
    r = mpi::argsort(MPI_COMM_WORLD, *eng, {keys.data(), n, a.type},
                     reinterpret_cast<std::int64_t*>(indices.data()), a.options, a.how);
  } else {
    keys.resize(a.how.capacity * key_bytes);
    values.resize(a.values.empty() ? 0 : a.how.capacity * a.value_bytes);
    sort_job job{.keys = {keys.data(), n, a.type}};
    if (!a.values.empty()) job.values = value_array{values.data(), n, a.value_bytes};
    r = mpi::sort(MPI_COMM_WORLD, *eng, job, a.options, a.how);
  }
  const detail::mpi::group timed = detail::mpi::group_of(MPI_COMM_WORLD, timeout);
  std::vector<std::unique_ptr<pending_output>> outputs;
  detail::mpi::agree(timed, "writing the parts", [&] {
    const std::string out = for_rank(a.out.empty() ? a.in : a.out, rank);
    if (a.argsort) {
      outputs.push_back(std::make_unique<pending_output>(out, indices.data(), after * 8));
      return;
    }
    outputs.push_back(std::make_unique<pending_output>(out, keys.data(), after * key_bytes));
    if (!a.values.empty())
      outputs.push_back(std::make_unique<pending_output>(
          for_rank(a.values_out.empty() ? a.values : a.values_out, rank), values.data(),
          after * a.value_bytes));
  });
  detail::mpi::agree(timed, "renaming the parts", [&] {
    for (auto& o : outputs) o->commit();
  });
  double slowest = 0;
  detail::mpi::allreduce(timed, &r.seconds, &slowest, 1, MPI_DOUBLE, MPI_MAX,
                         "MPI_Allreduce (the time)");
  std::uint64_t sent = 0;
  detail::mpi::allreduce(timed, &r.sent, &sent, 1, MPI_UINT64_T, MPI_SUM,
                         "MPI_Allreduce (the elements sent)");
  std::uint64_t extra = 0;
  detail::mpi::allreduce(timed, &r.extra_bytes, &extra, 1, MPI_UINT64_T, MPI_MAX,
                         "MPI_Allreduce (the memory)");
  rusage used{};
  ::getrusage(RUSAGE_SELF, &used);
  const std::uint64_t rss = static_cast<std::uint64_t>(used.ru_maxrss) * 1024;
  std::uint64_t max_rss = 0;
  detail::mpi::allreduce(timed, &rss, &max_rss, 1, MPI_UINT64_T, MPI_MAX,
                         "MPI_Allreduce (the peak memory)");
  if (rank == 0) {
    const double bytes =
        static_cast<double>(r.total) * static_cast<double>(key_bytes +
                                                           (a.values.empty() ? 0 : a.value_bytes));
    const double rate = slowest > 0 ? bytes / slowest : 0.0;
    if (a.json)
      std::printf("{\"ranks\":%d,\"elements\":%llu,\"seconds\":%.6f,\"sent\":%llu,"
                  "\"rate\":%.1f,\"extra_bytes\":%llu,\"max_rss\":%llu}\n",
                  world.ranks, static_cast<unsigned long long>(r.total), slowest,
                  static_cast<unsigned long long>(sent), rate,
                  static_cast<unsigned long long>(extra),
                  static_cast<unsigned long long>(max_rss));
    else
      std::printf("sorted %llu elements on %d ranks in %.3f s (%s/s), %llu moved between ranks, "
                  "at most %s beside a shard\n",
                  static_cast<unsigned long long>(r.total), world.ranks, slowest,
                  format_bytes(static_cast<std::uint64_t>(rate)).c_str(),
                  static_cast<unsigned long long>(sent),
                  format_bytes(extra).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv)
{
  MPI_Init(&argc, &argv);
  int code = 0;
  double timeout = 0;
  try {
    code = run(argc, argv, timeout);
  } catch (const gpusort::mpi::mpi_timeout& e) {
    // The ranks are out of step: no collective can end the job, so the launcher does.
    std::cerr << "gpusort-mpi: " << e.what() << "\n";
    MPI_Abort(MPI_COMM_WORLD, 75);
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
