// Fuzzes frame_parser (proto/frame.cpp): arbitrary bytes as a stream, fed in pieces with
// descriptors, the way recvmsg hands them over. Input: byte 0 picks the direction the parser
// reads (requests, responses, any) and how many descriptors come with each piece (0..4);
// byte 1 the piece size (0: the whole stream at once); the rest is the stream.
//
// Contracts checked (proto/frame.hpp, proto/README.md), beyond "no crash, no undefined
// behaviour":
// - decode_header and encode_header are inverse on any 24 bytes;
// - a frame returned has our magic, reserved 0, a body of body_length <= max_body bytes, a known
//   type of the class the parser reads, a message of that type, and exactly the descriptors its
//   message takes (check_fd_count); re-encoded, it parses back to the same message;
// - an error is fatal exactly for bad magic, reserved not zero and body too long; after one,
//   next() gives nothing more and failed() holds; after any other the parser reads on;
// - encode_error_reply answers every error with a frame a client parser reads, carrying
//   status_of(kind);
// - the parser waits only for one incomplete frame: when next() says "need more", fewer than
//   header + body_length bytes are buffered;
// - no descriptor leaks: those of rejected frames, of a failed parser and of the parser's
//   destruction are closed (the lowest free descriptor number is the same before and after).
#include "proto/frame.hpp"
#include "proto/messages.hpp"

#include <google/protobuf/stubs/logging.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>

namespace {

namespace proto = gpusort::proto;
namespace wire = gpusort::wire;

[[noreturn]] void broken(const std::string& what)
{
  std::fprintf(stderr, "frame parser contract broken: %s\n", what.c_str());
  std::abort();
}

int lowest_free_fd()
{
  const int fd = ::dup(0);
  ::close(fd);
  return fd;
}

bool readable_by(proto::stream_direction reads, proto::message_class cls)
{
  switch (reads) {
    case proto::stream_direction::requests: return cls == proto::message_class::request;
    case proto::stream_direction::responses: return cls != proto::message_class::request;
    case proto::stream_direction::any: return true;
  }
  return false;
}

wire::StatusCode status_in(const proto::message& reply)
{
  return std::visit(
      [](const auto& m) -> wire::StatusCode {
        using M = std::decay_t<decltype(m)>;
        if constexpr (requires { m.status(); }) {
          return m.status().code();
        } else {
          broken(std::string{"error reply of a type without a status: "} +
                 M::descriptor()->name());
        }
      },
      reply);
}

void check_frame(const proto::frame& f, const proto::parser_options& options)
{
  const proto::frame_header& h = f.header;
  if (h.magic != proto::frame_magic || h.reserved != 0) broken("frame with a bad header");
  if (h.body_length > options.max_body || f.body.size() != h.body_length)
    broken("frame body does not match its header");
  if (proto::to_message_type(h.type) != f.type || proto::type_of(f.msg) != f.type)
    broken("frame type, header type and message disagree");
  if (!readable_by(options.reads, proto::class_of(f.type)))
    broken("frame of a class the parser does not read");
  if (proto::check_fd_count(f.msg, f.fds.size())) broken("frame with the wrong descriptors");
  for (const proto::unique_fd& fd : f.fds)
    if (!fd) broken("frame with an empty descriptor");

  // Re-encoded and parsed again (with as many descriptors), the message is the same.
  const std::vector<std::byte> bytes = proto::encode_frame(h.request_id, f.msg, h.version);
  proto::frame_parser again{options};
  std::vector<proto::unique_fd> fds;
  for (std::size_t i = 0; i < f.fds.size(); ++i)
    fds.emplace_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  again.feed(bytes, std::move(fds));
  auto result = again.next();
  if (!result || !std::holds_alternative<proto::frame>(*result))
    broken("a re-encoded frame does not parse");
  // The body may come out shorter (protobuf drops fields set to their defaults), so the
  // header is compared without its body_length.
  const auto& g = std::get<proto::frame>(*result);
  proto::frame_header expected = h;
  expected.body_length = static_cast<std::uint32_t>(bytes.size() - proto::header_bytes);
  if (g.header != expected || proto::as_protobuf(g.msg).SerializeAsString() !=
                                  proto::as_protobuf(f.msg).SerializeAsString())
    broken("a re-encoded frame parses to another frame");
}

void check_error(const proto::parse_error& e, bool failed)
{
  if (e.fatal() != failed) broken("failed() does not match the error's fatality");
  if (e.fatal() != (e.kind == proto::parse_error_kind::bad_magic ||
                    e.kind == proto::parse_error_kind::reserved_not_zero ||
                    e.kind == proto::parse_error_kind::body_too_long))
    broken("fatal for the wrong kinds");
  if (e.message.empty() || e.message.find('\n') != std::string::npos)
    broken("an error's message is not one line");

  const std::vector<std::byte> reply = proto::encode_error_reply(e);
  proto::frame_parser client{{.reads = proto::stream_direction::responses}};
  client.feed(reply);
  auto result = client.next();
  if (!result || !std::holds_alternative<proto::frame>(*result))
    broken("encode_error_reply wrote a frame a client cannot read");
  const auto& f = std::get<proto::frame>(*result);
  if (status_in(f.msg) != proto::status_of(e.kind)) broken("error reply with the wrong status");
  if (f.header.request_id !=
      (e.kind == proto::parse_error_kind::bad_magic ? 0 : e.header.request_id))
    broken("error reply with the wrong request id");
}

void drain(proto::frame_parser& parser, const proto::parser_options& options)
{
  while (auto result = parser.next()) {
    if (const auto* f = std::get_if<proto::frame>(&*result)) {
      check_frame(*f, options);
    } else {
      check_error(std::get<proto::parse_error>(*result), parser.failed());
    }
  }
  if (parser.failed()) {
    if (parser.buffered_bytes() != 0 || parser.held_fds() != 0)
      broken("a failed parser keeps bytes or descriptors");
    return;
  }
  // Waiting for more: only ever for the one frame at the read position.
  const std::size_t buffered = parser.buffered_bytes();
  if (buffered >= proto::header_bytes + options.max_body)
    broken("the parser waits with a whole frame's bytes buffered");
}

}  // namespace

// protobuf logs every string field of invalid UTF-8 it rejects; at thousands of inputs a second
// that would bury libFuzzer's own output.
extern "C" int LLVMFuzzerInitialize(int*, char***)
{
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size)
{
  if (size < 2) return 0;
  const proto::parser_options options{.reads = static_cast<proto::stream_direction>(data[0] % 3)};
  const std::size_t fds_per_piece = (data[0] >> 2) % 5;
  const std::size_t piece = data[1] == 0 ? size : data[1];
  const std::span<const std::byte> stream{reinterpret_cast<const std::byte*>(data + 2), size - 2};

  if (stream.size() >= proto::header_bytes) {
    const auto header = proto::decode_header(stream.first<proto::header_bytes>());
    const auto encoded = proto::encode_header(header);
    if (!std::equal(encoded.begin(), encoded.end(), stream.begin()))
      broken("encode_header(decode_header(b)) != b");
  }

  const int free_before = lowest_free_fd();
  {
    proto::frame_parser parser{options};
    for (std::size_t at = 0; at < stream.size(); at += piece) {
      const auto bytes = stream.subspan(at, std::min(piece, stream.size() - at));
      std::vector<proto::unique_fd> fds;
      for (std::size_t i = 0; i < fds_per_piece; ++i)
        fds.emplace_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
      parser.feed(bytes, std::move(fds));
      drain(parser, options);
    }
  }
  if (lowest_free_fd() != free_before) broken("a descriptor leaked");
  return 0;
}
