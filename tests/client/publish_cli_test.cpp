// Publication of the `gpusort` command's outputs where the filesystem has no
// renameat2(RENAME_EXCHANGE) (some NFS, FUSE, older overlayfs), made testable by the fault plan
// "exchange:1:sticky:EINVAL": the exchange fails as such a filesystem fails it, for good. Keys
// and values are published all or nothing (issue 25): when the second output cannot be put in
// place, the first is put back, and the file it had replaced must still be there, byte for
// byte, with no temporary or kept copy left beside it.
#include "tests/client/cli_files_fixture.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace gpusort::service::testing {
namespace {

namespace fs = std::filesystem;

constexpr char no_exchange[] = "exchange:1:sticky:EINVAL";

using run_result = cli_run_result;

// A prime count of pairs, so that no chunk or page boundary is even.
constexpr std::uint64_t n = 4099;

class PublishWithoutExchange : public CliFilesTest {
 protected:
  PublishWithoutExchange() : CliFilesTest{n, 25} {}

  /// The inputs, and existing outputs with other content (what --out replaces).
  void reset(bool existing_outputs)
  {
    reset_inputs();
    if (existing_outputs) {
      spit(path("ks.bin"), "the keys file that --out replaces\n");
      spit(path("vs.bin"), "the values file that --values-out replaces\n");
    }
  }

  std::vector<std::string> in_place() const
  {
    return {"sort",   path("k.bin"), "--dtype", "u64",   "--values",
            path("v.bin"), "--value-bytes", "8", "--local", "--config",
            (dir_.path() / "cpu.yaml").string(), "--quiet"};
  }

  std::vector<std::string> to_outputs() const
  {
    std::vector<std::string> a = in_place();
    for (const char* s : {"--out", "ks.bin", "--values-out", "vs.bin"})
      a.push_back(s[0] == '-' ? std::string{s} : path(s).string());
    return a;
  }

  /// The sorted pairs are at `keys_out` and `values_out`, the inputs of a separate output as
  /// they were, and nothing else is in the folder.
  void expect_published(const std::string& keys_out, const std::string& values_out,
                        const std::string& context) const
  {
    std::string k = slurp(path(keys_out)), v = slurp(path(values_out));
    ASSERT_EQ(k.size(), n * 8) << context;
    ASSERT_EQ(v.size(), n * 8) << context;
    EXPECT_TRUE(verify(key_array{k.data(), n, dtype::u64}, value_array{v.data(), n, 8},
                       order::ascending, before_)
                    .ok)
        << context;
    std::set<std::string> want{"k.bin", "v.bin", keys_out, values_out};
    EXPECT_EQ(files(), want) << context << ": a temporary or a kept copy was left";
    if (keys_out != "k.bin") {
      EXPECT_TRUE(slurp(path("k.bin")) == keys_) << context << ": the input changed";
      EXPECT_TRUE(slurp(path("v.bin")) == values_) << context << ": the input changed";
    }
  }

  /// Nothing was published: every file is byte for byte as reset() left it, nothing beside.
  void expect_untouched(bool existing_outputs, const run_result& r,
                        const std::string& context) const
  {
    EXPECT_EQ(r.code, 73) << context << ": EX_CANTCREAT expected";
    std::vector<std::string> lines;
    std::istringstream err{r.err};
    for (std::string line; std::getline(err, line);)
      if (!line.starts_with("gpusort: warning: fault injection armed")) lines.push_back(line);
    EXPECT_EQ(lines.size(), 1U) << context << ": one error line expected";
    EXPECT_TRUE(slurp(path("k.bin")) == keys_) << context << ": the keys file changed or was lost";
    EXPECT_TRUE(slurp(path("v.bin")) == values_)
        << context << ": the values file changed or was lost";
    std::set<std::string> want{"k.bin", "v.bin"};
    if (existing_outputs) {
      EXPECT_TRUE(slurp(path("ks.bin")) == "the keys file that --out replaces\n")
          << context << ": the replaced keys output changed or was lost";
      EXPECT_TRUE(slurp(path("vs.bin")) == "the values file that --values-out replaces\n")
          << context << ": the replaced values output changed or was lost";
      want.insert({"ks.bin", "vs.bin"});
    }
    EXPECT_EQ(files(), want) << context << ": a temporary or a kept copy was left";
  }

