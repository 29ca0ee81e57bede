// The CPU backend: host memory through the caching allocator, kernels in backends/cpu/kernels/
// (our own vectorised loops via Highway, and oneDNN for matmul/conv/pool/norm). Its streams and
// events are trivial: a kernel has finished when its call returns, so there is nothing to wait for.
#include <hwy/highway.h>
#include <hwy/targets.h>
#include <dnnl.hpp>

#include <unistd.h>
#include <cstring>
#include <thread>

#include "backends/backend.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/kernels/conv_list.h"
#include "backends/cpu/ops/ops.h"

namespace spore {
namespace {

class CpuStream final : public Stream {
 public:
  Device device() const override { return Device{}; }
  void synchronize() override {}
  bool query() override { return true; }
};
class CpuBackend final : public Backend {
 public:
  // The ISA decision first: it caps Highway's targets before any kernel dispatches (isa.h).
  CpuBackend() { (void)cpu::cpu_isa(); }
  DeviceType type() const override { return DeviceType::CPU; }
  std::string_view name() const override { return "CPU"; }
  int device_count() const override { return 1; }
  Allocator& allocator(int) override { return cpu_allocator(); }
  Allocator& pinned_allocator() override { return cpu_allocator(); }
  bool host_accessible() const override { return true; }
  DeviceProperties properties(int) const override {
    return {.name = "CPU",
            .total_memory = memory_info(0).total,
            .multiprocessors = int(std::thread::hardware_concurrency()),
            .alignment = 64};
  }
  MemoryInfo memory_info(int) const override {
    const long page = sysconf(_SC_PAGESIZE);
    return {.free = size_t(sysconf(_SC_AVPHYS_PAGES)) * size_t(page),
            .total = size_t(sysconf(_SC_PHYS_PAGES)) * size_t(page)};
  }
  Stream& default_stream(int) override { return stream_; }
  std::unique_ptr<Stream> new_stream(int) override { return std::make_unique<CpuStream>(); }
  std::unique_ptr<Event> new_event(int) override { return std::make_unique<HostClockEvent>(); }
  void synchronize(int) override {}
  void copy_async(void* dst, Device, const void* src, Device, size_t n, Stream&) override {
    std::memcpy(dst, src, n);
  }
  std::string library_versions() const override {
    const dnnl_version_t* v = dnnl_version();
    std::string s = "oneDNN " + std::to_string(v->major) + "." + std::to_string(v->minor) + "." +
                    std::to_string(v->patch) + " (" +
                    (v->cpu_runtime == DNNL_RUNTIME_OMP ? "OpenMP" : "other") +
                    " runtime); Highway " + std::to_string(HWY_MAJOR) + "." +
                    std::to_string(HWY_MINOR) + " (best target here: ";
    const int64_t targets = hwy::SupportedTargets() & HWY_TARGETS;  // lower bit = better target
    s += hwy::TargetName(targets & -targets);
    return s + "); ISA: " + cpu::cpu_isa().str();
  }
  std::string kernel_choices() const override { return cpu::conv_choices_text(); }
  void load_kernel_choices(const std::string& text) override { cpu::load_conv_choices(text); }
  bool isa_dependent(ops::OpId op) const override {
    namespace o = cpu::op;
    for (ops::OpId id : {o::ToBlocked(), o::FromBlocked(), o::WinogradWeights(),
                         o::Conv2dWinograd(), o::PackConvWeights(), o::Conv2dPacked()})
      if (op == id) return true;
    return false;
  }

 private:
  CpuStream stream_;
};

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace
SPORE_REGISTER_BACKEND(CPU, make_cpu_backend);
}  // namespace spore
