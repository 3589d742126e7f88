#include "proto/frame.hpp"

#include "proto_test_support.hpp"

#include <gpusort/error.hpp>

#include <gtest/gtest.h>

#include <cstring>

#include <random>

namespace gpusort::proto {
namespace {

using namespace test;

std::vector<std::byte> raw_frame(const frame_header& header, std::span<const std::byte> body)
{
  const auto h = encode_header(header);
  // Sized once and filled with memcpy: GCC 12 at -O3 misreads vector appends here as
  // overflowing (-Warray-bounds, -Wstringop-overflow false positives).
  std::vector<std::byte> out(h.size() + body.size());
  std::memcpy(out.data(), h.data(), h.size());
  if (!body.empty()) std::memcpy(out.data() + h.size(), body.data(), body.size());
  return out;
}

frame_header header_for(message_type type, std::uint32_t body_length, std::uint64_t request_id = 1)
{
  return {.type = static_cast<std::uint16_t>(type), .body_length = body_length,
          .request_id = request_id};
}

const frame& expect_frame(const std::optional<parse_result>& r)
{
  static const frame none{};
  if (!r) {
    ADD_FAILURE() << "no result";
    return none;
  }
  if (const auto* e = std::get_if<parse_error>(&*r)) {
    ADD_FAILURE() << "parse error: " << e->message;
    return none;
  }
  return std::get<frame>(*r);
}

parse_error expect_error(const std::optional<parse_result>& r, parse_error_kind kind)
{
  if (!r) {
    ADD_FAILURE() << "no result";
    return {};
  }
  if (std::holds_alternative<frame>(*r)) {
    ADD_FAILURE() << "a frame, expected error " << name_of(kind);
    return {};
  }
  const auto& e = std::get<parse_error>(*r);
  EXPECT_EQ(e.kind, kind) << name_of(e.kind) << ": " << e.message;
  return e;
}

// ---- header and encoder --------------------------------------------------------------------

TEST(Frame, HeaderBytesAreLittleEndian)
{
  const frame_header h{.version = 0x0102, .type = 0x8004, .body_length = 0x0A0B0C0D,
                       .request_id = 0x1122334455667788ULL};
  const auto bytes = encode_header(h);
  const auto expected = to_bytes({'G', 'P', 'S', 'R', 0x02, 0x01, 0x04, 0x80, 0x0D, 0x0C,
                                  0x0B, 0x0A, 0, 0, 0, 0, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33,
                                  0x22, 0x11});
  ASSERT_EQ(bytes.size(), 24u);
  EXPECT_TRUE(std::equal(bytes.begin(), bytes.end(), expected.begin(), expected.end()));
  EXPECT_EQ(decode_header(bytes), h);
}

TEST(Frame, EncodesHeaderThenProtobufBody)
{
  wire::CancelRequest cancel;
  cancel.set_job_id(300);  // varint 300 = 0xAC 0x02
  const auto bytes = encode_frame(7, cancel);
  const auto expected = to_bytes({'G', 'P', 'S', 'R', 1, 0, 5, 0, 3, 0, 0, 0, 0, 0, 0, 0,
                                  7, 0, 0, 0, 0, 0, 0, 0, 0x08, 0xAC, 0x02});
  EXPECT_EQ(bytes, expected);

  // An empty message is a header with body length 0.
  const auto empty = encode_frame(9, wire::DaemonStatusRequest{});
  EXPECT_EQ(empty.size(), header_bytes);
  EXPECT_EQ(decode_header(std::span<const std::byte, 24>{empty.data(), 24}),
            (frame_header{.type = 0x0007, .body_length = 0, .request_id = 9}));

  // The variant overload gives the same bytes as the typed one.
  EXPECT_EQ(encode_frame(7, message{cancel}), bytes);
}

// The bytes proto/README.md shows, as protoc --encode produced the bodies.
TEST(Frame, ReadmeSampleFrames)
{
  wire::HelloRequest hello;
  hello.set_min_version(1);
  hello.set_max_version(1);
  hello.set_client_name("example");
  EXPECT_EQ(encode_frame(1, hello),
            to_bytes({0x47, 0x50, 0x53, 0x52, 0x01, 0x00, 0x01, 0x00, 0x0d, 0x00, 0x00, 0x00,
                      0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                      0x08, 0x01, 0x10, 0x01, 0x1a, 0x07, 0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c,
                      0x65}));
  wire::SubmitRequest submit;
  submit.set_dtype(wire::DTYPE_U64);
  submit.set_count(1000000);
  submit.mutable_keys()->set_buffer_id(1);
  submit.set_in_place(true);
  EXPECT_EQ(encode_frame(3, submit),
            to_bytes({0x47, 0x50, 0x53, 0x52, 0x01, 0x00, 0x04, 0x00, 0x0c, 0x00, 0x00, 0x00,
                      0x00, 0x00, 0x00, 0x00, 0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                      0x08, 0x03, 0x18, 0xc0, 0x84, 0x3d, 0x22, 0x02, 0x08, 0x01, 0x48, 0x01}));
}

wire::HelloRequest hello_with_body_size(std::size_t body)
{
  // Field 3: a tag byte, a varint length of 1 to 3 bytes, then the string.
  wire::HelloRequest h;
  for (std::size_t overhead = 2; overhead <= 4; ++overhead) {
    h.set_client_name(std::string(body - overhead, 'x'));
    if (h.ByteSizeLong() == body) break;
  }
  EXPECT_EQ(h.ByteSizeLong(), body);
  return h;
}

TEST(Frame, EncoderRefusesBodiesOverTheLimit)
{
  EXPECT_EQ(encode_frame(1, hello_with_body_size(max_control_body)).size(),
            header_bytes + max_control_body);
  EXPECT_THROW(encode_frame(1, hello_with_body_size(max_control_body + 1)), invalid_argument);
}

// ---- round trips ---------------------------------------------------------------------------

TEST(Frame, EveryMessageTypeRoundTrips)
{
  for (const message_type type : all_message_types) {
    SCOPED_TRACE(std::string{name_of(type)});
    const message sent = sample_message(type);
    const std::uint64_t id = 0xF00D0000ULL + static_cast<std::uint16_t>(type);
    const auto bytes = encode_frame(id, sent);
    std::vector<unique_fd> fds = make_fds(sample_fd_count(type));
    std::vector<int> raw;
    for (const auto& fd : fds) raw.push_back(fd.get());

    frame_parser parser;
    parser.feed(bytes, std::move(fds));
    const auto result = parser.next();
    const frame& f = expect_frame(result);
    EXPECT_EQ(f.type, type);
    EXPECT_EQ(f.header.request_id, id);
    EXPECT_EQ(f.header.version, protocol_version);
    EXPECT_EQ(f.header.body_length, bytes.size() - header_bytes);
    EXPECT_TRUE(std::equal(f.body.begin(), f.body.end(), bytes.begin() + header_bytes,
                           bytes.end()));
    EXPECT_TRUE(same_message(f.msg, sent));
    ASSERT_EQ(f.fds.size(), raw.size());
    for (std::size_t i = 0; i < raw.size(); ++i) EXPECT_EQ(f.fds[i].get(), raw[i]);
    EXPECT_FALSE(parser.next().has_value());
    EXPECT_TRUE(parser.idle());
    EXPECT_EQ(parser.held_fds(), 0u);
  }
}

// All frames of the catalogue back to back, as one stream.
struct stream_fixture {
  std::vector<std::byte> bytes;
  std::vector<std::size_t> starts;  // offset of each frame
  std::vector<message> sent;
};

stream_fixture catalogue_stream(std::size_t repeats)
{
  stream_fixture s;
  for (std::size_t r = 0; r < repeats; ++r)
    for (const message_type type : all_message_types) {
      s.starts.push_back(s.bytes.size());
      s.sent.push_back(sample_message(type));
      const auto f = encode_frame(s.sent.size(), s.sent.back());
      s.bytes.insert(s.bytes.end(), f.begin(), f.end());
    }
  return s;
}

void expect_stream(frame_parser& parser, const stream_fixture& s, std::vector<frame>& got)
{
  while (auto r = parser.next()) got.push_back(std::move(std::get<frame>(*r)));
  ASSERT_EQ(got.size(), s.sent.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].header.request_id, i + 1);
    EXPECT_TRUE(same_message(got[i].msg, s.sent[i])) << i;
    EXPECT_EQ(got[i].fds.size(), sample_fd_count(type_of(s.sent[i])));
  }
}

