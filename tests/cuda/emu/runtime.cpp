// The emulated CUDA runtime: the subset of the runtime API the CUDA backend calls, on host memory,
// with CUDA's ordering rules kept strict enough to catch what a GPU would punish:
// - work is queued in submission order (a valid order for any correctly synchronised program) and
//   runs only when the host synchronises: a stream or event sync, a blocking copy to pageable
//   memory, or the second query of a point (the first answers "not ready"). So a host read of a
//   copy's destination before waiting for it sees stale bytes, as on a GPU;
// - a copy from pageable memory takes its bytes at the call, one to pageable memory waits;
// - fresh device memory is filled with 0xFF bytes (NaN in every float type), so a kernel that reads
//   what nobody wrote shows;
// - with SPORE_CUDA_EMU_PROTECT=1, device memory is mapped PROT_NONE except while queued work
//   runs, so host code that reads or writes GPU memory directly (garbage or a crash on a GPU)
//   faults at once, and the fault handler names the allocation (two mprotect calls per
//   allocation per synchronisation: slow, so one ctest entry runs the main paths with it);
// - copies and memsets must stay inside one allocation;
// - stream capture records the stream's work into a graph instead of running it, refuses what CUDA
//   refuses during a capture (synchronisation, allocation outside relaxed mode, pageable copies)
//   by invalidating it, and a graph launch queues the recorded work again.
// The emulated device is one sm_90 GPU with 132 SMs (an H100 / H200's shape), so launch plans
// match the real ones.
#include "tests/cuda/emu/runtime.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "tests/cuda/emu/emu_kernel.h"

namespace spore::emu {
// One piece of queued or recorded work: what it is (for errors) and the function that does it,
// returning an error message, empty on success.
struct Work {
  std::string what;
  std::function<std::string()> fn;
};
}  // namespace spore::emu

struct CUgraph_st {
  std::vector<spore::emu::Work> work;  // in stream order
};
struct CUgraphExec_st {
  CUgraph_st graph;  // an instantiated graph replays a copy of the recorded work
};
struct CUstream_st {
  CUgraph_st* capture = nullptr;  // while capturing
  std::string invalid;            // why the capture was invalidated, if it was
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  uint64_t queried = 0;  // the point last answered "not ready"
};
struct CUevent_st {
  uint64_t seq = 0;  // the work it follows
  bool recorded = false, timing = true, captured = false;
  double ms = 0;  // host time when reached (timing events)
  uint64_t queried = 0;
};

namespace spore::emu {
namespace {

constexpr size_t kTotalMemory = size_t(80) << 30;

struct Item {
  uint64_t seq;
  Work work;
};

struct Runtime {
  std::recursive_mutex m;
  std::deque<Item> queue;
  uint64_t next = 0, done = 0;
  cudaError_t sticky = cudaSuccess;
  std::map<uintptr_t, size_t> device, pinned;
  size_t in_use = 0;
  CUstream_st legacy;
  std::set<CUstream_st*> capturing;
};
Runtime& rt() {
  static Runtime& r = *new Runtime;  // never destroyed: tensors may outlive static destruction
  return r;
}
thread_local cudaError_t last_error = cudaSuccess;
thread_local int current_device = 0;
thread_local cudaStreamCaptureMode thread_mode = cudaStreamCaptureModeGlobal;

size_t page() {
  static const size_t p = size_t(sysconf(_SC_PAGESIZE));
  return p;
}
size_t mapped_size(size_t n) { return (std::max<size_t>(n, 1) + page() - 1) / page() * page(); }
bool protecting() {
  static const bool on = [] {
    const char* e = std::getenv("SPORE_CUDA_EMU_PROTECT");
    return e && std::string(e) == "1";
  }();
  return on;
}
// Opens (read/write) or closes (no access) every device allocation.
void set_device_access(bool open) {
  if (!protecting()) return;
  for (const auto& [a, n] : rt().device)
    mprotect(reinterpret_cast<void*>(a), mapped_size(n), open ? PROT_READ | PROT_WRITE : PROT_NONE);
}

struct sigaction previous_handler;
void on_fault(int, siginfo_t* info, void*) {
  const auto a = uintptr_t(info->si_addr);
  for (const auto& [b, n] : rt().device)  // not async-signal-safe; the process is crashing anyway
    if (a >= b && a < b + mapped_size(n)) {
      char msg[320];
      const int k = std::snprintf(
          msg, sizeof msg,
          "\n[CUDA emulator] the host touched GPU memory at %p (an allocation of %zu bytes at "
          "%p) outside a kernel or copy: on a GPU this reads garbage or crashes; copy it to the "
          "host first\n",
          info->si_addr, n, reinterpret_cast<void*>(b));
      if (k > 0) [[maybe_unused]]
        auto w = write(2, msg, size_t(k));
      break;
    }
  sigaction(SIGSEGV, &previous_handler, nullptr);  // re-fault into the previous handler
}
void install_fault_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &previous_handler);
  });
}

