// The client library: one reader thread per connection turns the daemon's frames into replies
// (matched to the waiting request by request id) and job events (progress callbacks, the
// result a job's wait() returns). Requests are written under a mutex from any thread.
#include <gpusort/client.hpp>

#include "core/checks.hpp"
#include "proto/fd_passing.hpp"
#include "proto/frame.hpp"
#include "core/sys_io.hpp"

#include <gpusort/error.hpp>

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>

namespace gpusort::client {

namespace sys = detail::sys;


struct job_state_box {
  std::mutex mutex;
  std::condition_variable cv;
  std::uint64_t job_id{};
  std::uint32_t queue_position{};
  progress_callback on_progress;
  bool finished{};
  std::optional<sort_report> report;
  std::optional<error> failure;
};

struct connection_state {
  proto::unique_fd fd;
  std::mutex write_mutex;
  std::mutex mutex;
  std::condition_variable cv;
  std::uint64_t next_id{1};
  std::unordered_map<std::uint64_t, std::optional<proto::frame>> pending;
  std::unordered_set<std::uint64_t> ignored;  // replies nobody waits for (RELEASE of a buffer)
  std::unordered_map<std::uint64_t, std::shared_ptr<job_state_box>> jobs;  // by SUBMIT id
  bool closed{};
  status_code close_code{status_code::connection_lost};
  std::string close_reason;
  std::thread reader;
  server_info info;
  std::uint16_t version{proto::hello_version};

  ~connection_state() { shut(); }

  void shut() noexcept
  {
    if (fd) ::shutdown(fd.get(), SHUT_RDWR);
    if (reader.joinable() && reader.get_id() != std::this_thread::get_id()) reader.join();
  }

  [[nodiscard]] error closed_error() const
  {
    return error{close_code, close_reason.empty() ? "the connection to the daemon is closed"
                                                  : close_reason};
  }

  /// Sends a request; returns its id. The reply is awaited with wait_reply(id) unless `ignore`.
  /// A SUBMIT registers its job (`box`) under the same lock that picks the id, so that no
  /// event of the job can arrive before it is known.
  std::uint64_t send(const proto::message& m, std::span<const int> fds = {}, bool ignore = false,
                     const std::shared_ptr<job_state_box>& box = nullptr)
  {
    std::uint64_t id = 0;
    {
      const std::lock_guard lock{mutex};
      if (closed) throw closed_error();
      id = next_id++;
      if (ignore)
        ignored.insert(id);
      else
        pending.emplace(id, std::nullopt);
      if (box) jobs.emplace(id, box);
    }
    const std::vector<std::byte> bytes = proto::encode_frame(
        id, m, proto::type_of(m) == proto::message_type::hello ? proto::hello_version : version);
    try {
      const std::lock_guard lock{write_mutex};
      proto::send_frame(fd.get(), bytes, fds);
    } catch (const std::system_error& e) {
      std::unique_lock lock{mutex};
      pending.erase(id);
      ignored.erase(id);
      jobs.erase(id);
      // A daemon that refuses a peer says why (UNAUTHORIZED, REJECTED_BUSY) and closes: the
      // reader may still be reading that reason, which beats a bare EPIPE.
      cv.wait_for(lock, std::chrono::seconds{2}, [&] { return closed; });
      if (closed && close_code != status_code::connection_lost) throw closed_error();
      throw error{status_code::connection_lost,
                  std::string{"sending to the daemon failed: "} + e.what()};
    }
    return id;
  }

  proto::frame wait_reply(std::uint64_t id)
  {
    std::unique_lock lock{mutex};
    cv.wait(lock, [&] { return closed || pending.at(id).has_value(); });
    auto it = pending.find(id);
    if (!it->second) {
      pending.erase(it);
      throw closed_error();
    }
    proto::frame f = std::move(*it->second);
    pending.erase(it);
    return f;
  }