TEST(Frame, ByteAtATimeWithDescriptorsOnTheFirstByte)
{
  const stream_fixture s = catalogue_stream(2);
  frame_parser parser{{.reads = stream_direction::any}};
  std::vector<frame> got;
  std::size_t frame_index = 0;
  for (std::size_t i = 0; i < s.bytes.size(); ++i) {
    std::vector<unique_fd> fds;
    if (frame_index < s.starts.size() && s.starts[frame_index] == i)
      fds = make_fds(sample_fd_count(type_of(s.sent[frame_index++])));
    parser.feed(std::span{s.bytes}.subspan(i, 1), std::move(fds));
    while (auto r = parser.next()) got.push_back(std::move(std::get<frame>(*r)));
  }
  expect_stream(parser, s, got);
  EXPECT_TRUE(parser.idle());
}

TEST(Frame, DescriptorsMayComeWithAnyPieceOfTheirFrame)
{
  // A receiver's read that takes the descriptors ends within their frame; where it starts does
  // not matter. Feed each frame in two pieces, the descriptors with the second.
  const stream_fixture s = catalogue_stream(1);
  frame_parser parser;
  std::vector<frame> got;
  for (std::size_t i = 0; i < s.starts.size(); ++i) {
    const std::size_t end = i + 1 < s.starts.size() ? s.starts[i + 1] : s.bytes.size();
    const std::size_t mid = s.starts[i] + 10;
    parser.feed(std::span{s.bytes}.subspan(s.starts[i], mid - s.starts[i]));
    parser.feed(std::span{s.bytes}.subspan(mid, end - mid),
                make_fds(sample_fd_count(type_of(s.sent[i]))));
  }
  expect_stream(parser, s, got);
}

