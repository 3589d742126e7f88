// Drives the real `gpusort` binary: round trips, exit codes, one-line errors, atomic outputs.
// With GPUSORT_TEST_BUDGET=tiny every sort gets a configuration whose device budget forces the
// out-of-core path.
#include "core/generate.hpp"
#include "core/verify.hpp"

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

struct result {
  int code{};
  std::string out;
  std::string err;
};

class Cli : public ::testing::Test {
 protected:
  void SetUp() override
  {
    dir_ = fs::temp_directory_path() /
           ("gpusort-cli-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const char* b = std::getenv("GPUSORT_TEST_BUDGET");
    const bool tiny = b != nullptr && std::string{b} == "tiny";
    std::ofstream{path("config.yaml")} << "devices: cpu\n"
                                       << (tiny ? "device_memory_budget: 2MiB\n" : "");
  }
  void TearDown() override { fs::remove_all(dir_); }

  [[nodiscard]] std::string path(const std::string& name) const { return (dir_ / name).string(); }

  /// Runs gpusort with `args` (a shell-quoted string), capturing stdout and stderr.
  result run(const std::string& args) const
  {
    const std::string out = path("stdout.txt"), err = path("stderr.txt");
    const std::string cmd = std::string{GPUSORT_CLI} + " " + args + " >" + out + " 2>" + err;
    const int status = std::system(cmd.c_str());
    result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }
  result sort(const std::string& args) const
  {
    return run("sort " + args + " --config " + path("config.yaml"));
  }

  static std::string slurp(const std::string& p)
  {
    std::ifstream in{p, std::ios::binary};
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  /// The stderr of a failed command: exactly one line starting with "gpusort: ".
  static void expect_one_error_line(const result& r)
  {
    EXPECT_EQ(r.err.rfind("gpusort: ", 0), 0U) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }

  fs::path dir_;
};

TEST_F(Cli, RoundTripsEveryDtypeBothOrdersWithAndWithoutValues)
{
  for (const char* dtype : {"u32", "i32", "u64", "i64", "f32", "f64"}) {
    const std::string dist = dtype[0] == 'f' ? "nanmix" : "detdupes";
    for (const bool descending : {false, true}) {
      for (const char* vb : {"", "4", "8"}) {
        SCOPED_TRACE(std::string{dtype} + (descending ? " desc" : " asc") + " values " + vb);
        const std::string values = *vb ? " --values-out " + path("v.bin") + " --value-bytes " + vb
                                        : "";
        ASSERT_EQ(run("gen --dtype " + std::string{dtype} + " --dist " + dist +
                      " --count 300k --seed 5 --out " + path("d.bin") + values)
                      .code,
                  0);
        const std::string desc = descending ? " --descending" : "";
        const std::string sort_values =
            *vb ? " --values " + path("v.bin") + " --value-bytes " + vb + " --values-out " +
                      path("vs.bin")
                : "";
        const result s = sort(path("d.bin") + " --dtype " + dtype + " --out " + path("s.bin") +
                              desc + sort_values + " --quiet");
        ASSERT_EQ(s.code, 0) << s.err;
        const std::string verify_values =
            *vb ? " --values " + path("vs.bin") + " --original-values " + path("v.bin") +
                      " --value-bytes " + vb
                : "";
        const result v = run("verify " + path("s.bin") + " --dtype " + dtype + " --original " +
                             path("d.bin") + desc + verify_values);
        EXPECT_EQ(v.code, 0) << v.err;
      }
    }
  }
}

TEST_F(Cli, SortsInPlaceAtomically)
{
  ASSERT_EQ(run("gen --dtype i64 --dist uniform --count 200003 --out " + path("d.bin") +
                " --values-out " + path("v.bin"))
                .code,
            0);
  fs::copy_file(path("d.bin"), path("orig.bin"));
  fs::copy_file(path("v.bin"), path("origv.bin"));
  const result s = sort(path("d.bin") + " --dtype i64 --values " + path("v.bin") + " --quiet");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(run("verify " + path("d.bin") + " --dtype i64 --original " + path("orig.bin") +
                " --values " + path("v.bin") + " --original-values " + path("origv.bin"))
                .code,
            0);
  // Nothing but the files the test made: no temporaries left behind.
  int files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator{dir_}) ++files;
  EXPECT_EQ(files, 7);  // config, d, v, orig, origv, stdout, stderr
}

TEST_F(Cli, JsonReportHasEveryField)
{
  ASSERT_EQ(run("gen --dtype u64 --dist uniform --count 1M --out " + path("d.bin")).code, 0);
  const result s = sort(path("d.bin") + " --dtype u64 --out " + path("s.bin") + " --json");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(std::count(s.out.begin(), s.out.end(), '\n'), 1);
  for (const char* key : {"\"elements\": 1000000", "\"bytes\": 8000000", "\"seconds\": ",
                          "\"rate\": ", "\"engine\": \"cpu-", "\"devices\": [\"cpu\"]",
                          "\"chunks\": ", "\"rounds\": ", "\"compensated_chunks\": "})
    EXPECT_NE(s.out.find(key), std::string::npos) << key << " in " << s.out;
  const char* b = std::getenv("GPUSORT_TEST_BUDGET");
  if (b != nullptr && std::string{b} == "tiny") {
    EXPECT_NE(s.out.find("\"rounds\": 2"), std::string::npos) << s.out;
  }
}

TEST_F(Cli, CountSuffixesAndEmptyAndSingleFiles)
{
  const std::array<std::pair<const char*, std::uintmax_t>, 4> counts{
      {{"2k", 2000 * 4}, {"1Ki", 1024 * 4}, {"0", 0}, {"1", 4}}};
  for (const auto& [count, bytes] : counts) {
    ASSERT_EQ(run("gen --dtype u32 --dist uniform --count " + std::string{count} + " --out " +
                  path("d.bin"))
                  .code,
              0);
    EXPECT_EQ(fs::file_size(path("d.bin")), bytes) << count;
    const result s = sort(path("d.bin") + " --dtype u32 --out " + path("s.bin") + " --quiet");
    EXPECT_EQ(s.code, 0) << s.err;
    EXPECT_EQ(run("verify " + path("s.bin") + " --dtype u32 --original " + path("d.bin")).code, 0);
  }
}

TEST_F(Cli, VerifyCatchesACorruptedFile)
{
  ASSERT_EQ(run("gen --dtype f64 --dist gaussian --count 5000 --out " + path("d.bin")).code, 0);
  ASSERT_EQ(sort(path("d.bin") + " --dtype f64 --out " + path("s.bin") + " --quiet").code, 0);
  {
    std::fstream f{path("s.bin"), std::ios::in | std::ios::out | std::ios::binary};
    f.seekp(8 * 2500);
    const double bad = 12345.0;
    f.write(reinterpret_cast<const char*>(&bad), sizeof bad);
  }
  const result v = run("verify " + path("s.bin") + " --dtype f64 --original " + path("d.bin"));
  EXPECT_EQ(v.code, 1);
  expect_one_error_line(v);
}

TEST_F(Cli, ErrorsGiveOneLineAndTheirExitCode)
{
  ASSERT_EQ(run("gen --dtype u64 --dist uniform --count 1000 --out " + path("d.bin")).code, 0);
  const std::string original = slurp(path("d.bin"));
  {
    std::ofstream{path("odd.bin"), std::ios::binary} << "1234567";
  }
  {
    std::ofstream{path("bad.yaml")} << "devices: cpu\nchunk_byte: 1MiB\n";
  }
  struct error_case {
    std::string args;
    int code;
  };
  const std::vector<error_case> cases{
      {"sort " + path("missing.bin") + " --dtype u64", 70},
      {"sort " + path("d.bin") + " --dtype u128", 64},
      {"sort " + path("d.bin"), 64},
      {"sort " + path("odd.bin") + " --dtype u64", 70},
      {"sort " + path("d.bin") + " --dtype u64 --out " + path("no/such/dir/s.bin"), 70},
      {"sort " + path("d.bin") + " --dtype u64 --config " + path("bad.yaml"), 78},
      {"sort " + path("d.bin") + " --dtype u64 --config " + path("absent.yaml"), 78},
      {"sort " + path("d.bin") + " --dtype u64 --values " + path("odd.bin") + " --value-bytes 8",
       70},
      {"sort " + path("d.bin") + " --dtype u64 --bogus", 64},
      {"gen --dtype u64 --dist nanmix --count 10 --out " + path("x.bin"), 64},
      {"gen --dtype u64 --dist uniform --count 10x --out " + path("x.bin"), 64},
      {"verify " + path("d.bin") + " --dtype u64", 64},
      {"frobnicate", 64},
  };
  for (const error_case& c : cases) {
    SCOPED_TRACE(c.args);
    const result r = run(c.args);
    EXPECT_EQ(r.code, c.code) << r.err;
    expect_one_error_line(r);
  }
  EXPECT_EQ(slurp(path("d.bin")), original) << "a failed sort must leave its input alone";
  EXPECT_FALSE(fs::exists(path("x.bin")));
}

TEST_F(Cli, SeparateOutputNeverTouchesTheInput)
{
  ASSERT_EQ(run("gen --dtype f32 --dist reverse --count 100k --out " + path("d.bin")).code, 0);
  const std::string original = slurp(path("d.bin"));
  ASSERT_EQ(sort(path("d.bin") + " --dtype f32 --out " + path("s.bin") + " --quiet").code, 0);
  EXPECT_EQ(slurp(path("d.bin")), original);
}

TEST_F(Cli, HelpAndVersion)
{
  EXPECT_EQ(run("--help").code, 0);
  EXPECT_EQ(run("sort --help").code, 0);
  const result v = run("--version");
  EXPECT_EQ(v.code, 0);
  EXPECT_EQ(v.out.rfind("gpusort ", 0), 0U);
  EXPECT_EQ(run("").code, 64);
}

}  // namespace
