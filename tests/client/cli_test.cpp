// Drives the real `gpusort` binary through fork/exec: round trips, --json, exit codes and
// one-line errors, atomic outputs, signals, the progress bar on a terminal.
//
// Sorted files are checked by an independent reference written here (key order by bit
// transforms, the permutation by comparing sorted (key, value) pair lists), not only by
// `gpusort verify`. With GPUSORT_TEST_BUDGET=tiny every sort gets a configuration with a 64 KiB
// device budget, so that it takes the out-of-core (two-round) path with several chunks.
#include "tests/client/cli_process.hpp"
#include "tests/client/npy_reference.hpp"
#include "tests/support/small_tmpfs.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

namespace fs = std::filesystem;
using bytes = std::string;

using run_result = gpusort::test_support::cli_result;
using gpusort::test_support::cli_command;
using gpusort::test_support::start_cli;

bool tiny_budget()
{
  const char* b = std::getenv("GPUSORT_TEST_BUDGET");
  return b != nullptr && std::string{b} == "tiny";
}

bytes slurp(const fs::path& p) { return gpusort::test_support::slurp_file(p); }

void spit(const fs::path& p, const bytes& data)
{
  std::ofstream out{p, std::ios::binary | std::ios::trunc};
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

/// Byte equality that reports sizes and the first difference, not the bytes themselves.
::testing::AssertionResult same_bytes(const bytes& a, const bytes& b)
{
  if (a == b) return ::testing::AssertionSuccess() << "the same " << a.size() << " bytes";
  const auto diff = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  return ::testing::AssertionFailure() << "sizes " << a.size() << " and " << b.size()
                                       << ", first difference at byte "
                                       << (diff.first - a.begin());
}

int count_lines(const std::string& s)
{
  return static_cast<int>(std::count(s.begin(), s.end(), '\n'));
}

// ---- the independent reference -----------------------------------------------------------

struct key_type {
  const char* name;
  unsigned bytes;
  bool is_signed;
  bool is_float;
};

constexpr key_type key_types[] = {{"u32", 4, false, false}, {"i32", 4, true, false},
                                  {"u64", 8, false, false}, {"i64", 8, true, false},
                                  {"f32", 4, false, true},  {"f64", 8, false, true}};

const key_type& type_named(const std::string& name)
{
  for (const key_type& t : key_types)
    if (name == t.name) return t;
  throw std::runtime_error{"no type " + name};
}

std::uint64_t load(const char* p, unsigned n)
{
  std::uint64_t v = 0;
  std::memcpy(&v, p, n);  // little-endian host
  return v;
}

/// Bits whose unsigned order is the key order: two's complement with the sign flipped, and
/// IEEE 754 totalOrder (negative floats inverted, positive ones with the sign set).
std::uint64_t ordered(const key_type& t, std::uint64_t bits)
{
  const std::uint64_t sign = std::uint64_t{1} << (8 * t.bytes - 1);
  const std::uint64_t mask = t.bytes == 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << 32) - 1;
  if (t.is_signed) return bits ^ sign;
  if (t.is_float) return (bits & sign) != 0 ? ~bits & mask : bits | sign;
  return bits;
}

/// (ordered key, value bits) of each element.
std::vector<std::pair<std::uint64_t, std::uint64_t>> pairs_of(const key_type& t, const bytes& keys,
                                                              const bytes* values,
                                                              unsigned value_bytes)
{
  const std::size_t n = keys.size() / t.bytes;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> out(n);
  for (std::size_t i = 0; i < n; ++i) {
    out[i].first = ordered(t, load(keys.data() + i * t.bytes, t.bytes));
    if (values != nullptr) out[i].second = load(values->data() + i * value_bytes, value_bytes);
  }
  return out;
}

/// Empty when `sorted` (and `sorted_values`) is the original sorted; else what is wrong.
std::string reference_check(const key_type& t, const bytes& original, const bytes& sorted,
                            bool descending, const bytes* original_values = nullptr,
                            const bytes* sorted_values = nullptr, unsigned value_bytes = 0)
{
  if (sorted.size() != original.size()) return "sizes differ";
  auto before = pairs_of(t, original, original_values, value_bytes);
  auto after = pairs_of(t, sorted, sorted_values, value_bytes);
  for (std::size_t i = 1; i < after.size(); ++i) {
    const bool bad = descending ? after[i - 1].first < after[i].first
                                : after[i - 1].first > after[i].first;
    if (bad) return "out of order at " + std::to_string(i);
  }
  std::sort(before.begin(), before.end());
  std::sort(after.begin(), after.end());
  if (before != after) return "not a permutation of the original (key, value) pairs";
  return {};
}

// ---- a flat JSON object: numbers, strings, arrays of strings ---------------------------------

struct json_value {
  std::optional<double> number;
  std::optional<std::string> text;
  std::optional<std::vector<std::string>> strings;
  std::optional<bool> boolean;
};

std::optional<std::map<std::string, json_value>> parse_flat_json(const std::string& s)
{
  std::size_t i = 0;
  const auto ws = [&] {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i])) != 0) ++i;
  };
  const auto string = [&]() -> std::optional<std::string> {
    ws();
    if (i >= s.size() || s[i] != '"') return std::nullopt;
    std::string out;
    for (++i; i < s.size() && s[i] != '"'; ++i) {
      if (s[i] == '\\') ++i;
      if (i < s.size()) out += s[i];
    }
    if (i >= s.size()) return std::nullopt;
    ++i;
    return out;
  };
  std::map<std::string, json_value> object;
  ws();
  if (i >= s.size() || s[i++] != '{') return std::nullopt;
  for (;;) {
    const auto key = string();
    if (!key) return std::nullopt;
    ws();
    if (i >= s.size() || s[i++] != ':') return std::nullopt;
    ws();
    json_value v;
    if (i < s.size() && s[i] == '"') {
      v.text = string();
      if (!v.text) return std::nullopt;
    } else if (i < s.size() && s[i] == '[') {
      ++i;
      v.strings.emplace();
      ws();
      if (i < s.size() && s[i] == ']') {
        ++i;
      } else {
        for (;;) {
          const auto e = string();
          if (!e) return std::nullopt;
          v.strings->push_back(*e);
          ws();
          if (i < s.size() && s[i] == ',') {
            ++i;
            continue;
          }
          if (i < s.size() && s[i] == ']') {
            ++i;
            break;
          }
          return std::nullopt;
        }
      }
    } else if (s.compare(i, 4, "true") == 0 || s.compare(i, 5, "false") == 0) {
      v.boolean = s[i] == 't';
      i += *v.boolean ? 4 : 5;
    } else {
      const char* begin = s.c_str() + i;
      char* end = nullptr;
      v.number = std::strtod(begin, &end);
      if (end == begin) return std::nullopt;
      i += static_cast<std::size_t>(end - begin);
    }
    if (object.contains(*key)) return std::nullopt;
    object.emplace(*key, v);
    ws();
    if (i < s.size() && s[i] == ',') {
      ++i;
      continue;
    }
    if (i < s.size() && s[i] == '}') {
      ++i;
      break;
    }
    return std::nullopt;
  }
  ws();
  if (i != s.size()) return std::nullopt;
  return object;
}

// ---- the fixture ---------------------------------------------------------------------------

class Cli : public ::testing::Test {
 protected:
  void SetUp() override
  {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string{info->test_suite_name()} + "-" + info->name();
    std::replace(name.begin(), name.end(), '/', '_');
    dir_ = fs::temp_directory_path() / ("gpusort-cli-" + std::to_string(::getpid()) + "-" + name);
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "work");
    config_ = dir_ / "config.yaml";
    spit(config_, tiny_budget() ? "devices: cpu\ndevice_memory_budget: 64KiB\n" : "devices: cpu\n");
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// A path in the work folder, which holds only what the test and the binary write there.
  [[nodiscard]] std::string path(const std::string& name) const
  {
    return (dir_ / "work" / name).string();
  }
  [[nodiscard]] std::vector<std::string> work_files() const
  {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator{dir_ / "work"})
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  /// Runs gpusort with `args`; GPUSORT_CONFIG is unset unless `env` sets it. With
  /// `stderr_fd` >= 0 stderr goes there (a terminal) instead of being captured.
  run_result run(const std::vector<std::string>& args,
                 const std::vector<std::pair<std::string, std::string>>& env = {},
                 int stderr_fd = -1) const
  {
    return wait_for(start_cli(command(args, env, stderr_fd)), stderr_fd < 0);
  }

  /// The command run() runs: stdin from stdin_, stdout and stderr into the test's folder.
  [[nodiscard]] cli_command command(const std::vector<std::string>& args,
                                    const std::vector<std::pair<std::string, std::string>>& env = {},
                                    int stderr_fd = -1) const
  {
    return cli_command{.args = args,
                       .env = env,
                       .stdin_path = stdin_.string(),
                       .stdout_path = (dir_ / "stdout.txt").string(),
                       .stderr_path = (dir_ / "stderr.txt").string(),
                       .stderr_fd = stderr_fd};
  }

  [[nodiscard]] run_result wait_for(pid_t pid, bool read_stderr) const
  {
    return gpusort::test_support::wait_cli(pid, dir_ / "stdout.txt",
                                           read_stderr ? dir_ / "stderr.txt" : fs::path{});
  }

  /// gpusort sort --local with the test's configuration (tiny or default budget).
  run_result sort(std::vector<std::string> args) const
  {
    args.insert(args.begin(), "sort");
    args.insert(args.end(), {"--local", "--config", config_.string()});
    return run(args);
  }

  void gen(const std::string& dtype, const std::string& dist, const std::string& count,
           const std::string& out, const std::string& values_out = "",
           const std::string& value_bytes = "8", const std::string& seed = "7") const
  {
    std::vector<std::string> args{"gen",   "--dtype", dtype, "--dist", dist, "--count",
                                  count,   "--seed",  seed,  "--out",  out,  "--quiet"};
    if (!values_out.empty())
      args.insert(args.end(), {"--values-out", values_out, "--value-bytes", value_bytes});
    const run_result r = run(args);
    ASSERT_EQ(r.code, 0) << r.err;
    ASSERT_TRUE(r.out.empty() && r.err.empty()) << r.out << r.err;
  }

  /// The stderr of a failed command: exactly one line, starting with "gpusort: ".
  static void expect_one_error_line(const run_result& r)
  {
    EXPECT_EQ(r.err.rfind("gpusort: ", 0), 0U) << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_EQ(r.err.back(), '\n') << r.err;
  }

  fs::path dir_;
  fs::path config_;
  fs::path stdin_{"/dev/null"};  ///< what run() gives the command as its standard input
};

// ---- round trips ---------------------------------------------------------------------------

class RoundTrip : public Cli, public ::testing::WithParamInterface<const char*> {};

