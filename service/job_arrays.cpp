#include "service/job_arrays.hpp"

#include "service/fd_check.hpp"

#include <gpusort/units.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <optional>

namespace gpusort::service {

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
  if (::fstat(a.fd->get(), &st) == 0) {
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

/// Memory for a staged array, allocated when the job runs (not while it waits in the queue).
std::unique_ptr<std::byte[]> staging(std::uint64_t bytes)
{
  if (bytes > std::numeric_limits<std::size_t>::max()) throw std::bad_alloc{};
  // Default-initialised: every byte is written by copy_in or the engine before it is read.
  return std::unique_ptr<std::byte[]>{new std::byte[static_cast<std::size_t>(bytes)]};
}

struct job_data {
  dtype type{};
  std::uint64_t count{};
  std::uint32_t value_bytes{};
  bool in_place{};
  order direction{};
  array keys;
  std::optional<array> values;
  std::optional<array> keys_out;
  std::optional<array> values_out;
  /// Every input and output staged: sort the staged inputs in place, then write the outputs.
  [[nodiscard]] bool all_staged() const
  {
    const auto staged = [](const std::optional<array>& a) { return !a || a->staged(); };
    return keys.staged() && (!values || values->staged()) && staged(keys_out) &&
           staged(values_out);
  }
};

void check_cancel(const sort_options& options)
{
  if (options.cancel.cancelled()) throw cancelled{"the job was cancelled"};
}

sort_report run(job_data& d, engine& eng, const sort_options& options)
{
  // Inputs: memory as is, files read into staging.
  std::unique_ptr<std::byte[]> keys_stage, values_stage, keys_out_stage, values_out_stage;
  std::byte* keys_in = d.keys.memory;
  std::byte* values_in = d.values ? d.values->memory : nullptr;
  if (d.keys.staged()) {
    keys_stage = staging(d.keys.length);
    copy_in(d.keys.checked, 0, keys_stage.get(), d.keys.length);
    keys_in = keys_stage.get();
  }
  check_cancel(options);
  if (d.values && d.values->staged()) {
    values_stage = staging(d.values->length);
    copy_in(d.values->checked, 0, values_stage.get(), d.values->length);
    values_in = values_stage.get();
  }
  check_cancel(options);

  sort_job job{.keys = {keys_in, d.count, d.type}};
  if (d.values) job.values = value_array{values_in, d.count, d.value_bytes};
  const bool engine_in_place = d.in_place || d.all_staged();
  if (!engine_in_place && d.count > 0) {
    if (d.keys_out->staged()) {
      keys_out_stage = staging(d.keys_out->length);
      job.keys_out = keys_out_stage.get();
    } else {
      job.keys_out = d.keys_out->memory;
    }
    if (d.values_out) {
      if (d.values_out->staged()) {
        values_out_stage = staging(d.values_out->length);
        job.values_out = values_out_stage.get();
      } else {
        job.values_out = d.values_out->memory;
      }
    }
  }
  sort_options with_order = options;
  with_order.direction = d.direction;
  const sort_report report = eng.sort(job, with_order);

  // Staged results go to their files only now that the sort is complete: an in-place file is
  // not touched by a job that failed or was cancelled. A cancellation that comes after the sort
  // is too late: the job completes (in memory its result is already in place).
  const auto write_back = [](const array& target, const void* sorted) {
    if (target.staged()) copy_out(target.checked, 0, sorted, target.length);
  };
  if (d.in_place) {
    write_back(d.keys, keys_in);
    if (d.values) write_back(*d.values, values_in);
  } else {
    write_back(*d.keys_out, job.keys_out != nullptr ? job.keys_out : keys_in);
    if (d.values_out) write_back(*d.values_out, job.values_out != nullptr ? job.values_out
                                                                          : values_in);
  }
  return report;
}

}  // namespace

prepared_job prepare_job(const wire::SubmitRequest& request, std::vector<unique_fd> fds,
                         buffer_pool& pool, std::uint64_t session, engine& eng)
{
  std::vector<std::shared_ptr<unique_fd>> shared;
  shared.reserve(fds.size());
  for (unique_fd& fd : fds) shared.push_back(std::make_shared<unique_fd>(std::move(fd)));

  auto d = std::make_shared<job_data>();
  d->type = *proto::from_wire(request.dtype());  // check_submit proved it valid
  d->count = request.count();
  d->value_bytes = request.value_bytes();
  d->in_place = request.in_place();
  d->direction = *proto::from_wire(request.order());
  const std::uint64_t key_bytes = size_of(d->type);
  const fd_access input_access = d->in_place ? fd_access::read_write : fd_access::read;
  d->keys = resolve("keys", request.keys(), key_bytes, d->count, input_access, shared, pool,
                    session);
  if (d->value_bytes != 0)
    d->values = resolve("values", request.values(), d->value_bytes, d->count, input_access,
                        shared, pool, session);
  if (!d->in_place) {
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
  const std::vector<const array*>& written = d->in_place ? inputs : outputs;
  const auto clash = [](const array* a, const array* b) {
    return status_error{wire::BAD_REQUEST, a->what + " and " + b->what + " overlap"};
  };
  for (std::size_t i = 0; i < written.size(); ++i)
    for (std::size_t j = i + 1; j < written.size(); ++j)
      if (overlap(*written[i], *written[j])) throw clash(written[i], written[j]);
  for (const array* out : outputs)
    for (const array* in : inputs)
      if (overlap(*out, *in)) throw clash(in, out);

  prepared_job p;
  p.type = d->type;
  p.count = d->count;
  p.bytes = d->keys.length + (d->values ? d->values->length : 0);
  // The engine's working memory is about one copy of the data (its scratch buffer); staging
  // holds each staged array once (outputs need their own unless everything is staged).
  std::uint64_t staged = 0;
  for (const array* a : inputs)
    if (a->staged()) staged += a->length;
  if (!d->in_place && !d->all_staged())
    for (const array* a : outputs)
      if (a->staged()) staged += a->length;
  p.host_bytes = p.bytes + staged;
  for (const array* a : inputs)
    if (a->in_pool) p.buffer_ids.push_back(a->buffer_id);
  for (const array* a : outputs)
    if (a->in_pool) p.buffer_ids.push_back(a->buffer_id);
  p.run = [d, &eng](const sort_options& options) { return run(*d, eng, options); };
  return p;
}

}  // namespace gpusort::service