TEST(Frame, TwoFramesInOneBuffer)
{
  const auto a = encode_frame(1, sample_message(message_type::cancel));
  const auto b = encode_frame(2, sample_message(message_type::submit));
  std::vector<std::byte> both = a;
  both.insert(both.end(), b.begin(), b.end());
  // The descriptors of one read belong to the frame holding its last byte: the SUBMIT.
  frame_parser parser;
  parser.feed(both, make_fds(2));
  const auto first = parser.next();
  EXPECT_EQ(expect_frame(first).type, message_type::cancel);
  EXPECT_TRUE(expect_frame(first).fds.empty());
  const auto second = parser.next();
  EXPECT_EQ(expect_frame(second).type, message_type::submit);
  EXPECT_EQ(expect_frame(second).fds.size(), 2u);
  EXPECT_FALSE(parser.next().has_value());
}

TEST(Frame, RandomPiecesOfALongStream)
{
  // Many frames in pieces of random size: exercises the buffer's compaction.
  const stream_fixture s = catalogue_stream(300);
  std::mt19937_64 rng{42};
  frame_parser parser;
  std::vector<frame> got;
  std::size_t pos = 0;
  std::size_t frame_index = 0;
  while (pos < s.bytes.size()) {
    const std::size_t n =
        std::min<std::size_t>(s.bytes.size() - pos, 1 + rng() % 3000);
    // Descriptors of every frame starting in this piece, except that one read can carry one
    // frame's only: cut the piece after the first frame that takes descriptors.
    std::size_t end = pos + n;
    std::vector<unique_fd> fds;
    while (frame_index < s.starts.size() && s.starts[frame_index] < end) {
      const std::size_t count = sample_fd_count(type_of(s.sent[frame_index]));
      ++frame_index;
      if (count > 0) {
        fds = make_fds(count);
        if (frame_index < s.starts.size()) end = std::min(end, s.starts[frame_index]);
        break;
      }
    }
    parser.feed(std::span{s.bytes}.subspan(pos, end - pos), std::move(fds));
    pos = end;
    while (auto r = parser.next()) got.push_back(std::move(std::get<frame>(*r)));
  }
  expect_stream(parser, s, got);
}

