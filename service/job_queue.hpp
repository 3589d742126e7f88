// The daemon's jobs and the queue that admits them against the host memory budget.
//
// A job is accepted (SUBMIT_REPLY OK) only when it can ever run: its memory need is at most the
// whole host budget. It then waits in one FIFO queue until a worker is free and its need fits
// beside the running jobs' (strict FIFO: a large job at the head is not overtaken by small ones,
// so it cannot starve). Workers: one with GPUs (each job takes every GPU and alone saturates the
// PCIe links; the engine would serialise GPU jobs anyway), `max_running_jobs` on the CPU engine.
// With admission `reject` a job that does not fit now is refused instead of queued.
#pragma once

#include <gpusort/config.hpp>
#include <gpusort/gpusort.hpp>

#include "proto/messages.hpp"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace gpusort::service {

enum class job_state : std::uint8_t { queued, running, succeeded, failed, cancelled };

/// How a job ended: a protocol status and, when OK, the engine's report.
struct job_outcome {
  wire::StatusCode code{wire::OK};
  std::string message;
  sort_report report;
  double queue_seconds{};
};

/// One accepted SUBMIT. `run` does the work (staging, engine, copy-out) and throws on failure;
/// the queue turns its exceptions into statuses (job_queue::status_of).
class job {
 public:
  struct callbacks {
    /// From a worker thread, at most every few milliseconds, and once per round at its end.
    std::function<void(const job&, const progress_event&)> on_progress;
    /// Exactly once, from a worker thread (or from cancel(), for a queued job).
    std::function<void(const job&, const job_outcome&)> on_finished;
  };

  job(std::uint64_t id, std::uint64_t session, std::uint32_t client_pid, dtype type,
      std::uint64_t count, std::uint64_t bytes, std::uint64_t host_bytes,
      std::function<sort_report(const sort_options&)> run, callbacks cb);

  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }
  [[nodiscard]] std::uint64_t session() const noexcept { return session_; }
  [[nodiscard]] std::uint32_t client_pid() const noexcept { return client_pid_; }
  [[nodiscard]] dtype type() const noexcept { return type_; }
  [[nodiscard]] std::uint64_t count() const noexcept { return count_; }
  [[nodiscard]] std::uint64_t bytes() const noexcept { return bytes_; }
  /// What admission counts against host_memory_budget.
  [[nodiscard]] std::uint64_t host_bytes() const noexcept { return host_bytes_; }
  /// Whether it runs on the lean path (in place, within host_bytes); set before it is queued.
  [[nodiscard]] bool lean() const noexcept { return lean_; }
  void set_lean(bool lean) noexcept { lean_ = lean; }
  [[nodiscard]] const cancel_token& token() const noexcept { return token_; }

  struct snapshot {
    job_state state{};
    int round{};
    std::uint64_t bytes_done{};
    std::uint64_t bytes_total{};
    double seconds{};  ///< since accepted
  };
  [[nodiscard]] snapshot status() const;
  /// Bytes per second over the current round so far.
  [[nodiscard]] double round_rate() const;

 private:
  friend class job_queue;
  void progress(const progress_event& e);

  const std::uint64_t id_;
  const std::uint64_t session_;
  const std::uint32_t client_pid_;
  const dtype type_;
  const std::uint64_t count_;
  const std::uint64_t bytes_;
  const std::uint64_t host_bytes_;
  bool lean_{};
  // Taken by the worker that runs the job, or dropped when a queued job is cancelled: what it
  // holds (buffer leases, mappings, descriptors) is released before JOB_FINISHED is sent.
  std::function<sort_report(const sort_options&)> run_;
  const callbacks callbacks_;
  cancel_token token_;
  const std::chrono::steady_clock::time_point accepted_{std::chrono::steady_clock::now()};
  /// Set (under mutex_) when the daemon's shutdown cancels the job: why, for its JOB_FINISHED.
  std::string shutdown_reason_;

  mutable std::mutex mutex_;
  job_state state_{job_state::queued};
  progress_event last_{};
  std::chrono::steady_clock::time_point started_{};
  std::chrono::steady_clock::time_point last_sent_{};
  std::chrono::steady_clock::time_point round_start_{};
  bool finished_{};
};

struct queue_limits {
  unsigned workers{1};
  unsigned max_queued{64};
  std::uint64_t host_budget{};
  admission_policy admission{admission_policy::wait};
};

/// The daemon's limits from its configuration (host_memory_budget `auto`: half the memory).
queue_limits queue_limits_of(const config& cfg, unsigned workers);

