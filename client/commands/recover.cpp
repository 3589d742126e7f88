// `gpusort recover`: the elements a killed lean in-place sort left in its journal, put back.
#include "client/commands.hpp"

#include "client/commands/common.hpp"
#include "client/in_place.hpp"

#include <cstdio>
#include <filesystem>
#include <optional>
#include <string>

namespace gpusort::cli {

namespace fs = std::filesystem;

const command_spec& recover_spec()
{
  static const command_spec spec{
      .name = "recover",
      .synopsis = "FILE [--values FILE] [--quiet]",
      .description =
          "Puts back every element of FILE (and of its --values file) that a lean in-place\n"
          "sort left in its journal .FILE.gpusort-journal when it was killed, and removes the\n"
          "journal. Afterwards the files hold the elements they held before that sort, each\n"
          "key with its value, not sorted. gpusort sort FILE does the same by itself before\n"
          "it sorts. A journal of other files, or a damaged one, is refused and nothing is\n"
          "written. Where FILE has no journal it says so (nothing with --quiet) and exits 0.\n",
      .options = {
          {"values", "FILE", "the values file that was sorted with FILE"},
          {"quiet", "", "say nothing but errors (also -q)"},
          {"help", "", "show this text"},
      }};
  return spec;
}

int run_recover(const std::vector<std::string>& args)
{
  const std::optional<parsed_args> parsed = parse_or_help(args, recover_spec());
  if (!parsed) return exit_ok;
  const parsed_args& a = *parsed;
  const fs::path path = one_file(a, "recover", "the file whose sort was interrupted");
  const std::optional<std::string> values = a.get("values");
  const bool quiet = a.has("quiet");
  if (!restore_interrupted(path, values ? std::optional<fs::path>{*values} : std::nullopt,
                           quiet) &&
      !quiet)
    std::printf("no interrupted sort of %s to recover\n", path.c_str());
  return exit_ok;
}

}  // namespace gpusort::cli
