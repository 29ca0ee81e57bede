// The test device (DeviceType::Test): a backend that is not the CPU but runs the CPU's kernels on
// memory of its own, which the host may touch only inside a kernel or a copy of this backend.
// Every block is mapped PROT_NONE; a kernel opens (read/write) the blocks of its inputs and
// outputs, and those it allocates, and closes them all when the outermost kernel returns. So code
// above the backends that reads device memory from the host without a transfer faults at once,
// and the fault handler names the block. It is how CI proves that everything above src/backends
// follows the device, and how a GPU backend's host-side plumbing stays tested without a GPU.
//
// Registered only where asked: by test programs (enable_test_device()) or with
// SPORE_TEST_DEVICE=1 in the environment (the Python tests), never as a target users are offered.
// Its streams are synchronous, like the CPU's.
#include "backends/test_device/test_device.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

#include "backends/backend.h"
#include "spore/error.h"

namespace spore {
namespace {

size_t page_size() {
  static const size_t p = size_t(sysconf(_SC_PAGESIZE));
  return p;
}

// Every live block (address -> mapped bytes), which of them are open, and the kernel depth. One
// recursive mutex serialises the test device's kernels and copies (a kernel may dispatch more).
struct Pages {
  std::recursive_mutex mutex;
  std::map<uintptr_t, size_t> blocks;     // live blocks
  std::multimap<size_t, uintptr_t> free;  // freed blocks by mapped size, kept for reuse (closed)
  std::vector<uintptr_t> open;
  int depth = 0;
  AllocatorStats stats;

  // The block holding p, or blocks.end().
  std::map<uintptr_t, size_t>::iterator find(const void* p) {
    const auto a = uintptr_t(p);
    auto it = blocks.upper_bound(a);
    if (it == blocks.begin()) return blocks.end();
    --it;
    return a < it->first + it->second ? it : blocks.end();
  }
  void open_block(const void* p) {
    auto it = find(p);
    if (it == blocks.end()) return;
    for (uintptr_t o : open)
      if (o == it->first) return;
    SPORE_ASSERT(
        mprotect(reinterpret_cast<void*>(it->first), it->second, PROT_READ | PROT_WRITE) == 0,
        "test device: mprotect failed: ", std::strerror(errno));
    open.push_back(it->first);
  }
  void close_all() {
    for (uintptr_t o : open) {
      auto it = blocks.find(o);
      if (it != blocks.end()) mprotect(reinterpret_cast<void*>(it->first), it->second, PROT_NONE);
    }
    open.clear();
  }
};
Pages& pages() {
  static Pages& p = *new Pages;  // never destroyed: tensors may outlive static destruction
  return p;
}

// Opens the given blocks (and whatever is allocated meanwhile) for the scope of a kernel or copy.
class OpenScope {
 public:
  OpenScope() : lock_(pages().mutex) { ++pages().depth; }
  ~OpenScope() {
    if (--pages().depth == 0) pages().close_all();
  }
  void open(const void* p) { pages().open_block(p); }

