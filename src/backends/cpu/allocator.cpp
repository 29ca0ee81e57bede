// The CPU caching allocator: 64-byte aligned blocks, freed blocks kept in per-size free lists
// (sizes rounded up so near-equal requests share a list) and reused, up to a cap on cached bytes.
// A training step asks for the same sizes every iteration, so after the first step almost every
// allocation is a cache hit and no system call happens in the hot loop.
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

#include "spore/allocator.h"
#include "spore/error.h"

namespace spore {
namespace {

constexpr size_t kAlign = 64;
constexpr size_t kMaxCached = size_t(2) << 30;  // keep at most 2 GiB of freed blocks

size_t round_size(size_t n) {
  if (n == 0) n = 1;
  if (n <= 4096) return (n + kAlign - 1) / kAlign * kAlign;
  // 8 size classes per power of two: at most 12.5% waste, few distinct lists.
  size_t p = size_t(1) << (63 - __builtin_clzll(n));
  size_t step = p / 8;
  return (n + step - 1) / step * step;
}

class CpuCachingAllocator final : public Allocator {
 public:
  ~CpuCachingAllocator() override { empty_cache(); }

  void* allocate(size_t nbytes) override {
    const size_t size = round_size(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    ++stats_.num_allocs;
    void* p = nullptr;
    auto it = free_.find(size);
    if (it != free_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      stats_.bytes_cached -= size;
      ++stats_.cache_hits;
    } else {
      ++stats_.cache_misses;
      p = std::aligned_alloc(kAlign, size);
      if (!p) {
        empty_cache_locked();
        p = std::aligned_alloc(kAlign, size);
      }
      SPORE_CHECK_KIND(ErrorKind::RuntimeError, p, "out of memory: could not allocate ", size,
                       " bytes on CPU (", stats_.bytes_in_use, " bytes in use)");
    }
    stats_.bytes_in_use += size;
    stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
    return p;
  }

  void deallocate(void* ptr, size_t nbytes) override {
    if (!ptr) return;
    const size_t size = round_size(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    stats_.bytes_in_use -= size;
    if (stats_.bytes_cached + size > kMaxCached) {
      std::free(ptr);
      return;
    }
    free_[size].push_back(ptr);
    stats_.bytes_cached += size;
  }

  AllocatorStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void reset_peak() override {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.peak_bytes_in_use = stats_.bytes_in_use;
  }
  void empty_cache() override {
    std::lock_guard<std::mutex> lock(mu_);
    empty_cache_locked();
  }

 private:
  void empty_cache_locked() {
    for (auto& [size, list] : free_)
      for (void* p : list) std::free(p);
    free_.clear();
    stats_.bytes_cached = 0;
  }
  mutable std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  AllocatorStats stats_;
};

}  // namespace

Allocator& cpu_allocator() {
  static CpuCachingAllocator* a =
      new CpuCachingAllocator();  // never destroyed: tensors may outlive main
  return *a;
}

}  // namespace spore
