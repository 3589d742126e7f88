// Hostile and careless clients against a real gpusortd (CPU engine), issue 25 item 4: shared
// memory rewritten or cut during a sort, a client that does not read its progress events, ten
// thousand connections dropped (some mid-frame), requests pipelined without reading, random
// oversized and truncated frames, descriptors of every wrong kind, offsets that overflow.
// Each test expects the protocol's status or a clean disconnect, checks that the daemon serves
// another client meanwhile and afterwards, and that its descriptors and private memory are back
// to what they were before (bench/soak_probe.hpp reads them from /proc/<pid>).
#include "tests/service/daemon_test_support.hpp"

#include "bench/soak_probe.hpp"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <thread>
#include <utility>

namespace gpusort::service::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using client::status_code;
using soak::process_usage;
using soak::scaled;
using soak::usage_of;

// The engine's heap may keep some freed memory (glibc arenas) after the jobs of a test, and a
// sanitizer's allocator more (soak_probe.hpp); beyond that it is a leak.
const std::uint64_t rss_slack = soak::rss_slack(std::uint64_t{64} << 20);

// Out of core with a 2 MiB device budget, 8Mi u64 keys take a few seconds on two cores and
// report progress all along: long enough to act on a job while it runs.
constexpr std::uint64_t long_count = std::uint64_t{8} << 20;
constexpr const char* long_budget = "device_memory_budget: 2MiB\n";

class Hostile : public ::testing::Test {
 protected:
  /// Starts the daemon, warms it up with one job (its threads and the engine's first
  /// allocations are not a leak) and records its usage.
  void start(const std::string& extra = "")
  {
    d_.reset();  // one daemon per socket: the last one goes before the next comes
    d_ = std::make_unique<daemon_process>(dir_.path(), extra);
    expect_still_serving(d_->socket());
    baseline_ = quiet_usage();
  }

  /// The daemon's usage when its one client is the connection asking and no job runs or waits
  /// (sessions close asynchronously after their clients leave, and a gone client's running job
  /// ends at its next cancellation check: once, on the 2-core VM under the whole suite, the
  /// status came between the two), that connection's descriptor not counted.
  process_usage quiet_usage(client::daemon_status* status = nullptr) const
  {
    auto c = client::connection::connect(d_->socket(), "probe");
    client::daemon_status s = c.status();
    for (const auto end = std::chrono::steady_clock::now() + 20s;
         (s.clients != 1 || s.running_jobs + s.queued_jobs != 0) &&
         std::chrono::steady_clock::now() < end;
         s = c.status())
      std::this_thread::sleep_for(20ms);
    EXPECT_EQ(s.clients, 1u) << "sessions of clients gone are still open";
    process_usage u = usage_of(d_->pid());
    --u.fds;
    if (status != nullptr) *status = s;
    return u;
  }

  /// The daemon is alive, serves, and holds what it held before the test's clients came, give
  /// or take `slack` bytes of private memory.
  void expect_back_to_baseline(std::uint64_t slack = rss_slack)
  {
    ASSERT_FALSE(d_->wait(0ms)) << "gpusortd exited; its log:\n" << d_->log();
    expect_still_serving(d_->socket());
    client::daemon_status s;
    const process_usage now = quiet_usage(&s);
    EXPECT_EQ(now.other_fds(), baseline_.other_fds())
        << "descriptors other than the pool's buffers, before and after; now (with the probe's "
           "connection):\n"
        << soak::fd_listing(d_->pid());
    EXPECT_LE(now.rss_anon, baseline_.rss_anon + slack)
        << "private memory before " << soak::mib(baseline_.rss_anon) << ", after "
        << soak::mib(now.rss_anon);
    // The pool keeps released buffers for reuse, within pinned_pool_bytes (256 MiB here).
    EXPECT_LE(now.rss_shmem, std::uint64_t{256} << 20);
    EXPECT_EQ(s.running_jobs + s.queued_jobs, 0u);
    EXPECT_EQ(s.buffers, 0u) << "buffers still held after their clients left";
  }

  [[nodiscard]] bool daemon_alive() { return !d_->wait(0ms).has_value(); }
  [[nodiscard]] const fs::path& dir() const { return dir_.path(); }

  temp_dir dir_;
  std::unique_ptr<daemon_process> d_;
  process_usage baseline_;
};

/// Runs `job` while `scribble` rewrites the client's memory, until the job ends; returns the
/// job's status (ok when it succeeded).
status_code while_scribbling(client::job job, const std::function<void(std::uint64_t)>& scribble)
{
  std::atomic<bool> done{false};
  std::thread writer{[&] {
    for (std::uint64_t round = 1; !done.load(std::memory_order_relaxed); ++round) scribble(round);
  }};
  status_code code = status_code::ok;
  try {
    job.wait();
  } catch (const client::error& e) {
    code = e.code();
  }
  done = true;
  writer.join();
  return code;
}

/// Overwrites `bytes` at `p` with pseudo-random words, different in each round.
void scribble_words(std::byte* p, std::uint64_t bytes, std::uint64_t round)
{
  auto* w = reinterpret_cast<std::uint64_t*>(p);
  std::uint64_t x = round * 0x9E3779B97F4A7C15ULL;
  for (std::uint64_t i = 0; i < bytes / 8; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    w[i] = x;
  }
}

// ---- shared memory rewritten or cut during a sort ---------------------------------------------