// ---- incomplete input ----------------------------------------------------------------------

TEST(Frame, TruncatedBodyStaysIncomplete)
{
  const auto bytes = encode_frame(5, sample_message(message_type::daemon_status_reply));
  frame_parser parser;
  parser.feed(std::span{bytes}.first(10));
  EXPECT_FALSE(parser.next().has_value());  // not even a header
  parser.feed(std::span{bytes}.subspan(10, bytes.size() - 11));
  EXPECT_FALSE(parser.next().has_value());  // header, body one byte short
  EXPECT_FALSE(parser.next().has_value());
  EXPECT_FALSE(parser.idle());
  EXPECT_FALSE(parser.failed());
  EXPECT_EQ(parser.buffered_bytes(), bytes.size() - 1);
  parser.feed(std::span{bytes}.last(1));
  EXPECT_EQ(expect_frame(parser.next()).type, message_type::daemon_status_reply);
  EXPECT_TRUE(parser.idle());
}

// ---- errors --------------------------------------------------------------------------------

TEST(FrameErrors, BadMagicIsFatalAndClosesHeldDescriptors)
{
  const std::size_t baseline = open_fd_count();
  auto bytes = encode_frame(3, sample_message(message_type::cancel));
  bytes[0] = std::byte{'X'};
  frame_parser parser;
  parser.feed(bytes, make_fds(3));
  EXPECT_EQ(parser.held_fds(), 3u);
  EXPECT_EQ(open_fd_count(), baseline + 3);
  const auto e = expect_error(parser.next(), parse_error_kind::bad_magic);
  EXPECT_TRUE(e.fatal());
  EXPECT_NE(e.message.find("0x52535058"), std::string::npos) << e.message;
  EXPECT_TRUE(parser.failed());
  EXPECT_EQ(parser.held_fds(), 0u);
  EXPECT_EQ(open_fd_count(), baseline);

  // A failed parser reads nothing more and closes what it is given.
  parser.feed(encode_frame(4, sample_message(message_type::cancel)), make_fds(1));
  EXPECT_FALSE(parser.next().has_value());
  EXPECT_EQ(open_fd_count(), baseline);
}

TEST(FrameErrors, HugeLengthIsRefusedFromTheHeaderAlone)
{
  for (const std::uint32_t length : {0xFFFFFFFFu, max_control_body + 1}) {
    frame_parser parser;
    parser.feed(raw_frame(header_for(message_type::submit, length, 77), {}), make_fds(1));
    const auto e = expect_error(parser.next(), parse_error_kind::body_too_long);
    EXPECT_TRUE(e.fatal());
    EXPECT_EQ(e.header.request_id, 77u);
    EXPECT_NE(e.message.find(std::to_string(length)), std::string::npos) << e.message;
    EXPECT_EQ(parser.held_fds(), 0u);
  }
  // The limit itself is fine.
  frame_parser parser;
  parser.feed(encode_frame(1, hello_with_body_size(max_control_body)));
  EXPECT_EQ(expect_frame(parser.next()).type, message_type::hello);

  // And a parser with a lower limit applies its own.
  frame_parser small{{.max_body = 16}};
  small.feed(encode_frame(1, hello_with_body_size(17)));
  expect_error(small.next(), parse_error_kind::body_too_long);
}

TEST(FrameErrors, ReservedBitsAreFatal)
{
  auto h = header_for(message_type::cancel, 0);
  h.reserved = 0x100;
  frame_parser parser;
  parser.feed(raw_frame(h, {}));
  const auto e = expect_error(parser.next(), parse_error_kind::reserved_not_zero);
  EXPECT_TRUE(e.fatal());
  EXPECT_TRUE(parser.failed());
}