double now_ms() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

cudaError_t fail(cudaError_t e) {
  if (e != cudaSuccess) last_error = e;
  return e;
}

CUstream_st* stream_of(cudaStream_t s) { return s ? s : &rt().legacy; }

// Runs queued work up to and including point `seq`. A failed item makes the error sticky (as a
// kernel fault does on a GPU) and the rest is dropped.
void run_to(uint64_t seq) {
  Runtime& r = rt();
  if (r.queue.empty() || r.queue.front().seq > seq) {
    if (r.done < seq && r.queue.empty()) r.done = seq;
    return;
  }
  set_device_access(true);
  while (!r.queue.empty() && r.queue.front().seq <= seq) {
    Item item = std::move(r.queue.front());
    r.queue.pop_front();
    r.done = item.seq;
    if (r.sticky != cudaSuccess) continue;
    const std::string err = item.work.fn();
    if (!err.empty()) {
      std::fprintf(stderr, "[CUDA emulator] %s failed: %s\n", item.work.what.c_str(), err.c_str());
      r.sticky = cudaErrorLaunchFailure;
    }
  }
  set_device_access(false);
  if (r.done < seq && r.queue.empty()) r.done = seq;
}
void run_all() { run_to(rt().next); }

// A capture that CUDA would refuse this call in: invalidates it and returns the error.
cudaError_t refuse_in_capture(const char* call) {
  Runtime& r = rt();
  if (thread_mode == cudaStreamCaptureModeRelaxed || r.capturing.empty()) return cudaSuccess;
  for (CUstream_st* s : r.capturing)
    if (s->mode != cudaStreamCaptureModeRelaxed && s->invalid.empty())
      s->invalid = std::string(call) + " during a stream capture";
  return fail(cudaErrorStreamCaptureUnsupported);
}

template <class Map>
bool inside(const Map& m, const void* p, size_t n) {
  const auto a = uintptr_t(p);
  auto it = m.upper_bound(a);
  if (it == m.begin()) return false;
  --it;
  return a >= it->first && a + n <= it->first + it->second;
}
template <class Map>
bool starts_in(const Map& m, const void* p) {
  return inside(m, p, 1);
}

#define SPORE_EMU_LOCK                                 \
  std::lock_guard<std::recursive_mutex> lock_(rt().m); \
  if (rt().sticky != cudaSuccess) return fail(rt().sticky)

}  // namespace

cudaError_t enqueue(cudaStream_t stream, const char* what, std::function<std::string()> fn) {
  Runtime& r = rt();
  std::lock_guard<std::recursive_mutex> lock(r.m);
  if (r.sticky != cudaSuccess) return fail(r.sticky);
  CUstream_st* s = stream_of(stream);
  if (s->capture) {
    s->capture->work.push_back(Work{what, std::move(fn)});
    return cudaSuccess;
  }
  r.queue.push_back(Item{++r.next, Work{what, std::move(fn)}});
  return cudaSuccess;
}

void reset_after_fault() {
  std::lock_guard<std::recursive_mutex> lock(rt().m);
  run_all();
  rt().sticky = cudaSuccess;
  last_error = cudaSuccess;
}

bool is_device_range(const void* p, size_t n) {
  std::lock_guard<std::recursive_mutex> lock(rt().m);
  return inside(rt().device, p, n);
}

void enqueue_launch(const char* kernel, dim3 grid, dim3 block, size_t shared, cudaStream_t stream,
                    std::function<void()> body) {
  (void)shared;
  if (block.x * uint64_t(block.y) * block.z > 1024 || block.x * uint64_t(block.y) * block.z == 0 ||
      grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 0x7fffffffu || grid.y > 65535 ||
      grid.z > 65535) {
    std::fprintf(stderr,
                 "[CUDA emulator] %s: invalid launch configuration: grid (%u,%u,%u), block "
                 "(%u,%u,%u)\n",
                 kernel, grid.x, grid.y, grid.z, block.x, block.y, block.z);
    fail(cudaErrorInvalidConfiguration);
    return;
  }
  const std::string name = kernel;
  fail(enqueue(stream, kernel, [name, grid, block, body = std::move(body)]() -> std::string {
    std::string error;
    run_grid(name.c_str(), grid, block, body, &error);
    return error;
  }));
}

}  // namespace spore::emu