 private:
  std::unique_lock<std::recursive_mutex> lock_;
};

// ---- host access detection --------------------------------------------------------------------
struct sigaction g_previous;
void on_fault(int sig, siginfo_t* info, void* uctx) {
  Pages& p = pages();  // not async-signal-safe to lock; we are about to crash anyway
  auto it = p.find(info->si_addr);
  if (it != p.blocks.end()) {
    char msg[256];
    const int n =
        std::snprintf(msg, sizeof msg,
                      "\nspore: the host touched Test-device memory at %p (a block of %zu bytes "
                      "at %p) outside a kernel or copy: a missing .to(device) or copy_bytes\n",
                      info->si_addr, it->second, reinterpret_cast<void*>(it->first));
    if (n > 0) [[maybe_unused]]
      auto w = write(2, msg, size_t(n));
  }
  sigaction(SIGSEGV, &g_previous, nullptr);  // re-fault into the previous handler (or the default)
  (void)sig;
  (void)uctx;
}
void install_fault_handler() {
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &g_previous);
}

// ---- allocator, streams, backend --------------------------------------------------------------
class TestAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    Pages& p = pages();
    const std::lock_guard lock(p.mutex);
    const size_t mapped =
        (std::max<size_t>(nbytes, 1) + page_size() - 1) / page_size() * page_size();
    void* ptr = nullptr;
    auto cached = p.free.find(mapped);  // freed blocks stay mapped (closed) for reuse
    if (cached != p.free.end()) {
      ptr = reinterpret_cast<void*>(cached->second);
      p.free.erase(cached);
      p.stats.bytes_cached -= mapped;
      ++p.stats.cache_hits;
    } else {
      ptr = mmap(nullptr, mapped, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      SPORE_CHECK_KIND(ErrorKind::RuntimeError, ptr != MAP_FAILED,
                       "Test device: out of memory allocating ", nbytes, " bytes (",
                       p.stats.bytes_in_use, " in use)");
      ++p.stats.cache_misses;
    }
    p.blocks[uintptr_t(ptr)] = mapped;
    if (p.depth > 0) p.open_block(ptr);  // born open inside a kernel
    p.stats.bytes_in_use += nbytes;
    p.stats.peak_bytes_in_use = std::max(p.stats.peak_bytes_in_use, p.stats.bytes_in_use);
    ++p.stats.num_allocs;
    return ptr;
  }
  void deallocate(void* ptr, size_t nbytes) override {
    Pages& p = pages();
    const std::lock_guard lock(p.mutex);
    auto it = p.blocks.find(uintptr_t(ptr));
    SPORE_ASSERT(it != p.blocks.end(), "test device: freeing a block it does not own");
    if (std::find(p.open.begin(), p.open.end(), it->first) != p.open.end()) {
      mprotect(ptr, it->second, PROT_NONE);  // a freed block is closed again, as a new one starts
      std::erase(p.open, it->first);
    }
    p.free.emplace(it->second, it->first);
    p.stats.bytes_cached += it->second;
    p.blocks.erase(it);
    p.stats.bytes_in_use -= nbytes;
  }
  AllocatorStats stats() const override {
    const std::lock_guard lock(pages().mutex);
    return pages().stats;
  }
  void reset_peak() override {
    const std::lock_guard lock(pages().mutex);
    pages().stats.peak_bytes_in_use = pages().stats.bytes_in_use;
  }
  void empty_cache() override {
    Pages& p = pages();
    const std::lock_guard lock(p.mutex);
    for (const auto& [size, addr] : p.free) munmap(reinterpret_cast<void*>(addr), size);
    p.free.clear();
    p.stats.bytes_cached = 0;
  }
};

// Its streams are synchronous, except while captured: then queued work (kernels, copies) is
// recorded instead of run, as a CUDA stream under capture records a graph.
class TestStream final : public Stream {
 public:
  Device device() const override { return Device{DeviceType::Test, 0}; }
  void synchronize() override {}
  bool query() override { return true; }
  std::vector<std::function<void()>>* recording = nullptr;  // set while captured
};

class TestCaptured final : public CapturedWork {
 public:
  explicit TestCaptured(std::vector<std::function<void()>> work) : work_(std::move(work)) {}
  void replay(Stream&) override {
    for (auto& w : work_) w();
  }

 private:
  std::vector<std::function<void()>> work_;
};

std::vector<std::function<void()>>* recording_of(Stream* s) {
  auto* t = dynamic_cast<TestStream*>(s);
  return t ? t->recording : nullptr;
}
// Runs the CPU kernel with the Test blocks of ctx's tensors open.
void run_open(const ops::KernelFn& cpu, ops::KernelContext& ctx) {
  OpenScope scope;
  for (const ops::Tensors* list : {&ctx.inputs, static_cast<const ops::Tensors*>(&ctx.outputs)})
    for (const Tensor& t : *list)
      if (t.defined() && t.device().type == DeviceType::Test && !t.is_symbolic())
        scope.open(t.impl().storage->data());
  cpu(ctx);
}

// The CPU kernel, run with the Test blocks of its tensors open; on a captured stream, recorded
// with its tensors (the same buffers at every replay) instead.
ops::KernelFn wrap(ops::KernelFn cpu) {
  return [cpu](ops::KernelContext& ctx) {
    auto* rec = recording_of(ctx.stream);
    if (!rec) return run_open(cpu, ctx);
    rec->push_back([cpu, def = &ctx.def, attrs = &ctx.attrs, in = ctx.inputs, out = ctx.outputs,
                    stream = ctx.stream] {
      ops::Tensors outputs = out;
      ops::KernelContext c{*def, in, outputs, *attrs, stream};
      run_open(cpu, c);
      // A kernel that replaced an output tensor: its data goes to the recorded buffer.
      static const ops::Attrs kNoAttrs;
      for (size_t i = 0; i < out.size(); ++i)
        if (!outputs[i].is_same(out[i])) {
          ops::Tensors from{outputs[i]}, to{out[i]};
          ops::KernelContext copy{ops::op_def(ops::OpId::Copy), from, to, kNoAttrs, stream};
          ops::find_kernel(ops::OpId::Copy, DeviceType::Test)->fn(copy);
        }
    });
  };
}

