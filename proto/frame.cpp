#include "proto/frame.hpp"

#include "core/checks.hpp"

#include <gpusort/error.hpp>

#include <algorithm>
#include <cstdio>
#include <utility>

namespace gpusort::proto {

namespace {

template <typename T>
void put_le(std::byte* out, T value) noexcept
{
  for (std::size_t i = 0; i < sizeof(T); ++i)
    out[i] = static_cast<std::byte>((static_cast<std::uint64_t>(value) >> (8 * i)) & 0xFFu);
}

template <typename T>
T get_le(const std::byte* in) noexcept
{
  std::uint64_t value = 0;
  for (std::size_t i = 0; i < sizeof(T); ++i)
    value |= static_cast<std::uint64_t>(in[i]) << (8 * i);
  return static_cast<T>(value);
}

std::string hex(std::uint64_t value, int digits)
{
  char text[24];
  std::snprintf(text, sizeof text, "0x%0*llx", digits, static_cast<unsigned long long>(value));
  return text;
}

std::string describe(const frame_header& header)
{
  const auto type = to_message_type(header.type);
  return (type ? std::string{name_of(*type)} : "type " + hex(header.type, 4)) + " frame (request " +
         std::to_string(header.request_id) + ")";
}

bool frozen_version_type(message_type type) noexcept
{
  return type == message_type::hello || type == message_type::hello_reply ||
         type == message_type::error;
}

}  // namespace

std::array<std::byte, header_bytes> encode_header(const frame_header& header) noexcept
{
  std::array<std::byte, header_bytes> out{};
  put_le(out.data() + 0, header.magic);
  put_le(out.data() + 4, header.version);
  put_le(out.data() + 6, header.type);
  put_le(out.data() + 8, header.body_length);
  put_le(out.data() + 12, header.reserved);
  put_le(out.data() + 16, header.request_id);
  return out;
}

frame_header decode_header(std::span<const std::byte, header_bytes> bytes) noexcept
{
  return frame_header{.magic = get_le<std::uint32_t>(bytes.data() + 0),
                      .version = get_le<std::uint16_t>(bytes.data() + 4),
                      .type = get_le<std::uint16_t>(bytes.data() + 6),
                      .body_length = get_le<std::uint32_t>(bytes.data() + 8),
                      .reserved = get_le<std::uint32_t>(bytes.data() + 12),
                      .request_id = get_le<std::uint64_t>(bytes.data() + 16)};
}

std::vector<std::byte> encode_frame(message_type type, std::uint64_t request_id,
                                    const google::protobuf::MessageLite& body,
                                    std::uint16_t version)
{
  const std::size_t body_bytes = body.ByteSizeLong();
  if (body_bytes > max_control_body)
    throw invalid_argument{std::string{name_of(type)} + " body of " + std::to_string(body_bytes) +
                           " bytes is over the limit of " + std::to_string(max_control_body) +
                           " bytes of a control message"};
  std::vector<std::byte> out(header_bytes + body_bytes);
  const auto header = encode_header({.version = version,
                                     .type = static_cast<std::uint16_t>(type),
                                     .body_length = static_cast<std::uint32_t>(body_bytes),
                                     .request_id = request_id});
  std::copy(header.begin(), header.end(), out.begin());
  // body_bytes <= 64 KiB, so the int size protobuf's API takes cannot overflow.
  if (!body.SerializeToArray(out.data() + header_bytes, static_cast<int>(body_bytes)))
    throw logic_error{"protobuf failed to serialize a " + body.GetTypeName()};
  return out;
}

std::vector<std::byte> encode_frame(std::uint64_t request_id, const message& body,
                                    std::uint16_t version)
{
  return encode_frame(type_of(body), request_id, as_protobuf(body), version);
}

std::string_view name_of(parse_error_kind kind) noexcept
{
  switch (kind) {
    case parse_error_kind::bad_magic: return "bad magic";
    case parse_error_kind::reserved_not_zero: return "reserved field not zero";
    case parse_error_kind::body_too_long: return "body too long";
    case parse_error_kind::unsupported_version: return "unsupported version";
    case parse_error_kind::unknown_message_type: return "unknown message type";
    case parse_error_kind::unexpected_message_type: return "unexpected message type";
    case parse_error_kind::bad_body: return "bad body";
    case parse_error_kind::fd_count_mismatch: return "descriptor count mismatch";
  }
  return "?";
}

bool is_fatal(parse_error_kind kind) noexcept
{
  return kind == parse_error_kind::bad_magic || kind == parse_error_kind::reserved_not_zero ||
         kind == parse_error_kind::body_too_long;
}

wire::StatusCode status_of(parse_error_kind kind) noexcept
{
  switch (kind) {
    case parse_error_kind::body_too_long: return wire::TOO_LARGE;
    case parse_error_kind::unsupported_version: return wire::UNSUPPORTED_VERSION;
    case parse_error_kind::fd_count_mismatch: return wire::BAD_FD;
    case parse_error_kind::bad_magic:
    case parse_error_kind::reserved_not_zero:
    case parse_error_kind::unknown_message_type:
    case parse_error_kind::unexpected_message_type:
    case parse_error_kind::bad_body: return wire::PROTOCOL_ERROR;
  }
  return wire::INTERNAL;
}

std::vector<std::byte> encode_error_reply(const parse_error& error, std::uint16_t version)
{
  std::optional<message_type> request;
  std::uint64_t request_id = 0;
  if (error.kind != parse_error_kind::bad_magic) {
    request_id = error.header.request_id;
    // A frame of another version may number its types differently: answer with ERROR.
    if (error.kind != parse_error_kind::unsupported_version)
      request = to_message_type(error.header.type);
  }
  const message reply = make_error_reply(request, status_of(error.kind), error.message);
  return encode_frame(request_id, reply,
                      type_of(reply) == message_type::error ? hello_version : version);
}

// ---- frame_parser --------------------------------------------------------------------------

frame_parser::frame_parser(parser_options options) : options_{options}
{
  accept_versions(options.min_version, options.max_version);
}

void frame_parser::accept_versions(std::uint16_t min_version, std::uint16_t max_version)
{
  GPUSORT_EXPECTS(min_version >= 1 && min_version <= max_version, "bad version range");
  options_.min_version = min_version;
  options_.max_version = max_version;
}

std::size_t frame_parser::held_fds() const noexcept
{
  std::size_t n = 0;
  for (const fd_group& group : fd_groups_) n += group.fds.size();
  return n;
}

void frame_parser::feed(std::span<const std::byte> bytes, std::vector<unique_fd> fds)
{
  GPUSORT_EXPECTS(!bytes.empty() || fds.empty(), "descriptors arrive with at least one byte");
  if (failed_ || bytes.empty()) return;  // a failed parser's descriptors close here
  // Drop what next() consumed: all of it when nothing is pending, else once it is the larger
  // part, so that copying stays linear in the bytes fed.
  if (pos_ == buf_.size()) {
    base_ += pos_;
    buf_.clear();
    pos_ = 0;
  } else if (pos_ >= 4096 && pos_ * 2 >= buf_.size()) {
    buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(pos_));
    base_ += pos_;
    pos_ = 0;
  }
  buf_.insert(buf_.end(), bytes.begin(), bytes.end());
  if (!fds.empty()) fd_groups_.push_back({base_ + buf_.size() - 1, std::move(fds)});
}

