#include "proto/fd_passing.hpp"

#include "proto/frame.hpp"
#include "proto_test_support.hpp"

#include <gpusort/error.hpp>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <numeric>
#include <system_error>
#include <thread>

namespace gpusort::proto {
namespace {

using namespace test;

struct socket_pair {
  unique_fd a;
  unique_fd b;
  socket_pair()
  {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
      throw std::system_error{errno, std::generic_category(), "socketpair"};
    a.reset(fds[0]);
    b.reset(fds[1]);
  }
};

void set_nonblocking(int fd)
{
  ASSERT_EQ(::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
}

std::vector<int> raw(const std::vector<unique_fd>& fds)
{
  std::vector<int> out;
  for (const auto& fd : fds) out.push_back(fd.get());
  return out;
}

/// Reads from `socket` into the parser until it yields one result.
parse_result read_one(int socket, frame_parser& parser)
{
  std::array<std::byte, 4096> buffer{};
  for (;;) {
    if (auto r = parser.next()) return std::move(*r);
    received got = receive(socket, buffer, max_fds_per_frame);
    if (got.bytes == 0) throw std::runtime_error{"peer closed"};
    parser.feed(std::span{buffer}.first(got.bytes), std::move(got.fds));
  }
}

TEST(FdPassing, ReceivedDescriptorsReferToTheSameFiles)
{
  socket_pair sp;
  std::vector<unique_fd> files = make_fds(2);
  const auto bytes = encode_frame(41, sample_message(message_type::submit));
  send_frame(sp.a.get(), bytes, raw(files));

  frame_parser parser{{.reads = stream_direction::requests}};
  parse_result r = read_one(sp.b.get(), parser);
  ASSERT_TRUE(std::holds_alternative<frame>(r));
  frame& f = std::get<frame>(r);
  EXPECT_EQ(f.header.request_id, 41u);
  ASSERT_EQ(f.fds.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    // New descriptor numbers, same open files, close-on-exec set by MSG_CMSG_CLOEXEC.
    EXPECT_NE(f.fds[i].get(), files[i].get());
    struct stat sent{}, got{};
    ASSERT_EQ(::fstat(files[i].get(), &sent), 0);
    ASSERT_EQ(::fstat(f.fds[i].get(), &got), 0);
    EXPECT_EQ(sent.st_ino, got.st_ino);
    EXPECT_EQ(sent.st_dev, got.st_dev);
    EXPECT_NE(::fcntl(f.fds[i].get(), F_GETFD) & FD_CLOEXEC, 0);

    // Written through one, read through the other.
    const std::string text = "written through the sender's descriptor " + std::to_string(i);
    ASSERT_EQ(::pwrite(files[i].get(), text.data(), text.size(), 100),
              static_cast<ssize_t>(text.size()));
    std::string back(text.size(), '\0');
    ASSERT_EQ(::pread(f.fds[i].get(), back.data(), back.size(), 100),
              static_cast<ssize_t>(back.size()));
    EXPECT_EQ(back, text);
  }
  // The order is the order sent: #0 is the first file.
  struct stat first{};
  ASSERT_EQ(::fstat(files[0].get(), &first), 0);
  struct stat got0{};
  ASSERT_EQ(::fstat(f.fds[0].get(), &got0), 0);
  EXPECT_EQ(first.st_ino, got0.st_ino);
}

TEST(FdPassing, ManyFramesBackToBackKeepTheirDescriptors)
{
  // Frames with and without descriptors written faster than they are read: the kernel glues the
  // ones without and must hand each frame's descriptors out with that frame.
  socket_pair sp;
  std::vector<message_type> types;
  for (int i = 0; i < 200; ++i)
    types.push_back(i % 3 == 0 ? message_type::submit : message_type::cancel);
  std::vector<std::vector<unique_fd>> kept;
  for (std::size_t i = 0; i < types.size(); ++i) {
    kept.push_back(make_fds(sample_fd_count(types[i])));
    // Files tell themselves apart by size.
    for (std::size_t k = 0; k < kept.back().size(); ++k)
      ASSERT_EQ(::ftruncate(kept.back()[k].get(), static_cast<off_t>(i * 10 + k)), 0);
  }
  // A thread sends, so that a full socket buffer makes it wait instead of hanging the test.
  std::thread sender{[&] {
    try {
      for (std::size_t i = 0; i < types.size(); ++i)
        send_frame(sp.a.get(), encode_frame(i, sample_message(types[i])), raw(kept[i]));
    } catch (const std::system_error&) {
      // The reader failed and shut its end down.
    }
  }};
  struct joiner {
    std::thread& t;
    int reader;
    ~joiner()
    {
      ::shutdown(reader, SHUT_RDWR);
      t.join();
    }
  } join_sender{sender, sp.b.get()};
  frame_parser parser{{.reads = stream_direction::requests}};
  for (std::size_t i = 0; i < types.size(); ++i) {
    parse_result r = read_one(sp.b.get(), parser);
    ASSERT_TRUE(std::holds_alternative<frame>(r)) << std::get<parse_error>(r).message;
    const frame& f = std::get<frame>(r);
    EXPECT_EQ(f.header.request_id, i);
    ASSERT_EQ(f.fds.size(), sample_fd_count(types[i]));
    for (std::size_t k = 0; k < f.fds.size(); ++k) {
      struct stat st{};
      ASSERT_EQ(::fstat(f.fds[k].get(), &st), 0);
      EXPECT_EQ(st.st_size, static_cast<off_t>(i * 10 + k));
    }
  }
}

TEST(FdPassing, PartialWritesOnANonBlockingSocket)
{
  // A message larger than the socket's buffer: sendmsg writes part of it, send_frame waits and
  // goes on, and the descriptors arrive once, with the first bytes.
  socket_pair sp;
  const int small = 4096;
  ASSERT_EQ(::setsockopt(sp.a.get(), SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
  set_nonblocking(sp.a.get());
  std::vector<std::byte> payload(1 << 20);
  for (std::size_t i = 0; i < payload.size(); ++i)
    payload[i] = static_cast<std::byte>((i * 2654435761u) >> 24);
  std::vector<unique_fd> files = make_fds(3);

  std::thread sender{[&] { send_frame(sp.a.get(), payload, raw(files)); }};
  std::vector<std::byte> got;
  std::vector<std::size_t> fds_at;  // received byte count when descriptors came
  std::size_t fds_total = 0;
  std::array<std::byte, 1000> buffer{};
  while (got.size() < payload.size()) {
    received r = receive(sp.b.get(), buffer, max_fds_per_frame);
    if (r.bytes == 0) break;  // the comparison below fails
    if (!r.fds.empty()) {
      fds_at.push_back(got.size());
      fds_total += r.fds.size();
    }
    got.insert(got.end(), buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(r.bytes));
  }
  sender.join();
  EXPECT_EQ(got, payload);
  EXPECT_EQ(fds_at, std::vector<std::size_t>{0});
  EXPECT_EQ(fds_total, 3u);
}

TEST(FdPassing, TryCallsReportWouldBlock)
{
  socket_pair sp;
  set_nonblocking(sp.a.get());
  set_nonblocking(sp.b.get());
  std::array<std::byte, 16> buffer{};
  EXPECT_FALSE(try_receive(sp.b.get(), buffer, 4).has_value());

  // Fill the socket until it takes nothing more.
  const std::vector<std::byte> chunk(65536);
  std::size_t sent = 0;
  for (int i = 0; i < 10000; ++i) {
    const auto n = try_send(sp.a.get(), chunk);
    if (!n) break;
    sent += *n;
  }
  EXPECT_GT(sent, 0u);
  EXPECT_FALSE(try_send(sp.a.get(), chunk).has_value());
  const auto r = try_receive(sp.b.get(), buffer, 4);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->bytes, buffer.size());
}

TEST(FdPassing, EndOfStream)
{
  socket_pair sp;
  send_frame(sp.a.get(), encode_frame(1, sample_message(message_type::cancel)));
  sp.a.reset();
  std::array<std::byte, 4096> buffer{};
  const received first = receive(sp.b.get(), buffer, 4);
  EXPECT_EQ(first.bytes, header_bytes + 2);  // CancelRequest{job_id: 99} is 2 bytes
  EXPECT_EQ(receive(sp.b.get(), buffer, 4).bytes, 0u);
}

TEST(FdPassing, SendingToAClosedPeerThrowsInsteadOfRaisingSigpipe)
{
  socket_pair sp;
  sp.b.reset();
  const auto bytes = encode_frame(1, sample_message(message_type::cancel));
  try {
    send_frame(sp.a.get(), bytes);
    FAIL() << "no error";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), EPIPE);
  }
}

TEST(FdPassing, TooManyDescriptorsAreClosedAndAnError)
{
  // max_fds 2 and 0 exercise MSG_CTRUNC; max_fds 1 the control buffer's rounding, which has
  // room for a second descriptor that must be refused too.
  for (const std::size_t max_fds : {std::size_t{2}, std::size_t{1}, std::size_t{0}}) {
    SCOPED_TRACE(max_fds);
    socket_pair sp;
    std::vector<unique_fd> files = make_fds(3);
    const std::size_t baseline = open_fd_count();
    const std::vector<int> all = raw(files);
    send_frame(sp.a.get(), encode_frame(1, sample_message(message_type::cancel)),
               std::span{all}.first(max_fds + 1));
    std::array<std::byte, 64> buffer{};
    EXPECT_THROW(receive(sp.b.get(), buffer, max_fds), invalid_argument);
    EXPECT_EQ(open_fd_count(), baseline);
  }
}

TEST(FdPassing, ParserErrorsCloseReceivedDescriptors)
{
  socket_pair sp;
  std::vector<unique_fd> files = make_fds(2);
  const std::size_t baseline = open_fd_count();
  frame_parser parser{{.reads = stream_direction::requests}};

  // A CANCEL takes no descriptor: the two that came with it are closed with the error.
  send_frame(sp.a.get(), encode_frame(1, sample_message(message_type::cancel)), raw(files));
  parse_result r = read_one(sp.b.get(), parser);
  ASSERT_TRUE(std::holds_alternative<parse_error>(r));
  EXPECT_EQ(std::get<parse_error>(r).kind, parse_error_kind::fd_count_mismatch);
  EXPECT_EQ(open_fd_count(), baseline);

  // Bad magic: fatal, and the descriptors held for the frame go too.
  auto bad = encode_frame(2, sample_message(message_type::submit));
  bad[3] = std::byte{'Q'};
  send_frame(sp.a.get(), bad, raw(files));
  r = read_one(sp.b.get(), parser);
  ASSERT_TRUE(std::holds_alternative<parse_error>(r));
  EXPECT_EQ(std::get<parse_error>(r).kind, parse_error_kind::bad_magic);
  EXPECT_EQ(open_fd_count(), baseline);
}

std::atomic<int> signals_seen{0};
void count_signal(int) { signals_seen.fetch_add(1); }

TEST(FdPassing, ReceiveRetriesAfterEintr)
{
  // A handler without SA_RESTART makes a blocked recvmsg/poll fail with EINTR; receive must go on.
  struct sigaction action{};
  struct sigaction old{};
  action.sa_handler = count_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;
  ASSERT_EQ(::sigaction(SIGUSR1, &action, &old), 0);

  socket_pair sp;
  std::atomic<bool> done{false};
  received result;
  std::thread reader{[&] {
    std::array<std::byte, 64> buffer{};
    result = receive(sp.b.get(), buffer, 4);
    done = true;
  }};
  const pthread_t handle = reader.native_handle();
  const int before = signals_seen.load();
  for (int i = 0; i < 20 && !done; ++i) {
    ::pthread_kill(handle, SIGUSR1);
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_FALSE(done.load());
  std::vector<unique_fd> files = make_fds(1);
  send_frame(sp.a.get(), encode_frame(1, sample_message(message_type::cancel)), raw(files));
  reader.join();
  ::sigaction(SIGUSR1, &old, nullptr);
  EXPECT_GT(signals_seen.load(), before);
  EXPECT_EQ(result.bytes, header_bytes + 2);
  EXPECT_EQ(result.fds.size(), 1u);
}

}  // namespace
}  // namespace gpusort::proto
