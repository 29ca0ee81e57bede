// Whether the GPU tests can run here, and why not: the build has no CUDA backend, or it has one but
// no GPU is visible (the two messages differ, as set_device's do).
#pragma once
#include <string>

#include "backends/backend.h"

namespace spore::test_support {

inline bool gpu_visible(std::string* why) {
  if (!has_backend(DeviceType::GPU)) {
    *why = "this build has no CUDA backend: " + detail::cuda_plugin_status();
    return false;
  }
  if (get_backend(DeviceType::GPU).device_count() == 0) {
    *why = get_backend(DeviceType::GPU).unavailable_reason();
    return false;
  }
  return true;
}

}  // namespace spore::test_support
