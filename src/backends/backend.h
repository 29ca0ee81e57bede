// The backend interface: what a device must provide so Spore can run on it. CPU is the first
// implementation (backends/cpu/backend.cpp); the test device (backends/test_device/) and CUDA plug
// in the same way: implement Backend, register kernels with SPORE_KERNEL(<Dev>, Op, fn, dtypes...),
// and add SPORE_REGISTER_BACKEND in the backend's own folder. Backends depend only on core/, the op
// interface and this file.
//
// The device model (docs/architecture.md, "Devices"): a tensor's storage lives on one device; work
// for a device is queued on a Stream of that device and runs in queue order; an Event marks a
// point in a stream that other streams or the host can wait for. Every copy between the host and a
// device, or between devices, goes through the backend of the device side (copy_async). The CPU
// backend's streams are synchronous: queued work has already run when the call returns.
#pragma once
#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ops/op.h"
#include "spore/allocator.h"
#include "spore/device.h"

namespace spore {

// An ordered queue of work on one device (cudaStream_t on CUDA).
class Stream {
 public:
  virtual ~Stream() = default;
  virtual Device device() const = 0;
  virtual void synchronize() = 0;  // the host waits until every queued item has run
  virtual bool query() = 0;        // true when every queued item has run
  virtual void* native_handle() const { return nullptr; }  // the backend's own handle
};

// A marker in a stream (cudaEvent_t on CUDA). record() places it after the work queued so far;
// wait() makes another stream's later work wait for it on the device, without the host blocking.
class Event {
 public:
  virtual ~Event() = default;
  virtual void record(Stream& stream) = 0;
  virtual void wait(Stream& stream) = 0;
  virtual bool query() = 0;        // true when the recorded work has run (or nothing was recorded)
  virtual void synchronize() = 0;  // the host waits for the recorded work
  // Milliseconds from `earlier` (an event of the same backend) to this one on the device's clock;
  // both made by Backend::new_timing_event, recorded, and run.
  virtual double ms_since(Event& earlier);
};

// The event of a backend whose streams are synchronous (the CPU, the test device): the work queued
// before record() has run when it returns, so the host clock there times it too.
class HostClockEvent final : public Event {
 public:
  void record(Stream&) override { at_ = std::chrono::steady_clock::now(); }
  void wait(Stream&) override {}
  bool query() override { return true; }
  void synchronize() override {}
  double ms_since(Event& earlier) override;

 private:
  std::chrono::steady_clock::time_point at_{};
};

// Work recorded from a stream between Backend::begin_capture and end_capture (a CUDA graph on
// CUDA), run again with one call. It reads and writes the addresses the recorded work used, so
// those buffers must stay where they are while it lives; memory the recorded work allocated
// stays reserved for it until it is destroyed.
class CapturedWork {
 public:
  virtual ~CapturedWork() = default;
  virtual void replay(Stream& stream) = 0;  // queues the recorded work on `stream`
};

struct DeviceProperties {
  std::string name;                          // "CPU", "NVIDIA H200"
  size_t total_memory = 0;                   // bytes
  int multiprocessors = 0;                   // CUDA SMs; CPU cores
  int compute_major = 0, compute_minor = 0;  // CUDA compute capability; 0 elsewhere
  size_t alignment = 64;                     // of every allocation, in bytes
};
struct MemoryInfo {
  size_t free = 0, total = 0;  // bytes, as the device reports them
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual DeviceType type() const = 0;
  virtual std::string_view name() const = 0;  // "CPU"
  virtual int device_count() const = 0;
  virtual Allocator& allocator(int device) = 0;
  // Page-locked host memory that this device copies from and to asynchronously (CPU: the
  // ordinary host allocator). Tensors allocated from it live on the CPU.
  virtual Allocator& pinned_allocator() = 0;
  // True when the host may read and write this device's memory directly (the CPU only).
  virtual bool host_accessible() const { return false; }
  virtual DeviceProperties properties(int device) const = 0;
  virtual MemoryInfo memory_info(int device) const = 0;

