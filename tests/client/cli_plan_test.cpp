// `gpusort plan` (issue 44): the planner on the command line, human and --json, against what
// `gpusort sort --local` then does with the same configuration, and its usage errors.
#include "cli_process.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using gpusort::test_support::cli_result;
using gpusort::test_support::run_cli;

class CliPlan : public ::testing::Test {
 protected:
  void SetUp() override
  {
    dir_ = fs::temp_directory_path() /
           ("gpusort_cli_plan_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    std::ofstream{dir_ / "small.yaml"} << "devices: cpu\ndevice_memory_budget: 1MiB\n";
  }
  void TearDown() override { fs::remove_all(dir_); }
  cli_result run(const std::vector<std::string>& args) { return run_cli(dir_, args); }
  fs::path dir_;
};

TEST_F(CliPlan, HumanOutputSaysThePathChunksBudgetAndTime)
{
  const cli_result r = run({"plan", "--count", "1Mi", "--dtype", "u64", "--config",
                            (dir_ / "small.yaml").string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("path: two rounds"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the smallest that works:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("predicted:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("round 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rates (host, the CPU)"), std::string::npos) << r.out;
}

TEST_F(CliPlan, JsonAgreesWithTheSortThatFollows)
{
  const std::string config = (dir_ / "small.yaml").string();
  const cli_result p = run({"plan", "--bytes", "8MiB", "--dtype", "u64", "--config", config,
                            "--json"});
  ASSERT_EQ(p.code, 0) << p.err;
  const auto plan = nlohmann::json::parse(p.out);
  EXPECT_EQ(plan["path"], "two rounds");
  EXPECT_EQ(plan["elements"], 1 << 20);
  EXPECT_GT(plan["chunks"].get<int>(), 1);
  EXPECT_GT(plan["seconds"].get<double>(), 0);
  EXPECT_EQ(plan["phases"].size(), 3U);
  EXPECT_EQ(plan["machine"]["gpus"], 0);
  const std::string keys = (dir_ / "k.bin").string();
  ASSERT_EQ(run({"gen", "--dtype", "u64", "--dist", "uniform", "--count", "1Mi", "--out", keys})
                .code,
            0);
  const cli_result s = run({"sort", keys, "--dtype", "u64", "--local", "--config", config,
                            "--json", "--no-sync"});
  ASSERT_EQ(s.code, 0) << s.err;
  const auto sorted = nlohmann::json::parse(s.out);
  EXPECT_EQ(sorted["path"], plan["path"]);
  EXPECT_EQ(sorted["chunks"], plan["chunks"]);
}

TEST_F(CliPlan, BelowTheSmallestBudgetItSaysNoneAndWhatWorks)
{
  const cli_result r = run({"plan", "--count", "1Mi", "--dtype", "u64", "--config",
                            (dir_ / "small.yaml").string(), "--device-budget", "512B", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto plan = nlohmann::json::parse(r.out);
  EXPECT_EQ(plan["path"], "none");
  EXPECT_GT(plan["smallest_budget"].get<std::uint64_t>(), 512U);
  EXPECT_NE(plan["refusal"].get<std::string>().find("smallest budget"), std::string::npos);
}

TEST_F(CliPlan, AHypotheticalMachineOfTwoGpus)
{
  const cli_result r = run({"plan", "--bytes", "32GiB", "--dtype", "u64", "--gpus", "2",
                            "--link-in", "55", "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  const auto plan = nlohmann::json::parse(r.out);
  EXPECT_EQ(plan["path"], "resident");
  EXPECT_EQ(plan["devices"], 2);
  EXPECT_EQ(plan["machine"]["link_in"], 55.0);
  // The two-H200 host sorted 32 GiB that fits in 0.723 s.
  EXPECT_NEAR(plan["seconds"].get<double>(), 0.723, 0.1);
  const cli_result human = run({"plan", "--bytes", "32GiB", "--dtype", "u64", "--gpus", "1",
                                "--device-budget", "128MiB", "--pageable"});
  ASSERT_EQ(human.code, 0) << human.err;
  EXPECT_NE(human.out.find("path: two rounds"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("arrays pageable"), std::string::npos) << human.out;
  // A described GPU's smallest budget leaves out the sort's scratch, and says so.
  EXPECT_NE(human.out.find("leaves out its sort's scratch"), std::string::npos) << human.out;
}

TEST_F(CliPlan, TheHostsRateForTheCopyEnginesBoundsTwoGpusOutOfCore)
{
  // Out of core on two H200s the host memory bounds the rounds (148 GB/s by default, 37 a GPU
  // each way, below the links' 50.3): less of it, slower rounds; more, the links' rate.
  const auto seconds = [&](const std::string& host_dma) {
    std::vector<std::string> args{"plan",  "--bytes", "32GiB",          "--dtype", "u64",
                                  "--gpus", "2",      "--device-budget", "4GiB",  "--json"};
    if (!host_dma.empty()) args.insert(args.end(), {"--host-dma", host_dma});
    const cli_result r = run(args);
    EXPECT_EQ(r.code, 0) << r.err;
    const auto plan = nlohmann::json::parse(r.out);
    EXPECT_EQ(plan["path"], "two rounds");
    if (!host_dma.empty()) {
      EXPECT_EQ(plan["machine"]["host_dma"], std::stod(host_dma));
    }
    return plan["seconds"].get<double>();
  };
  const double by_default = seconds("");
  EXPECT_GT(seconds("74"), 1.5 * by_default);
  EXPECT_LT(seconds("400"), 0.9 * by_default);
  EXPECT_NEAR(seconds("400"), seconds("4000"), 1e-9);  // the links bound it then
}

TEST_F(CliPlan, LargestIsTheLastCountOnTheResidentPath)
{
  // Issue 40: the largest job that runs in one round trip, per shape, on described H200s.
  const auto plan_json = [&](std::vector<std::string> args) {
    args.insert(args.begin(), "plan");
    args.emplace_back("--json");
    const cli_result r = run(args);
    EXPECT_EQ(r.code, 0) << r.err;
    return nlohmann::json::parse(r.out.empty() ? "{}" : r.out);
  };
  const auto largest = [&](std::vector<std::string> shape) {
    shape.insert(shape.begin(), "--largest");
    const auto p = plan_json(shape);
    EXPECT_EQ(p["path"], "resident");
    return p["elements"].get<std::uint64_t>();
  };
  const std::uint64_t u64 = largest({"--dtype", "u64", "--gpus", "1"});
  // Past it the job takes two rounds; the bisection found the very last count.
  EXPECT_EQ(plan_json({"--count", std::to_string(u64), "--dtype", "u64", "--gpus", "1"})["path"],
            "resident");
  EXPECT_EQ(plan_json({"--count", std::to_string(u64 + 1), "--dtype", "u64", "--gpus", "1"})
                ["path"],
            "two rounds");
  // An H200's 140 GiB hold well over a third of it in keys, never all of it.
  EXPECT_GT(u64 * 8, std::uint64_t{48} << 30);
  EXPECT_LT(u64 * 8, std::uint64_t{140} << 30);
  // Narrower elements fit more of them, wider fewer; two GPUs twice as many.
  EXPECT_GT(largest({"--dtype", "u32", "--gpus", "1"}), u64);
  EXPECT_LT(largest({"--dtype", "u64", "--value-bytes", "8", "--gpus", "1"}), u64);
  const std::uint64_t two = largest({"--dtype", "u64", "--gpus", "2"});
  EXPECT_GE(two, 2 * u64 - 2);
  EXPECT_LE(two, 2 * u64 + 2);
  // The human output is the plan of that job.
  const cli_result human = run({"plan", "--largest", "--dtype", "u64", "--gpus", "1"});
  ASSERT_EQ(human.code, 0) << human.err;
  EXPECT_NE(human.out.find("path: resident"), std::string::npos) << human.out;
  EXPECT_NE(human.out.find("elements: " + std::to_string(u64)), std::string::npos) << human.out;
}

TEST_F(CliPlan, BadInputIsOneLineAndExit64)
{
  const std::vector<std::vector<std::string>> bad{
      {"plan", "--dtype", "u64"},                                     // no size
      {"plan", "--count", "10", "--bytes", "80", "--dtype", "u64"},  // both
      {"plan", "--count", "ten", "--dtype", "u64"},
      {"plan", "--count", "10", "--dtype", "u128x"},
      {"plan", "--bytes", "12", "--dtype", "u64"},  // not whole keys
      {"plan", "--count", "10", "--dtype", "u64", "--link-in", "50"},  // rates without --gpus
      {"plan", "--count", "10", "--dtype", "u64", "--gpus", "2", "--link-in", "-5"},
      {"plan", "--count", "10", "--dtype", "u64", "--gpus", "2", "--host-dma", "0"},
      {"plan", "--count", "10", "--dtype", "u64", "--device-budget", "lots"},
      {"plan", "--count", "10", "--dtype", "u64", "--value-bytes", "3"},
      {"plan", "--largest", "--count", "10", "--dtype", "u64", "--gpus", "1"},  // two sizes
      // No GPUs: the CPU engine has no resident path to find the end of.
      {"plan", "--largest", "--dtype", "u64", "--config", (dir_ / "small.yaml").string()},
  };
  for (const auto& args : bad) {
    const cli_result r = run(args);
    EXPECT_EQ(r.code, 64) << args[2] << " " << r.err;
    EXPECT_EQ(r.err.rfind("gpusort: ", 0), 0U) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

}  // namespace
