// The CUDA backend (DeviceType::GPU, MindSpore's "GPU" target): devices, streams, events (and the
// allocator's event pool), the caching allocator over cudaMalloc, pinned host memory, copies.
// Built as its own library, libspore_cuda.so, with the CUDA runtime linked statically; libspore
// loads it when it is next to libspore (src/backends/plugins.cpp), so libspore runs where no CUDA
// library is. Kernels are in kernels/, registered for DeviceType::GPU like the CPU's.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/bad_value.h"
#include "backends/cuda/caching_allocator.h"
#include "backends/cuda/cuda_check.h"
#include "backends/cuda/version.h"
#include "spore/grad_mode.h"

namespace spore::cuda {
namespace {

// Each device's report slot (bad_value.h): page-locked and mapped, so kernels write it in place and
// the host reads it without a copy. Made with the device's other state, before any kernel runs
// or a capture starts (an allocation inside a capture is refused).
constexpr int kMaxDevices = 16;
struct BadValueSlot {
  BadValue* host = nullptr;
  BadValue* device = nullptr;
};
BadValueSlot bad_value_slots[kMaxDevices];

void make_bad_value_slot(int device) {
  SPORE_CHECK(device >= 0 && device < kMaxDevices, "[GPU] device ", device, " out of range");
  BadValueSlot& s = bad_value_slots[device];
  void* h = nullptr;
  SPORE_CUDA_CHECK(cudaHostAlloc(&h, sizeof(BadValue), cudaHostAllocMapped));
  void* d = nullptr;
  SPORE_CUDA_CHECK(cudaHostGetDevicePointer(&d, h, 0));
  s.host = static_cast<BadValue*>(h);
  *s.host = BadValue{0, 0, kNoBadValue};
  s.device = static_cast<BadValue*>(d);
}

// Makes `device` current for the calling thread for a scope (cudaSetDevice), as every call below
// that allocates or queues work needs.
class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    SPORE_CUDA_CHECK(cudaGetDevice(&prev_));
    if (prev_ != device) SPORE_CUDA_CHECK(cudaSetDevice(device));
    device_ = device;
  }
  ~DeviceScope() {
    if (prev_ != device_) cudaSetDevice(prev_);
  }

 private:
  int prev_ = 0, device_ = 0;
};

// A query's "not ready" is an answer, not an error, but the runtime may keep it as the thread's
// last error, which the next launch check would then report: clear it (PyTorch does the same).
bool not_ready() {
  (void)cudaGetLastError();
  return false;
}

class CudaStream : public Stream {
 public:
  CudaStream(int device, bool owned) : device_(device) {
    DeviceScope d(device);
    // Non-blocking: no implicit ordering with the legacy default stream that libraries may use.
    if (owned) SPORE_CUDA_CHECK(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking));
  }
  ~CudaStream() override {
    if (s_) cudaStreamDestroy(s_);
  }
  Device device() const override { return {DeviceType::GPU, device_}; }
  void synchronize() override {
    SPORE_CUDA_CHECK(cudaStreamSynchronize(s_));
    raise_bad_value(device_);
  }
  bool query() override {
    const cudaError_t e = cudaStreamQuery(s_);
    if (e == cudaErrorNotReady) return not_ready();
    SPORE_CUDA_CHECK(e);
    return true;
  }
  void* native_handle() const override { return s_; }

 private:
  int device_;
  cudaStream_t s_ = nullptr;
};