parse_result frame_parser::fail(parse_error_kind kind, const frame_header& header,
                                std::string text)
{
  failed_ = true;
  fd_groups_.clear();
  buf_.clear();
  pos_ = 0;
  return parse_error{kind, header, std::move(text)};
}

std::vector<unique_fd> frame_parser::take_fds(std::uint64_t frame_end)
{
  // Groups are in stream order and every earlier frame took its own, so the groups whose last
  // byte lies before frame_end are this frame's.
  std::vector<unique_fd> fds;
  auto it = fd_groups_.begin();
  for (; it != fd_groups_.end() && it->last_byte < frame_end; ++it)
    for (unique_fd& fd : it->fds) fds.push_back(std::move(fd));
  fd_groups_.erase(fd_groups_.begin(), it);
  return fds;
}

std::optional<parse_error> frame_parser::check_header(const frame_header& header) const
{
  const std::optional<message_type> type = to_message_type(header.type);
  const bool frozen = type && frozen_version_type(*type) && header.version == hello_version;
  if (!frozen && (header.version < options_.min_version || header.version > options_.max_version))
    return parse_error{parse_error_kind::unsupported_version, header,
                       describe(header) + " has protocol version " +
                           std::to_string(header.version) + "; accepted: " +
                           std::to_string(options_.min_version) + " to " +
                           std::to_string(options_.max_version)};
  if (!type)
    return parse_error{parse_error_kind::unknown_message_type, header,
                       "unknown message type " + hex(header.type, 4) + " (request " +
                           std::to_string(header.request_id) + ")"};
  const message_class cls = class_of(*type);
  if (options_.reads == stream_direction::requests && cls != message_class::request)
    return parse_error{parse_error_kind::unexpected_message_type, header,
                       describe(header) + " is not a request; the daemon reads requests only"};
  if (options_.reads == stream_direction::responses && cls == message_class::request)
    return parse_error{parse_error_kind::unexpected_message_type, header,
                       describe(header) + " is a request; a client reads replies and events only"};
  return std::nullopt;
}

