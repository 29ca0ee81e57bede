// Allocator interface and its statistics. Each backend owns one allocator per device; the CPU one
// caches freed blocks by size (training loops reuse the same sizes every step) and aligns to 64
// bytes.
#pragma once
#include <cstddef>
#include <cstdint>

namespace spore {

struct AllocatorStats {
  size_t bytes_in_use = 0;       // handed out and not yet freed
  size_t peak_bytes_in_use = 0;  // max of bytes_in_use since start or reset_peak()
  size_t bytes_cached = 0;       // freed blocks kept for reuse
  uint64_t num_allocs = 0;       // allocate() calls
  uint64_t cache_hits = 0;       // served from the cache
  uint64_t cache_misses = 0;     // went to the system
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
  virtual AllocatorStats stats() const = 0;
  virtual void reset_peak() = 0;
  virtual void empty_cache() = 0;  // return every cached block to the system
};

Allocator& cpu_allocator();

}  // namespace spore
