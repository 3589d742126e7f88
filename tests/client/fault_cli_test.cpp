// Fault sweeps of the `gpusort` command line (issue 25, item 1), armed through GPUSORT_FAULT in
// its environment: every call of `gpusort sort` (its opens, stats, reads, mappings, ftruncate,
// fsync, rename, the engine's calls with --local, its socket calls through the daemon) fails in
// turn. Each failure must be a documented exit code with one `gpusort: ` line on stderr, the
// input byte for byte as it was (in place too: the CLI sorts into a temporary and renames), no
// temporary left and nothing published; a success must verify. Through the daemon, the daemon
// (not armed) serves a clean job after the sweep with nothing left over.
#include "tests/client/cli_files_fixture.hpp"
#include "tests/support/fault_sweep.hpp"

#include <gpusort/client.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace gpusort::service::testing {
namespace {

namespace fs = std::filesystem;
using test_support::sweep_points;

using run_result = cli_run_result;

// 64Ki pairs; out of core on a 128 KiB budget (--local reads this configuration).
constexpr std::uint64_t n = std::uint64_t{1} << 16;

class CliFault : public CliFilesTest {
 protected:
  CliFault() : CliFilesTest{n, 9}
  {
    spit(dir_.path() / "ooc.yaml", "devices: cpu\ndevice_memory_budget: 128KiB\n");
  }

  /// Sweeps `args` (a sort of k.bin and v.bin, in place when `in_place`, else into ks.bin and
  /// vs.bin) over every call a clean run makes, each plan after the plans of `before` (what
  /// the machine lacks, e.g. "exchange:1:sticky:EINVAL,"). Returns the number of failed runs.
  int sweep(const std::vector<std::string>& args, bool in_place, std::uint64_t budget,
            const std::string& before = {})
  {
    const std::string counts = (dir_.path() / "counts").string();
    reset_inputs();
    const run_result clean = run(args, before + "count", counts);
    EXPECT_EQ(clean.code, 0) << clean.err;
    std::uint64_t total = 0;
    std::istringstream in{slurp(counts)};
    for (std::string item; in >> item;)
      total += std::stoull(item.substr(item.find('=') + 1));
    EXPECT_GT(total, 0U);
    RecordProperty("calls_per_class", slurp(counts));
    const std::string keys_out = in_place ? "k.bin" : "ks.bin";
    const std::string values_out = in_place ? "v.bin" : "vs.bin";
    int failed = 0;
    for (const std::uint64_t call : sweep_points(total, budget, 25)) {
      const std::string spec = before + "all:" + std::to_string(call);
      reset_inputs();
      const run_result r = run(args, spec);
      const std::string context = spec + ": exit " + std::to_string(r.code) + ", stderr:\n" + r.err;
      if (r.code == 0) {
        std::string k = slurp(path(keys_out)), v = slurp(path(values_out));
        EXPECT_TRUE(verify(key_array{k.data(), n, dtype::u64}, value_array{v.data(), n, 8},
                           order::ascending, before_)
                        .ok)
            << context;
        if (!in_place) {
          EXPECT_EQ(slurp(path("k.bin")), keys_) << context << ": the input changed";
        }
        continue;
      }
      ++failed;
      // The documented failures of a sort (README, "Command line"): not verification (1),
      // usage (64) or configuration (78), never a signal.
      static const std::set<int> sort_failures{65, 66, 69, 70, 73, 74, 75, 77};
      EXPECT_TRUE(sort_failures.contains(r.code)) << context;
      std::vector<std::string> lines;
      std::istringstream err{r.err};
      for (std::string line; std::getline(err, line);)
        if (!line.starts_with("gpusort: warning: fault injection armed")) lines.push_back(line);
      EXPECT_EQ(lines.size(), 1U) << context << ": one error line expected";
      if (!lines.empty()) {
        EXPECT_TRUE(lines.front().starts_with("gpusort: ")) << context;
      }
      EXPECT_EQ(slurp(path("k.bin")), keys_) << context << ": the keys file changed";
      EXPECT_EQ(slurp(path("v.bin")), values_) << context << ": the values file changed";
      EXPECT_EQ(files(), (std::set<std::string>{"k.bin", "v.bin"}))
          << context << ": a temporary or a partial output was left";
    }
    return failed;
  }
};

TEST_F(CliFault, LocalOutOfCoreToSeparateOutputs)
{
  const int failed = sweep({"sort", path("k.bin"), "--dtype", "u64", "--values", path("v.bin"),
                            "--value-bytes", "8", "--out", path("ks.bin"), "--values-out",
                            path("vs.bin"), "--local", "--config",
                            (dir_.path() / "ooc.yaml").string(), "--quiet"},
                           false, 60);
  EXPECT_GT(failed, 0);
}

TEST_F(CliFault, LocalInCoreInPlace)
{
  const int failed = sweep({"sort", path("k.bin"), "--dtype", "u64", "--values", path("v.bin"),
                            "--value-bytes", "8", "--local", "--config",
                            (dir_.path() / "cpu.yaml").string(), "--quiet"},
                           true, 40);
  EXPECT_GT(failed, 0);
}

// On a filesystem without RENAME_EXCHANGE (issue 25): the replaced keys file is kept under a
// hard link until the values are in place, and every failure still leaves both inputs.
TEST_F(CliFault, LocalInCoreInPlaceWithoutRenameExchange)
{
  const int failed = sweep({"sort", path("k.bin"), "--dtype", "u64", "--values", path("v.bin"),
                            "--value-bytes", "8", "--local", "--config",
                            (dir_.path() / "cpu.yaml").string(), "--quiet"},
                           true, 40, "exchange:1:sticky:EINVAL,");
  EXPECT_GT(failed, 0);
}

TEST_F(CliFault, ThroughTheDaemonInPlace)
{
  daemon_process d{dir_.path(), "device_memory_budget: 128KiB\n"};
  const int failed = sweep({"sort", path("k.bin"), "--dtype", "u64", "--values", path("v.bin"),
                            "--value-bytes", "8", "--socket", d.socket(), "--quiet"},
                           true, 40);
  EXPECT_GT(failed, 0);
  // The daemon served every run and holds nothing of them.
  reset_inputs();
  const run_result r = run({"sort", path("k.bin"), "--dtype", "u64", "--socket", d.socket(),
                            "--quiet"},
                           "count");
  EXPECT_EQ(r.code, 0) << r.err << d.log();
  auto c = client::connection::connect(d.socket());
  const client::daemon_status s = c.status();
  EXPECT_EQ(s.running_jobs + s.queued_jobs, 0U);
  EXPECT_EQ(s.host_memory_used, 0U);
  EXPECT_EQ(s.buffers, 0U);
}

}  // namespace
}  // namespace gpusort::service::testing
