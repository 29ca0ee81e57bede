// The CUDA backend's device memory: a stream-ordered caching allocator (the design of PyTorch's
// CUDACachingAllocator, written for Spore) over a raw allocator. It knows nothing of CUDA itself,
// so its bookkeeping is tested on a fake raw allocator on machines without a GPU
// (tests/cuda/caching_allocator_test.cpp).
//
// - Sizes are rounded up to classes: multiples of 512 B below 1 MiB, of 2 MiB above.
// - A freed block is cached for the stream it was used on; the next request of that stream takes
//   the smallest cached block that fits (one that is not too big: at most twice the request for
//   large blocks), without any synchronisation, since work on one stream runs in order.
// - A block used on another stream is reusable only after an event recorded on that stream at free
//   time has completed (record_stream / the Events hook), as PyTorch does.
// - Out of memory: every cached block whose stream work is done is returned to the raw allocator
//   and the request is retried once; then an error names the bytes requested, in use and cached.
// - Capture pools (CUDA graphs): while a pool is open, blocks handed out belong to it. A pool
//   block that is freed goes to the pool's own free list, not the cache, because a recorded graph
//   still writes it at every replay; only the pool's next allocations reuse it (the recording's
//   later kernels, in stream order). release_pool gives the pool's free blocks back to the cache
//   when the recording is destroyed, and its live blocks go there when they are freed.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "spore/allocator.h"

namespace spore::cuda {

// cudaMalloc / cudaFree in the real backend; host memory with a capacity in tests.
class RawDeviceAllocator {
 public:
  virtual ~RawDeviceAllocator() = default;
  virtual void* malloc(size_t nbytes) = 0;  // nullptr when out of memory
  virtual void free(void* ptr) = 0;
};

// Events on streams, opaque to the allocator (cudaEventRecord / cudaEventQuery in the backend).
struct StreamEvents {
  std::function<void*(void* stream)> record;  // an event after the stream's queued work
  std::function<bool(void* event)> done;      // it has run
  std::function<void(void* event)> release;
};

size_t round_size(size_t nbytes);

class CachingAllocator : public Allocator {
 public:
  // current_stream: the stream an allocate() is for (the backend's current stream of the device
  // on the calling thread); none: every block is for stream nullptr.
  CachingAllocator(RawDeviceAllocator& raw, StreamEvents events, std::string device_name,
                   std::function<void*()> current_stream = {});
  ~CachingAllocator() override;

  void* allocate(size_t nbytes) override;          // for the current stream
  void* allocate_on(size_t nbytes, void* stream);  // for `stream`
  void deallocate(void* ptr, size_t nbytes) override;
  // The block at ptr is also used by `stream`: its memory is reused only once that stream's work
  // queued so far has run.
  void record_stream(void* ptr, void* stream);
  // Called on every block handed out, with its class size and stream (the backend fills it with
  // 0xFF bytes, NaN in every float type, when SPORE_CUDA_POISON=1: the parity tests' poisoned
  // outputs, so an element a kernel forgets to write shows).
  void set_poison(std::function<void(void* ptr, size_t nbytes, void* stream)> fill);
  // Opens a capture pool (one at a time) for the blocks allocated until end_pool; returns its id.
  int begin_pool();
  void end_pool();
  void release_pool(int pool);
  size_t pool_bytes(int pool) const;  // held by the pool: its live and free blocks
  AllocatorStats stats() const override;
  void reset_peak() override;
  void empty_cache() override;  // returns every idle cached block to the raw allocator

 private:
  struct Block {
    size_t size = 0;
    void* stream = nullptr;
    std::vector<void*> other_streams;  // record_stream
    int pool = 0;                      // the capture pool it belongs to; 0: none
  };
  struct Pool {
    std::vector<std::pair<void*, Block>> free;  // freed, still the recording's
    size_t live_bytes = 0;
  };
  struct Pending {  // freed, used on other streams: waiting for their events
    void* ptr;
    Block block;
    std::vector<void*> events;
  };
  void* take_cached(size_t size, void* stream);
  void collect_pending();  // pending blocks whose events are done go back to the cache
  void release_cached();
  std::mutex mutex_;
  RawDeviceAllocator& raw_;
  StreamEvents events_;
  std::string device_name_;
  std::function<void*()> current_stream_;
  std::function<void(void*, size_t, void*)> poison_;
  std::unordered_map<void*, Block> live_;
  std::map<std::pair<void*, size_t>, std::vector<void*>> cached_;  // (stream, size) -> blocks
  std::vector<Pending> pending_;
  std::map<int, Pool> pools_;  // live pools
  int open_pool_ = 0, next_pool_ = 1;
  AllocatorStats stats_;
};

}  // namespace spore::cuda