class CudaEvent : public Event {
 public:
  explicit CudaEvent(int device, bool timing = false) : device_(device) {
    DeviceScope d(device);
    SPORE_CUDA_CHECK(
        cudaEventCreateWithFlags(&e_, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  ~CudaEvent() override { cudaEventDestroy(e_); }
  void record(Stream& s) override {
    SPORE_CUDA_CHECK(cudaEventRecord(e_, native(s.native_handle())));
  }
  void wait(Stream& s) override {
    SPORE_CUDA_CHECK(cudaStreamWaitEvent(native(s.native_handle()), e_, 0));
  }
  bool query() override {
    const cudaError_t e = cudaEventQuery(e_);
    if (e == cudaErrorNotReady) return not_ready();
    SPORE_CUDA_CHECK(e);
    return true;
  }
  void synchronize() override {
    SPORE_CUDA_CHECK(cudaEventSynchronize(e_));
    raise_bad_value(device_);
  }
  double ms_since(Event& earlier) override {
    auto* e = dynamic_cast<CudaEvent*>(&earlier);
    SPORE_CHECK(e != nullptr, "[GPU] ms_since: the earlier event is not a CUDA event");
    float ms = 0;
    SPORE_CUDA_CHECK(cudaEventElapsedTime(&ms, e->e_, e_));  // both made with timing
    return double(ms);
  }

 private:
  int device_;
  cudaEvent_t e_ = nullptr;
};

class RawCuda : public RawDeviceAllocator {
 public:
  explicit RawCuda(int device) : device_(device) {}
  void* malloc(size_t n) override {
    DeviceScope d(device_);
    void* p = nullptr;
    // During a capture (the allocator's pool is open) a new block is made outside the recording:
    // cudaMalloc is not stream work, and the pool keeps the block for the recording.
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    SPORE_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    const cudaError_t e = cudaMalloc(&p, n);
    SPORE_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode));
    if (e == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear it: the caller empties its cache and retries
      return nullptr;
    }
    SPORE_CUDA_CHECK(e);
    return p;
  }
  void free(void* p) override {
    DeviceScope d(device_);
    SPORE_CUDA_CHECK(cudaFree(p));
  }

 private:
  int device_;
};

// Page-locked host memory (cudaHostAlloc): what asynchronous copies to and from a device need.
class PinnedAllocator : public Allocator {
 public:
  void* allocate(size_t n) override {
    void* p = nullptr;
    SPORE_CUDA_CHECK(cudaHostAlloc(&p, n ? n : 1, cudaHostAllocDefault));
    std::lock_guard lock(m_);
    stats_.bytes_in_use += n;
    stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
    ++stats_.num_allocs;
    ++stats_.cache_misses;
    return p;
  }
  void deallocate(void* p, size_t n) override {
    if (!p) return;
    SPORE_CUDA_CHECK(cudaFreeHost(p));
    std::lock_guard lock(m_);
    stats_.bytes_in_use -= n;
  }
  AllocatorStats stats() const override {
    std::lock_guard lock(m_);
    return stats_;
  }
  void reset_peak() override {
    std::lock_guard lock(m_);
    stats_.peak_bytes_in_use = stats_.bytes_in_use;
  }
  void empty_cache() override {}

 private:
  mutable std::mutex m_;
  AllocatorStats stats_;
};

// A 0-d CPU tensor joins an op on the GPU as a scalar (ops::op_device, PyTorch's rule: `x * 2.0`
// allocates no GPU tensor to build). The GPU kernels read device memory only, so every GPU kernel
// is wrapped once: such an input is copied to the device on the op's stream first (a few bytes,
// staged by the driver, so the host scalar may go when the copy call returns). The wrapper also
// turns gradient recording off while the kernel runs, and makes the op's GPU the runtime's current
// device.
ops::KernelFn with_device_scalars(ops::KernelFn fn) {
  return [fn = std::move(fn)](ops::KernelContext& ctx) {
    // The CUDA runtime's current device is per thread: make it the op's (launches, library
    // handles and allocations then go to that GPU; a no-op with one GPU).
    const DeviceScope on(ctx.stream->device().index);
    bool any = false;
    for (const Tensor& t : ctx.inputs)
      any = any || (t.defined() && t.dim() == 0 && t.device().type == DeviceType::CPU);
    // A kernel's own ops (a .contiguous() copy, a cast) are never recorded for autograd.
    NoGradGuard no_grad;
    if (!any) return fn(ctx);
    const Device device = ctx.stream->device();
    ops::Tensors in = ctx.inputs;
    for (Tensor& t : in) {
      if (!t.defined() || t.dim() != 0 || t.device().type != DeviceType::CPU) continue;
      Tensor d = Tensor::empty({}, t.dtype(), device);
      SPORE_CUDA_CHECK(cudaMemcpyAsync(d.data_ptr(), t.data_ptr(), itemsize(t.dtype()),
                                       cudaMemcpyHostToDevice,
                                       native(ctx.stream->native_handle())));
      t = d;
    }
    ops::KernelContext c{ctx.def, in, ctx.outputs, ctx.attrs, ctx.stream};
    fn(c);
  };
}

void wrap_kernels() {
  for (int i = 0, n = ops::num_ops(); i < n; ++i) {
    const ops::KernelEntry* k = ops::find_kernel(ops::OpId(i), DeviceType::GPU);
    if (k)
      ops::detail::register_kernel(ops::OpId(i), DeviceType::GPU, with_device_scalars(k->fn), {},
                                   k->rows);
  }
}

// Events of one device for the allocator's cross-stream bookkeeping (record_stream): recorded,
// queried, then handed back for reuse instead of created and destroyed each time.
class EventPool {
 public:
  explicit EventPool(int device) : device_(device) {}
  ~EventPool() {
    for (cudaEvent_t e : free_) cudaEventDestroy(e);
  }
  cudaEvent_t take() {
    {
      std::lock_guard lock(m_);
      if (!free_.empty()) {
        cudaEvent_t e = free_.back();
        free_.pop_back();
        return e;
      }
    }
    DeviceScope d(device_);
    cudaEvent_t e;
    SPORE_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }
  void give(cudaEvent_t e) {
    std::lock_guard lock(m_);
    free_.push_back(e);
  }

