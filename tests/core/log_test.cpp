// The library's logging (include/gpusort/log.hpp): quiet by default, every message through the
// application's sink once it has one, filtered by the level, and back to stderr when the sink
// is taken away.
#include "core/log.hpp"

#include <gpusort/log.hpp>

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace gpusort {
namespace {

struct captured {
  std::vector<std::pair<log_level, std::string>> lines;
};

class Log : public ::testing::Test {
 protected:
  void SetUp() override
  {
    set_log_sink([this](log_level level, std::string_view message) {
      seen_.lines.emplace_back(level, std::string{message});
    });
  }
  void TearDown() override
  {
    set_log_sink({});
    set_log_level(log_level::warn);
  }
  captured seen_;
};

TEST_F(Log, QuietByDefaultThenAsMuchAsAsked)
{
  EXPECT_EQ(get_log_level(), log_level::warn);
  detail::log(log_level::info, "not {}", "shown");
  detail::log(log_level::debug, "nor this");
  detail::log(log_level::warn, "a warning about {} things", 3);
  detail::log(log_level::error, "an error");
  ASSERT_EQ(seen_.lines.size(), 2U);
  EXPECT_EQ(seen_.lines[0], (std::pair{log_level::warn, std::string{"a warning about 3 things"}}));
  EXPECT_EQ(seen_.lines[1].first, log_level::error);

  set_log_level(log_level::debug);
  detail::log(log_level::debug, "now shown");
  detail::log(log_level::trace, "still not");
  ASSERT_EQ(seen_.lines.size(), 3U);
  EXPECT_EQ(seen_.lines[2].second, "now shown");

  set_log_level(log_level::off);
  detail::log(log_level::error, "silenced");
  EXPECT_EQ(seen_.lines.size(), 3U);
}

TEST_F(Log, ASinkThatThrowsLosesItsMessageAndNothingElse)
{
  set_log_sink([](log_level, std::string_view) { throw std::runtime_error{"full"}; });
  EXPECT_NO_THROW(detail::log(log_level::error, "lost"));
}

TEST_F(Log, WithoutASinkLinesGoToStandardError)
{
  set_log_sink({});
  ::testing::internal::CaptureStderr();
  detail::log(log_level::warn, "disk {} is slow", "sda");
  detail::log(log_level::info, "not at the default level");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "gpusort: warning: disk sda is slow\n");
}

}  // namespace
}  // namespace gpusort
