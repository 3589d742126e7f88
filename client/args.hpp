// The command line's argument parser: a table of options per command, one-line usage errors.
// The tables are ours (they also give each command's --help); CLI11 reads the arguments against
// them (args.cpp), and its errors become our one-line messages.
#pragma once

#include <cerrno>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace gpusort::cli {

/// Exit codes, from sysexits.h where one fits, so that scripts can tell what to fix.
enum exit_code : int {
  exit_ok = 0,
  exit_verify_failed = 1,
  exit_usage = 64,        ///< EX_USAGE: wrong or missing arguments, unknown dtype or distribution
  exit_data = 65,         ///< EX_DATAERR: a file that is not a whole array, values not matching
  exit_no_input = 66,     ///< EX_NOINPUT: an input that cannot be opened or is not a file
  exit_unavailable = 69,  ///< EX_UNAVAILABLE: the daemon cannot be reached (or went away)
  exit_runtime = 70,      ///< EX_SOFTWARE: the sort failed (engine, memory, the daemon's error)
  exit_cant_create = 73,  ///< EX_CANTCREAT: an output that cannot be created or has no room
  exit_io = 74,           ///< EX_IOERR: reading or writing failed mid-job (a file shrank, EIO)
  exit_try_later = 75,    ///< EX_TEMPFAIL: the daemon is busy or shutting down; retry later
  exit_no_permission = 77,  ///< EX_NOPERM: not this user's to write, or the daemon refuses them
  exit_config = 78,       ///< EX_CONFIG: a configuration that cannot be loaded or used
};

/// exit_no_permission when `err` (an errno) says access was denied, else `otherwise`.
constexpr exit_code denied_or(int err, exit_code otherwise) noexcept
{
  return err == EACCES || err == EPERM || err == EROFS ? exit_no_permission : otherwise;
}

/// Ends the command with `code`; main prints what() as the one line "gpusort: <what>".
struct cli_error : std::runtime_error {
  cli_error(exit_code c, const std::string& what) : std::runtime_error{what}, code{c} {}
  exit_code code;
};

/// One option of a command: `--name VALUE` (metavar non-empty) or a flag `--name`. The options
/// named help and quiet also answer to -h and -q.
struct option_spec {
  std::string_view name;
  std::string_view metavar;  ///< empty: a flag without value
  std::string_view help;
  /// May be given more than once (`--key A --key B`), each value kept (parsed_args::get_all);
  /// any other option given twice is a usage error: which of the two was meant is anyone's guess.
  bool repeatable{false};
  [[nodiscard]] bool takes_value() const noexcept { return !metavar.empty(); }
};

/// A command's table: what `gpusort <name> --help` prints and what its parser accepts.
struct command_spec {
  std::string_view name;
  std::string_view synopsis;     ///< after "usage: gpusort <name> "
  std::string_view description;  ///< paragraphs printed after the synopsis
  std::vector<option_spec> options;
  std::string_view program{"gpusort"};  ///< the program the command belongs to
};

/// Arguments as parsed: positionals in order, options by name with every value given, in order
/// (a flag has "" for each time it was given). Only a repeatable option has more than one.
struct parsed_args {
  std::vector<std::string> positionals;
  std::map<std::string, std::vector<std::string>, std::less<>> options;

  [[nodiscard]] bool has(std::string_view name) const { return options.contains(name); }
  /// The option's value; for a repeatable option given more than once, its first.
  [[nodiscard]] std::optional<std::string> get(std::string_view name) const;
  /// The value of a required option; a usage error naming it when absent.
  [[nodiscard]] std::string require(std::string_view name) const;
  /// Every value of the option in the order given; empty when it was not given.
  [[nodiscard]] std::vector<std::string> get_all(std::string_view name) const;
};

/// Parses `args` (without the command name) against `spec`. Accepts `--name VALUE`,
/// `--name=VALUE`, flags, -h and -q where the table has help and quiet, and `--` before
/// positionals that start with '-'. Unknown options, missing values, values given to flags and
/// a non-repeatable option given twice are usage errors (cli_error with exit_usage).
parsed_args parse_args(const std::vector<std::string>& args, const command_spec& spec);

/// Whether the arguments ask for help (-h or --help before any `--`).
bool wants_help(const std::vector<std::string>& args);

/// The text of `gpusort <name> --help`.
std::string help_text(const command_spec& spec);

}  // namespace gpusort::cli
