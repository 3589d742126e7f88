// The probe of a build without CUDA: there is no runtime to ask, so no GPU is usable.
#include "pipeline/gpu_probe.hpp"

#include <new>

namespace gpusort::detail {

gpu_probe_result probe_gpus() noexcept
{
  gpu_probe_result result;
  try {
    result.note = "built without CUDA";
  } catch (const std::bad_alloc&) {  // the note is advisory; an empty list is still the answer
  }
  return result;
}

}  // namespace gpusort::detail
