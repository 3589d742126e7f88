// The key table behind parse_config: its keys, the typo hints and the exact size spelling.
#include "config/schema.hpp"

#include <gpusort/units.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

namespace gpusort::detail {
namespace {

TEST(Schema, TheKeysInOrder)
{
  std::vector<std::string_view> names;
  for (const key_spec& k : config_keys()) names.push_back(k.name);
  EXPECT_EQ(names, (std::vector<std::string_view>{
                       "devices", "device_memory_budget", "chunk_bytes", "pinned_pool_bytes",
                       "host_threads", "socket", "allowed_uids", "allowed_gids",
                       "max_connections", "max_running_jobs", "max_queued_jobs", "admission",
                       "host_memory_budget", "shutdown", "shutdown_timeout", "incore_engine",
                       "compress_runs", "round1_buffer", "log_level"}));
}

TEST(Schema, EveryKeyIsDocumented)
{
  for (const key_spec& k : config_keys()) {
    EXPECT_FALSE(k.accepted.empty()) << k.name;
    EXPECT_FALSE(k.meaning.empty()) << k.name;
    EXPECT_EQ(k.meaning.back(), '.') << k.name;
  }
}

TEST(Schema, FindKey)
{
  for (const key_spec& k : config_keys()) EXPECT_EQ(find_key(k.name), &k);
  EXPECT_EQ(find_key("socket")->name, "socket");
  EXPECT_EQ(find_key("Socket"), nullptr);
  EXPECT_EQ(find_key(""), nullptr);
  EXPECT_EQ(find_key("sockets"), nullptr);
}

TEST(EditDistance, KnownValues)
{
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("socket", "socket"), 0u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("sitting", "kitten"), 3u);
  EXPECT_EQ(edit_distance("socekt", "socket"), 1u);  // one transposition
  EXPECT_EQ(edit_distance("chunk_byte", "chunk_bytes"), 1u);
  EXPECT_EQ(edit_distance("flaw", "lawn"), 2u);
  // Optimal string alignment edits no substring twice: 3, where unrestricted Damerau gives 2.
  EXPECT_EQ(edit_distance("ca", "abc"), 3u);
}

TEST(ClosestKey, SuggestsTypos)
{
  EXPECT_EQ(closest_key("chunk_byte"), "chunk_bytes");
  EXPECT_EQ(closest_key("chunkbytes"), "chunk_bytes");
  EXPECT_EQ(closest_key("SOCKET"), "socket");
  EXPECT_EQ(closest_key("sokcet"), "socket");
  EXPECT_EQ(closest_key("sock"), "socket");
  EXPECT_EQ(closest_key("loglevel"), "log_level");
  EXPECT_EQ(closest_key("log-level"), "log_level");
  EXPECT_EQ(closest_key("host_thread"), "host_threads");
  EXPECT_EQ(closest_key("device"), "devices");
  EXPECT_EQ(closest_key("devices_memory_budget"), "device_memory_budget");
  EXPECT_EQ(closest_key("device_memory_buget"), "device_memory_budget");
  EXPECT_EQ(closest_key("pinned_pool_size"), "");  // 4 edits
  EXPECT_EQ(closest_key("pinned_pool_byte"), "pinned_pool_bytes");
}

TEST(ClosestKey, NoSuggestionForUnrelatedWords)
{
  for (const std::string_view word : {"colour", "x", "", "threads", "budget", "level",
                                      "verbose", "gpus"}) {
    EXPECT_EQ(closest_key(word), "") << word;
  }
}

TEST(ExactSize, ShortestExactSpelling)
{
  EXPECT_EQ(exact_size(0), "0");
  EXPECT_EQ(exact_size(1), "1");
  EXPECT_EQ(exact_size(1023), "1023");
  EXPECT_EQ(exact_size(1024), "1KiB");
  EXPECT_EQ(exact_size(1536), "1536");
  EXPECT_EQ(exact_size(4096), "4KiB");
  EXPECT_EQ(exact_size(65536), "64KiB");
  EXPECT_EQ(exact_size(1000000), "1000000");
  EXPECT_EQ(exact_size(1048576), "1MiB");
  EXPECT_EQ(exact_size(1049600), "1025KiB");
  EXPECT_EQ(exact_size(4294967296), "4GiB");
  EXPECT_EQ(exact_size(3298534883328), "3TiB");
  EXPECT_EQ(exact_size(1125899906842624), "1PiB");
  EXPECT_EQ(exact_size(1152921504606846976), "1EiB");
  EXPECT_EQ(exact_size(17293822569102704640u), "15EiB");
  EXPECT_EQ(exact_size(std::numeric_limits<std::uint64_t>::max()), "18446744073709551615");
}

TEST(ExactSize, ReadsBack)
{
  for (std::uint64_t v = 0; v < 5000; ++v) EXPECT_EQ(parse_bytes(exact_size(v)), v);
  for (unsigned shift = 0; shift < 64; ++shift) {
    for (const std::uint64_t m : {std::uint64_t{1}, std::uint64_t{3}, std::uint64_t{1023}}) {
      const std::uint64_t v = m << shift;
      if ((v >> shift) != m) continue;  // shifted out
      EXPECT_EQ(parse_bytes(exact_size(v)), v) << v;
    }
  }
}

TEST(ReferenceMarkdown, OneRowPerKeyWithItsDefault)
{
  const std::string md = config_reference_markdown();
  std::istringstream in{md};
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), config_keys().size() + 2) << md;
  EXPECT_EQ(lines[0], "| key | default | accepted values | meaning |");
  EXPECT_EQ(lines[1], "| --- | --- | --- | --- |");
  EXPECT_EQ(lines[2].rfind("| `devices` | `auto` | ", 0), 0u) << lines[2];
  EXPECT_EQ(lines[3].rfind("| `device_memory_budget` | `auto` | ", 0), 0u) << lines[3];
  EXPECT_EQ(lines[4].rfind("| `chunk_bytes` | `auto` | ", 0), 0u) << lines[4];
  EXPECT_EQ(lines[5].rfind("| `pinned_pool_bytes` | `auto` | ", 0), 0u) << lines[5];
  EXPECT_EQ(lines[6].rfind("| `host_threads` | `0` | ", 0), 0u) << lines[6];
  EXPECT_EQ(lines[7].rfind("| `socket` | `/run/gpusort/gpusort.sock` | ", 0), 0u) << lines[7];
  EXPECT_EQ(lines[8].rfind("| `allowed_uids` | `[]` | ", 0), 0u) << lines[8];
  EXPECT_EQ(lines[9].rfind("| `allowed_gids` | `[]` | ", 0), 0u) << lines[9];
  EXPECT_EQ(lines[10].rfind("| `max_connections` | `128` | ", 0), 0u) << lines[10];
  EXPECT_EQ(lines[11].rfind("| `max_running_jobs` | `2` | ", 0), 0u) << lines[11];
  EXPECT_EQ(lines[12].rfind("| `max_queued_jobs` | `64` | ", 0), 0u) << lines[12];
  EXPECT_EQ(lines[13].rfind("| `admission` | `wait` | ", 0), 0u) << lines[13];
  EXPECT_EQ(lines[14].rfind("| `host_memory_budget` | `auto` | ", 0), 0u) << lines[14];
  EXPECT_EQ(lines[15].rfind("| `shutdown` | `drain` | ", 0), 0u) << lines[15];
  EXPECT_EQ(lines[16].rfind("| `shutdown_timeout` | `30` | ", 0), 0u) << lines[16];
  EXPECT_EQ(lines[17].rfind("| `incore_engine` | `auto` | ", 0), 0u) << lines[17];
  EXPECT_EQ(lines[18].rfind("| `compress_runs` | `off` | ", 0), 0u) << lines[18];
  EXPECT_EQ(lines[19].rfind("| `round1_buffer` | `auto` | one of `auto`, `pinned`, `pageable`, `by-job` | ",
                            0),
            0u)
      << lines[19];
  EXPECT_EQ(lines[20].rfind("| `log_level` | `info` | ", 0), 0u) << lines[20];
  for (const std::string& line : lines) {
    // Four cells: a stray '|' inside a text would break the table.
    EXPECT_EQ(std::count(line.begin(), line.end(), '|'), 5) << line;
  }
}

}  // namespace
}  // namespace gpusort::detail
