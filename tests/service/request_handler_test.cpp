// The request handler without a socket: frames in, frames out through a recording outbox. The
// protocol rules of proto/README.md that need no descriptors passing through a kernel: HELLO
// first, one reply per request with its id, SUBMIT_REPLY before the job's events, buffers and
// jobs private to their connection, disconnect cancelling and releasing.
#include "service/request_handler.hpp"

#include "core/verify.hpp"
#include "proto/frame.hpp"

#include <gpusort/gpusort.hpp>

#include <gtest/gtest.h>

#include <sys/mman.h>

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <numeric>
#include <random>

namespace gpusort::service {
namespace {

using namespace std::chrono_literals;

class recording_outbox : public outbox {
 public:
  void send(std::vector<std::byte> frame, std::vector<unique_fd> fds) override
  {
    const std::lock_guard lock{mutex_};
    parser_.feed(frame, std::move(fds));
    while (auto r = parser_.next()) frames_.push_back(std::get<proto::frame>(std::move(*r)));
    cv_.notify_all();
  }
  /// Moves the frames sent so far into `got` (which the test owns: job events arrive from
  /// worker threads meanwhile), waiting until it holds at least `n` or 10 s passed.
  void collect(std::vector<proto::frame>& got, std::size_t n)
  {
    std::unique_lock lock{mutex_};
    cv_.wait_for(lock, 10s, [&] { return got.size() + frames_.size() >= n; });
    for (proto::frame& f : frames_) got.push_back(std::move(f));
    frames_.clear();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  proto::frame_parser parser_{proto::parser_options{.reads = proto::stream_direction::responses}};
  std::vector<proto::frame> frames_;
};

class Handler : public ::testing::Test {
 protected:
  Handler()
      : eng_{[] {
          config c;
          c.devices = device_selection::cpu;
          return c;
        }()},
        pool_{64 << 20},
        queue_{queue_limits{.workers = 2, .max_queued = 8, .host_budget = 1 << 30}},
        ctx_{cfg_, eng_, pool_, queue_}
  {
  }

  std::shared_ptr<request_handler> connect(std::shared_ptr<recording_outbox>& out,
                                           std::uint32_t uid = 1000)
  {
    out = std::make_shared<recording_outbox>();
    return std::make_shared<request_handler>(ctx_, peer_credentials{.pid = 7, .uid = uid,
                                                                    .gid = 100},
                                             ctx_.next_session.fetch_add(1), out);
  }

  template <typename M>
  static proto::frame frame_of(std::uint64_t id, const M& m, std::vector<unique_fd> fds = {})
  {
    proto::frame_parser p{proto::parser_options{.reads = proto::stream_direction::requests}};
    p.feed(proto::encode_frame(id, m), std::move(fds));
    return std::get<proto::frame>(*p.next());
  }

  static void hello(request_handler& h)
  {
    wire::HelloRequest r;
    r.set_min_version(1);
    r.set_max_version(3);
    h.handle(frame_of(1, r));
  }

