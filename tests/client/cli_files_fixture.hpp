// A folder of u64 keys and 8-byte values (k.bin, v.bin) for tests that run the `gpusort` binary
// with a fault plan (GPUSORT_FAULT) and then look at every file the run left.
#pragma once

#include "tests/client/cli_process.hpp"
#include "tests/service/daemon_test_support.hpp"

#include "core/generate.hpp"
#include "core/verify.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace gpusort::service::testing {

struct cli_run_result {
  int code{-1};
  std::string err;
};

class CliFilesTest : public ::testing::Test {
 protected:
  /// `n` pairs from `seed`; cpu.yaml configures the host device for --local.
  CliFilesTest(std::uint64_t n, std::uint64_t seed)
  {
    std::filesystem::create_directories(work());
    keys_.assign(n * 8, '\0');
    values_.assign(n * 8, '\0');
    generate(key_array{keys_.data(), n, dtype::u64}, distribution::uniform, seed);
    generate_values(value_array{values_.data(), n, 8}, seed);
    before_ = fingerprint_of(key_array{keys_.data(), n, dtype::u64},
                             value_array{values_.data(), n, 8});
    spit(dir_.path() / "cpu.yaml", "devices: cpu\n");
  }

  std::filesystem::path work() const { return dir_.path() / "work"; }
  std::filesystem::path path(const std::string& name) const { return work() / name; }

  /// Runs gpusort with GPUSORT_FAULT=spec (and the counts file, if any).
  cli_run_result run(const std::vector<std::string>& args, const std::string& spec,
                     const std::string& counts = {}) const
  {
    std::vector<std::pair<std::string, std::string>> env{{"GPUSORT_FAULT", spec}};
    if (!counts.empty()) env.emplace_back("GPUSORT_FAULT_COUNTS", counts);
    const test_support::cli_result r = test_support::run_cli(dir_.path(), args, env);
    return cli_run_result{r.code, r.err};
  }

  /// The work folder holds the inputs alone, as made.
  void reset_inputs() const
  {
    for (const auto& e : std::filesystem::directory_iterator{work()})
      std::filesystem::remove(e.path());
    spit(path("k.bin"), keys_);
    spit(path("v.bin"), values_);
  }

  /// The names in the work folder.
  std::set<std::string> files() const
  {
    std::set<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator{work()})
      out.insert(e.path().filename());
    return out;
  }

  temp_dir dir_;
  std::string keys_, values_;
  fingerprint before_{};
};

}  // namespace gpusort::service::testing