// 20000 elements: past a 64 KiB budget for every dtype, so that the tiny run sorts out of core.
TEST_P(RoundTrip, GenSortVerifyBothOrdersWithAndWithoutValuesInPlaceAndOut)
{
  const key_type& t = type_named(GetParam());
  const std::map<std::string, std::string> dists{{"u32", "uniform"}, {"i32", "detdupes"},
                                                 {"u64", "staggered"}, {"i64", "fewunique"},
                                                 {"f32", "nanmix"}, {"f64", "nanmix"}};
  const std::string n = "20003";
  for (const std::string vb : {"", "4", "8"}) {
    gen(t.name, dists.at(t.name), n, path("d.bin"), vb.empty() ? "" : path("v.bin"),
        vb.empty() ? "8" : vb);
    const bytes keys = slurp(path("d.bin"));
    const bytes values = vb.empty() ? bytes{} : slurp(path("v.bin"));
    ASSERT_EQ(keys.size(), 20003U * t.bytes);
    const unsigned value_bytes = vb.empty() ? 0 : static_cast<unsigned>(std::stoi(vb));
    ASSERT_EQ(values.size(), 20003U * value_bytes);
    for (const bool descending : {false, true}) {
      for (const bool in_place : {false, true}) {
        SCOPED_TRACE(std::string{t.name} + (descending ? " descending" : " ascending") +
                     (vb.empty() ? " keys only" : " values of " + vb + " bytes") +
                     (in_place ? " in place" : " --out"));
        spit(path("k.bin"), keys);
        if (!vb.empty()) spit(path("vals.bin"), values);
        std::vector<std::string> args{path("k.bin"), "--dtype", t.name, "--quiet"};
        if (descending) args.emplace_back("--descending");
        if (!vb.empty())
          args.insert(args.end(), {"--values", path("vals.bin"), "--value-bytes", vb});
        if (!in_place) {
          args.insert(args.end(), {"--out", path("s.bin")});
          if (!vb.empty()) args.insert(args.end(), {"--values-out", path("vs.bin")});
        }
        const run_result s = sort(args);
        ASSERT_EQ(s.code, 0) << s.err;
        EXPECT_TRUE(s.out.empty() && s.err.empty()) << "--quiet: " << s.out << s.err;
        const std::string sorted_keys = in_place ? path("k.bin") : path("s.bin");
        const std::string sorted_values = in_place ? path("vals.bin") : path("vs.bin");
        if (!in_place) {
          EXPECT_TRUE(same_bytes(slurp(path("k.bin")), keys)) << "the input changed";
          if (!vb.empty()) {
            EXPECT_TRUE(same_bytes(slurp(path("vals.bin")), values)) << "the input changed";
          }
        }
        const bytes sk = slurp(sorted_keys);
        const bytes sv = vb.empty() ? bytes{} : slurp(sorted_values);
        EXPECT_EQ(reference_check(t, keys, sk, descending, vb.empty() ? nullptr : &values,
                                  vb.empty() ? nullptr : &sv, value_bytes),
                  "");
        const auto verify = [&](bool expect_descending) {
          std::vector<std::string> a{"verify", sorted_keys, "--dtype", t.name, "--original",
                                     path("d.bin")};
          if (expect_descending) a.emplace_back("--descending");
          if (!vb.empty())
            a.insert(a.end(), {"--values", sorted_values, "--original-values", path("v.bin"),
                               "--value-bytes", vb});
          return run(a);
        };
        const run_result v = verify(descending);
        EXPECT_EQ(v.code, 0) << v.err;
        EXPECT_EQ(v.out.rfind("ok: 20003 elements sorted ", 0), 0U) << v.out;
        // The opposite order fails: every distribution here has distinct keys.
        const run_result opposite = verify(!descending);
        EXPECT_EQ(opposite.code, 1) << opposite.out;
        expect_one_error_line(opposite);
      }
    }
  }
  // Only the files the test wrote: no temporaries left behind.
  std::vector<std::string> expected{"d.bin", "k.bin", "s.bin", "v.bin", "vals.bin", "vs.bin"};
  EXPECT_EQ(work_files(), expected);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, RoundTrip,
                         ::testing::Values("u32", "i32", "u64", "i64", "f32", "f64"));

TEST_F(Cli, EmptyAndSingleElementFiles)
{
  for (const std::string n : {"0", "1"}) {
    SCOPED_TRACE("count " + n);
    gen("f64", "nanmix", n, path("d.bin"), path("v.bin"), "4");
    EXPECT_EQ(fs::file_size(path("d.bin")), 8U * std::stoul(n));
    EXPECT_EQ(fs::file_size(path("v.bin")), 4U * std::stoul(n));
    const run_result s = sort({path("d.bin"), "--dtype", "f64", "--values", path("v.bin"),
                               "--value-bytes", "4", "--out", path("s.bin"), "--values-out",
                               path("vs.bin"), "--quiet"});
    ASSERT_EQ(s.code, 0) << s.err;
    EXPECT_TRUE(same_bytes(slurp(path("s.bin")), slurp(path("d.bin"))));
    EXPECT_TRUE(same_bytes(slurp(path("vs.bin")), slurp(path("v.bin"))));
    const run_result in_place = sort({path("d.bin"), "--dtype", "f64", "--descending", "--json"});
    ASSERT_EQ(in_place.code, 0) << in_place.err;
    EXPECT_NE(in_place.out.find("\"elements\":" + n + ","), std::string::npos) << in_place.out;
    const run_result v = run({"verify", path("d.bin"), "--dtype", "f64", "--original",
                              path("s.bin"), "--values", path("vs.bin"), "--original-values",
                              path("v.bin"), "--value-bytes", "4"});
    EXPECT_EQ(v.code, 0) << v.err;
  }
}

TEST_F(Cli, SeparateOutputsNeverTouchTheInputs)
{
  gen("i64", "uniform", "20k", path("d.bin"), path("v.bin"));
  const bytes keys = slurp(path("d.bin"));
  const bytes values = slurp(path("v.bin"));
  fs::permissions(path("d.bin"), fs::perms::owner_read | fs::perms::group_read);
  fs::permissions(path("v.bin"), fs::perms::owner_read | fs::perms::group_read);
  const run_result s = sort({path("d.bin"), "--dtype", "i64", "--out", path("s.bin"), "--values",
                             path("v.bin"), "--values-out", path("vs.bin"), "--quiet"});
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_TRUE(same_bytes(slurp(path("d.bin")), keys));
  EXPECT_TRUE(same_bytes(slurp(path("v.bin")), values));
  const bytes sv = slurp(path("vs.bin"));
  EXPECT_EQ(reference_check(type_named("i64"), keys, slurp(path("s.bin")), false, &values, &sv,
                            8),
            "");
}

