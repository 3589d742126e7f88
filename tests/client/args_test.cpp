// The options-table parser of the command lines (client/args.hpp): what it accepts, what it
// refuses and in which words, against a table like the commands' own, in this process.
#include "client/args.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using gpusort::cli::cli_error;
using gpusort::cli::command_spec;
using gpusort::cli::exit_usage;
using gpusort::cli::help_text;
using gpusort::cli::parse_args;
using gpusort::cli::parsed_args;
using gpusort::cli::wants_help;

const command_spec& spec()
{
  static const command_spec s{
      .name = "sort",
      .synopsis = "FILE [--dtype T] [--key SPEC]... [--quiet]",
      .description = "Sorts FILE.\n",
      .options = {
          {"dtype", "T", "key type"},
          {"out", "FILE", "output"},
          {"key", "SPEC", "a key (again for the next)", true},
          {"stable", "", "equal keys keep their order"},
          {"quiet", "", "say nothing (also -q)"},
          {"help", "", "show this text"},
      }};
  return s;
}

parsed_args parse(const std::vector<std::string>& args) { return parse_args(args, spec()); }

/// The message of the usage error that parsing `args` raises ("" when it raises none).
std::string refusal(const std::vector<std::string>& args)
{
  try {
    (void)parse(args);
  } catch (const cli_error& e) {
    EXPECT_EQ(e.code, exit_usage) << e.what();
    return e.what();
  }
  return "";
}

TEST(Args, ValuesFlagsAndPositionals)
{
  const parsed_args a = parse({"in.bin", "--dtype", "u64", "--out=o.bin", "--stable", "-q"});
  EXPECT_EQ(a.positionals, std::vector<std::string>{"in.bin"});
  EXPECT_EQ(a.get("dtype"), "u64");
  EXPECT_EQ(a.get("out"), "o.bin");
  EXPECT_TRUE(a.has("stable"));
  EXPECT_TRUE(a.has("quiet"));  // -q is --quiet where the table has it
  EXPECT_EQ(a.get("stable"), "");
  EXPECT_FALSE(a.has("key"));
  EXPECT_EQ(a.get("key"), std::nullopt);
  EXPECT_EQ(a.require("dtype"), "u64");
  EXPECT_EQ(refusal({"in.bin"}), "");
  try {
    (void)parse({"in.bin"}).require("dtype");
    ADD_FAILURE() << "no error for a missing --dtype";
  } catch (const cli_error& e) {
    EXPECT_EQ(std::string{e.what()}, "missing --dtype");
    EXPECT_EQ(e.code, exit_usage);
  }
}

TEST(Args, ValuesThatLookLikeOptions)
{
  // After `--` everything is a positional; before it, what follows a value option is its value
  // unless it starts with "--" (then it is a forgotten value), which `=` still allows.
  const parsed_args a = parse({"--dtype", "u64", "--", "-x.bin", "--out", "-q"});
  EXPECT_EQ(a.positionals, (std::vector<std::string>{"-x.bin", "--out", "-q"}));
  EXPECT_FALSE(a.has("out"));
  EXPECT_FALSE(a.has("quiet"));
  EXPECT_EQ(parse({"--out", "-"}).get("out"), "-");
  EXPECT_EQ(parse({"--out", "-q"}).get("out"), "-q");
  EXPECT_EQ(parse({"--out", "-1"}).get("out"), "-1");
  EXPECT_EQ(parse({"--out=--json"}).get("out"), "--json");
  EXPECT_EQ(parse({"--out=a=b"}).get("out"), "a=b");
  EXPECT_EQ(parse({"-"}).positionals, std::vector<std::string>{"-"});
  EXPECT_EQ(parse({"a", "", "b"}).positionals, (std::vector<std::string>{"a", "", "b"}));
}

