#include "service/job_arrays.hpp"

#include "core/cpu_sort.hpp"
#include "pipeline/host_memory.hpp"
#include "service/fd_check.hpp"
#include "core/sys_io.hpp"

#include <gpusort/error.hpp>
#include <gpusort/rows.hpp>
#include <gpusort/units.hpp>

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>
#include <vector>

namespace gpusort::service {

namespace sys = detail::sys;

namespace {

/// One array of a job, resolved. Memory (a pool buffer or a mapped memfd) is used in place;
/// a plain file is staged.
struct array {
  std::string what;  ///< "keys", "values_out", ... for messages
  std::uint64_t length{};
  // Where it lives, for the overlap check: a pool buffer or a file (device, inode).
  bool in_pool{};
  std::uint64_t buffer_id{};
  dev_t dev{};
  ino_t ino{};
  std::uint64_t offset{};

  buffer_lease lease;
  std::shared_ptr<unique_fd> fd;  ///< shared when several arrays come from one descriptor
  checked_fd checked;
  mapped_region map;
  std::byte* memory{};  ///< the array in memory, null when staged (or empty)
  [[nodiscard]] bool staged() const noexcept { return memory == nullptr && length > 0; }
};

bool overlap(const array& a, const array& b)
{
  if (a.length == 0 || b.length == 0) return false;
  const bool same = a.in_pool ? (b.in_pool && a.buffer_id == b.buffer_id)
                              : (!b.in_pool && a.dev == b.dev && a.ino == b.ino);
  return same && a.offset < b.offset + b.length && b.offset < a.offset + a.length;
}

array resolve(const char* what, const wire::DataRef& ref, std::uint64_t element_bytes,
              std::uint64_t count, fd_access access,
              const std::vector<std::shared_ptr<unique_fd>>& fds, buffer_pool& pool,
              std::uint64_t session)
{
  array a;
  a.what = what;
  a.length = count * element_bytes;  // check_submit proved it fits in 64 bits
  a.offset = ref.offset();
  if (ref.source_case() == wire::DataRef::kBufferId) {
    a.in_pool = true;
    a.buffer_id = ref.buffer_id();
    try {
      a.lease = pool.lease(ref.buffer_id(), session);
    } catch (const invalid_argument&) {
      throw status_error{wire::NOT_FOUND, std::string{what} + ": buffer " +
                                              std::to_string(ref.buffer_id()) +
                                              " is not a buffer of this connection"};
    }
    if (a.offset > a.lease.size() || a.length > a.lease.size() - a.offset)
      throw status_error{wire::BAD_REQUEST,
                         std::string{what} + ": offset " + std::to_string(a.offset) + " + " +
                             std::to_string(a.length) + " bytes is past the end of buffer " +
                             std::to_string(a.buffer_id) + " (" +
                             std::to_string(a.lease.size()) + " bytes)"};
    a.memory = a.lease.data() + a.offset;
    return a;
  }
  a.fd = fds.at(ref.attached_fd());  // check_fd_count proved the index exists
  struct stat st {};
  if (sys::fstat(a.fd->get(), &st) == 0) {
    a.dev = st.st_dev;
    a.ino = st.st_ino;
  }
  try {
    a.checked = check_fd(a.fd->get(), fd_range{.offset = a.offset,
                                               .length = a.length,
                                               .element_size = element_bytes,
                                               .access = access});
    if (a.checked.kind == fd_kind::sealed_memory && a.length > 0) {
      a.map = map_region(a.checked);
      a.memory = a.map.data();
    }
  } catch (const fd_check_error& e) {
    throw status_error{wire::BAD_FD, std::string{what} + " (attached descriptor #" +
                                         std::to_string(ref.attached_fd()) + "): " + e.what()};
  }
  return a;
}

struct job_data {
  dtype type{};
  std::uint64_t count{};
  std::uint32_t value_bytes{};
  bool in_place{};
  order direction{};
  bool stable{};
  float_order floats{};
  bool profile{};
  bool argsort{};
  std::uint32_t index_bytes{};
  array keys;
  std::optional<array> values;
  std::optional<array> keys_out;
  std::optional<array> values_out;
  std::optional<array> indices_out;
  /// An in-place sort of files on the lean path: the client's journal file.
  std::shared_ptr<unique_fd> journal;
  /// The host memory the job may take beyond its arrays (sort_options::host_memory_limit).
  std::uint64_t host_limit{};
  /// The engine sorts on the CPU: it gets private copies of the arrays in shared memory.
  bool private_copies{};
  /// A records job (JOB_KIND_SORT_RECORDS, or with argsort JOB_KIND_ARGSORT_RECORDS): `keys`
  /// holds count records of record_bytes each, compared by `fields`.
  bool records{};
  std::uint32_t record_bytes{};
  std::vector<key_field> fields;
};

// Why private copies. The CPU engine sorts where the data lies, with passes that count the keys
// and then place them by those counts. Shared memory (a pool buffer, a client's memfd) stays
// writable by the client during the job, and a client that rewrote it between two passes made
// the engine place keys past the end of its buffers, in the daemon's own memory: gpusortd died
// of it (tests/service/hostile_test.cpp, RewritingASharedBufferDuringASortNeverHurtsTheDaemon).
// So on the CPU the engine works on memory only the daemon can write: the inputs are copied in
// once, and the outputs copied out once the job has succeeded (a failed or cancelled job leaves
// the client's memory as it was). The GPU engine needs none of this: it copies the data to the
// GPUs and sorts there.

/// Whether every array of a separate-output sort is in memory, so that the job can sort
/// private copies of the inputs in place and copy them to the outputs: one copy fewer.
bool sorts_copies_in_place(const job_data& d)
{
  if (!d.private_copies || d.argsort || d.in_place || !d.keys_out) return false;
  const auto in_memory = [](const std::optional<array>& a) { return !a || !a->staged(); };
  return !d.keys.staged() && in_memory(d.values) && in_memory(d.keys_out) &&
         in_memory(d.values_out);
}

/// Host memory the private copies take.
std::uint64_t private_copy_bytes(const job_data& d)
{
  if (!d.private_copies) return 0;
  const auto memory = [](const std::optional<array>& a) -> std::uint64_t {
    return a && !a->staged() ? a->length : 0;
  };
  std::uint64_t bytes = (d.keys.staged() ? 0 : d.keys.length) + memory(d.values);
  if (!d.in_place && !sorts_copies_in_place(d))
    bytes += memory(d.keys_out) + memory(d.values_out) + memory(d.indices_out);
  return bytes;
}

/// A private copy of an array in shared memory, and where its content goes when the job
/// succeeds (null: nowhere, an input only).
struct private_copy {
  detail::host_buffer copy;
  std::byte* result_to{};
};

/// Reads a plain file's range into memory for a records job, all of it or an io_error.
void read_whole(const array& a, std::byte* to)
{
  for (std::uint64_t done = 0; done < a.length;) {
    const ssize_t got = sys::pread(a.fd->get(), to + done, a.length - done,
                                   static_cast<off_t>(a.offset + done));
    if (got <= 0)
      throw io_error{a.what + " (the client's file): " +
                     (got == 0 ? std::string{"it ends early"} : std::strerror(errno))};
    done += static_cast<std::uint64_t>(got);
  }
}

void write_whole(const array& a, const std::byte* from)
{
  for (std::uint64_t done = 0; done < a.length;) {
    const ssize_t put = sys::pwrite(a.fd->get(), from + done, a.length - done,
                                    static_cast<off_t>(a.offset + done));
    if (put <= 0)
      throw io_error{a.what + " (the client's file): " +
                     (put == 0 ? std::string{"nothing written"} : std::strerror(errno))};
    done += static_cast<std::uint64_t>(put);
  }
}

/// A records job. The rows' sorts read the records and write outputs only through
/// permutations held in the daemon's own memory (pipeline/rows/), so a client that rewrites
/// its shared memory meanwhile gets a wrong order, never a write outside its arrays: records
/// in shared memory are sorted where they lie. The permutation of an argsort is made in the
/// daemon's memory (the refinement reads it back as row numbers) and copied out at the end.
/// Records in plain files are read into the daemon's memory and written back once sorted.
sort_report run_records(job_data& d, engine& eng, const sort_options& options)
{
  const std::uint64_t bytes = d.keys.length;
  detail::host_buffer staged_in;
  detail::host_buffer staged_out;
  std::byte* records = d.keys.memory;
  if (d.keys.staged()) {
    staged_in = detail::host_buffer{bytes};
    read_whole(d.keys, staged_in.as<std::byte>());
    records = staged_in.as<std::byte>();
  }
  const record_array rows{records, d.count, d.record_bytes};
  if (d.argsort) {
    detail::host_buffer indices{d.count * d.index_bytes};
    sort_report report =
        argsort_rows(eng, record_keys(rows, d.fields), indices.data(), d.index_bytes, options);
    if (d.count == 0) return report;
    if (d.indices_out->staged())
      write_whole(*d.indices_out, indices.as<std::byte>());
    else
      detail::parallel_copy(d.indices_out->memory, indices.data(), indices.size());
    return report;
  }
  std::byte* out = nullptr;
  if (!d.in_place && d.count > 0) {
    out = d.keys_out->memory;
    if (d.keys_out->staged()) {
      staged_out = detail::host_buffer{bytes};
      out = staged_out.as<std::byte>();
    }
  }
  sort_report report = sort_records(eng, rows, d.fields, out, options);
  if (d.in_place && d.keys.staged()) write_whole(d.keys, records);
  if (!d.in_place && d.count > 0 && d.keys_out->staged()) write_whole(*d.keys_out, out);
  return report;
}

sort_report run(job_data& d, engine& eng, const sort_options& options)
{
  if (d.records) {
    sort_options o = options;
    o.host_memory_limit = d.host_limit;
    o.floats = d.floats;
    o.profile = d.profile;
    return run_records(d, eng, o);
  }
  // Memory (pool buffers, sealed memfds) is sorted where it lies, or on the CPU through private
  // copies (above). Plain files are read and written by the engine itself with positioned I/O,
  // piece by piece through its pinned staging, overlapped with the sort: the daemon holds no
  // copy of them. A file truncated meanwhile is an io_error (BAD_FD), never a SIGBUS.
  std::vector<file_array> files;
  files.reserve(5);  // data() must stay valid: no reallocation while the job is built
  std::vector<private_copy> copies;
  const auto place = [&files](const array& a) -> void* {
    if (!a.staged()) return a.memory;
    return files.emplace_back(a.fd->get(), a.offset, a.length, a.what + " (the client's file)")
        .data();
  };
  // An input: a private copy of it when it is shared memory, its content going to `result_to`.
  const auto input = [&](const array& a, std::byte* result_to) -> void* {
    if (!d.private_copies || a.staged() || a.length == 0) return place(a);
    private_copy& c = copies.emplace_back(private_copy{detail::host_buffer{a.length}, result_to});
    detail::parallel_copy(c.copy.data(), a.memory, a.length);
    return c.copy.data();
  };
  const auto output = [&](const array& a) -> void* {
    if (!d.private_copies || a.staged() || a.length == 0) return place(a);
    return copies.emplace_back(private_copy{detail::host_buffer{a.length}, a.memory})
        .copy.data();
  };
  sort_options with_order = options;
  with_order.host_memory_limit = d.host_limit;
  with_order.direction = d.direction;
  with_order.stable = d.stable;
  with_order.floats = d.floats;
  with_order.profile = d.profile;
  sort_report report;
  if (d.argsort) {
    argsort_job job{.keys = {input(d.keys, nullptr), d.count, d.type},
                    .index_bytes = d.index_bytes};
    if (d.count > 0) {
      job.indices_out = output(*d.indices_out);
      if (d.keys_out) job.keys_out = output(*d.keys_out);
    }
    report = eng.argsort(job, with_order);
  } else if (sorts_copies_in_place(d)) {
    sort_job job{.keys = {input(d.keys, d.keys_out->memory), d.count, d.type}};
    if (d.values)
      job.values =
          value_array{input(*d.values, d.values_out->memory), d.count, d.value_bytes};
    report = eng.sort(job, with_order);
  } else {
    const auto in = [&](const array& a) { return input(a, d.in_place ? a.memory : nullptr); };
    sort_job job{.keys = {in(d.keys), d.count, d.type}};
    if (d.values) job.values = value_array{in(*d.values), d.count, d.value_bytes};
    if (d.journal) job.journal_fd = d.journal->get();
    if (!d.in_place && d.count > 0) {
      job.keys_out = output(*d.keys_out);
      if (d.values_out) job.values_out = output(*d.values_out);
    }
    report = eng.sort(job, with_order);
  }
  for (const private_copy& c : copies)
    if (c.result_to != nullptr) detail::parallel_copy(c.result_to, c.copy.data(), c.copy.size());
  return report;
}

}  // namespace

namespace {

/// The client's journal file: a regular file, open for reading and writing.
std::shared_ptr<unique_fd> journal_of(const wire::DataRef& ref,
                                      const std::vector<std::shared_ptr<unique_fd>>& fds)
{
  std::shared_ptr<unique_fd> fd = fds.at(ref.attached_fd());  // check_fd_count proved it
  struct stat st {};
  if (sys::fstat(fd->get(), &st) != 0 || !S_ISREG(st.st_mode))
    throw status_error{wire::BAD_FD, "journal: not a regular file"};
  if ((::fcntl(fd->get(), F_GETFL) & O_ACCMODE) != O_RDWR)
    throw status_error{wire::BAD_FD, "journal: not open for reading and writing"};
  return fd;
}

/// What the engine would need for the job on the fast and the lean path.
memory_estimate estimate_of(const job_data& d, engine& eng)
{
  sort_options options{.direction = d.direction, .stable = d.stable, .floats = d.floats};
  const key_array keys{nullptr, d.count, d.type};
  if (d.argsort) {
    static std::byte any_address;  // estimates read no array; an argsort needs its outputs named
    return eng.estimate_memory(
        argsort_job{.keys = keys,
                    .indices_out = &any_address,
                    .index_bytes = d.index_bytes,
                    .keys_out = d.keys_out ? &any_address : nullptr},
        options);
  }
  sort_job job{.keys = keys};
  if (d.values) job.values = value_array{nullptr, d.count, d.value_bytes};
  return eng.estimate_memory(job, options);
}

}  // namespace

namespace {

/// The arrays of a job the engine writes must be apart, and apart from those it reads.
void check_apart(const std::vector<const array*>& inputs, const std::vector<const array*>& outputs,
                 bool in_place)
{
  const std::vector<const array*>& written = in_place ? inputs : outputs;
  const auto clash = [](const array* a, const array* b) {
    return status_error{wire::BAD_REQUEST, a->what + " and " + b->what + " overlap"};
  };
  for (std::size_t i = 0; i < written.size(); ++i)
    for (std::size_t j = i + 1; j < written.size(); ++j)
      if (overlap(*written[i], *written[j])) throw clash(written[i], written[j]);
  for (const array* out : outputs)
    for (const array* in : inputs)
      if (overlap(*out, *in)) throw clash(in, out);
}

prepared_job prepare_records(const wire::SubmitRequest& request,
                             const std::vector<std::shared_ptr<unique_fd>>& shared,
                             buffer_pool& pool, std::uint64_t session, engine& eng,
                             std::uint64_t host_budget)
{
  auto d = std::make_shared<job_data>();
  d->records = true;
  d->type = dtype::u64;  // what the daemon's status shows for the job: its words' type
  d->count = request.count();
  d->record_bytes = request.record_bytes();
  for (const wire::KeyField& f : request.key_fields())
    d->fields.push_back({*proto::from_wire(f.type()), f.offset(), f.length(),
                         *proto::from_wire(f.order())});  // check_submit proved them valid
  d->in_place = request.in_place();
  d->floats = request.float_order() == wire::FLOAT_ORDER_NUMPY ? float_order::numpy
                                                                : float_order::total;
  d->profile = request.profile();
  d->argsort = request.kind() == wire::JOB_KIND_ARGSORT_RECORDS;
  d->index_bytes = request.index_bytes();
  const std::uint64_t bytes = d->count * d->record_bytes;
  d->keys = resolve("records", request.keys(), 1, bytes,
                    d->in_place ? fd_access::read_write : fd_access::read, shared, pool,
                    session);
  if (d->argsort)
    d->indices_out = resolve("indices_out", request.indices_out(), d->index_bytes, d->count,
                             fd_access::read_write, shared, pool, session);
  else if (!d->in_place)
    d->keys_out = resolve("records_out", request.keys_out(), 1, bytes, fd_access::read_write,
                          shared, pool, session);
  std::vector<const array*> outputs;
  if (d->keys_out) outputs.push_back(&*d->keys_out);
  if (d->indices_out) outputs.push_back(&*d->indices_out);
  check_apart({&d->keys}, outputs, d->in_place);

  prepared_job p;
  p.type = d->type;
  p.count = d->count;
  p.bytes = bytes;
  // The words, their sorted copy and the permutation (pipeline/rows/), the engine's sort of
  // the words beside them, and the records of plain files read into memory.
  const std::uint64_t index = d->argsort ? d->index_bytes : (d->count >> 32 ? 8 : 4);
  p.host_bytes = d->count * (2 * 8 + index) + 2 * d->count * (8 + index);
  if (d->keys.staged()) p.host_bytes += bytes;
  if (d->keys_out && d->keys_out->staged()) p.host_bytes += bytes;
  if (d->argsort) p.host_bytes += d->count * d->index_bytes;
  d->host_limit = host_budget;
  for (const array* a : outputs)
    if (a->in_pool) p.buffer_ids.push_back(a->buffer_id);
  if (d->keys.in_pool) p.buffer_ids.push_back(d->keys.buffer_id);
  p.run = [d, &eng](const sort_options& options) { return run(*d, eng, options); };
  return p;
}

}  // namespace

prepared_job prepare_job(const wire::SubmitRequest& request, std::vector<unique_fd> fds,
                         buffer_pool& pool, std::uint64_t session, engine& eng,
                         std::uint64_t host_budget)
{
  const std::vector<std::string> devices = eng.devices();
  std::vector<std::shared_ptr<unique_fd>> shared;
  shared.reserve(fds.size());
  for (unique_fd& fd : fds) shared.push_back(std::make_shared<unique_fd>(std::move(fd)));

  auto d = std::make_shared<job_data>();
  if (request.kind() == wire::JOB_KIND_SORT_RECORDS ||
      request.kind() == wire::JOB_KIND_ARGSORT_RECORDS)
    return prepare_records(request, shared, pool, session, eng, host_budget);
  d->type = *proto::from_wire(request.dtype());  // check_submit proved it valid
  d->count = request.count();
  d->value_bytes = request.value_bytes();
  d->in_place = request.in_place();
  d->direction = *proto::from_wire(request.order());
  d->stable = request.stable();
  d->floats = request.float_order() == wire::FLOAT_ORDER_NUMPY ? float_order::numpy
                                                                : float_order::total;
  d->profile = request.profile();
  d->argsort = request.kind() == wire::JOB_KIND_ARGSORT;
  d->index_bytes = request.index_bytes();
  d->private_copies = devices.empty() || devices.front() == "cpu";
  const std::uint64_t key_bytes = size_of(d->type);
  const fd_access input_access = d->in_place ? fd_access::read_write : fd_access::read;
  d->keys = resolve("keys", request.keys(), key_bytes, d->count, input_access, shared, pool,
                    session);
  if (d->value_bytes != 0)
    d->values = resolve("values", request.values(), d->value_bytes, d->count, input_access,
                        shared, pool, session);
  if (d->argsort) {
    d->indices_out = resolve("indices_out", request.indices_out(), d->index_bytes, d->count,
                             fd_access::read_write, shared, pool, session);
    if (request.has_keys_out())
      d->keys_out = resolve("keys_out", request.keys_out(), key_bytes, d->count,
                            fd_access::read_write, shared, pool, session);
  } else if (!d->in_place) {
    d->keys_out = resolve("keys_out", request.keys_out(), key_bytes, d->count,
                          fd_access::read_write, shared, pool, session);
    if (d->value_bytes != 0)
      d->values_out = resolve("values_out", request.values_out(), d->value_bytes, d->count,
                              fd_access::read_write, shared, pool, session);
  }

  // The engine reads the inputs while it writes the outputs: they must be apart, and so must
  // the arrays it writes.
  std::vector<const array*> inputs{&d->keys};
  if (d->values) inputs.push_back(&*d->values);
  std::vector<const array*> outputs;
  if (d->keys_out) outputs.push_back(&*d->keys_out);
  if (d->values_out) outputs.push_back(&*d->values_out);
  if (d->indices_out) outputs.push_back(&*d->indices_out);
  check_apart(inputs, outputs, d->in_place);

  prepared_job p;
  p.type = d->type;
  p.count = d->count;
  p.bytes = d->keys.length + (d->values ? d->values->length : 0);
  // The engine's working memory is about one copy of the data (its round-1 buffer or its
  // scratch); files are read and written in place, through the engine's fixed staging.
  p.host_bytes = p.bytes;
  // An argsort and a stable sort sort (key, position) pairs in buffers of their own
  // (pipeline/stable.hpp): the keys and positions, the round-1 buffer of those pairs, and for
  // pairs the gathered values.
  const std::uint64_t positions = d->count * (d->argsort ? d->index_bytes : 4);
  if (d->argsort || (d->stable && (d->values || (d->floats == float_order::numpy &&
                                                 is_float(d->type)))))
    p.host_bytes = 2 * (d->keys.length + positions) + (d->values ? d->values->length : 0);
  p.host_bytes += private_copy_bytes(*d);
  d->host_limit = host_budget;
  if (request.has_journal()) d->journal = journal_of(request.journal(), shared);
  // Over the whole budget, or files in place with a journal: the lean path, given the whole
  // budget (its chunks grow with it, and GPU jobs run one at a time anyway). It sorts no
  // private copy on the CPU: the host device sorts each chunk in buffers of its own.
  if (d->count >= 2 && (d->journal || p.host_bytes > host_budget)) {
    const memory_estimate e = estimate_of(*d, eng);
    if (e.lean_bytes > 0 && e.lean_bytes <= host_budget) {
      p.lean = true;
      p.host_bytes = host_budget;
      d->private_copies = false;
    } else if (e.lean_bytes > 0) {
      p.host_bytes = e.lean_bytes;  // admission refuses it, naming the least that works
    } else if (d->journal) {
      throw status_error{wire::TOO_LARGE, "this sort cannot run in place on the lean path: " +
                                              e.lean_refusal};
    }
  }
  for (const array* a : inputs)
    if (a->in_pool) p.buffer_ids.push_back(a->buffer_id);
  for (const array* a : outputs)
    if (a->in_pool) p.buffer_ids.push_back(a->buffer_id);
  p.run = [d, &eng](const sort_options& options) { return run(*d, eng, options); };
  return p;
}

}  // namespace gpusort::service
