// The backend interface: what a device must provide so Spore can run on it. CPU is the first
// implementation (backends/cpu/backend.cpp); CUDA and a vendor NPU plug in the same way:
// implement Backend, register kernels with SPORE_KERNEL(<Dev>, Op, fn, dtypes...), and add
// SPORE_REGISTER_BACKEND in the backend's own folder. Backends depend only on core/ and this file.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ops/op.h"
#include "spore/allocator.h"
#include "spore/device.h"

namespace spore {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceType type() const = 0;
  virtual std::string_view name() const = 0;   // "CPU"
  virtual int device_count() const = 0;
  virtual Allocator& allocator(int device) = 0;
  virtual void synchronize(int device) {}
  // Copies bytes between this device and the host (or within the device).
  virtual void copy_to_host(void* dst, const void* src, size_t nbytes, int device) = 0;
  virtual void copy_from_host(void* dst, const void* src, size_t nbytes, int device) = 0;
  // The libraries this backend runs on, for `spore run-check`: "oneDNN 2.6.3, Highway (AVX3)".
  virtual std::string library_versions() const { return ""; }
  // Default: a kernel is registered for (op, dtype).
  virtual bool supports(ops::OpId op, DType dtype) const;
};

using BackendFactory = std::unique_ptr<Backend> (*)();
namespace detail {
bool register_backend(DeviceType type, BackendFactory factory);
}
#define SPORE_REGISTER_BACKEND(Dev, factory) \
  [[maybe_unused]] static const bool spore_backend_##Dev = ::spore::detail::register_backend(::spore::DeviceType::Dev, factory)

// The backend for `type`, or an error naming the targets this build supports.
Backend& get_backend(DeviceType type);
bool has_backend(DeviceType type);
std::vector<std::string> available_device_targets();  // {"CPU"}

}  // namespace spore