TEST(FrameErrors, GarbageProtobufSkipsTheFrameOnly)
{
  const std::size_t baseline = open_fd_count();
  const std::vector<std::vector<std::byte>> garbage = {
      to_bytes({0x00}),                    // field number 0
      to_bytes({0x22, 0x10, 0x01}),        // length-delimited field cut short
      to_bytes({0x08, 0xFF, 0xFF, 0xFF}),  // varint cut short
      to_bytes({0x0F})};                   // wire type 7 does not exist
  for (const auto& body : garbage) {
    frame_parser parser;
    auto stream = raw_frame(header_for(message_type::submit, static_cast<std::uint32_t>(
                                                                 body.size()), 12),
                            body);
    const auto good = encode_frame(13, sample_message(message_type::cancel));
    const std::size_t first = stream.size();
    stream.insert(stream.end(), good.begin(), good.end());
    parser.feed(std::span{stream}.first(first), make_fds(2));
    parser.feed(std::span{stream}.subspan(first));
    const auto e = expect_error(parser.next(), parse_error_kind::bad_body);
    EXPECT_FALSE(e.fatal());
    EXPECT_EQ(e.header.request_id, 12u);
    EXPECT_NE(e.message.find("gpusort.wire.SubmitRequest"), std::string::npos) << e.message;
    EXPECT_EQ(open_fd_count(), baseline);  // the SUBMIT's descriptors are closed
    EXPECT_EQ(expect_frame(parser.next()).header.request_id, 13u);
    EXPECT_FALSE(parser.failed());
  }
}

TEST(FrameErrors, WrongDescriptorCount)
{
  const std::size_t baseline = open_fd_count();
  struct scenario {
    message_type type;
    std::size_t attached;
  };
  for (const scenario& sc : {scenario{message_type::submit, 0}, scenario{message_type::submit, 1},
                             scenario{message_type::submit, 3}, scenario{message_type::cancel, 1},
                             scenario{message_type::hello, 4},
                             scenario{message_type::allocate_reply, 0},
                             scenario{message_type::allocate_reply, 2}}) {
    SCOPED_TRACE(std::string{name_of(sc.type)} + " with " + std::to_string(sc.attached));
    frame_parser parser;
    parser.feed(encode_frame(21, sample_message(sc.type)), make_fds(sc.attached));
    const auto e = expect_error(parser.next(), parse_error_kind::fd_count_mismatch);
    EXPECT_FALSE(e.fatal());
    EXPECT_NE(e.message.find("carries " + std::to_string(sc.attached)), std::string::npos)
        << e.message;
    EXPECT_EQ(open_fd_count(), baseline);
    // The stream goes on.
    parser.feed(encode_frame(22, sample_message(message_type::cancel)));
    EXPECT_EQ(expect_frame(parser.next()).header.request_id, 22u);
  }
}

TEST(FrameErrors, UnknownMessageTypeSkipsTheFrame)
{
  frame_parser parser;
  const auto body = to_bytes({0x08, 0x01});
  parser.feed(raw_frame({.type = 0x0042, .body_length = 2, .request_id = 5}, body), make_fds(1));
  parser.feed(encode_frame(6, sample_message(message_type::cancel)));
  const auto e = expect_error(parser.next(), parse_error_kind::unknown_message_type);
  EXPECT_FALSE(e.fatal());
  EXPECT_NE(e.message.find("0x0042"), std::string::npos) << e.message;
  EXPECT_EQ(parser.held_fds(), 0u);
  EXPECT_EQ(expect_frame(parser.next()).header.request_id, 6u);
}

TEST(FrameErrors, DirectionIsChecked)
{
  frame_parser daemon{{.reads = stream_direction::requests}};
  daemon.feed(encode_frame(1, sample_message(message_type::hello_reply)));
  daemon.feed(encode_frame(2, sample_message(message_type::progress)));
  daemon.feed(encode_frame(3, sample_message(message_type::hello)));
  expect_error(daemon.next(), parse_error_kind::unexpected_message_type);
  expect_error(daemon.next(), parse_error_kind::unexpected_message_type);
  EXPECT_EQ(expect_frame(daemon.next()).type, message_type::hello);

  frame_parser client{{.reads = stream_direction::responses}};
  client.feed(encode_frame(1, sample_message(message_type::cancel)));
  client.feed(encode_frame(2, sample_message(message_type::error)));
  client.feed(encode_frame(3, sample_message(message_type::job_finished)));
  expect_error(client.next(), parse_error_kind::unexpected_message_type);
  EXPECT_EQ(expect_frame(client.next()).type, message_type::error);
  EXPECT_EQ(expect_frame(client.next()).type, message_type::job_finished);
}

