// Measurement switches (core/switches.hpp): one meaning for every GPUSORT_* A/B variable, a
// warning (once per switch) for a value it does not take, and every switch in the tree read
// through that one reader and listed in docs/design.md.
#include "core/switches.hpp"

#include <gpusort/log.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace gpusort {
namespace {

class Switches : public ::testing::Test {
 protected:
  void SetUp() override
  {
    set_log_sink([this](log_level level, std::string_view message) {
      if (level == log_level::warn) warnings_.emplace_back(message);
    });
  }
  void TearDown() override
  {
    set_log_sink({});
    for (const std::string& name : set_) ::unsetenv(name.c_str());
  }
  void set(const std::string& name, const char* value)
  {
    ::setenv(name.c_str(), value, 1);
    set_.push_back(name);
  }
  std::vector<std::string> warnings_;
  std::vector<std::string> set_;
};

TEST_F(Switches, AFlagIsOneOrZeroAndAnythingElseLeavesTheDefaultWithOneWarning)
{
  const std::string name = "GPUSORT_TEST_SWITCH_FLAG";
  EXPECT_TRUE(detail::switch_flag(name.c_str(), true));
  EXPECT_FALSE(detail::switch_flag(name.c_str(), false));
  set(name, "");
  EXPECT_TRUE(detail::switch_flag(name.c_str(), true));
  set(name, "1");
  EXPECT_TRUE(detail::switch_flag(name.c_str(), false));
  set(name, "0");
  EXPECT_FALSE(detail::switch_flag(name.c_str(), true));
  EXPECT_TRUE(warnings_.empty());
  set(name, "yes");
  EXPECT_TRUE(detail::switch_flag(name.c_str(), true));
  EXPECT_FALSE(detail::switch_flag(name.c_str(), false));
  ASSERT_EQ(warnings_.size(), 1U);  // once per switch, however often it is read
  EXPECT_EQ(warnings_[0], "GPUSORT_TEST_SWITCH_FLAG=yes is ignored: it takes 1 or 0");
}

TEST_F(Switches, ACountIsANumberWithinItsBounds)
{
  const std::string name = "GPUSORT_TEST_SWITCH_COUNT";
  EXPECT_EQ(detail::switch_count(name.c_str(), 1, 256), std::nullopt);
  for (const auto& [text, value] : std::vector<std::pair<const char*, std::uint64_t>>{
           {"1", 1}, {"256", 256}, {"17", 17}, {"2Ki", 2048}}) {
    set(name, text);
    EXPECT_EQ(detail::switch_count(name.c_str(), 1, 4096), value) << text;
  }
  EXPECT_TRUE(warnings_.empty());
  for (const char* bad : {"0", "257", "-3", "eight", "8 threads"}) {
    set(name, bad);
    EXPECT_EQ(detail::switch_count(name.c_str(), 1, 256), std::nullopt) << bad;
  }
  ASSERT_EQ(warnings_.size(), 1U);
  EXPECT_EQ(warnings_[0],
            "GPUSORT_TEST_SWITCH_COUNT=0 is ignored: it takes a count from 1 to 256");
}

TEST_F(Switches, AWordIsOneOfItsWords)
{
  const std::string name = "GPUSORT_TEST_SWITCH_WORD";
  EXPECT_EQ(detail::switch_word(name.c_str(), {"copy", "kernel"}), std::nullopt);
  set(name, "kernel");
  EXPECT_EQ(detail::switch_word(name.c_str(), {"copy", "kernel"}), "kernel");
  set(name, "Kernel");
  EXPECT_EQ(detail::switch_word(name.c_str(), {"copy", "kernel"}), std::nullopt);
  ASSERT_EQ(warnings_.size(), 1U);
  EXPECT_EQ(warnings_[0],
            "GPUSORT_TEST_SWITCH_WORD=Kernel is ignored: it takes one of copy, kernel");
}

std::string read_all(const std::filesystem::path& p)
{
  std::ifstream in{p};
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

std::set<std::string> matches(const std::string& text, const std::regex& re)
{
  std::set<std::string> found;
  for (auto it = std::sregex_iterator{text.begin(), text.end(), re}; it != std::sregex_iterator{};
       ++it)
    found.insert((*it)[1].str());
  return found;
}

// A switch read with its own getenv would mean what its call site happens to test for again, and
// one missing from design.md's table is one nobody can find.
TEST(SwitchesInTheTree, EveryOneIsReadByOneReaderAndListedHere)
{
  const std::filesystem::path root{GPUSORT_SOURCE_DIR};
  // A bundle run on a GPU host (scripts/bundle.sh) has the tests without the tree they read.
  if (!std::filesystem::exists(root / "docs" / "design.md"))
    GTEST_SKIP() << "no source tree at " << root;
  // Not measurement switches: where the configuration and the socket are, fault injection.
  const std::set<std::string> own_getenv{"GPUSORT_CONFIG", "GPUSORT_SOCKET", "GPUSORT_FAULT",
                                         "GPUSORT_FAULT_COUNTS"};
  const std::regex getenv_re{R"re(getenv\(\s*"(GPUSORT_\w+)")re"};
  const std::regex switch_re{
      R"re((?:switch_(?:flag|count|word|text)|warn_ignored_switch)\(\s*"(GPUSORT_\w+)")re"};
  std::set<std::string> switches;
  std::vector<std::string> raw;
  for (const char* dir : {"core", "pipeline", "client", "service", "config", "proto", "python"}) {
    if (!std::filesystem::exists(root / dir)) continue;
    for (const auto& entry : std::filesystem::recursive_directory_iterator{root / dir}) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".cpp" && ext != ".hpp" && ext != ".cu" && ext != ".cuh") continue;
      const std::string text = read_all(entry.path());
      for (const std::string& name : matches(text, getenv_re))
        if (!own_getenv.contains(name)) raw.push_back(entry.path().string() + ": " + name);
      switches.merge(matches(text, switch_re));
    }
  }
  EXPECT_TRUE(raw.empty()) << "read with getenv instead of core/switches.hpp: "
                           << ::testing::PrintToString(raw);
  EXPECT_GE(switches.size(), 14U);  // the reader is found at all

  const std::string design = read_all(root / "docs" / "design.md");
  const auto from = design.find("### Measurement switches");
  ASSERT_NE(from, std::string::npos);
  const std::string section = design.substr(from, design.find("\n## ", from) - from);
  const std::set<std::string> listed =
      matches(section, std::regex{R"re(\| `(GPUSORT_\w+)` \|)re"});
  EXPECT_EQ(listed, switches);
}

}  // namespace
}  // namespace gpusort
