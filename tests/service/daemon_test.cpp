// The daemon end to end: a real gpusortd (CPU engine) on a temporary socket, driven through the
// client library and, for what the library never sends, through raw frames. Every sorted result
// is checked with the verifier of core/verify.hpp (order plus a fingerprint of the original
// (key, value) multiset), never against the daemon's own output.
#include "tests/service/daemon_test_support.hpp"

#include "core/generate.hpp"
#include "core/records.hpp"
#include "core/verify.hpp"
#include "tests/support/stable_reference.hpp"

#include <gpusort/client.hpp>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <grp.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <atomic>
#include <cstring>
#include <future>
#include <memory>
#include <thread>

namespace gpusort::service::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using client::status_code;

// A job that runs long enough to be cancelled, killed or drained mid-way: the out-of-core path
// (a 1 MiB device budget) checks for cancellation at every chunk, and 4Mi u64 keys make about
// 70 of them (two seconds on two cores).
constexpr std::uint64_t long_count = std::uint64_t{4} << 20;
constexpr const char* long_budget = "device_memory_budget: 1MiB\n";

class Daemon : public ::testing::Test {
 protected:
  fs::path dir() const { return dir_.path(); }
  temp_dir dir_;
};

/// Waits until `pred(status)` holds, polling the daemon; false after `timeout`.
template <typename Pred>
bool eventually(client::connection& c, Pred pred, std::chrono::milliseconds timeout = 20s)
{
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (pred(c.status())) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

/// Submits `request` and returns once the daemon reports the job's first progress, so that it is
/// running when the test acts on it.
client::job submit_running(client::connection& c, const client::sort_request& request)
{
  auto started = std::make_shared<std::promise<void>>();
  auto once = std::make_shared<std::atomic<bool>>(false);
  std::future<void> running = started->get_future();
  client::job j = c.submit(request, [started, once](const progress_event&) {
    if (!once->exchange(true)) started->set_value();
  });
  EXPECT_EQ(running.wait_for(20s), std::future_status::ready) << "the job never started";
  return j;
}

status_code code_of(const std::function<void()>& f)
{
  try {
    f();
  } catch (const client::error& e) {
    return e.code();
  }
  return status_code::ok;
}

/// The message of the client::error that `f` throws; "" when it throws none.
std::string message_of(const std::function<void()>& f)
{
  try {
    f();
  } catch (const client::error& e) {
    return e.what();
  }
  return "";
}

// ---- round trips ----------------------------------------------------------------------------

TEST_F(Daemon, EveryDtypeInPlaceBothOrdersThroughSharedBuffers)
{
  daemon_process d{dir()};
  auto c = client::connection::connect(d.socket(), "daemon test");
  EXPECT_EQ(c.server().devices, std::vector<std::string>{"cpu"});
  EXPECT_EQ(c.server().protocol_version, 1);
  constexpr std::uint64_t n = 100'000;
  for (const dtype t : all_dtypes) {
    for (const order dir : {order::ascending, order::descending}) {
      SCOPED_TRACE(std::string{name_of(t)} + (dir == order::ascending ? " asc" : " desc"));
      client::shared_buffer keys = c.allocate_bytes(n * size_of(t));
      ASSERT_GE(keys.size(), n * size_of(t));
      const distribution dist = is_float(t) ? distribution::nanmix : distribution::uniform;
      const fingerprint before = fill(keys.data(), t, n, 11, nullptr, 0, dist);
      const sort_report r =
          c.sort({.type = t, .count = n, .direction = dir, .keys = client::array_ref::in(keys)});
      EXPECT_EQ(r.elements, n);
      EXPECT_EQ(r.bytes, n * size_of(t));
      EXPECT_TRUE(sorted(keys.data(), t, n, dir, before));
    }
  }
}

TEST_F(Daemon, PairsAndSeparateOutputsLeaveTheInputAlone)
{
  daemon_process d{dir()};
  auto c = client::connection::connect(d.socket());
  constexpr std::uint64_t n = 50'000;
  for (const dtype t : all_dtypes) {
    for (const std::uint32_t vb : {4U, 8U}) {
      SCOPED_TRACE(std::string{name_of(t)} + " values " + std::to_string(vb));
      auto in = c.allocate_bytes(n * (size_of(t) + vb));
      auto out = c.allocate_bytes(n * (size_of(t) + vb));
      std::byte* values = in.data() + n * size_of(t);
      const fingerprint before = fill(in.data(), t, n, 5 + vb, values, vb);
      const std::string original(reinterpret_cast<const char*>(in.data()),
                                 n * (size_of(t) + vb));
      c.sort({.type = t,
              .count = n,
              .direction = order::descending,
              .keys = client::array_ref::in(in),
              .value_bytes = vb,
              .values = client::array_ref::in(in, n * size_of(t)),
              .keys_out = client::array_ref::in(out),
              .values_out = client::array_ref::in(out, n * size_of(t))});
      EXPECT_TRUE(sorted(out.data(), t, n, order::descending, before,
                         out.data() + n * size_of(t), vb));
      EXPECT_EQ(std::memcmp(in.data(), original.data(), original.size()), 0)
          << "a separate-output job wrote its input";
    }
  }
}

TEST_F(Daemon, ArgsortAndStableNumpyOrderThroughSharedBuffers)
{
  daemon_process d{dir()};
  auto c = client::connection::connect(d.socket());
  constexpr std::uint64_t n = 30'011;
  const std::vector<double> original = test::tied_keys<double>(n, 5, 3);
  auto keys = c.allocate<double>(n);
  auto idx = c.allocate<std::int64_t>(n);
  auto sorted = c.allocate<double>(n);
  std::copy(original.begin(), original.end(), keys.begin());
  for (const order dir : {order::ascending, order::descending}) {
    SCOPED_TRACE(dir == order::ascending ? "ascending" : "descending");
    const std::vector<std::uint64_t> ref =
        test::reference_argsort(original, dir, float_order::numpy);
    c.sort({.type = dtype::f64,
            .count = n,
            .direction = dir,
            .keys = client::array_ref::in(keys),
            .keys_out = client::array_ref::in(sorted),
            .floats = float_order::numpy,
            .indices_out = client::array_ref::in(idx)});
    const std::vector<std::int64_t> got(idx.begin(), idx.end());
    EXPECT_EQ(got, std::vector<std::int64_t>(ref.begin(), ref.end()));
    EXPECT_EQ(std::memcmp(keys.data(), original.data(), n * sizeof(double)), 0)
        << "an argsort wrote its keys";
    // The stable sort in place gives the same bytes as the argsort's sorted keys.
    auto copy = c.allocate<double>(n);
    std::copy(original.begin(), original.end(), copy.begin());
    c.sort({.type = dtype::f64,
            .count = n,
            .direction = dir,
            .keys = client::array_ref::in(copy),
            .stable = true,
            .floats = float_order::numpy});
    std::vector<double> expected(n);
    for (std::uint64_t i = 0; i < n; ++i) expected[i] = original[ref[i]];
    EXPECT_EQ(std::memcmp(copy.data(), expected.data(), n * sizeof(double)), 0);
    EXPECT_EQ(std::memcmp(sorted.data(), expected.data(), n * sizeof(double)), 0);
  }
  // u32 indices past 2^32 keys are refused before any work.
  try {
    c.sort({.type = dtype::f64,
            .count = n,
            .keys = client::array_ref::in(keys),
            .indices_out = client::array_ref::in(idx),
            .index_bytes = 2});
    ADD_FAILURE() << "index_bytes 2 accepted";
  } catch (const client::error& e) {
    EXPECT_EQ(e.code(), status_code::bad_request) << e.what();
  }
}

// Records jobs (issue 42): gensort's records by their 10-byte key, in a shared buffer in place,
// into another buffer, as a permutation, and in plain files; every result checked by the
// independent records verifier (core/records.hpp) or against a stable reference.
TEST_F(Daemon, RecordsSortAndArgsortThroughBuffersAndFiles)
{
  daemon_process d{dir()};
  auto c = client::connection::connect(d.socket());
  constexpr std::uint64_t n = 50'021;
  constexpr std::uint32_t r = 100;
  const std::vector<key_field> key{{column_type::bytes, 0, 10}};
  std::vector<unsigned char> original(n * r);
  generate_records(original.data(), n, r, distribution::fewunique, 9);
  const records_checksum sum = checksum_records({original.data(), n, r});
  const auto verified = [&](const void* p) {
    const records_check check = verify_records({p, n, r}, key, sum);
    return check.ok ? std::string{} : check.message;
  };

  auto buf = c.allocate_bytes(n * r);
  std::memcpy(buf.data(), original.data(), n * r);
  c.sort_records(buf, n, r, key);
  EXPECT_EQ(verified(buf.data()), "");
  // fewunique keys tie in large groups: the sort is stable, so the row numbers the records
  // carry (gensort's hex digits) ascend within each key.
  for (std::uint64_t i = 1; i < n; ++i) {
    const auto* a = reinterpret_cast<const unsigned char*>(buf.data()) + (i - 1) * r;
    if (std::memcmp(a, a + r, 10) == 0) {
      ASSERT_LT(std::memcmp(a + 12, a + r + 12, 32), 0) << "not stable at " << i;
    }
  }

  // Into another buffer, the input untouched; and the permutation (u32) of the input.
  auto in = c.allocate_bytes(n * r);
  auto out = c.allocate_bytes(n * r);
  std::memcpy(in.data(), original.data(), n * r);
  c.sort({.count = n,
          .keys = client::array_ref::in(in),
          .keys_out = client::array_ref::in(out),
          .record_bytes = r,
          .key_fields = key});
  EXPECT_EQ(verified(out.data()), "");
  EXPECT_EQ(std::memcmp(in.data(), original.data(), n * r), 0) << "the input was written";
  auto idx = c.allocate<std::uint32_t>(n);
  c.sort({.count = n,
          .keys = client::array_ref::in(in),
          .indices_out = client::array_ref::in(idx),
          .index_bytes = 4,
          .record_bytes = r,
          .key_fields = key});
  for (std::uint64_t i = 0; i < n; ++i)
    ASSERT_EQ(std::memcmp(original.data() + std::uint64_t{idx[i]} * r,
                          reinterpret_cast<const unsigned char*>(out.data()) + i * r, r),
              0)
        << i;

  // Plain files, in place and into another file, the records after a header of 7 bytes.
  std::string file(7, 'h');
  file.append(reinterpret_cast<const char*>(original.data()), n * r);
  spit(dir() / "records.bin", file);
  spit(dir() / "sorted.bin", std::string(n * r, '\0'));
  {
    const unique_fd f{::open((dir() / "records.bin").c_str(), O_RDONLY | O_CLOEXEC)};
    const unique_fd o{::open((dir() / "sorted.bin").c_str(), O_RDWR | O_CLOEXEC)};
    c.sort({.count = n,
            .keys = client::array_ref::of_fd(f.get(), 7),
            .keys_out = client::array_ref::of_fd(o.get()),
            .record_bytes = r,
            .key_fields = key});
  }
  EXPECT_EQ(slurp(dir() / "records.bin"), file) << "the input file was written";
  EXPECT_EQ(verified(slurp(dir() / "sorted.bin").data()), "");
  {
    const unique_fd f{::open((dir() / "records.bin").c_str(), O_RDWR | O_CLOEXEC)};
    c.sort({.count = n,
            .keys = client::array_ref::of_fd(f.get(), 7),
            .record_bytes = r,
            .key_fields = key});
  }
  const std::string in_place = slurp(dir() / "records.bin");
  EXPECT_EQ(in_place.substr(0, 7), "hhhhhhh");
  EXPECT_EQ(verified(in_place.data() + 7), "");

  // Bad specifications: BAD_REQUEST naming the problem, nothing written.
  std::memcpy(buf.data(), original.data(), n * r);
  const auto refused = [&](client::sort_request req, const std::string& says) {
    try {
      c.sort(req);
      ADD_FAILURE() << "accepted: " << says;
    } catch (const client::error& e) {
      EXPECT_EQ(e.code(), status_code::bad_request) << e.what();
      EXPECT_NE(std::string{e.what()}.find(says), std::string::npos) << e.what();
    }
    EXPECT_EQ(std::memcmp(buf.data(), original.data(), n * r), 0);
  };
  const client::sort_request base{.count = n, .keys = client::array_ref::in(buf),
                                  .record_bytes = r, .key_fields = key};
  auto beyond = base;
  beyond.key_fields = {{column_type::u64, 96}};
  refused(beyond, "ends beyond the 100-byte record");
  auto none = base;
  none.key_fields = {};
  refused(none, "at least one key field");
  auto past = base;
  past.count = buf.size() / r + 1;
  refused(past, "past the end of buffer");
}

TEST_F(Daemon, TypedBuffersAndEmptyJobs)
{
  daemon_process d{dir()};
  auto c = client::connection::connect(d.socket());
  auto keys = c.allocate<std::int64_t>(1000);
  auto values = c.allocate<std::uint32_t>(1000);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    keys[i] = static_cast<std::int64_t>((i * 7919) % 1000) - 500;
    values[i] = static_cast<std::uint32_t>(i);
  }
  std::vector<std::pair<std::int64_t, std::uint32_t>> expected;
  for (std::size_t i = 0; i < keys.size(); ++i) expected.emplace_back(keys[i], values[i]);
  std::sort(expected.begin(), expected.end());
  c.sort_pairs(keys, values);
  for (std::size_t i = 0; i < keys.size(); ++i) {
    ASSERT_EQ(keys[i], expected[i].first) << i;
    ASSERT_EQ(values[i], expected[i].second) << i;
  }
  // Zero elements is a job like any other.
  const auto r = c.sort({.type = dtype::u32, .count = 0, .keys = client::array_ref::in(keys)});
  EXPECT_EQ(r.elements, 0u);
}