TEST(FrameErrors, VersionsOutsideTheAcceptedRange)
{
  frame_parser parser;  // speaks 1 only
  parser.feed(encode_frame(1, sample_message(message_type::cancel), 2));
  parser.feed(encode_frame(2, sample_message(message_type::cancel), 0));
  parser.feed(encode_frame(3, sample_message(message_type::hello), 2));
  parser.feed(encode_frame(4, sample_message(message_type::cancel), 1));
  auto e = expect_error(parser.next(), parse_error_kind::unsupported_version);
  EXPECT_FALSE(e.fatal());
  EXPECT_NE(e.message.find("version 2"), std::string::npos) << e.message;
  expect_error(parser.next(), parse_error_kind::unsupported_version);
  expect_error(parser.next(), parse_error_kind::unsupported_version);  // HELLO says 1, always
  EXPECT_EQ(expect_frame(parser.next()).header.request_id, 4u);

  // After negotiating version 2 (a future one), HELLO, HELLO_REPLY and ERROR frames of version 1
  // are still read, other version-1 frames no longer.
  frame_parser later;
  later.accept_versions(2, 3);
  later.feed(encode_frame(1, sample_message(message_type::hello), 1));
  later.feed(encode_frame(2, sample_message(message_type::hello_reply), 1));
  later.feed(encode_frame(3, sample_message(message_type::error), 1));
  later.feed(encode_frame(4, sample_message(message_type::cancel), 1));
  later.feed(encode_frame(5, sample_message(message_type::cancel), 3));
  EXPECT_EQ(expect_frame(later.next()).type, message_type::hello);
  EXPECT_EQ(expect_frame(later.next()).type, message_type::hello_reply);
  EXPECT_EQ(expect_frame(later.next()).type, message_type::error);
  expect_error(later.next(), parse_error_kind::unsupported_version);
  EXPECT_EQ(expect_frame(later.next()).header.request_id, 5u);

  EXPECT_THROW(later.accept_versions(0, 1), logic_error);
  EXPECT_THROW(later.accept_versions(3, 2), logic_error);
}

TEST(FrameErrors, DescriptorsWithoutBytesAreACallerBug)
{
  const std::size_t baseline = open_fd_count();
  frame_parser parser;
  EXPECT_THROW(parser.feed({}, make_fds(1)), logic_error);
  EXPECT_EQ(open_fd_count(), baseline);
}

TEST(FrameErrors, DestroyingAParserClosesWhatItHolds)
{
  const std::size_t baseline = open_fd_count();
  {
    frame_parser parser;
    const auto bytes = encode_frame(1, sample_message(message_type::submit));
    parser.feed(std::span{bytes}.first(30), make_fds(2));
    EXPECT_FALSE(parser.next().has_value());
    EXPECT_EQ(parser.held_fds(), 2u);
    EXPECT_EQ(open_fd_count(), baseline + 2);
  }
  EXPECT_EQ(open_fd_count(), baseline);
}

// ---- error replies -------------------------------------------------------------------------

frame reply_to(const parse_error& e)
{
  frame_parser client{{.reads = stream_direction::responses}};
  client.feed(encode_error_reply(e));
  auto r = client.next();
  EXPECT_TRUE(r.has_value() && std::holds_alternative<frame>(*r));
  return std::move(std::get<frame>(*r));
}

wire::Status status_in(const frame& f)
{
  return std::visit(
      [](const auto& body) {
        if constexpr (requires { body.status(); })
          return body.status();
        else
          return wire::Status{};
      },
      f.msg);
}

