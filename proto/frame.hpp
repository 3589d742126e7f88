// Framing: a fixed 24-byte little-endian header, then a protobuf body.
//
//   offset 0  u32 magic        0x52535047, the bytes 'G' 'P' 'S' 'R'
//          4  u16 version      protocol version of the body
//          6  u16 type         message_type
//          8  u32 body_length  bytes after the header, at most max_control_body
//         12  u32 reserved     0
//         16  u64 request_id   chosen by the client, echoed by replies and job events
//
// frame_parser turns bytes and received descriptors into frames; it never touches a socket, so
// the daemon, the client and the tests drive it the same way. proto/README.md has the rules.
#pragma once

#include "proto/messages.hpp"
#include "proto/unique_fd.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

namespace gpusort::proto {

inline constexpr std::uint32_t frame_magic = 0x52535047;  // "GPSR" read as little-endian u32
inline constexpr std::size_t header_bytes = 24;
/// Largest body of a control message; bulk data travels as descriptors, never in the stream.
inline constexpr std::uint32_t max_control_body = 64 * 1024;

struct frame_header {
  std::uint32_t magic{frame_magic};
  std::uint16_t version{protocol_version};
  std::uint16_t type{};  ///< raw: a frame may carry a type this build does not know
  std::uint32_t body_length{};
  std::uint32_t reserved{};
  std::uint64_t request_id{};
  friend bool operator==(const frame_header&, const frame_header&) = default;
};

/// The header's 24 bytes, little-endian whatever the host's byte order.
std::array<std::byte, header_bytes> encode_header(const frame_header& header) noexcept;
/// Reads the fields without judging them.
frame_header decode_header(std::span<const std::byte, header_bytes> bytes) noexcept;

/// A whole frame: header plus the serialized body. Throws invalid_argument when the body is
/// larger than max_control_body.
std::vector<std::byte> encode_frame(message_type type, std::uint64_t request_id,
                                    const google::protobuf::MessageLite& body,
                                    std::uint16_t version = protocol_version);

template <typename M>
std::vector<std::byte> encode_frame(std::uint64_t request_id, const M& body,
                                    std::uint16_t version = protocol_version)
{
  return encode_frame(type_of_v<M>, request_id, body, version);
}

std::vector<std::byte> encode_frame(std::uint64_t request_id, const message& body,
                                    std::uint16_t version = protocol_version);

// ---- parsing -------------------------------------------------------------------------------

enum class parse_error_kind : std::uint8_t {
  // Fatal: the stream cannot be read any further; answer (encode_error_reply) and close.
  bad_magic,
  reserved_not_zero,
  body_too_long,
  // The frame is skipped (its descriptors closed) and the parser reads on.
  unsupported_version,
  unknown_message_type,
  unexpected_message_type,  ///< a reply or event sent to the daemon, or a request to a client
  bad_body,                 ///< the body is not a valid protobuf of the header's type
  fd_count_mismatch,        ///< more or fewer descriptors than the message takes
};

std::string_view name_of(parse_error_kind kind) noexcept;
bool is_fatal(parse_error_kind kind) noexcept;
/// The status a reply to such a frame carries.
wire::StatusCode status_of(parse_error_kind kind) noexcept;

struct parse_error {
  parse_error_kind kind{};
  frame_header header;  ///< of the offending frame, as read (garbage after bad_magic)
  std::string message;  ///< one line: what was wrong and the values seen
  [[nodiscard]] bool fatal() const noexcept { return is_fatal(kind); }
};

/// The frame a daemon sends back for a parse error: the reply type of the offending request
/// with the error's status, or an ERROR frame when the type is not a known request. The request
/// id is the frame's, 0 after bad_magic (the header is not ours).
std::vector<std::byte> encode_error_reply(const parse_error& error,
                                          std::uint16_t version = protocol_version);

struct frame {
  frame_header header;
  message_type type{};           ///< header.type, known to this build
  std::vector<std::byte> body;   ///< as received
  std::vector<unique_fd> fds;    ///< as many as the message takes, in the order sent
  message msg;                   ///< the decoded body (the alternative of `type`)
};

using parse_result = std::variant<frame, parse_error>;

/// Which message classes a parser accepts: the daemon reads requests, a client replies and
/// events.
enum class stream_direction : std::uint8_t { requests, responses, any };

struct parser_options {
  stream_direction reads{stream_direction::any};
  std::uint16_t min_version{min_protocol_version};
  std::uint16_t max_version{protocol_version};
  std::uint32_t max_body{max_control_body};
};

/// Incremental frame parser: feed() what recvmsg returned (bytes and the descriptors that came
/// with them), then call next() until it returns nullopt.
///
/// The descriptors of one feed() belong to the frame that holds the last byte of that feed:
/// the kernel hands a frame's descriptors out with the read that takes the frame's first bytes
/// and ends that read within the frame, provided the sender sent the descriptors with the
/// frame's first byte and no byte of another frame (send_frame does).
///
/// Descriptors are closed when their frame is rejected, when a fatal error stops the parser, and
/// when the parser is destroyed; a frame returned owns its own.
class frame_parser {
 public:
  explicit frame_parser(parser_options options = {});

  /// Appends bytes (and the descriptors received with them; they need bytes). After a fatal
  /// error the bytes are dropped and the descriptors closed.
  void feed(std::span<const std::byte> bytes, std::vector<unique_fd> fds = {});

  /// The next complete frame or error; nullopt when more bytes are needed or after a fatal error
  /// was returned.
  std::optional<parse_result> next();

  /// Restricts the versions accepted after the HELLO exchange (HELLO, HELLO_REPLY and ERROR
  /// frames of hello_version stay accepted).
  void accept_versions(std::uint16_t min_version, std::uint16_t max_version);

  [[nodiscard]] bool failed() const noexcept { return failed_; }
  /// No partial frame buffered: the peer may close the stream here without losing anything.
  [[nodiscard]] bool idle() const noexcept { return buffered_bytes() == 0; }
  [[nodiscard]] std::size_t buffered_bytes() const noexcept { return buf_.size() - pos_; }
  /// Descriptors received and not yet handed out with a frame.
  [[nodiscard]] std::size_t held_fds() const noexcept;

 private:
  struct fd_group {
    std::uint64_t last_byte{};  ///< stream offset of the last byte fed with these descriptors
    std::vector<unique_fd> fds;
  };

  parse_result fail(parse_error_kind kind, const frame_header& header, std::string text);
  std::optional<parse_error> check_header(const frame_header& header) const;
  std::vector<unique_fd> take_fds(std::uint64_t frame_end);

  parser_options options_;
  std::vector<std::byte> buf_;
  std::size_t pos_{};      ///< read position in buf_
  std::uint64_t base_{};   ///< stream offset of buf_[0]
  std::vector<fd_group> fd_groups_;
  bool failed_{};
};

}  // namespace gpusort::proto