TEST_F(Daemon, RegularFilesPassedAsDescriptors)
{
  daemon_process d{dir()};
  auto c = client::connection::connect(d.socket());
  constexpr std::uint64_t n = 200'000;
  std::vector<std::uint64_t> keys(n), values(n);
  const fingerprint before = fill(keys.data(), dtype::u64, n, 3, values.data(), 8);
  // Keys then values in one file: one descriptor serves two arrays.
  std::string bytes(reinterpret_cast<const char*>(keys.data()), n * 8);
  bytes.append(reinterpret_cast<const char*>(values.data()), n * 8);
  spit(dir() / "in.bin", bytes);
  spit(dir() / "out.bin", std::string(2 * n * 8, '\0'));
  {
    const unique_fd in{::open((dir() / "in.bin").c_str(), O_RDONLY | O_CLOEXEC)};
    const unique_fd out{::open((dir() / "out.bin").c_str(), O_RDWR | O_CLOEXEC)};
    c.sort({.type = dtype::u64,
            .count = n,
            .keys = client::array_ref::of_fd(in.get()),
            .value_bytes = 8,
            .values = client::array_ref::of_fd(in.get(), n * 8),
            .keys_out = client::array_ref::of_fd(out.get()),
            .values_out = client::array_ref::of_fd(out.get(), n * 8)});
  }
  EXPECT_EQ(slurp(dir() / "in.bin"), bytes) << "the input file was written";
  std::string out = slurp(dir() / "out.bin");
  EXPECT_TRUE(sorted(out.data(), dtype::u64, n, order::ascending, before, out.data() + n * 8, 8));

  // In place on a file opened read-write.
  {
    const unique_fd f{::open((dir() / "in.bin").c_str(), O_RDWR | O_CLOEXEC)};
    c.sort({.type = dtype::u64,
            .count = n,
            .direction = order::descending,
            .keys = client::array_ref::of_fd(f.get()),
            .value_bytes = 8,
            .values = client::array_ref::of_fd(f.get(), n * 8)});
  }
  std::string in_place = slurp(dir() / "in.bin");
  EXPECT_TRUE(sorted(in_place.data(), dtype::u64, n, order::descending, before,
                     in_place.data() + n * 8, 8));
}

