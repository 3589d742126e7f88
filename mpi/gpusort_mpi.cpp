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
#include "client/args.hpp"
#include "mpi/phases.hpp"

#include <gpusort/config.hpp>
#include <gpusort/error.hpp>
#include <gpusort/mpi.hpp>
#include <gpusort/units.hpp>

#include <mpi.h>

#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

using gpusort::cli::cli_error;
using gpusort::cli::exit_usage;

/// The command's table: the CLI's own parser (client/args.hpp) reads it and prints --help.
const gpusort::cli::command_spec& sort_spec()
{
  static const gpusort::cli::command_spec spec{
      .name = "sort",
      .synopsis = "IN --dtype T [--values V [--value-bytes 4|8]]\n"
                  "                        [--out OUT [--values-out VOUT]] [--argsort --out OUT]\n"
                  "                        [--stable] [--descending] [--numpy-floats]\n"
                  "                        [--balanced] [--config FILE] [--round-bytes SIZE]\n"
                  "                        [--block-bytes SIZE] [--timeout SECONDS]\n"
                  "                        [--merge auto|cpu|engine] [--json]",
      .description =
          "Run under mpirun (mpirun -np R gpusort-mpi sort ...). Sorts the array whose shard on\n"
          "rank r is the file IN with %r replaced by r (a raw little-endian array of T), in place\n"
          "or into OUT; values travel with their keys. Afterwards every key on rank r is at most\n"
          "every key on rank r + 1 and each rank holds as many elements as it read (--balanced:\n"
          "an equal share).\n",
      .options =
          {
              {"dtype", "T", "key type: u32 i32 u64 i64 f32 f64"},
              {"values", "V", "the values' shards (%r for the rank)"},
              {"value-bytes", "4|8", "bytes per value (default 8)"},
              {"out", "OUT", "write each rank's part here (%r for the rank) instead of IN"},
              {"values-out", "VOUT", "the values' parts, with --out"},
              {"argsort", "", "write to OUT each element's int64 position in the whole input\n"
                              "(the shards in rank order) instead of keys"},
              {"stable", "", "equal keys keep their input order (rank, then position)"},
              {"descending", "", "largest first"},
              {"numpy-floats", "", "NumPy's float order (NaNs last, -0.0 == +0.0)"},
              {"balanced", "", "every rank ends with an equal share"},
              {"config", "FILE", "the engine's configuration (YAML)"},
              {"round-bytes", "SIZE", "bytes a rank receives at most in one round"},
              {"block-bytes", "SIZE", "the exchange's and the merge's block"},
              {"timeout", "SECONDS", "longest wait for the other ranks (default 900; 0: none)"},
              {"merge", "auto|cpu|engine", "how a rank orders the runs it received: the engine's\n"
                                           "sort (auto: where it has a GPU) or a CPU merge"},
              {"json", "", "rank 0 prints a JSON object instead of a line"},
              {"help", "", "show this text"},
          },
      .program = "gpusort-mpi",
  };
  return spec;
}

struct arguments {
  std::string in, values, out, values_out, config;
  gpusort::dtype type{gpusort::dtype::u64};
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

/// A size option (`--name SIZE`, at least 1) where given.
std::optional<std::uint64_t> size_option(const gpusort::cli::parsed_args& p, const char* name)
{
  const std::optional<std::string> v = p.get(name);
  if (!v) return std::nullopt;
  const std::optional<std::uint64_t> b = gpusort::parse_count(*v);
  if (!b || *b == 0)
    throw cli_error{exit_usage, "--" + std::string{name} + ": not a size: '" + *v + "'"};
  return b;
}

arguments parse(int argc, char** argv)
{
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args.front() != "sort")
    throw cli_error{exit_usage, gpusort::cli::help_text(sort_spec())};
  const gpusort::cli::parsed_args p =
      gpusort::cli::parse_args({args.begin() + 1, args.end()}, sort_spec());
  if (p.positionals.size() != 1)
    throw cli_error{exit_usage, "gpusort-mpi sort takes one input pattern (IN)"};
  arguments a;
  a.in = p.positionals.front();
  const std::string t = p.require("dtype");
  const std::optional<gpusort::dtype> d = gpusort::parse_dtype(t);
  if (!d) throw cli_error{exit_usage, "--dtype: unknown type '" + t + "'"};
  a.type = *d;
  a.values = p.get("values").value_or("");
  if (const std::optional<std::string> v = p.get("value-bytes")) {
    if (*v != "4" && *v != "8") throw cli_error{exit_usage, "--value-bytes takes 4 or 8"};
    a.value_bytes = *v == "4" ? 4 : 8;
  }
  a.out = p.get("out").value_or("");
  a.values_out = p.get("values-out").value_or("");
  a.config = p.get("config").value_or("");
  if (p.has("stable")) a.options.stable = true;
  if (p.has("descending")) a.options.direction = gpusort::order::descending;
  if (p.has("numpy-floats")) a.options.floats = gpusort::float_order::numpy;
  a.how.round_bytes = size_option(p, "round-bytes").value_or(a.how.round_bytes);
  a.how.block_bytes = size_option(p, "block-bytes").value_or(a.how.block_bytes);
  if (const std::optional<std::string> v = p.get("timeout")) {
    char* end = nullptr;
    const double seconds = std::strtod(v->c_str(), &end);
    if (v->empty() || *end != '\0' || !(seconds >= 0))
      throw cli_error{exit_usage, "--timeout: not a number of seconds: '" + *v + "'"};
    a.how.timeout_seconds = seconds;
  }
  if (const std::optional<std::string> v = p.get("merge")) {
    if (*v == "auto")
      a.how.merge = gpusort::mpi::merge_method::automatic;
    else if (*v == "cpu")
      a.how.merge = gpusort::mpi::merge_method::cpu;
    else if (*v == "engine")
      a.how.merge = gpusort::mpi::merge_method::engine;
    else
      throw cli_error{exit_usage, "--merge takes auto, cpu or engine"};
  }
  a.how.balanced = p.has("balanced");
  a.argsort = p.has("argsort");
  a.json = p.has("json");
  if (!a.values_out.empty() && a.out.empty())
    throw cli_error{exit_usage, "--values-out goes with --out"};
  if (!a.values_out.empty() && a.values.empty())
    throw cli_error{exit_usage, "--values-out needs --values"};
  if (a.argsort && (a.out.empty() || !a.values.empty()))
    throw cli_error{exit_usage, "--argsort writes indices to --out, and takes no --values"};
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
  using namespace gpusort::cli;
  if (const auto* c = dynamic_cast<const cli_error*>(&e)) return c->code;
  if (dynamic_cast<const gpusort::invalid_argument*>(&e) != nullptr) return exit_usage;
  if (dynamic_cast<const gpusort::io_error*>(&e) != nullptr) return exit_io;
  if (dynamic_cast<const gpusort::config_error*>(&e) != nullptr) return exit_config;
  return exit_runtime;
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
  if (gpusort::cli::wants_help(std::vector<std::string>(argv + 1, argv + argc))) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) std::cout << gpusort::cli::help_text(sort_spec());
    MPI_Finalize();
    return 0;
  }
  int code = 0;
  double timeout = 0;
  try {
    code = run(argc, argv, timeout);
  } catch (const gpusort::mpi::mpi_timeout& e) {
    // The ranks are out of step: no collective can end the job, so the launcher does.
    std::cerr << "gpusort-mpi: " << e.what() << "\n";
    MPI_Abort(MPI_COMM_WORLD, gpusort::cli::exit_try_later);
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