  // -- streams and events ------------------------------------------------------------------------
  virtual Stream& default_stream(int device) = 0;
  virtual std::unique_ptr<Stream> new_stream(int device) = 0;
  virtual std::unique_ptr<Event> new_event(int device) = 0;
  // An event that also times (Event::ms_since); timing costs a little on a GPU, so only where
  // asked (the training loop's step markers).
  virtual std::unique_ptr<Event> new_timing_event(int device) { return new_event(device); }
  // Waits for all work on every stream of the device.
  virtual void synchronize(int device) = 0;

  // -- copies ------------------------------------------------------------------------------------
  // Copies nbytes from src to dst, queued on `stream` (a stream of this backend). One side is a
  // device of this backend; the other is the host (dst_dev or src_dev CPU) or a device of this
  // backend. A copy to the host is complete only after the stream synchronizes (unless the
  // backend's streams are synchronous); one from pageable host memory may return before it is done
  // only if the backend staged the bytes first.
  virtual void copy_async(void* dst, Device dst_dev, const void* src, Device src_dev, size_t nbytes,
                          Stream& stream) = 0;

  // The libraries this backend runs on, for `spore run-check`: "oneDNN 2.6.3, Highway (AVX3)".
  virtual std::string library_versions() const { return ""; }
  // The kernel choices this process made by timing (the CPU's: which oneDNN convolution layouts won
  // for each geometry), as text that a compiled model file carries, so that a deployed model's
  // first run does not time them again (spore compile, docs/deploy.md). load_kernel_choices merges
  // such text in (a ValueError naming the line when it is malformed); a choice only picks among
  // implementations that compute the same result, so a stale one costs speed, never correctness.
  virtual std::string kernel_choices() const { return ""; }
  virtual void load_kernel_choices(const std::string& text) {}
  // Whether a graph node of `op` holds data in a layout chosen for this machine's vector width
  // (the CPU's blocked channels, packed or Winograd weights): a compiled model file with such a
  // node runs only where that width is the best target; one without runs anywhere.
  virtual bool isa_dependent(ops::OpId op) const { return false; }
  // -- capture (Graph mode's whole step as one launch; docs/graph.md "Capture") ----------------
  // Between begin_capture and end_capture, work queued on `stream` by this thread is recorded,
  // not run. end_capture returns the recording, or nullptr with `why` set when the capture was
  // invalidated (a kernel synchronised with the host, copied from pageable memory, ...); nothing
  // recorded has run either way. Backends without capture keep these defaults.
  virtual bool supports_capture() const { return false; }
  virtual void begin_capture(Stream& stream);
  virtual std::unique_ptr<CapturedWork> end_capture(Stream& stream, std::string& why);

  // Why device_count() is 0 although the backend is built ("no GPU is visible: ..."), for
  // set_device's message; "" when there are devices.
  virtual std::string unavailable_reason() const { return ""; }
  // Default: a kernel is registered for (op, dtype).
  virtual bool supports(ops::OpId op, DType dtype) const;
};

using BackendFactory = std::unique_ptr<Backend> (*)();
namespace detail {
bool register_backend(DeviceType type, BackendFactory factory);
// Loads the backends built as their own libraries (libspore_cuda.so; plugins.cpp), once.
void load_backend_plugins();
// Why the CUDA backend is not there ("" when it loaded).
const std::string& cuda_plugin_status();
}  // namespace detail
#define SPORE_REGISTER_BACKEND(Dev, factory)               \
  [[maybe_unused]] static const bool spore_backend_##Dev = \
      ::spore::detail::register_backend(::spore::DeviceType::Dev, factory)

// The backend for `type`, or an error naming the targets this build supports.
Backend& get_backend(DeviceType type);
bool has_backend(DeviceType type);
std::vector<std::string> available_device_targets();  // {"CPU"}

// -- the current stream: per device and per thread (the device's default stream unless a
// StreamGuard on this thread says otherwise). Kernels find theirs in KernelContext::stream.
Stream& current_stream(Device device);
class StreamGuard {  // makes `stream` current for its device on this thread, for a scope
 public:
  explicit StreamGuard(Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Device device_;
  Stream* prev_;
};

// Copies nbytes between any two devices (either may be the CPU), on the current stream of the
// device side; device to device across backends goes through the host. When `blocking`, the bytes
// are in place when the call returns.
void copy_bytes(void* dst, Device dst_dev, const void* src, Device src_dev, size_t nbytes,
                bool blocking);

}  // namespace spore
