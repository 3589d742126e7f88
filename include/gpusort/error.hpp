// The exceptions gpusort throws, in the style of RAPIDS RMM: one set of types for the engine,
// the configuration and the client. The checking macros that throw them inside the library are
// internal (core/checks.hpp).
#pragma once

#include <stdexcept>
#include <string>

namespace gpusort {

/// A precondition or invariant of gpusort itself was violated.
struct logic_error : std::logic_error {
  using std::logic_error::logic_error;
};

/// Bad input from the caller: wrong sizes, unknown types, unreadable files.
struct invalid_argument : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

/// A configuration that cannot be used (unknown key, out of bounds, infeasible budget).
struct config_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A CUDA runtime call failed.
struct cuda_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Device or pinned memory ran out: distinct so that the pipeline can shrink its chunks and retry.
struct out_of_memory : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// Reading or writing a file that holds a job's array failed: the file shrank while it was read,
/// the disk is full, the device failed. Nothing of the job was published.
struct io_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The job was cancelled through its cancel token.
struct cancelled : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace gpusort
