#include "proto/messages.hpp"

#include "proto_test_support.hpp"

#include <gpusort/error.hpp>

#include <gtest/gtest.h>

#include <google/protobuf/descriptor.h>

#include <map>
#include <set>

namespace gpusort::proto {
namespace {

using namespace test;

// The .proto's enum, read through protobuf's descriptors, is the reference for our C++ table.
TEST(Messages, TypeTableMatchesTheProtoEnum)
{
  const auto* e = wire::MessageType_descriptor();
  std::set<int> proto_values;
  for (int i = 0; i < e->value_count(); ++i) {
    const auto* v = e->value(i);
    if (v->number() == 0) continue;
    proto_values.insert(v->number());
    const auto type = to_message_type(static_cast<std::uint16_t>(v->number()));
    ASSERT_TRUE(type.has_value()) << v->name();
    EXPECT_EQ("MESSAGE_TYPE_" + std::string{name_of(*type)}, v->name());
  }
  std::set<int> ours;
  for (const message_type t : all_message_types) ours.insert(static_cast<int>(t));
  EXPECT_EQ(ours, proto_values);
  EXPECT_FALSE(to_message_type(0).has_value());
  EXPECT_FALSE(to_message_type(0x0008).has_value());
  EXPECT_FALSE(to_message_type(0xFFFF).has_value());
}

TEST(Messages, EachTypeCarriesItsMessage)
{
  const std::map<message_type, std::string> expected = {
      {message_type::hello, "HelloRequest"},
      {message_type::allocate, "AllocateRequest"},
      {message_type::release, "ReleaseRequest"},
      {message_type::submit, "SubmitRequest"},
      {message_type::cancel, "CancelRequest"},
      {message_type::job_status, "JobStatusRequest"},
      {message_type::daemon_status, "DaemonStatusRequest"},
      {message_type::error, "ErrorReply"},
      {message_type::hello_reply, "HelloReply"},
      {message_type::allocate_reply, "AllocateReply"},
      {message_type::release_reply, "ReleaseReply"},
      {message_type::submit_reply, "SubmitReply"},
      {message_type::cancel_reply, "CancelReply"},
      {message_type::job_status_reply, "JobStatusReply"},
      {message_type::daemon_status_reply, "DaemonStatusReply"},
      {message_type::progress, "ProgressEvent"},
      {message_type::job_finished, "JobFinishedEvent"}};
  ASSERT_EQ(expected.size(), std::size(all_message_types));
  for (const auto& [type, name] : expected) {
    const message m = make_message(type);
    EXPECT_EQ(as_protobuf(m).GetTypeName(), "gpusort.wire." + name);
    EXPECT_EQ(type_of(m), type);
  }
  EXPECT_EQ(type_of_v<wire::SubmitRequest>, message_type::submit);
  EXPECT_EQ(type_of_v<wire::JobFinishedEvent>, message_type::job_finished);
  EXPECT_THROW(make_message(static_cast<message_type>(0x42)), logic_error);
}

TEST(Messages, ClassesAndReplies)
{
  EXPECT_EQ(class_of(message_type::hello), message_class::request);
  EXPECT_EQ(class_of(message_type::daemon_status), message_class::request);
  EXPECT_EQ(class_of(message_type::error), message_class::reply);
  EXPECT_EQ(class_of(message_type::submit_reply), message_class::reply);
  EXPECT_EQ(class_of(message_type::progress), message_class::event);
  EXPECT_EQ(class_of(message_type::job_finished), message_class::event);

  const std::map<message_type, message_type> replies = {
      {message_type::hello, message_type::hello_reply},
      {message_type::allocate, message_type::allocate_reply},
      {message_type::release, message_type::release_reply},
      {message_type::submit, message_type::submit_reply},
      {message_type::cancel, message_type::cancel_reply},
      {message_type::job_status, message_type::job_status_reply},
      {message_type::daemon_status, message_type::daemon_status_reply}};
  for (const message_type t : all_message_types) {
    const auto it = replies.find(t);
    if (it == replies.end())
      EXPECT_FALSE(reply_type_of(t).has_value()) << name_of(t);
    else
      EXPECT_EQ(reply_type_of(t), it->second) << name_of(t);
  }
}

TEST(Messages, StatusNamesMatchTheProtoEnum)
{
  const auto* e = wire::StatusCode_descriptor();
  ASSERT_GE(e->value_count(), 14);
  for (int i = 0; i < e->value_count(); ++i)
    EXPECT_EQ(name_of(static_cast<wire::StatusCode>(e->value(i)->number())), e->value(i)->name());
  EXPECT_EQ(wire::OK, 0);
}

TEST(Messages, ErrorRepliesHaveTheReplyTypeOfTheRequest)
{
  message r = make_error_reply(message_type::submit, wire::BAD_FD, "keys: a directory");
  ASSERT_TRUE(std::holds_alternative<wire::SubmitReply>(r));
  EXPECT_EQ(std::get<wire::SubmitReply>(r).status().code(), wire::BAD_FD);
  EXPECT_EQ(std::get<wire::SubmitReply>(r).status().message(), "keys: a directory");
  EXPECT_EQ(std::get<wire::SubmitReply>(r).job_id(), 0u);

  r = make_error_reply(message_type::hello, wire::UNSUPPORTED_VERSION, "no");
  ASSERT_TRUE(std::holds_alternative<wire::HelloReply>(r));
  EXPECT_EQ(std::get<wire::HelloReply>(r).status().code(), wire::UNSUPPORTED_VERSION);

  // Not a request (a reply sent to the daemon, or no type at all): ERROR.
  for (const std::optional<message_type> t :
       {std::optional<message_type>{}, std::optional{message_type::progress},
        std::optional{message_type::hello_reply}}) {
    r = make_error_reply(t, wire::PROTOCOL_ERROR, "x");
    ASSERT_TRUE(std::holds_alternative<wire::ErrorReply>(r));
    EXPECT_EQ(std::get<wire::ErrorReply>(r).status().code(), wire::PROTOCOL_ERROR);
  }
}

TEST(Messages, DtypeAndOrderConversions)
{
  const std::map<dtype, wire::DType> table = {
      {dtype::u32, wire::DTYPE_U32}, {dtype::i32, wire::DTYPE_I32}, {dtype::u64, wire::DTYPE_U64},
      {dtype::i64, wire::DTYPE_I64}, {dtype::f32, wire::DTYPE_F32}, {dtype::f64, wire::DTYPE_F64}};
  for (const auto& [ours, theirs] : table) {
    EXPECT_EQ(to_wire(ours), theirs);
    EXPECT_EQ(from_wire(theirs), ours);
  }
  EXPECT_FALSE(from_wire(wire::DTYPE_UNSPECIFIED).has_value());
  EXPECT_FALSE(from_wire(static_cast<wire::DType>(77)).has_value());
  EXPECT_EQ(to_wire(order::descending), wire::ORDER_DESCENDING);
  EXPECT_EQ(from_wire(wire::ORDER_ASCENDING), order::ascending);
  EXPECT_FALSE(from_wire(static_cast<wire::Order>(2)).has_value());
}

// ---- descriptors ---------------------------------------------------------------------------

TEST(Messages, ExpectedFdCounts)
{
  for (const message_type t : all_message_types)
    EXPECT_EQ(expected_fd_count(sample_message(t)), sample_fd_count(t)) << name_of(t);

  // An allocate reply that failed has no memfd to carry.
  wire::AllocateReply failed;
  failed.mutable_status()->set_code(wire::TOO_LARGE);
  EXPECT_EQ(expected_fd_count(message{failed}), 0u);

  // Buffers only: no descriptor. One descriptor for keys and values: one.
  wire::SubmitRequest s;
  *s.mutable_keys() = buffer_ref(1, 0);
  *s.mutable_values() = buffer_ref(2, 0);
  EXPECT_EQ(expected_fd_count(message{s}), 0u);
  *s.mutable_keys() = fd_ref(0, 0);
  *s.mutable_values() = fd_ref(0, 800);
  EXPECT_EQ(expected_fd_count(message{s}), 1u);
  *s.mutable_keys_out() = fd_ref(1, 0);
  *s.mutable_values_out() = fd_ref(2, 0);
  EXPECT_EQ(expected_fd_count(message{s}), 3u);
  EXPECT_EQ(referenced_fds(s), (std::vector<std::uint32_t>{0, 1, 2}));
}

TEST(Messages, FdCountCheckWantsIndicesZeroToNMinusOne)
{
  wire::SubmitRequest s;
  *s.mutable_keys() = fd_ref(0, 0);
  *s.mutable_keys_out() = fd_ref(2, 0);  // #1 skipped
  const message m{s};
  for (const std::size_t attached : {0u, 1u, 2u, 3u}) {
    const auto problem = check_fd_count(m, attached);
    ASSERT_TRUE(problem.has_value()) << attached;
    EXPECT_NE(problem->find("#0, #2"), std::string::npos) << *problem;
    EXPECT_NE(problem->find("carries " + std::to_string(attached)), std::string::npos)
        << *problem;
  }
  s.mutable_keys_out()->set_attached_fd(1);
  EXPECT_FALSE(check_fd_count(message{s}, 2).has_value());
  EXPECT_TRUE(check_fd_count(message{s}, 1).has_value());
  EXPECT_TRUE(check_fd_count(message{s}, 3).has_value());

  EXPECT_FALSE(check_fd_count(sample_message(message_type::cancel), 0).has_value());
  const auto extra = check_fd_count(sample_message(message_type::cancel), 1);
  ASSERT_TRUE(extra.has_value());
  EXPECT_EQ(*extra, "CANCEL takes 0 descriptors but the frame carries 1 descriptor");
  EXPECT_TRUE(check_fd_count(sample_message(message_type::allocate_reply), 0).has_value());
  EXPECT_FALSE(check_fd_count(sample_message(message_type::allocate_reply), 1).has_value());
}

// ---- check_submit --------------------------------------------------------------------------

wire::SubmitRequest in_place_keys()
{
  wire::SubmitRequest s;
  s.set_dtype(wire::DTYPE_I32);
  s.set_count(10);
  *s.mutable_keys() = buffer_ref(1, 64);
  s.set_in_place(true);
  return s;
}

void expect_problem(const wire::SubmitRequest& s, const std::string& words)
{
  const auto problem = check_submit(s);
  ASSERT_TRUE(problem.has_value()) << "expected a problem with " << words;
  EXPECT_NE(problem->find(words), std::string::npos) << *problem;
}

TEST(Messages, CheckSubmitAcceptsWellFormedJobs)
{
  EXPECT_EQ(check_submit(in_place_keys()), std::nullopt);
  EXPECT_EQ(check_submit(sample_submit()), std::nullopt);
  wire::SubmitRequest pairs = in_place_keys();
  pairs.set_value_bytes(4);
  *pairs.mutable_values() = fd_ref(0, 12);
  EXPECT_EQ(check_submit(pairs), std::nullopt);
  wire::SubmitRequest empty = in_place_keys();
  empty.set_count(0);
  EXPECT_EQ(check_submit(empty), std::nullopt);
}

TEST(Messages, CheckSubmitArgsortAndFloatOrder)
{
  wire::SubmitRequest a;
  a.set_dtype(wire::DTYPE_F64);
  a.set_count(10);
  *a.mutable_keys() = buffer_ref(1, 0);
  a.set_kind(wire::JOB_KIND_ARGSORT);
  a.set_index_bytes(8);
  *a.mutable_indices_out() = buffer_ref(2, 0);
  a.set_float_order(wire::FLOAT_ORDER_NUMPY);
  EXPECT_EQ(check_submit(a), std::nullopt);
  auto with_keys = a;
  *with_keys.mutable_keys_out() = buffer_ref(3, 8);
  EXPECT_EQ(check_submit(with_keys), std::nullopt);

  auto s = a;
  s.set_index_bytes(2);
  expect_problem(s, "index_bytes 2");
  s = a;
  s.set_index_bytes(4);
  s.set_count(std::uint64_t{1} << 33);
  expect_problem(s, "8-byte indices");
  s = a;
  s.clear_indices_out();
  expect_problem(s, "indices_out missing");
  s = a;
  s.set_in_place(true);
  expect_problem(s, "never in place");
  s = a;
  s.set_value_bytes(4);
  *s.mutable_values() = buffer_ref(4, 0);
  expect_problem(s, "keys alone");
  s = a;
  *s.mutable_indices_out() = buffer_ref(2, 4);
  expect_problem(s, "indices_out");
  s = a;
  s.set_kind(static_cast<wire::JobKind>(9));
  expect_problem(s, "kind 9");
  s = in_place_keys();
  s.set_index_bytes(8);
  expect_problem(s, "not an argsort");
  s = in_place_keys();
  s.set_float_order(static_cast<wire::FloatOrder>(5));
  expect_problem(s, "float_order 5");
}

TEST(Messages, CheckSubmitRecordsJobs)
{
  wire::SubmitRequest r;
  r.set_kind(wire::JOB_KIND_SORT_RECORDS);
  r.set_count(10);
  r.set_record_bytes(100);
  *r.mutable_keys() = buffer_ref(1, 7);  // records lie at any offset
  r.set_in_place(true);
  wire::KeyField& f = *r.add_key_fields();
  f.set_type(wire::COLUMN_TYPE_BYTES);
  f.set_offset(0);
  f.set_length(10);
  wire::KeyField& g = *r.add_key_fields();
  g.set_type(wire::COLUMN_TYPE_I128);
  g.set_offset(84);
  g.set_order(wire::ORDER_DESCENDING);
  EXPECT_EQ(check_submit(r), std::nullopt);
  auto out = r;
  out.set_in_place(false);
  *out.mutable_keys_out() = buffer_ref(2, 3);
  EXPECT_EQ(check_submit(out), std::nullopt);
  auto arg = r;
  arg.set_kind(wire::JOB_KIND_ARGSORT_RECORDS);
  arg.set_in_place(false);
  arg.set_index_bytes(4);
  *arg.mutable_indices_out() = buffer_ref(2, 0);
  EXPECT_EQ(check_submit(arg), std::nullopt);

  auto s = r;
  s.set_record_bytes(0);
  expect_problem(s, "record_bytes 0");
  s = r;
  s.mutable_key_fields(1)->set_offset(85);
  expect_problem(s, "ends beyond the 100-byte record");
  s = r;
  s.mutable_key_fields(0)->set_length(0);
  expect_problem(s, "BYTES key of length 0");
  s = r;
  s.mutable_key_fields(1)->set_length(16);
  expect_problem(s, "only BYTES keys take one");
  s = r;
  s.mutable_key_fields(1)->set_type(static_cast<wire::ColumnType>(12));
  expect_problem(s, "type 12 is not a column type");
  s = r;
  s.clear_key_fields();
  expect_problem(s, "at least one key field");
  s = r;
  for (int k = 0; k < 64; ++k) *s.add_key_fields() = f;
  expect_problem(s, "more than 64");
  s = r;
  s.set_dtype(wire::DTYPE_U64);
  expect_problem(s, "dtype and order are for keys");
  s = r;
  s.set_value_bytes(8);
  expect_problem(s, "no values");
  s = r;
  *s.mutable_keys_out() = buffer_ref(2, 0);
  expect_problem(s, "in_place job with keys_out");
  s = arg;
  *s.mutable_keys_out() = buffer_ref(3, 0);
  expect_problem(s, "writes indices_out alone");
  s = arg;
  s.set_count(std::uint64_t{1} << 33);
  expect_problem(s, "8-byte indices");
  s = in_place_keys();
  s.set_record_bytes(100);
  expect_problem(s, "not a records job");
}

TEST(Messages, CheckSubmitNamesEachProblem)
{
  auto s = in_place_keys();
  s.set_dtype(wire::DTYPE_UNSPECIFIED);
  expect_problem(s, "dtype 0");

  s = in_place_keys();
  s.set_order(static_cast<wire::Order>(3));
  expect_problem(s, "order 3");

  s = in_place_keys();
  s.set_value_bytes(2);
  expect_problem(s, "value_bytes 2");

  s = in_place_keys();
  s.clear_keys();
  expect_problem(s, "keys missing");

  s = in_place_keys();
  s.mutable_keys()->clear_buffer_id();
  expect_problem(s, "keys names neither");

  s = in_place_keys();
  s.mutable_keys()->set_offset(6);  // i32: multiples of 4
  expect_problem(s, "keys.offset 6");

  s = in_place_keys();
  s.set_value_bytes(8);
  expect_problem(s, "values missing");

  s = in_place_keys();
  *s.mutable_values() = buffer_ref(3, 0);
  expect_problem(s, "values given although value_bytes is 0");

  s = in_place_keys();
  s.set_value_bytes(8);
  *s.mutable_values() = buffer_ref(3, 12);
  expect_problem(s, "values.offset 12");

  s = in_place_keys();
  *s.mutable_keys_out() = buffer_ref(3, 0);
  expect_problem(s, "in_place job with keys_out");

  s = in_place_keys();
  s.set_in_place(false);
  expect_problem(s, "keys_out missing");

  s = sample_submit();
  s.clear_values_out();
  expect_problem(s, "values_out missing");

  s = sample_submit();
  s.mutable_keys_out()->set_offset(4);  // u64: multiples of 8
  expect_problem(s, "keys_out.offset 4");

  s = sample_submit();
  s.mutable_values_out()->set_offset(1);
  expect_problem(s, "values_out.offset 1");

  s = in_place_keys();
  s.set_in_place(false);
  *s.mutable_keys_out() = buffer_ref(2, 0);
  *s.mutable_values_out() = buffer_ref(3, 0);
  expect_problem(s, "values_out given for a job without values");

  // 2^62 u64 keys with 8-byte values: 2^66 bytes.
  s = sample_submit();
  s.set_count(1ULL << 62);
  expect_problem(s, "overflows");
  s.set_count((1ULL << 60) - 1);
  EXPECT_EQ(check_submit(s), std::nullopt);
}

}  // namespace
}  // namespace gpusort::proto