using namespace spore::emu;

// ---- errors and devices -------------------------------------------------------------------------
const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration:
      return "cudaErrorInvalidConfiguration";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorLaunchFailure:
      return "cudaErrorLaunchFailure";
    case cudaErrorNotSupported:
      return "cudaErrorNotSupported";
    case cudaErrorStreamCaptureUnsupported:
      return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated:
      return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorCapturedEvent:
      return "cudaErrorCapturedEvent";
    case cudaErrorStreamCaptureIsolation:
      return "cudaErrorStreamCaptureIsolation";
    case cudaErrorIllegalState:
      return "cudaErrorIllegalState";
    default:
      return "cudaErrorUnknown";
  }
}
const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess:
      return "no error";
    case cudaErrorLaunchFailure:
      return "unspecified launch failure (the CUDA emulator printed the cause on stderr)";
    case cudaErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture";
    case cudaErrorNotSupported:
      return "operation not supported by the CUDA emulator";
    default:
      return cudaGetErrorName(e);
  }
}
cudaError_t cudaGetLastError() {
  std::lock_guard<std::recursive_mutex> lock(rt().m);
  if (rt().sticky != cudaSuccess) return rt().sticky;
  const cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}
cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}
cudaError_t cudaGetDevice(int* d) {
  *d = current_device;
  return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) {
  if (d != 0) return fail(cudaErrorInvalidDevice);
  current_device = d;
  return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice);
  *p = cudaDeviceProp{};
  std::snprintf(p->name, sizeof p->name, "Spore CUDA emulator (sm_90)");
  p->totalGlobalMem = kTotalMemory;
  p->multiProcessorCount = 132;
  p->major = 9;
  p->minor = 0;
  p->warpSize = 32;
  p->maxThreadsPerBlock = 1024;
  p->sharedMemPerBlock = 48 * 1024;
  return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr attr, int device) {
  if (device != 0) return fail(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrMultiProcessorCount:
      *v = 132;
      break;
    case cudaDevAttrComputeCapabilityMajor:
      *v = 9;
      break;
    case cudaDevAttrComputeCapabilityMinor:
      *v = 0;
      break;
    default:
      *v = 0;
  }
  return cudaSuccess;
}
cudaError_t cudaRuntimeGetVersion(int* v) {
  *v = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* v) {
  *v = CUDART_VERSION;
  return cudaSuccess;
}
cudaError_t cudaMemGetInfo(size_t* free, size_t* total) {
  std::lock_guard<std::recursive_mutex> lock(rt().m);
  *total = kTotalMemory;
  *free = kTotalMemory - rt().in_use;
  return cudaSuccess;
}