 private:
  int device_;
  std::mutex m_;
  std::vector<cudaEvent_t> free_;
};

// A captured stream's work as an instantiated CUDA graph; the memory its kernels allocated during
// the capture stays in the allocator's pool until it is destroyed.
class CudaCaptured final : public CapturedWork {
 public:
  CudaCaptured(int device, cudaGraph_t graph, cudaGraphExec_t exec, CachingAllocator& alloc,
               int pool)
      : device_(device), graph_(graph), exec_(exec), alloc_(alloc), pool_(pool) {}
  ~CudaCaptured() override {
    cudaGraphExecDestroy(exec_);
    cudaGraphDestroy(graph_);
    alloc_.release_pool(pool_);
  }
  void replay(Stream& s) override {
    DeviceScope d(device_);
    SPORE_CUDA_CHECK(cudaGraphLaunch(exec_, native(s.native_handle())));
  }

 private:
  int device_;
  cudaGraph_t graph_;
  cudaGraphExec_t exec_;
  CachingAllocator& alloc_;
  int pool_;
};

struct PerDevice {
  std::unique_ptr<EventPool> events;  // before the allocator, which returns its events here
  std::unique_ptr<CudaStream> default_stream;
  std::unique_ptr<RawCuda> raw;
  std::unique_ptr<CachingAllocator> allocator;
};

class CudaBackend : public Backend {
 public:
  CudaBackend() {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      reason_ = std::string("no GPU is visible: cudaGetDeviceCount says ") + cudaGetErrorString(e) +
                " (" + cudaGetErrorName(e) + "); check `nvidia-smi` and the NVIDIA driver";
      cudaGetLastError();
      n = 0;
    } else if (n == 0) {
      reason_ =
          "no GPU is visible (cudaGetDeviceCount: 0 devices); check `nvidia-smi` and "
          "CUDA_VISIBLE_DEVICES";
    }
    devices_.resize(size_t(n));
    static std::once_flag wrapped;
    std::call_once(wrapped, wrap_kernels);
  }
  DeviceType type() const override { return DeviceType::GPU; }
  std::string_view name() const override { return "GPU"; }
  int device_count() const override { return int(devices_.size()); }
  std::string unavailable_reason() const override { return reason_; }

