#include "client/cli.hpp"

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
  auto v = get(name);
  if (!v) throw cli_error{exit_usage, "missing --" + std::string{name}};
  return *v;
}

parsed_args parse_args(const std::vector<std::string>& args, const std::vector<option_spec>& specs)
{
  parsed_args out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() < 2 || a.compare(0, 2, "--") != 0) {
      out.positionals.push_back(a);
      continue;
    }
    const std::string name = a.substr(2);
    const auto spec = std::find_if(specs.begin(), specs.end(),
                                   [&](const option_spec& s) { return s.name == name; });
    if (spec == specs.end()) throw cli_error{exit_usage, "unknown option " + a};
    if (out.options.contains(name)) throw cli_error{exit_usage, "option " + a + " given twice"};
    if (spec->takes_value) {
      if (i + 1 >= args.size()) throw cli_error{exit_usage, "option " + a + " needs a value"};
      out.options.emplace(name, args[++i]);
    } else {
      out.options.emplace(name, "");
    }
  }
  return out;
}

std::string usage_text(std::string_view synopsis, const std::vector<option_spec>& specs)
{
  std::string s = "usage: " + std::string{synopsis} + "\n";
  for (const option_spec& o : specs) {
    std::string left = "  --" + std::string{o.name} + (o.takes_value ? " VALUE" : "");
    left.resize(std::max<std::size_t>(left.size() + 2, 26), ' ');
    s += left + std::string{o.help} + "\n";
  }
  return s;
}

}  // namespace gpusort::cli
