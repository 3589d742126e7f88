// Writes the seeds of fuzz/corpus/frame_parser/ and fuzz/corpus/request_validation/: a valid
// message of every type, and SUBMITs of every job shape, in each target's input layout (see the
// comment at the top of each target). Run by hand when the protocol changes:
//   make_seeds <repository>/fuzz/corpus
#include "proto/frame.hpp"
#include "proto/messages.hpp"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

namespace proto = gpusort::proto;
namespace wire = gpusort::wire;

void write(const std::filesystem::path& path, const std::vector<std::byte>& bytes)
{
  std::ofstream out{path, std::ios::binary};
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

wire::DataRef fd_ref(std::uint32_t index, std::uint64_t offset = 0)
{
  wire::DataRef ref;
  ref.set_attached_fd(index);
  ref.set_offset(offset);
  return ref;
}

wire::DataRef buffer_ref(std::uint64_t id, std::uint64_t offset = 0)
{
  wire::DataRef ref;
  ref.set_buffer_id(id);
  ref.set_offset(offset);
  return ref;
}

struct sample {
  std::string name;
  proto::message msg;
  std::size_t fds;
};

std::vector<sample> samples()
{
  std::vector<sample> out;
  for (const proto::message_type type : proto::all_message_types) {
    proto::message m = proto::make_message(type);
    std::string name{proto::name_of(type)};
    std::visit(
        [](auto& body) {
          if constexpr (requires { body.mutable_status(); })
            body.mutable_status()->set_code(wire::OK);
        },
        m);
    if (auto* hello = std::get_if<wire::HelloRequest>(&m)) {
      hello->set_min_version(1);
      hello->set_max_version(1);
      hello->set_client_name("gpusort-cli 0.1.0");
    }
    if (auto* allocate = std::get_if<wire::AllocateRequest>(&m)) allocate->set_bytes(1 << 20);
    if (auto* release = std::get_if<wire::ReleaseRequest>(&m)) release->set_buffer_id(1);
    if (auto* cancel = std::get_if<wire::CancelRequest>(&m)) cancel->set_job_id(3);
    if (auto* status = std::get_if<wire::JobStatusRequest>(&m)) status->set_job_id(3);
    if (auto* reply = std::get_if<wire::AllocateReply>(&m)) {
      reply->set_buffer_id(1);
      reply->set_size(1 << 20);
    }
    if (auto* error = std::get_if<wire::ErrorReply>(&m)) {
      error->mutable_status()->set_code(wire::PROTOCOL_ERROR);
      error->mutable_status()->set_message("bad magic");
    }
    if (std::holds_alternative<wire::SubmitRequest>(m)) continue;  // the shapes below
    const std::size_t fds = proto::expected_fd_count(m);
    out.push_back({name, std::move(m), fds});
  }

  wire::SubmitRequest in_place;
  in_place.set_dtype(wire::DTYPE_U32);
  in_place.set_count(1000);
  *in_place.mutable_keys() = fd_ref(0);
  in_place.set_in_place(true);
  out.push_back({"SUBMIT_in_place", in_place, 1});

  wire::SubmitRequest pairs;
  pairs.set_dtype(wire::DTYPE_F64);
  pairs.set_order(wire::ORDER_DESCENDING);
  pairs.set_count(1 << 20);
  pairs.set_value_bytes(8);
  pairs.set_stable(true);
  pairs.set_float_order(wire::FLOAT_ORDER_NUMPY);
  *pairs.mutable_keys() = fd_ref(0);
  *pairs.mutable_values() = fd_ref(1);
  *pairs.mutable_keys_out() = fd_ref(2, 8);
  *pairs.mutable_values_out() = fd_ref(3, 16);
  out.push_back({"SUBMIT_pairs_separate", pairs, 4});

  wire::SubmitRequest buffers;
  buffers.set_dtype(wire::DTYPE_I64);
  buffers.set_count(4096);
  *buffers.mutable_keys() = buffer_ref(1);
  *buffers.mutable_keys_out() = buffer_ref(1, 32768);
  out.push_back({"SUBMIT_buffers", buffers, 0});

  wire::SubmitRequest argsort;
  argsort.set_dtype(wire::DTYPE_F32);
  argsort.set_count(100);
  argsort.set_kind(wire::JOB_KIND_ARGSORT);
  argsort.set_index_bytes(4);
  *argsort.mutable_keys() = fd_ref(0);
  *argsort.mutable_indices_out() = fd_ref(0, 400);
  *argsort.mutable_keys_out() = buffer_ref(2);
  out.push_back({"SUBMIT_argsort", argsort, 1});

  // Records (issue 42): sorted into keys_out by a u64 key and a bytes key, and their argsort.
  wire::SubmitRequest records;
  records.set_kind(wire::JOB_KIND_SORT_RECORDS);
  records.set_record_bytes(100);
  records.set_count(1000);
  wire::KeyField* first = records.add_key_fields();
  first->set_type(wire::COLUMN_TYPE_U64);
  first->set_offset(0);
  wire::KeyField* second = records.add_key_fields();
  second->set_type(wire::COLUMN_TYPE_BYTES);
  second->set_offset(8);
  second->set_length(10);
  second->set_order(wire::ORDER_DESCENDING);
  *records.mutable_keys() = fd_ref(0);
  *records.mutable_keys_out() = fd_ref(1);
  out.push_back({"SUBMIT_records", records, 2});
  wire::SubmitRequest records_argsort = records;
  records_argsort.set_kind(wire::JOB_KIND_ARGSORT_RECORDS);
  records_argsort.clear_keys_out();
  records_argsort.set_index_bytes(8);
  *records_argsort.mutable_indices_out() = fd_ref(1);
  out.push_back({"SUBMIT_records_argsort", records_argsort, 2});

  // Edge cases: the largest count that fits, and one that overflows.
  wire::SubmitRequest huge = in_place;
  huge.set_dtype(wire::DTYPE_U64);
  huge.set_count(UINT64_MAX / 8);
  out.push_back({"SUBMIT_largest_count", huge, 1});
  huge.set_count(UINT64_MAX / 8 + 1);
  out.push_back({"SUBMIT_count_overflows", huge, 1});
  return out;
}

}  // namespace

