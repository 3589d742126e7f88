// Shared by the proto tests: a filled-in message of every type, descriptors to attach, and the
// count of this process's open descriptors.
#pragma once

#include "tests/support/open_fds.hpp"

#include "proto/frame.hpp"

#include <google/protobuf/util/message_differencer.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpusort::proto::test {

using test_support::open_fd_count;

inline unique_fd make_memfd(const std::string& name = "proto-test")
{
  const int fd = ::memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) throw std::runtime_error{"memfd_create failed"};
  return unique_fd{fd};
}

inline std::vector<unique_fd> make_fds(std::size_t n)
{
  std::vector<unique_fd> fds;
  for (std::size_t i = 0; i < n; ++i) fds.push_back(make_memfd("fd" + std::to_string(i)));
  return fds;
}

inline wire::DataRef buffer_ref(std::uint64_t id, std::uint64_t offset)
{
  wire::DataRef ref;
  ref.set_buffer_id(id);
  ref.set_offset(offset);
  return ref;
}

inline wire::DataRef fd_ref(std::uint32_t index, std::uint64_t offset)
{
  wire::DataRef ref;
  ref.set_attached_fd(index);
  ref.set_offset(offset);
  return ref;
}

/// A SUBMIT sorting u64 keys from attached descriptor #0 with 8-byte values from buffer 7 into
/// descriptor #1 (keys) and #0 (values, further on): two descriptors.
inline wire::SubmitRequest sample_submit()
{
  wire::SubmitRequest s;
  s.set_dtype(wire::DTYPE_U64);
  s.set_order(wire::ORDER_DESCENDING);
  s.set_count(5'000'000'000ULL);  // past 2^32
  *s.mutable_keys() = fd_ref(0, 4096);
  s.set_value_bytes(8);
  *s.mutable_values() = buffer_ref(7, 0);
  *s.mutable_keys_out() = fd_ref(1, 0);
  *s.mutable_values_out() = fd_ref(0, 1ULL << 40);
  s.set_in_place(false);
  return s;
}

/// A message of `type` with every kind of field set to something other than its default.
inline message sample_message(message_type type)
{
  message m = make_message(type);
  std::visit(
      [](auto& body) {
        using M = std::decay_t<decltype(body)>;
        if constexpr (requires { body.mutable_status(); }) {
          body.mutable_status()->set_code(wire::OK);
          body.mutable_status()->set_message("fine");
        }
        if constexpr (std::is_same_v<M, wire::HelloRequest>) {
          body.set_min_version(1);
          body.set_max_version(3);
          body.set_client_name("test client \xce\xbb");
        } else if constexpr (std::is_same_v<M, wire::HelloReply>) {
          body.set_version(1);
          auto* s = body.mutable_server();
          s->set_server_version("0.1.0");
          s->set_pid(4242);
          s->add_devices("cuda:0");
          s->add_devices("cuda:1");
          s->set_max_body_bytes(max_control_body);
          s->set_max_fds_per_frame(4);
          s->set_max_buffer_bytes(1ULL << 36);
          s->set_pinned_pool_bytes(1ULL << 38);
        } else if constexpr (std::is_same_v<M, wire::AllocateRequest>) {
          body.set_bytes((1ULL << 33) + 5);
        } else if constexpr (std::is_same_v<M, wire::AllocateReply>) {
          body.set_buffer_id(17);
          body.set_size(1ULL << 34);
        } else if constexpr (std::is_same_v<M, wire::ReleaseRequest>) {
          body.set_buffer_id(17);
        } else if constexpr (std::is_same_v<M, wire::SubmitRequest>) {
          body = sample_submit();
        } else if constexpr (std::is_same_v<M, wire::SubmitReply>) {
          body.set_job_id(99);
          body.set_queue_position(3);
        } else if constexpr (std::is_same_v<M, wire::CancelRequest> ||
                             std::is_same_v<M, wire::JobStatusRequest>) {
          body.set_job_id(99);
        } else if constexpr (std::is_same_v<M, wire::JobStatusReply>) {
          auto* j = body.mutable_job();
          j->set_job_id(99);
          j->set_state(wire::JOB_STATE_RUNNING);
          j->set_dtype(wire::DTYPE_F32);
          j->set_count(1000);
          j->set_bytes(4000);
          j->set_round(2);
          j->set_bytes_done(100);
          j->set_bytes_total(4000);
          j->set_seconds(0.25);
          j->set_client_pid(77);
        } else if constexpr (std::is_same_v<M, wire::DaemonStatusReply>) {
          body.set_server_version("0.1.0");
          body.set_uptime_seconds(12.5);
          auto* d = body.add_devices();
          d->set_name("cuda:0");
          d->set_model("NVIDIA H100");
          d->set_memory_total(80ULL << 30);
          d->set_memory_free(70ULL << 30);
          d->set_memory_budget(60ULL << 30);
          d->set_running_jobs(1);
          body.set_host_memory_budget(1ULL << 40);
          body.set_host_memory_used(1ULL << 30);
          body.set_pinned_pool_bytes(4ULL << 30);
          body.set_pinned_pool_used(1ULL << 30);
          body.set_buffers(3);
          body.set_clients(2);
          body.set_queued_jobs(1);
          body.set_running_jobs(1);
          body.add_jobs()->set_job_id(5);
          body.add_jobs()->set_job_id(6);
          body.mutable_totals()->set_jobs_submitted(10);
          body.mutable_totals()->set_bytes_sorted(1ULL << 41);
        } else if constexpr (std::is_same_v<M, wire::ErrorReply>) {
          body.mutable_status()->set_code(wire::PROTOCOL_ERROR);
        } else if constexpr (std::is_same_v<M, wire::ProgressEvent>) {
          body.set_job_id(99);
          body.set_round(1);
          body.set_bytes_done(1ULL << 33);
          body.set_bytes_total(1ULL << 35);
          body.set_rate(12.5e9);
        } else if constexpr (std::is_same_v<M, wire::JobFinishedEvent>) {
          body.set_job_id(99);
          auto* r = body.mutable_report();
          r->set_elements(5'000'000'000ULL);
          r->set_bytes(40'000'000'000ULL);
          r->set_seconds(3.5);
          r->set_rate(40e9 / 3.5);
          r->set_engine("cpu-dsps");
          r->add_devices("cpu");
          r->set_chunks(12);
          r->set_rounds(2);
          r->set_compensated_chunks(1);
          r->set_queue_seconds(0.01);
        }
        // DaemonStatusRequest has no fields.
      },
      m);
  return m;
}

/// How many descriptors the sample of `type` takes (counted by hand, not by the code under test).
inline std::size_t sample_fd_count(message_type type)
{
  if (type == message_type::submit) return 2;
  if (type == message_type::allocate_reply) return 1;
  return 0;
}

inline bool same_message(const message& a, const message& b)
{
  if (a.index() != b.index()) return false;
  return std::visit(
      [&](const auto& x) {
        using M = std::decay_t<decltype(x)>;
        return google::protobuf::util::MessageDifferencer::Equals(x, std::get<M>(b));
      },
      a);
}

inline std::vector<std::byte> to_bytes(std::initializer_list<int> values)
{
  std::vector<std::byte> out;
  for (const int v : values) out.push_back(static_cast<std::byte>(v));
  return out;
}

}  // namespace gpusort::proto::test
