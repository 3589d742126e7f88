// The subcommands of `gpusort`, a file each in client/commands/. Each takes the arguments after
// its name, prints its results, and returns an exit code or throws cli_error (see
// client/args.hpp).
#pragma once

#include "client/args.hpp"

#include <string>
#include <vector>

namespace gpusort::cli {

int run_gen(const std::vector<std::string>& args);
int run_sort(const std::vector<std::string>& args);
int run_verify(const std::vector<std::string>& args);
int run_status(const std::vector<std::string>& args);
int run_recover(const std::vector<std::string>& args);
int run_plan(const std::vector<std::string>& args);

/// The command's table (for `gpusort help <command>`); nullptr for an unknown name.
const command_spec* find_command(std::string_view name);

/// `text` as one line: line breaks become spaces, so that every error is one line on stderr.
std::string one_line(std::string text);

}  // namespace gpusort::cli