  void read_loop();
  void dispatch(proto::frame f);
  void end(status_code code, std::string reason);
};

void connection_state::end(status_code code, std::string reason)
{
  std::vector<std::shared_ptr<job_state_box>> orphans;
  {
    const std::lock_guard lock{mutex};
    if (!closed) {
      closed = true;
      close_code = code;
      close_reason = std::move(reason);
    }
    for (auto& [id, box] : jobs) orphans.push_back(box);
    jobs.clear();
  }
  cv.notify_all();
  for (const auto& box : orphans) {
    {
      const std::lock_guard lock{box->mutex};
      if (!box->finished) {
        box->finished = true;
        box->failure = closed_error();
      }
    }
    box->cv.notify_all();
  }
}

namespace {

status_code code_of(const wire::Status& s)
{
  const int c = s.code();
  return c >= 0 && c <= 13 ? static_cast<status_code>(c) : status_code::internal;
}

/// The Status of any reply or event that carries one.
const wire::Status* status_in(const proto::message& m)
{
  return std::visit(
      [](const auto& body) -> const wire::Status* {
        if constexpr (requires { body.status(); })
          return &body.status();
        else
          return nullptr;
      },
      m);
}

sort_report report_of(const wire::JobReport& r)
{
  sort_report out;
  out.elements = r.elements();
  out.bytes = r.bytes();
  out.seconds = r.seconds();
  out.engine = r.engine();
  out.devices.assign(r.devices().begin(), r.devices().end());
  out.chunks = r.chunks();
  out.rounds = static_cast<int>(r.rounds());
  out.compensated_chunks = r.compensated_chunks();
  out.queue_seconds = r.queue_seconds();
  out.path = r.path();
  out.host_memory_limit = r.host_memory_limit();
  out.host_memory_bytes = r.host_memory_bytes();
  for (const wire::StageProfile& p : r.stages())
    out.profile.push_back(stage_profile{.device = p.device(),
                                        .round = static_cast<int>(p.round()),
                                        .stage = p.stage(),
                                        .chunks = p.chunks(),
                                        .bytes = p.bytes(),
                                        .busy_seconds = p.busy_seconds(),
                                        .first_start = p.first_start(),
                                        .last_end = p.last_end(),
                                        .round_start = p.round_start(),
                                        .steps = {}});
  return out;
}

job_state state_of(wire::JobState s)
{
  switch (s) {
    case wire::JOB_STATE_QUEUED: return job_state::queued;
    case wire::JOB_STATE_RUNNING: return job_state::running;
    case wire::JOB_STATE_SUCCEEDED: return job_state::succeeded;
    case wire::JOB_STATE_FAILED: return job_state::failed;
    case wire::JOB_STATE_CANCELLED: return job_state::cancelled;
    default: return job_state::unknown;
  }
}

job_info info_of(const wire::JobInfo& j)
{
  job_info out;
  out.job_id = j.job_id();
  out.state = state_of(j.state());
  out.type = proto::from_wire(j.dtype());
  out.count = j.count();
  out.bytes = j.bytes();
  out.queue_position = j.queue_position();
  out.round = static_cast<int>(j.round());
  out.bytes_done = j.bytes_done();
  out.bytes_total = j.bytes_total();
  out.seconds = j.seconds();
  out.client_pid = j.client_pid();
  out.host_memory = j.host_memory();
  out.lean = j.lean();
  return out;
}

}  // namespace

void connection_state::dispatch(proto::frame f)
{
  const std::uint64_t id = f.header.request_id;
  if (f.type == proto::message_type::progress) {
    std::shared_ptr<job_state_box> box;
    {
      const std::lock_guard lock{mutex};
      if (const auto it = jobs.find(id); it != jobs.end()) box = it->second;
    }
    if (box && box->on_progress) {
      const auto& e = std::get<wire::ProgressEvent>(f.msg);
      box->on_progress(progress_event{.round = static_cast<int>(e.round()),
                                      .bytes_done = e.bytes_done(),
                                      .bytes_total = e.bytes_total(),
                                      .rounds = static_cast<int>(e.rounds()),
                                      .rate = e.rate(),
                                      .job_id = e.job_id()});
    }
    return;
  }
  if (f.type == proto::message_type::job_finished) {
    std::shared_ptr<job_state_box> box;
    {
      const std::lock_guard lock{mutex};
      if (const auto it = jobs.find(id); it != jobs.end()) {
        box = it->second;
        jobs.erase(it);
      }
    }
    if (!box) return;
    const auto& e = std::get<wire::JobFinishedEvent>(f.msg);
    {
      const std::lock_guard lock{box->mutex};
      box->finished = true;
      if (e.status().code() == wire::OK)
        box->report = report_of(e.report());
      else
        box->failure = error{code_of(e.status()), e.status().message()};
    }
    box->cv.notify_all();
    return;
  }
  if (f.type == proto::message_type::error && id == 0) {
    // The daemon refuses the connection (UNAUTHORIZED, REJECTED_BUSY) or lost the stream.
    const wire::Status& s = std::get<wire::ErrorReply>(f.msg).status();
    end(code_of(s), s.message());
    return;
  }
  {
    const std::lock_guard lock{mutex};
    if (ignored.erase(id) != 0) return;
    const auto it = pending.find(id);
    if (it == pending.end()) return;  // a reply to nothing we asked: ignore it
    it->second = std::move(f);
  }
  cv.notify_all();
}

void connection_state::read_loop()
{
  proto::frame_parser parser{proto::parser_options{.reads = proto::stream_direction::responses}};
  std::vector<std::byte> buf(proto::header_bytes + proto::max_control_body);
  bool versions_set = false;
  try {
    for (;;) {
      proto::received got = proto::receive(fd.get(), buf, proto::max_fds_per_frame);
      if (got.bytes == 0) {
        end(status_code::connection_lost, "the daemon closed the connection");
        return;
      }
      parser.feed(std::span<const std::byte>{buf.data(), got.bytes}, std::move(got.fds));
      while (auto result = parser.next()) {
        if (auto* e = std::get_if<proto::parse_error>(&*result)) {
          if (e->fatal()) {
            end(status_code::protocol_error, "unreadable frame from the daemon: " + e->message);
            return;
          }
          continue;
        }
        dispatch(std::get<proto::frame>(std::move(*result)));
        if (!versions_set) {
          std::uint16_t v = 0;
          {
            const std::lock_guard lock{mutex};
            v = version;
          }
          if (v != proto::hello_version) {
            parser.accept_versions(v, v);
            versions_set = true;
          }
        }
      }
    }
  } catch (const std::exception& e) {
    end(status_code::connection_lost, std::string{"reading from the daemon failed: "} + e.what());
  }
}

// ---- names and errors -------------------------------------------------------------------------

std::string_view name_of(status_code code) noexcept
{
  if (code == status_code::connection_lost) return "CONNECTION_LOST";
  const int c = static_cast<int>(code);
  if (c < 0 || c > 13) return "UNKNOWN_STATUS";
  return proto::name_of(static_cast<wire::StatusCode>(c));
}

std::string_view name_of(job_state state) noexcept
{
  switch (state) {
    case job_state::queued: return "queued";
    case job_state::running: return "running";
    case job_state::succeeded: return "succeeded";
    case job_state::failed: return "failed";
    case job_state::cancelled: return "cancelled";
    case job_state::unknown: break;
  }
  return "unknown";
}

error::error(status_code code, const std::string& message)
    : std::runtime_error{std::string{name_of(code)} + ": " + message}, code_{code}
{
}

namespace {

void check(const proto::frame& f)
{
  if (const wire::Status* s = status_in(f.msg); s != nullptr && s->code() != wire::OK)
    throw error{code_of(*s), s->message()};
}

template <typename Reply>
const Reply& reply_as(const proto::frame& f)
{
  check(f);
  const auto* r = std::get_if<Reply>(&f.msg);
  if (r == nullptr)
    throw error{status_code::protocol_error,
                std::string{"the daemon answered with "} + std::string{proto::name_of(f.type)}};
  return *r;
}

}  // namespace

// ---- shared_buffer ----------------------------------------------------------------------------

shared_buffer::~shared_buffer() { release(); }

shared_buffer::shared_buffer(shared_buffer&& other) noexcept
    : conn_{std::move(other.conn_)},
      id_{std::exchange(other.id_, 0)},
      data_{std::exchange(other.data_, nullptr)},
      size_{std::exchange(other.size_, 0)},
      fd_{std::exchange(other.fd_, -1)}
{
}

shared_buffer& shared_buffer::operator=(shared_buffer&& other) noexcept
{
  if (this != &other) {
    release();
    conn_ = std::move(other.conn_);
    id_ = std::exchange(other.id_, 0);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void shared_buffer::release() noexcept
{
  if (conn_ && id_ != 0) {
    try {
      wire::ReleaseRequest r;
      r.set_buffer_id(id_);
      conn_->send(proto::message{r}, {}, true);
    } catch (...) {  // the connection is gone: the daemon freed the buffer with it
    }
  }
  if (data_ != nullptr) ::munmap(data_, size_);
  if (fd_ >= 0) ::close(fd_);
  conn_.reset();
  id_ = 0;
  data_ = nullptr;
  size_ = 0;
  fd_ = -1;
}

// ---- job --------------------------------------------------------------------------------------

job::~job() = default;
job::job(job&&) noexcept = default;
job& job::operator=(job&&) noexcept = default;

std::uint64_t job::id() const noexcept { return state_ ? state_->job_id : 0; }
std::uint32_t job::queue_position() const noexcept
{
  return state_ ? state_->queue_position : 0;
}

sort_report job::wait()
{
  GPUSORT_EXPECTS(state_ != nullptr, "wait() on an empty job");
  std::unique_lock lock{state_->mutex};
  state_->cv.wait(lock, [&] { return state_->finished; });
  if (state_->failure) throw *state_->failure;
  return *state_->report;
}

bool job::wait_for(std::chrono::milliseconds timeout)
{
  GPUSORT_EXPECTS(state_ != nullptr, "wait_for() on an empty job");
  std::unique_lock lock{state_->mutex};
  return state_->cv.wait_for(lock, timeout, [&] { return state_->finished; });
}

bool job::done() const
{
  if (!state_) return true;
  const std::lock_guard lock{state_->mutex};
  return state_->finished;
}

void job::cancel()
{
  GPUSORT_EXPECTS(state_ != nullptr, "cancel() on an empty job");
  wire::CancelRequest r;
  r.set_job_id(state_->job_id);
  const proto::frame f = conn_->wait_reply(conn_->send(proto::message{r}));
  // NOT_FOUND: it finished meanwhile; its JOB_FINISHED says how.
  const wire::Status* s = status_in(f.msg);
  if (s != nullptr && s->code() == wire::NOT_FOUND) return;
  check(f);
}

job_info job::status()
{
  GPUSORT_EXPECTS(state_ != nullptr, "status() on an empty job");
  wire::JobStatusRequest r;
  r.set_job_id(state_->job_id);
  const proto::frame f = conn_->wait_reply(conn_->send(proto::message{r}));
  return info_of(reply_as<wire::JobStatusReply>(f).job());
}

// ---- connection -------------------------------------------------------------------------------

connection connection::connect(const std::string& socket_path, const std::string& client_name)
{
  sockaddr_un addr{};
  if (socket_path.empty() || socket_path.size() >= sizeof addr.sun_path)
    throw error{status_code::connection_lost,
                "'" + socket_path + "' is not a Unix socket path (1 to 107 bytes)"};
  auto state = std::make_shared<connection_state>();
  state->fd.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!state->fd)
    throw error{status_code::connection_lost, std::string{"socket: "} + std::strerror(errno)};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path.data(), socket_path.size());
  while (::connect(state->fd.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
    if (errno == EINTR) continue;
    const int err = errno;
    // The daemon runs, but the socket file (mode 0660) or its folder is not this user's: the
    // fix is the daemon's group, not starting another daemon.
    if (err == EACCES || err == EPERM)
      throw error{status_code::unauthorized,
                  std::string{"no permission to open the daemon's socket ("} +
                      std::strerror(err) + "): join the daemon's group (usermod -aG gpusort "
                      "USER, then log in again) or ask its administrator"};
    throw error{status_code::connection_lost,
                "cannot connect to the daemon at " + socket_path + ": " + std::strerror(err)};
  }
  connection_state* raw = state.get();
  state->reader = std::thread{[raw] { raw->read_loop(); }};

  connection c;
  c.state_ = std::move(state);
  wire::HelloRequest hello;
  hello.set_min_version(proto::min_protocol_version);
  hello.set_max_version(proto::protocol_version);
  hello.set_client_name(client_name);
  const proto::frame f = c.state_->wait_reply(c.state_->send(proto::message{hello}));
  const auto& reply = reply_as<wire::HelloReply>(f);
  server_info& info = c.state_->info;
  info.server_version = reply.server().server_version();
  info.pid = reply.server().pid();
  info.devices.assign(reply.server().devices().begin(), reply.server().devices().end());
  info.max_buffer_bytes = reply.server().max_buffer_bytes();
  info.pinned_pool_bytes = reply.server().pinned_pool_bytes();
  info.protocol_version = static_cast<std::uint16_t>(reply.version());
  {
    const std::lock_guard lock{c.state_->mutex};
    c.state_->version = info.protocol_version;
  }
  return c;
}

connection::~connection() { close(); }
connection::connection(connection&&) noexcept = default;
connection& connection::operator=(connection&& other) noexcept
{
  if (this != &other) {
    close();
    state_ = std::move(other.state_);
  }
  return *this;
}

const server_info& connection::server() const
{
  GPUSORT_EXPECTS(state_ != nullptr, "server() on a closed connection");
  return state_->info;
}

bool connection::is_open() const noexcept
{
  if (!state_) return false;
  const std::lock_guard lock{state_->mutex};
  return !state_->closed;
}

void connection::close()
{
  if (!state_) return;
  state_->shut();
  state_->end(status_code::connection_lost, "the connection was closed by this client");
  state_.reset();
}

shared_buffer connection::allocate_bytes(std::uint64_t bytes)
{
  GPUSORT_EXPECTS(state_ != nullptr, "allocate on a closed connection");
  wire::AllocateRequest r;
  r.set_bytes(bytes);
  proto::frame f = state_->wait_reply(state_->send(proto::message{r}));
  const auto& reply = reply_as<wire::AllocateReply>(f);
  shared_buffer b;
  b.conn_ = state_;
  b.id_ = reply.buffer_id();
  b.fd_ = f.fds.at(0).release();
  b.size_ = reply.size();
  void* p = sys::mmap(nullptr, b.size_, PROT_READ | PROT_WRITE, MAP_SHARED, b.fd_, 0);
  if (p == MAP_FAILED)
    throw error{status_code::out_of_memory,
                std::string{"mapping a shared buffer failed: "} + std::strerror(errno)};
  b.data_ = static_cast<std::byte*>(p);
  return b;
}

job connection::submit(const sort_request& request, progress_callback on_progress)
{
  GPUSORT_EXPECTS(state_ != nullptr, "submit on a closed connection");
  wire::SubmitRequest r;
  const bool records = request.record_bytes != 0;
  if (!records) {
    r.set_dtype(proto::to_wire(request.type));
    r.set_order(proto::to_wire(request.direction));
  }
  r.set_count(request.count);
  r.set_value_bytes(request.value_bytes);
  const bool argsort = request.indices_out.has_value();
  r.set_in_place(!argsort && !request.keys_out.has_value());
  r.set_stable(request.stable);
  r.set_profile(request.profile);
  r.set_float_order(request.floats == float_order::numpy ? wire::FLOAT_ORDER_NUMPY
                                                         : wire::FLOAT_ORDER_TOTAL);
  if (argsort) {
    r.set_kind(records ? wire::JOB_KIND_ARGSORT_RECORDS : wire::JOB_KIND_ARGSORT);
    r.set_index_bytes(request.index_bytes);
  } else if (records) {
    r.set_kind(wire::JOB_KIND_SORT_RECORDS);
  }
  if (records) {
    r.set_record_bytes(request.record_bytes);
    for (const key_field& f : request.key_fields) {
      wire::KeyField& w = *r.add_key_fields();
      w.set_type(proto::to_wire(f.type));
      w.set_offset(f.offset);
      w.set_length(f.type == column_type::bytes ? f.length : 0);
      w.set_order(proto::to_wire(f.direction));
    }
  }
  std::vector<int> fds;
  const auto set = [&](wire::DataRef& ref, const array_ref& a) {
    ref.set_offset(a.offset);
    if (a.fd < 0) {
      ref.set_buffer_id(a.buffer_id);
      return;
    }
    auto it = std::find(fds.begin(), fds.end(), a.fd);
    if (it == fds.end()) it = fds.insert(fds.end(), a.fd);
    ref.set_attached_fd(static_cast<std::uint32_t>(it - fds.begin()));
  };
  set(*r.mutable_keys(), request.keys);
  if (request.values) set(*r.mutable_values(), *request.values);
  if (request.keys_out) set(*r.mutable_keys_out(), *request.keys_out);
  if (request.values_out) set(*r.mutable_values_out(), *request.values_out);
  if (request.indices_out) set(*r.mutable_indices_out(), *request.indices_out);
  if (request.journal) set(*r.mutable_journal(), *request.journal);

  auto box = std::make_shared<job_state_box>();
  box->on_progress = std::move(on_progress);
  const std::uint64_t id = state_->send(proto::message{r}, fds, false, box);
  proto::frame f;
  try {
    f = state_->wait_reply(id);
    const auto& reply = reply_as<wire::SubmitReply>(f);
    const std::lock_guard lock{box->mutex};
    box->job_id = reply.job_id();
    box->queue_position = reply.queue_position();
  } catch (...) {
    const std::lock_guard lock{state_->mutex};
    state_->jobs.erase(id);
    throw;
  }
  job j;
  j.conn_ = state_;
  j.state_ = std::move(box);
  return j;
}

sort_report connection::sort(const sort_request& request, progress_callback on_progress)
{
  return submit(request, std::move(on_progress)).wait();
}

void connection::cancel(std::uint64_t job_id)
{
  GPUSORT_EXPECTS(state_ != nullptr, "cancel on a closed connection");
  wire::CancelRequest r;
  r.set_job_id(job_id);
  check(state_->wait_reply(state_->send(proto::message{r})));
}

job_info connection::job_status(std::uint64_t job_id)
{
  GPUSORT_EXPECTS(state_ != nullptr, "job_status on a closed connection");
  wire::JobStatusRequest r;
  r.set_job_id(job_id);
  const proto::frame f = state_->wait_reply(state_->send(proto::message{r}));
  return info_of(reply_as<wire::JobStatusReply>(f).job());
}

daemon_status connection::status()
{
  GPUSORT_EXPECTS(state_ != nullptr, "status on a closed connection");
  const proto::frame f =
      state_->wait_reply(state_->send(proto::message{wire::DaemonStatusRequest{}}));
  const auto& r = reply_as<wire::DaemonStatusReply>(f);
  daemon_status out;
  out.server_version = r.server_version();
  out.uptime_seconds = r.uptime_seconds();
  for (const auto& d : r.devices())
    out.devices.push_back(device_status{.name = d.name(),
                                        .model = d.model(),
                                        .memory_total = d.memory_total(),
                                        .memory_free = d.memory_free(),
                                        .memory_budget = d.memory_budget(),
                                        .running_jobs = d.running_jobs()});
  out.host_memory_budget = r.host_memory_budget();
  out.host_memory_used = r.host_memory_used();
  out.pinned_pool_bytes = r.pinned_pool_bytes();
  out.pinned_pool_used = r.pinned_pool_used();
  out.buffers = r.buffers();
  out.clients = r.clients();
  out.queued_jobs = r.queued_jobs();
  out.running_jobs = r.running_jobs();
  for (const auto& j : r.jobs()) out.jobs.push_back(info_of(j));
  const auto& t = r.totals();
  out.totals = daemon_totals{.jobs_submitted = t.jobs_submitted(),
                             .jobs_succeeded = t.jobs_succeeded(),
                             .jobs_failed = t.jobs_failed(),
                             .jobs_cancelled = t.jobs_cancelled(),
                             .jobs_rejected = t.jobs_rejected(),
                             .bytes_sorted = t.bytes_sorted(),
                             .connections = t.connections()};
  return out;
}

}  // namespace gpusort::client
