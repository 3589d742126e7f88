#include "client/args.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <utility>

namespace gpusort::cli {

std::optional<std::string> parsed_args::get(std::string_view name) const
{
  const auto it = options.find(name);
  if (it == options.end() || it->second.empty()) return std::nullopt;
  return it->second.front();
}

std::string parsed_args::require(std::string_view name) const
{
  auto value = get(name);
  if (!value) throw cli_error{exit_usage, "missing --" + std::string{name}};
  return *value;
}

std::vector<std::string> parsed_args::get_all(std::string_view name) const
{
  const auto it = options.find(name);
  return it == options.end() ? std::vector<std::string>{} : it->second;
}

namespace {

const option_spec* find_option(const command_spec& spec, std::string_view name)
{
  const auto it = std::find_if(spec.options.begin(), spec.options.end(),
                               [&](const option_spec& o) { return o.name == name; });
  return it == spec.options.end() ? nullptr : &*it;
}

std::string unknown_option(const command_spec& spec, const std::string& arg)
{
  return "unknown option " + arg + " (see " + std::string{spec.program} + " " +
         std::string{spec.name} + " --help)";
}

/// The one short name an option has: -h for help and -q for quiet, which scripts use; "" for
/// the others.
std::string_view short_name(const option_spec& o)
{
  if (o.name == "help") return "-h";
  if (o.name == "quiet") return "-q";
  return "";
}

/// What CLI11 would take but we refuse, before it reads anything. It takes whatever follows an
/// option as its value, but "--out --json" is far more often a forgotten value than a file named
/// "--json" (such a file can still be given as --out=--json); it reads `--flag=VALUE` as a
/// boolean, where our flags take no value; it reads `--name=` as `--name` with the value in the
/// next argument; and it reads -qh as -q -h and -5 as a positional, where the only short options
/// are the tables' -h and -q.
void refuse_what_cli11_would_misread(const std::vector<std::string>& args,
                                     const command_spec& spec)
{
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") return;
    if (arg.size() > 1 && arg[0] == '-' && arg[1] != '-') {
      if (std::none_of(spec.options.begin(), spec.options.end(),
                       [&](const option_spec& o) { return short_name(o) == arg; }))
        throw cli_error{exit_usage, unknown_option(spec, arg)};
      continue;
    }
    if (!arg.starts_with("--")) continue;
    const std::size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    const option_spec* o = find_option(spec, name);
    if (o == nullptr) continue;  // CLI11 leaves it unparsed: an unknown option, reported later
    if (!o->takes_value()) {
      if (eq != std::string::npos) throw cli_error{exit_usage, "--" + name + " takes no value"};
      continue;
    }
    const bool missing = eq == std::string::npos
                             ? i + 1 >= args.size() || args[i + 1].starts_with("--")
                             : eq + 1 == arg.size();
    if (missing)
      throw cli_error{exit_usage,
                      "--" + name + " needs a value (" + std::string{o->metavar} + ")"};
    if (eq == std::string::npos) ++i;  // the value, whatever it looks like ("-", "-1", "-q")
  }
}

/// CLI11's names for an option: "--name", or "-h,--help" with its short name.
std::string cli11_names(const option_spec& o)
{
  const std::string long_name = "--" + std::string{o.name};
  return short_name(o).empty() ? long_name : std::string{short_name(o)} + "," + long_name;
}

}  // namespace

parsed_args parse_args(const std::vector<std::string>& args, const command_spec& spec)
{
  refuse_what_cli11_would_misread(args, spec);
  CLI::App app{std::string{spec.description},
               std::string{spec.program} + " " + std::string{spec.name}};
  // help_text prints the table and the commands ask wants_help first: CLI11's own help flag
  // would only clash with the table's "help" option.
  app.set_help_flag();
  // Unknown options are kept (remaining()) rather than thrown, to be named in our words below.
  app.allow_extras();
  std::vector<std::pair<const option_spec*, CLI::Option*>> added;
  for (const option_spec& o : spec.options) {
    CLI::Option* option = o.takes_value()
                              ? app.add_option(cli11_names(o))->type_name(std::string{o.metavar})
                              : app.add_flag(cli11_names(o));
    option->description(std::string{o.help});
    // Every use is kept, so that a repeat is refused below with the option's name (CLI11's own
    // refusal says "At Most 1 required but received 2").
    option->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
    added.emplace_back(&o, option);
  }
  parsed_args out;
  app.add_option("positionals", out.positionals);
  try {
    app.parse(std::vector<std::string>{args.rbegin(), args.rend()});  // CLI11 reads from the back
  } catch (const CLI::ParseError& e) {
    // Not expected after the checks above; one line all the same.
    throw cli_error{exit_usage, std::string{e.what()} + " (see " + std::string{spec.program} +
                                    " " + std::string{spec.name} + " --help)"};
  }
  for (const std::string& extra : app.remaining()) {
    if (extra == "--") continue;  // CLI11 keeps the `--` that ends the options among them
    throw cli_error{exit_usage, unknown_option(spec, extra.substr(0, extra.find('=')))};
  }
  for (const auto& [o, option] : added) {
    const std::vector<std::string>& given = option->results();
    if (given.empty()) continue;
    if (given.size() > 1 && !o->repeatable)
      throw cli_error{exit_usage, "--" + std::string{o->name} + " given twice"};
    // CLI11 records a flag's use as "true"; a flag maps to "" for each time it was given.
    out.options.emplace(std::string{o->name},
                        o->takes_value() ? given : std::vector<std::string>(given.size()));
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