struct admission {
  wire::StatusCode code{wire::OK};
  std::string message;
  std::uint32_t queue_position{};  ///< 0: starts at once
};

/// What job_queue::cancel did: the daemon's log says what happened, not what was asked.
enum class cancel_result : std::uint8_t {
  gone,       ///< the job was neither queued nor running any more
  cancelled,  ///< it was queued: it has ended CANCELLED
  asked,      ///< it runs: it stops at its next check, or ends as it would have (its end says)
};

struct queue_totals {
  std::uint64_t submitted{};
  std::uint64_t succeeded{};
  std::uint64_t failed{};
  std::uint64_t cancelled{};
  std::uint64_t rejected{};
  std::uint64_t bytes_sorted{};
};

struct queue_snapshot {
  std::vector<std::shared_ptr<const job>> running;
  std::vector<std::shared_ptr<const job>> queued;  ///< in queue order
  std::uint64_t host_used{};
  queue_totals totals;
};

class job_queue {
 public:
  explicit job_queue(queue_limits limits);
  /// Cancels everything left and joins the workers.
  ~job_queue();
  job_queue(const job_queue&) = delete;
  job_queue& operator=(const job_queue&) = delete;

  /// Admits the job or says why not (TOO_LARGE, REJECTED_BUSY, SHUTTING_DOWN); an admitted
  /// job's callbacks fire later, never from within submit.
  admission submit(const std::shared_ptr<job>& j);

  /// Cancels a queued job (finished CANCELLED at once, on this thread) or asks a running one to
  /// stop (the engine checks between its passes and chunks: a job past its last check ends
  /// as it would have).
  cancel_result cancel(const std::shared_ptr<job>& j);

  /// No more submissions (SHUTTING_DOWN); queued and running jobs go on.
  void stop_accepting();
  /// Cancels every queued and running job because the daemon stops: each that stops ends with
  /// SHUTTING_DOWN and `why`, not CANCELLED, so that its client can tell a restart (try again
  /// later) from a cancellation of its own or a failure (issue 43).
  void cancel_all(const std::string& why);
  /// Nothing queued or running.
  [[nodiscard]] bool idle() const;
  [[nodiscard]] queue_snapshot snapshot() const;
  [[nodiscard]] queue_limits limits() const;
  /// New admission limits (SIGHUP): max_queued, host_budget and admission count for the next
  /// submissions and for the head of the queue; the worker count stays (`limits.workers` is
  /// ignored). Nothing admitted is refused afterwards: a queued job larger than a lowered
  /// budget runs once it can run alone, a queue longer than a lowered max_queued drains.
  void set_limits(const queue_limits& limits);

  /// The protocol status of an exception a job threw.
  static job_outcome outcome_of(std::exception_ptr error);

  /// Called once, from a worker after the failed job's JOB_FINISHED went out, when a job failed
  /// because the devices are lost (a sticky CUDA error: detail::device_lost()). The queue takes
  /// no more jobs then: every one would fail the same way until the process restarts.
  void on_device_lost(std::function<void(const std::string& reason)> handler);

 private:
  void work();
  /// cancel(), ending the job SHUTTING_DOWN with `shutdown` when that is not empty.
  cancel_result cancel(const std::shared_ptr<job>& j, const std::string& shutdown);
  [[nodiscard]] bool head_fits() const;  // under the lock
  /// Counts the outcome in the totals; under the lock, together with taking the job off the
  /// queue or the running list, so that a status never shows a job gone but not counted.
  void count(const job& j, const job_outcome& outcome);
  void finish(const std::shared_ptr<job>& j, job_outcome outcome);

  mutable std::mutex mutex_;
  queue_limits limits_;  ///< under the mutex: set_limits changes it while workers read it
  std::condition_variable wake_;
  std::deque<std::shared_ptr<job>> queued_;
  std::vector<std::shared_ptr<job>> running_;
  std::uint64_t host_used_{};   ///< by running jobs
  std::uint64_t host_queued_{}; ///< needs of the queued jobs
  /// Jobs off the queue whose on_finished has not returned yet: the daemon is idle only when
  /// every JOB_FINISHED has been handed to its session.
  std::size_t finishing_{};
  bool accepting_{true};
  bool stopping_{};
  bool device_lost_reported_{};
  std::function<void(const std::string&)> on_device_lost_;
  queue_totals totals_;
  std::vector<std::thread> workers_;
};

}  // namespace gpusort::service
