#include "service/request_handler.hpp"

#include "config/schema.hpp"
#include "service/job_arrays.hpp"
#include "service/system_info.hpp"

#include <gpusort/error.hpp>
#include <gpusort/units.hpp>

#include <spdlog/spdlog.h>

#include <unistd.h>

#include <algorithm>
#include <new>
#include <system_error>

namespace gpusort::service {

namespace {

wire::JobState to_wire(job_state s)
{
  switch (s) {
    case job_state::queued: return wire::JOB_STATE_QUEUED;
    case job_state::running: return wire::JOB_STATE_RUNNING;
    case job_state::succeeded: return wire::JOB_STATE_SUCCEEDED;
    case job_state::failed: return wire::JOB_STATE_FAILED;
    case job_state::cancelled: return wire::JOB_STATE_CANCELLED;
  }
  return wire::JOB_STATE_UNSPECIFIED;
}

void fill_report(wire::JobReport& out, const sort_report& r, double queue_seconds)
{
  out.set_elements(r.elements);
  out.set_bytes(r.bytes);
  out.set_seconds(r.seconds);
  out.set_rate(r.rate_bytes_per_second());
  out.set_engine(r.engine);
  for (const std::string& d : r.devices) out.add_devices(d);
  out.set_chunks(r.chunks);
  out.set_rounds(static_cast<std::uint32_t>(r.rounds));
  out.set_compensated_chunks(r.compensated_chunks);
  out.set_queue_seconds(queue_seconds);
  out.set_path(r.path);
  out.set_host_memory_limit(r.host_memory_limit);
  out.set_host_memory_bytes(r.host_memory_bytes);
  for (const stage_profile& p : r.profile) {
    wire::StageProfile& st = *out.add_stages();
    st.set_device(p.device);
    st.set_round(static_cast<std::uint32_t>(std::max(p.round, 0)));
    st.set_stage(p.stage);
    st.set_chunks(p.chunks);
    st.set_bytes(p.bytes);
    st.set_busy_seconds(p.busy_seconds);
    st.set_first_start(p.first_start);
    st.set_last_end(p.last_end);
    st.set_round_start(p.round_start);
  }
}

/// Position of a queued job in the daemon-wide queue (1 = next); 0 when not queued.
std::uint32_t position_of(const queue_snapshot& s, const job& j)
{
  for (std::size_t i = 0; i < s.queued.size(); ++i)
    if (s.queued[i].get() == &j) return static_cast<std::uint32_t>(i + 1);
  return 0;
}

}  // namespace

request_handler::request_handler(daemon_context& ctx, peer_credentials peer,
                                 std::uint64_t session, std::weak_ptr<outbox> out)
    : ctx_{ctx}, peer_{peer}, session_{session}, out_{std::move(out)}
{
}

request_handler::~request_handler() { disconnect(); }

std::size_t request_handler::active_jobs() const
{
  const std::lock_guard lock{mutex_};
  return jobs_.size();
}

void request_handler::reply(std::uint64_t request_id, const proto::message& m,
                            std::vector<unique_fd> fds)
{
  const std::uint16_t v = proto::type_of(m) == proto::message_type::error ||
                                  proto::type_of(m) == proto::message_type::hello_reply
                              ? proto::hello_version
                              : version_.value_or(proto::protocol_version);
  if (const auto out = out_.lock())
    out->send(proto::encode_frame(request_id, m, v), std::move(fds));
}

void request_handler::reply_error(std::uint64_t request_id, proto::message_type request,
                                  wire::StatusCode code, std::string text)
{
  reply(request_id, proto::make_error_reply(request, code, std::move(text)));
}

request_handler::verdict request_handler::handle(const proto::parse_error& error)
{
  spdlog::debug("session {}: {}: {}", session_, proto::name_of(error.kind), error.message);
  if (const auto out = out_.lock())
    out->send(proto::encode_error_reply(error, version_.value_or(proto::protocol_version)), {});
  return error.fatal() ? verdict::close : verdict::keep;
}

request_handler::verdict request_handler::handle(proto::frame f)
{
  const std::uint64_t id = f.header.request_id;
  try {
    dispatch(f);
  } catch (const status_error& e) {
    reply_error(id, f.type, e.code(), e.what());
  } catch (const std::bad_alloc&) {
    reply_error(id, f.type, wire::OUT_OF_MEMORY, "the daemon ran out of memory");
  } catch (const std::exception& e) {
    spdlog::error("session {}: {} request {}: {}", session_, proto::name_of(f.type), id,
                  e.what());
    reply_error(id, f.type, wire::INTERNAL, e.what());
  }
  return verdict::keep;
}

void request_handler::dispatch(proto::frame& f)
{
  const std::uint64_t id = f.header.request_id;
  if (f.type == proto::message_type::hello) {
    on_hello(id, std::get<wire::HelloRequest>(f.msg));
    return;
  }
  if (!version_)
    throw status_error{wire::FAILED_PRECONDITION,
                       std::string{proto::name_of(f.type)} + " before HELLO: the first request "
                                                             "on a connection must be HELLO"};
  switch (f.type) {
    case proto::message_type::allocate:
      on_allocate(id, std::get<wire::AllocateRequest>(f.msg));
      return;
    case proto::message_type::release:
      on_release(id, std::get<wire::ReleaseRequest>(f.msg));
      return;
    case proto::message_type::submit:
      on_submit(id, std::get<wire::SubmitRequest>(f.msg), std::move(f.fds));
      return;
    case proto::message_type::cancel: on_cancel(id, std::get<wire::CancelRequest>(f.msg)); return;
    case proto::message_type::job_status:
      on_job_status(id, std::get<wire::JobStatusRequest>(f.msg));
      return;
    case proto::message_type::daemon_status: on_daemon_status(id); return;
    default:
      // The parser lets only requests through; anything else is a bug of ours.
      throw status_error{wire::PROTOCOL_ERROR,
                         std::string{proto::name_of(f.type)} + " is not a request"};
  }
}

void request_handler::on_hello(std::uint64_t id, const wire::HelloRequest& r)
{
  if (version_)
    throw status_error{wire::FAILED_PRECONDITION, "a second HELLO on one connection"};
  if (r.min_version() < 1 || r.min_version() > r.max_version())
    throw status_error{wire::BAD_REQUEST, "HELLO versions " + std::to_string(r.min_version()) +
                                              ".." + std::to_string(r.max_version()) +
                                              " are not a range of versions from 1"};
  wire::HelloReply out;
  const std::uint32_t chosen = std::min<std::uint32_t>(r.max_version(), proto::protocol_version);
  if (chosen < r.min_version() || chosen < proto::min_protocol_version) {
    *out.mutable_status() = proto::make_status(
        wire::UNSUPPORTED_VERSION,
        "the daemon speaks protocol versions " + std::to_string(proto::min_protocol_version) +
            " to " + std::to_string(proto::protocol_version) + ", the client " +
            std::to_string(r.min_version()) + " to " + std::to_string(r.max_version()));
  } else {
    version_ = static_cast<std::uint16_t>(chosen);
    out.set_version(chosen);
  }
  wire::ServerInfo& info = *out.mutable_server();
  info.set_server_version(GPUSORT_VERSION);
  info.set_pid(static_cast<std::uint32_t>(::getpid()));
  for (const std::string& d : ctx_.devices) info.add_devices(d);
  info.set_max_body_bytes(proto::max_control_body);
  info.set_max_fds_per_frame(static_cast<std::uint32_t>(proto::max_fds_per_frame));
  info.set_max_buffer_bytes(ctx_.pool.capacity());
  info.set_pinned_pool_bytes(ctx_.pool.capacity());
  spdlog::info("session {}: HELLO from '{}' ({}), protocol {}", session_, r.client_name(),
               describe(peer_), chosen);
  reply(id, out);
}

void request_handler::on_allocate(std::uint64_t id, const wire::AllocateRequest& r)
{
  if (r.bytes() == 0) throw status_error{wire::BAD_REQUEST, "ALLOCATE of 0 bytes"};
  if (r.bytes() > ctx_.pool.capacity())
    throw status_error{wire::TOO_LARGE,
                       "a buffer of " + format_bytes(r.bytes()) +
                           " is larger than pinned_pool_bytes (" +
                           format_bytes(ctx_.pool.capacity()) +
                           "): raise pinned_pool_bytes in the daemon's configuration to at least " +
                           detail::exact_size(r.bytes())};
  buffer_grant grant;
  try {
    grant = ctx_.pool.allocate(r.bytes(), buffer_owner{.session = session_, .uid = peer_.uid});
  } catch (const out_of_memory& e) {
    throw status_error{wire::REJECTED_BUSY, e.what()};
  } catch (const invalid_argument& e) {
    throw status_error{wire::TOO_LARGE, e.what()};
  }
  if (disconnected_) {  // cannot happen on the session's thread; kept for the handler's tests
    ctx_.pool.release(grant.id, session_);
    return;
  }
  wire::AllocateReply out;
  out.set_buffer_id(grant.id);
  out.set_size(grant.size);
  std::vector<unique_fd> fds;
  fds.push_back(std::move(grant.client_fd));
  reply(id, out, std::move(fds));
}

void request_handler::on_release(std::uint64_t id, const wire::ReleaseRequest& r)
{
  {
    const std::lock_guard lock{mutex_};
    for (const auto& [job_id, e] : jobs_)
      if (std::find(e.buffer_ids.begin(), e.buffer_ids.end(), r.buffer_id()) != e.buffer_ids.end())
        throw status_error{wire::FAILED_PRECONDITION,
                           "buffer " + std::to_string(r.buffer_id()) + " is in use by job " +
                               std::to_string(job_id) + "; release it after its JOB_FINISHED"};
  }
  try {
    ctx_.pool.release(r.buffer_id(), session_);
  } catch (const invalid_argument&) {
    throw status_error{wire::NOT_FOUND, "buffer " + std::to_string(r.buffer_id()) +
                                            " is not a buffer of this connection"};
  }
  reply(id, wire::ReleaseReply{});
}

void request_handler::on_submit(std::uint64_t id, const wire::SubmitRequest& r,
                                std::vector<unique_fd> fds)
{
  if (auto problem = proto::check_submit(r)) throw status_error{wire::BAD_REQUEST, *problem};
  prepared_job p = prepare_job(r, std::move(fds), ctx_.pool, session_, ctx_.eng,
                               ctx_.queue.limits().host_budget);
  const std::uint64_t job_id = ctx_.next_job_id.fetch_add(1);
  const std::weak_ptr<request_handler> self = weak_from_this();
  job::callbacks cb{
      .on_progress =
          [self, id](const job& j, const progress_event& e) {
            if (const auto h = self.lock()) h->job_progress(id, j, e);
          },
      .on_finished =
          [self, id](const job& j, const job_outcome& o) {
            if (const auto h = self.lock()) h->job_finished(id, j, o);
          },
  };
  auto j = std::make_shared<job>(job_id, session_, static_cast<std::uint32_t>(peer_.pid), p.type,
                                 p.count, p.bytes, p.host_bytes, std::move(p.run), std::move(cb));
  j->set_lean(p.lean);
  {
    const std::lock_guard lock{mutex_};
    jobs_.emplace(job_id, job_entry{j, id, std::move(p.buffer_ids)});
  }
  // The reply must leave before any event of the job: the job's callbacks wait for this lock.
  const std::lock_guard order{events_mutex_};
  const admission a = ctx_.queue.submit(j);
  if (a.code != wire::OK) {
    {
      const std::lock_guard lock{mutex_};
      jobs_.erase(job_id);
    }
    spdlog::info("session {}: job of {} {} keys refused: {}: {}", session_, p.count,
                 name_of(p.type), proto::name_of(a.code), a.message);
    throw status_error{a.code, a.message};
  }
  wire::SubmitReply out;
  out.set_job_id(job_id);
  out.set_queue_position(a.queue_position);
  spdlog::debug("session {}: job {} accepted: {} {} keys, {} of host memory, queue position {}",
                session_, job_id, p.count, name_of(p.type), format_bytes(p.host_bytes),
                a.queue_position);
  reply(id, out);
}

std::shared_ptr<job> request_handler::find_job(std::uint64_t job_id) const
{
  const std::lock_guard lock{mutex_};
  const auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : it->second.j;
}

void request_handler::on_cancel(std::uint64_t id, const wire::CancelRequest& r)
{
  const std::shared_ptr<job> j = find_job(r.job_id());
  // The reply first: a queued job's JOB_FINISHED follows at once from cancel().
  if (!j)
    throw status_error{wire::NOT_FOUND, "no job " + std::to_string(r.job_id()) +
                                            " of this connection is queued or running"};
  reply(id, wire::CancelReply{});
  ctx_.queue.cancel(j);
}

void request_handler::on_job_status(std::uint64_t id, const wire::JobStatusRequest& r)
{
  const std::shared_ptr<job> j = find_job(r.job_id());
  if (!j)
    throw status_error{wire::NOT_FOUND, "no job " + std::to_string(r.job_id()) +
                                            " of this connection is queued or running"};
  wire::JobStatusReply out;
  fill_job_info(*out.mutable_job(), *j, position_of(ctx_.queue.snapshot(), *j));
  reply(id, out);
}

void request_handler::on_daemon_status(std::uint64_t id) { reply(id, daemon_status(ctx_)); }

void request_handler::job_progress(std::uint64_t request_id, const job& j,
                                   const progress_event& e)
{
  wire::ProgressEvent ev;
  ev.set_job_id(j.id());
  ev.set_round(static_cast<std::uint32_t>(e.round));
  ev.set_bytes_done(e.bytes_done);
  ev.set_bytes_total(e.bytes_total);
  ev.set_rate(j.round_rate());
  ev.set_rounds(static_cast<std::uint32_t>(e.rounds));
  const std::lock_guard order{events_mutex_};
  reply(request_id, ev);
}

void request_handler::job_finished(std::uint64_t request_id, const job& j,
                                   const job_outcome& outcome)
{
  {
    // Forgotten before the event leaves: a JOB_STATUS after JOB_FINISHED says NOT_FOUND.
    const std::lock_guard lock{mutex_};
    jobs_.erase(j.id());
  }
  wire::JobFinishedEvent ev;
  ev.set_job_id(j.id());
  *ev.mutable_status() = proto::make_status(outcome.code, outcome.message);
  if (outcome.code == wire::OK)
    fill_report(*ev.mutable_report(), outcome.report, outcome.queue_seconds);
  const std::lock_guard order{events_mutex_};
  reply(request_id, ev);
}

void request_handler::disconnect()
{
  if (disconnected_) return;
  disconnected_ = true;
  std::vector<std::shared_ptr<job>> mine;
  {
    const std::lock_guard lock{mutex_};
    for (const auto& [id, e] : jobs_) mine.push_back(e.j);
  }
  // What happened, not what was asked: a running job stops at its next check, or ends as it
  // would have when it is past its last one; its own end line says which.
  std::size_t cancelled = 0, asked = 0;
  for (const auto& j : mine) {
    const cancel_result r = ctx_.queue.cancel(j);
    cancelled += r == cancel_result::cancelled ? 1 : 0;
    asked += r == cancel_result::asked ? 1 : 0;
  }
  // Running jobs hold leases: their buffers go back to the pool when they end.
  const std::uint64_t released = ctx_.pool.release_all(session_);
  if (cancelled + asked != 0 || released != 0)
    spdlog::info("session {}: disconnected: {} queued job(s) cancelled, {} running job(s) asked "
                 "to stop, {} buffer(s) released",
                 session_, cancelled, asked, released);
}

void fill_job_info(wire::JobInfo& info, const job& j, std::uint32_t queue_position)
{
  const job::snapshot s = j.status();
  info.set_job_id(j.id());
  info.set_state(to_wire(s.state));
  info.set_dtype(proto::to_wire(j.type()));
  info.set_count(j.count());
  info.set_bytes(j.bytes());
  info.set_queue_position(queue_position);
  info.set_round(static_cast<std::uint32_t>(s.round));
  info.set_bytes_done(s.bytes_done);
  info.set_bytes_total(s.bytes_total);
  info.set_seconds(s.seconds);
  info.set_client_pid(j.client_pid());
  info.set_host_memory(j.host_bytes());
  info.set_lean(j.lean());
}

wire::DaemonStatusReply daemon_status(daemon_context& ctx)
{
  wire::DaemonStatusReply out;
  out.set_server_version(GPUSORT_VERSION);
  out.set_uptime_seconds(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - ctx.started).count());
  const queue_snapshot q = ctx.queue.snapshot();
  const host_memory mem = read_host_memory();
  for (const std::string& name : ctx.devices) {
    wire::DeviceStatus& d = *out.add_devices();
    d.set_name(name);
    if (name == "cpu") {
      d.set_model(cpu_model());
      d.set_memory_total(mem.total);
      d.set_memory_free(mem.available);
    }
    d.set_memory_budget(ctx.cfg.device_memory_budget.value_or(0));
    d.set_running_jobs(static_cast<std::uint32_t>(q.running.size()));
  }
  out.set_host_memory_budget(ctx.queue.limits().host_budget);
  out.set_host_memory_used(q.host_used);
  const pool_stats pool = ctx.pool.stats();
  out.set_pinned_pool_bytes(pool.capacity);
  out.set_pinned_pool_used(pool.bytes_in_use);
  out.set_buffers(static_cast<std::uint32_t>(pool.buffers_in_use));
  out.set_clients(ctx.clients_open.load());
  out.set_queued_jobs(static_cast<std::uint32_t>(q.queued.size()));
  out.set_running_jobs(static_cast<std::uint32_t>(q.running.size()));
  for (const auto& j : q.running) fill_job_info(*out.add_jobs(), *j, 0);
  for (std::size_t i = 0; i < q.queued.size(); ++i)
    fill_job_info(*out.add_jobs(), *q.queued[i], static_cast<std::uint32_t>(i + 1));
  wire::Totals& t = *out.mutable_totals();
  t.set_jobs_submitted(q.totals.submitted);
  t.set_jobs_succeeded(q.totals.succeeded);
  t.set_jobs_failed(q.totals.failed);
  t.set_jobs_cancelled(q.totals.cancelled);
  t.set_jobs_rejected(q.totals.rejected);
  t.set_bytes_sorted(q.totals.bytes_sorted);
  t.set_connections(ctx.connections_total.load());
  return out;
}

}  // namespace gpusort::service