// The daemon sorts shared memory its client can still write. A sort that counts keys in one pass
// and places them by those counts in the next must not believe the keys stayed the same: a
// client rewriting them in between must get a job error or a result, never the daemon's memory
// overwritten or a crash.
TEST_F(Hostile, RewritingASharedBufferDuringASortNeverHurtsTheDaemon)
{
  for (const std::string& extra : {std::string{}, std::string{long_budget}}) {
    SCOPED_TRACE(extra.empty() ? "in core" : "out of core");
    start(extra);
    auto c = client::connection::connect(d_->socket(), "scribbler");
    constexpr std::uint64_t n = std::uint64_t{2} << 20;
    for (int attempt = 0; attempt < 3; ++attempt) {
      auto keys = c.allocate_bytes(n * 8);
      auto values = c.allocate_bytes(n * 8);
      auto out = c.allocate_bytes(2 * n * 8);
      fill(keys.data(), dtype::u64, n, 3, values.data(), 8);
      // In place, keys alone: the client rewrites the array being sorted.
      status_code code = while_scribbling(
          c.submit({.type = dtype::u64, .count = n, .keys = client::array_ref::in(keys)}),
          [&](std::uint64_t r) { scribble_words(keys.data(), n * 8, r); });
      EXPECT_TRUE(code == status_code::ok || code == status_code::internal) << name_of(code);
      ASSERT_TRUE(daemon_alive()) << "gpusortd died; its log:\n" << d_->log();
      // Pairs into a separate output: the client rewrites the output as it is written.
      code = while_scribbling(c.submit({.type = dtype::i64,
                                        .count = n,
                                        .keys = client::array_ref::in(keys),
                                        .value_bytes = 8,
                                        .values = client::array_ref::in(values),
                                        .keys_out = client::array_ref::in(out),
                                        .values_out = client::array_ref::in(out, n * 8)}),
                              [&](std::uint64_t r) { scribble_words(out.data(), 2 * n * 8, r); });
      EXPECT_TRUE(code == status_code::ok || code == status_code::internal) << name_of(code);
      ASSERT_TRUE(daemon_alive()) << "gpusortd died; its log:\n" << d_->log();
    }
    // An input rewritten during a job with a separate output: the output is some sorted array.
    {
      auto keys = c.allocate_bytes(n * 4);
      auto out = c.allocate_bytes(n * 4);
      fill(keys.data(), dtype::u32, n, 4);
      const status_code code = while_scribbling(
          c.submit({.type = dtype::u32,
                    .count = n,
                    .keys = client::array_ref::in(keys),
                    .keys_out = client::array_ref::in(out)}),
          [&](std::uint64_t r) { scribble_words(keys.data(), n * 4, r); });
      ASSERT_EQ(code, status_code::ok);
      const order_check o = check_order(key_array{out.data(), n, dtype::u32}, order::ascending);
      EXPECT_TRUE(o.ok) << "out of order at " << o.first_violation;
    }
    c.close();
    expect_back_to_baseline();
  }
}

TEST_F(Hostile, ShrinkingSharedMemoryOrAFileDuringASort)
{
  start(long_budget);
  auto c = client::connection::connect(d_->socket(), "shrinker");
  // The pool's buffers and a client's shrink-sealed memfd cannot be cut at all.
  {
    auto keys = c.allocate_bytes(long_count * 8);
    fill(keys.data(), dtype::u64, long_count, 8);
    auto j = c.submit(
        {.type = dtype::u64, .count = long_count, .keys = client::array_ref::in(keys)});
    // The client library keeps the buffer's descriptor private: take it from /proc.
    int cut = -1;
    for (const auto& e : fs::directory_iterator{"/proc/self/fd"}) {
      std::error_code ec;
      if (fs::read_symlink(e.path(), ec).string().starts_with("/memfd:gpusort-buffer")) {
        const int fd = std::stoi(e.path().filename().string());
        struct stat st {};
        if (::fstat(fd, &st) == 0 && static_cast<std::uint64_t>(st.st_size) == keys.size())
          cut = fd;
      }
    }
    ASSERT_GE(cut, 0);
    EXPECT_NE(::ftruncate(cut, 0), 0) << "a pool buffer could be shrunk";
    EXPECT_EQ(errno, EPERM);
    EXPECT_NO_THROW(j.wait());
    EXPECT_TRUE(check_order(key_array{keys.data(), long_count, dtype::u64}, order::ascending).ok);
  }
  // A file (tmpfs or disk) cut to nothing while the daemon reads and writes it: a job error or,
  // when the cut came after the reads, a result; the daemon goes on either way.
  // In tmpfs the engine writes an output through a mapping (pipeline/file_window.hpp): cut
  // under it, the page it writes is gone (SIGBUS), which must stay the job's error.
  const bool shm = fs::is_directory("/dev/shm");
  const temp_dir in_shm{shm ? "/dev/shm" : ::testing::TempDir()};
  for (const int variant : {0, 1, 2, 3}) {
    const bool separate = variant % 2 == 1;
    const fs::path& folder = variant < 2 ? dir() : in_shm.path();
    SCOPED_TRACE(std::string{separate ? "separate output" : "in place"} + " in " +
                 folder.string());
    std::vector<std::uint64_t> keys(long_count);
    fill(keys.data(), dtype::u64, long_count, 9);
    spit(folder / "in.bin", std::string(reinterpret_cast<const char*>(keys.data()),
                                        long_count * 8));
    spit(folder / "out.bin", std::string(long_count * 8, '\0'));
    const unique_fd in{::open((folder / "in.bin").c_str(), O_RDWR | O_CLOEXEC)};
    const unique_fd out{::open((folder / "out.bin").c_str(), O_RDWR | O_CLOEXEC)};
    std::promise<void> running;
    std::atomic<bool> once{false};
    client::sort_request r{.type = dtype::u64,
                           .count = long_count,
                           .keys = client::array_ref::of_fd(in.get())};
    if (separate) r.keys_out = client::array_ref::of_fd(out.get());
    auto j = c.submit(r, [&](const progress_event&) {
      if (!once.exchange(true)) running.set_value();
    });
    ASSERT_EQ(running.get_future().wait_for(30s), std::future_status::ready);
    ASSERT_EQ(::ftruncate(in.get(), 0), 0);
    if (separate) {
      ASSERT_EQ(::ftruncate(out.get(), 4096), 0);
    }
    status_code code = status_code::ok;
    std::string message;
    try {
      j.wait();
    } catch (const client::error& e) {
      code = e.code();
      message = e.what();
    }
    EXPECT_TRUE(code == status_code::ok || code == status_code::bad_fd)
        << name_of(code) << ": " << message;
    std::printf("%s, %s, cut mid-job: %s %s\n", folder.c_str(),
                separate ? "separate output" : "in place", std::string{name_of(code)}.c_str(),
                message.c_str());
    ASSERT_TRUE(daemon_alive()) << "gpusortd died; its log:\n" << d_->log();
  }
  c.close();
  expect_back_to_baseline();
}