TEST(Args, RepeatableOptionsKeepEveryValueInOrder)
{
  const parsed_args a =
      parse({"--key", "0:8:u64", "f.bin", "--key=8:4:f32:desc", "--dtype", "u64", "--key", "-"});
  EXPECT_EQ(a.get_all("key"), (std::vector<std::string>{"0:8:u64", "8:4:f32:desc", "-"}));
  EXPECT_EQ(a.get("key"), "0:8:u64");  // the first
  EXPECT_EQ(a.get_all("dtype"), std::vector<std::string>{"u64"});
  EXPECT_TRUE(a.get_all("out").empty());
  EXPECT_EQ(a.positionals, std::vector<std::string>{"f.bin"});
  EXPECT_EQ(parse({"--key", "a"}).get_all("key"), std::vector<std::string>{"a"});
  EXPECT_EQ(refusal({"--key"}), "--key needs a value (SPEC)");
  EXPECT_EQ(refusal({"--key", "a", "--key", "--stable"}), "--key needs a value (SPEC)");
}

TEST(Args, UsageErrorsInOneLine)
{
  EXPECT_EQ(refusal({"--dtype", "u64", "--dtype", "u32"}), "--dtype given twice");
  EXPECT_EQ(refusal({"--dtype=u64", "--dtype", "u64"}), "--dtype given twice");
  EXPECT_EQ(refusal({"--stable", "--stable"}), "--stable given twice");
  EXPECT_EQ(refusal({"-q", "--quiet"}), "--quiet given twice");
  EXPECT_EQ(refusal({"--bogus"}), "unknown option --bogus (see gpusort sort --help)");
  EXPECT_EQ(refusal({"--bogus=1"}), "unknown option --bogus (see gpusort sort --help)");
  EXPECT_EQ(refusal({"f.bin", "-x"}), "unknown option -x (see gpusort sort --help)");
  // The only short options are -h and -q, one at a time; a number is no positional either.
  EXPECT_EQ(refusal({"f.bin", "-qh"}), "unknown option -qh (see gpusort sort --help)");
  EXPECT_EQ(refusal({"-q.bin"}), "unknown option -q.bin (see gpusort sort --help)");
  EXPECT_EQ(refusal({"-5"}), "unknown option -5 (see gpusort sort --help)");
  EXPECT_EQ(refusal({"--dtype"}), "--dtype needs a value (T)");
  EXPECT_EQ(refusal({"--dtype="}), "--dtype needs a value (T)");
  EXPECT_EQ(refusal({"--out", "--stable"}), "--out needs a value (FILE)");
  EXPECT_EQ(refusal({"--out", "--"}), "--out needs a value (FILE)");
  EXPECT_EQ(refusal({"--stable=yes"}), "--stable takes no value");
  EXPECT_EQ(refusal({"--quiet=true"}), "--quiet takes no value");
  // Past `--` nothing is an option, so nothing there is refused.
  EXPECT_EQ(refusal({"--", "--bogus", "--dtype"}), "");
  // -q only where the table has quiet.
  command_spec verify = spec();
  verify.name = "verify";
  std::erase_if(verify.options, [](const auto& o) { return o.name == "quiet"; });
  try {
    (void)parse_args({"f.bin", "-q"}, verify);
    ADD_FAILURE() << "no error for -q without --quiet";
  } catch (const cli_error& e) {
    EXPECT_EQ(std::string{e.what()}, "unknown option -q (see gpusort verify --help)");
  }
  // Another program's table names that program.
  command_spec mpi = spec();
  mpi.program = "gpusort-mpi";
  try {
    (void)parse_args({"--bogus"}, mpi);
    ADD_FAILURE() << "no error for --bogus";
  } catch (const cli_error& e) {
    EXPECT_EQ(std::string{e.what()}, "unknown option --bogus (see gpusort-mpi sort --help)");
  }
}

TEST(Args, Help)
{
  EXPECT_TRUE(wants_help({"f.bin", "--bogus", "-h"}));
  EXPECT_TRUE(wants_help({"--help"}));
  EXPECT_FALSE(wants_help({"--", "-h"}));
  EXPECT_FALSE(wants_help({"f.bin"}));
  const std::string text = help_text(spec());
  EXPECT_EQ(text.rfind("usage: gpusort sort FILE [--dtype T] [--key SPEC]... [--quiet]\n\n"
                       "Sorts FILE.\n\noptions:\n",
                       0),
            0U)
      << text;
  EXPECT_NE(text.find("\n  --dtype T               key type\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\n  --quiet                 say nothing (also -q)\n"), std::string::npos)
      << text;
}

}  // namespace
