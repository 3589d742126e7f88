// The engine's fault sweep, shared by the host-device sweep (tests/pipeline) and the GPU one
// (tests/gpu): a representative job, run once clean to count its calls per class, then again
// with call N failing for N over those calls. Each failure must be a clean error (one of
// <gpusort/error.hpp>'s types, never logic_error, with a message) or a success whose output
// verifies; nothing leaks; the input holds what the README promises (a separate output's input
// byte for byte; an in-place input the same pairs); and the same engine sorts the next job.
#pragma once

#include "core/fault.hpp"
#include "core/verify.hpp"
#include "tests/support/fault_sweep.hpp"

#include <gpusort/error.hpp>
#include <gpusort/gpusort.hpp>

#include <gtest/gtest.h>

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpusort::test_support {

struct sweep_shape {
  std::string name;
  std::uint64_t n{};
  bool in_place{};
  bool files{};  ///< file_array ranges instead of memory
  bool pairs{};  ///< u64 values beside the u64 keys
};

/// One job's arrays, in memory or in files of a temporary folder, and their checks.
class sweep_job {
 public:
  explicit sweep_job(sweep_shape shape) : shape_{std::move(shape)}
  {
    std::mt19937_64 rng{42};
    keys_.resize(shape_.n);
    // Duplicates too: equal keys take the compensated path out of core.
    for (auto& k : keys_) k = rng() % (shape_.n / 2 + 1);
    if (shape_.pairs) {
      values_.resize(shape_.n);
      for (std::uint64_t i = 0; i < shape_.n; ++i) values_[i] = i * 7919;
    }
    before_ = fingerprint_of(key_array{keys_.data(), shape_.n, dtype::u64}, vals(values_));
    if (shape_.files) {
      std::string pattern =
          (std::filesystem::temp_directory_path() / "gpusort-fault-XXXXXX").string();
      if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error{"mkdtemp failed"};
      dir_ = pattern;
      for (auto* f : {&keys_in_, &values_in_, &keys_out_, &values_out_}) f->fd = -1;
      open_file(keys_in_, "keys");
      if (shape_.pairs) open_file(values_in_, "values");
      if (!shape_.in_place) {
        open_file(keys_out_, "keys_out");
        if (shape_.pairs) open_file(values_out_, "values_out");
      }
    }
  }
  ~sweep_job()
  {
    for (auto* f : {&keys_in_, &values_in_, &keys_out_, &values_out_})
      if (f->fd >= 0) ::close(f->fd);
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  sweep_job(const sweep_job&) = delete;
  sweep_job& operator=(const sweep_job&) = delete;

  [[nodiscard]] const sweep_shape& shape() const { return shape_; }

  /// Puts the original input back (and zeroes the outputs) for the next run.
  void reset()
  {
    work_keys_ = keys_;
    work_values_ = values_;
    out_keys_.assign(shape_.n, 0);
    out_values_.assign(shape_.pairs ? shape_.n : 0, 0);
    if (!shape_.files) return;
    store(keys_in_, keys_);
    if (shape_.pairs) store(values_in_, values_);
    if (!shape_.in_place) {
      store(keys_out_, out_keys_);
      if (shape_.pairs) store(values_out_, out_values_);
    }
  }

  /// Runs the job on `eng`; throws what the engine throws.
  void run(engine& eng)
  {
    sort_job job;
    if (shape_.files) {
      // The file_array objects live for the job only: each reserves its own address range.
      const std::uint64_t bytes = shape_.n * 8;
      std::optional<file_array> ki, vi, ko, vo;
      ki.emplace(keys_in_.fd, 0, bytes, "keys");
      if (shape_.pairs) vi.emplace(values_in_.fd, 0, bytes, "values");
      if (!shape_.in_place) {
        ko.emplace(keys_out_.fd, 0, bytes, "keys_out");
        if (shape_.pairs) vo.emplace(values_out_.fd, 0, bytes, "values_out");
      }
      job.keys = key_array{ki->data(), shape_.n, dtype::u64};
      if (vi) job.values = value_array{vi->data(), shape_.n, 8};
      if (ko) job.keys_out = ko->data();
      if (vo) job.values_out = vo->data();
      eng.sort(job);
      return;
    }
    job.keys = key_array{work_keys_.data(), shape_.n, dtype::u64};
    if (shape_.pairs) job.values = value_array{work_values_.data(), shape_.n, 8};
    if (!shape_.in_place) {
      job.keys_out = out_keys_.data();
      if (shape_.pairs) job.values_out = out_values_.data();
    }
    eng.sort(job);
  }

  /// After a success: the output is the input sorted (same pairs, keys in order).
  void expect_sorted(const std::string& context)
  {
    load();
    const auto& k = shape_.in_place ? work_keys_ : out_keys_;
    const auto& v = shape_.in_place ? work_values_ : out_values_;
    const verify_result r = verify(key_array{k.data(), shape_.n, dtype::u64},
                                                   vals(v), order::ascending, before_);
    EXPECT_TRUE(r.ok) << context << ": the job succeeded but its output does not verify";
  }

  /// After a failure: a separate output's input is byte for byte the original; an in-place
  /// input holds the same pairs (README, "Job semantics").
  void expect_input_kept(const std::string& context)
  {
    load();
    if (shape_.in_place) {
      EXPECT_EQ(fingerprint_of(key_array{work_keys_.data(), shape_.n, dtype::u64},
                                       vals(work_values_)),
                before_)
          << context << ": a failed in-place job lost or changed pairs";
    } else {
      EXPECT_EQ(work_keys_, keys_) << context << ": a failed job wrote its input keys";
      EXPECT_EQ(work_values_, values_) << context << ": a failed job wrote its input values";
    }
  }

 private:
  struct file {
    int fd{-1};
  };

  std::optional<value_array> vals(const std::vector<std::uint64_t>& v) const
  {
    if (!shape_.pairs) return std::nullopt;
    return value_array{v.data(), shape_.n, 8};
  }

  void open_file(file& f, const char* name)
  {
    f.fd = ::open((dir_ / name).c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (f.fd < 0) throw std::runtime_error{std::string{"cannot create "} + name};
  }

  static void store(const file& f, const std::vector<std::uint64_t>& v)
  {
    const auto bytes = static_cast<ssize_t>(v.size() * 8);
    if (::ftruncate(f.fd, bytes) != 0 || ::pwrite(f.fd, v.data(), v.size() * 8, 0) != bytes)
      throw std::runtime_error{"cannot write a sweep file"};
  }

  static void fetch(const file& f, std::vector<std::uint64_t>& v)
  {
    const auto bytes = static_cast<ssize_t>(v.size() * 8);
    if (::pread(f.fd, v.data(), v.size() * 8, 0) != bytes)
      throw std::runtime_error{"cannot read a sweep file back"};
  }

  /// Brings the files' contents into the work vectors.
  void load()
  {
    if (!shape_.files) return;
    fetch(keys_in_, work_keys_);
    if (shape_.pairs) fetch(values_in_, work_values_);
    if (!shape_.in_place) {
      fetch(keys_out_, out_keys_);
      if (shape_.pairs) fetch(values_out_, out_values_);
    }
  }

  sweep_shape shape_;
  std::vector<std::uint64_t> keys_, values_, work_keys_, work_values_, out_keys_, out_values_;
  fingerprint before_{};
  std::filesystem::path dir_;
  file keys_in_, values_in_, keys_out_, values_out_;
};

/// What the sweep saw, for the test's own expectations.
struct sweep_tally {
  std::uint64_t runs{}, failed{}, succeeded{}, injected{};
};

/// Runs `job` once with `p` armed and checks the outcome; then a clean run on the same engine.
/// `engine_caches`: the engine keeps buffers from job to job (a GPU engine's round-1 buffer and
/// device memory), which a failure may drop: memory held after may then be less, never more.
inline void run_with_fault(engine& eng, sweep_job& job, const detail::fault::plan& p,
                           sweep_tally& tally, bool must_succeed = false,
                           bool engine_caches = false)
{
  const std::string context = job.shape().name + " with fault " + describe(p);
  job.reset();
  const held_resources before = held_resources::now();
  bool failed = false;
  std::string message;
  {
    const detail::fault::armed armed{p};
    try {
      job.run(eng);
    } catch (const logic_error& e) {
      ADD_FAILURE() << context << ": an internal check failed instead of a clean error: "
                    << e.what();
      failed = true;
    } catch (const cancelled& e) {
      ADD_FAILURE() << context << ": cancelled, though nobody cancelled: " << e.what();
      failed = true;
    } catch (const std::bad_alloc&) {
      ADD_FAILURE() << context << ": std::bad_alloc escaped instead of out_of_memory";
      failed = true;
    } catch (const std::exception& e) {
      // invalid_argument, config_error, cuda_error, out_of_memory, io_error: the job's error.
      failed = true;
      message = e.what();
      EXPECT_FALSE(message.empty()) << context << ": an error without a message";
    }
    tally.injected += detail::fault::injected();
  }
  ++tally.runs;
  if (failed) {
    ++tally.failed;
    EXPECT_FALSE(must_succeed) << context << ": expected a retry to succeed, got: " << message;
    job.expect_input_kept(context + " (the job's error: " + message + ")");
  } else {
    ++tally.succeeded;
    job.expect_sorted(context);
  }
  const held_resources after = held_resources::now();
  if (engine_caches) {
    EXPECT_EQ(after.fds, before.fds) << context << ": descriptors leaked";
    EXPECT_LE(after.host, before.host) << context << ": host memory leaked";
    EXPECT_LE(after.pinned, before.pinned) << context << ": pinned memory leaked";
    EXPECT_LE(after.device, before.device) << context << ": device memory leaked";
    EXPECT_LE(after.registered, before.registered) << context << ": registrations leaked";
  } else {
    EXPECT_EQ(after, before) << context << ": resources leaked";
  }
  // The engine goes on: the same job sorts cleanly right after.
  job.reset();
  try {
    job.run(eng);
    job.expect_sorted(context + ", the clean run after it");
  } catch (const std::exception& e) {
    ADD_FAILURE() << context << ": the clean job after it failed: " << e.what();
  }
}

/// The calls per class of one clean run of `job`.
inline std::vector<std::uint64_t> count_calls(engine& eng, sweep_job& job)
{
  job.reset();
  const detail::fault::armed counting{detail::fault::plan{}};
  job.run(eng);
  std::vector<std::uint64_t> per_site(detail::fault::site_count);
  for (std::size_t i = 0; i < per_site.size(); ++i)
    per_site[i] = detail::fault::calls(static_cast<detail::fault::site>(i));
  return per_site;
}

}  // namespace gpusort::test_support
