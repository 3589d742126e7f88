// The `gpusort` command line against a real gpusortd: sort through the daemon (the CLI opens the
// files and passes descriptors), the socket from --socket, $GPUSORT_SOCKET or the configuration,
// `gpusort status`, and the exit codes when the daemon is away or refuses a job. Results are
// checked with the verifier of core/verify.hpp against the original files' fingerprints.
#include "tests/service/daemon_test_support.hpp"

#include "tests/client/cli_process.hpp"

#include "tests/client/npy_reference.hpp"

#include "core/generate.hpp"
#include "core/verify.hpp"

#include <gtest/gtest.h>

#include <sys/wait.h>

#include <regex>
#include <set>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace gpusort::service::testing {
namespace {

namespace fs = std::filesystem;

using run_result = test_support::cli_result;

class CliDaemon : public ::testing::Test {
 protected:
  fs::path path(const std::string& name) const { return dir_.path() / "work" / name; }
  void SetUp() override { fs::create_directories(dir_.path() / "work"); }

  run_result run(const std::vector<std::string>& args,
                 const std::vector<std::pair<std::string, std::string>>& env = {},
                 const std::string& stdin_path = "/dev/null") const
  {
    return test_support::run_cli(dir_.path(), args, env, stdin_path);
  }

  /// Writes `n` generated keys (and 8-byte values) and returns their fingerprint.
  fingerprint write_input(dtype t, std::uint64_t n, const std::string& keys_file,
                          const std::string& values_file = "")
  {
    std::string keys(n * size_of(t), '\0');
    generate(key_array{keys.data(), n, t}, distribution::uniform, 5);
    std::optional<value_array> v;
    std::string values;
    if (!values_file.empty()) {
      values.assign(n * 8, '\0');
      v = value_array{values.data(), n, 8};
      generate_values(*v, 5);
      spit(path(values_file), values);
    }
    spit(path(keys_file), keys);
    return fingerprint_of(key_array{keys.data(), n, t}, v);
  }

  ::testing::AssertionResult sorted_file(dtype t, const std::string& keys_file, order dir,
                                         const fingerprint& before,
                                         const std::string& values_file = "")
  {
    std::string keys = slurp(path(keys_file));
    const std::uint64_t n = keys.size() / size_of(t);
    std::string values;
    std::optional<value_array> v;
    if (!values_file.empty()) {
      values = slurp(path(values_file));
      v = value_array{values.data(), n, 8};
    }
    const verify_result r = verify(key_array{keys.data(), n, t}, v, dir, before);
    return r.ok ? ::testing::AssertionSuccess() : ::testing::AssertionFailure() << r.message;
  }

  temp_dir dir_;
};

TEST_F(CliDaemon, SortsThroughTheDaemonInPlaceAndIntoOutputs)
{
  daemon_process d{dir_.path()};
  const fingerprint before = write_input(dtype::i64, 300'000, "k.bin", "v.bin");
  const std::string original = slurp(path("k.bin"));
  run_result r = run({"sort", path("k.bin"), "--dtype", "i64", "--values", path("v.bin"),
                      "--out", path("ks.bin"), "--values-out", path("vs.bin"), "--socket",
                      d.socket(), "--json"});
  ASSERT_EQ(r.code, 0) << r.err << d.log();
  EXPECT_NE(r.out.find("\"elements\":300000"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"queue_seconds\":"), std::string::npos) << r.out;
  EXPECT_TRUE(sorted_file(dtype::i64, "ks.bin", order::ascending, before, "vs.bin"));
  EXPECT_TRUE(slurp(path("k.bin")) == original) << "the input changed";
  // In place, descending; only the two files remain (the temporaries were renamed over them).
  r = run({"sort", path("k.bin"), "--dtype", "i64", "--values", path("v.bin"), "--descending",
           "--socket", d.socket()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("(daemon)"), std::string::npos) << r.out;
  EXPECT_TRUE(sorted_file(dtype::i64, "k.bin", order::descending, before, "v.bin"));
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator{path("")}) files.push_back(e.path().filename());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"k.bin", "ks.bin", "v.bin", "vs.bin"}));
}

