// The GPU engine's page_locker (pipeline/file_window.hpp): cudaHostRegister, so that the copy
// engines write tmpfs outputs straight into their pages instead of through the pinned staging.
#pragma once

#include "pipeline/file_window.hpp"

#include <memory>

namespace gpusort::detail {

/// Locks for every GPU (portable registrations), made on `device` (the engine's first GPU, so
/// that a thread with no current device never starts a context on another), where
/// GPUSORT_OUTPUT_LOCK=1 asks for it; else null, and outputs are staged (the faster on the
/// machines measured: page_locker.cpp says why).
std::shared_ptr<page_locker> make_cuda_page_locker(int device);

}  // namespace gpusort::detail