TEST(FrameErrors, ErrorRepliesAnswerTheRequest)
{
  {  // garbage SUBMIT: a SUBMIT_REPLY with PROTOCOL_ERROR and the request's id
    frame_parser daemon{{.reads = stream_direction::requests}};
    daemon.feed(raw_frame(header_for(message_type::submit, 1, 31), to_bytes({0x00})));
    const auto e = expect_error(daemon.next(), parse_error_kind::bad_body);
    const frame r = reply_to(e);
    EXPECT_EQ(r.type, message_type::submit_reply);
    EXPECT_EQ(r.header.request_id, 31u);
    EXPECT_EQ(status_in(r).code(), wire::PROTOCOL_ERROR);
    EXPECT_EQ(status_in(r).message(), e.message);
  }
  {  // wrong descriptor count: BAD_FD
    frame_parser daemon{{.reads = stream_direction::requests}};
    daemon.feed(encode_frame(32, sample_message(message_type::submit)), make_fds(1));
    const frame r = reply_to(expect_error(daemon.next(), parse_error_kind::fd_count_mismatch));
    EXPECT_EQ(r.type, message_type::submit_reply);
    EXPECT_EQ(status_in(r).code(), wire::BAD_FD);
  }
  {  // huge SUBMIT: TOO_LARGE
    frame_parser daemon{{.reads = stream_direction::requests}};
    daemon.feed(raw_frame(header_for(message_type::submit, 1u << 30, 33), {}));
    const frame r = reply_to(expect_error(daemon.next(), parse_error_kind::body_too_long));
    EXPECT_EQ(r.type, message_type::submit_reply);
    EXPECT_EQ(r.header.request_id, 33u);
    EXPECT_EQ(status_in(r).code(), wire::TOO_LARGE);
  }
  {  // unknown type: ERROR with the request's id
    frame_parser daemon{{.reads = stream_direction::requests}};
    daemon.feed(raw_frame({.type = 0x0033, .body_length = 0, .request_id = 34}, {}));
    const frame r = reply_to(expect_error(daemon.next(), parse_error_kind::unknown_message_type));
    EXPECT_EQ(r.type, message_type::error);
    EXPECT_EQ(r.header.request_id, 34u);
    EXPECT_EQ(status_in(r).code(), wire::PROTOCOL_ERROR);
  }
  {  // another version: ERROR, UNSUPPORTED_VERSION
    frame_parser daemon{{.reads = stream_direction::requests}};
    daemon.feed(encode_frame(35, sample_message(message_type::cancel), 9));
    const frame r = reply_to(expect_error(daemon.next(), parse_error_kind::unsupported_version));
    EXPECT_EQ(r.type, message_type::error);
    EXPECT_EQ(r.header.request_id, 35u);
    EXPECT_EQ(r.header.version, hello_version);
    EXPECT_EQ(status_in(r).code(), wire::UNSUPPORTED_VERSION);
  }
  {  // not our protocol at all: ERROR with request id 0
    frame_parser daemon{{.reads = stream_direction::requests}};
    const std::string http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    daemon.feed(std::as_bytes(std::span{http}));
    const frame r = reply_to(expect_error(daemon.next(), parse_error_kind::bad_magic));
    EXPECT_EQ(r.type, message_type::error);
    EXPECT_EQ(r.header.request_id, 0u);
    EXPECT_EQ(status_in(r).code(), wire::PROTOCOL_ERROR);
  }
}

TEST(FrameErrors, StatusOfEachKind)
{
  EXPECT_EQ(status_of(parse_error_kind::bad_magic), wire::PROTOCOL_ERROR);
  EXPECT_EQ(status_of(parse_error_kind::reserved_not_zero), wire::PROTOCOL_ERROR);
  EXPECT_EQ(status_of(parse_error_kind::body_too_long), wire::TOO_LARGE);
  EXPECT_EQ(status_of(parse_error_kind::unsupported_version), wire::UNSUPPORTED_VERSION);
  EXPECT_EQ(status_of(parse_error_kind::unknown_message_type), wire::PROTOCOL_ERROR);
  EXPECT_EQ(status_of(parse_error_kind::unexpected_message_type), wire::PROTOCOL_ERROR);
  EXPECT_EQ(status_of(parse_error_kind::bad_body), wire::PROTOCOL_ERROR);
  EXPECT_EQ(status_of(parse_error_kind::fd_count_mismatch), wire::BAD_FD);
}

}  // namespace
}  // namespace gpusort::proto
