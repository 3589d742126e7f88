#include "proto/messages.hpp"

#include "core/checks.hpp"

#include <gpusort/error.hpp>

#include <algorithm>
#include <limits>
#include <utility>

namespace gpusort::proto {

// The C++ enum and the .proto enum are two spellings of one table: keep them equal.
#define GPUSORT_SAME_TYPE(ours, theirs)                                                       \
  static_assert(static_cast<int>(message_type::ours) == wire::MESSAGE_TYPE_##theirs)
GPUSORT_SAME_TYPE(hello, HELLO);
GPUSORT_SAME_TYPE(allocate, ALLOCATE);
GPUSORT_SAME_TYPE(release, RELEASE);
GPUSORT_SAME_TYPE(submit, SUBMIT);
GPUSORT_SAME_TYPE(cancel, CANCEL);
GPUSORT_SAME_TYPE(job_status, JOB_STATUS);
GPUSORT_SAME_TYPE(daemon_status, DAEMON_STATUS);
GPUSORT_SAME_TYPE(error, ERROR);
GPUSORT_SAME_TYPE(hello_reply, HELLO_REPLY);
GPUSORT_SAME_TYPE(allocate_reply, ALLOCATE_REPLY);
GPUSORT_SAME_TYPE(release_reply, RELEASE_REPLY);
GPUSORT_SAME_TYPE(submit_reply, SUBMIT_REPLY);
GPUSORT_SAME_TYPE(cancel_reply, CANCEL_REPLY);
GPUSORT_SAME_TYPE(job_status_reply, JOB_STATUS_REPLY);
GPUSORT_SAME_TYPE(daemon_status_reply, DAEMON_STATUS_REPLY);
GPUSORT_SAME_TYPE(progress, PROGRESS);
GPUSORT_SAME_TYPE(job_finished, JOB_FINISHED);
#undef GPUSORT_SAME_TYPE

namespace {

template <std::size_t... I>
message make_alternative(std::size_t index, std::index_sequence<I...>)
{
  message result;
  // Exactly one I matches; the fold stops there.
  static_cast<void>(((index == I ? (result.emplace<I>(), true) : false) || ...));
  return result;
}

std::size_t index_of(message_type type) noexcept
{
  const auto* it = std::find(std::begin(all_message_types), std::end(all_message_types), type);
  return static_cast<std::size_t>(it - std::begin(all_message_types));
}

std::string element_problem(std::string_view what, const wire::DataRef& ref,
                            std::uint64_t element_bytes)
{
  if (ref.source_case() == wire::DataRef::SOURCE_NOT_SET)
    return std::string{what} + " names neither a buffer_id nor an attached_fd";
  if (ref.offset() % element_bytes != 0)
    return std::string{what} + ".offset " + std::to_string(ref.offset()) +
           " is not a multiple of the element size " + std::to_string(element_bytes);
  return {};
}

}  // namespace

std::optional<message_type> to_message_type(std::uint16_t raw) noexcept
{
  for (const message_type t : all_message_types)
    if (static_cast<std::uint16_t>(t) == raw) return t;
  return std::nullopt;
}

message_class class_of(message_type type) noexcept
{
  const auto raw = static_cast<std::uint16_t>(type);
  if (raw < 0x8000) return message_class::request;
  if (raw < 0xC000) return message_class::reply;
  return message_class::event;
}

message_type type_of(const message& m) noexcept { return all_message_types[m.index()]; }

std::string_view name_of(message_type type) noexcept
{
  switch (type) {
    case message_type::hello: return "HELLO";
    case message_type::allocate: return "ALLOCATE";
    case message_type::release: return "RELEASE";
    case message_type::submit: return "SUBMIT";
    case message_type::cancel: return "CANCEL";
    case message_type::job_status: return "JOB_STATUS";
    case message_type::daemon_status: return "DAEMON_STATUS";
    case message_type::error: return "ERROR";
    case message_type::hello_reply: return "HELLO_REPLY";
    case message_type::allocate_reply: return "ALLOCATE_REPLY";
    case message_type::release_reply: return "RELEASE_REPLY";
    case message_type::submit_reply: return "SUBMIT_REPLY";
    case message_type::cancel_reply: return "CANCEL_REPLY";
    case message_type::job_status_reply: return "JOB_STATUS_REPLY";
    case message_type::daemon_status_reply: return "DAEMON_STATUS_REPLY";
    case message_type::progress: return "PROGRESS";
    case message_type::job_finished: return "JOB_FINISHED";
  }
  return "?";
}

std::optional<message_type> reply_type_of(message_type request) noexcept
{
  if (class_of(request) != message_class::request) return std::nullopt;
  // Replies mirror the request's number with the top bit set.
  return to_message_type(static_cast<std::uint16_t>(static_cast<std::uint16_t>(request) | 0x8000u));
}

message make_message(message_type type)
{
  const std::size_t index = index_of(type);
  GPUSORT_EXPECTS(index < std::variant_size_v<message>, "not a message type");
  return make_alternative(index, std::make_index_sequence<std::variant_size_v<message>>{});
}

const google::protobuf::MessageLite& as_protobuf(const message& m) noexcept
{
  return std::visit([](const auto& body) -> const google::protobuf::MessageLite& { return body; },
                    m);
}

google::protobuf::MessageLite& as_protobuf(message& m) noexcept
{
  return std::visit([](auto& body) -> google::protobuf::MessageLite& { return body; }, m);
}

wire::Status make_status(wire::StatusCode code, std::string text)
{
  wire::Status status;
  status.set_code(code);
  status.set_message(std::move(text));
  return status;
}

message make_error_reply(std::optional<message_type> request, wire::StatusCode code,
                         std::string text)
{
  const std::optional<message_type> reply =
      request ? reply_type_of(*request) : std::optional<message_type>{};
  message result = make_message(reply.value_or(message_type::error));
  std::visit(
      [&](auto& body) {
        if constexpr (requires { body.mutable_status(); })
          *body.mutable_status() = make_status(code, std::move(text));
      },
      result);
  return result;
}

std::string_view name_of(wire::StatusCode code) noexcept
{
  switch (code) {
    case wire::OK: return "OK";
    case wire::BAD_REQUEST: return "BAD_REQUEST";
    case wire::UNSUPPORTED_VERSION: return "UNSUPPORTED_VERSION";
    case wire::NOT_FOUND: return "NOT_FOUND";
    case wire::TOO_LARGE: return "TOO_LARGE";
    case wire::REJECTED_BUSY: return "REJECTED_BUSY";
    case wire::UNAUTHORIZED: return "UNAUTHORIZED";
    case wire::CANCELLED: return "CANCELLED";
    case wire::INTERNAL: return "INTERNAL";
    case wire::BAD_FD: return "BAD_FD";
    case wire::PROTOCOL_ERROR: return "PROTOCOL_ERROR";
    case wire::FAILED_PRECONDITION: return "FAILED_PRECONDITION";
    case wire::OUT_OF_MEMORY: return "OUT_OF_MEMORY";
    case wire::SHUTTING_DOWN: return "SHUTTING_DOWN";
    default: return "UNKNOWN_STATUS";
  }
}

std::vector<std::uint32_t> referenced_fds(const wire::SubmitRequest& request)
{
  std::vector<std::uint32_t> indices;
  for (const wire::DataRef* ref : {&request.keys(), &request.values(), &request.keys_out(),
                                   &request.values_out(), &request.indices_out(),
                                   &request.journal()})
    if (ref->source_case() == wire::DataRef::kAttachedFd) indices.push_back(ref->attached_fd());
  std::sort(indices.begin(), indices.end());
  indices.erase(std::unique(indices.begin(), indices.end()), indices.end());
  return indices;
}

std::size_t expected_fd_count(const message& m)
{
  if (const auto* submit = std::get_if<wire::SubmitRequest>(&m))
    return referenced_fds(*submit).size();
  if (const auto* allocated = std::get_if<wire::AllocateReply>(&m))
    return allocated->status().code() == wire::OK ? 1 : 0;
  return 0;
}

std::optional<std::string> check_fd_count(const message& m, std::size_t attached)
{
  const std::size_t expected = expected_fd_count(m);
  const std::string carries = std::to_string(attached) +
                              (attached == 1 ? " descriptor" : " descriptors");
  if (const auto* submit = std::get_if<wire::SubmitRequest>(&m)) {
    const std::vector<std::uint32_t> indices = referenced_fds(*submit);
    // Distinct indices, ascending: they are 0..n-1 exactly when the last one is n-1.
    if (indices.size() == attached && (indices.empty() || indices.back() + 1 == attached))
      return std::nullopt;
    std::string list;
    for (const std::uint32_t i : indices) list += (list.empty() ? "#" : ", #") + std::to_string(i);
    return "SUBMIT references " +
           (indices.empty() ? std::string{"no attached descriptor"}
                            : "attached descriptors " + list) +
           " but the frame carries " + carries;
  }
  if (expected == attached) return std::nullopt;
  return std::string{name_of(type_of(m))} + " takes " + std::to_string(expected) +
         (expected == 1 ? " descriptor" : " descriptors") + " but the frame carries " + carries;
}

namespace {

/// The most keys a records job compares: a record's keys beyond that are better a bytes key.
constexpr int max_key_fields = 64;
constexpr std::uint32_t max_record_bytes = std::uint32_t{1} << 20;

/// check_submit's part for JOB_KIND_SORT_RECORDS and JOB_KIND_ARGSORT_RECORDS.
std::optional<std::string> check_records(const wire::SubmitRequest& request)
{
  const bool argsort = request.kind() == wire::JOB_KIND_ARGSORT_RECORDS;
  const std::uint32_t r = request.record_bytes();
  if (r == 0 || r > max_record_bytes)
    return "record_bytes " + std::to_string(r) + " is not 1 to " +
           std::to_string(max_record_bytes);
  if (request.key_fields_size() == 0) return "a records job needs at least one key field";
  if (request.key_fields_size() > max_key_fields)
    return std::to_string(request.key_fields_size()) + " key fields, more than " +
           std::to_string(max_key_fields);
  for (int k = 0; k < request.key_fields_size(); ++k) {
    const wire::KeyField& f = request.key_fields(k);
    const std::string which = "key field " + std::to_string(k + 1);
    const std::optional<column_type> t = from_wire(f.type());
    if (!t) return which + ": type " + std::to_string(f.type()) + " is not a column type";
    if (!from_wire(f.order()))
      return which + ": order " + std::to_string(f.order()) +
             " is neither ascending nor descending";
    const std::uint64_t bytes = *t == column_type::bytes ? f.length() : size_of(*t);
    if (*t == column_type::bytes && bytes == 0) return which + ": a BYTES key of length 0";
    if (*t != column_type::bytes && f.length() != 0)
      return which + ": length " + std::to_string(f.length()) + " given for a " +
             std::string{name_of(*t)} + " key (only BYTES keys take one)";
    if (std::uint64_t{f.offset()} + bytes > r)
      return which + " (" + std::string{name_of(*t)} + " at offset " +
             std::to_string(f.offset()) + ", " + std::to_string(bytes) +
             " bytes) ends beyond the " + std::to_string(r) + "-byte record";
  }
  if (request.dtype() != wire::DTYPE_UNSPECIFIED || request.order() != wire::ORDER_ASCENDING)
    return "dtype and order are for keys; a records job takes its key_fields'";
  if (request.value_bytes() != 0 || request.has_values() || request.has_values_out())
    return "a records job moves whole records: no values";
  if (request.has_journal()) return "a journal is for a sort of keys in place";
  if (request.float_order() != wire::FLOAT_ORDER_TOTAL &&
      request.float_order() != wire::FLOAT_ORDER_NUMPY)
    return "float_order " + std::to_string(request.float_order()) + " is neither TOTAL nor NUMPY";
  if (request.count() > std::numeric_limits<std::uint64_t>::max() / (std::uint64_t{r} + 24))
    return "count " + std::to_string(request.count()) + " overflows 64-bit byte sizes";
  if (!request.has_keys()) return "keys (the records) missing";
  if (auto problem = element_problem("keys", request.keys(), 1); !problem.empty()) return problem;
  if (argsort) {
    const std::uint32_t index_bytes = request.index_bytes();
    if (index_bytes != 4 && index_bytes != 8)
      return "index_bytes " + std::to_string(index_bytes) + " is not 4 or 8 for an argsort";
    if (index_bytes == 4 && request.count() > std::numeric_limits<std::uint32_t>::max())
      return "count " + std::to_string(request.count()) +
             " needs 8-byte indices (4-byte indices hold fewer than 2^32)";
    if (request.in_place() || request.has_keys_out())
      return "an argsort of records writes indices_out alone (in_place or keys_out given)";
    if (!request.has_indices_out()) return "indices_out missing for an argsort";
    if (auto problem = element_problem("indices_out", request.indices_out(), index_bytes);
        !problem.empty())
      return problem;
    return std::nullopt;
  }
  if (request.has_indices_out() || request.index_bytes() != 0)
    return "indices_out or index_bytes given for a job that is not an argsort";
  if (request.in_place() == request.has_keys_out())
    return request.in_place() ? "in_place job with keys_out"
                              : "keys_out missing for a job that is not in place";
  if (request.has_keys_out()) {
    if (auto problem = element_problem("keys_out", request.keys_out(), 1); !problem.empty())
      return problem;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> check_submit(const wire::SubmitRequest& request)
{
  if (request.kind() == wire::JOB_KIND_SORT_RECORDS ||
      request.kind() == wire::JOB_KIND_ARGSORT_RECORDS)
    return check_records(request);
  if (request.record_bytes() != 0 || request.key_fields_size() != 0)
    return "record_bytes or key_fields given for a job that is not a records job";
  const std::optional<dtype> type = from_wire(request.dtype());
  if (!type) return "dtype " + std::to_string(request.dtype()) + " is not a key type";
  if (!from_wire(request.order()))
    return "order " + std::to_string(request.order()) + " is neither ascending nor descending";
  const std::uint32_t value_bytes = request.value_bytes();
  if (value_bytes != 0 && value_bytes != 4 && value_bytes != 8)
    return "value_bytes " + std::to_string(value_bytes) + " is not 0, 4 or 8";
  const bool has_values = value_bytes != 0;
  const std::uint64_t key_bytes = size_of(*type);
  if (request.count() > std::numeric_limits<std::uint64_t>::max() / (key_bytes + value_bytes))
    return "count " + std::to_string(request.count()) + " overflows 64-bit byte sizes";

  if (!request.has_keys()) return "keys missing";
  if (auto problem = element_problem("keys", request.keys(), key_bytes); !problem.empty())
    return problem;
  if (has_values != request.has_values())
    return has_values ? "values missing although value_bytes is " + std::to_string(value_bytes)
                      : std::string{"values given although value_bytes is 0"};
  if (has_values) {
    if (auto problem = element_problem("values", request.values(), value_bytes);
        !problem.empty())
      return problem;
  }
  if (request.float_order() != wire::FLOAT_ORDER_TOTAL &&
      request.float_order() != wire::FLOAT_ORDER_NUMPY)
    return "float_order " + std::to_string(request.float_order()) + " is neither TOTAL nor NUMPY";
  if (request.kind() == wire::JOB_KIND_ARGSORT) {
    const std::uint32_t index_bytes = request.index_bytes();
    if (index_bytes != 4 && index_bytes != 8)
      return "index_bytes " + std::to_string(index_bytes) + " is not 4 or 8 for an argsort";
    if (index_bytes == 4 && request.count() > std::numeric_limits<std::uint32_t>::max())
      return "count " + std::to_string(request.count()) +
             " needs 8-byte indices (4-byte indices hold fewer than 2^32)";
    if (request.count() > std::numeric_limits<std::uint64_t>::max() / 16)
      return "count " + std::to_string(request.count()) + " overflows 64-bit byte sizes";
    if (has_values || request.has_values_out())
      return "an argsort takes keys alone (values or values_out given)";
    if (request.in_place()) return "an argsort is never in place (its keys are not written)";
    if (request.has_journal()) return "a journal is for a sort in place, not an argsort";
    if (!request.has_indices_out()) return "indices_out missing for an argsort";
    if (auto problem = element_problem("indices_out", request.indices_out(), index_bytes);
        !problem.empty())
      return problem;
    if (request.has_keys_out()) {
      if (auto problem = element_problem("keys_out", request.keys_out(), key_bytes);
          !problem.empty())
        return problem;
    }
    return std::nullopt;
  }
  if (request.kind() != wire::JOB_KIND_SORT)
    return "kind " + std::to_string(request.kind()) + " is not a job kind";
  if (request.has_indices_out() || request.index_bytes() != 0)
    return "indices_out or index_bytes given for a job that is not an argsort";
  if (request.has_journal()) {
    if (!request.in_place()) return "a journal is for a sort in place";
    if (request.journal().source_case() != wire::DataRef::kAttachedFd ||
        request.journal().offset() != 0)
      return "a journal is an attached descriptor (offset 0)";
    if (request.keys().source_case() != wire::DataRef::kAttachedFd ||
        (has_values && request.values().source_case() != wire::DataRef::kAttachedFd))
      return "a journal is for arrays in files (attached descriptors)";
  }
  if (request.in_place()) {
    if (request.has_keys_out() || request.has_values_out())
      return "in_place job with keys_out or values_out";
    return std::nullopt;
  }
  if (!request.has_keys_out()) return "keys_out missing for a job that is not in place";
  if (auto problem = element_problem("keys_out", request.keys_out(), key_bytes);
      !problem.empty())
    return problem;
  if (has_values != request.has_values_out())
    return has_values ? std::string{"values_out missing for a job with values"}
                      : std::string{"values_out given for a job without values"};
  if (has_values) {
    if (auto problem = element_problem("values_out", request.values_out(), value_bytes);
        !problem.empty())
      return problem;
  }
  return std::nullopt;
}

std::optional<dtype> from_wire(wire::DType type) noexcept
{
  switch (type) {
    case wire::DTYPE_U32: return dtype::u32;
    case wire::DTYPE_I32: return dtype::i32;
    case wire::DTYPE_U64: return dtype::u64;
    case wire::DTYPE_I64: return dtype::i64;
    case wire::DTYPE_F32: return dtype::f32;
    case wire::DTYPE_F64: return dtype::f64;
    default: return std::nullopt;
  }
}

wire::DType to_wire(dtype type) noexcept
{
  switch (type) {
    case dtype::u32: return wire::DTYPE_U32;
    case dtype::i32: return wire::DTYPE_I32;
    case dtype::u64: return wire::DTYPE_U64;
    case dtype::i64: return wire::DTYPE_I64;
    case dtype::f32: return wire::DTYPE_F32;
    case dtype::f64: return wire::DTYPE_F64;
  }
  return wire::DTYPE_UNSPECIFIED;
}

std::optional<column_type> from_wire(wire::ColumnType type) noexcept
{
  switch (type) {
    case wire::COLUMN_TYPE_U32: return column_type::u32;
    case wire::COLUMN_TYPE_I32: return column_type::i32;
    case wire::COLUMN_TYPE_U64: return column_type::u64;
    case wire::COLUMN_TYPE_I64: return column_type::i64;
    case wire::COLUMN_TYPE_F32: return column_type::f32;
    case wire::COLUMN_TYPE_F64: return column_type::f64;
    case wire::COLUMN_TYPE_U128: return column_type::u128;
    case wire::COLUMN_TYPE_I128: return column_type::i128;
    case wire::COLUMN_TYPE_BYTES: return column_type::bytes;
    default: return std::nullopt;
  }
}

wire::ColumnType to_wire(column_type type) noexcept
{
  switch (type) {
    case column_type::u32: return wire::COLUMN_TYPE_U32;
    case column_type::i32: return wire::COLUMN_TYPE_I32;
    case column_type::u64: return wire::COLUMN_TYPE_U64;
    case column_type::i64: return wire::COLUMN_TYPE_I64;
    case column_type::f32: return wire::COLUMN_TYPE_F32;
    case column_type::f64: return wire::COLUMN_TYPE_F64;
    case column_type::u128: return wire::COLUMN_TYPE_U128;
    case column_type::i128: return wire::COLUMN_TYPE_I128;
    case column_type::bytes: return wire::COLUMN_TYPE_BYTES;
  }
  return wire::COLUMN_TYPE_UNSPECIFIED;
}

std::optional<order> from_wire(wire::Order o) noexcept
{
  switch (o) {
    case wire::ORDER_ASCENDING: return order::ascending;
    case wire::ORDER_DESCENDING: return order::descending;
    default: return std::nullopt;
  }
}

wire::Order to_wire(order o) noexcept
{
  return o == order::descending ? wire::ORDER_DESCENDING : wire::ORDER_ASCENDING;
}

}  // namespace gpusort::proto