// ---- memory -------------------------------------------------------------------------------------
cudaError_t cudaMalloc(void** p, size_t n) {
  SPORE_EMU_LOCK;
  if (const cudaError_t e = refuse_in_capture("cudaMalloc")) return e;
  *p = nullptr;
  if (rt().in_use + n > kTotalMemory) return fail(cudaErrorMemoryAllocation);
  void* q =
      mmap(nullptr, mapped_size(n), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (q == MAP_FAILED) return fail(cudaErrorMemoryAllocation);
  std::memset(q, 0xFF, n);
  if (protecting()) {
    install_fault_handler();
    mprotect(q, mapped_size(n), PROT_NONE);
  }
  rt().device[uintptr_t(q)] = n;
  rt().in_use += n;
  *p = q;
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  SPORE_EMU_LOCK;
  if (!p) return cudaSuccess;
  if (const cudaError_t e = refuse_in_capture("cudaFree")) return e;
  run_all();  // cudaFree waits for the device
  auto it = rt().device.find(uintptr_t(p));
  if (it == rt().device.end()) return fail(cudaErrorInvalidValue);
  rt().in_use -= it->second;
  munmap(p, mapped_size(it->second));
  rt().device.erase(it);
  return cudaSuccess;
}
cudaError_t cudaHostAlloc(void** p, size_t n, unsigned int) {
  SPORE_EMU_LOCK;
  if (const cudaError_t e = refuse_in_capture("cudaHostAlloc")) return e;
  void* q = std::aligned_alloc(4096, (std::max<size_t>(n, 1) + 4095) / 4096 * 4096);
  if (!q) return fail(cudaErrorMemoryAllocation);
  rt().pinned[uintptr_t(q)] = n;
  *p = q;
  return cudaSuccess;
}
// Mapped page-locked memory: the device reads and writes it through the same address here.
cudaError_t cudaHostGetDevicePointer(void** d, void* h, unsigned int) {
  SPORE_EMU_LOCK;
  if (!starts_in(rt().pinned, h)) return fail(cudaErrorInvalidValue);
  *d = h;
  return cudaSuccess;
}
cudaError_t cudaFreeHost(void* p) {
  SPORE_EMU_LOCK;
  if (!p) return cudaSuccess;
  if (const cudaError_t e = refuse_in_capture("cudaFreeHost")) return e;
  run_all();
  if (!rt().pinned.erase(uintptr_t(p))) return fail(cudaErrorInvalidValue);
  std::free(p);
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  SPORE_EMU_LOCK;
  if (n == 0) return cudaSuccess;
  Runtime& r = rt();
  const bool dst_dev = starts_in(r.device, dst), src_dev = starts_in(r.device, src);
  const bool dst_pinned = starts_in(r.pinned, dst), src_pinned = starts_in(r.pinned, src);
  if ((dst_dev && !inside(r.device, dst, n)) || (src_dev && !inside(r.device, src, n)) ||
      (dst_pinned && !inside(r.pinned, dst, n)) || (src_pinned && !inside(r.pinned, src, n))) {
    std::fprintf(stderr, "[CUDA emulator] cudaMemcpyAsync of %zu bytes runs past an allocation\n",
                 n);
    return fail(cudaErrorInvalidValue);
  }
  const bool want_dst_dev = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool want_src_dev = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind != cudaMemcpyDefault && (want_dst_dev != dst_dev || want_src_dev != src_dev)) {
    std::fprintf(stderr,
                 "[CUDA emulator] cudaMemcpyAsync: the kind (%d) contradicts the pointers\n",
                 int(kind));
    return fail(cudaErrorInvalidValue);
  }
  CUstream_st* s = stream_of(stream);
  const bool pageable_src = !src_dev && !src_pinned, pageable_dst = !dst_dev && !dst_pinned;
  if (s->capture && (pageable_src || pageable_dst)) {
    if (s->invalid.empty()) s->invalid = "a copy from or to pageable host memory";
    return fail(cudaErrorStreamCaptureUnsupported);
  }
  if (pageable_src) {  // CUDA stages pageable bytes at the call: the caller may reuse them at once
    auto bytes = std::make_shared<std::vector<unsigned char>>(
        static_cast<const unsigned char*>(src), static_cast<const unsigned char*>(src) + n);
    return fail(enqueue(stream, "cudaMemcpyAsync", [dst, bytes] {
      std::memcpy(dst, bytes->data(), bytes->size());
      return std::string();
    }));
  }
  const cudaError_t e = enqueue(stream, "cudaMemcpyAsync", [dst, src, n] {
    std::memmove(dst, src, n);
    return std::string();
  });
  if (e != cudaSuccess) return fail(e);
  if (pageable_dst) run_all();  // a copy to pageable memory returns when it is done
  return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void* p, int value, size_t n, cudaStream_t stream) {
  SPORE_EMU_LOCK;
  if (n == 0) return cudaSuccess;
  if (!inside(rt().device, p, n)) {
    std::fprintf(stderr, "[CUDA emulator] cudaMemsetAsync of %zu bytes outside an allocation\n", n);
    return fail(cudaErrorInvalidValue);
  }
  return fail(enqueue(stream, "cudaMemsetAsync", [p, value, n] {
    std::memset(p, value, n);
    return std::string();
  }));
}