// "Page-locked" host memory: the CPU's, with statistics of its own, so that tests see which host
// buffers were staged for asynchronous copies (what a GPU's cudaHostAlloc memory is for).
class TestPinnedAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    const std::lock_guard lock(m_);
    ++stats_.num_allocs;
    ++stats_.cache_misses;
    stats_.bytes_in_use += nbytes;
    stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
    return cpu_allocator().allocate(nbytes);
  }
  void deallocate(void* ptr, size_t nbytes) override {
    const std::lock_guard lock(m_);
    stats_.bytes_in_use -= nbytes;
    cpu_allocator().deallocate(ptr, nbytes);
  }
  AllocatorStats stats() const override {
    const std::lock_guard lock(m_);
    return stats_;
  }
  void reset_peak() override {
    const std::lock_guard lock(m_);
    stats_.peak_bytes_in_use = stats_.bytes_in_use;
  }
  void empty_cache() override {}

 private:
  mutable std::mutex m_;
  AllocatorStats stats_;
};

class TestBackend final : public Backend {
 public:
  TestBackend() {
    install_fault_handler();
    // Every op with a CPU kernel and none of its own gets the CPU kernel, wrapped; the CPU's
    // private ops excepted, as on an accelerator (a CPU pass rewriting this device's nodes fails).
    for (int i = 0, n = ops::num_ops(); i < n; ++i) {
      const auto id = ops::OpId(i);
      const ops::KernelEntry* cpu = ops::find_kernel(id, DeviceType::CPU);
      if (!cpu || ops::find_kernel(id, DeviceType::Test) ||
          ops::op_def(id).has(ops::kBackendPrivate))
        continue;
      ops::detail::register_kernel(id, DeviceType::Test, wrap(cpu->fn), {}, cpu->rows);
      for (int t = 0; t < kNumDTypes; ++t)
        if (cpu->supports(DType(t)))
          ops::detail::register_kernel_dtype(id, DeviceType::Test, DType(t));
    }
  }
  DeviceType type() const override { return DeviceType::Test; }
  std::string_view name() const override { return "Test"; }
  int device_count() const override { return 1; }
  Allocator& allocator(int) override { return allocator_; }
  Allocator& pinned_allocator() override { return pinned_; }
  DeviceProperties properties(int) const override {
    return {.name = "Spore test device", .total_memory = 0, .alignment = page_size()};
  }
  MemoryInfo memory_info(int) const override { return {}; }
  Stream& default_stream(int) override { return stream_; }
  std::unique_ptr<Stream> new_stream(int) override { return std::make_unique<TestStream>(); }
  std::unique_ptr<Event> new_event(int) override { return std::make_unique<HostClockEvent>(); }
  void synchronize(int) override {}
  void copy_async(void* dst, Device dst_dev, const void* src, Device src_dev, size_t n,
                  Stream& stream) override {
    if (auto* rec = recording_of(&stream)) {
      rec->push_back([this, dst, dst_dev, src, src_dev, n] {
        TestStream now;
        copy_async(dst, dst_dev, src, src_dev, n, now);
      });
      return;
    }
    OpenScope scope;
    if (dst_dev.type == DeviceType::Test) scope.open(dst);
    if (src_dev.type == DeviceType::Test) scope.open(src);
    std::memcpy(dst, src, n);
    ++test_device_copies()
          .count[int(src_dev.type == DeviceType::Test) * 2 + int(dst_dev.type == DeviceType::Test)];
  }
  std::string library_versions() const override { return "the CPU kernels on guarded pages"; }
  bool supports_capture() const override { return true; }
  void begin_capture(Stream& stream) override {
    auto& s = dynamic_cast<TestStream&>(stream);
    SPORE_CHECK(!s.recording, "[capture] the Test stream is already being captured");
    s.recording = new std::vector<std::function<void()>>;
  }
  std::unique_ptr<CapturedWork> end_capture(Stream& stream, std::string& why) override {
    auto& s = dynamic_cast<TestStream&>(stream);
    SPORE_CHECK(s.recording, "[capture] end_capture without begin_capture");
    std::unique_ptr<std::vector<std::function<void()>>> rec(s.recording);
    s.recording = nullptr;
    if (fail_next_capture()) {  // tests: what a CUDA capture invalidated by a kernel looks like
      fail_next_capture() = false;
      why = "the Test device was told to fail this capture";
      return nullptr;
    }
    return std::make_unique<TestCaptured>(std::move(*rec));
  }

 private:
  TestAllocator allocator_;
  TestPinnedAllocator pinned_;
  TestStream stream_;
};

std::unique_ptr<Backend> make_test_backend() { return std::make_unique<TestBackend>(); }

[[maybe_unused]] const bool registered_from_env = [] {
  const char* e = std::getenv("SPORE_TEST_DEVICE");
  if (e && std::strcmp(e, "1") == 0) enable_test_device();
  return true;
}();

}  // namespace

void enable_test_device() {
  if (!has_backend(DeviceType::Test)) detail::register_backend(DeviceType::Test, make_test_backend);
}

TransferCounts& test_device_copies() {
  static TransferCounts c;
  return c;
}

bool& fail_next_capture() {
  static bool f = false;
  return f;
}

}  // namespace spore
