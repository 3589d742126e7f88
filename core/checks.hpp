// The library's internal checks, in the style of RAPIDS RMM's: GPUSORT_EXPECTS for invariants,
// GPUSORT_CUDA_TRY and GPUSORT_CHECK_LAUNCH for CUDA calls and launches, GPUSORT_CUDA_ASSERT_OK
// for destructors. Not installed: the public <gpusort/error.hpp> has only the exception types.
//
// Every CUDA call through CUDA_TRY, CHECK_LAUNCH or CUDA_CALL is a fault-injection seam
// (core/fault.hpp). CUDA_TRY expands to CUDA runtime calls but this header includes no CUDA
// header, so that host-only code (config/, service/, proto/) can include it; a translation unit
// that uses CUDA_TRY includes <cuda_runtime_api.h> itself.
#pragma once

#include "core/fault.hpp"

#include <gpusort/error.hpp>

#include <string>

namespace gpusort {

namespace detail {
[[noreturn]] void throw_expects(const char* condition, const char* message, const char* file,
                                int line);
void log_destructor_error(const char* what, const char* file, int line) noexcept;
}  // namespace detail

}  // namespace gpusort

#define GPUSORT_STRINGIFY_DETAIL(x) #x
#define GPUSORT_STRINGIFY(x) GPUSORT_STRINGIFY_DETAIL(x)

/// Throws gpusort::logic_error naming the failed condition, file and line.
#define GPUSORT_EXPECTS(condition, message)                                             \
  do {                                                                                  \
    if (!(condition)) [[unlikely]]                                                      \
      ::gpusort::detail::throw_expects(#condition, (message), __FILE__, __LINE__);      \
  } while (0)

/// A CUDA runtime call behind its fault-injection seam (core/fault.hpp): the call's own status,
/// or, when a test armed a plan that picks this call, the plan's error without making the call.
/// For calls whose status is checked by hand (an error that is an answer); class_ names a
/// gpusort::detail::fault::site.
#define GPUSORT_CUDA_CALL(class_, call)                                                  \
  (::gpusort::detail::fault::hit(::gpusort::detail::fault::site::class_)                \
       ? static_cast<cudaError_t>(                                                      \
             ::gpusort::detail::fault::error_for(::gpusort::detail::fault::site::class_)) \
       : (call))

/// Calls a CUDA runtime function; on failure clears the error state and throws
/// gpusort::out_of_memory (allocation failures) or gpusort::cuda_error with file:line. A sticky
/// error (the context is lost) is recorded first: detail::device_lost(). Every call is a
/// fault-injection seam of the class its name gives (fault::cuda_site, folded at compile time).
#define GPUSORT_CUDA_TRY(call)                                                          \
  do {                                                                                  \
    constexpr auto gpusort_site_ = ::gpusort::detail::fault::cuda_site(#call);          \
    const cudaError_t gpusort_status_ =                                                 \
        ::gpusort::detail::fault::hit(gpusort_site_)                                    \
            ? static_cast<cudaError_t>(::gpusort::detail::fault::error_for(gpusort_site_)) \
            : (call);                                                                   \
    if (gpusort_status_ != cudaSuccess) [[unlikely]] {                                  \
      cudaGetLastError();                                                               \
      ::gpusort::detail::note_cuda_error(static_cast<int>(gpusort_status_));            \
      const std::string gpusort_msg_ = std::string{"CUDA error at " __FILE__ ":"        \
                                                   GPUSORT_STRINGIFY(__LINE__) ": "} +  \
                                       cudaGetErrorName(gpusort_status_) + " " +        \
                                       cudaGetErrorString(gpusort_status_);             \
      if (gpusort_status_ == cudaErrorMemoryAllocation)                                 \
        throw ::gpusort::out_of_memory{gpusort_msg_};                                   \
      throw ::gpusort::cuda_error{gpusort_msg_};                                        \
    }                                                                                   \
  } while (0)

/// Checks the launch just made (configuration errors) without synchronizing.
#define GPUSORT_CHECK_LAUNCH() GPUSORT_CUDA_TRY(cudaPeekAtLastError())

/// For destructors: logs a failing CUDA call instead of throwing.
#define GPUSORT_CUDA_ASSERT_OK(call)                                                    \
  do {                                                                                  \
    const cudaError_t gpusort_status_ = (call);                                         \
    if (gpusort_status_ != cudaSuccess) {                                               \
      cudaGetLastError();                                                               \
      ::gpusort::detail::log_destructor_error(cudaGetErrorString(gpusort_status_),      \
                                              __FILE__, __LINE__);                      \
    }                                                                                   \
  } while (0)
