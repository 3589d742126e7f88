// Fuzzes the validation of requests (proto/messages.cpp): the bytes are decoded with protobuf
// as a request body and run through the checks the daemon applies before it looks at buffers
// or descriptors. Input: byte 0 picks the request type (of the 7), byte 1 the number of
// descriptors the frame carried (0..7), the rest is the protobuf body.
//
// Contracts checked, beyond "no crash, no undefined behaviour":
// - check_submit accepts only what its comment promises: dtype, order, float_order and kind
//   known; value_bytes 0, 4 or 8; every DataRef the job needs present, naming a source, at an
//   offset that is a multiple of its element size, and none it must not have; count times the
//   element sizes within 64 bits; index_bytes 4 or 8 for an argsort (4 only below 2^32); a
//   records job (issue 42) with record_bytes of 1 to 1 MiB, 1 to 64 known key fields each within
//   the record, no dtype, order or values, and its own outputs;
// - referenced_fds is ascending and distinct, expected_fd_count agrees with it, and
//   check_fd_count accepts n descriptors exactly when the indices are 0..n-1 (SUBMIT) or
//   n == 0 (every other request);
// - the verdicts depend on the message, not on its encoding: a re-serialized message gets the
//   same ones, and frame_parser, given the message in a frame, agrees with check_fd_count.
#include "proto/frame.hpp"
#include "proto/messages.hpp"

#include <fcntl.h>
#include <google/protobuf/stubs/logging.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