  /// With the exchange missing, fails in turn every rename and every link a clean run makes
  /// (each once, beside the missing exchange): each run either publishes both outputs or
  /// leaves every file as it was. Returns how many runs failed.
  int sweep(const std::vector<std::string>& args, bool existing_outputs,
            const std::string& keys_out, const std::string& values_out)
  {
    const std::string counts = (dir_.path() / "counts").string();
    reset(existing_outputs);
    const run_result clean = run(args, no_exchange, counts);
    EXPECT_EQ(clean.code, 0) << clean.err;
    expect_published(keys_out, values_out, "clean run without the exchange");
    std::map<std::string, std::uint64_t> per_class;
    std::istringstream in{slurp(counts)};
    for (std::string item; in >> item;)
      per_class[item.substr(0, item.find('='))] = std::stoull(item.substr(item.find('=') + 1));
    EXPECT_EQ(per_class["exchange"], 0U + (existing_outputs || keys_out == "k.bin" ? 2 : 0));
    int failed = 0;
    for (const char* cls : {"rename", "link"}) {
      for (std::uint64_t call = 1; call <= per_class[cls]; ++call) {
        const std::string spec = std::string{no_exchange} + "," + cls + ":" + std::to_string(call);
        reset(existing_outputs);
        const run_result r = run(args, spec);
        const std::string context = spec + ": exit " + std::to_string(r.code) + ", stderr:\n" +
                                    r.err;
        if (r.code == 0) {
          expect_published(keys_out, values_out, context);
        } else {
          ++failed;
          expect_untouched(existing_outputs, r, context);
        }
      }
    }
    return failed;
  }
};

// (a) and (b): an in-place sort of keys and values replaces both inputs.
TEST_F(PublishWithoutExchange, InPlaceKeysAndValuesAreAllOrNothing)
{
  const int failed = sweep(in_place(), false, "k.bin", "v.bin");
  // The values' rename at least fails after the keys are in place: the case that lost the
  // keys file.
  EXPECT_GE(failed, 2);
}

// (c): --out and --values-out replace existing files.
TEST_F(PublishWithoutExchange, ReplacedOutputsAreAllOrNothing)
{
  const int failed = sweep(to_outputs(), true, "ks.bin", "vs.bin");
  EXPECT_GE(failed, 2);
}

// New outputs replace nothing: nothing to keep, no exchange tried.
TEST_F(PublishWithoutExchange, NewOutputsNeedNothingKept)
{
  const int failed = sweep(to_outputs(), false, "ks.bin", "vs.bin");
  EXPECT_GE(failed, 1);
}

// Neither the exchange nor hard links (a FAT or exFAT stick, some FUSE filesystems): a
// multi-output publish that replaces files refuses rather than give up all or nothing, and
// says why; a single output needs no undo and is published.
TEST_F(PublishWithoutExchange, WithoutHardLinksReplacingBothIsRefused)
{
  const std::string spec = std::string{no_exchange} + ",link:1:sticky:EPERM";
  reset(false);
  run_result r = run(in_place(), spec);
  expect_untouched(false, r, spec);
  EXPECT_NE(r.err.find("hard link"), std::string::npos) << r.err;

  reset(true);
  r = run(to_outputs(), spec);
  expect_untouched(true, r, spec);

  // Keys alone, in place: one output, published with a plain rename.
  reset(false);
  r = run({"sort", path("k.bin"), "--dtype", "u64", "--local", "--config",
           (dir_.path() / "cpu.yaml").string(), "--quiet"},
          spec);
  EXPECT_EQ(r.code, 0) << r.err;
  std::string k = slurp(path("k.bin"));
  ASSERT_EQ(k.size(), n * 8);
  EXPECT_TRUE(verify(key_array{k.data(), n, dtype::u64}, std::nullopt, order::ascending,
                     fingerprint_of(key_array{keys_.data(), n, dtype::u64}))
                  .ok);
  EXPECT_EQ(files(), (std::set<std::string>{"k.bin", "v.bin"}));

  // New outputs replace nothing.
  reset(false);
  r = run(to_outputs(), spec);
  EXPECT_EQ(r.code, 0) << r.err;
  expect_published("ks.bin", "vs.bin", spec + ", new outputs");
}

}  // namespace
}  // namespace gpusort::service::testing