// ---- a client that does not read ------------------------------------------------------------

/// Sends `frame` without waiting; false when the socket takes nothing now.
bool send_now(int fd, const std::vector<std::byte>& frame)
{
  const ssize_t n = ::send(fd, frame.data(), frame.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  if (n == static_cast<ssize_t>(frame.size())) return true;
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return false;
  throw std::runtime_error{"send: " + std::string{std::strerror(errno)}};
}

/// Lowers the daemon's RLIMIT_NOFILE (prlimit: a process of the same user may).
void limit_descriptors(pid_t pid, rlim_t soft)
{
  rlimit r{};
  ASSERT_EQ(::prlimit(pid, RLIMIT_NOFILE, nullptr, &r), 0) << std::strerror(errno);
  r.rlim_cur = soft;
  ASSERT_EQ(::prlimit(pid, RLIMIT_NOFILE, &r, nullptr), 0) << std::strerror(errno);
}

/// CPU seconds the process has used (utime + stime from /proc/<pid>/stat).
double cpu_seconds(pid_t pid)
{
  std::ifstream in{"/proc/" + std::to_string(pid) + "/stat"};
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream fields{stat.substr(stat.rfind(')') + 2)};
  std::string f;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> f; ++i)
    if (i == 14 || i == 15) ticks += std::stod(f);
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// A job reports progress up to ten times a second. A client that reads none of it must not make
// the daemon queue every event for it: only the latest progress of a job waits, the rest is
// dropped (each event supersedes the one before), while replies and JOB_FINISHED are kept.
TEST_F(Hostile, ASlowReaderOfProgressEventsGetsTheLatestNotAll)
{
  start(long_budget);
  // Twice the usual long job: about 30 progress events on two cores, against a few with the
  // events of a client that does not read replaced by the newest.
  constexpr std::uint64_t slow_count = 2 * long_count;
  process_usage stalled;
  {
    raw_connection slow{d_->socket()};
    slow.hello();
    const unique_fd keys = make_memfd(slow_count * 8, F_SEAL_SHRINK);
    {
      void* p =
          ::mmap(nullptr, slow_count * 8, PROT_READ | PROT_WRITE, MAP_SHARED, keys.get(), 0);
      ASSERT_NE(p, MAP_FAILED);
      fill(p, dtype::u64, slow_count, 12);
      ::munmap(p, slow_count * 8);
    }
    const int fds[] = {keys.get()};
    slow.send(1, submit_fd(slow_count), fds);
    const proto::frame accepted = slow.next_frame();
    ASSERT_EQ(accepted.type, proto::message_type::submit_reply);
    ASSERT_EQ(status_of(accepted).code(), wire::OK) << status_of(accepted).message();
    // Requests until the daemon stops reading them: its socket buffer and its queue of replies
    // for this client are full, and from now on every event of the job waits in the daemon.
    std::uint64_t requests = 0;
    for (auto quiet_since = std::chrono::steady_clock::now();
         std::chrono::steady_clock::now() - quiet_since < 300ms;) {
      if (send_now(slow.fd(), proto::encode_frame(100 + requests, wire::DaemonStatusRequest{}))) {
        ++requests;
        quiet_since = std::chrono::steady_clock::now();
      } else {
        std::this_thread::sleep_for(5ms);
      }
    }
    ASSERT_GT(requests, 1000u);
    // The job runs to its end meanwhile, and other clients are served.
    auto watcher = client::connection::connect(d_->socket());
    const auto long_job_running = [&] {
      const client::daemon_status s = watcher.status();
      return std::any_of(s.jobs.begin(), s.jobs.end(),
                         [](const client::job_info& j) { return j.count == slow_count; });
    };
    const auto end = std::chrono::steady_clock::now() + 120s;
    while (long_job_running() && std::chrono::steady_clock::now() < end) {
      expect_still_serving(d_->socket());
      std::this_thread::sleep_for(100ms);
    }
    ASSERT_FALSE(long_job_running()) << "the job did not finish";
    stalled = usage_of(d_->pid());
    // Now read everything: every reply, the job's JOB_FINISHED, and few PROGRESS frames.
    std::uint64_t replies = 0, progress = 0, finished = 0;
    while (finished == 0 || replies < requests) {
      const proto::frame f = slow.next_frame();
      if (f.type == proto::message_type::progress) ++progress;
      if (f.type == proto::message_type::job_finished) {
        ++finished;
        EXPECT_EQ(status_of(f).code(), wire::OK) << status_of(f).message();
      }
      if (f.type == proto::message_type::daemon_status_reply) ++replies;
    }
    EXPECT_EQ(finished, 1u);
    // Before the daemon reads the flood, the job may report freely; after it, one at a time.
    EXPECT_LE(progress, 10u) << "progress events queued for a client that did not read them";
    std::printf("a job's PROGRESS frames received by a client that read nothing meanwhile: %llu "
                "(%llu requests unread)\n",
                static_cast<unsigned long long>(progress),
                static_cast<unsigned long long>(requests));
  }
  EXPECT_LE(stalled.rss_anon, baseline_.rss_anon + rss_slack);
  expect_back_to_baseline();
}

TEST_F(Hostile, PipelinedRequestsWithoutReadingTheReplies)
{
  start("max_queued_jobs: 16\n");
  constexpr int jobs = 200;
  constexpr std::uint64_t n = 1000;
  std::vector<unique_fd> memfds;
  std::vector<fingerprint> before;
  for (int i = 0; i < jobs; ++i) {
    memfds.push_back(make_memfd(n * 8, F_SEAL_SHRINK | F_SEAL_GROW));
    void* p = ::mmap(nullptr, n * 8, PROT_READ | PROT_WRITE, MAP_SHARED, memfds.back().get(), 0);
    before.push_back(fill(p, dtype::u64, n, static_cast<std::uint64_t>(i)));
    ::munmap(p, n * 8);
  }
  // HELLO, then every SUBMIT and a status request after each, all sent before reading anything.
  {
    raw_connection pipelined{d_->socket()};
    std::thread writer{[&] {
      wire::HelloRequest h;
      h.set_min_version(1);
      h.set_max_version(1);
      pipelined.send(1, h);
      for (int i = 0; i < jobs; ++i) {
        const int fds[] = {memfds[static_cast<std::size_t>(i)].get()};
        pipelined.send(static_cast<std::uint64_t>(1000 + i), submit_fd(n), fds);
        pipelined.send(static_cast<std::uint64_t>(5000 + i), wire::DaemonStatusRequest{});
      }
    }};
    std::this_thread::sleep_for(500ms);
    expect_still_serving(d_->socket());
    std::map<std::uint64_t, int> replies;
    std::map<std::uint64_t, wire::StatusCode> submitted, finished;
    while (replies.size() < 1 + 2 * jobs || finished.size() < submitted.size()) {
      const proto::frame f = pipelined.next_frame();
      const std::uint64_t id = f.header.request_id;
      if (f.type == proto::message_type::job_finished) {
        EXPECT_TRUE(finished.emplace(id, status_of(f).code()).second) << "two ends of " << id;
        continue;
      }
      if (f.type == proto::message_type::progress) continue;
      ++replies[id];
      if (f.type == proto::message_type::submit_reply) {
        const wire::StatusCode code = status_of(f).code();
        // The queue holds 16: a client that floods it is told to come back, not queued forever.
        EXPECT_TRUE(code == wire::OK || code == wire::REJECTED_BUSY) << status_of(f).message();
        if (code == wire::OK) submitted.emplace(id, code);
      }
    }
    writer.join();
    for (const auto& [id, count] : replies) EXPECT_EQ(count, 1) << "request " << id;
    EXPECT_FALSE(submitted.empty());
    for (const auto& [id, code] : finished) {
      EXPECT_EQ(code, wire::OK) << "job of request " << id;
      const std::size_t i = id - 1000;
      void* p = ::mmap(nullptr, n * 8, PROT_READ, MAP_SHARED, memfds[i].get(), 0);
      EXPECT_TRUE(sorted(p, dtype::u64, n, order::ascending, before[i])) << "job " << i;
      ::munmap(p, n * 8);
    }
  }
  // The same flood from a client that hangs up without reading a byte.
  for (int round = 0; round < 3; ++round) {
    raw_connection rude{d_->socket()};
    rude.hello();
    for (int i = 0; i < 50; ++i) {
      const int fds[] = {memfds[static_cast<std::size_t>(i)].get()};
      rude.send(static_cast<std::uint64_t>(i + 1), submit_fd(n), fds);
    }
  }
  expect_back_to_baseline();
}

// A status reply lists every job, so with a full queue each DAEMON_STATUS costs the daemon some
// KiB to answer, and one read of a client's requests holds 64 KiB of them, 2730 requests. The
// daemon must stop answering when a client's unread replies pass their limit, not at the end of
// the read: 64 such clients made it hold 202 MiB, 109 MiB with the limit kept, and its heap
// kept that after the clients had gone.
TEST_F(Hostile, PipelinedStatusRequestsWithAFullQueueStayWithinTheReplyLimit)
{
  start(std::string{long_budget} + "max_running_jobs: 1\n");
  // 64 clients that will each send 64 KiB of DAEMON_STATUS requests in one write and read none
  // of the replies; connected first, so that the floods come at once.
  std::vector<std::unique_ptr<raw_connection>> silent;
  for (int i = 0; i < 64; ++i) {
    silent.push_back(std::make_unique<raw_connection>(d_->socket()));
    silent.back()->hello();
  }
  std::vector<std::byte> flood;
  for (std::uint64_t id = 1; flood.size() + proto::header_bytes <= proto::max_control_body;
       ++id) {
    const std::vector<std::byte> f = proto::encode_frame(id, wire::DaemonStatusRequest{});
    flood.insert(flood.end(), f.begin(), f.end());
  }
  // A full queue behind a long job: every status reply lists 64 jobs.
  auto c = client::connection::connect(d_->socket(), "queue filler");
  // Running while the floods come, so that the queue stays full.
  constexpr std::uint64_t count = 2 * long_count;
  auto big = c.allocate_bytes(count * 8);
  fill(big.data(), dtype::u64, count, 31);
  std::promise<void> running;
  std::atomic<bool> once{false};
  client::job long_job = c.submit(
      {.type = dtype::u64, .count = count, .keys = client::array_ref::in(big)},
      [&](const progress_event&) {
        if (!once.exchange(true)) running.set_value();
      });
  ASSERT_EQ(running.get_future().wait_for(60s), std::future_status::ready);
  auto small = c.allocate<std::uint32_t>(1000);
  std::vector<client::job> queued;
  for (int i = 0; i < 63; ++i)
    queued.push_back(c.submit(
        {.type = dtype::u32, .count = small.size(), .keys = client::array_ref::in(small)}));
  for (const auto& s : silent) ASSERT_TRUE(send_now(s->fd(), flood));
  // Answering takes the daemon a while (each status reply reads /proc/meminfo): wait until it
  // has done all it will do, the jobs finished (their memory freed) and its threads idle, and
  // then look at what it holds for the clients.
  EXPECT_TRUE(long_job.wait_for(180s));
  for (client::job& j : queued) EXPECT_TRUE(j.wait_for(180s));
  double cpu = cpu_seconds(d_->pid());
  for (const auto end = std::chrono::steady_clock::now() + 60s;
       std::chrono::steady_clock::now() < end;) {
    std::this_thread::sleep_for(300ms);
    const double now = cpu_seconds(d_->pid());
    if (now - std::exchange(cpu, now) < 0.02) break;
  }
  const process_usage held = usage_of(d_->pid());
  std::printf("daemon private memory with 64 clients not reading their status replies: %s, "
              "before the test %s\n",
              soak::mib(held.rss_anon).c_str(), soak::mib(baseline_.rss_anon).c_str());
  // 64 clients x 1 MiB of replies each, and the heap's slack: 109 MiB measured alone, up to 182
  // MiB on the 2-core machine under the whole suite's load; ASan's quarantine keeps freed
  // replies for a while (481 MiB held under asan, 35 MiB before), hence rss_slack.
  EXPECT_LT(held.rss_anon, baseline_.rss_anon + soak::rss_slack(std::uint64_t{256} << 20))
      << "replies held for clients that do not read";
  silent.clear();
  long_job.cancel();
  c.close();
  // Under a sanitizer the allocator keeps what the floods freed (ASan's quarantine and size
  // classes: 638 MiB held before and after the clients left, on the 2-core machine at
  // 27414d5), so afterwards it is held to the bound above; unsanitized, the heap must give it
  // back (before the reply limit it kept 202 MiB, and without the sessions' malloc_trim 108
  // MiB), all but what stays scattered among live blocks: 70.7 MiB over the baseline once on
  // the 2-core machine under the whole release suite's load (4b0dc73; alone 3 runs of 3 within
  // 64 MiB), hence 96 MiB.
  expect_back_to_baseline(soak::sanitized_build ? soak::rss_slack(std::uint64_t{256} << 20)
                                                : std::uint64_t{96} << 20);
}

// A client that sends a SUBMIT and hangs up at once: the daemon reads the request after the
// client has gone, so the SUBMIT_REPLY it writes fails (EPIPE), and the session closes while
// the request is being answered. It must close cleanly (the job cancelled, nothing held), not
// wait on itself.
TEST_F(Hostile, ClientsThatSubmitAndHangUpAtOnce)
{
  start("max_running_jobs: 1\n");
  constexpr std::uint64_t n = 1000;
  const unique_fd keys = make_memfd(n * 8, F_SEAL_SHRINK);
  const int fds[] = {keys.get()};
  for (std::uint64_t round = 0, rounds = scaled(300, 20); round < rounds; ++round) {
    raw_connection gone{d_->socket()};
    gone.hello();
    gone.send(round + 1, submit_fd(n), fds);
  }
  expect_back_to_baseline();
}

// ---- connections and frames -----------------------------------------------------------------

TEST_F(Hostile, TenThousandConnectionsOpenedAndDropped)
{
  start();
  const std::uint64_t total = scaled(10'000, 100);
  // A well-behaved client sorts all along. The droppers start once it has sorted once: under
  // asan the 2,500 connections of the scaled run were over before its first sort had ended.
  std::atomic<bool> stop{false};
  std::promise<void> first_sort;
  auto served = std::async(std::launch::async, [&] {
    int sorts = 0;
    auto c = client::connection::connect(d_->socket(), "bystander");
    auto keys = c.allocate<std::uint64_t>(20'000);
    while (!stop || sorts < 2) {
      const fingerprint before = fill(keys.data(), dtype::u64, keys.size(), 77);
      c.sort(keys);
      if (!sorted(keys.data(), dtype::u64, keys.size(), order::ascending, before)) return -1;
      if (++sorts == 1) first_sort.set_value();
    }
    return sorts;
  });
  ASSERT_EQ(first_sort.get_future().wait_for(60s), std::future_status::ready);
  wire::HelloRequest h;
  h.set_min_version(1);
  h.set_max_version(1);
  const std::vector<std::byte> hello = proto::encode_frame(1, h);
  const std::vector<std::byte> status = proto::encode_frame(2, wire::DaemonStatusRequest{});
  std::vector<std::byte> submit = proto::encode_frame(3, submit_fd(100));
  constexpr unsigned threads = 4;
  std::atomic<std::uint64_t> refused{0};
  std::vector<std::thread> droppers;
  for (unsigned t = 0; t < threads; ++t) {
    droppers.emplace_back([&, t] {
      for (std::uint64_t i = t; i < total; i += threads) {
        try {
          raw_connection raw{d_->socket()};
          const auto part = [&](const std::vector<std::byte>& f, std::size_t bytes) {
            ::send(raw.fd(), f.data(), bytes, MSG_NOSIGNAL);
          };
          switch (i % 6) {
            case 0: break;                                       // nothing at all
            case 1: part(hello, 7); break;                       // inside the header
            case 2: part(hello, proto::header_bytes + 3); break; // inside the body
            case 3:                                              // HELLO, then half a SUBMIT
              part(hello, hello.size());
              part(submit, submit.size() / 2);
              break;
            case 4:  // a whole exchange, reply unread
              part(hello, hello.size());
              part(status, status.size());
              break;
            default: {  // a SUBMIT whose descriptor arrives with no frame after it
              part(hello, hello.size());
              const unique_fd fd = make_memfd(800, F_SEAL_SHRINK);
              const int fds[] = {fd.get()};
              std::vector<std::byte> head(submit.begin(), submit.begin() + 10);
              try {
                proto::send_frame(raw.fd(), head, fds);
              } catch (const std::exception&) {
              }
              break;
            }
          }
        } catch (const std::exception&) {
          // Over max_connections for a moment: refused, which is what the limit is for.
          refused.fetch_add(1);
        }
      }
    });
  }
  for (std::thread& t : droppers) t.join();
  stop = true;
  EXPECT_GE(served.get(), 2) << "the bystander's sorts failed";
  EXPECT_LT(refused.load(), total / 10);
  auto c = client::connection::connect(d_->socket());
  EXPECT_GE(c.status().totals.connections, total);
  c.close();
  expect_back_to_baseline();
}

// What the daemon must answer to a frame whose header or body is damaged (proto/README.md,
// "Errors in the stream"), for frames made at random from a seed: a reply with the status the
// table gives, or no reply and a closed connection, and the next client served.
TEST_F(Hostile, RandomOversizedAndTruncatedFrames)
{
  start();
  std::uint64_t seed = 25;
  if (const char* s = std::getenv("GPUSORT_TEST_SEED")) seed = std::strtoull(s, nullptr, 10);
  std::mt19937_64 rng{seed};
  const std::uint64_t rounds = scaled(400, 20);
  for (std::uint64_t round = 0; round < rounds; ++round) {
    SCOPED_TRACE("seed " + std::to_string(seed) + ", round " + std::to_string(round));
    raw_connection raw{d_->socket()};
    raw.hello();
    const auto type = static_cast<std::uint16_t>(1 + rng() % 7);  // a request type
    const std::uint64_t id = 1 + rng() % 1000;
    proto::frame_header h{.type = type, .request_id = id};
    const int kind = static_cast<int>(rng() % 3);
    std::vector<std::byte> body;
    if (kind == 0) {  // oversized: a length past the limit, a little or a lot
      constexpr std::uint64_t beyond = 0xFFFFFFFFull - proto::max_control_body;
      h.body_length = proto::max_control_body + 1 +
                      static_cast<std::uint32_t>(rng() % (rng() % 2 ? 16 : beyond));
      body.resize(rng() % 64);
    } else {  // random bytes of a random length, all sent (kind 1) or cut short (kind 2)
      const auto length = static_cast<std::uint32_t>(
          rng() % 2 ? rng() % 64 : rng() % (proto::max_control_body + 1));
      h.body_length = length;
      body.resize(length);
      for (std::byte& b : body) b = static_cast<std::byte>(rng());
      if (kind == 2) body.resize(length == 0 ? 0 : rng() % length);
    }
    const auto header = proto::encode_header(h);
    std::vector<std::byte> frame(header.begin(), header.end());
    if (kind == 2 && body.empty() && h.body_length == 0)
      frame.resize(rng() % proto::header_bytes);  // cut inside the header instead
    frame.insert(frame.end(), body.begin(), body.end());
    const std::size_t complete = proto::header_bytes + h.body_length;
    try {
      raw.send_bytes(frame);
    } catch (const std::exception&) {
      // The daemon may close first (a length over the limit is refused as soon as it is read).
    }
    if (kind == 0) {
      const proto::frame f = raw.next_frame();
      EXPECT_EQ(f.header.request_id, id);
      EXPECT_EQ(static_cast<std::uint16_t>(f.type), type | 0x8000);
      EXPECT_EQ(status_of(f).code(), wire::TOO_LARGE);
      EXPECT_TRUE(raw.closed_by_daemon());
    } else if (frame.size() < complete) {
      // A frame still arriving: no answer; the client hangs up mid-frame.
      EXPECT_FALSE(raw.next(20ms)) << "an answer to half a frame";
    } else {
      // A whole frame of random bytes: one reply with its id (PROTOCOL_ERROR for a body that is
      // not a protobuf of the type; a body that happens to be one gets its request's answer),
      // and the connection serves on.
      const proto::frame f = raw.next_frame();
      EXPECT_EQ(f.header.request_id, id);
      EXPECT_EQ(static_cast<std::uint16_t>(f.type), type | 0x8000);
      raw.send(id + 1, wire::DaemonStatusRequest{});
      proto::frame g = raw.next_frame();
      while (g.type == proto::message_type::progress ||
             g.type == proto::message_type::job_finished)
        g = raw.next_frame();
      EXPECT_EQ(g.header.request_id, id + 1);
      EXPECT_EQ(status_of(g).code(), wire::OK);
    }
    if (::testing::Test::HasFailure()) break;
  }
  expect_back_to_baseline();
}

// ---- descriptors of the wrong kind, offsets that overflow -------------------------------------

TEST_F(Hostile, DescriptorsOfEveryWrongKind)
{
  start();
  const auto reply_to = [&](const wire::SubmitRequest& s, std::span<const int> fds) {
    raw_connection raw{d_->socket()};
    raw.hello();
    raw.send(9, s, fds);
    return status_of(raw.next_frame());
  };
  int pipe_fds[2];
  ASSERT_EQ(::pipe2(pipe_fds, O_CLOEXEC), 0);
  const unique_fd pipe_r{pipe_fds[0]};
  unique_fd pipe_w{pipe_fds[1]};
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  const unique_fd sock_a{pair[0]}, sock_b{pair[1]};
  const unique_fd zero{::open("/dev/zero", O_RDWR | O_CLOEXEC)};
  const unique_fd null{::open("/dev/null", O_RDWR | O_CLOEXEC)};
  const unique_fd directory{::open(dir().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  spit(dir() / "keys.bin", std::string(800, '\1'));
  const unique_fd path_only{::open((dir() / "keys.bin").c_str(), O_PATH | O_CLOEXEC)};
  const unique_fd read_only{::open((dir() / "keys.bin").c_str(), O_RDONLY | O_CLOEXEC)};
  const unique_fd empty_sealed = make_memfd(0, F_SEAL_SHRINK);
  const unique_fd empty_unsealed = make_memfd(0, 0);
  const struct {
    const char* what;
    int fd;
    const char* reason;
  } wrong[] = {
      {"/dev/zero", zero.get(), "character device"},
      {"/dev/null", null.get(), "character device"},
      {"a pipe", pipe_r.get(), "pipe"},
      {"a pipe's write end", pipe_w.get(), "pipe"},
      {"a socket", sock_a.get(), "socket"},
      {"a directory", directory.get(), "directory"},
      {"an O_PATH descriptor", path_only.get(), "not_readable"},
      {"a 0-byte sealed memfd", empty_sealed.get(), "too_small"},
      {"a 0-byte unsealed memfd", empty_unsealed.get(), "unsealed_memfd"},
  };
  for (const auto& w : wrong) {
    SCOPED_TRACE(w.what);
    const int fds[] = {w.fd};
    const wire::Status s = reply_to(submit_fd(100), fds);
    EXPECT_EQ(s.code(), wire::BAD_FD) << s.message();
    EXPECT_NE(s.message().find(w.reason), std::string::npos) << s.message();
  }
  // As an output, after a good input: a read-only file is not writable either.
  for (const auto& [what, fd] : {std::pair{"/dev/zero", zero.get()},
                                 std::pair{"a pipe", pipe_w.get()},
                                 std::pair{"a socket", sock_b.get()},
                                 std::pair{"a read-only file", read_only.get()}}) {
    SCOPED_TRACE(std::string{"output: "} + what);
    wire::SubmitRequest s = submit_fd(100);
    s.set_in_place(false);
    s.mutable_keys_out()->set_attached_fd(1);
    const int fds[] = {read_only.get(), fd};
    EXPECT_EQ(reply_to(s, fds).code(), wire::BAD_FD);
  }
  // A 0-byte sealed memfd holds a job of 0 keys.
  {
    raw_connection raw{d_->socket()};
    raw.hello();
    const int fds[] = {empty_sealed.get()};
    raw.send(9, submit_fd(0), fds);
    EXPECT_EQ(status_of(raw.next_frame()).code(), wire::OK);
    EXPECT_EQ(status_of(raw.next_frame()).code(), wire::OK);  // JOB_FINISHED
  }
  // Nothing the daemon was handed stays open in it: the pipe's write end closed there too.
  char byte = 0;
  pipe_w.reset();
  pollfd p{.fd = pipe_r.get(), .events = POLLIN, .revents = 0};
  EXPECT_EQ(::poll(&p, 1, 5000), 1);
  EXPECT_EQ(::read(pipe_r.get(), &byte, 1), 0) << "the daemon kept a pipe's write end open";
  expect_back_to_baseline();
}

TEST_F(Hostile, OffsetsAndLengthsThatOverflow)
{
  start();
  const std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  const unique_fd fd = make_memfd(4096, F_SEAL_SHRINK);
  spit(dir() / "keys.bin", std::string(4096, '\0'));
  const unique_fd file{::open((dir() / "keys.bin").c_str(), O_RDWR | O_CLOEXEC)};
  {
  raw_connection raw{d_->socket()};
  raw.hello();
  wire::AllocateRequest a;
  a.set_bytes(4096);
  raw.send(1, a);
  const auto buffer = std::get<wire::AllocateReply>(raw.next_frame().msg).buffer_id();
  struct overflow_case {
    const char* what;
    std::uint64_t count;
    std::uint64_t offset;
    std::uint32_t value_bytes;
    std::uint64_t values_offset;
  };
  const overflow_case cases[] = {
      {"count * 8 past 2^64", max / 4, 0, 0, 0},
      {"count * 8 just past 2^64", (max >> 3) + 1, 0, 0, 0},
      {"count * (8 + 8) past 2^64", max / 12, 0, 8, 0},
      {"offset near 2^64", 1, max - 7, 0, 0},
      {"offset + length wraps to 0", 1, max - 7 - 7, 0, 0},
      {"offset + length wraps past 0", 4, max - 15, 0, 0},
      {"offset 2^63, length 2^63", std::uint64_t{1} << 60, std::uint64_t{1} << 63, 0, 0},
      {"values offset wraps", 1, 0, 8, max - 7},
      {"offset past the end by a page", 1, 8192, 0, 0},
  };
  std::uint64_t id = 10;
  for (const overflow_case& c : cases) {
    for (const char* where : {"memfd", "file", "pool buffer"}) {
      SCOPED_TRACE(std::string{c.what} + " in a " + where);
      wire::SubmitRequest s;
      s.set_dtype(wire::DTYPE_U64);
      s.set_count(c.count);
      s.set_in_place(true);
      const auto place = [&](wire::DataRef& ref, std::uint64_t offset) {
        if (std::string{where} == "pool buffer")
          ref.set_buffer_id(buffer);
        else
          ref.set_attached_fd(0);
        ref.set_offset(offset);
      };
      place(*s.mutable_keys(), c.offset);
      if (c.value_bytes != 0) {
        s.set_value_bytes(c.value_bytes);
        place(*s.mutable_values(), c.values_offset);
      }
      std::vector<int> fds;
      if (std::string{where} == "memfd") fds.push_back(fd.get());
      if (std::string{where} == "file") fds.push_back(file.get());
      raw.send(++id, s, fds);
      const proto::frame f = raw.next_frame();
      EXPECT_EQ(f.header.request_id, id);
      const wire::StatusCode code = status_of(f).code();
      EXPECT_TRUE(code == wire::BAD_REQUEST || code == wire::BAD_FD || code == wire::TOO_LARGE)
          << wire::StatusCode_Name(code) << ": " << status_of(f).message();
    }
  }
  // The connection is still good.
  raw.send(++id, wire::DaemonStatusRequest{});
  EXPECT_EQ(status_of(raw.next_frame()).code(), wire::OK);
  }
  expect_back_to_baseline();
}

// ---- descriptors running out ----------------------------------------------------------------

// Every shared buffer holds a descriptor in the daemon for as long as it lives, held or cached:
// a client asking for thousands of one-page buffers must be told to wait (REJECTED_BUSY) before
// the daemon runs out of descriptors, which would stop it from accepting anyone or taking the
// descriptors other clients pass.
TEST_F(Hostile, ThousandsOfTinyBuffersDoNotExhaustTheDaemonsDescriptors)
{
  start();
  limit_descriptors(d_->pid(), 128);
  {
    auto hog = client::connection::connect(d_->socket(), "hog");
    std::vector<client::shared_buffer> held;
    status_code refused = status_code::ok;
    std::string message;
    for (int i = 0; i < 1000 && refused == status_code::ok; ++i) {
      try {
        held.push_back(hog.allocate_bytes(4096));
      } catch (const client::error& e) {
        refused = e.code();
        message = e.what();
      }
    }
    EXPECT_EQ(refused, status_code::rejected_busy) << message;
    EXPECT_GT(held.size(), 8u);
    // Meanwhile another client connects and sorts an array it passes as a descriptor.
    auto other = client::connection::connect(d_->socket(), "bystander");
    constexpr std::uint64_t n = 10'000;
    const unique_fd fd = make_memfd(n * 8, F_SEAL_SHRINK);
    void* p = ::mmap(nullptr, n * 8, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
    ASSERT_NE(p, MAP_FAILED);
    const fingerprint before = fill(p, dtype::u64, n, 5);
    EXPECT_NO_THROW(other.sort(
        {.type = dtype::u64, .count = n, .keys = client::array_ref::of_fd(fd.get())}));
    EXPECT_TRUE(sorted(p, dtype::u64, n, order::ascending, before));
    ::munmap(p, n * 8);
  }
  // The cached buffers count too: the next one is still served.
  expect_back_to_baseline();
}

// accept() failing with EMFILE leaves the connection in the backlog: trying again at once fails
// again at once. The daemon must wait a little instead of spinning, and take the waiting
// clients once descriptors are free.
TEST_F(Hostile, RunningOutOfDescriptorsDoesNotSpinTheDaemon)
{
  start("max_connections: 1000\n");
  limit_descriptors(d_->pid(), 64);
  {
    std::vector<std::unique_ptr<raw_connection>> many;
    for (int i = 0; i < 80; ++i) many.push_back(std::make_unique<raw_connection>(d_->socket()));
    std::this_thread::sleep_for(200ms);
    const double cpu0 = cpu_seconds(d_->pid());
    std::this_thread::sleep_for(1s);
    const double busy = cpu_seconds(d_->pid()) - cpu0;
    EXPECT_LT(busy, 0.3) << "the daemon spun for " << busy << " s of a second";
    const std::string log = d_->log();
    std::size_t said = 0;
    for (std::size_t at = log.find("accept failed"); at != std::string::npos;
         at = log.find("accept failed", at + 1))
      ++said;
    EXPECT_LE(said, 1u) << "accept failures logged without end";
    EXPECT_TRUE(daemon_alive());
  }
  // The connections have gone; a new client is taken once the backlog has drained.
  expect_back_to_baseline();
}

}  // namespace
}  // namespace gpusort::service::testing
