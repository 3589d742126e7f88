// How a benchmark's main reads its command line and ends on an error (issue 25): the whole
// command line is read before anything runs, so --help prints the usage and exits 0 without
// touching CUDA or starting a daemon, and a bad option is refused before minutes of work; any
// error then ends the run with one line on stderr and a nonzero exit code, never an abort
// (an exception escaping main skips the destructors that stop a daemon and remove its folder,
// and loses the results still in stdout's buffer).
#pragma once

#include "bench/results_format.hpp"
#include "core/generate.hpp"

#include <gpusort/units.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <initializer_list>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gpusort::bench {

constexpr int exit_failed = 1;
constexpr int exit_usage = 64;

/// A bad command line: exit code 64, and the line points at --help.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The value of `flag`: a comma-separated list of counts, each at least 1 ("64Mi,512Mi").
inline std::vector<std::uint64_t> parse_counts(std::string_view flag, const std::string& text)
{
  std::vector<std::uint64_t> out;
  std::stringstream ss{text};
  std::string item;
  while (std::getline(ss, item, ',')) {
    const auto c = parse_count(item);
    if (!c || *c == 0)
      throw usage_error{std::string{flag} + ": bad count '" + item + "' in '" + text + "'"};
    out.push_back(*c);
  }
  if (out.empty()) throw usage_error{std::string{flag} + " needs at least one count"};
  return out;
}

/// A comma-separated list ("u32,u64") as its items, in order.
inline std::vector<std::string> split_list(const std::string& text)
{
  std::vector<std::string> out;
  std::stringstream ss{text};
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(item);
  return out;
}

/// The value of `flag`: a comma-separated list whose every item `valid` accepts; `expected`
/// says what would be (", one of u32, u64").
template <typename Valid>
std::vector<std::string> parse_list(std::string_view flag, const std::string& text, Valid valid,
                                    std::string_view expected = "")
{
  std::vector<std::string> items = split_list(text);
  for (const std::string& item : items)
    if (!valid(item))
      throw usage_error{std::string{flag} + ": bad item '" + item + "'" + std::string{expected}};
  return items;
}

/// The value of `flag`: a comma-separated list of `names` (a benchmark's key types).
template <std::size_t N>
std::vector<std::string> parse_names(std::string_view flag, const std::string& text,
                                     const std::string_view (&names)[N])
{
  std::string expected = " (one of";
  for (std::size_t i = 0; i < N; ++i) expected += (i == 0 ? " " : ", ") + std::string{names[i]};
  return parse_list(
      flag, text,
      [&](const std::string& t) { return std::find(names, names + N, t) != names + N; },
      expected + ")");
}

/// The value of `flag`: a comma-separated list of distributions of gpusort gen.
inline std::vector<std::string> parse_distributions(std::string_view flag, const std::string& text)
{
  return parse_list(
      flag, text, [](const std::string& d) { return gpusort::parse_distribution(d).has_value(); },
      " (a distribution of gpusort gen)");
}

/// The value of `flag`: one count from 1 to `most`.
inline std::uint64_t parse_one_count(std::string_view flag, const std::string& text,
                                     std::uint64_t most = UINT64_MAX)
{
  const std::vector<std::uint64_t> counts = parse_counts(flag, text);
  if (counts.size() != 1 || counts.front() > most)
    throw usage_error{std::string{flag} + " takes one count" +
                      (most < UINT64_MAX ? " from 1 to " + std::to_string(most) : "") +
                      ", not '" + text + "'"};
  return counts.front();
}

/// --json FILE, --machine NAME, --commit C: where a benchmark writes its results
/// (results_format.hpp) and what they say they were measured on.
struct results_options {
  std::string json, machine = "unknown", commit = "unknown";

  /// Takes `flag` and returns true when it is one of the three.
  bool take(std::string_view flag, const std::string& value)
  {
    if (flag == "--json") json = value;
    else if (flag == "--machine") machine = value;
    else if (flag == "--commit") commit = value;
    else return false;
    return true;
  }
};

/// Prints the targets' table and, with --json, writes the results file: `raw`, the
/// benchmark's own measurements as JSON objects each followed by a comma, goes into it as an
/// array. `extra` fields join the file's top level.
inline void report_results(const results_options& results, const std::vector<target>& targets,
                           std::string raw, const std::vector<std::string>& extra = {})
{
  print_targets(targets);
  if (results.json.empty()) return;
  if (!raw.empty() && raw.back() == ',') raw.pop_back();
  write_results(results.json, results.commit, results.machine, targets, raw, extra);
}

/// The body of a benchmark's main. Every option is `--flag value`; `flags` lists them besides
/// those of results_options, which every benchmark takes into its Options' member `results`,
/// and `set` takes each other pair in order (it throws usage_error for a value it cannot
/// read). `run` is the benchmark itself: it may throw usage_error for options that do not go
/// together, and anything else for a failure. Returns the exit code.
template <typename Options>
int run_main(const char* name, std::string_view usage, int argc, char** argv,
             std::initializer_list<std::string_view> flags,
             void (*set)(Options&, std::string_view flag, const std::string& value),
             int (*run)(const Options&))
{
  // Line by line even into a file or pipe: a run cut short (a GPU host's time limit, a
  // timeout in gpu-check.sh) keeps every line it printed, where a full buffer was lost.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg{argv[i]};
    if (arg == "--help" || arg == "-h") {
      std::fwrite(usage.data(), 1, usage.size(), stdout);
      return 0;
    }
  }
  try {
    Options o;
    for (int i = 1; i < argc; i += 2) {
      const std::string_view flag{argv[i]};
      const std::string value = i + 1 < argc ? argv[i + 1] : "";
      const bool own = std::find(flags.begin(), flags.end(), flag) != flags.end();
      if (!own && !o.results.take(flag, value))
        throw usage_error{"unknown argument '" + std::string{flag} + "'"};
      if (i + 1 == argc) throw usage_error{std::string{flag} + " needs a value"};
      if (own) set(o, flag, value);
    }
    return run(o);
  } catch (const usage_error& e) {
    std::fprintf(stderr, "%s: %s (see --help)\n", name, e.what());
    return exit_usage;
  } catch (const std::exception& e) {
    std::fflush(stdout);  // the results so far, before the line that says why there are no more
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return exit_failed;
  }
}

}  // namespace gpusort::bench