// ---- streams and events -------------------------------------------------------------------------
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned int) {
  *s = new CUstream_st;
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
  std::lock_guard<std::recursive_mutex> lock(rt().m);
  rt().capturing.erase(s);
  delete s;
  return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t) {
  SPORE_EMU_LOCK;
  if (const cudaError_t e = refuse_in_capture("cudaStreamSynchronize")) return e;
  run_all();
  return rt().sticky;
}
cudaError_t cudaDeviceSynchronize() {
  SPORE_EMU_LOCK;
  if (const cudaError_t e = refuse_in_capture("cudaDeviceSynchronize")) return e;
  run_all();
  return rt().sticky;
}
cudaError_t cudaStreamQuery(cudaStream_t stream) {
  SPORE_EMU_LOCK;
  if (const cudaError_t e = refuse_in_capture("cudaStreamQuery")) return e;
  CUstream_st* s = stream_of(stream);
  Runtime& r = rt();
  if (r.done < r.next && s->queried != r.next) {  // first ask: not ready yet
    s->queried = r.next;
    return cudaErrorNotReady;
  }
  run_all();
  return r.sticky;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t e, unsigned int) {
  SPORE_EMU_LOCK;
  CUstream_st* s = stream_of(stream);
  if (e->recorded && e->captured != bool(s->capture)) {
    // A dependency across the capture's boundary: CUDA refuses it (cudaEventWaitExternal aside);
    // a capturing stream's event waited on outside (a fork into the capture) is not emulated.
    if (s->capture && s->invalid.empty()) s->invalid = "a wait on an event recorded outside it";
    std::fprintf(stderr, "[CUDA emulator] cudaStreamWaitEvent across a capture's boundary\n");
    return fail(cudaErrorStreamCaptureIsolation);
  }
  return cudaSuccess;  // one queue in submission order: the event's work is already before
}
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned int flags) {
  *e = new CUevent_st;
  (*e)->timing = !(flags & cudaEventDisableTiming);
  return cudaSuccess;
}
cudaError_t cudaEventDestroy(cudaEvent_t e) {
  std::lock_guard<std::recursive_mutex> lock(rt().m);
  run_to(e->seq);  // a timing record still queued writes into the event (CUDA defers the destroy)
  delete e;
  return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t stream) {
  SPORE_EMU_LOCK;
  CUstream_st* s = stream_of(stream);
  e->recorded = true;
  e->captured = s->capture != nullptr;
  if (e->captured) return cudaSuccess;
  if (e->timing) {
    const cudaError_t r = enqueue(stream, "cudaEventRecord", [e] {
      e->ms = now_ms();
      return std::string();
    });
    if (r != cudaSuccess) return fail(r);
  }
  e->seq = rt().next;
  return cudaSuccess;
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
  SPORE_EMU_LOCK;
  if (e->captured) return fail(cudaErrorCapturedEvent);
  Runtime& r = rt();
  if (r.done < e->seq && e->queried != e->seq) {  // first ask: not ready yet
    e->queried = e->seq;
    return cudaErrorNotReady;
  }
  run_to(e->seq);
  return r.sticky;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  SPORE_EMU_LOCK;
  if (const cudaError_t x = refuse_in_capture("cudaEventSynchronize")) return x;
  if (e->captured) return fail(cudaErrorCapturedEvent);
  run_to(e->seq);
  return rt().sticky;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  SPORE_EMU_LOCK;
  if (!start->timing || !end->timing || !start->recorded || !end->recorded)
    return fail(cudaErrorInvalidResourceHandle);
  if (rt().done < start->seq || rt().done < end->seq) return fail(cudaErrorNotReady);
  *ms = float(end->ms - start->ms);
  return cudaSuccess;
}

// ---- capture and graphs -------------------------------------------------------------------------
cudaError_t cudaThreadExchangeStreamCaptureMode(cudaStreamCaptureMode* mode) {
  std::swap(thread_mode, *mode);
  return cudaSuccess;
}
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  SPORE_EMU_LOCK;
  if (!stream) return fail(cudaErrorStreamCaptureUnsupported);  // not the legacy stream
  if (stream->capture) return fail(cudaErrorIllegalState);
  stream->capture = new CUgraph_st;
  stream->invalid.clear();
  stream->mode = mode;
  rt().capturing.insert(stream);
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  std::lock_guard<std::recursive_mutex> lock(rt().m);
  if (!stream || !stream->capture) return fail(cudaErrorIllegalState);
  rt().capturing.erase(stream);
  CUgraph_st* g = stream->capture;
  stream->capture = nullptr;
  *graph = nullptr;
  if (!stream->invalid.empty()) {
    std::fprintf(stderr, "[CUDA emulator] the capture was invalidated by %s\n",
                 stream->invalid.c_str());
    delete g;
    return fail(cudaErrorStreamCaptureInvalidated);
  }
  *graph = g;
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph, unsigned long long) {
  *exec = new CUgraphExec_st{*graph};
  return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  SPORE_EMU_LOCK;
  for (const Work& w : exec->graph.work)
    if (const cudaError_t e = enqueue(stream, w.what.c_str(), w.fn)) return fail(e);
  return cudaSuccess;
}
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  delete exec;
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  delete graph;
  return cudaSuccess;
}

// ---- the generated kernels' loading: a cubin cannot run on the host
// ----------------------------------
cudaError_t cudaLibraryLoadData(cudaLibrary_t*, const void*, cudaJitOption*, void**, unsigned int,
                                cudaLibraryOption*, void**, unsigned int) {
  return fail(cudaErrorNotSupported);
}
cudaError_t cudaLibraryGetKernel(cudaKernel_t*, cudaLibrary_t, const char*) {
  return fail(cudaErrorNotSupported);
}
cudaError_t cudaLaunchKernel(const void*, dim3, dim3, void**, size_t, cudaStream_t) {
  return fail(cudaErrorNotSupported);
}