TEST_F(Cli, InPlaceKeepsPermissionsAndFollowsSymbolicLinks)
{
  gen("u32", "reverse", "30000", path("d.bin"));
  const bytes keys = slurp(path("d.bin"));
  fs::permissions(path("d.bin"), fs::perms::owner_read | fs::perms::owner_write |
                                     fs::perms::group_read);
  fs::create_symlink("d.bin", path("link.bin"));
  const run_result s = sort({path("link.bin"), "--dtype", "u32", "--quiet"});
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_TRUE(fs::is_symlink(path("link.bin")));
  EXPECT_EQ(fs::status(path("d.bin")).permissions(),
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  EXPECT_EQ(reference_check(type_named("u32"), keys, slurp(path("d.bin")), false), "");
  // --out naming the input itself is an in-place sort too.
  const run_result again =
      sort({path("d.bin"), "--dtype", "u32", "--descending", "--out", path("d.bin"), "--quiet"});
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_TRUE(same_bytes(slurp(path("d.bin")), keys)) << "reverse data sorted descending is itself";
  EXPECT_EQ(work_files(), (std::vector<std::string>{"d.bin", "link.bin"}));
}

// ---- reports -------------------------------------------------------------------------------

TEST_F(Cli, JsonReportIsOneObjectWithEveryField)
{
  const std::uint64_t n = tiny_budget() ? 20000 : 1000000;
  gen("u64", "uniform", tiny_budget() ? "20k" : "1M", path("d.bin"), path("v.bin"), "8");
  const run_result s = sort({path("d.bin"), "--dtype", "u64", "--values", path("v.bin"),
                             "--json"});
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(s.err, "");
  ASSERT_EQ(count_lines(s.out), 1) << s.out;
  const auto json = parse_flat_json(s.out);
  ASSERT_TRUE(json.has_value()) << s.out;
  for (const char* key : {"elements", "bytes", "seconds", "wall_seconds", "peak_rss_bytes",
                          "rate", "chunks", "rounds", "compensated_chunks", "host_memory_limit",
                          "host_memory_bytes"}) {
    ASSERT_TRUE(json->contains(key) && json->at(key).number) << key << " in " << s.out;
  }
  ASSERT_TRUE(json->contains("engine") && json->at("engine").text) << s.out;
  ASSERT_TRUE(json->contains("path") && json->at("path").text) << s.out;
  ASSERT_TRUE(json->contains("devices") && json->at("devices").strings) << s.out;
  EXPECT_EQ(json->size(), 14U) << s.out;
  // Within the default budget (half the RAM), the fast path, whose memory it names.
  EXPECT_NE(*json->at("path").text, "lean") << s.out;
  EXPECT_GT(*json->at("host_memory_limit").number, *json->at("host_memory_bytes").number);
  const auto num = [&](const char* key) { return *json->at(key).number; };
  // The command's own time holds the sort's, and reading and publishing the files.
  EXPECT_GE(num("wall_seconds"), num("seconds"));
  // The process held at least its own data once (the CPU engine sorts files in memory).
  EXPECT_GE(num("peak_rss_bytes"), num("bytes"));
  EXPECT_EQ(num("elements"), static_cast<double>(n));
  EXPECT_EQ(num("bytes"), static_cast<double>(n * 16));
  EXPECT_GT(num("seconds"), 0.0);
  EXPECT_NEAR(num("rate"), num("bytes") / num("seconds"), 1e-6 * num("rate"));
  EXPECT_EQ(*json->at("devices").strings, std::vector<std::string>{"cpu"});
  EXPECT_FALSE(json->at("engine").text->empty());
  EXPECT_LE(num("compensated_chunks"), num("chunks"));
  if (tiny_budget()) {
    EXPECT_EQ(num("rounds"), 2);
    EXPECT_GT(num("chunks"), 1);
  } else {
    EXPECT_EQ(num("rounds"), 1);
    EXPECT_EQ(num("chunks"), 1);
  }
}

TEST_F(Cli, JsonReportSaysWhatCompressedRunsKept)
{
  // Out of core with compress_runs on: the report adds the round-1 keys raw and as stored.
  spit(config_, "devices: cpu\ndevice_memory_budget: 64KiB\ncompress_runs: on\n");
  gen("u64", "uniform", "20k", path("d.bin"));
  const run_result s =
      sort({path("d.bin"), "--dtype", "u64", "--out", path("o.bin"), "--json"});
  ASSERT_EQ(s.code, 0) << s.err;
  const auto json = parse_flat_json(s.out);
  ASSERT_TRUE(json.has_value()) << s.out;
  ASSERT_TRUE(json->contains("round1_key_bytes") && json->contains("round1_stored_bytes"))
      << s.out;
  EXPECT_EQ(*json->at("rounds").number, 2);
  EXPECT_EQ(*json->at("round1_key_bytes").number, 20000.0 * 8);
  // Sorted runs of 20k uniform keys keep their deltas in fewer bits than the keys (83% here).
  EXPECT_GT(*json->at("round1_stored_bytes").number, 0);
  EXPECT_LT(*json->at("round1_stored_bytes").number, 20000.0 * 8);
  EXPECT_EQ(reference_check(type_named("u64"), slurp(path("d.bin")), slurp(path("o.bin")), false),
            "");
}

TEST_F(Cli, ProfileSaysWhereTheTimeWentStepByStep)
{
  gen("u32", "uniform", tiny_budget() ? "30k" : "300k", path("d.bin"));
  const run_result s = sort({path("d.bin"), "--dtype", "u32", "--out", path("o.bin"),
                             "--profile", "--quiet"});
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(s.out, "");
  // Every step once, in the order the command takes them, at times that never go back. The
  // engine closes on a thread of its own beside the outputs' sync and publication: its step
  // comes anywhere after "sorted", in its place in time.
  const std::vector<std::string> steps{"inputs opened", "outputs created",
                                       "engine started (devices opened)", "sorted",
                                       "outputs synced", "outputs published"};
  const std::string closed = "engine closed (its buffers freed, beside the outputs' sync)";
  std::istringstream lines{s.err};
  std::string line;
  std::size_t next = 0;
  std::size_t closed_after = 0;  // steps seen before the engine's closing; 0: not seen
  double last = 0;
  int rounds = 0;
  while (std::getline(lines, line)) {
    ASSERT_EQ(line.rfind("gpusort: profile: ", 0), 0U) << line;
    if (line.rfind("gpusort: profile: round ", 0) == 0) {  // a stage of the engine's
      if (line.find(" all round: ") != std::string::npos) ++rounds;
      continue;
    }
    const double at = std::stod(line.substr(std::string{"gpusort: profile: "}.size()));
    EXPECT_GE(at, last) << line;
    last = at;
    if (line.ends_with(") " + closed)) {
      EXPECT_EQ(closed_after, 0U) << "closed twice: " << s.err;
      closed_after = next;
      continue;
    }
    ASSERT_LT(next, steps.size()) << line;
    EXPECT_TRUE(line.ends_with(") " + steps[next])) << line;
    ++next;
  }
  EXPECT_EQ(next, steps.size()) << s.err;
  EXPECT_GE(closed_after, 4U) << "the engine closes after it sorted: " << s.err;
  // The host device's rounds come with the steps: two out of core, none for a direct sort.
  EXPECT_EQ(rounds, tiny_budget() ? 2 : 0) << s.err;
  EXPECT_EQ(reference_check(type_named("u32"), slurp(path("d.bin")), slurp(path("o.bin")), false),
            "");

  const run_result j = sort({path("d.bin"), "--dtype", "u32", "--out", path("o.bin"),
                             "--profile", "--json"});
  ASSERT_EQ(j.code, 0) << j.err;
  ASSERT_EQ(count_lines(j.out), 1) << j.out;
  EXPECT_NE(j.out.find("\"timeline\":[{\"step\":\"inputs opened\",\"at\":"), std::string::npos)
      << j.out;
  EXPECT_NE(j.out.find("\"stages\":["), std::string::npos) << j.out;
  EXPECT_NE(j.out.find("{\"step\":\"outputs published\",\"at\":"), std::string::npos) << j.out;
}

TEST_F(Cli, StandardInputAndOutputCarryTheKeys)
{
  const key_type& t = type_named("u32");
  gen("u32", "uniform", tiny_budget() ? "30011" : "300007", path("d.bin"));
  const bytes keys = slurp(path("d.bin"));
  // - in, - out (the default for a stream): the sorted keys on stdout, the summary on stderr.
  stdin_ = path("d.bin");
  const run_result both = sort({"-", "--dtype", "u32"});
  ASSERT_EQ(both.code, 0) << both.err;
  EXPECT_EQ(reference_check(t, keys, both.out, false), "");
  EXPECT_EQ(both.err.rfind(tiny_budget() ? "sorted 30011 elements" : "sorted 300007 elements", 0),
            0U)
      << both.err;
  // - in, a file out: the summary on stdout as usual.
  const run_result to_file = sort({"-", "--dtype", "u32", "--out", path("o.bin"), "--descending",
                                   "--quiet"});
  ASSERT_EQ(to_file.code, 0) << to_file.err;
  EXPECT_EQ(to_file.out, "");
  EXPECT_EQ(reference_check(t, keys, slurp(path("o.bin")), true), "");
  // A file in, - out; the file stays as it was.
  stdin_ = "/dev/null";
  const run_result from_file = sort({path("d.bin"), "--dtype", "u32", "--out", "-",
                                     "--json"});
  ASSERT_EQ(from_file.code, 0) << from_file.err;
  EXPECT_EQ(reference_check(t, keys, from_file.out, false),
            "");
  EXPECT_NE(from_file.err.find("\"elements\":"), std::string::npos) << from_file.err;
  EXPECT_TRUE(same_bytes(slurp(path("d.bin")), keys));
  // Nothing in: nothing out.
  const run_result empty = sort({"-", "--dtype", "u32", "--quiet"});
  EXPECT_EQ(empty.code, 0) << empty.err;
  EXPECT_EQ(empty.out, "");
  // A pipe, as a shell makes it, into verify through another pipe.
  const std::string cli = GPUSORT_CLI;
  const std::string line = "'" + cli + "' gen --dtype f64 --dist nanmix --count 70001 --out - -q"
                           " | '" + cli + "' sort - --dtype f64 --local -q --config '" +
                           config_.string() + "' | '" + cli + "' verify - --dtype f64";
  EXPECT_EQ(std::system(("/bin/sh -c \"" + line + "\" > '" + path("v.txt") +
                         "' 2>&1").c_str()),
            0)
      << slurp(path("v.txt"));
  EXPECT_EQ(slurp(path("v.txt")).rfind("ok: 70001 elements sorted ascending", 0), 0U)
      << slurp(path("v.txt"));
  // Not a whole number of keys; values with a stream; values to stdout.
  spit(path("odd.bin"), bytes(13, '\x01'));
  stdin_ = path("odd.bin");
  const run_result odd = sort({"-", "--dtype", "u32"});
  EXPECT_EQ(odd.code, 65);
  EXPECT_EQ(odd.out, "");
  expect_one_error_line(odd);
  EXPECT_NE(odd.err.find("13 bytes"), std::string::npos) << odd.err;
  stdin_ = "/dev/null";
  EXPECT_EQ(sort({"-", "--dtype", "u32", "--values", path("d.bin")}).code, 64);
  EXPECT_EQ(run({"gen", "--dtype", "u32", "--dist", "uniform", "--count", "10", "--out",
                 path("k.bin"), "--values-out", "-"})
                .code,
            64);
  // gen to stdout gives the bytes gen gives a file.
  const run_result streamed = run({"gen", "--dtype", "u32", "--dist", "uniform", "--count", "1000",
                                   "--seed", "7", "--out", "-"});
  ASSERT_EQ(streamed.code, 0) << streamed.err;
  gen("u32", "uniform", "1000", path("g.bin"));
  EXPECT_TRUE(same_bytes(streamed.out, slurp(path("g.bin"))));
  EXPECT_EQ(streamed.err.rfind("wrote 1000 keys of u32", 0), 0U) << streamed.err;
}

TEST_F(Cli, SummaryLineUnlessQuietAndNoProgressWithoutATerminal)
{
  gen("i32", "gaussian", "12345", path("d.bin"));
  const run_result s = sort({path("d.bin"), "--dtype", "i32", "--out", path("s.bin")});
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(s.err, "") << "stderr is no terminal: no progress bar";
  EXPECT_EQ(count_lines(s.out), 1) << s.out;
  EXPECT_EQ(s.out.rfind("sorted 12345 elements (48.22 KiB) in ", 0), 0U) << s.out;
  EXPECT_NE(s.out.find(" GiB/s"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("engine cpu-"), std::string::npos) << s.out;
  for (const char* quiet : {"--quiet", "-q"}) {
    const run_result q = sort({path("d.bin"), "--dtype", "i32", "--out", path("s.bin"), quiet});
    ASSERT_EQ(q.code, 0) << q.err;
    EXPECT_EQ(q.out + q.err, "") << quiet;
  }
  // After --, -q is a file name like any other.
  const run_result after = run({"sort", "--local", "--config", config_.string(), "--dtype", "i32",
                                 "--out", path("s.bin"), "--", "-q"});
  EXPECT_EQ(after.code, 66) << after.err;
  EXPECT_NE(after.err.find("cannot read -q"), std::string::npos) << after.err;
  const run_result g = run({"gen", "--dtype", "u32", "--dist", "zero", "--count", "5",
                            "--out", path("z.bin")});
  ASSERT_EQ(g.code, 0) << g.err;
  EXPECT_EQ(g.out, "wrote 5 keys of u32 (zero, seed 1) to " + path("z.bin") + "\n");
}

/// Runs gpusort with stderr on a pseudo-terminal and returns what the terminal showed.
std::string run_on_terminal(const Cli& fixture, const std::function<pid_t(int)>& start)
{
  int master = -1;
  int slave = -1;
  if (::openpty(&master, &slave, nullptr, nullptr, nullptr) != 0) return "openpty failed";
  const pid_t pid = start(slave);
  ::close(slave);
  std::string shown;
  char buffer[4096];
  for (;;) {
    const ssize_t got = ::read(master, buffer, sizeof buffer);
    if (got <= 0) break;  // EIO once the child has exited and closed the terminal
    shown.append(buffer, static_cast<std::size_t>(got));
  }
  ::close(master);
  int status = 0;
  ::waitpid(pid, &status, 0);
  (void)fixture;
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    shown += "\n[exit status " + std::to_string(status) + "]";
  return shown;
}

class Terminal : public Cli {
 protected:
  std::string sort_on_terminal(const std::vector<std::string>& extra)
  {
    std::vector<std::string> args{"sort",         path("d.bin"),   "--dtype",
                                  "u64",          "--out",         path("s.bin"),
                                  "--local",      "--config",      config_.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    // run() waits for the child; here the parent must read the terminal meanwhile.
    return run_on_terminal(*this, [&](int tty) { return start_cli(command(args, {}, tty)); });
  }
};

TEST_F(Terminal, ProgressBarOnATerminalUnlessQuietOrJson)
{
  gen("u64", "uniform", "20000", path("d.bin"));
  const std::string shown = sort_on_terminal({});
  EXPECT_NE(shown.find('\r'), std::string::npos) << shown;
  EXPECT_NE(shown.find("100.0%"), std::string::npos) << shown;
  EXPECT_NE(shown.find("GiB/s"), std::string::npos) << shown;
  EXPECT_NE(shown.find(" s"), std::string::npos) << "the time since the start: " << shown;
  if (tiny_budget()) {
    EXPECT_NE(shown.find("round 1/2"), std::string::npos) << shown;
    EXPECT_NE(shown.find("round 2/2"), std::string::npos) << shown;
  } else {
    EXPECT_NE(shown.find("in-core sort"), std::string::npos) << shown;
  }
  EXPECT_EQ(count_lines(slurp(dir_ / "stdout.txt")), 1) << "the summary";
  // In place on the lean path (a budget that leaves the temporary no room): its two rounds, the
  // blocks it moves out of each place inside the second; with the permutation between the
  // rounds instead (GPUSORT_LEAN_ROUND2=permute), a bar for that too.
  {
    std::vector<std::string> args{"sort", path("d.bin"), "--dtype", "u64", "--local", "--config",
                                  config_.string()};
    const std::string lean = run_on_terminal(*this, [&](int tty) {
      return start_cli(command(args, {{"GPUSORT_LEAN", "1"}}, tty));
    });
    EXPECT_NE(lean.find("round 1/2"), std::string::npos) << lean;
    EXPECT_NE(lean.find("round 2/2"), std::string::npos) << lean;
    const std::string permuting = run_on_terminal(*this, [&](int tty) {
      return start_cli(
          command(args, {{"GPUSORT_LEAN", "1"}, {"GPUSORT_LEAN_ROUND2", "permute"}}, tty));
    });
    EXPECT_NE(permuting.find("round 1/2"), std::string::npos) << permuting;
    EXPECT_NE(permuting.find("permutation"), std::string::npos) << permuting;
    EXPECT_NE(permuting.find("round 2/2"), std::string::npos) << permuting;
  }
  EXPECT_EQ(sort_on_terminal({"--quiet"}), "");
  EXPECT_EQ(sort_on_terminal({"--json"}), "");
  EXPECT_EQ(reference_check(type_named("u64"), slurp(path("d.bin")), slurp(path("s.bin")), false),
            "");
}

// ---- verify --------------------------------------------------------------------------------

TEST_F(Cli, MessagesSayWhatWasMeant)
{
  const run_result option = run({"--bogus"});
  EXPECT_EQ(option.code, 64);
  EXPECT_NE(option.err.find("unknown option --bogus"), std::string::npos) << option.err;
  const run_result command = run({"bogus"});
  EXPECT_EQ(command.code, 64);
  EXPECT_NE(command.err.find("unknown command 'bogus'"), std::string::npos) << command.err;
  // status has no --local to suggest; sort does.
  const std::string nowhere = (dir_ / "no.sock").string();
  const run_result status = run({"status", "--socket", nowhere});
  EXPECT_EQ(status.code, 69);
  EXPECT_EQ(status.err.find("--local"), std::string::npos) << status.err;
  gen("u32", "uniform", "10", path("d.bin"));
  const run_result sorted = run({"sort", path("d.bin"), "--dtype", "u32", "--socket", nowhere});
  EXPECT_EQ(sorted.code, 69);
  EXPECT_NE(sorted.err.find("--local"), std::string::npos) << sorted.err;
}

TEST_F(Cli, VerifyWithoutAnOriginalChecksTheOrderAlone)
{
  gen("f64", "nanmix", "20000", path("d.bin"));
  ASSERT_EQ(sort({path("d.bin"), "--dtype", "f64", "--out", path("s.bin"), "--quiet"}).code, 0);
  const run_result ok = run({"verify", path("s.bin"), "--dtype", "f64"});
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_EQ(ok.out.rfind("ok: 20000 elements sorted ascending (order only", 0), 0U) << ok.out;
  const run_result wrong = run({"verify", path("s.bin"), "--dtype", "f64", "--descending"});
  EXPECT_EQ(wrong.code, 1);
  expect_one_error_line(wrong);
  EXPECT_NE(wrong.err.find("not sorted descending"), std::string::npos) << wrong.err;
  const run_result json = run({"verify", path("d.bin"), "--dtype", "f64", "--json"});
  EXPECT_EQ(json.code, 1);
  EXPECT_EQ(json.out.rfind("{\"ok\":false,\"elements\":20000,\"message\":", 0), 0U)
      << json.out;
}

TEST_F(Cli, VerifyDetectsCorruption)
{
  gen("f32", "gaussian", "5000", path("d.bin"), path("v.bin"), "4");
  ASSERT_EQ(sort({path("d.bin"), "--dtype", "f32", "--out", path("s.bin"), "--values",
                  path("v.bin"), "--value-bytes", "4", "--values-out", path("vs.bin"), "--quiet"})
                .code,
            0);
  const bytes sorted = slurp(path("s.bin"));
  const bytes values = slurp(path("vs.bin"));
  const std::vector<std::string> keys_only{"verify", path("s.bin"), "--dtype", "f32",
                                           "--original", path("d.bin")};
  std::vector<std::string> with_values = keys_only;
  with_values.insert(with_values.end(), {"--values", path("vs.bin"), "--original-values",
                                         path("v.bin"), "--value-bytes", "4"});
  ASSERT_EQ(run(keys_only).code, 0);
  ASSERT_EQ(run(with_values).code, 0);

  bytes swapped = sorted;  // two neighbours swapped: out of order
  std::swap_ranges(swapped.begin() + 4 * 100, swapped.begin() + 4 * 101, swapped.begin() + 4 * 101);
  bytes duplicated = sorted;  // still in order, but not a permutation
  std::copy_n(sorted.begin() + 4 * 2500, 4, duplicated.begin() + 4 * 2501);
  bytes truncated = sorted.substr(0, sorted.size() - 4);
  const bytes original = slurp(path("d.bin"));
  ASSERT_EQ(reference_check(type_named("f32"), original, sorted, false), "");
  for (const bytes* corrupt : {&swapped, &duplicated, &truncated}) {
    // The reference agrees that each is wrong.
    EXPECT_NE(reference_check(type_named("f32"), original, *corrupt, false), "");
    spit(path("s.bin"), *corrupt);
    const run_result r = run(keys_only);
    EXPECT_EQ(r.code, 1) << r.out << r.err;
    expect_one_error_line(r);
    EXPECT_EQ(r.err.rfind("gpusort: verification failed: ", 0), 0U) << r.err;
    EXPECT_EQ(r.out, "");
  }
  spit(path("s.bin"), sorted);
  bytes other_value = values;  // a value that travelled with the wrong key
  std::swap_ranges(other_value.begin(), other_value.begin() + 4, other_value.begin() + 4 * 4000);
  spit(path("vs.bin"), other_value);
  const run_result r = run(with_values);
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  expect_one_error_line(r);
  EXPECT_EQ(run(keys_only).code, 0) << "the keys alone are still fine";

  auto json_args = with_values;
  json_args.emplace_back("--json");
  const run_result j = run(json_args);
  EXPECT_EQ(j.code, 1);
  const auto json = parse_flat_json(j.out);
  ASSERT_TRUE(json.has_value()) << j.out;
  EXPECT_EQ(json->at("ok").boolean, false);
  EXPECT_EQ(json->at("elements").number, 5000.0);
  EXPECT_FALSE(json->at("message").text->empty());
  spit(path("vs.bin"), values);
  const auto ok = parse_flat_json(run(json_args).out);
  ASSERT_TRUE(ok.has_value());
  EXPECT_EQ(ok->at("ok").boolean, true);
}

// ---- gen -----------------------------------------------------------------------------------

TEST_F(Cli, GenCountsWithSuffixesAndSeeds)
{
  const std::vector<std::pair<std::string, std::uint64_t>> counts{
      {"0", 0},       {"1", 1},           {"2k", 2000},       {"3Ki", 3072},
      {"1M", 1000000}, {"1Mi", 1048576}, {"12345", 12345}};
  for (const auto& [count, n] : counts) {
    gen("u32", "uniform", count, path("d.bin"));
    EXPECT_EQ(fs::file_size(path("d.bin")), 4 * n) << count;
  }
  gen("i64", "uniform", "1000", path("a.bin"), path("va.bin"), "4", "3");
  gen("i64", "uniform", "1000", path("b.bin"), path("vb.bin"), "4", "3");
  gen("i64", "uniform", "1000", path("c.bin"), path("vc.bin"), "4", "4");
  EXPECT_EQ(fs::file_size(path("va.bin")), 4000U);
  EXPECT_TRUE(same_bytes(slurp(path("a.bin")), slurp(path("b.bin")))) << "same seed, same keys";
  EXPECT_TRUE(same_bytes(slurp(path("va.bin")), slurp(path("vb.bin")))) << "same seed, same values";
  EXPECT_FALSE(same_bytes(slurp(path("a.bin")), slurp(path("c.bin"))))
      << "another seed, other keys";
  // The option syntaxes: --name=value, and -- before a file name.
  const run_result r = run({"gen", "--dtype=u64", "--dist=sorted", "--count=1Ki", "--quiet",
                            "--out=" + path("e.bin")});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(fs::file_size(path("e.bin")), 8192U);
  const run_result s =
      run({"sort", "--dtype", "u64", "--quiet", "--local", "--config", config_.string(), "--",
           path("e.bin")});
  EXPECT_EQ(s.code, 0) << s.err;
}

// ---- errors --------------------------------------------------------------------------------

TEST_F(Cli, ErrorsGiveOneLineAndTheirExitCode)
{
  gen("u64", "uniform", "1000", path("d.bin"), path("v.bin"));
  gen("u64", "uniform", "999", path("short.bin"), path("v999.bin"));
  spit(path("odd.bin"), "1234567");
  spit(dir_ / "bad.yaml", "devices: cpu\nchunk_byte: 1MiB\n");
  spit(dir_ / "broken.yaml", "devices: [cpu\n");
  spit(dir_ / "small.yaml", "devices: cpu\ndevice_memory_budget: 1KiB\n");
  spit(dir_ / "budget.yaml", "devices: cpu\ndevice_memory_budget: 64KiB\n");
  // 17M: more than 64 KiB (the configuration's least budget, 4096 keys a chunk) sorts in two
  // rounds, which is up to 4096 chunks of 4096 since a small budget samples every key it needs.
  gen("u64", "uniform", "17M", path("big.bin"), path("bigv.bin"));
  const std::vector<std::string> before = work_files();
  std::map<std::string, bytes> contents;
  for (const std::string& f : before) contents[f] = slurp(path(f));
  const std::string d = path("d.bin");
  const std::string cfg = config_.string();

  struct error_case {
    std::vector<std::string> args;
    int code;
    std::vector<std::pair<std::string, std::string>> env{};
  };
  const std::vector<error_case> cases{
      // sort: arguments
      {{"sort", d}, 64},
      {{"sort", "--dtype", "u64"}, 64},
      {{"sort", d, d, "--dtype", "u64"}, 64},
      {{"sort", d, "--dtype", "u128"}, 64},
      {{"sort", d, "--dtype"}, 64},
      {{"sort", d, "--dtype", "u64", "--dtype", "u64"}, 64},
      {{"sort", d, "--dtype", "u64", "--bogus"}, 64},
      {{"sort", d, "-x", "--dtype", "u64"}, 64},
      {{"sort", d, "--dtype", "u64", "--quiet=yes"}, 64},
      {{"sort", d, "--dtype", "u64", "--values-out", path("vs.bin")}, 64},
      {{"sort", d, "--dtype", "u64", "--value-bytes", "8"}, 64},
      {{"sort", d, "--dtype", "u64", "--values", path("v.bin"), "--values-out", path("vs.bin")},
       64},
      {{"sort", d, "--dtype", "u64", "--values", path("v.bin"), "--out", path("s.bin")}, 64},
      {{"sort", d, "--dtype", "u64", "--values", path("v.bin"), "--value-bytes", "3"}, 64},
      {{"sort", d, "--dtype", "u64", "--values", path("v.bin"), "--out", path("s.bin"),
        "--values-out", path("s.bin")},
       64},
      {{"sort", d, "--dtype", "u64", "--values", d}, 64},
      // sort: files
      // (sysexits: 65 not a whole array, 66 no input, 73 cannot create the output)
      {{"sort", path("missing.bin"), "--dtype", "u64", "--config", cfg}, 66},
      {{"sort", dir_.string(), "--dtype", "u64", "--config", cfg}, 66},
      {{"sort", path("odd.bin"), "--dtype", "u64", "--config", cfg}, 65},
      {{"sort", d, "--dtype", "u64", "--out", path("no/such/dir/s.bin"), "--config", cfg}, 73},
      {{"sort", d, "--dtype", "u64", "--out", dir_.string(), "--config", cfg}, 73},
      {{"sort", d, "--dtype", "u64", "--out", "/dev/null", "--config", cfg}, 73},
      {{"sort", d, "--dtype", "u64", "--values", path("odd.bin"), "--config", cfg}, 65},
      {{"sort", d, "--dtype", "u64", "--values", path("v999.bin"), "--config", cfg}, 65},
      {{"sort", d, "--dtype", "u64", "--values", path("missing.bin"), "--config", cfg}, 66},
      // sort: configuration
      {{"sort", d, "--dtype", "u64", "--config", (dir_ / "bad.yaml").string()}, 78},
      {{"sort", d, "--dtype", "u64", "--config", (dir_ / "broken.yaml").string()}, 78},
      {{"sort", d, "--dtype", "u64", "--config", (dir_ / "absent.yaml").string()}, 78},
      {{"sort", d, "--dtype", "u64"}, 78, {{"GPUSORT_CONFIG", (dir_ / "bad.yaml").string()}}},
      {{"sort", d, "--dtype", "u64", "--config", (dir_ / "small.yaml").string()}, 78},
      // a budget too small for 17M elements: the engine's configuration error, raised after the
      // temporaries exist, in place and into --out
      {{"sort", path("big.bin"), "--dtype", "u64", "--config", (dir_ / "budget.yaml").string()},
       78},
      {{"sort", path("big.bin"), "--dtype", "u64", "--values", path("bigv.bin"), "--config",
        (dir_ / "budget.yaml").string()},
       78},
      {{"sort", path("big.bin"), "--dtype", "u64", "--out", path("s.bin"), "--config",
        (dir_ / "budget.yaml").string()},
       78},
      // gen
      {{"gen", "--dtype", "u64", "--dist", "uniform", "--count", "10"}, 64},
      {{"gen", "--dtype", "u64", "--dist", "normal", "--count", "10", "--out", path("x.bin")},
       64},
      {{"gen", "--dtype", "u64", "--dist", "nanmix", "--count", "10", "--out", path("x.bin")},
       64},
      {{"gen", "--dtype", "q8", "--dist", "uniform", "--count", "10", "--out", path("x.bin")},
       64},
      {{"gen", "--dtype", "u64", "--dist", "uniform", "--count", "10x", "--out", path("x.bin")},
       64},
      {{"gen", "--dtype", "u64", "--dist", "uniform", "--count", "-1", "--out", path("x.bin")},
       64},
      {{"gen", "--dtype", "u64", "--dist", "uniform", "--count", "16Ti", "--count", "1",
        "--out", path("x.bin")},
       64},
      {{"gen", "--dtype", "u64", "--dist", "uniform", "--count", "4000000T", "--out",
        path("x.bin")},
       64},
      {{"gen", "--dtype", "u64", "--dist", "uniform", "--count", "20000000T", "--out",
        path("x.bin")},
       64},
      {{"gen", "--dtype", "u64", "--dist", "uniform", "--count", "10", "--seed", "x", "--out",
        path("x.bin")},
       64},
      {{"gen", "--dtype", "u64", "--dist", "uniform", "--count", "10", "--out", path("x.bin"),
        "--values-out", path("x.bin")},
       64},
      {{"gen", "--dtype", "u64", "--dist", "uniform", "--count", "10", "--out", path("x.bin"),
        "--value-bytes", "4"},
       64},
      {{"gen", "--dtype", "u64", "--dist", "uniform", "--count", "10", "--out", path("x.bin"),
        "extra"},
       64},
      {{"gen", "--dtype", "u64", "--dist", "uniform", "--count", "10", "--out",
        path("no/dir/x.bin")},
       73},
      {{"gen", "--dtype", "u64", "--dist", "uniform", "--count", "10", "--out", path("x.bin"),
        "--values-out", path("no/dir/v.bin")},
       73},
      // verify
      {{"verify", d, "--dtype", "u64"}, 1},  // no original: the order alone, and d is not sorted
      {{"verify", d, "--dtype", "u64", "--values", path("v.bin")}, 64},
      {{"verify", "--dtype", "u64", "--original", d}, 64},
      {{"verify", d, "--original", d}, 64},
      {{"verify", d, "--dtype", "u64", "--original", d, "--values", path("v.bin")}, 64},
      {{"verify", d, "--dtype", "u64", "--original", path("missing.bin")}, 66},
      {{"verify", path("odd.bin"), "--dtype", "u64", "--original", d}, 65},
      {{"verify", d, "--dtype", "u64", "--original", d, "--values", path("v999.bin"),
        "--original-values", path("v.bin")},
       65},
      {{"verify", path("short.bin"), "--dtype", "u64", "--original", d}, 1},
      // the command itself
      {{}, 64},
      {{"frobnicate"}, 64},
      {{"help", "frobnicate"}, 64},
      {{"--bogus"}, 64},
  };
  for (const error_case& c : cases) {
    std::string shown;
    for (const std::string& a : c.args) shown += a + " ";
    SCOPED_TRACE(shown);
    // These are the embedded engine's errors: sorts run --local (the daemon's are below).
    std::vector<std::string> args = c.args;
    if (!args.empty() && args.front() == "sort") args.push_back("--local");
    const run_result r = run(args, c.env);
    EXPECT_EQ(r.code, c.code) << r.err;
    expect_one_error_line(r);
    EXPECT_EQ(r.out, "");
  }
  // Nothing written, nothing left behind, every input as it was.
  EXPECT_EQ(work_files(), before);
  for (const auto& [f, data] : contents) EXPECT_TRUE(slurp(path(f)) == data) << f << " changed";
}

TEST_F(Cli, ReadOnlyFileIsNotSortedInPlace)
{
  if (::geteuid() == 0) GTEST_SKIP() << "root may write any file";
  gen("u64", "uniform", "1000", path("d.bin"));
  const bytes keys = slurp(path("d.bin"));
  fs::permissions(path("d.bin"), fs::perms::owner_read);
  const run_result r = sort({path("d.bin"), "--dtype", "u64"});
  EXPECT_EQ(r.code, 77);  // EX_NOPERM
  expect_one_error_line(r);
  EXPECT_TRUE(same_bytes(slurp(path("d.bin")), keys));
}

TEST_F(Cli, TerminatedSortLeavesTheOriginalAndNoTemporary)
{
  // Its own configuration: a million pairs is more than the tiny budget can plan.
  spit(config_, "devices: cpu\nhost_threads: 1\n");
  gen("u64", "uniform", "1M", path("d.bin"), path("v.bin"));
  const bytes keys = slurp(path("d.bin"));
  const pid_t pid = start_cli(cli_command{.args = {"sort", path("d.bin"), "--dtype", "u64",
                                                    "--values", path("v.bin"), "--local",
                                                    "--config", config_.string()}});
  // Signal as soon as both temporaries exist, which is before the engine starts.
  bool seen = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds{20};
  while (!seen && std::chrono::steady_clock::now() < deadline) {
    int temporaries = 0;
    for (const std::string& f : work_files())
      temporaries += f.find(".gpusort-") != std::string::npos ? 1 : 0;
    seen = temporaries == 2;
    if (!seen) std::this_thread::sleep_for(std::chrono::microseconds{200});
  }
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(seen) << "the temporaries never appeared";
  if (WIFEXITED(status)) {
    // It won the race and finished: then the result must be complete.
    EXPECT_EQ(WEXITSTATUS(status), 0);
    EXPECT_EQ(reference_check(type_named("u64"), keys, slurp(path("d.bin")), false), "");
  } else {
    ASSERT_TRUE(WIFSIGNALED(status));
    EXPECT_EQ(WTERMSIG(status), SIGTERM);
    EXPECT_TRUE(same_bytes(slurp(path("d.bin")), keys));
  }
  EXPECT_EQ(work_files(), (std::vector<std::string>{"d.bin", "v.bin"}));
}

// Sizes around the engine's 1 MiB read and write blocks, keys and values in separate files, in
// place and to another file: every byte of every block must land where it belongs.
TEST_F(Cli, FilesAroundTheIoBlockSize)
{
  // Tiny: a budget that still sorts out of core, but can plan a quarter million pairs.
  if (tiny_budget()) spit(config_, "devices: cpu\ndevice_memory_budget: 1MiB\n");
  const key_type& t = type_named("u64");
  for (const std::string n : {"131071", "131072", "131073", "262145"}) {
    gen("u64", "uniform", n, path("d.bin"), path("v.bin"), "4");
    const bytes keys = slurp(path("d.bin"));
    const bytes values = slurp(path("v.bin"));
    for (const bool in_place : {false, true}) {
      SCOPED_TRACE("n=" + n + (in_place ? " in place" : " --out"));
      spit(path("k.bin"), keys);
      spit(path("w.bin"), values);
      std::vector<std::string> args{path("k.bin"), "--dtype",       "u64", "--values",
                                    path("w.bin"), "--value-bytes", "4",   "--quiet"};
      if (!in_place)
        args.insert(args.end(), {"--out", path("s.bin"), "--values-out", path("t.bin")});
      const run_result r = sort(args);
      ASSERT_EQ(r.code, 0) << r.err;
      const bytes sk = slurp(in_place ? path("k.bin") : path("s.bin"));
      const bytes sv = slurp(in_place ? path("w.bin") : path("t.bin"));
      EXPECT_EQ(reference_check(t, keys, sk, false, &values, &sv, 4), "");
    }
  }
}

// An output in tmpfs is written into its mapping, its pages made ahead by a thread: the same
// bytes as through a disk, keys and values, in place and to another file, nothing left over.
TEST_F(Cli, OutputsInTmpfsAreWrittenThroughTheirMapping)
{
  struct statfs info {};
  if (::statfs("/dev/shm", &info) != 0 || info.f_type != 0x01021994)
    GTEST_SKIP() << "no tmpfs at /dev/shm";
  if (tiny_budget()) spit(config_, "devices: cpu\ndevice_memory_budget: 1MiB\n");
  const fs::path shm = fs::path{"/dev/shm"} / ("gpusort-cli-" + std::to_string(::getpid()));
  fs::remove_all(shm);
  fs::create_directories(shm);
  const key_type& t = type_named("f64");
  gen("f64", "nanmix", "300007", path("d.bin"), path("v.bin"), "8");
  const bytes keys = slurp(path("d.bin"));
  const bytes values = slurp(path("v.bin"));
  spit(shm / "k.bin", keys);
  spit(shm / "w.bin", values);
  const run_result out = sort({(shm / "k.bin").string(), "--dtype", "f64", "--values",
                               (shm / "w.bin").string(), "--out", (shm / "s.bin").string(),
                               "--values-out", (shm / "t.bin").string(), "--quiet"});
  ASSERT_EQ(out.code, 0) << out.err;
  bytes sk = slurp(shm / "s.bin"), sv = slurp(shm / "t.bin");
  EXPECT_EQ(reference_check(t, keys, sk, false, &values, &sv, 8), "");
  EXPECT_TRUE(same_bytes(slurp(shm / "k.bin"), keys)) << "the input changed";
  const run_result in_place = sort({(shm / "k.bin").string(), "--dtype", "f64", "--values",
                                    (shm / "w.bin").string(), "--descending", "--quiet"});
  ASSERT_EQ(in_place.code, 0) << in_place.err;
  sk = slurp(shm / "k.bin");
  sv = slurp(shm / "w.bin");
  EXPECT_EQ(reference_check(t, keys, sk, true, &values, &sv, 8), "");
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator{shm}) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"k.bin", "s.bin", "t.bin", "w.bin"}));
  fs::remove_all(shm);
}