  Allocator& allocator(int device) override { return *dev(device).allocator; }
  Allocator& pinned_allocator() override { return pinned_; }
  DeviceProperties properties(int device) const override {
    check(device);
    cudaDeviceProp p{};
    SPORE_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
    return {p.name, p.totalGlobalMem, p.multiProcessorCount, p.major, p.minor, 256};
  }
  MemoryInfo memory_info(int device) const override {
    check(device);
    DeviceScope d(device);
    size_t free = 0, total = 0;
    SPORE_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    return {free, total};
  }
  Stream& default_stream(int device) override { return *dev(device).default_stream; }
  std::unique_ptr<Stream> new_stream(int device) override {
    check(device);
    return std::make_unique<CudaStream>(device, true);
  }
  std::unique_ptr<Event> new_event(int device) override {
    check(device);
    return std::make_unique<CudaEvent>(device);
  }
  std::unique_ptr<Event> new_timing_event(int device) override {
    check(device);
    return std::make_unique<CudaEvent>(device, /*timing=*/true);
  }
  void synchronize(int device) override {
    check(device);
    DeviceScope d(device);
    SPORE_CUDA_CHECK(cudaDeviceSynchronize());
    raise_bad_value(device);
  }
  void copy_async(void* dst, Device dst_dev, const void* src, Device src_dev, size_t n,
                  Stream& s) override {
    if (n == 0) return;
    const int device = dst_dev.type == DeviceType::GPU ? dst_dev.index : src_dev.index;
    DeviceScope d(device);
    // cudaMemcpyDefault: unified addressing tells host from device memory (pageable host memory
    // is staged by the driver, so the caller may reuse it when the call returns).
    SPORE_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, native(s.native_handle())));
  }
  std::string library_versions() const override { return versions(); }

  // Capture: the stream's work becomes a CUDA graph (thread-local mode: a call on this thread that
  // cannot be recorded, such as a synchronous copy, invalidates the capture instead of running).
  bool supports_capture() const override { return true; }
  void begin_capture(Stream& stream) override {
    const int device = stream.device().index;
    PerDevice& p = dev(device);
    DeviceScope d(device);
    const int pool = p.allocator->begin_pool();
    const cudaError_t e =
        cudaStreamBeginCapture(native(stream.native_handle()), cudaStreamCaptureModeThreadLocal);
    if (e != cudaSuccess) {
      p.allocator->end_pool();
      p.allocator->release_pool(pool);
      cudaGetLastError();
      SPORE_CUDA_CHECK(e);
    }
    const std::lock_guard lock(capture_mutex_);
    capture_pool_[stream.native_handle()] = pool;
  }
  std::unique_ptr<CapturedWork> end_capture(Stream& stream, std::string& why) override {
    const int device = stream.device().index;
    PerDevice& p = dev(device);
    DeviceScope d(device);
    int pool = 0;
    {
      const std::lock_guard lock(capture_mutex_);
      pool = capture_pool_.at(stream.native_handle());
      capture_pool_.erase(stream.native_handle());
    }
    p.allocator->end_pool();
    cudaGraph_t graph = nullptr;
    cudaError_t e = cudaStreamEndCapture(native(stream.native_handle()), &graph);
    cudaGraphExec_t exec = nullptr;
    if (e == cudaSuccess && graph) e = cudaGraphInstantiate(&exec, graph, 0);
    if (e != cudaSuccess || !graph || !why.empty()) {
      if (why.empty())
        why = std::string("CUDA stream capture: ") + cudaGetErrorName(e) + " (" +
              cudaGetErrorString(e) + ")";
      cudaGetLastError();  // the capture's error is reported by `why`, not left for the next call
      if (exec) cudaGraphExecDestroy(exec);
      if (graph) cudaGraphDestroy(graph);
      p.allocator->release_pool(pool);
      return nullptr;
    }
    return std::make_unique<CudaCaptured>(device, graph, exec, *p.allocator, pool);
  }

 private:
  std::mutex capture_mutex_;
  std::map<void*, int> capture_pool_;  // capturing stream -> its allocator pool
  void check(int device) const {
    SPORE_CHECK(device >= 0 && device < device_count(), "GPU device ", device, " does not exist: ",
                device_count() ? "this machine has " + std::to_string(device_count()) + " GPU(s)"
                               : reason_);
  }
  PerDevice& dev(int device) {
    check(device);
    std::call_once(init_[size_t(device)], [&] {
      PerDevice& p = devices_[size_t(device)];
      {
        DeviceScope d(device);
        make_bad_value_slot(device);
      }
      p.default_stream = std::make_unique<CudaStream>(device, true);
      p.raw = std::make_unique<RawCuda>(device);
      p.events = std::make_unique<EventPool>(device);
      EventPool* pool = p.events.get();
      StreamEvents ev{[device, pool](void* s) -> void* {
                        DeviceScope d(device);
                        cudaEvent_t e = pool->take();
                        SPORE_CUDA_CHECK(cudaEventRecord(e, native(s)));
                        return e;
                      },
                      [](void* e) {
                        const cudaError_t r = cudaEventQuery(static_cast<cudaEvent_t>(e));
                        if (r == cudaErrorNotReady) return not_ready();
                        // Done, or failed (a device fault, sticky: the next checked call reports
                        // it, and this may run in a destructor); either way the block is not held
                        // forever.
                        return true;
                      },
                      [pool](void* e) { pool->give(static_cast<cudaEvent_t>(e)); }};
      p.allocator = std::make_unique<CachingAllocator>(
          *p.raw, std::move(ev), "GPU:" + std::to_string(device), [device] {
            return current_stream(Device{DeviceType::GPU, device}).native_handle();
          });
      if (const char* poison = std::getenv("SPORE_CUDA_POISON");
          poison && std::string(poison) == "1")
        p.allocator->set_poison([device](void* ptr, size_t n, void* stream) {
          DeviceScope d(device);
          SPORE_CUDA_CHECK(cudaMemsetAsync(ptr, 0xFF, n, native(stream)));
        });
    });
    return devices_[size_t(device)];
  }
  std::string reason_;
  std::vector<PerDevice> devices_;
  std::once_flag init_[64];
  PinnedAllocator pinned_;
};