TEST_F(CliDaemon, AFileOverTheDaemonsHostBudgetIsSortedInPlaceLeanAndAJobItCannotHoldIsRefused)
{
  // 2M u64 keys with 8-byte values (32 MiB) against a 24 MiB budget: the temporary and the
  // round-1 buffer would not fit, so the CLI hands the daemon the files in place with a journal.
  daemon_process d{dir_.path(), "host_memory_budget: 24MiB\n"};
  const fingerprint before = write_input(dtype::u64, 2'000'000, "k.bin", "v.bin");
  const fs::path out = dir_.path() / "lean-out.txt", err = dir_.path() / "lean-err.txt";
  const pid_t sorting = test_support::start_cli(test_support::cli_command{
      .args = {"sort", path("k.bin"), "--dtype", "u64", "--values", path("v.bin"), "--socket",
               d.socket(), "--json"},
      .stdout_path = out.string(),
      .stderr_path = err.string()});
  // While it runs, the daemon's status shows the job lean, with the budget admitted for it.
  bool seen = false;
  for (int i = 0; i < 500 && !seen; ++i) {
    const run_result st = run({"status", "--socket", d.socket(), "--json"});
    seen = st.out.find("\"host_memory\":25165824,\"lean\":true") != std::string::npos;
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }
  run_result r = test_support::wait_cli(sorting, out, err);
  ASSERT_EQ(r.code, 0) << r.err << d.log();
  EXPECT_TRUE(seen) << "no status showed the job running lean";
  EXPECT_NE(r.out.find("\"path\":\"lean\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"host_memory_limit\":25165824"), std::string::npos) << r.out;
  EXPECT_TRUE(sorted_file(dtype::u64, "k.bin", order::ascending, before, "v.bin"));
  EXPECT_FALSE(fs::exists(path(".k.bin.gpusort-journal")));
  EXPECT_NE(d.log().find("path lean, host memory"), std::string::npos) << d.log();

  // 1 MiB holds no lean plan of these keys: refused up front, naming what it needs, the files
  // as they were.
  fs::create_directories(dir_.path() / "small");
  daemon_process small{dir_.path() / "small", "host_memory_budget: 1MiB\n"};
  const std::string keys = slurp(path("k.bin"));
  r = run({"sort", path("k.bin"), "--dtype", "u64", "--values", path("v.bin"), "--descending",
           "--socket", small.socket()});
  EXPECT_EQ(r.code, 70) << r.err << small.log();
  EXPECT_NE(r.err.find("TOO_LARGE"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("host_memory_budget"), std::string::npos) << r.err;
  EXPECT_TRUE(slurp(path("k.bin")) == keys) << "a refused job touched its file";
  EXPECT_FALSE(fs::exists(path(".k.bin.gpusort-journal")));
}

TEST_F(CliDaemon, ProfileCarriesTheDaemonsStagesBack)
{
  // A budget that sends the job out of core: the CPU engine then profiles both of its rounds.
  daemon_process d{dir_.path(), "device_memory_budget: 512KiB\n"};
  const fingerprint before = write_input(dtype::u64, 200'000, "k.bin");
  run_result r = run({"sort", path("k.bin"), "--dtype", "u64", "--out", path("ks.bin"),
                      "--socket", d.socket(), "--json", "--profile"});
  ASSERT_EQ(r.code, 0) << r.err << d.log();
  EXPECT_TRUE(sorted_file(dtype::u64, "ks.bin", order::ascending, before));
  EXPECT_NE(r.out.find("\"step\":\"sorted by the daemon"), std::string::npos) << r.out;
  for (const char* round : {"1", "2"})
    EXPECT_NE(r.out.find(std::string{"\"device\":\"all\",\"round\":"} + round +
                         ",\"stage\":\"round\""),
              std::string::npos)
        << "round " << round << " missing from " << r.out;
  // For people: the stages' lines after the steps, as --local prints its own.
  r = run({"sort", path("k.bin"), "--dtype", "u64", "--out", path("ks.bin"), "--socket",
           d.socket(), "--profile", "--quiet"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("gpusort: profile: round 2 all round: "), std::string::npos) << r.err;
  // Without --profile the daemon is not asked for one, and --json has no stages.
  r = run({"sort", path("k.bin"), "--dtype", "u64", "--out", path("ks.bin"), "--socket",
           d.socket(), "--json"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("\"stages\""), std::string::npos) << r.out;
}

TEST_F(CliDaemon, SocketFromTheEnvironmentOrTheConfiguration)
{
  daemon_process d{dir_.path()};
  const fingerprint before = write_input(dtype::f32, 10'000, "k.bin");
  run_result r = run({"sort", path("k.bin"), "--dtype", "f32", "--quiet"},
                     {{"GPUSORT_SOCKET", d.socket()}});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(sorted_file(dtype::f32, "k.bin", order::ascending, before));
  spit(dir_.path() / "client.yaml", "socket: " + d.socket() + "\n");
  r = run({"sort", path("k.bin"), "--dtype", "f32", "--descending", "--config",
           (dir_.path() / "client.yaml").string()});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(sorted_file(dtype::f32, "k.bin", order::descending, before));
}

TEST_F(CliDaemon, Status)
{
  daemon_process d{dir_.path()};
  const run_result text = run({"status", "--socket", d.socket()});
  ASSERT_EQ(text.code, 0) << text.err;
  for (const char* part : {"gpusortd ", "device cpu", "host memory:", "shared buffers:",
                           "clients: 1", "jobs: 0 running, 0 queued", "totals: "})
    EXPECT_NE(text.out.find(part), std::string::npos) << part << " in\n" << text.out;
  const run_result json = run({"status", "--socket", d.socket(), "--json"});
  ASSERT_EQ(json.code, 0) << json.err;
  EXPECT_EQ(json.out.front(), '{');
  for (const char* part : {"\"devices\":[{\"name\":\"cpu\"", "\"pinned_pool_bytes\":268435456",
                           "\"jobs\":[]", "\"totals\":{\"jobs_submitted\":0"})
    EXPECT_NE(json.out.find(part), std::string::npos) << part << " in\n" << json.out;
}

TEST_F(CliDaemon, StatusInPrometheusTextFormat)
{
  daemon_process d{dir_.path()};
  const fingerprint before = write_input(dtype::u32, 10'000, "p.bin");
  ASSERT_EQ(run({"sort", path("p.bin").string(), "--dtype", "u32", "--socket", d.socket(),
                 "--quiet"}).code,
            0);
  ASSERT_TRUE(sorted_file(dtype::u32, "p.bin", order::ascending, before));
  const run_result r = run({"status", "--socket", d.socket(), "--prometheus"});
  ASSERT_EQ(r.code, 0) << r.err;
  // Every line is a HELP or TYPE comment, or a sample: a name, optional labels, a number; every
  // sample's metric has its TYPE before it.
  const std::regex sample{R"(^(gpusort_[a-z_]+)(\{[a-z_]+="[^"]*"(,[a-z_]+="[^"]*")*\})? (\S+)$)"};
  const std::regex type{R"(^# TYPE (gpusort_[a-z_]+) (gauge|counter)$)"};
  std::set<std::string> typed;
  std::map<std::string, double> values;
  std::istringstream lines{r.out};
  std::string line;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (line.rfind("# HELP gpusort_", 0) == 0) continue;
    if (std::regex_match(line, m, type)) {
      typed.insert(m[1]);
      continue;
    }
    ASSERT_TRUE(std::regex_match(line, m, sample)) << line;
    EXPECT_TRUE(typed.contains(m[1])) << "no TYPE before " << line;
    std::size_t used = 0;
    const double v = std::stod(m[4], &used);
    EXPECT_EQ(used, m[4].length()) << line;
    values[std::string{m[1]} + std::string{m[2]}] = v;
  }
  EXPECT_EQ(values["gpusort_jobs_submitted_total"], 1.0) << r.out;
  EXPECT_EQ(values["gpusort_jobs_finished_total{outcome=\"succeeded\"}"], 1.0) << r.out;
  EXPECT_EQ(values["gpusort_sorted_bytes_total"], 40'000.0) << r.out;
  EXPECT_EQ(values["gpusort_pinned_pool_bytes"], 268435456.0) << r.out;
  EXPECT_EQ(values["gpusort_jobs{state=\"running\"}"], 0.0) << r.out;
  const auto device = values.lower_bound("gpusort_device_memory_budget_bytes{device=\"cpu\",");
  ASSERT_NE(device, values.end()) << r.out;
  EXPECT_EQ(device->first.rfind("gpusort_device_memory_budget_bytes{device=\"cpu\",model=", 0), 0U)
      << r.out;
  EXPECT_EQ(run({"status", "--socket", d.socket(), "--prometheus", "--json"}).code, 64);
}

TEST_F(CliDaemon, StandardInputGoesThroughASharedBuffer)
{
  daemon_process d{dir_.path()};
  const fingerprint before = write_input(dtype::i64, 100'003, "s.bin");
  const run_result r = run({"sort", "-", "--dtype", "i64", "--descending", "--socket", d.socket()},
                           {}, path("s.bin").string());
  ASSERT_EQ(r.code, 0) << r.err;
  spit(path("sorted.bin"), r.out);
  EXPECT_TRUE(sorted_file(dtype::i64, "sorted.bin", order::descending, before));
  EXPECT_NE(r.err.find("(daemon)"), std::string::npos) << r.err;
  // Larger than the daemon's pinned pool: refused with the key to raise, nothing on stdout.
  const fingerprint big = write_input(dtype::u64, (std::uint64_t{300} << 20) / 8, "big.bin");
  (void)big;
  const run_result refused =
      run({"sort", "-", "--dtype", "u64", "--socket", d.socket()}, {}, path("big.bin").string());
  EXPECT_NE(refused.code, 0);
  EXPECT_EQ(refused.out, "");
  EXPECT_NE(refused.err.find("pinned_pool_bytes"), std::string::npos) << refused.err;
}

TEST_F(CliDaemon, DaemonAwayOrRefusing)
{
  write_input(dtype::u64, 1 << 20, "k.bin");
  const std::string original = slurp(path("k.bin"));
  // Nobody listens: exit 69 with a hint, files untouched, nothing left behind.
  run_result r = run({"sort", path("k.bin"), "--dtype", "u64", "--socket",
                      (dir_.path() / "nobody.sock").string()});
  EXPECT_EQ(r.code, 69) << r.err;
  EXPECT_NE(r.err.find("--local"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(run({"status", "--socket", (dir_.path() / "nobody.sock").string()}).code, 69);
  // A job larger than the daemon's host memory budget: TOO_LARGE, exit 70.
  daemon_process d{dir_.path(), "host_memory_budget: 1MiB\n"};
  r = run({"sort", path("k.bin"), "--dtype", "u64", "--socket", d.socket()});
  EXPECT_EQ(r.code, 70) << r.err;
  EXPECT_NE(r.err.find("TOO_LARGE"), std::string::npos) << r.err;
  EXPECT_TRUE(slurp(path("k.bin")) == original);
  EXPECT_EQ(std::distance(fs::directory_iterator{path("")}, fs::directory_iterator{}), 1);
  EXPECT_EQ(run({"sort", path("k.bin"), "--dtype", "u64", "--local", "--socket", d.socket()})
                .code,
            64);
}

// Issue 43: a user who may not open the socket exited 69 with "start gpusortd or sort with
// --local"; README promises 77 for a daemon that does not serve this user, in every command
// that talks to it. The commands run as a user outside the daemon's group (become_stranger).
TEST_F(CliDaemon, AUserWhoMayNotOpenTheSocketExits77InEveryCommand)
{
  daemon_process d{dir_.path()};
  deny_socket(d.socket());
  // The stranger may read the input and write the folder: only the socket stops it.
  fs::permissions(dir_.path(), fs::perms::others_exec, fs::perm_options::add);
  fs::permissions(path(""), fs::perms::all);
  write_input(dtype::u64, 1000, "k.bin");
  fs::permissions(path("k.bin"), fs::perms::others_read, fs::perm_options::add);
  const std::string original = slurp(path("k.bin"));
  const fs::path out = dir_.path() / "stdout.txt", err = dir_.path() / "stderr.txt";
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"status", "--socket", d.socket()},
        {"sort", path("k.bin"), "--dtype", "u64", "--out", path("s.bin"), "--socket", d.socket()},
        {"sort", "-", "--dtype", "u64", "--socket", d.socket()}}) {
    SCOPED_TRACE(args.front() + " " + args[1]);
    const run_result r = test_support::wait_cli(
        test_support::start_cli({.args = args,
                                 .stdin_path = path("k.bin"),
                                 .stdout_path = out.string(),
                                 .stderr_path = err.string(),
                                 .in_child = become_stranger}),
        out, err);
    EXPECT_EQ(r.code, 77) << r.err;
    EXPECT_NE(r.err.find("join the daemon's group"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("start gpusortd"), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(r.err.starts_with("gpusort: ")) << r.err;
  }
  EXPECT_TRUE(slurp(path("k.bin")) == original);
  EXPECT_EQ(std::distance(fs::directory_iterator{path("")}, fs::directory_iterator{}), 1)
      << "an output or a temporary was left";
}

// Issue 43: a job the daemon's shutdown cancelled exited 70 ("CANCELLED: the sort was
// cancelled"), as a failure does; a script must tell a restart from a failure: 75, try later.
TEST_F(CliDaemon, AJobCancelledByTheDaemonsShutdownExits75)
{
  // Out of core with many chunks: the job runs for seconds and stops at its next chunk.
  daemon_process d{dir_.path(), "device_memory_budget: 1MiB\nshutdown: cancel\n"};
  write_input(dtype::u64, std::uint64_t{4} << 20, "k.bin");
  const std::string original = slurp(path("k.bin"));
  const fs::path out = dir_.path() / "sort.out", err = dir_.path() / "sort.err";
  const pid_t sort = test_support::start_cli(
      {.args = {"sort", path("k.bin"), "--dtype", "u64", "--socket", d.socket()},
       .stdout_path = out.string(),
       .stderr_path = err.string()});
  bool running = false;
  for (int i = 0; i < 1000 && !running; ++i) {
    running = run({"status", "--socket", d.socket(), "--json"}).out.find("\"running_jobs\":1") !=
              std::string::npos;
    if (!running) std::this_thread::sleep_for(std::chrono::milliseconds{10});
  }
  ASSERT_TRUE(running) << d.log();
  d.signal(SIGTERM);
  const run_result r = test_support::wait_cli(sort, out, err);
  EXPECT_EQ(d.wait(std::chrono::seconds{20}), 0) << d.log();
  if (r.code == 0) GTEST_SKIP() << "the sort finished before the daemon stopped it";
  EXPECT_EQ(r.code, 75) << r.err;
  EXPECT_NE(r.err.find("SHUTTING_DOWN: the daemon is shutting down"), std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(slurp(path("k.bin")) == original) << "an in-place sort that failed changed its file";
}

// .npy files, --stable, NumPy's float order and --argsort-out through the daemon: the CLI
// passes the files' descriptors with the offsets of their data, so the header is never part of
// an array. Checked against std::stable_sort with NumPy's or totalOrder's comparator
// (tests/client/npy_reference.hpp). With the tiny budget the largest size sorts out of core.
TEST_F(CliDaemon, NpyStableSortAndArgsortThroughTheDaemon)
{
  namespace ref = npy_reference;
  daemon_process d{dir_.path()};
  for (const std::size_t n : {std::size_t{0}, std::size_t{1}, std::size_t{7919},
                              std::size_t{300007}}) {
    const std::vector<double> keys = ref::tricky_keys<double>(n, 40 + n);
    const std::string h = ref::npy_header("<f8", n);
    const std::string input = h + ref::to_bytes(keys);
    spit(path("a.npy"), input);
    // Stable, into --out: np.sort(a, kind="stable") byte for byte, the header as it was.
    run_result r = run({"sort", path("a.npy"), "--out", path("s.npy"), "--stable", "--socket",
                        d.socket(), "--quiet"});
    ASSERT_EQ(r.code, 0) << r.err << d.log();
    EXPECT_TRUE(slurp(path("s.npy")) == h + ref::to_bytes(ref::stable_sorted(keys, false, true)))
        << "n=" << n;
    EXPECT_TRUE(slurp(path("a.npy")) == input) << "the input changed";
    // In place, descending, not stable: equal in NumPy's order to the reference, the header kept.
    r = run({"sort", path("a.npy"), "--descending", "--socket", d.socket(), "--quiet"});
    ASSERT_EQ(r.code, 0) << r.err;
    const std::string sorted = slurp(path("a.npy"));
    EXPECT_TRUE(sorted.substr(0, h.size()) == h);
    EXPECT_EQ(ref::unstable_difference(ref::stable_sorted(keys, true, true),
                                       ref::from_bytes<double>(sorted.substr(h.size())), true,
                                       true),
              "")
        << "n=" << n;
    // Argsort in both float orders, int64 to a .npy file and uint32 raw with the sorted keys.
    spit(path("a.npy"), input);
    for (const bool numpy : {false, true}) {
      SCOPED_TRACE(std::string{"n="} + std::to_string(n) + (numpy ? " numpy" : " total"));
      const std::string order = numpy ? "numpy" : "total";
      r = run({"sort", path("a.npy"), "--argsort-out", path("i.npy"), "--float-order", order,
               "--socket", d.socket(), "--quiet"});
      ASSERT_EQ(r.code, 0) << r.err << d.log();
      const std::string hi = ref::npy_header("<i8", n);
      const std::string got = slurp(path("i.npy"));
      EXPECT_TRUE(got.substr(0, hi.size()) == hi);
      EXPECT_EQ(ref::first_difference(ref::stable_argsort(keys, false, numpy),
                                      ref::from_bytes<std::int64_t>(got.substr(hi.size()))),
                "");
      r = run({"sort", path("a.npy"), "--argsort-out", path("i.bin"), "--index-type", "u32",
               "--out", path("k.npy"), "--descending", "--float-order", order, "--socket",
               d.socket(), "--quiet"});
      ASSERT_EQ(r.code, 0) << r.err << d.log();
      std::vector<std::int64_t> indices;
      for (const std::uint32_t i : ref::from_bytes<std::uint32_t>(slurp(path("i.bin"))))
        indices.push_back(i);
      EXPECT_EQ(ref::first_difference(ref::stable_argsort(keys, true, numpy), indices), "");
      const std::string k = slurp(path("k.npy"));
      EXPECT_TRUE(k.substr(0, h.size()) == h);
      EXPECT_EQ(ref::first_difference(ref::stable_sorted(keys, true, numpy),
                                      ref::from_bytes<double>(k.substr(h.size()))),
                "");
      EXPECT_TRUE(slurp(path("a.npy")) == input) << "an argsort only reads its keys";
    }
  }
  // Integer keys with values, stable: the values (their indices) in std::stable_sort's order.
  const std::size_t n = 100'003;
  const std::vector<std::int32_t> keys = ref::tricky_keys<std::int32_t>(n, 3);
  std::vector<std::uint64_t> values(n);
  std::iota(values.begin(), values.end(), 0);
  spit(path("k.bin"), ref::to_bytes(keys));
  spit(path("v.bin"), ref::to_bytes(values));
  const run_result r = run({"sort", path("k.bin"), "--dtype", "i32", "--values", path("v.bin"),
                            "--stable", "--descending", "--socket", d.socket(), "--quiet"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::int64_t> moved;
  for (const std::uint64_t v : ref::from_bytes<std::uint64_t>(slurp(path("v.bin"))))
    moved.push_back(static_cast<std::int64_t>(v));
  EXPECT_EQ(ref::first_difference(ref::stable_argsort(keys, true, false), moved), "");
  // A --dtype that contradicts the header: a usage error before the daemon is asked anything.
  const run_result wrong = run({"sort", path("s.npy"), "--dtype", "i64", "--socket", d.socket()});
  EXPECT_EQ(wrong.code, 64) << wrong.err;
  EXPECT_EQ(std::count(wrong.err.begin(), wrong.err.end(), '\n'), 1) << wrong.err;
}

}  // namespace
}  // namespace gpusort::service::testing