  config cfg_;
  engine eng_;
  buffer_pool pool_;
  job_queue queue_;
  daemon_context ctx_;
};

wire::StatusCode code_of(const proto::frame& f)
{
  return std::visit(
      [](const auto& body) {
        if constexpr (requires { body.status(); })
          return body.status().code();
        else
          return wire::OK;
      },
      f.msg);
}

TEST_F(Handler, HelloFirstAndOnlyOnce)
{
  std::shared_ptr<recording_outbox> out;
  auto h = connect(out);
  h->handle(frame_of(5, wire::DaemonStatusRequest{}));
  hello(*h);
  hello(*h);
  std::vector<proto::frame> f;
  out->collect(f, 3);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].type, proto::message_type::daemon_status_reply);
  EXPECT_EQ(f[0].header.request_id, 5u);
  EXPECT_EQ(code_of(f[0]), wire::FAILED_PRECONDITION);
  EXPECT_EQ(f[1].type, proto::message_type::hello_reply);
  EXPECT_EQ(code_of(f[1]), wire::OK);
  EXPECT_EQ(std::get<wire::HelloReply>(f[1].msg).version(), 1u);
  EXPECT_EQ(std::get<wire::HelloReply>(f[1].msg).server().devices(0), "cpu");
  EXPECT_EQ(code_of(f[2]), wire::FAILED_PRECONDITION);
  EXPECT_EQ(h->version(), 1);
}

TEST_F(Handler, AllocateSubmitAndTheEventsInOrder)
{
  std::shared_ptr<recording_outbox> out;
  auto h = connect(out);
  hello(*h);
  constexpr std::uint64_t n = 100'000;
  wire::AllocateRequest a;
  a.set_bytes(n * 4);
  h->handle(frame_of(2, a));
  std::vector<proto::frame> frames;
  out->collect(frames, 2);
  ASSERT_EQ(frames.size(), 2u);
  ASSERT_EQ(code_of(frames[1]), wire::OK);
  const wire::AllocateReply grant = std::get<wire::AllocateReply>(frames[1].msg);
  ASSERT_EQ(frames[1].fds.size(), 1u);
  void* p = ::mmap(nullptr, grant.size(), PROT_READ | PROT_WRITE, MAP_SHARED,
                   frames[1].fds[0].get(), 0);
  ASSERT_NE(p, MAP_FAILED);
  auto* keys = static_cast<std::int32_t*>(p);
  std::mt19937 rng{3};
  for (std::uint64_t i = 0; i < n; ++i) keys[i] = static_cast<std::int32_t>(rng());
  const fingerprint before = fingerprint_of(key_array{keys, n, dtype::i32});

  wire::SubmitRequest s;
  s.set_dtype(wire::DTYPE_I32);
  s.set_order(wire::ORDER_DESCENDING);
  s.set_count(n);
  s.mutable_keys()->set_buffer_id(grant.buffer_id());
  s.set_in_place(true);
  h->handle(frame_of(3, s));
  // Submit reply, then progress events, then exactly one JOB_FINISHED, all with id 3.
  std::vector<proto::frame>& f = frames;
  out->collect(f, 3);
  while (f.size() >= 3 && f.back().type != proto::message_type::job_finished) {
    const std::size_t had = f.size();
    out->collect(f, had + 1);
    ASSERT_GT(f.size(), had) << "no JOB_FINISHED";
  }
  ASSERT_EQ(f[2].type, proto::message_type::submit_reply);
  const std::uint64_t job_id = std::get<wire::SubmitReply>(f[2].msg).job_id();
  EXPECT_NE(job_id, 0u);
  for (std::size_t i = 2; i < f.size(); ++i) EXPECT_EQ(f[i].header.request_id, 3u);
  const auto& done = std::get<wire::JobFinishedEvent>(f.back().msg);
  EXPECT_EQ(done.status().code(), wire::OK) << done.status().message();
  EXPECT_EQ(done.job_id(), job_id);
  EXPECT_EQ(done.report().elements(), n);
  EXPECT_TRUE(verify(key_array{keys, n, dtype::i32}, std::nullopt, order::descending, before).ok);
  ::munmap(p, grant.size());

  // The job is forgotten; the buffer is this connection's alone.
  wire::JobStatusRequest js;
  js.set_job_id(job_id);
  const std::size_t sent = f.size();
  h->handle(frame_of(4, js));
  out->collect(f, sent + 1);
  EXPECT_EQ(code_of(f.back()), wire::NOT_FOUND);
  std::shared_ptr<recording_outbox> other_out;
  auto other = connect(other_out, 1000);
  hello(*other);
  wire::ReleaseRequest r;
  r.set_buffer_id(grant.buffer_id());
  other->handle(frame_of(2, r));
  std::vector<proto::frame> theirs;
  other_out->collect(theirs, 2);
  ASSERT_EQ(theirs.size(), 2u);
  EXPECT_EQ(code_of(theirs[1]), wire::NOT_FOUND);
  EXPECT_EQ(pool_.stats().buffers_in_use, 1u);
  h->disconnect();
  EXPECT_EQ(pool_.stats().buffers_in_use, 0u);
}

TEST_F(Handler, BadRequestsGetStatuses)
{
  std::shared_ptr<recording_outbox> out;
  auto h = connect(out);
  hello(*h);
  wire::AllocateRequest zero;
  h->handle(frame_of(2, zero));
  wire::AllocateRequest huge;
  huge.set_bytes(std::uint64_t{1} << 40);
  h->handle(frame_of(3, huge));
  wire::SubmitRequest no_keys;
  no_keys.set_dtype(wire::DTYPE_U64);
  no_keys.set_in_place(true);
  h->handle(frame_of(4, no_keys));
  wire::SubmitRequest unknown_buffer = no_keys;
  unknown_buffer.mutable_keys()->set_buffer_id(99);
  h->handle(frame_of(5, unknown_buffer));
  wire::CancelRequest cancel;
  cancel.set_job_id(12345);
  h->handle(frame_of(6, cancel));
  std::vector<proto::frame> f;
  out->collect(f, 6);
  ASSERT_EQ(f.size(), 6u);
  EXPECT_EQ(code_of(f[1]), wire::BAD_REQUEST);
  EXPECT_EQ(code_of(f[2]), wire::TOO_LARGE);
  EXPECT_EQ(code_of(f[3]), wire::BAD_REQUEST);
  EXPECT_EQ(code_of(f[4]), wire::NOT_FOUND);
  EXPECT_EQ(code_of(f[5]), wire::NOT_FOUND);
  for (std::size_t i = 1; i < 6; ++i) EXPECT_EQ(f[i].header.request_id, i + 1);
}

TEST_F(Handler, DaemonStatusCountsBuffersAndTotals)
{
  std::shared_ptr<recording_outbox> out;
  auto h = connect(out);
  hello(*h);
  wire::AllocateRequest a;
  a.set_bytes(10000);
  h->handle(frame_of(2, a));
  h->handle(frame_of(3, wire::DaemonStatusRequest{}));
  std::vector<proto::frame> f;
  out->collect(f, 3);
  ASSERT_EQ(f.size(), 3u);
  const auto& s = std::get<wire::DaemonStatusReply>(f[2].msg);
  EXPECT_EQ(s.buffers(), 1u);
  EXPECT_GE(s.pinned_pool_used(), 10000u);
  EXPECT_EQ(s.pinned_pool_bytes(), std::uint64_t{64} << 20);
  EXPECT_EQ(s.devices_size(), 1);
  EXPECT_EQ(s.devices(0).name(), "cpu");
  EXPECT_EQ(s.host_memory_budget(), std::uint64_t{1} << 30);
}

}  // namespace
}  // namespace gpusort::service
