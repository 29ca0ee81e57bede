// The CPU backend: host memory through the caching allocator, kernels in backends/cpu/kernels/
// (our own vectorised loops via Highway, and oneDNN for matmul/conv/pool/norm).
#include <dnnl.hpp>
#include <hwy/highway.h>
#include <hwy/targets.h>

#include <cstring>

#include "backends/backend.h"

namespace spore {
namespace {

class CpuBackend final : public Backend {
 public:
  DeviceType type() const override { return DeviceType::CPU; }
  std::string_view name() const override { return "CPU"; }
  int device_count() const override { return 1; }
  Allocator& allocator(int) override { return cpu_allocator(); }
  void copy_to_host(void* dst, const void* src, size_t n, int) override { std::memcpy(dst, src, n); }
  void copy_from_host(void* dst, const void* src, size_t n, int) override { std::memcpy(dst, src, n); }
  std::string library_versions() const override {
    const dnnl_version_t* v = dnnl_version();
    std::string s = "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                    std::to_string(v->patch) + " (" + (v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other") +
                    " runtime); Highway " + std::to_string(HWY_MAJOR) + "." + std::to_string(HWY_MINOR) +
                    " (best target here: ";
    const int64_t targets = hwy::SupportedTargets() & HWY_TARGETS;  // lower bit = better target
    s += hwy::TargetName(targets & -targets);
    return s + ")";
  }
};

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace
SPORE_REGISTER_BACKEND(CPU, make_cpu_backend);
}  // namespace spore
