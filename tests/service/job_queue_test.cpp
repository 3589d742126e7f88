// The job queue without a daemon: admission against the host budget (wait, reject, too large,
// queue full), FIFO order, one running job per worker, cancellation of queued and running jobs,
// and the statuses that exceptions of a job become.
#include "service/fd_check.hpp"
#include "service/job_queue.hpp"

#include <gpusort/error.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>
#include <new>
#include <vector>

namespace gpusort::service {
namespace {

using namespace std::chrono_literals;

/// Jobs that block until released, recording the order they ran in and how they ended.
class harness {
 public:
  std::shared_ptr<job> make(std::uint64_t id, std::uint64_t host_bytes)
  {
    return std::make_shared<job>(
        id, 1, 42, dtype::u64, 10, 80, host_bytes,
        [this, id](const sort_options& o) {
          {
            std::unique_lock lock{mutex_};
            started_.push_back(id);
            cv_.notify_all();
            // Polls: a cancellation sets the token without waking this condition variable.
            while (!released_ && !o.cancel.cancelled()) cv_.wait_for(lock, 2ms);
          }
          if (o.cancel.cancelled()) throw cancelled{"cancelled in the test"};
          return sort_report{.elements = 10};
        },
        job::callbacks{.on_progress = {},
                       .on_finished = [this](const job& j, const job_outcome& o) {
                         const std::lock_guard lock{mutex_};
                         ended_.emplace_back(j.id(), o.code);
                         cv_.notify_all();
                       }});
  }
  void release()
  {
    const std::lock_guard lock{mutex_};
    released_ = true;
    cv_.notify_all();
  }
  /// Waits until `n` jobs started; returns their ids in order.
  std::vector<std::uint64_t> started(std::size_t n)
  {
    std::unique_lock lock{mutex_};
    cv_.wait_for(lock, 10s, [&] { return started_.size() >= n; });
    return started_;
  }
  std::vector<std::pair<std::uint64_t, wire::StatusCode>> ended(std::size_t n)
  {
    std::unique_lock lock{mutex_};
    cv_.wait_for(lock, 10s, [&] { return ended_.size() >= n; });
    return ended_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool released_{};
  std::vector<std::uint64_t> started_;
  std::vector<std::pair<std::uint64_t, wire::StatusCode>> ended_;
};

TEST(JobQueue, TooLargeForTheWholeBudget)
{
  harness h;
  job_queue q{{.workers = 1, .max_queued = 4, .host_budget = 1000}};
  const admission a = q.submit(h.make(1, 1001));
  EXPECT_EQ(a.code, wire::TOO_LARGE);
  EXPECT_NE(a.message.find("host_memory_budget"), std::string::npos) << a.message;
  // It says which key to raise and to what.
  EXPECT_NE(a.message.find("raise host_memory_budget"), std::string::npos) << a.message;
  EXPECT_NE(a.message.find("at least 1001"), std::string::npos) << a.message;
  EXPECT_EQ(q.snapshot().totals.rejected, 1u);
  EXPECT_TRUE(q.idle());
}

TEST(JobQueue, WaitPolicyQueuesUntilMemoryFrees)
{
  harness h;
  job_queue q{{.workers = 2, .max_queued = 4, .host_budget = 1000}};
  EXPECT_EQ(q.submit(h.make(1, 600)).queue_position, 0u);
  ASSERT_EQ(h.started(1).size(), 1u);
  // A worker is free but the memory is not: it waits, and a small job behind it waits too
  // (FIFO: the big one must not starve).
  const admission second = q.submit(h.make(2, 600));
  EXPECT_EQ(second.code, wire::OK);
  EXPECT_EQ(second.queue_position, 1u);
  EXPECT_EQ(q.submit(h.make(3, 100)).queue_position, 2u);
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(h.started(1), (std::vector<std::uint64_t>{1}));
  EXPECT_EQ(q.snapshot().queued.size(), 2u);
  EXPECT_EQ(q.snapshot().host_used, 600u);
  h.release();
  // Jobs 2 and 3 then run side by side: the order in which they record their start is theirs.
  std::vector<std::uint64_t> started = h.started(3);
  std::sort(started.begin(), started.end());
  EXPECT_EQ(started, (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(h.ended(3).size(), 3u);
  for (const auto& [id, code] : h.ended(3)) EXPECT_EQ(code, wire::OK) << id;
  const queue_snapshot s = q.snapshot();
  EXPECT_EQ(s.totals.succeeded, 3u);
  EXPECT_EQ(s.totals.bytes_sorted, 240u);
}

TEST(JobQueue, RejectPolicyRefusesWhatDoesNotFitNow)
{
  harness h;
  job_queue q{{.workers = 2,
               .max_queued = 4,
               .host_budget = 1000,
               .admission = admission_policy::reject}};
  EXPECT_EQ(q.submit(h.make(1, 600)).code, wire::OK);
  const admission busy = q.submit(h.make(2, 600));
  EXPECT_EQ(busy.code, wire::REJECTED_BUSY);
  EXPECT_NE(busy.message.find("admission: reject"), std::string::npos) << busy.message;
  EXPECT_EQ(q.submit(h.make(3, 400)).code, wire::OK);
  h.release();
  EXPECT_EQ(h.ended(2).size(), 2u);
}

TEST(JobQueue, FullQueueIsBusy)
{
  harness h;
  job_queue q{{.workers = 1, .max_queued = 1, .host_budget = 1000}};
  EXPECT_EQ(q.submit(h.make(1, 10)).code, wire::OK);
  h.started(1);
  EXPECT_EQ(q.submit(h.make(2, 10)).code, wire::OK);
  const admission full = q.submit(h.make(3, 10));
  EXPECT_EQ(full.code, wire::REJECTED_BUSY);
  EXPECT_NE(full.message.find("max_queued_jobs"), std::string::npos) << full.message;
  h.release();
  EXPECT_EQ(h.ended(2).size(), 2u);
}

TEST(JobQueue, CancelQueuedAndRunning)
{
  harness h;
  job_queue q{{.workers = 1, .max_queued = 4, .host_budget = 1000}};
  const auto running = h.make(1, 10);
  const auto queued = h.make(2, 10);
  q.submit(running);
  h.started(1);
  q.submit(queued);
  EXPECT_EQ(q.cancel(queued), cancel_result::cancelled);
  EXPECT_EQ(h.ended(1), (std::vector<std::pair<std::uint64_t, wire::StatusCode>>{
                            {2, wire::CANCELLED}}));
  EXPECT_EQ(queued->status().state, job_state::cancelled);
  EXPECT_EQ(q.cancel(running), cancel_result::asked);
  EXPECT_EQ(h.ended(2).back(), (std::pair<std::uint64_t, wire::StatusCode>{1, wire::CANCELLED}));
  EXPECT_EQ(q.cancel(running), cancel_result::gone) << "a finished job cannot be cancelled";
  EXPECT_EQ(q.snapshot().totals.cancelled, 2u);
  // Idle once the worker is back from reporting the end (just after the callback returned).
  bool idle = false;
  for (int i = 0; i < 1000 && !(idle = q.idle()); ++i) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(idle);
}

TEST(JobQueue, StopAcceptingAndDestructionCancel)
{
  harness h;
  {
    job_queue q{{.workers = 1, .max_queued = 4, .host_budget = 1000}};
    q.submit(h.make(1, 10));
    h.started(1);
    q.submit(h.make(2, 10));
    q.stop_accepting();
    EXPECT_EQ(q.submit(h.make(3, 10)).code, wire::SHUTTING_DOWN);
    // The destructor cancels what is left; the running job sees the token.
  }
  const auto ended = h.ended(2);
  ASSERT_EQ(ended.size(), 2u);
  // The daemon stops: SHUTTING_DOWN (try again later), not the CANCELLED of a client's CANCEL.
  for (const auto& [id, code] : ended) EXPECT_EQ(code, wire::SHUTTING_DOWN) << id;
}

// ---- new limits while it runs (SIGHUP) ---------------------------------------------------------

TEST(JobQueue, RaisedBudgetStartsTheWaitingHead)
{
  harness h;
  job_queue q{{.workers = 2, .max_queued = 4, .host_budget = 1000}};
  q.submit(h.make(1, 600));
  ASSERT_EQ(h.started(1).size(), 1u);
  EXPECT_EQ(q.submit(h.make(2, 600)).queue_position, 1u);
  q.set_limits({.workers = 7, .max_queued = 4, .host_budget = 2000});
  // No job ended, yet the head starts: the new budget wakes the workers.
  EXPECT_EQ(h.started(2), (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(q.limits().host_budget, 2000u);
  EXPECT_EQ(q.limits().workers, 2u) << "the worker count is fixed at construction";
  h.release();
  EXPECT_EQ(h.ended(2).size(), 2u);
}

TEST(JobQueue, LoweredBudgetRefusesNewJobsButRunsTheAdmittedOnes)
{
  harness h;
  job_queue q{{.workers = 2, .max_queued = 4, .host_budget = 1000}};
  q.submit(h.make(1, 300));
  ASSERT_EQ(h.started(1).size(), 1u);
  EXPECT_EQ(q.submit(h.make(2, 800)).queue_position, 1u);  // waits for job 1's memory
  q.set_limits({.workers = 2, .max_queued = 4, .host_budget = 500});
  // New submissions meet the new budget; job 2, admitted under the old one, stays queued.
  EXPECT_EQ(q.submit(h.make(3, 600)).code, wire::TOO_LARGE);
  EXPECT_EQ(q.submit(h.make(4, 100)).queue_position, 2u);
  h.release();
  // Job 2 is larger than the whole budget now: it runs once it can run alone, and job 4 after
  // it, rather than waiting for ever at the head of the queue.
  const auto ended = h.ended(3);
  ASSERT_EQ(ended.size(), 3u);
  for (const auto& [id, code] : ended) EXPECT_EQ(code, wire::OK) << id;
  EXPECT_EQ(h.started(3), (std::vector<std::uint64_t>{1, 2, 4}));
  // The last job's end is reported before its worker is done with it: idle follows shortly.
  bool idle = false;
  for (int i = 0; i < 1000 && !(idle = q.idle()); ++i) std::this_thread::sleep_for(1ms);
  EXPECT_TRUE(idle);
}

TEST(JobQueue, LoweredQueueLimitAndRejectPolicyApplyToTheNextSubmission)
{
  harness h;
  job_queue q{{.workers = 1, .max_queued = 4, .host_budget = 1000}};
  q.submit(h.make(1, 100));
  ASSERT_EQ(h.started(1).size(), 1u);
  EXPECT_EQ(q.submit(h.make(2, 100)).code, wire::OK);
  EXPECT_EQ(q.submit(h.make(3, 100)).code, wire::OK);
  q.set_limits({.workers = 1, .max_queued = 1, .host_budget = 1000});
  const admission full = q.submit(h.make(4, 100));
  EXPECT_EQ(full.code, wire::REJECTED_BUSY);
  EXPECT_NE(full.message.find("1 jobs waiting"), std::string::npos) << full.message;
  EXPECT_EQ(q.snapshot().queued.size(), 2u) << "the jobs already queued stay";
  q.set_limits({.workers = 1, .max_queued = 4, .host_budget = 1000,
                .admission = admission_policy::reject});
  EXPECT_EQ(q.submit(h.make(5, 900)).code, wire::REJECTED_BUSY);
  h.release();
  EXPECT_EQ(h.ended(3).size(), 3u);
}

TEST(JobQueue, ExceptionsBecomeStatuses)
{
  const auto code = [](auto e) { return job_queue::outcome_of(std::make_exception_ptr(e)).code; };
  EXPECT_EQ(code(cancelled{"x"}), wire::CANCELLED);
  EXPECT_EQ(code(out_of_memory{"x"}), wire::OUT_OF_MEMORY);
  EXPECT_EQ(code(std::bad_alloc{}), wire::OUT_OF_MEMORY);
  EXPECT_EQ(code(config_error{"x"}), wire::BAD_REQUEST);
  EXPECT_EQ(code(invalid_argument{"x"}), wire::BAD_REQUEST);
  EXPECT_EQ(code(fd_check_error{fd_error::too_small, "x"}), wire::BAD_FD);
  EXPECT_EQ(code(cuda_error{"x"}), wire::INTERNAL);
  EXPECT_EQ(code(std::runtime_error{"x"}), wire::INTERNAL);
  EXPECT_EQ(job_queue::outcome_of(std::make_exception_ptr(out_of_memory{"no room"})).message,
            "no room");
}

}  // namespace
}  // namespace gpusort::service
