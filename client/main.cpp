// gpusort: generate, sort and verify raw little-endian arrays of keys (and values).
#include "client/commands.hpp"
#include "client/files.hpp"
#include "core/program_log.hpp"

#include <gpusort/error.hpp>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

namespace {

constexpr const char* overview =
    "usage: gpusort <command> [options]\n"
    "\n"
    "Sorts huge arrays of keys (and values) that live in files, out of core.\n"
    "Files are raw little-endian arrays without a header, or NumPy .npy files (1-D),\n"
    "whose header gives the key type and is kept as it is.\n"
    "\n"
    "commands:\n"
    "  gen     write a file of generated keys (and values)\n"
    "  sort    sort a file of keys (and values), in place or into --out, or write its\n"
    "          sorting permutation (--argsort-out), through the daemon gpusortd\n"
    "          (--socket PATH) or in this process (--local)\n"
    "  verify  check that a file is a sorted permutation of an original\n"
    "  status  show the daemon's devices, memory, jobs and totals\n"
    "  recover put back the elements of a file whose lean in-place sort was killed\n"
    "  plan    say what a sort of an array of a given shape would do and take: its path,\n"
    "          chunks, smallest device budget and predicted time (no data needed)\n"
    "  help    show the options of a command: gpusort help sort\n"
    "\n"
    "options:\n"
    "  --help     show this text (gpusort <command> --help: a command's options)\n"
    "  --version  show the version\n"
    "\n"
    "exit codes (sysexits): 0 ok, 1 verification failed, 64 usage error (also a --dtype\n"
    "that contradicts a .npy header), 65 a file that is not a whole array, values that do\n"
    "not match the keys, or a .npy file gpusort cannot sort (a bad header, not 1-D,\n"
    "another type), 66 an input that cannot be read, 69 daemon unreachable,\n"
    "70 the sort failed (engine, memory, a job the daemon refused), 73 an output that\n"
    "cannot be created, 74 an I/O error mid-job, 75 the daemon is busy or stopping\n"
    "(retry), 77 permission denied, 78 configuration error.\n"
    "Errors are one line on stderr starting with \"gpusort: \".\n";

int dispatch(std::vector<std::string> args)
{
  using namespace gpusort::cli;
  if (args.empty())
    throw cli_error{exit_usage,
                    "no command (gen, sort, verify, status, recover, plan; see --help)"};
  const std::string command = args.front();
  args.erase(args.begin());
  if (command == "--help" || command == "-h") {
    std::fputs(overview, stdout);
    return exit_ok;
  }
  if (command == "help") {
    // `help help` is help's own page: the overview, which says how to use it.
    if (args.empty() || args.front() == "help") {
      std::fputs(overview, stdout);
      return exit_ok;
    }
    if (find_command(args.front()) == nullptr)
      throw cli_error{exit_usage, "no command '" + args.front() +
                                      "' (gen, sort, verify, status, recover, plan, help)"};
    args = {args.front(), "--help"};
    return dispatch(args);
  }
  if (command == "--version") {
    std::printf("gpusort %s\n", GPUSORT_VERSION);
    return exit_ok;
  }
  if (command == "gen") return run_gen(args);
  if (command == "sort") return run_sort(args);
  if (command == "verify") return run_verify(args);
  if (command == "status") return run_status(args);
  if (command == "recover") return run_recover(args);
  if (command == "plan") return run_plan(args);
  throw cli_error{exit_usage, command.starts_with("-")
                                 ? "unknown option " + command + " (--help, --version; a "
                                                                 "command's options follow it)"
                                 : "unknown command '" + command +
                                       "' (gen, sort, verify, status, recover, plan; see --help)"};
}

}  // namespace

int main(int argc, char** argv)
{
  using namespace gpusort::cli;
  install_signal_cleanup();
  // Logs share stderr with the errors, in the same "gpusort: " form; stdout holds only results.
  spdlog::set_default_logger(spdlog::stderr_color_mt("gpusort"));
  spdlog::set_pattern("gpusort: %l: %v");
  gpusort::detail::send_library_log_to_spdlog();
  int code = exit_runtime;
  std::string error;
  try {
    code = dispatch(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const cli_error& e) {
    code = e.code;
    error = e.what();
  } catch (const gpusort::config_error& e) {
    code = exit_config;
    error = e.what();
  } catch (const std::bad_alloc&) {
    code = exit_runtime;
    error = "out of memory";
  } catch (const std::exception& e) {
    code = exit_runtime;
    error = e.what();
  }
  if (!error.empty() || code != exit_ok) {
    std::fflush(stdout);
    if (!error.empty()) std::fprintf(stderr, "gpusort: %s\n", one_line(error).c_str());
  }
  return code;
}
