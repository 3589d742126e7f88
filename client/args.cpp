#include "client/args.hpp"

#include <algorithm>

namespace gpusort::cli {

std::optional<std::string> parsed_args::get(std::string_view name) const
{
  const auto it = options.find(name);
  if (it == options.end()) return std::nullopt;
  return it->second;
}

std::string parsed_args::require(std::string_view name) const
{
  auto value = get(name);
  if (!value) throw cli_error{exit_usage, "missing --" + std::string{name}};
  return *value;
}

parsed_args parse_args(const std::vector<std::string>& args, const command_spec& spec)
{
  parsed_args out;
  bool options_done = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    // -q, the one short option besides -h: scripts silence commands that way.
    const std::string arg = !options_done && args[i] == "-q" ? "--quiet" : args[i];
    if (options_done || arg == "-" || arg.empty() || arg.front() != '-') {
      out.positionals.push_back(arg);
      continue;
    }
    if (arg == "--") {
      options_done = true;
      continue;
    }
    if (arg.size() < 3 || arg[1] != '-')
      throw cli_error{exit_usage, "unknown option " + arg + " (see " +
                                      std::string{spec.program} + " " + std::string{spec.name} +
                                      " --help)"};
    const std::size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const auto it = std::find_if(spec.options.begin(), spec.options.end(),
                                 [&](const option_spec& o) { return o.name == name; });
    if (it == spec.options.end())
      throw cli_error{exit_usage, "unknown option --" + name + " (see " +
                                      std::string{spec.program} + " " + std::string{spec.name} +
                                      " --help)"};
    if (out.options.contains(name)) throw cli_error{exit_usage, "--" + name + " given twice"};
    if (!it->takes_value()) {
      if (eq != std::string::npos) throw cli_error{exit_usage, "--" + name + " takes no value"};
      out.options.emplace(name, "");
      continue;
    }
    if (eq != std::string::npos) {
      out.options.emplace(name, arg.substr(eq + 1));
      continue;
    }
    // "--out --json" is far more often a forgotten value than a file named "--json";
    // such a file can still be given as --out=--json.
    if (i + 1 >= args.size() || args[i + 1].starts_with("--"))
      throw cli_error{exit_usage, "--" + name + " needs a value (" + std::string{it->metavar} +
                                      ")"};
    out.options.emplace(name, args[++i]);
  }
  return out;
}

bool wants_help(const std::vector<std::string>& args)
{
  for (const std::string& arg : args) {
    if (arg == "--") return false;
    if (arg == "-h" || arg == "--help") return true;
  }
  return false;
}

std::string help_text(const command_spec& spec)
{
  std::string text = "usage: " + std::string{spec.program} + " " + std::string{spec.name} + " " +
                     std::string{spec.synopsis} + "\n\n" + std::string{spec.description} +
                     "\noptions:\n";
  constexpr std::size_t help_column = 26;
  for (const option_spec& o : spec.options) {
    std::string left = "  --" + std::string{o.name};
    if (o.takes_value()) left += " " + std::string{o.metavar};
    // A long option name gets its help on the next line rather than a ragged column.
    left += left.size() + 2 > help_column ? "\n" + std::string(help_column, ' ')
                                          : std::string(help_column - left.size(), ' ');
    // Help texts may hold line breaks; continuation lines align with the help column.
    std::string help{o.help};
    for (std::size_t p = help.find('\n'); p != std::string::npos; p = help.find('\n', p + 1))
      help.insert(p + 1, std::string(help_column, ' '));
    text += left + help + "\n";
  }
  return text;
}

}  // namespace gpusort::cli