// A disk that cannot take the output (here the file size limit, which the kernel enforces like
// a full disk: EFBIG): one clear line, exit 73, the input as it was and no temporary left.
// Issue 43: a kill -9 or an OOM kill left a full-size hidden temporary that no later run
// removed. The next sort of that output removes those of processes that no longer exist, only
// ours (this user's, our names, not locked by a writer still at work), and says so.
TEST_F(Cli, StaleTemporariesOfDeadWritersAreRemovedByTheNextSort)
{
  gen("u64", "uniform", "1000", path("a.bin"));
  const pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  const std::string d = std::to_string(dead);
  const std::vector<std::string> stale{".a.bin.gpusort-" + d + "-1804289383.tmp",  // the CLI's
                                       ".a.bin.gpusort-" + d + "-b030eab1.tmp",    // Python's
                                       ".s.bin.gpusort-" + d + "-846930886.tmp"};  // --out's
  const std::vector<std::string> kept{
      ".a.bin.gpusort-" + std::to_string(::getpid()) + "-1.tmp",  // a writer that runs
      ".a.bin.gpusort-" + d + "-2.tmp",                          // locked: still written
      ".a.bin.gpusort-" + d + "-3.old",                          // a replaced file kept
      ".b.bin.gpusort-" + d + "-4.tmp",                          // another output's
      ".a.bin.gpusort-" + d + "-x5.tmp"};                        // not a name of ours
  for (const std::string& name : stale) spit(path(name), std::string(8192, 'x'));
  for (const std::string& name : kept) spit(path(name), "kept");
  const int holder = ::open(path(kept[1]).c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_EQ(::flock(holder, LOCK_EX), 0);
  run_result r = sort({path("a.bin"), "--dtype", "u64"});
  ASSERT_EQ(r.code, 0) << r.err;
  for (const std::string& name : {stale[0], stale[1]}) {
    EXPECT_FALSE(fs::exists(path(name))) << name;
    EXPECT_NE(r.err.find("gpusort: warning: removed " + path(name) + ", a temporary (8.00 KiB) "
                         "left by process " + d + ", which no longer runs"),
              std::string::npos)
        << r.err;
  }
  EXPECT_TRUE(fs::exists(path(stale[2]))) << "not an output of this sort";
  r = sort({path("a.bin"), "--dtype", "u64", "--out", path("s.bin"), "--quiet"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(fs::exists(path(stale[2])));
  EXPECT_NE(r.err.find("removed " + path(stale[2])), std::string::npos) << r.err;
  ::close(holder);
  for (const std::string& name : kept) EXPECT_TRUE(fs::exists(path(name))) << name;
}

TEST_F(Cli, AnOutputThatDoesNotFitLeavesTheInputAndNoTemporary)
{
  gen("u64", "uniform", "200k", path("d.bin"));
  const bytes keys = slurp(path("d.bin"));
  for (const bool in_place : {true, false}) {
    SCOPED_TRACE(in_place ? "in place" : "--out");
    std::vector<std::string> a{"sort",  path("d.bin"), "--dtype",        "u64",
                               "--local", "--config",  config_.string()};
    if (!in_place) a.insert(a.end(), {"--out", path("s.bin")});
    cli_command c = command(a);
    c.stdout_path = "/dev/null";
    c.in_child = [] {
      ::signal(SIGXFSZ, SIG_IGN);  // a write past the limit then fails with EFBIG
      const rlimit limit{.rlim_cur = 100'000, .rlim_max = 100'000};
      ::setrlimit(RLIMIT_FSIZE, &limit);
    };
    const pid_t pid = start_cli(c);
    const run_result r = wait_for(pid, true);
    EXPECT_EQ(r.code, 73) << r.err;  // EX_CANTCREAT
    expect_one_error_line(r);
    EXPECT_NE(r.err.find(std::strerror(EFBIG)), std::string::npos) << r.err;
    EXPECT_TRUE(same_bytes(slurp(path("d.bin")), keys));
    EXPECT_EQ(work_files(), std::vector<std::string>{"d.bin"});
  }
}

// A real full disk: a tmpfs of 24 MiB (mounted where the test may, skipped elsewhere) that holds
// a 16 MiB input and 4 MiB besides, and a 16 MiB output to another file or in place (through a
// temporary beside it): one clear line naming the lack of space, exit 73 or 74, the input as
// it was, and nothing else left there.
TEST_F(Cli, AFullTmpfsLeavesTheInputAndNoTemporary)
{
  const gpusort::test_support::small_tmpfs small{"24m"};
  if (!small.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here: " << small.error();
  const fs::path in = fs::path{small.path()} / "d.bin";
  gen("u64", "uniform", "2Mi", in.string());  // 16 MiB: the output (or temporary) cannot fit
  const fs::path filler = fs::path{small.path()} / "filler.bin";
  spit(filler, bytes(std::size_t{4} << 20, 'f'));  // 20 MiB used of 24
  const bytes keys = slurp(in);
  for (const bool in_place : {false, true}) {
    SCOPED_TRACE(in_place ? "in place" : "--out");
    std::vector<std::string> a{in.string(), "--dtype", "u64", "--quiet"};
    if (!in_place) a.insert(a.end(), {"--out", (fs::path{small.path()} / "s.bin").string()});
    const run_result r = sort(a);
    EXPECT_TRUE(r.code == 73 || r.code == 74) << r.code << ": " << r.err;
    expect_one_error_line(r);
    // The CLI sees the lack of room before it starts (the engine's own ENOSPC, room taken
    // while a job runs: FileArray.AFullTmpfsIsAnIoErrorWhicheverWayItsPagesAreMade).
    EXPECT_NE(r.err.find("bytes free on its filesystem"), std::string::npos) << r.err;
    EXPECT_TRUE(same_bytes(slurp(in), keys)) << "the input changed";
    std::vector<std::string> left;
    for (const auto& e : fs::directory_iterator{small.path()})
      left.push_back(e.path().filename().string());
    std::sort(left.begin(), left.end());
    EXPECT_EQ(left, (std::vector<std::string>{"d.bin", "filler.bin"}));
  }
}

TEST_F(Cli, AReadOnlyOutputFolderIsAClearError)
{
  if (::geteuid() == 0) GTEST_SKIP() << "root may write into any folder";
  gen("u32", "uniform", "1000", path("d.bin"));
  fs::create_directories(dir_ / "locked");
  fs::permissions(dir_ / "locked", fs::perms::owner_read | fs::perms::owner_exec);
  const run_result r =
      sort({path("d.bin"), "--dtype", "u32", "--out", (dir_ / "locked" / "s.bin").string()});
  fs::permissions(dir_ / "locked", fs::perms::owner_all);
  EXPECT_EQ(r.code, 77);  // EX_NOPERM
  expect_one_error_line(r);
  EXPECT_NE(r.err.find("s.bin"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::is_empty(dir_ / "locked"));
}

// ---- help ----------------------------------------------------------------------------------

TEST_F(Cli, HelpAndVersion)
{
  const run_result overview = run({"--help"});
  EXPECT_EQ(overview.code, 0);
  EXPECT_EQ(overview.out.rfind("usage: gpusort <command>", 0), 0U) << overview.out;
  for (const char* cmd : {"gen", "sort", "verify", "status"})
    EXPECT_NE(overview.out.find(std::string{"  "} + cmd + " "), std::string::npos) << cmd;
  EXPECT_EQ(run({"help"}).out, overview.out);
  EXPECT_EQ(run({"help", "help"}).out, overview.out);

  const run_result sort_help = run({"sort", "--help"});
  EXPECT_EQ(sort_help.code, 0);
  EXPECT_EQ(sort_help.err, "");
  EXPECT_EQ(sort_help.out.rfind("usage: gpusort sort FILE [--dtype T]", 0), 0U) << sort_help.out;
  EXPECT_NE(sort_help.out.find("sort in this process with the embedded engine, not the daemon"),
            std::string::npos)
      << sort_help.out;
  for (const char* option : {"--out", "--descending", "--values", "--value-bytes", "--values-out",
                             "--socket", "--local", "--config", "--json", "--quiet"})
    EXPECT_NE(sort_help.out.find(std::string{"  "} + option + " "), std::string::npos) << option;
  EXPECT_EQ(run({"help", "sort"}).out, sort_help.out);
  // --help wins over other arguments, even wrong ones.
  EXPECT_EQ(run({"sort", "--bogus", "-h"}).out, sort_help.out);

  const run_result gen_help = run({"gen", "--help"});
  EXPECT_EQ(gen_help.code, 0);
  for (const char* dist : {"uniform", "gaussian", "bucket", "staggered", "sorted", "reverse",
                           "zero", "detdupes", "fewunique", "nanmix"})
    EXPECT_NE(gen_help.out.find(dist), std::string::npos) << dist;
  EXPECT_EQ(run({"verify", "--help"}).code, 0);

  const run_result v = run({"--version"});
  EXPECT_EQ(v.code, 0);
  EXPECT_EQ(v.out, "gpusort " GPUSORT_EXPECTED_VERSION "\n");
}

TEST_F(Cli, LocalFlagAndConfigFromTheEnvironment)
{
  gen("f64", "sorted", "20000", path("d.bin"));
  const bytes keys = slurp(path("d.bin"));
  const run_result r = run({"sort", path("d.bin"), "--dtype", "f64", "--descending", "--local",
                            "--json"},
                           {{"GPUSORT_CONFIG", config_.string()}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("\"devices\":[\"cpu\"]"), std::string::npos) << r.out;
  if (tiny_budget()) {
    EXPECT_NE(r.out.find("\"rounds\":2"), std::string::npos) << r.out;
  }
  EXPECT_EQ(reference_check(type_named("f64"), keys, slurp(path("d.bin")), true), "");
  // --config wins over the environment.
  spit(dir_ / "bad.yaml", "no_such_key: 1\n");
  const run_result c = run({"sort", path("d.bin"), "--dtype", "f64", "--quiet", "--local",
                            "--config", config_.string()},
                           {{"GPUSORT_CONFIG", (dir_ / "bad.yaml").string()}});
  EXPECT_EQ(c.code, 0) << c.err;
}

// ---- .npy files, stable sorts, NumPy's float order, argsort ---------------------------------
//
// References come from tests/client/npy_reference.hpp: headers built by hand as np.save writes
// them, results from std::stable_sort with NumPy's or totalOrder's comparator.

namespace ref = npy_reference;

/// Empty, one, small primes, and primes past the tiny budget (64 KiB) for every key type, so
/// that with GPUSORT_TEST_BUDGET=tiny the sort runs out of core over several chunks, equal keys
/// straddling chunk boundaries.
const std::vector<std::size_t> npy_sizes{0, 1, 2, 7, 7919, 20011};

class Npy : public Cli, public ::testing::WithParamInterface<const char*> {};

// A .npy file of every key type, in both orders, stable or not, in place and into --out: the
// header comes back byte for byte, in each version NumPy writes (and the 16-byte padding of
// NumPy before 1.14), and the data is np.sort's: NumPy's float order by default for .npy files.
TEST_P(Npy, SortsTheDataAndKeepsTheHeaderByteForByte)
{
  const std::string type = GetParam();
  ref::visit_type(type, [&]<typename K>() {
    for (std::size_t i = 0; i < npy_sizes.size(); ++i) {
      const std::size_t n = npy_sizes[i];
      const std::vector<K> keys = ref::tricky_keys<K>(n, 100 + n);
      const int major = 1 + static_cast<int>(i % 3);
      const std::size_t align = i == 3 ? 16 : 64;
      const std::string header = ref::npy_header(ref::descr_of(type), n, major, align);
      struct variant {
        bool descending, stable, in_place;
      };
      for (const variant v : {variant{false, false, false}, variant{false, true, true},
                              variant{true, false, true}, variant{true, true, false}}) {
        SCOPED_TRACE(type + " n=" + std::to_string(n) + " version " + std::to_string(major) +
                     (v.descending ? " descending" : " ascending") +
                     (v.stable ? " --stable" : "") + (v.in_place ? " in place" : " --out"));
        const bytes input = header + ref::to_bytes(keys);
        spit(path("a.npy"), input);
        std::vector<std::string> args{path("a.npy"), "--quiet"};
        if (v.descending) args.emplace_back("--descending");
        if (v.stable) args.emplace_back("--stable");
        if (!v.in_place) args.insert(args.end(), {"--out", path("s.npy")});
        const run_result r = sort(args);
        ASSERT_EQ(r.code, 0) << r.err;
        const bytes out = slurp(v.in_place ? path("a.npy") : path("s.npy"));
        ASSERT_EQ(out.size(), input.size());
        EXPECT_TRUE(same_bytes(out.substr(0, header.size()), header)) << "the header changed";
        const std::vector<K> got = ref::from_bytes<K>(out.substr(header.size()));
        const std::vector<K> want = ref::stable_sorted(keys, v.descending, true);
        EXPECT_EQ(v.stable ? ref::first_difference(want, got)
                           : ref::unstable_difference(want, got, v.descending, true),
                  "");
        if (!v.in_place) {
          EXPECT_TRUE(same_bytes(slurp(path("a.npy")), input)) << "the input changed";
          std::vector<std::string> check{"verify", path("s.npy"), "--original", path("a.npy")};
          if (v.descending) check.emplace_back("--descending");
          const run_result verified = run(check);
          EXPECT_EQ(verified.code, 0) << verified.err;
        }
      }
    }
  });
  std::vector<std::string> expected{"a.npy", "s.npy"};
  EXPECT_EQ(work_files(), expected) << "no temporaries left";
}

// --argsort-out: the stable permutation, equal to std::stable_sort of the indices under the
// same comparator (np.argsort(a, kind="stable") in NumPy's order), for raw and .npy inputs, both
// float orders and directions, int64 and uint32 indices, raw and .npy outputs. The keys file is
// only read; sorted keys appear only where --out asks for them.
TEST_P(Npy, ArgsortIsTheStablePermutation)
{
  const std::string type = GetParam();
  ref::visit_type(type, [&]<typename K>() {
    for (std::size_t i = 0; i < npy_sizes.size(); ++i) {
      const std::size_t n = npy_sizes[i];
      const std::vector<K> keys = ref::tricky_keys<K>(n, 200 + n);
      for (const bool numpy : {false, true}) {
        for (const bool descending : {false, true}) {
          const bool npy_in = (i + descending) % 2 == 0;
          const bool npy_out = (i + numpy) % 2 == 0;
          const bool u32 = (i + numpy + descending) % 3 == 0;
          const bool with_out = descending == numpy;
          SCOPED_TRACE(type + " n=" + std::to_string(n) + (numpy ? " numpy" : " total") +
                       (descending ? " descending" : " ascending") +
                       (npy_in ? " from .npy" : " from raw") + (npy_out ? " to .npy" : "") +
                       (u32 ? " u32" : " i64") + (with_out ? " with --out" : ""));
          const std::string in = path(npy_in ? "k.npy" : "k.bin");
          const std::string header = npy_in ? ref::npy_header(ref::descr_of(type), n) : "";
          const bytes input = header + ref::to_bytes(keys);
          spit(in, input);
          const std::string idx = path(npy_out ? "i.npy" : "i.bin");
          std::vector<std::string> args{in,           "--argsort-out", idx,
                                        "--float-order", numpy ? "numpy" : "total", "--quiet"};
          if (!npy_in) args.insert(args.end(), {"--dtype", type});
          if (descending) args.emplace_back("--descending");
          if (u32) args.insert(args.end(), {"--index-type", "u32"});
          if (with_out) args.insert(args.end(), {"--out", path("s.out")});
          const run_result r = sort(args);
          ASSERT_EQ(r.code, 0) << r.err;
          EXPECT_TRUE(same_bytes(slurp(in), input)) << "the keys file changed";
          const std::vector<std::int64_t> want = ref::stable_argsort(keys, descending, numpy);
          bytes indices = slurp(idx);
          if (npy_out) {
            const std::string h = ref::npy_header(u32 ? "<u4" : "<i8", n);
            ASSERT_GE(indices.size(), h.size());
            EXPECT_TRUE(same_bytes(indices.substr(0, h.size()), h)) << "the index header";
            indices = indices.substr(h.size());
          }
          std::vector<std::int64_t> got;
          if (u32) {
            for (const std::uint32_t x : ref::from_bytes<std::uint32_t>(indices))
              got.push_back(x);
          } else {
            got = ref::from_bytes<std::int64_t>(indices);
          }
          EXPECT_EQ(ref::first_difference(want, got), "");
          if (with_out) {
            const bytes sorted = slurp(path("s.out"));
            ASSERT_EQ(sorted.size(), input.size());
            EXPECT_TRUE(same_bytes(sorted.substr(0, header.size()), header));
            EXPECT_EQ(ref::first_difference(ref::stable_sorted(keys, descending, numpy),
                                            ref::from_bytes<K>(sorted.substr(header.size()))),
                      "");
            fs::remove(path("s.out"));
          }
          fs::remove(in);
          fs::remove(idx);
        }
      }
    }
  });
  EXPECT_EQ(work_files(), std::vector<std::string>{}) << "no temporaries, no stray outputs";
}

INSTANTIATE_TEST_SUITE_P(Dtypes, Npy, ::testing::Values("u32", "i32", "u64", "i64", "f32", "f64"));

// --stable on raw files with values: keys and values come out exactly as std::stable_sort of
// the pairs puts them, in both float orders and directions; NaNs of both signs and many
// payloads, +-0.0 and +-inf. The values are the indices, so a value out of place shows.
TEST_F(Cli, StableSortKeepsEqualKeysAndTheirValuesInInputOrder)
{
  for (const std::string type : {"f32", "f64", "i32"}) {
    ref::visit_type(type, [&]<typename K>() {
      for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{3},
                                  std::size_t{7919}, std::size_t{20011}}) {
        const std::vector<K> keys = ref::tricky_keys<K>(n, 300 + n);
        std::vector<std::uint64_t> values(n);
        std::iota(values.begin(), values.end(), 0);
        spit(path("k.bin"), ref::to_bytes(keys));
        spit(path("v.bin"), ref::to_bytes(values));
        for (const bool numpy : {false, true}) {
          for (const bool descending : {false, true}) {
            SCOPED_TRACE(type + " n=" + std::to_string(n) + (numpy ? " numpy" : " total") +
                         (descending ? " descending" : " ascending"));
            std::vector<std::string> args{path("k.bin"), "--dtype", type, "--values",
                                          path("v.bin"), "--out", path("s.bin"), "--values-out",
                                          path("t.bin"), "--stable", "--float-order",
                                          numpy ? "numpy" : "total", "--quiet"};
            if (descending) args.emplace_back("--descending");
            const run_result r = sort(args);
            ASSERT_EQ(r.code, 0) << r.err;
            EXPECT_EQ(ref::first_difference(ref::stable_sorted(keys, descending, numpy),
                                            ref::from_bytes<K>(slurp(path("s.bin")))),
                      "");
            std::vector<std::int64_t> order;
            for (const std::uint64_t v : ref::from_bytes<std::uint64_t>(slurp(path("t.bin"))))
              order.push_back(static_cast<std::int64_t>(v));
            EXPECT_EQ(ref::first_difference(ref::stable_argsort(keys, descending, numpy), order),
                      "")
                << "the values";
          }
        }
      }
    });
  }
}

// A .npy values file travels like a raw one: its header is kept (any 4- or 8-byte payload in
// either byte order: here big-endian datetime64), its value size taken from it.
TEST_F(Cli, NpyValuesKeepTheirHeaderAndFollowTheirKeys)
{
  const std::size_t n = 20011;
  const std::vector<double> keys = ref::tricky_keys<double>(n, 9);
  std::vector<std::uint64_t> values(n);
  std::iota(values.begin(), values.end(), 0);
  const std::string kh = ref::npy_header("<f8", n);
  const std::string vh = ref::npy_prefix(
      "{'descr': '>M8[ns]', 'fortran_order': False, 'shape': (" + std::to_string(n) + ",), }");
  spit(path("k.npy"), kh + ref::to_bytes(keys));
  spit(path("v.npy"), vh + ref::to_bytes(values));
  const run_result r = sort({path("k.npy"), "--values", path("v.npy"), "--stable", "--quiet"});
  ASSERT_EQ(r.code, 0) << r.err;
  const bytes k = slurp(path("k.npy"));
  const bytes v = slurp(path("v.npy"));
  EXPECT_TRUE(same_bytes(k.substr(0, kh.size()), kh));
  EXPECT_TRUE(same_bytes(v.substr(0, vh.size()), vh));
  EXPECT_EQ(ref::first_difference(ref::stable_sorted(keys, false, true),
                                  ref::from_bytes<double>(k.substr(kh.size()))),
            "");
  std::vector<std::int64_t> order;
  for (const std::uint64_t x : ref::from_bytes<std::uint64_t>(v.substr(vh.size())))
    order.push_back(static_cast<std::int64_t>(x));
  EXPECT_EQ(ref::first_difference(ref::stable_argsort(keys, false, true), order), "");
  // --value-bytes may repeat the header, not contradict it.
  EXPECT_EQ(sort({path("k.npy"), "--values", path("v.npy"), "--value-bytes", "8", "-q"}).code, 0);
  const run_result wrong = sort({path("k.npy"), "--values", path("v.npy"), "--value-bytes", "4"});
  EXPECT_EQ(wrong.code, 64);
  expect_one_error_line(wrong);
}

// A raw input written to a name ending in .npy gets the header np.save would write; gen writes
// .npy files the same way, to files and (with --npy) to standard output.
TEST_F(Cli, NpyOutputsOfRawInputsAndGen)
{
  gen("u64", "uniform", "1000", path("d.bin"));
  const bytes raw = slurp(path("d.bin"));
  ASSERT_EQ(sort({path("d.bin"), "--dtype", "u64", "--out", path("s.npy"), "-q"}).code, 0);
  const std::string h = ref::npy_header("<u8", 1000);
  const bytes s = slurp(path("s.npy"));
  EXPECT_TRUE(same_bytes(s.substr(0, h.size()), h));
  EXPECT_EQ(reference_check(type_named("u64"), raw, s.substr(h.size()), false), "");

  for (const std::string type : {"u32", "i32", "u64", "i64", "f32", "f64"}) {
    SCOPED_TRACE(type);
    const run_result g =
        run({"gen", "--dtype", type, "--dist", type[0] == 'f' ? "nanmix" : "uniform", "--count",
             "777", "--seed", "7", "--out", path("g.npy"), "--values-out", path("gv.npy"),
             "--value-bytes", "4", "-q"});
    ASSERT_EQ(g.code, 0) << g.err;
    gen(type, type[0] == 'f' ? "nanmix" : "uniform", "777", path("g.bin"), path("gv.bin"), "4");
    const std::string kh = ref::npy_header(ref::descr_of(type), 777);
    const std::string vh = ref::npy_header("<u4", 777);
    EXPECT_TRUE(same_bytes(slurp(path("g.npy")), kh + slurp(path("g.bin"))));
    EXPECT_TRUE(same_bytes(slurp(path("gv.npy")), vh + slurp(path("gv.bin"))));
    const run_result streamed = run({"gen", "--dtype", type, "--dist",
                                     type[0] == 'f' ? "nanmix" : "uniform", "--count", "777",
                                     "--seed", "7", "--out", "-", "--npy", "-q"});
    ASSERT_EQ(streamed.code, 0) << streamed.err;
    EXPECT_TRUE(same_bytes(streamed.out, slurp(path("g.npy"))));
  }
  // An empty array too: a header and no data.
  gen("f32", "uniform", "0", path("e.npy"));
  EXPECT_TRUE(same_bytes(slurp(path("e.npy")), ref::npy_header("<f4", 0)));
  EXPECT_EQ(sort({path("e.npy"), "-q"}).code, 0);
  EXPECT_TRUE(same_bytes(slurp(path("e.npy")), ref::npy_header("<f4", 0)));
}

// .npy through standard input and output (header in front of the sorted data, as a file), and
// outputs in tmpfs, which the engine writes through a mapping that starts inside a page.
TEST_F(Cli, NpyThroughStreamsAndTmpfs)
{
  const std::size_t n = tiny_budget() ? 30011 : 300007;
  const std::vector<float> keys = ref::tricky_keys<float>(n, 11);
  const std::string h = ref::npy_header("<f4", n);
  const bytes input = h + ref::to_bytes(keys);
  spit(path("a.npy"), input);
  const std::vector<float> want = ref::stable_sorted(keys, false, true);
  stdin_ = path("a.npy");
  const run_result piped = sort({"-", "--stable"});
  ASSERT_EQ(piped.code, 0) << piped.err;
  EXPECT_TRUE(same_bytes(piped.out, h + ref::to_bytes(want)));
  stdin_ = "/dev/null";
  const run_result to_stdout = sort({path("a.npy"), "--out", "-", "--stable", "-q"});
  ASSERT_EQ(to_stdout.code, 0) << to_stdout.err;
  EXPECT_TRUE(same_bytes(to_stdout.out, h + ref::to_bytes(want)));
  EXPECT_TRUE(same_bytes(slurp(path("a.npy")), input));

  struct statfs info {};
  if (::statfs("/dev/shm", &info) != 0 || info.f_type != 0x01021994)
    GTEST_SKIP() << "no tmpfs at /dev/shm";
  if (tiny_budget()) spit(config_, "devices: cpu\ndevice_memory_budget: 1MiB\n");
  const fs::path shm = fs::path{"/dev/shm"} / ("gpusort-cli-npy-" + std::to_string(::getpid()));
  fs::remove_all(shm);
  fs::create_directories(shm);
  spit(shm / "a.npy", input);
  const run_result out = sort({(shm / "a.npy").string(), "--out", (shm / "s.npy").string(),
                               "--stable", "-q"});
  ASSERT_EQ(out.code, 0) << out.err;
  EXPECT_TRUE(same_bytes(slurp(shm / "s.npy"), h + ref::to_bytes(want)));
  const run_result in_place = sort({(shm / "a.npy").string(), "--stable", "--descending", "-q"});
  ASSERT_EQ(in_place.code, 0) << in_place.err;
  EXPECT_TRUE(same_bytes(slurp(shm / "a.npy"),
                         h + ref::to_bytes(ref::stable_sorted(keys, true, true))));
  fs::remove_all(shm);
}

// verify reads .npy files (the data after the header, the type from it) and checks floats in
// NumPy's order for them by default. The sorted files here are the reference's, not gpusort's.
TEST_F(Cli, VerifyChecksNpyFilesInNumpyOrder)
{
  const std::size_t n = 5003;
  const std::vector<double> keys = ref::tricky_keys<double>(n, 13);
  const std::vector<double> sorted = ref::stable_sorted(keys, false, true);
  const std::string h = ref::npy_header("<f8", n);
  spit(path("o.npy"), h + ref::to_bytes(keys));
  spit(path("s.npy"), h + ref::to_bytes(sorted));
  spit(path("s.bin"), ref::to_bytes(sorted));
  ASSERT_TRUE(std::any_of(keys.begin(), keys.end(),
                          [](double x) { return std::isnan(x) && std::signbit(x); }))
      << "the data needs a negative NaN, which totalOrder puts first";
  const auto verify = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "verify");
    return run(args);
  };
  EXPECT_EQ(verify({path("s.npy"), "--original", path("o.npy")}).code, 0);
  EXPECT_EQ(verify({path("s.npy"), "--original", path("o.npy"), "--dtype", "f64"}).code, 0);
  EXPECT_EQ(verify({path("s.bin"), "--original", path("o.npy")}).code, 1)
      << "a raw file is checked in totalOrder unless told otherwise";
  EXPECT_EQ(verify({path("s.bin"), "--original", path("o.npy"), "--float-order", "numpy"}).code,
            0);
  const run_result total = verify({path("s.npy"), "--float-order", "total"});
  EXPECT_EQ(total.code, 1);
  expect_one_error_line(total);
  std::vector<double> swapped = sorted;
  std::swap(swapped[10], swapped[n - 10]);
  spit(path("x.npy"), h + ref::to_bytes(swapped));
  const run_result bad = verify({path("x.npy"), "--original", path("o.npy")});
  EXPECT_EQ(bad.code, 1);
  expect_one_error_line(bad);
  std::vector<double> changed = sorted;
  changed[n / 2] = std::nextafter(changed[n / 2], changed[n / 2 + 1]);
  spit(path("x.npy"), h + ref::to_bytes(changed));
  EXPECT_EQ(verify({path("x.npy"), "--original", path("o.npy")}).code, 1)
      << "in order, but not the original's keys";
  spit(path("i.npy"), ref::npy_header("<i8", n) + ref::to_bytes(std::vector<std::int64_t>(n)));
  const run_result types = verify({path("s.npy"), "--original", path("i.npy")});
  EXPECT_EQ(types.code, 65) << types.err;
  expect_one_error_line(types);
  EXPECT_EQ(verify({path("s.npy"), "--dtype", "f32"}).code, 64);
}

// Every way a .npy file or the new options can be wrong: one line, its exit code, the input
// untouched and nothing left behind. A header is never sorted as keys.
/// `keys` as big-endian bytes, as NumPy writes a '>' array.
template <typename K>
bytes big_endian_bytes(const std::vector<K>& keys)
{
  bytes b = ref::to_bytes(keys);
  for (std::size_t i = 0; i < b.size(); i += sizeof(K))
    std::reverse(b.begin() + static_cast<std::ptrdiff_t>(i),
                 b.begin() + static_cast<std::ptrdiff_t>(i + sizeof(K)));
  return b;
}

// Issue 43: the CLI refused big-endian .npy files that the Python client's sort_file sorts.
// Both sort them now, as np.sort does, the header ('>f8') kept byte for byte; so does verify.
TEST_F(Cli, BigEndianNpyKeysSortAsNumpySortsThem)
{
  const std::size_t n = 7919;
  const auto check = [&]<typename K>(const std::string& descr) {
    SCOPED_TRACE(descr);
    const std::vector<K> keys = ref::tricky_keys<K>(n, 43);
    const std::string header = ref::npy_header(descr, n);
    const bytes input = header + big_endian_bytes(keys);
    spit(path("a.npy"), input);
    run_result r = sort({path("a.npy"), "--out", path("s.npy"), "--stable", "--quiet"});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(same_bytes(slurp(path("s.npy")),
                           header + big_endian_bytes(ref::stable_sorted(keys, false, true))));
    EXPECT_TRUE(same_bytes(slurp(path("a.npy")), input)) << "the input changed";
    r = run({"verify", path("s.npy"), "--original", path("a.npy")});
    EXPECT_EQ(r.code, 0) << r.err;
    // In place, descending, from and to a stream.
    r = sort({path("a.npy"), "--descending", "--stable", "--quiet"});
    ASSERT_EQ(r.code, 0) << r.err;
    const bytes descending = header + big_endian_bytes(ref::stable_sorted(keys, true, true));
    EXPECT_TRUE(same_bytes(slurp(path("a.npy")), descending));
    spit(path("a.npy"), input);
    stdin_ = path("a.npy");
    r = sort({"-", "--out", "-", "--stable", "--quiet"});
    stdin_ = "/dev/null";
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(same_bytes(r.out, slurp(path("s.npy"))));
    // Unsorted, verify says so instead of refusing the file.
    EXPECT_EQ(run({"verify", path("a.npy")}).code, 1);
  };
  check.operator()<double>(">f8");
  check.operator()<std::int32_t>(">i4");
  std::vector<std::string> expected{"a.npy", "s.npy"};
  EXPECT_EQ(work_files(), expected) << "no temporaries left";
}

TEST_F(Cli, NpyAndArgsortErrorsGiveOneLineAndLeaveTheInput)
{
  const std::size_t n = 100;
  const bytes data = ref::to_bytes(ref::tricky_keys<double>(n, 17));
  const auto with_dict = [&](const std::string& dict, int major = 1, std::size_t align = 64) {
    return ref::npy_prefix(dict, major, align) + data;
  };
  const std::string shape = "(" + std::to_string(n) + ",)";
  bytes version4 = with_dict(ref::npy_dict("<f8", n));
  version4[6] = 4;
  const bytes good = with_dict(ref::npy_dict("<f8", n));
  gen("f64", "uniform", "100", path("raw.bin"));
  struct error_case {
    std::string name;  ///< the file, written with `contents`
    bytes contents;
    std::vector<std::string> args;  ///< after the file
    int code;
    std::string says;  ///< part of the message
  };
  const std::vector<error_case> cases{
      {"a.npy", good, {"--dtype", "u64"}, 64, "--dtype u64 disagrees with"},
      {"a.npy", good, {"--dtype", "f32"}, 64, "'<f8' (f64)"},
      {"a.npy", version4, {}, 65, "version 4.0"},
      {"a.npy", good.substr(0, 9), {}, 65, "ends inside its .npy header"},
      {"a.npy", good.substr(0, 100), {}, 65, "ends inside its .npy header"},
      {"a.npy", with_dict("{'descr': '<f8', 'fortran_order': False, }"), {}, 65, "no 'shape'"},
      {"a.npy",
       with_dict("{'descr': '<f8', 'fortran_order': False, 'shape': " + shape + ", 'x': 1}"),
       {},
       65,
       "unknown key 'x'"},
      {"a.npy", with_dict("{'descr': '<f8', 'fortran_order': Fals, 'shape': " + shape + "}"), {},
       65, "header dict"},
      {"a.npy", with_dict("{'descr': '<f8', 'fortran_order': False, 'shape': (10, 10), }"), {},
       65, "shape (10, 10)"},
      {"a.npy", with_dict("{'descr': '<f8', 'fortran_order': False, 'shape': (), }"), {}, 65,
       "0-d"},
      {"a.npy", with_dict(ref::npy_dict(">f8", n)), {"--values", "raw.bin"}, 65,
       "big-endian keys ('>f8'), which sort alone"},
      {"a.npy", with_dict(ref::npy_dict("<f2", 4 * n)), {}, 65, "'<f2'"},
      {"a.npy", with_dict(ref::npy_dict("|O", n)), {}, 65, "'|O'"},
      // A structured file sorts as records (issue 42), by fields of the types a key takes.
      {"a.npy",
       with_dict("{'descr': [('a', '<i4'), ('b', '<U2')], 'fortran_order': False, 'shape': " +
                 shape + ", }"),
       {},
       65,
       "field 'b' (<U2) is not a type records sort by"},
      // A header padded to 4 bytes only (92 here): 8-byte keys after it cannot be read where
      // they lie.
      {"a.npy", with_dict(ref::npy_dict("<f8", n) + "    ", 1, 4), {}, 65,
       "header is 92 bytes, not a whole number of 8-byte"},
      {"a.npy", good.substr(0, good.size() - 8), {}, 65, "holds 792 bytes after its .npy header"},
      {"a.npy", good + "xyz", {}, 65, "holds 803 bytes"},
      {"raw.npy", data, {"--dtype", "f64"}, 65, "is named .npy but is no .npy file"},
      {"a.npy", good, {"--argsort-out", "i.bin", "--values", "raw.bin"}, 64, "keys alone"},
      {"a.npy", good, {"--index-type", "u32"}, 64, "--index-type needs --argsort-out"},
      {"a.npy", good, {"--argsort-out", "i.bin", "--index-type", "i16"}, 64, "i64 or u32"},
      {"a.npy", good, {"--float-order", "ieee"}, 64, "total or numpy"},
      {"a.npy", good, {"--argsort-out", "a.npy"}, 64, "only reads"},
      {"a.npy", good, {"--argsort-out", "-"}, 64, "not standard output"},
      {"a.npy", good, {"--argsort-out", "i.bin", "--out", "i.bin"}, 64, "the same file"},
  };
  for (const error_case& c : cases) {
    SCOPED_TRACE(c.name + " expecting '" + c.says + "'");
    spit(path(c.name), c.contents);
    const std::vector<std::string> before = work_files();
    std::vector<std::string> args{path(c.name)};
    for (const std::string& arg : c.args)
      args.push_back(arg.ends_with(".bin") || arg.ends_with(".npy") ? path(arg) : arg);
    const run_result r = sort(args);
    EXPECT_EQ(r.code, c.code) << r.err;
    expect_one_error_line(r);
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_TRUE(slurp(path(c.name)) == c.contents) << "the input changed";
    EXPECT_EQ(work_files(), before) << "something was left behind";
    if (c.name != "raw.bin") fs::remove(path(c.name));
  }
  // A stream cannot be argsorted; verify refuses what sort refuses.
  stdin_ = path("raw.bin");
  EXPECT_EQ(sort({"-", "--dtype", "f64", "--argsort-out", path("i.bin")}).code, 64);
  stdin_ = "/dev/null";
  spit(path("a.npy"), with_dict(ref::npy_dict("<f2", 4 * n)));
  EXPECT_EQ(run({"verify", path("a.npy")}).code, 65);
  EXPECT_EQ(run({"verify", path("raw.bin"), "--float-order", "x", "--dtype", "f64"}).code, 64);
}

}  // namespace
