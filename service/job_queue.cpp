#include "service/job_queue.hpp"

#include "config/schema.hpp"
#include "core/checks.hpp"
#include "core/fault.hpp"
#include "service/fd_check.hpp"
#include "service/system_info.hpp"

#include <gpusort/error.hpp>
#include <gpusort/units.hpp>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <new>
#include <system_error>

namespace gpusort::service {

namespace {

// Progress frames are for people and progress bars: ten a second is plenty, and a tiny job
// must not flood its client with hundreds of frames.
constexpr auto progress_interval = std::chrono::milliseconds{100};

double seconds_since(std::chrono::steady_clock::time_point t)
{
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

/// A job that was stopped: by its client (CANCELLED) or by the daemon's shutdown.
bool stopped(wire::StatusCode code) noexcept
{
  return code == wire::CANCELLED || code == wire::SHUTTING_DOWN;
}

}  // namespace

// ---- job ------------------------------------------------------------------------------------

job::job(std::uint64_t id, std::uint64_t session, std::uint32_t client_pid, dtype type,
         std::uint64_t count, std::uint64_t bytes, std::uint64_t host_bytes,
         std::function<sort_report(const sort_options&)> run, callbacks cb)
    : id_{id},
      session_{session},
      client_pid_{client_pid},
      type_{type},
      count_{count},
      bytes_{bytes},
      host_bytes_{host_bytes},
      run_{std::move(run)},
      callbacks_{std::move(cb)}
{
}

job::snapshot job::status() const
{
  const std::lock_guard lock{mutex_};
  return snapshot{.state = state_,
                  .round = last_.round,
                  .bytes_done = last_.bytes_done,
                  .bytes_total = last_.bytes_total,
                  .seconds = seconds_since(accepted_)};
}

double job::round_rate() const
{
  const std::lock_guard lock{mutex_};
  const double seconds = seconds_since(round_start_);
  return seconds > 0 ? static_cast<double>(last_.bytes_done) / seconds : 0.0;
}

void job::progress(const progress_event& e)
{
  {
    const std::lock_guard lock{mutex_};
    const auto now = std::chrono::steady_clock::now();
    const bool round_end = e.bytes_done == e.bytes_total;
    const bool new_round = e.round != last_.round || round_start_ == decltype(round_start_){};
    if (new_round) round_start_ = now;
    last_ = e;
    if (!round_end && !new_round && now - last_sent_ < progress_interval) return;
    last_sent_ = now;
  }
  if (callbacks_.on_progress) callbacks_.on_progress(*this, e);
}

// ---- job_queue ------------------------------------------------------------------------------

queue_limits queue_limits_of(const config& cfg, unsigned workers)
{
  return queue_limits{.workers = workers,
                      .max_queued = cfg.max_queued_jobs,
                      .host_budget = cfg.host_memory_budget.value_or(default_host_budget()),
                      .admission = cfg.admission};
}

job_queue::job_queue(queue_limits limits) : limits_{limits}
{
  GPUSORT_EXPECTS(limits_.workers > 0, "a job queue needs at least one worker");
  workers_.reserve(limits_.workers);
  for (unsigned i = 0; i < limits_.workers; ++i) workers_.emplace_back([this] { work(); });
}

job_queue::~job_queue()
{
  {
    const std::lock_guard lock{mutex_};
    accepting_ = false;
    stopping_ = true;
  }
  cancel_all("the daemon is shutting down");
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

admission job_queue::submit(const std::shared_ptr<job>& j)
{
  const std::lock_guard lock{mutex_};
  const auto refuse = [&](wire::StatusCode code, std::string text) {
    ++totals_.rejected;
    return admission{.code = code, .message = std::move(text), .queue_position = 0};
  };
  if (!accepting_) return refuse(wire::SHUTTING_DOWN, "the daemon is shutting down");
  if (j->host_bytes() > limits_.host_budget)
    return refuse(wire::TOO_LARGE,
                  "the job needs " + format_bytes(j->host_bytes()) +
                      " of host memory, more than host_memory_budget (" +
                      format_bytes(limits_.host_budget) +
                      "): raise host_memory_budget in the daemon's configuration to at least " +
                      detail::exact_size(j->host_bytes()));
  const std::uint64_t ahead = host_used_ + host_queued_;
  const bool fits_now = ahead <= limits_.host_budget &&
                        j->host_bytes() <= limits_.host_budget - ahead;
  const bool worker_free = running_.size() + queued_.size() < limits_.workers;
  const bool starts_now = fits_now && worker_free && queued_.empty();
  if (!starts_now) {
    if (limits_.admission == admission_policy::reject && !fits_now)
      return refuse(wire::REJECTED_BUSY,
                    "the job needs " + format_bytes(j->host_bytes()) + " of host memory; " +
                        format_bytes(ahead) + " of " + format_bytes(limits_.host_budget) +
                        " are taken by other jobs (admission: reject); retry later");
    if (queued_.size() >= limits_.max_queued)
      return refuse(wire::REJECTED_BUSY, "the queue is full (" +
                                             std::to_string(limits_.max_queued) +
                                             " jobs waiting, max_queued_jobs); retry later");
  }
  const auto position = static_cast<std::uint32_t>(starts_now ? 0 : queued_.size() + 1);
  queued_.push_back(j);
  host_queued_ += j->host_bytes();
  ++totals_.submitted;
  wake_.notify_all();
  return admission{.code = wire::OK, .message = {}, .queue_position = position};
}

bool job_queue::head_fits() const
{
  if (queued_.empty() || running_.size() >= limits_.workers) return false;
  const std::uint64_t need = queued_.front()->host_bytes();
  // Admitted under a larger budget that set_limits lowered since: it had the promise that it
  // would run, and keeps it, alone.
  if (need > limits_.host_budget) return running_.empty();
  return host_used_ <= limits_.host_budget && need <= limits_.host_budget - host_used_;
}

void job_queue::work()
{
  for (;;) {
    std::shared_ptr<job> j;
    {
      std::unique_lock lock{mutex_};
      wake_.wait(lock, [&] { return stopping_ || head_fits(); });
      if (stopping_) return;
      j = std::move(queued_.front());
      queued_.pop_front();
      host_queued_ -= j->host_bytes();
      host_used_ += j->host_bytes();
      running_.push_back(j);
      const std::lock_guard job_lock{j->mutex_};
      j->state_ = job_state::running;
      j->started_ = std::chrono::steady_clock::now();
    }
    job_outcome outcome;
    outcome.queue_seconds = std::chrono::duration<double>(j->started_ - j->accepted_).count();
    std::function<sort_report(const sort_options&)> run = std::move(j->run_);
    try {
      sort_options options;
      options.cancel = j->token_;
      options.on_progress = [raw = j.get()](const progress_event& e) { raw->progress(e); };
      // Cancelled while it waited for the worker: the engine would check too, but only after it
      // staged the inputs.
      if (j->token_.cancelled()) throw cancelled{"the job was cancelled"};
      outcome.report = run(options);
    } catch (...) {
      const double queued = outcome.queue_seconds;
      outcome = outcome_of(std::current_exception());
      outcome.queue_seconds = queued;
    }
    run = nullptr;  // its leases and mappings end before anyone hears that the job ended
    if (outcome.code == wire::CANCELLED) {
      const std::lock_guard lock{j->mutex_};
      if (!j->shutdown_reason_.empty()) {
        outcome.code = wire::SHUTTING_DOWN;
        outcome.message = j->shutdown_reason_;
      }
    }
    // A lost context fails every later CUDA call of this process: say so, and stop taking jobs,
    // so that the daemon can exit and its supervisor start a fresh one.
    const bool lost = outcome.code != wire::OK && !stopped(outcome.code) && detail::device_lost();
    if (lost) {
      outcome.code = wire::INTERNAL;
      outcome.message += "; the GPU context is lost (a sticky CUDA error): gpusortd exits so "
                         "that its supervisor restarts it";
    }
    {
      const std::lock_guard lock{mutex_};
      host_used_ -= j->host_bytes();
      running_.erase(std::find(running_.begin(), running_.end(), j));
      count(*j, outcome);
      ++finishing_;
    }
    wake_.notify_all();
    const std::string message = outcome.message;
    finish(j, std::move(outcome));
    std::function<void(const std::string&)> report;
    {
      const std::lock_guard lock{mutex_};
      --finishing_;
      if (lost) {
        accepting_ = false;
        if (!device_lost_reported_) report = on_device_lost_;
        device_lost_reported_ = true;
      }
    }
    if (report) report(message);
  }
}

void job_queue::on_device_lost(std::function<void(const std::string&)> handler)
{
  const std::lock_guard lock{mutex_};
  on_device_lost_ = std::move(handler);
}

void job_queue::count(const job& j, const job_outcome& outcome)
{
  switch (outcome.code) {
    case wire::OK:
      ++totals_.succeeded;
      totals_.bytes_sorted += j.bytes();
      break;
    case wire::CANCELLED:
    case wire::SHUTTING_DOWN: ++totals_.cancelled; break;
    default: ++totals_.failed; break;
  }
}

void job_queue::finish(const std::shared_ptr<job>& j, job_outcome outcome)
{
  {
    const std::lock_guard lock{j->mutex_};
    if (j->finished_) return;
    j->finished_ = true;
    j->state_ = outcome.code == wire::OK    ? job_state::succeeded
                : stopped(outcome.code)     ? job_state::cancelled
                                            : job_state::failed;
  }
  // One line for every job's end, so that an operator can follow the daemon's work. A job
  // asked to stop after its last check ran to its end: the line says so (issue 43: the log
  // said "cancelled" at the disconnect, then "done").
  if (outcome.code == wire::OK) {
    const sort_report& r = outcome.report;
    spdlog::info("job {} done{}: {} elements ({}) in {:.3f} s ({:.2f} GiB/s), engine {}, {} "
                 "round(s), path {}, host memory {} of {}, queued {:.3f} s",
                 j->id(),
                 j->token_.cancelled() ? " (asked to stop after its last check for it: it ran to "
                                         "its end)"
                                       : "",
                 r.elements, format_bytes(r.bytes), r.seconds,
                 r.seconds > 0 ? static_cast<double>(r.bytes) / r.seconds / (1024.0 * 1024 * 1024)
                               : 0.0,
                 r.engine, r.rounds, r.path.empty() ? "none" : r.path,
                 format_bytes(r.host_memory_bytes), format_bytes(r.host_memory_limit),
                 outcome.queue_seconds);
  } else if (stopped(outcome.code)) {
    spdlog::info("job {} cancelled: {}", j->id(), outcome.message);
  } else {
    spdlog::warn("job {} failed: {}: {}", j->id(), proto::name_of(outcome.code), outcome.message);
  }
  try {
    if (j->callbacks_.on_finished) j->callbacks_.on_finished(*j, outcome);
  } catch (const std::exception& e) {
    spdlog::error("job {}: reporting its end failed: {}", j->id(), e.what());
  }
}

cancel_result job_queue::cancel(const std::shared_ptr<job>& j) { return cancel(j, {}); }

cancel_result job_queue::cancel(const std::shared_ptr<job>& j, const std::string& shutdown)
{
  const job_outcome outcome =
      shutdown.empty()
          ? job_outcome{.code = wire::CANCELLED,
                        .message = "the job was cancelled while it waited in the queue"}
          : job_outcome{.code = wire::SHUTTING_DOWN, .message = shutdown};
  {
    const std::lock_guard lock{mutex_};
    const auto queued = std::find(queued_.begin(), queued_.end(), j);
    if (queued == queued_.end()) {
      if (std::find(running_.begin(), running_.end(), j) == running_.end())
        return cancel_result::gone;
      if (!shutdown.empty()) {
        const std::lock_guard job_lock{j->mutex_};
        j->shutdown_reason_ = shutdown;
      }
      j->token_.cancel();
      return cancel_result::asked;
    }
    host_queued_ -= j->host_bytes();
    queued_.erase(queued);
    count(*j, outcome);
    ++finishing_;
  }
  j->token_.cancel();
  j->run_ = nullptr;  // off the queue, no worker can take it any more
  // The head may have changed: a job behind this one may fit now.
  wake_.notify_all();
  finish(j, outcome);
  const std::lock_guard lock{mutex_};
  --finishing_;
  return cancel_result::cancelled;
}

void job_queue::stop_accepting()
{
  const std::lock_guard lock{mutex_};
  accepting_ = false;
}

void job_queue::cancel_all(const std::string& why)
{
  std::vector<std::shared_ptr<job>> all;
  {
    const std::lock_guard lock{mutex_};
    all.assign(queued_.begin(), queued_.end());
    all.insert(all.end(), running_.begin(), running_.end());
  }
  for (const auto& j : all) cancel(j, why);
}

bool job_queue::idle() const
{
  const std::lock_guard lock{mutex_};
  return queued_.empty() && running_.empty() && finishing_ == 0;
}

queue_limits job_queue::limits() const
{
  const std::lock_guard lock{mutex_};
  return limits_;
}

void job_queue::set_limits(const queue_limits& limits)
{
  {
    const std::lock_guard lock{mutex_};
    const unsigned workers = limits_.workers;
    limits_ = limits;
    limits_.workers = workers;
  }
  wake_.notify_all();  // a larger budget may let the head start now
}

queue_snapshot job_queue::snapshot() const
{
  const std::lock_guard lock{mutex_};
  queue_snapshot s;
  s.running.assign(running_.begin(), running_.end());
  s.queued.assign(queued_.begin(), queued_.end());
  s.host_used = host_used_;
  s.totals = totals_;
  return s;
}

job_outcome job_queue::outcome_of(std::exception_ptr error)
{
  // Exceptions stop here: every failure of a job becomes a status with its message.
  try {
    std::rethrow_exception(std::move(error));
  } catch (const cancelled& e) {
    return {.code = wire::CANCELLED, .message = e.what()};
  } catch (const out_of_memory& e) {
    return {.code = wire::OUT_OF_MEMORY, .message = e.what()};
  } catch (const std::bad_alloc&) {
    return {.code = wire::OUT_OF_MEMORY, .message = "the daemon ran out of host memory"};
  } catch (const fd_check_error& e) {
    return {.code = wire::BAD_FD, .message = e.what()};
  } catch (const io_error& e) {  // a client's file shrank, or its disk is full
    return {.code = wire::BAD_FD, .message = e.what()};
  } catch (const config_error& e) {
    return {.code = wire::BAD_REQUEST, .message = e.what()};
  } catch (const invalid_argument& e) {
    return {.code = wire::BAD_REQUEST, .message = e.what()};
  } catch (const std::system_error& e) {
    return {.code = wire::INTERNAL, .message = e.what()};
  } catch (const std::exception& e) {
    return {.code = wire::INTERNAL, .message = e.what()};
  } catch (...) {
    return {.code = wire::INTERNAL, .message = "unknown error"};
  }
}

}  // namespace gpusort::service
