// The GPU engine's page_locker (pipeline/file_window.hpp): cudaHostRegister, so that the copy
// engines write tmpfs outputs straight into their pages instead of through the pinned staging.
#pragma once

#include "pipeline/file_window.hpp"

#include <memory>

namespace gpusort::detail {

/// Locks for every GPU (portable registrations), made on `device` (the engine's first GPU, so
/// that a thread with no current device never starts a context on another). Null where
/// GPUSORT_OUTPUT_LOCK=0 asks for the staging alone (the A/B of file_window.hpp's numbers).
std::shared_ptr<page_locker> make_cuda_page_locker(int device);

}  // namespace gpusort::detail