// Issue 43: of_fd(-1), what a failed open() returns, was taken for "buffer 0" and reported at
// the job as "buffer 0 is not a buffer of this connection". It is refused where it is made.
TEST_F(Daemon, ANegativeDescriptorIsRefusedWhereItIsMade)
{
  daemon_process d{dir()};
  auto c = client::connection::connect(d.socket());
  const int missing = ::open((dir() / "no such file").c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_LT(missing, 0);
  const std::string why = message_of([&] {
    c.sort({.type = dtype::u64, .count = 1, .keys = client::array_ref::of_fd(missing)});
  });
  EXPECT_TRUE(why.starts_with("BAD_FD: array_ref::of_fd(-1): not a descriptor")) << why;
  EXPECT_EQ(code_of([&] { client::array_ref::of_fd(-2, 8); }), status_code::bad_fd);
  EXPECT_EQ(c.status().totals.jobs_submitted, 0u) << "nothing reached the daemon";
}

TEST_F(Daemon, ClientSealedMemfd)
{
  daemon_process d{dir()};
  auto c = client::connection::connect(d.socket());
  constexpr std::uint64_t n = 100'000;
  const unique_fd fd = make_memfd(n * 4, F_SEAL_SHRINK);
  void* p = ::mmap(nullptr, n * 4, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  ASSERT_NE(p, MAP_FAILED);
  const fingerprint before = fill(p, dtype::f32, n, 9);
  c.sort({.type = dtype::f32, .count = n, .keys = client::array_ref::of_fd(fd.get())});
  EXPECT_TRUE(sorted(p, dtype::f32, n, order::ascending, before));
  ::munmap(p, n * 4);
}

TEST_F(Daemon, ThirtyTwoClientsAtOnce)
{
  daemon_process d{dir(), "max_running_jobs: 4\n"};
  constexpr int clients = 32;
  std::vector<std::future<std::string>> results;
  for (int i = 0; i < clients; ++i) {
    results.push_back(std::async(std::launch::async, [&d, i]() -> std::string {
      try {
        auto c = client::connection::connect(d.socket(), "client " + std::to_string(i));
        const dtype t = all_dtypes[static_cast<std::size_t>(i) % std::size(all_dtypes)];
        const std::uint64_t n = 20'000 + static_cast<std::uint64_t>(i) * 1000;
        auto keys = c.allocate_bytes(n * size_of(t));
        auto values = c.allocate_bytes(n * 8);
        const fingerprint before =
            fill(keys.data(), t, n, static_cast<std::uint64_t>(i), values.data(), 8);
        const order dir = i % 2 == 0 ? order::ascending : order::descending;
        c.sort({.type = t,
                .count = n,
                .direction = dir,
                .keys = client::array_ref::in(keys),
                .value_bytes = 8,
                .values = client::array_ref::in(values)});
        const verify_result r = verify(key_array{keys.data(), n, t},
                                       value_array{values.data(), n, 8}, dir, before);
        return r.ok ? std::string{} : r.message;
      } catch (const std::exception& e) {
        return e.what();
      }
    }));
  }
  for (int i = 0; i < clients; ++i) EXPECT_EQ(results[i].get(), "") << "client " << i;
  auto c = client::connection::connect(d.socket());
  const client::daemon_status s = c.status();
  EXPECT_EQ(s.totals.jobs_succeeded, static_cast<std::uint64_t>(clients));
  EXPECT_EQ(s.totals.jobs_failed, 0u);
  EXPECT_GE(s.totals.connections, static_cast<std::uint64_t>(clients + 1));
}

// ---- cancel, disconnect, kill ----------------------------------------------------------------

TEST_F(Daemon, CancelRunningAndQueuedJobs)
{
  daemon_process d{dir(), std::string{long_budget} + "max_running_jobs: 1\n"};
  auto c = client::connection::connect(d.socket());
  auto keys = c.allocate_bytes(long_count * 8);
  const fingerprint before = fill(keys.data(), dtype::u64, long_count, 21);
  auto small = c.allocate<std::uint32_t>(1000);
  client::job running = submit_running(
      c, {.type = dtype::u64, .count = long_count, .keys = client::array_ref::in(keys)});
  // One worker: this one waits behind the long job.
  client::job queued = c.submit(
      {.type = dtype::u32, .count = small.size(), .keys = client::array_ref::in(small)});
  EXPECT_GT(queued.queue_position(), 0u);
  EXPECT_EQ(queued.status().state, client::job_state::queued);
  queued.cancel();
  EXPECT_EQ(code_of([&] { queued.wait(); }), status_code::cancelled);

  EXPECT_EQ(running.status().state, client::job_state::running);
  running.cancel();
  EXPECT_EQ(code_of([&] { running.wait(); }), status_code::cancelled);
  // In place and cancelled: the buffer holds exactly the original elements.
  EXPECT_EQ(fingerprint_of(key_array{keys.data(), long_count, dtype::u64}), before);
  // Finished jobs are forgotten.
  EXPECT_EQ(code_of([&] { c.job_status(running.id()); }), status_code::not_found);
  const client::daemon_status s = c.status();
  EXPECT_EQ(s.totals.jobs_cancelled, 2u);
  EXPECT_EQ(s.running_jobs + s.queued_jobs, 0u);
}

TEST_F(Daemon, ClientKilledMidJobFreesItsMemory)
{
  daemon_process d{dir(), long_budget};
  auto c = client::connection::connect(d.socket());
  const client::daemon_status baseline = c.status();
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(ready[0]);
    try {
      auto mine = client::connection::connect(d.socket(), "doomed");
      auto keys = mine.allocate_bytes(long_count * 8);
      auto spare = mine.allocate_bytes(1 << 20);
      // No OpenMP after fork (libgomp's threads stayed with the parent): a plain loop.
      auto* k = reinterpret_cast<std::uint64_t*>(keys.data());
      for (std::uint64_t i = 0; i < long_count; ++i) k[i] = (i * 0x9E3779B97F4A7C15ULL) >> 7;
      std::promise<void> running;
      std::atomic<bool> once{false};
      client::job j = mine.submit(
          {.type = dtype::u64, .count = long_count, .keys = client::array_ref::in(keys)},
          [&](const progress_event&) {
            if (!once.exchange(true)) running.set_value();
          });
      if (running.get_future().wait_for(20s) != std::future_status::ready) ::_exit(1);
      const char byte = 1;
      static_cast<void>(::write(ready[1], &byte, 1));
      j.wait();
    } catch (...) {
    }
    ::_exit(0);
  }
  ::close(ready[1]);
  char byte = 0;
  pollfd p{.fd = ready[0], .events = POLLIN, .revents = 0};
  ASSERT_EQ(::poll(&p, 1, 30'000), 1) << "the child did not get its job running\n" << d.log();
  ASSERT_EQ(::read(ready[0], &byte, 1), 1) << "the child did not get its job running\n"
                                            << d.log();
  ::close(ready[0]);
  EXPECT_GT(c.status().pinned_pool_used, baseline.pinned_pool_used);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_TRUE(eventually(c, [&](const client::daemon_status& s) {
    return s.running_jobs == 0 && s.buffers == baseline.buffers &&
           s.pinned_pool_used == baseline.pinned_pool_used && s.host_memory_used == 0 &&
           s.clients == 1;
  })) << d.log();
  EXPECT_EQ(c.status().totals.jobs_cancelled, 1u);
  // And the daemon serves on.
  auto keys = c.allocate<std::uint64_t>(10'000);
  const fingerprint before = fill(keys.data(), dtype::u64, keys.size(), 8);
  c.sort(keys);
  EXPECT_TRUE(sorted(keys.data(), dtype::u64, keys.size(), order::ascending, before));
}

// Issue 43: a client gone mid-job was logged "disconnected: 1 job(s) cancelled", and then
// "job N done", counted as succeeded: the CPU engine's in-core sort cannot stop part way. The
// log and the totals must say what happened: stopped (cancelled) or run to its end (done).
TEST_F(Daemon, ADisconnectLogsAndCountsWhatHappenedToARunningJob)
{
  // No budget, in both runs: the CPU engine's direct in-core path, which checks only between
  // its passes.
  daemon_process d{dir(), "device_memory_budget: auto\n"};
  constexpr std::uint64_t n = std::uint64_t{8} << 20;
  std::uint64_t job_id = 0;
  {
    auto c = client::connection::connect(d.socket(), "goes away");
    auto keys = c.allocate_bytes(n * 8);
    fill(keys.data(), dtype::u64, n, 43);
    client::job j = submit_running(
        c, {.type = dtype::u64, .count = n, .keys = client::array_ref::in(keys)});
    job_id = j.id();
    c.close();
  }
  auto watcher = client::connection::connect(d.socket());
  const std::string done = "job " + std::to_string(job_id) + " done";
  const std::string cancelled = "job " + std::to_string(job_id) + " cancelled";
  std::string log;
  for (int i = 0; i < 3000; ++i) {
    log = d.log();
    if (log.find(done) != std::string::npos || log.find(cancelled) != std::string::npos) break;
    std::this_thread::sleep_for(10ms);
  }
  EXPECT_NE(log.find("1 running job(s) asked to stop"), std::string::npos) << log;
  const client::daemon_status s = watcher.status();
  if (log.find(done) != std::string::npos) {
    EXPECT_NE(log.find(done + " (asked to stop after its last check for it"), std::string::npos)
        << log;
    EXPECT_EQ(s.totals.jobs_succeeded, 1u);
    EXPECT_EQ(s.totals.jobs_cancelled, 0u);
  } else {
    ASSERT_NE(log.find(cancelled), std::string::npos) << "the job's end is not logged\n" << log;
    EXPECT_EQ(s.totals.jobs_succeeded, 0u);
    EXPECT_EQ(s.totals.jobs_cancelled, 1u);
  }
}

TEST_F(Daemon, DaemonKilledMidJob)
{
  constexpr std::uint64_t n = long_count;
  std::string original;
  {
    std::vector<std::uint64_t> keys(n);
    fill(keys.data(), dtype::u64, n, 77);
    original.assign(reinterpret_cast<const char*>(keys.data()), n * 8);
  }
  spit(dir() / "in.bin", original);
  spit(dir() / "out.bin", std::string(n * 8, '\0'));
  auto d = std::make_unique<daemon_process>(dir(), long_budget);
  const std::string socket = d->socket();
  {
    auto c = client::connection::connect(socket);
    const unique_fd in{::open((dir() / "in.bin").c_str(), O_RDONLY | O_CLOEXEC)};
    const unique_fd out{::open((dir() / "out.bin").c_str(), O_RDWR | O_CLOEXEC)};
    client::job j = submit_running(c, {.type = dtype::u64,
                                       .count = n,
                                       .keys = client::array_ref::of_fd(in.get()),
                                       .keys_out = client::array_ref::of_fd(out.get())});
    d->signal(SIGKILL);
    EXPECT_EQ(d->wait(10s), -SIGKILL);
    EXPECT_EQ(code_of([&] { j.wait(); }), status_code::connection_lost);
    EXPECT_EQ(code_of([&] { c.status(); }), status_code::connection_lost);
  }
  EXPECT_TRUE(slurp(dir() / "in.bin") == original) << "the input of a separate-output job changed";
  // A new daemon replaces the dead one's socket file.
  ASSERT_TRUE(fs::exists(socket));
  d.reset();
  daemon_process again{dir()};
  auto c = client::connection::connect(again.socket());
  EXPECT_NO_THROW(c.status());
}

TEST_F(Daemon, ReleaseOfABufferAJobUsesIsRefused)
{
  daemon_process d{dir(), std::string{long_budget} + "max_running_jobs: 1\n"};
  // A long job of another client holds the only worker, so the raw client's job stays queued.
  auto other = client::connection::connect(d.socket());
  auto keys = other.allocate_bytes(long_count * 8);
  fill(keys.data(), dtype::u64, long_count, 12);
  client::job busy =
      other.submit({.type = dtype::u64, .count = long_count, .keys = client::array_ref::in(keys)});
  raw_connection raw{d.socket()};
  raw.hello();
  wire::AllocateRequest a;
  a.set_bytes(4096);
  raw.send(2, a);
  const std::uint64_t id = std::get<wire::AllocateReply>(raw.next_frame().msg).buffer_id();
  wire::SubmitRequest sub;
  sub.set_dtype(wire::DTYPE_U32);
  sub.set_count(1024);
  sub.mutable_keys()->set_buffer_id(id);
  sub.set_in_place(true);
  raw.send(3, sub);
  const proto::frame submitted = raw.next_frame();
  ASSERT_EQ(status_of(submitted).code(), wire::OK);
  const std::uint64_t job_id = std::get<wire::SubmitReply>(submitted.msg).job_id();
  wire::ReleaseRequest release;
  release.set_buffer_id(id);
  raw.send(4, release);
  const wire::Status refused = status_of(raw.next_frame());
  EXPECT_EQ(refused.code(), wire::FAILED_PRECONDITION);
  EXPECT_NE(refused.message().find("in use by job"), std::string::npos) << refused.message();
  wire::CancelRequest cancel;
  cancel.set_job_id(job_id);
  raw.send(5, cancel);
  EXPECT_EQ(status_of(raw.next_frame()).code(), wire::OK);
  const proto::frame finished = raw.next_frame();
  EXPECT_EQ(finished.type, proto::message_type::job_finished);
  EXPECT_EQ(finished.header.request_id, 3u);
  EXPECT_EQ(status_of(finished).code(), wire::CANCELLED);
  raw.send(6, release);
  EXPECT_EQ(status_of(raw.next_frame()).code(), wire::OK);
  busy.cancel();
  EXPECT_EQ(code_of([&] { busy.wait(); }), status_code::cancelled);
}

// ---- shutdown -----------------------------------------------------------------------------------

TEST_F(Daemon, SigtermDrainsRunningJobs)
{
  daemon_process d{dir(), long_budget};
  auto c = client::connection::connect(d.socket());
  auto keys = c.allocate_bytes(long_count * 8);
  const fingerprint before = fill(keys.data(), dtype::u64, long_count, 31);
  client::job j = submit_running(
      c, {.type = dtype::u64, .count = long_count, .keys = client::array_ref::in(keys)});
  d.signal(SIGTERM);
  EXPECT_TRUE(d.notify().wait_for("STOPPING=1", 10s, nullptr));
  // No new connections, no new jobs; the running one finishes.
  EXPECT_THROW(client::connection::connect(d.socket()), client::error);
  auto more = c.allocate<std::uint32_t>(10);
  EXPECT_EQ(code_of([&] { c.sort(more); }), status_code::shutting_down);
  EXPECT_NO_THROW(j.wait());
  EXPECT_TRUE(sorted(keys.data(), dtype::u64, long_count, order::ascending, before));
  EXPECT_EQ(d.wait(20s), 0) << d.log();
  EXPECT_FALSE(fs::exists(d.socket())) << "the socket file is left behind";
}

TEST_F(Daemon, SigtermWithShutdownCancel)
{
  daemon_process d{dir(), std::string{long_budget} + "shutdown: cancel\n"};
  auto c = client::connection::connect(d.socket());
  auto keys = c.allocate_bytes(long_count * 8);
  const fingerprint before = fill(keys.data(), dtype::u64, long_count, 32);
  client::job j = submit_running(
      c, {.type = dtype::u64, .count = long_count, .keys = client::array_ref::in(keys)});
  d.signal(SIGTERM);
  // Issue 43: CANCELLED looked like the client's own doing or a failure; SHUTTING_DOWN says
  // that the daemon stops and the job can run again once it is back.
  const std::string why = message_of([&] { j.wait(); });
  EXPECT_TRUE(why.starts_with("SHUTTING_DOWN: the daemon is shutting down (shutdown: cancel)"))
      << why;
  EXPECT_NE(why.find("run it again"), std::string::npos) << why;
  EXPECT_EQ(fingerprint_of(key_array{keys.data(), long_count, dtype::u64}), before);
  EXPECT_EQ(d.wait(20s), 0) << d.log();
}

TEST_F(Daemon, ShutdownTimeoutCancelsWhatIsLeft)
{
  daemon_process d{dir(), std::string{long_budget} + "shutdown_timeout: 0\n"};
  auto c = client::connection::connect(d.socket());
  auto keys = c.allocate_bytes(long_count * 8);
  const fingerprint before = fill(keys.data(), dtype::u64, long_count, 33);
  client::job j = submit_running(
      c, {.type = dtype::u64, .count = long_count, .keys = client::array_ref::in(keys)});
  d.signal(SIGTERM);
  EXPECT_EQ(code_of([&] { j.wait(); }), status_code::shutting_down);
  EXPECT_EQ(fingerprint_of(key_array{keys.data(), long_count, dtype::u64}), before);
  EXPECT_EQ(d.wait(20s), 0) << d.log();
  EXPECT_NE(d.log().find("timeout 0 s"), std::string::npos) << d.log();
}

// ---- the socket, peers, readiness --------------------------------------------------------------

TEST_F(Daemon, ReadyOnlyWhenServingAndSocketMode0660)
{
  daemon_process d{dir()};
  EXPECT_NE(d.notices().find("READY=1"), std::string::npos);
  EXPECT_NE(d.notices().find("STATUS="), std::string::npos);
  struct stat st {};
  ASSERT_EQ(::lstat(d.socket().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0660u);
  // READY came after the socket was bound: a connection works at once.
  EXPECT_NO_THROW(client::connection::connect(d.socket()));
}

TEST_F(Daemon, SocketActivationUsesThePassedSocketAndLeavesItsFile)
{
  // As systemd's gpusortd.socket does: the socket made, bound and listening before the daemon.
  const std::string path = (dir() / "gpusortd.sock").string();
  const unique_fd s{::socket(AF_UNIX, SOCK_STREAM, 0)};
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(::bind(s.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(s.get(), 16), 0);
  daemon_process d{dir(), "", true, s.get()};
  EXPECT_NE(d.log().find("listening on the socket systemd passed"), std::string::npos) << d.log();
  EXPECT_EQ(d.log().find("replaced the stale socket"), std::string::npos) << d.log();
  auto conn = client::connection::connect(d.socket());
  auto keys = conn.allocate<std::uint32_t>(10'000);
  for (std::size_t i = 0; i < keys.size(); ++i)
    keys[i] = static_cast<std::uint32_t>(i * 2654435761U);
  const fingerprint before = fingerprint_of(key_array{keys.data(), keys.size(), dtype::u32});
  conn.sort(keys);
  EXPECT_TRUE(verify(key_array{keys.data(), keys.size(), dtype::u32}, std::nullopt,
                     order::ascending, before)
                  .ok);
  conn.close();
  d.signal(SIGTERM);
  EXPECT_EQ(d.wait(20s), 0) << d.log();
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << "the socket file is systemd's to remove";
}

TEST_F(Daemon, StaleSocketReplacedLiveDaemonRefused)
{
  // A socket file nobody listens on, as a crashed daemon leaves it.
  const std::string path = (dir() / "gpusortd.sock").string();
  {
    const unique_fd s{::socket(AF_UNIX, SOCK_STREAM, 0)};
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    ASSERT_EQ(::bind(s.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr), 0);
  }
  daemon_process first{dir()};
  EXPECT_NE(first.log().find("replaced the stale socket"), std::string::npos) << first.log();
  // A second daemon on the live socket refuses to start and leaves the first alone.
  temp_dir other;
  fs::copy_file(dir() / "gpusortd.yaml", other.path() / "copy.yaml");
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, STDERR_FILENO);
    ::execl(GPUSORTD, GPUSORTD, "--config", (other.path() / "copy.yaml").c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 70) << status;
  auto c = client::connection::connect(first.socket());
  EXPECT_NO_THROW(c.status());
}

/// gpusortd run to its end with `args`, its stdout and stderr in files of `dir`.
struct daemon_run {
  int code{-1};
  std::string out;
  std::string err;
};

daemon_run run_gpusortd(const fs::path& dir, const std::vector<std::string>& args)
{
  const fs::path out = dir / "run.out", err = dir / "run.err";
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int o = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(o, STDOUT_FILENO);
    ::dup2(e, STDERR_FILENO);
    std::vector<std::string> all{GPUSORTD};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (std::string& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execv(GPUSORTD, argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

// Issue 43: --check-config passed `devices: [0]` on a host without that GPU, which start then
// refused (78), and printed every key (about 90 lines) into the journal at each ExecStartPre
// and ExecReload. It checks what start checks and prints the configuration when asked.
TEST_F(Daemon, CheckConfigChecksWhatStartChecksAndPrintsOnlyWhenAsked)
{
  const std::string socket = (dir() / "gpusortd.sock").string();
  const fs::path bad = dir() / "bad.yaml", good = dir() / "good.yaml";
  spit(bad, "devices: [4096]\nsocket: " + socket + "\n");
  spit(good, "devices: cpu\nsocket: " + socket + "\n");
  daemon_run r = run_gpusortd(dir(), {"--config", bad.string(), "--check-config"});
  EXPECT_EQ(r.code, 78) << r.err;
  EXPECT_NE(r.err.find("GPU 4096 is not on this host"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_EQ(r.out, "");
  // What start says of the same file.
  EXPECT_EQ(run_gpusortd(dir(), {"--config", bad.string()}).code, 78);

  r = run_gpusortd(dir(), {"--config", good.string(), "--check-config"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "gpusortd: " + good.string() + ": the configuration is valid\n");
  r = run_gpusortd(dir(), {"--config", good.string(), "--print-config"});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("socket: " + socket), std::string::npos) << r.out;
  EXPECT_GT(std::count(r.out.begin(), r.out.end(), '\n'), 20) << r.out;

  // Something other than a socket at the socket's path: start refuses it, and so does the check.
  spit(socket, "not a socket");
  r = run_gpusortd(dir(), {"--config", good.string(), "--check-config"});
  EXPECT_EQ(r.code, 78) << r.err;
  EXPECT_NE(r.err.find("exists and is not a socket"), std::string::npos) << r.err;
  fs::remove(socket);
  // A daemon answering on the socket is no error: the check runs before a reload too.
  daemon_process d{dir()};
  EXPECT_EQ(run_gpusortd(dir(), {"--config", (dir() / "gpusortd.yaml").string(),
                                 "--check-config"})
                .code,
            0);
}

TEST_F(Daemon, PeerNotAllowedIsRefused)
{
  const std::uint32_t other = static_cast<std::uint32_t>(::geteuid()) + 4242;
  daemon_process d{dir(), "allowed_uids: [" + std::to_string(other) + "]\n"};
  EXPECT_EQ(code_of([&] { client::connection::connect(d.socket()); }),
            status_code::unauthorized);
  raw_connection raw{d.socket()};
  const proto::frame f = raw.next_frame();
  EXPECT_EQ(f.type, proto::message_type::error);
  EXPECT_EQ(f.header.request_id, 0u);
  EXPECT_EQ(status_of(f).code(), wire::UNAUTHORIZED);
  EXPECT_NE(status_of(f).message().find("not allowed"), std::string::npos);
  EXPECT_TRUE(raw.closed_by_daemon());
}

// Issue 43: a user who may not open the socket (not in the daemon's group) was told that no
// daemon answers (CONNECTION_LOST: "start gpusortd"); it is UNAUTHORIZED, with what to do.
TEST_F(Daemon, AUserWhoMayNotOpenTheSocketIsToldToJoinTheDaemonsGroup)
{
  daemon_process d{dir()};
  deny_socket(d.socket());
  int answer[2];
  ASSERT_EQ(::pipe(answer), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(answer[0]);
    become_stranger();
    std::string said = "connected";
    try {
      client::connection::connect(d.socket());
    } catch (const client::error& e) {
      said = std::to_string(static_cast<int>(e.code())) + " " + e.what();
    }
    static_cast<void>(::write(answer[1], said.data(), said.size()));
    ::_exit(0);
  }
  ::close(answer[1]);
  std::string said;
  char buf[512];
  for (ssize_t n = 0; (n = ::read(answer[0], buf, sizeof buf)) > 0;)
    said.append(buf, static_cast<std::size_t>(n));
  ::close(answer[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(said.substr(0, said.find(' ')),
            std::to_string(static_cast<int>(status_code::unauthorized)))
      << said;
  EXPECT_NE(said.find("no permission to open the daemon's socket (Permission denied): join "
                      "the daemon's group"),
            std::string::npos)
      << said;
}

TEST_F(Daemon, ConnectionLimit)
{
  daemon_process d{dir(), "max_connections: 2\n"};
  auto a = client::connection::connect(d.socket());
  auto b = client::connection::connect(d.socket());
  EXPECT_EQ(code_of([&] { client::connection::connect(d.socket()); }),
            status_code::rejected_busy);
  a.close();
  // The daemon notices the closed connection asynchronously.
  client::connection c;
  for (int attempt = 0; attempt < 250 && !c.is_open(); ++attempt) {
    try {
      c = client::connection::connect(d.socket(), "after a slot freed");
    } catch (const client::error& e) {
      ASSERT_EQ(e.code(), status_code::rejected_busy);
      std::this_thread::sleep_for(20ms);
    }
  }
  ASSERT_TRUE(c.is_open());
  EXPECT_EQ(c.status().clients, 2u);
}

TEST_F(Daemon, AJobOverTheHostBudgetRunsLeanWithinIt)
{
  // 4 MiB of host memory: a 1M-key u64 job's fast path needs 8 MiB; it sorts in place on the
  // lean path (issue 39), within the budget.
  daemon_process d{dir(), "host_memory_budget: 4MiB\n"};
  auto c = client::connection::connect(d.socket());
  auto big = c.allocate<std::uint64_t>(1 << 20);
  const fingerprint before = fill(big.data(), dtype::u64, big.size(), 3);
  const sort_report r = c.sort(big);
  EXPECT_EQ(r.path, "lean");
  EXPECT_EQ(r.host_memory_limit, std::uint64_t{4} << 20);
  EXPECT_LE(r.host_memory_bytes, std::uint64_t{4} << 20);
  EXPECT_TRUE(sorted(big.data(), dtype::u64, big.size(), order::ascending, before));
  EXPECT_NE(d.log().find("path lean, host memory"), std::string::npos) << d.log();
}

TEST_F(Daemon, HostBudgetAdmission)
{
  // 1 MiB of host memory: a 1M-key u64 job (8 MiB on its fast path, more than 1 MiB on the
  // lean path) can never run.
  daemon_process d{dir(), "host_memory_budget: 1MiB\n"};
  auto c = client::connection::connect(d.socket());
  auto big = c.allocate<std::uint64_t>(1 << 20);
  EXPECT_EQ(code_of([&] { c.sort(big); }), status_code::too_large);
  auto fits = c.allocate<std::uint64_t>(1000);
  const fingerprint before = fill(fits.data(), dtype::u64, fits.size(), 2);
  c.sort(fits);
  EXPECT_TRUE(sorted(fits.data(), dtype::u64, fits.size(), order::ascending, before));
  EXPECT_EQ(c.status().totals.jobs_rejected, 1u);
  // The log has a line for the refusal and one for the job's end.
  const std::string log = d.log();
  EXPECT_NE(log.find("job of 1048576 u64 keys refused: TOO_LARGE"), std::string::npos) << log;
  EXPECT_NE(log.find(" done: 1000 elements (7.81 KiB) in "), std::string::npos) << log;
}

// Issue 25: a user added to the allowed group (usermod -aG gpusort) has it as a supplementary
// group, not as their primary one. The client is another user, made in a child process.
TEST_F(Daemon, MemberOfAnAllowedSupplementaryGroupIsServed)
{
  if (::geteuid() != 0) GTEST_SKIP() << "making a client with other credentials needs root";
  daemon_process d{dir(), "allowed_gids: [4242]\n"};
  // The client may reach the socket: the folder is searchable, the socket writable by others.
  fs::permissions(dir(), fs::perms::others_exec, fs::perm_options::add);
  fs::permissions(d.socket(), fs::perms::others_read | fs::perms::others_write,
                  fs::perm_options::add);
  // Exit code of a client of uid 4444, primary group 4343 and supplementary `groups` saying
  // HELLO: 0 served, 1 refused with UNAUTHORIZED, 2 something else, 3 no answer.
  const auto hello_as = [&](std::vector<gid_t> groups) {
    const pid_t child = ::fork();
    if (child == 0) {
      if (::setgroups(groups.size(), groups.data()) != 0 || ::setgid(4343) != 0 ||
          ::setuid(4444) != 0)
        ::_exit(4);
      try {
        raw_connection raw{d.socket()};
        wire::HelloRequest h;
        h.set_min_version(1);
        h.set_max_version(1);
        // A refused peer gets its ERROR frame at once and the connection closes, maybe before
        // the HELLO is sent (EPIPE): the frame is still there to read.
        try {
          raw.send(1, h);
        } catch (...) {  // NOLINT(bugprone-empty-catch): the answer below says what happened
        }
        const proto::frame f = raw.next_frame();
        if (f.type == proto::message_type::hello_reply) ::_exit(0);
        ::_exit(status_of(f).code() == wire::UNAUTHORIZED ? 1 : 2);
      } catch (...) {
        ::_exit(3);
      }
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(hello_as({4242}), 0) << d.log();
  EXPECT_EQ(hello_as({4240, 4242, 4244}), 0) << d.log();
  EXPECT_EQ(hello_as({4241}), 1) << d.log();
  EXPECT_EQ(hello_as({}), 1) << d.log();
  const std::string log = d.log();
  EXPECT_NE(log.find("uid 4444, gid 4343, groups 4240,4242,4244"), std::string::npos) << log;
  EXPECT_NE(log.find("refused a client (pid "), std::string::npos) << log;
}

// ---- SIGHUP: the configuration read again ------------------------------------------------------

TEST_F(Daemon, SighupKeepsServing)
{
  daemon_process d{dir()};
  auto before = client::connection::connect(d.socket());
  std::string seen;
  ASSERT_TRUE(d.reload(&seen)) << "no RELOADING=1 then READY=1: " << seen << d.log();
  EXPECT_NE(seen.find("MONOTONIC_USEC="), std::string::npos) << seen;
  EXPECT_EQ(d.wait(200ms), std::nullopt) << "SIGHUP stopped the daemon: " << d.log();
  EXPECT_TRUE(fs::exists(d.socket()));
  EXPECT_NE(d.log().find("configuration reloaded from " + (dir() / "gpusortd.yaml").string() +
                         ": nothing changed"),
            std::string::npos)
      << d.log();
  // The connection open across the reload and a new one both work.
  EXPECT_NO_THROW(before.status());
  auto after = client::connection::connect(d.socket());
  auto keys = after.allocate<std::uint64_t>(10'000);
  const fingerprint print = fill(keys.data(), dtype::u64, keys.size(), 41);
  after.sort(keys);
  EXPECT_TRUE(sorted(keys.data(), dtype::u64, keys.size(), order::ascending, print));
  before.close();
  after.close();
  d.signal(SIGTERM);
  EXPECT_EQ(d.wait(20s), 0) << d.log();
  EXPECT_FALSE(fs::exists(d.socket()));
}

TEST_F(Daemon, SighupAppliesTheLogLevelAndThePeerLists)
{
  const std::string other = std::to_string(::geteuid() + 4242);
  const std::string others_only = "allowed_uids: [" + other + "]\n";
  daemon_process d{dir(), others_only + "log_level: info\n"};
  EXPECT_EQ(code_of([&] { client::connection::connect(d.socket()); }),
            status_code::unauthorized);
  // This process's group listed: it gets in, and the debug level shows its connection.
  d.write_config(others_only + "allowed_gids: [" + std::to_string(::getegid()) +
                 "]\nlog_level: debug\n");
  ASSERT_TRUE(d.reload()) << d.log();
  auto c = client::connection::connect(d.socket());
  EXPECT_NO_THROW(c.status());
  std::string log = d.log();
  EXPECT_NE(log.find("applied allowed_gids, log_level\n"), std::string::npos) << log;
  EXPECT_NE(log.find(": connected (pid "), std::string::npos) << "no debug line: " << log;
  // Back: new connections are refused; the one open stays (peers are checked at connect).
  d.write_config(others_only + "log_level: info\n");
  ASSERT_TRUE(d.reload()) << d.log();
  EXPECT_EQ(code_of([&] { client::connection::connect(d.socket()); }),
            status_code::unauthorized);
  EXPECT_NO_THROW(c.status());
}

TEST_F(Daemon, SighupAppliesJobLimits)
{
  daemon_process d{dir(), "host_memory_budget: 1MiB\n"};
  auto c = client::connection::connect(d.socket());
  auto big = c.allocate<std::uint64_t>(1 << 20);  // 8 MiB of working memory, over 1 MiB lean
  EXPECT_EQ(code_of([&] { c.sort(big); }), status_code::too_large);
  d.write_config("host_memory_budget: 64MiB\n");
  ASSERT_TRUE(d.reload()) << d.log();
  EXPECT_EQ(c.status().host_memory_budget, std::uint64_t{64} << 20);
  const fingerprint before = fill(big.data(), dtype::u64, big.size(), 42);
  c.sort(big);
  EXPECT_TRUE(sorted(big.data(), dtype::u64, big.size(), order::ascending, before));
}

TEST_F(Daemon, SighupNamesTheKeysThatNeedARestartAndKeepsThem)
{
  daemon_process d{dir()};
  d.write_config("pinned_pool_bytes: 1MiB\nmax_running_jobs: 3\nlog_level: debug\n");
  ASSERT_TRUE(d.reload()) << d.log();
  const std::string log = d.log();
  EXPECT_NE(log.find("warning: configuration reloaded from "), std::string::npos) << log;
  EXPECT_NE(log.find(": nothing applied; changed but kept until a restart: pinned_pool_bytes, "
                     "max_running_jobs\n"),
            std::string::npos)
      << log;
  // The pool is still the 256 MiB it started with.
  auto c = client::connection::connect(d.socket());
  EXPECT_EQ(c.status().pinned_pool_bytes, std::uint64_t{256} << 20);
  EXPECT_NO_THROW(c.allocate<std::uint64_t>(1 << 20));
}

TEST_F(Daemon, SighupWithABrokenFileKeepsTheConfiguration)
{
  daemon_process d{dir(), "max_connections: 1\n"};
  const fs::path file = dir() / "gpusortd.yaml";
  spit(file, "max_connections: 2\nlog_level: loud\n");
  std::string seen;
  ASSERT_TRUE(d.reload(&seen)) << d.log();
  EXPECT_NE(seen.find("STATUS=serving on " + d.socket() + "; reloading the configuration failed"),
            std::string::npos)
      << seen;
  EXPECT_NE(d.log().find("error: SIGHUP: the configuration was not reloaded, the daemon keeps "
                         "the one it has: " +
                         file.string() + ":2:12: log_level: expected one of"),
            std::string::npos)
      << d.log();
  // A file that is gone: the same.
  fs::remove(file);
  ASSERT_TRUE(d.reload()) << d.log();
  EXPECT_EQ(d.wait(100ms), std::nullopt) << d.log();
  // Still serving, with max_connections still 1.
  auto a = client::connection::connect(d.socket());
  EXPECT_EQ(code_of([&] { client::connection::connect(d.socket()); }),
            status_code::rejected_busy);
  // Mended: it applies.
  d.write_config("max_connections: 2\n");
  ASSERT_TRUE(d.reload()) << d.log();
  EXPECT_NO_THROW(client::connection::connect(d.socket()));
}

// ---- malformed input ------------------------------------------------------------------------

class Malformed : public Daemon {
 protected:
  void SetUp() override { d_ = std::make_unique<daemon_process>(dir()); }

  /// Sends `frame` (with `fds`) on a fresh connection after HELLO; returns the reply.
  wire::Status reply_to(const std::vector<std::byte>& frame, std::span<const int> fds = {})
  {
    raw_connection raw{d_->socket()};
    raw.hello();
    raw.send_bytes(frame, fds);
    return status_of(raw.next_frame());
  }

  /// The daemon still serves a well-behaved client.
  void still_serving() { expect_still_serving(d_->socket()); }

  std::unique_ptr<daemon_process> d_;
};

TEST_F(Malformed, BadMagicClosesWithProtocolError)
{
  raw_connection raw{d_->socket()};
  std::vector<std::byte> frame = proto::encode_frame(1, wire::DaemonStatusRequest{});
  frame[0] = std::byte{'X'};
  raw.send_bytes(frame);
  const proto::frame f = raw.next_frame();
  EXPECT_EQ(f.type, proto::message_type::error);
  EXPECT_EQ(f.header.request_id, 0u);
  EXPECT_EQ(status_of(f).code(), wire::PROTOCOL_ERROR);
  EXPECT_NE(status_of(f).message().find("bad magic"), std::string::npos);
  EXPECT_TRUE(raw.closed_by_daemon());
  still_serving();
}

TEST_F(Malformed, HugeLengthIsTooLarge)
{
  raw_connection raw{d_->socket()};
  raw.hello();
  std::vector<std::byte> frame = proto::encode_frame(7, wire::DaemonStatusRequest{});
  const std::uint32_t huge = 0x7fffffff;
  std::memcpy(frame.data() + 8, &huge, 4);
  raw.send_bytes(frame);
  const proto::frame f = raw.next_frame();
  EXPECT_EQ(f.type, proto::message_type::daemon_status_reply);
  EXPECT_EQ(f.header.request_id, 7u);
  EXPECT_EQ(status_of(f).code(), wire::TOO_LARGE);
  EXPECT_TRUE(raw.closed_by_daemon());
  still_serving();
}

TEST_F(Malformed, TruncatedBodyThenHangUp)
{
  {
    raw_connection raw{d_->socket()};
    raw.hello();
    std::vector<std::byte> frame = proto::encode_frame(2, submit_fd(10));
    // erase, not resize: in the asan build GCC 12 follows resize's growing branch with a wrapped
    // size and stops the build with a false -Wstringop-overflow.
    frame.erase(frame.end() - 3, frame.end());
    raw.send_bytes(frame);
  }
  still_serving();
}

TEST_F(Malformed, GarbageProtobufKeepsTheConnection)
{
  raw_connection raw{d_->socket()};
  raw.hello();
  std::vector<std::byte> frame = proto::encode_frame(3, wire::DaemonStatusRequest{});
  // A body of a truncated varint field: not a valid protobuf of any message.
  const std::byte garbage[] = {std::byte{0x08}, std::byte{0xff}, std::byte{0xff}};
  frame.insert(frame.end(), std::begin(garbage), std::end(garbage));
  const std::uint32_t length = sizeof garbage;
  std::memcpy(frame.data() + 8, &length, 4);
  raw.send_bytes(frame);
  const proto::frame f = raw.next_frame();
  EXPECT_EQ(f.header.request_id, 3u);
  EXPECT_EQ(status_of(f).code(), wire::PROTOCOL_ERROR);
  raw.send(4, wire::DaemonStatusRequest{});
  const proto::frame g = raw.next_frame();
  EXPECT_EQ(g.header.request_id, 4u);
  EXPECT_EQ(status_of(g).code(), wire::OK);
}

TEST_F(Malformed, WrongDescriptorCount)
{
  EXPECT_EQ(reply_to(proto::encode_frame(5, submit_fd(1))).code(), wire::BAD_FD);
  const unique_fd extra = make_memfd(4096, F_SEAL_SHRINK);
  const int fds[] = {extra.get()};
  EXPECT_EQ(reply_to(proto::encode_frame(5, wire::DaemonStatusRequest{}), fds).code(),
            wire::BAD_FD);
  still_serving();
}

TEST_F(Malformed, DescriptorOfADirectory)
{
  const unique_fd dir_fd{::open(dir().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  const int fds[] = {dir_fd.get()};
  const wire::Status s = reply_to(proto::encode_frame(6, submit_fd(1)), fds);
  EXPECT_EQ(s.code(), wire::BAD_FD);
  EXPECT_NE(s.message().find("directory"), std::string::npos) << s.message();
  still_serving();
}

TEST_F(Malformed, UnsealedMemfd)
{
  const unique_fd fd = make_memfd(4096, 0);
  const int fds[] = {fd.get()};
  const wire::Status s = reply_to(proto::encode_frame(7, submit_fd(8)), fds);
  EXPECT_EQ(s.code(), wire::BAD_FD);
  EXPECT_NE(s.message().find("unsealed_memfd"), std::string::npos) << s.message();
  still_serving();
}

TEST_F(Malformed, SizesAndOffsets)
{
  // 12 bytes hold one and a half u64 keys.
  spit(dir() / "odd.bin", std::string(12, 'x'));
  const unique_fd odd{::open((dir() / "odd.bin").c_str(), O_RDWR | O_CLOEXEC)};
  const int fds[] = {odd.get()};
  wire::Status s = reply_to(proto::encode_frame(8, submit_fd(2)), fds);
  EXPECT_EQ(s.code(), wire::BAD_FD);
  EXPECT_NE(s.message().find("too_small"), std::string::npos) << s.message();
  // An offset that is not a multiple of the element size.
  s = reply_to(proto::encode_frame(9, submit_fd(1, 4)), fds);
  EXPECT_EQ(s.code(), wire::BAD_REQUEST);
  EXPECT_NE(s.message().find("multiple"), std::string::npos) << s.message();
  // An offset past the end.
  s = reply_to(proto::encode_frame(10, submit_fd(0, 64)), fds);
  EXPECT_EQ(s.code(), wire::BAD_FD);
  EXPECT_NE(s.message().find("bad_offset"), std::string::npos) << s.message();
  // Past the end of a shared buffer.
  {
    raw_connection raw{d_->socket()};
    raw.hello();
    wire::AllocateRequest a;
    a.set_bytes(4096);
    raw.send(11, a);
    const proto::frame granted = raw.next_frame();
    const auto id = std::get<wire::AllocateReply>(granted.msg).buffer_id();
    wire::SubmitRequest sub;
    sub.set_dtype(wire::DTYPE_U32);
    sub.set_count(2000);
    sub.mutable_keys()->set_buffer_id(id);
    sub.mutable_keys()->set_offset(4096);
    sub.set_in_place(true);
    raw.send(12, sub);
    s = status_of(raw.next_frame());
    EXPECT_EQ(s.code(), wire::BAD_REQUEST);
    EXPECT_NE(s.message().find("past the end"), std::string::npos) << s.message();
  }
  still_serving();
}

TEST_F(Malformed, AClientThatDoesNotReadIsHeldBackNotServedWithoutBound)
{
  // 20000 DAEMON_STATUS replies are some MiB, more than the 1 MiB the daemon queues for one
  // client: it stops reading this client's requests until the client reads, and serves others.
  constexpr int requests = 20000;
  raw_connection flood{d_->socket()};
  flood.hello();
  std::thread writer{[&] {
    for (int i = 1; i <= requests; ++i) flood.send(static_cast<std::uint64_t>(i),
                                                   wire::DaemonStatusRequest{});
  }};
  std::this_thread::sleep_for(std::chrono::milliseconds{200});
  still_serving();
  int answered = 0;
  for (; answered < requests; ++answered) {
    const proto::frame f = flood.next_frame();
    ASSERT_EQ(f.header.request_id, static_cast<std::uint64_t>(answered + 1));
    ASSERT_EQ(status_of(f).code(), wire::OK);
  }
  writer.join();
  EXPECT_EQ(answered, requests);
  EXPECT_NE(d_->log().find("does not read"), std::string::npos);
}

TEST_F(Malformed, StateAndOwnership)
{
  raw_connection a{d_->socket()};
  // Anything before HELLO.
  a.send(1, wire::DaemonStatusRequest{});
  EXPECT_EQ(status_of(a.next_frame()).code(), wire::FAILED_PRECONDITION);
  a.hello();
  wire::HelloRequest again;
  again.set_min_version(1);
  again.set_max_version(1);
  a.send(2, again);
  EXPECT_EQ(status_of(a.next_frame()).code(), wire::FAILED_PRECONDITION);
  // A buffer and a job of another connection are not found.
  auto other = client::connection::connect(d_->socket());
  auto theirs = other.allocate<std::uint64_t>(long_count);
  wire::ReleaseRequest release;
  release.set_buffer_id(theirs.raw().id());
  a.send(3, release);
  EXPECT_EQ(status_of(a.next_frame()).code(), wire::NOT_FOUND);
  wire::SubmitRequest sub;
  sub.set_dtype(wire::DTYPE_U64);
  sub.set_count(10);
  sub.mutable_keys()->set_buffer_id(theirs.raw().id());
  sub.set_in_place(true);
  a.send(4, sub);
  EXPECT_EQ(status_of(a.next_frame()).code(), wire::NOT_FOUND);
  wire::CancelRequest cancel;
  cancel.set_job_id(1);
  a.send(5, cancel);
  EXPECT_EQ(status_of(a.next_frame()).code(), wire::NOT_FOUND);
  // A version nobody speaks.
  raw_connection b{d_->socket()};
  wire::HelloRequest future;
  future.set_min_version(7);
  future.set_max_version(9);
  b.send(1, future);
  EXPECT_EQ(status_of(b.next_frame()).code(), wire::UNSUPPORTED_VERSION);
  still_serving();
}

}  // namespace
}  // namespace gpusort::service::testing