namespace {

namespace proto = gpusort::proto;
namespace wire = gpusort::wire;

[[noreturn]] void broken(const std::string& what)
{
  std::fprintf(stderr, "request validation contract broken: %s\n", what.c_str());
  std::abort();
}

bool sound_ref(const wire::DataRef& ref, std::uint64_t element_bytes)
{
  return ref.source_case() != wire::DataRef::SOURCE_NOT_SET && ref.offset() % element_bytes == 0;
}

/// What an accepted records job must satisfy (gpusort.proto, SubmitRequest's record_bytes and
/// KeyField). `stable` is not checked: records sort stably whatever it says.
void check_accepted_records(const wire::SubmitRequest& r)
{
  const std::uint64_t record = r.record_bytes();
  if (record == 0 || record > (std::uint64_t{1} << 20)) broken("accepted record_bytes");
  if (r.key_fields_size() == 0 || r.key_fields_size() > 64)
    broken("accepted a records job of no key fields or more than 64");
  for (const wire::KeyField& f : r.key_fields()) {
    const auto type = proto::from_wire(f.type());
    if (!type) broken("accepted an unknown key field type");
    if (!proto::from_wire(f.order())) broken("accepted an unknown key field order");
    const bool bytes_key = *type == gpusort::column_type::bytes;
    if (bytes_key ? f.length() == 0 : f.length() != 0)
      broken("accepted a key field length its type does not take");
    const std::uint64_t length = bytes_key ? f.length() : gpusort::size_of(*type);
    if (std::uint64_t{f.offset()} + length > record) broken("accepted a key beyond the record");
  }
  if (r.dtype() != wire::DTYPE_UNSPECIFIED || r.order() != wire::ORDER_ASCENDING)
    broken("accepted a records job with a dtype or an order");
  if (r.value_bytes() != 0 || r.has_values() || r.has_values_out())
    broken("accepted a records job with values");
  if (r.float_order() != wire::FLOAT_ORDER_TOTAL && r.float_order() != wire::FLOAT_ORDER_NUMPY)
    broken("accepted an unknown float_order");
  if (static_cast<unsigned __int128>(r.count()) * record > std::numeric_limits<std::uint64_t>::max())
    broken("accepted a count of records whose bytes pass 2^64");
  if (!r.has_keys() || !sound_ref(r.keys(), 1)) broken("accepted unsound records");
  if (r.kind() == wire::JOB_KIND_ARGSORT_RECORDS) {
    const std::uint64_t index_bytes = r.index_bytes();
    if (index_bytes != 4 && index_bytes != 8) broken("accepted index_bytes of a records argsort");
    if (index_bytes == 4 && r.count() > std::numeric_limits<std::uint32_t>::max())
      broken("accepted 4-byte indices for 2^32 records or more");
    if (r.in_place() || r.has_keys_out()) broken("accepted a records argsort with record outputs");
    if (!r.has_indices_out() || !sound_ref(r.indices_out(), index_bytes))
      broken("accepted a records argsort with unsound indices_out");
    return;
  }
  if (r.has_indices_out() || r.index_bytes() != 0) broken("accepted indices for a records sort");
  if (r.in_place() == r.has_keys_out()) broken("accepted a records sort in place and out of it");
  if (r.has_keys_out() && !sound_ref(r.keys_out(), 1)) broken("accepted unsound keys_out");
}

/// What an accepted SUBMIT must satisfy, written from gpusort.proto's comments rather than from
/// check_submit's code.
void check_accepted_submit(const wire::SubmitRequest& r)
{
  if (r.kind() == wire::JOB_KIND_SORT_RECORDS || r.kind() == wire::JOB_KIND_ARGSORT_RECORDS) {
    check_accepted_records(r);
    return;
  }
  if (r.record_bytes() != 0 || r.key_fields_size() != 0)
    broken("accepted record_bytes or key_fields for a job of keys");
  const auto type = proto::from_wire(r.dtype());
  if (!type) broken("accepted an unknown dtype");
  if (!proto::from_wire(r.order())) broken("accepted an unknown order");
  if (r.float_order() != wire::FLOAT_ORDER_TOTAL && r.float_order() != wire::FLOAT_ORDER_NUMPY)
    broken("accepted an unknown float_order");
  const std::uint64_t key_bytes = gpusort::size_of(*type);
  const std::uint64_t value_bytes = r.value_bytes();
  if (value_bytes != 0 && value_bytes != 4 && value_bytes != 8) broken("accepted value_bytes");
  const auto fits = [&](std::uint64_t per_element) {
    return static_cast<unsigned __int128>(r.count()) * per_element <=
           std::numeric_limits<std::uint64_t>::max();
  };
  if (!fits(key_bytes + value_bytes)) broken("accepted a count whose bytes pass 2^64");
  if (!r.has_keys() || !sound_ref(r.keys(), key_bytes)) broken("accepted unsound keys");
  if (r.has_values() != (value_bytes != 0)) broken("accepted values not matching value_bytes");
  if (r.has_values() && !sound_ref(r.values(), value_bytes)) broken("accepted unsound values");

  if (r.kind() == wire::JOB_KIND_ARGSORT) {
    const std::uint64_t index_bytes = r.index_bytes();
    if (index_bytes != 4 && index_bytes != 8) broken("accepted index_bytes of an argsort");
    if (index_bytes == 4 && r.count() > std::numeric_limits<std::uint32_t>::max())
      broken("accepted 4-byte indices for 2^32 keys or more");
    if (!fits(index_bytes) || !fits(key_bytes)) broken("accepted an argsort overflowing 2^64");
    if (r.has_values() || r.has_values_out() || r.in_place())
      broken("accepted an argsort with values, values_out or in_place");
    if (!r.has_indices_out() || !sound_ref(r.indices_out(), index_bytes))
      broken("accepted an argsort with unsound indices_out");
    if (r.has_keys_out() && !sound_ref(r.keys_out(), key_bytes))
      broken("accepted an argsort with unsound keys_out");
    return;
  }
  if (r.kind() != wire::JOB_KIND_SORT) broken("accepted an unknown kind");
  if (r.has_indices_out() || r.index_bytes() != 0) broken("accepted indices for a sort");
  if (r.in_place()) {
    if (r.has_keys_out() || r.has_values_out()) broken("accepted in_place with outputs");
    return;
  }
  if (!r.has_keys_out() || !sound_ref(r.keys_out(), key_bytes))
    broken("accepted a separate-output sort with unsound keys_out");
  if (r.has_values_out() != r.has_values()) broken("accepted values_out not matching values");
  if (r.has_values_out() && !sound_ref(r.values_out(), value_bytes))
    broken("accepted unsound values_out");
}

void check_descriptors(const proto::message& m, std::size_t attached)
{
  std::vector<std::uint32_t> indices;
  if (const auto* submit = std::get_if<wire::SubmitRequest>(&m)) {
    indices = proto::referenced_fds(*submit);
    for (std::size_t i = 1; i < indices.size(); ++i)
      if (indices[i - 1] >= indices[i]) broken("referenced_fds is not ascending and distinct");
  }
  if (proto::expected_fd_count(m) != indices.size())
    broken("expected_fd_count differs from the distinct indices referenced");
  bool fits = indices.size() == attached;
  for (std::size_t i = 0; fits && i < indices.size(); ++i) fits = indices[i] == i;
  if (proto::check_fd_count(m, attached).has_value() == fits)
    broken("check_fd_count(" + std::to_string(attached) + ") disagrees with indices 0..n-1");
}

/// The verdict of frame_parser on the message sent in a frame with `attached` descriptors, and
/// that no descriptor leaks whatever the verdict.
void check_through_parser(const proto::message& m, std::size_t attached)
{
  const std::vector<std::byte> bytes = proto::encode_frame(7, m);
  const int probe_before = ::dup(0);
  ::close(probe_before);
  {
    proto::frame_parser parser{{.reads = proto::stream_direction::requests}};
    std::vector<proto::unique_fd> fds;
    for (std::size_t i = 0; i < attached; ++i)
      fds.emplace_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    parser.feed(bytes, std::move(fds));
    auto result = parser.next();
    if (!result) broken("a whole frame gave no result");
    const bool fd_ok = !proto::check_fd_count(m, attached).has_value();
    if (const auto* f = std::get_if<proto::frame>(&*result)) {
      if (!fd_ok) broken("frame_parser passed a frame that check_fd_count rejects");
      if (f->fds.size() != attached) broken("the frame does not hold its descriptors");
    } else {
      const auto& e = std::get<proto::parse_error>(*result);
      if (e.kind != proto::parse_error_kind::fd_count_mismatch || fd_ok)
        broken("frame_parser rejected a valid request frame: " + e.message);
    }
    if (parser.next()) broken("one frame gave two results");
  }
  const int probe_after = ::dup(0);
  ::close(probe_after);
  if (probe_after != probe_before) broken("a descriptor leaked through frame_parser");
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
  constexpr std::size_t requests = 7;  // all_message_types begins with the requests
  const proto::message_type type = proto::all_message_types[data[0] % requests];
  const std::size_t attached = data[1] % 8;
  proto::message m = proto::make_message(type);
  if (!proto::as_protobuf(m).ParseFromArray(data + 2, static_cast<int>(size - 2))) return 0;

  std::optional<std::string> verdict;
  if (const auto* submit = std::get_if<wire::SubmitRequest>(&m)) {
    verdict = proto::check_submit(*submit);
    if (!verdict) check_accepted_submit(*submit);
    else if (verdict->empty()) broken("check_submit rejected with an empty reason");
  }
  check_descriptors(m, attached);

  // The same message re-encoded: protobuf may write it differently from the fuzz bytes (field
  // order, duplicates merged), never with another meaning.
  proto::message again = proto::make_message(type);
  const std::string canonical = proto::as_protobuf(m).SerializeAsString();
  if (!proto::as_protobuf(again).ParseFromString(canonical)) broken("re-serialized body fails");
  if (const auto* submit = std::get_if<wire::SubmitRequest>(&again))
    if (proto::check_submit(*submit).has_value() != verdict.has_value())
      broken("check_submit changed its verdict on the re-serialized message");
  if (proto::check_fd_count(again, attached) != proto::check_fd_count(m, attached))
    broken("check_fd_count changed its verdict on the re-serialized message");

  if (canonical.size() <= proto::max_control_body) check_through_parser(m, attached);
  return 0;
}
