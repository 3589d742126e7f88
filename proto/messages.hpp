// The message catalogue of the wire protocol: the frame header's message types, the protobuf
// message each one carries, how many descriptors travel with it, and conversions to the types
// of the public API. No I/O here.
#pragma once

#include "proto/gpusort.pb.h"

#include <gpusort/types.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace gpusort::proto {

/// Highest protocol version this build speaks, and the lowest.
inline constexpr std::uint16_t protocol_version = 1;
inline constexpr std::uint16_t min_protocol_version = 1;

/// HELLO, HELLO_REPLY and ERROR frames always travel with this header version, so that peers of
/// any version can read them (proto/README.md, "Version negotiation").
inline constexpr std::uint16_t hello_version = 1;

/// Most descriptors one frame may carry (a SUBMIT: keys, values, keys_out, values_out).
inline constexpr std::size_t max_fds_per_frame = 4;

/// The header's message type; values as in gpusort.proto's enum MessageType.
enum class message_type : std::uint16_t {
  hello = 0x0001,
  allocate = 0x0002,
  release = 0x0003,
  submit = 0x0004,
  cancel = 0x0005,
  job_status = 0x0006,
  daemon_status = 0x0007,

  error = 0x8000,
  hello_reply = 0x8001,
  allocate_reply = 0x8002,
  release_reply = 0x8003,
  submit_reply = 0x8004,
  cancel_reply = 0x8005,
  job_status_reply = 0x8006,
  daemon_status_reply = 0x8007,

  progress = 0xC001,
  job_finished = 0xC002,
};

enum class message_class : std::uint8_t { request, reply, event };

/// One decoded body; the alternative is fixed by the message type (same order as
/// all_message_types).
using message = std::variant<wire::HelloRequest, wire::AllocateRequest, wire::ReleaseRequest,
                             wire::SubmitRequest, wire::CancelRequest, wire::JobStatusRequest,
                             wire::DaemonStatusRequest, wire::ErrorReply, wire::HelloReply,
                             wire::AllocateReply, wire::ReleaseReply, wire::SubmitReply,
                             wire::CancelReply, wire::JobStatusReply, wire::DaemonStatusReply,
                             wire::ProgressEvent, wire::JobFinishedEvent>;

inline constexpr message_type all_message_types[] = {
    message_type::hello,          message_type::allocate,       message_type::release,
    message_type::submit,         message_type::cancel,         message_type::job_status,
    message_type::daemon_status,  message_type::error,          message_type::hello_reply,
    message_type::allocate_reply, message_type::release_reply,  message_type::submit_reply,
    message_type::cancel_reply,   message_type::job_status_reply,
    message_type::daemon_status_reply,
    message_type::progress,       message_type::job_finished};

static_assert(std::size(all_message_types) == std::variant_size_v<message>);

namespace detail {
template <typename M, typename V>
struct variant_index;
template <typename M, typename... Ts>
struct variant_index<M, std::variant<Ts...>> {
  static constexpr std::size_t value = [] {
    constexpr bool same[] = {std::is_same_v<M, Ts>...};
    std::size_t i = 0;
    while (i < sizeof...(Ts) && !same[i]) ++i;
    return i;
  }();
  static_assert(value < sizeof...(Ts), "not a message of the wire protocol");
};
}  // namespace detail

/// The message type of a protobuf message class, e.g. type_of_v<wire::HelloRequest>.
template <typename M>
inline constexpr message_type type_of_v =
    all_message_types[detail::variant_index<M, message>::value];

/// The message type of a raw header value; nullopt for a value no message has.
std::optional<message_type> to_message_type(std::uint16_t raw) noexcept;

message_class class_of(message_type type) noexcept;
message_type type_of(const message& m) noexcept;

/// "HELLO", "SUBMIT_REPLY", ... as in gpusort.proto without the MESSAGE_TYPE_ prefix.
std::string_view name_of(message_type type) noexcept;

/// The reply type that answers a request type; nullopt for replies and events.
std::optional<message_type> reply_type_of(message_type request) noexcept;

/// An empty message of the given type.
message make_message(message_type type);

const google::protobuf::MessageLite& as_protobuf(const message& m) noexcept;
google::protobuf::MessageLite& as_protobuf(message& m) noexcept;

/// The reply of the type that answers `request` (ErrorReply when `request` is not a known
/// request type) with the status set and every other field empty.
message make_error_reply(std::optional<message_type> request, wire::StatusCode code,
                         std::string text);

wire::Status make_status(wire::StatusCode code, std::string text = {});

/// "OK", "BAD_REQUEST", ... as in gpusort.proto.
std::string_view name_of(wire::StatusCode code) noexcept;

// ---- descriptors ---------------------------------------------------------------------------

/// Distinct attached_fd indices a SUBMIT references, ascending.
std::vector<std::uint32_t> referenced_fds(const wire::SubmitRequest& request);

/// The number of descriptors a frame carrying `m` must have: SUBMIT the distinct attached_fd
/// indices it references, ALLOCATE_REPLY 1 when its status is OK, every other message 0.
std::size_t expected_fd_count(const message& m);

/// Why `attached` descriptors do not fit `m` (a SUBMIT's indices must be exactly 0..n-1 with
/// n == attached); nullopt when they do.
std::optional<std::string> check_fd_count(const message& m, std::size_t attached);

// ---- jobs ----------------------------------------------------------------------------------

/// Structural problems of a SUBMIT that need no knowledge of buffers or descriptors: dtype set,
/// value_bytes 0, 4 or 8, each DataRef present exactly when the job needs it and naming a
/// source, offsets multiples of the element size, count * element size within 64 bits.
/// nullopt when none; the daemon answers BAD_REQUEST with the text otherwise.
std::optional<std::string> check_submit(const wire::SubmitRequest& request);

std::optional<dtype> from_wire(wire::DType type) noexcept;
wire::DType to_wire(dtype type) noexcept;
std::optional<column_type> from_wire(wire::ColumnType type) noexcept;
wire::ColumnType to_wire(column_type type) noexcept;
std::optional<order> from_wire(wire::Order o) noexcept;
wire::Order to_wire(order o) noexcept;

}  // namespace gpusort::proto
