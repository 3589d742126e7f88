// Turns a SUBMIT's DataRefs into memory a job can sort: shared buffers of the pool (leased, so
// that a RELEASE or a disconnect cannot free them under the job), shrink-sealed memfds (mapped
// after fd_check), and plain files (checked, then staged through the daemon's memory with
// pread/pwrite: a file someone truncates must not SIGBUS the daemon).
//
// Everything is checked here, before the job is admitted, so that a bad descriptor or range is
// a SUBMIT_REPLY error rather than a failed job.
#pragma once

#include "proto/messages.hpp"
#include "service/buffer_pool.hpp"
#include "service/unique_fd.hpp"

#include <gpusort/gpusort.hpp>

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpusort::service {

/// A request the daemon refuses, with the protocol status to answer.
class status_error : public std::runtime_error {
 public:
  status_error(wire::StatusCode code, const std::string& message)
      : std::runtime_error{message}, code_{code}
  {
  }
  [[nodiscard]] wire::StatusCode code() const noexcept { return code_; }

 private:
  wire::StatusCode code_;
};

/// A job ready to queue: what it costs in host memory and the work itself, which owns every
/// lease, mapping and descriptor it needs.
struct prepared_job {
  dtype type{};
  std::uint64_t count{};
  std::uint64_t bytes{};       ///< keys plus values
  std::uint64_t host_bytes{};  ///< staging copies plus the engine's working memory
  /// It runs on the lean path, given host_bytes as its limit: its fast path needs more than
  /// the whole budget, or it sorts files in place with a journal.
  bool lean{};
  std::vector<std::uint64_t> buffer_ids;  ///< the shared buffers it uses (RELEASE is refused)
  std::function<sort_report(const sort_options&)> run;
};

/// Checks and resolves `request` (already through proto::check_submit) with the frame's
/// descriptors. Throws status_error: NOT_FOUND for a buffer that is not the session's, BAD_FD
/// for a descriptor fd_check refuses, BAD_REQUEST for ranges past a buffer or overlapping
/// arrays.
prepared_job prepare_job(const wire::SubmitRequest& request, std::vector<unique_fd> fds,
                         buffer_pool& pool, std::uint64_t session, engine& eng,
                         std::uint64_t host_budget);

}  // namespace gpusort::service