std::unique_ptr<Backend> make_backend() { return std::make_unique<CudaBackend>(); }

}  // namespace

BadValue* bad_value_slot(int device) {
  // Made with the device's state, which the kernel's output tensor already needed.
  SPORE_ASSERT(device >= 0 && device < kMaxDevices && bad_value_slots[device].device,
               "[GPU] device ", device, " has no bad-value slot: its state was never made");
  return bad_value_slots[device].device;
}

void raise_bad_value(int device) {
  if (device < 0 || device >= kMaxDevices || !bad_value_slots[device].host) return;
  volatile BadValue* slot = bad_value_slots[device].host;
  if (slot->site == kNoBadValue) return;
  const int64_t v = slot->value, n = slot->bound;
  const int32_t site = slot->site;
  slot->site = kNoBadValue;
  const char* after =
      " (found by a GPU kernel and reported at the first synchronisation with the GPU after it; "
      "the outputs it computed are not valid)";
  switch (site) {
    case kBadGatherIndex:
      SPORE_THROW(ErrorKind::IndexError, "[gather] index ", v,
                  " is out of range for an axis of size ", n, "; expected 0 <= index < ", n, after);
    case kBadIndexSelectIndex:
      SPORE_THROW(ErrorKind::IndexError, "[index_select] index ", v,
                  " is out of range for an axis of size ", n, "; expected ", -n, " <= index < ", n,
                  after);
    case kBadScatterAddIndex:
      SPORE_THROW(ErrorKind::IndexError, "[scatter_add] index ", v,
                  " is out of range for an axis of size ", n, "; expected 0 <= index < ", n, after);
    case kBadOneHotIndex:
      SPORE_THROW(ErrorKind::IndexError, "[one_hot] index ", v, " is out of range for depth ", n,
                  " (expected 0 <= index < ", n, ")", after);
    case kBadCrossEntropyLabel:
      SPORE_THROW(ErrorKind::IndexError, "[softmax_cross_entropy_fused] label ", v,
                  " is out of range for ", n, " classes; labels must be in [0, ", n, ")", after);
    default:
      SPORE_THROW(ErrorKind::IndexError, "a GPU kernel reported a bad value ", v, " (site ", site,
                  ")", after);
  }
}

}  // namespace spore::cuda

SPORE_REGISTER_BACKEND(GPU, ::spore::cuda::make_backend);
