// gpusort: generate, sort and verify raw little-endian arrays of keys (and values).
#include "client/cli.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

namespace {

constexpr const char* overview =
    "usage: gpusort <command> [options]\n"
    "\n"
    "commands:\n"
    "  gen     write a file of generated keys (and values)\n"
    "  sort    sort a file of keys (and values), in place or into --out\n"
    "  verify  check that a file is a sorted permutation of an original\n"
    "\n"
    "gpusort <command> --help shows a command's options. Exit codes: 0 ok, 1 verification\n"
    "failed, 64 usage error, 70 runtime error, 78 configuration error.\n";

}  // namespace

int main(int argc, char** argv)
{
  using namespace gpusort::cli;
  // Logs go to stderr so that --json output on stdout stays one object.
  spdlog::set_default_logger(spdlog::stderr_color_mt("gpusort"));
  spdlog::set_pattern("gpusort: %l: %v");
  std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.empty()) {
      std::fputs(overview, stderr);
      return exit_usage;
    }
    const std::string command = args.front();
    args.erase(args.begin());
    if (command == "--help" || command == "-h" || command == "help") {
      std::fputs(overview, stdout);
      return exit_ok;
    }
    if (command == "--version") {
      std::printf("gpusort %s\n", GPUSORT_VERSION);
      return exit_ok;
    }
    if (command == "gen") return run_gen(args);
    if (command == "sort") return run_sort(args);
    if (command == "verify") return run_verify(args);
    throw cli_error{exit_usage, "unknown command '" + command + "' (gen, sort, verify)"};
  } catch (const cli_error& e) {
    std::fprintf(stderr, "gpusort: %s\n", e.what());
    return e.code;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpusort: %s\n", e.what());
    return exit_runtime;
  }
}