int main(int argc, char** argv)
{
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds <corpus directory>\n");
    return 2;
  }
  const std::filesystem::path root{argv[1]};
  std::filesystem::create_directories(root / "frame_parser");
  std::filesystem::create_directories(root / "request_validation");

  std::vector<std::byte> stream;  // every sample back to back: one conversation
  for (const sample& s : samples()) {
    const std::vector<std::byte> frame = proto::encode_frame(42, s.msg);
    // frame_parser: direction "any", the frame's descriptors with each piece, the whole
    // frame in one piece.
    std::vector<std::byte> input{std::byte(0 | (s.fds << 2)), std::byte{0}};
    input.insert(input.end(), frame.begin(), frame.end());
    write(root / "frame_parser" / s.name, input);
    if (s.fds == 0) stream.insert(stream.end(), frame.begin(), frame.end());

    const auto type = proto::type_of(s.msg);
    if (proto::class_of(type) == proto::message_class::request) {
      const std::size_t index = static_cast<std::size_t>(
          std::find(std::begin(proto::all_message_types), std::end(proto::all_message_types),
                    type) -
          std::begin(proto::all_message_types));
      std::vector<std::byte> request{std::byte(index), std::byte(s.fds)};
      request.insert(request.end(), frame.begin() + proto::header_bytes, frame.end());
      write(root / "request_validation" / s.name, request);
    }
  }
  // The conversation without descriptors, fed 7 bytes at a time.
  std::vector<std::byte> conversation{std::byte{0}, std::byte{7}};
  conversation.insert(conversation.end(), stream.begin(), stream.end());
  write(root / "frame_parser" / "conversation_in_pieces", conversation);
  // Fatal headers: bad magic, reserved not zero, a body over the limit.
  std::vector<std::byte> bad = conversation;
  bad[2] = std::byte{'X'};
  write(root / "frame_parser" / "bad_magic", bad);
  bad = conversation;
  bad[2 + 12] = std::byte{1};
  write(root / "frame_parser" / "reserved_not_zero", bad);
  bad = conversation;
  bad[2 + 10] = std::byte{2};  // body_length += 128 KiB
  write(root / "frame_parser" / "body_too_long", bad);
  // An unknown type and an unsupported version are skipped and the parser reads on.
  bad = conversation;
  bad[2 + 6] = std::byte{0x7f};
  write(root / "frame_parser" / "unknown_type", bad);
  bad = conversation;
  bad[2 + 4] = std::byte{9};
  write(root / "frame_parser" / "unsupported_version", bad);
  return 0;
}