std::optional<parse_result> frame_parser::next()
{
  if (failed_ || buffered_bytes() < header_bytes) return std::nullopt;
  const std::byte* start = buf_.data() + pos_;
  const frame_header header = decode_header(std::span<const std::byte, header_bytes>{start,
                                                                                    header_bytes});
  // A header that is not ours, or a length we refuse to wait for, leaves no way to find the next
  // frame: the stream is over.
  if (header.magic != frame_magic)
    return fail(parse_error_kind::bad_magic, header,
                "bad magic " + hex(header.magic, 8) + " (expected " + hex(frame_magic, 8) +
                    ", the bytes \"GPSR\")");
  if (header.reserved != 0)
    return fail(parse_error_kind::reserved_not_zero, header,
                describe(header) + " has reserved field " + hex(header.reserved, 8) +
                    "; it must be 0");
  if (header.body_length > options_.max_body)
    return fail(parse_error_kind::body_too_long, header,
                describe(header) + " announces a body of " + std::to_string(header.body_length) +
                    " bytes; the limit is " + std::to_string(options_.max_body));

  const std::size_t total = header_bytes + header.body_length;
  if (buffered_bytes() < total) return std::nullopt;
  const std::uint64_t frame_end = base_ + pos_ + total;
  std::vector<unique_fd> fds = take_fds(frame_end);
  const std::span<const std::byte> body{start + header_bytes, header.body_length};
  pos_ += total;

  // From here on the frame is skipped on error; its descriptors close with `fds`.
  if (auto error = check_header(header)) return std::move(*error);
  const message_type type = *to_message_type(header.type);
  message msg = make_message(type);
  google::protobuf::MessageLite& decoded = as_protobuf(msg);
  if (!decoded.ParseFromArray(body.data(), static_cast<int>(body.size())))
    return parse_error{parse_error_kind::bad_body, header,
                       describe(header) + ": the " + std::to_string(body.size()) +
                           "-byte body is not a valid " + decoded.GetTypeName()};
  if (auto problem = check_fd_count(msg, fds.size()))
    return parse_error{parse_error_kind::fd_count_mismatch, header,
                       describe(header) + ": " + *problem};
  return frame{header, type, std::vector<std::byte>(body.begin(), body.end()), std::move(fds),
               std::move(msg)};
}

}  // namespace gpusort::proto
