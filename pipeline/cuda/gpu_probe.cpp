// The probe of a CUDA build. Every failure is turned into text: the probe runs at start-up of
// the CLI and the daemon on hosts that may have no driver at all, and those must still run on
// the host device.
#include "pipeline/gpu_probe.hpp"

#include <cuda_runtime_api.h>

#include <exception>
#include <string>
#include <utility>

namespace gpusort::detail {
namespace {

std::string describe(cudaError_t status)
{
  cudaGetLastError();  // a failed query must not leave a sticky error for the next caller
  return std::string{cudaGetErrorName(status)} + " (" + cudaGetErrorString(status) + ")";
}

void append_note(std::string& note, const std::string& text)
{
  if (!note.empty()) note += "; ";
  note += text;
}

// Fills `info` for device `id`; returns cudaSuccess or the first failing call's status.
cudaError_t query_device(int id, gpu_info& info)
{
  cudaDeviceProp prop{};
  if (const auto s = cudaGetDeviceProperties(&prop, id); s != cudaSuccess) return s;
  info.id = id;
  info.name = prop.name;
  info.total_memory = prop.totalGlobalMem;
  info.cc_major = prop.major;
  info.cc_minor = prop.minor;
  info.multiprocessors = prop.multiProcessorCount;

  // Free memory needs the device's context: switch to it and back so that probing leaves the
  // caller's current device as it was.
  int previous = 0;
  if (const auto s = cudaGetDevice(&previous); s != cudaSuccess) return s;
  cudaError_t status = cudaSetDevice(id);
  if (status == cudaSuccess) {
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    status = cudaMemGetInfo(&free_bytes, &total_bytes);
    info.free_memory = free_bytes;
  }
  const cudaError_t restore = cudaSetDevice(previous);
  return status != cudaSuccess ? status : restore;
}

}  // namespace

gpu_probe_result probe_gpus() noexcept
{
  gpu_probe_result result;
  try {
    int count = 0;
    if (const auto status = cudaGetDeviceCount(&count); status != cudaSuccess) {
      result.note = "no usable CUDA device: " + describe(status);
      // The static runtime reports a missing libcuda.so as an insufficient driver too.
      if (status == cudaErrorInsufficientDriver)
        result.note += " - no NVIDIA driver, or one older than this CUDA runtime needs";
      return result;
    }
    if (count == 0) {
      result.note = "no CUDA device found";
      return result;
    }
    for (int id = 0; id < count; ++id) {
      gpu_info info;
      if (const auto status = query_device(id, info); status != cudaSuccess) {
        append_note(result.note, "GPU " + std::to_string(id) + " skipped: " + describe(status));
        continue;
      }
      result.gpus.push_back(std::move(info));
    }
  } catch (const std::exception& e) {  // only host allocation can throw above
    result.gpus.clear();
    try {
      result.note = std::string{"GPU probe failed: "} + e.what();
    } catch (...) {
      result.note.clear();
    }
  }
  return result;
}

}  // namespace gpusort::detail
