// The stream-ordered caching allocator (caching_allocator.h).
#include "backends/cuda/caching_allocator.h"

#include <algorithm>

#include "spore/error.h"

namespace spore::cuda {

namespace {
constexpr size_t kSmallUnit = 512;
constexpr size_t kLargeUnit = size_t(2) << 20;
constexpr size_t kSmallLimit = size_t(1) << 20;

std::string mib(size_t b) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", double(b) / (1 << 20));
  return buf;
}
}  // namespace

size_t round_size(size_t nbytes) {
  if (nbytes == 0) return kSmallUnit;
  const size_t unit = nbytes < kSmallLimit ? kSmallUnit : kLargeUnit;
  return (nbytes + unit - 1) / unit * unit;
}

CachingAllocator::CachingAllocator(RawDeviceAllocator& raw, StreamEvents events,
                                   std::string device_name, std::function<void*()> current_stream)
    : raw_(raw),
      events_(std::move(events)),
      device_name_(std::move(device_name)),
      current_stream_(std::move(current_stream)) {}

void* CachingAllocator::allocate(size_t nbytes) {
  return allocate_on(nbytes, current_stream_ ? current_stream_() : nullptr);
}

CachingAllocator::~CachingAllocator() {
  // Live blocks belong to tensors that may outlive the backend at exit: left to the driver.
  for (auto& p : pending_)
    for (void* e : p.events) events_.release(e);
  pending_.clear();
}

void* CachingAllocator::take_cached(size_t size, void* stream) {
  // The smallest cached block of this stream that fits; a large request takes one at most twice
  // its size (a bigger block would waste what another request could use).
  auto it = cached_.lower_bound({stream, size});
  if (it == cached_.end() || it->first.first != stream) return nullptr;
  const size_t have = it->first.second;
  if (size >= kSmallLimit && have > 2 * size) return nullptr;
  if (size < kSmallLimit && have >= kSmallLimit) return nullptr;
  void* p = it->second.back();
  it->second.pop_back();
  if (it->second.empty()) cached_.erase(it);
  live_[p] = Block{have, stream, {}};
  stats_.bytes_cached -= have;
  return p;
}

void CachingAllocator::collect_pending() {
  for (size_t i = 0; i < pending_.size();) {
    Pending& p = pending_[i];
    const bool done =
        std::all_of(p.events.begin(), p.events.end(), [&](void* e) { return events_.done(e); });
    if (!done) {
      ++i;
      continue;
    }
    for (void* e : p.events) events_.release(e);
    cached_[{p.block.stream, p.block.size}].push_back(p.ptr);
    stats_.bytes_cached += p.block.size;
    pending_[i] = std::move(pending_.back());
    pending_.pop_back();
  }
}

void CachingAllocator::release_cached() {
  for (auto& [key, ptrs] : cached_)
    for (void* p : ptrs) {
      raw_.free(p);
      stats_.bytes_cached -= key.second;
    }
  cached_.clear();
}

void CachingAllocator::set_poison(std::function<void(void*, size_t, void*)> fill) {
  std::lock_guard lock(mutex_);
  poison_ = std::move(fill);
}

void* CachingAllocator::allocate_on(size_t nbytes, void* stream) {
  std::unique_lock lock(mutex_);
  const size_t size = round_size(nbytes);
  ++stats_.num_allocs;
  void* p = nullptr;
  if (open_pool_) {  // the open pool's own free blocks first (the smallest that fits)
    auto& free = pools_.at(open_pool_).free;
    size_t best = free.size();
    for (size_t i = 0; i < free.size(); ++i)
      if (free[i].second.size >= size && free[i].second.stream == stream &&
          (best == free.size() || free[i].second.size < free[best].second.size))
        best = i;
    if (best < free.size()) {
      p = free[best].first;
      live_[p] = free[best].second;
      free.erase(free.begin() + std::ptrdiff_t(best));
      ++stats_.cache_hits;
      stats_.bytes_in_use += live_[p].size;
      pools_.at(open_pool_).live_bytes += live_[p].size;
      stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
      return p;  // no poison: the recording owns its contents
    }
  } else {
    collect_pending();  // (not while capturing: that queries events)
  }
  p = take_cached(size, stream);
  if (p) {
    ++stats_.cache_hits;
  } else {
    ++stats_.cache_misses;
    p = raw_.malloc(size);
    if (!p && !open_pool_) {  // out of memory: give the idle cache back and try once more
      release_cached();       // (not while capturing: freeing memory synchronises the device)
      p = raw_.malloc(size);
    }
    if (!p) {
      size_t pending = 0;
      for (const auto& q : pending_) pending += q.block.size;
      SPORE_THROW(
          ErrorKind::RuntimeError, "[", device_name_, "] out of memory: tried to allocate ",
          mib(size), " (", nbytes, " bytes); ", mib(stats_.bytes_in_use), " in use by tensors, ",
          mib(stats_.bytes_cached + pending), " cached (", mib(pending),
          " waiting for other streams). Free tensors you no longer need, lower the batch size, or "
          "use mixed precision (amp O2/O3)");
    }
    live_[p] = Block{size, stream, {}};
  }
  if (open_pool_) {
    live_[p].pool = open_pool_;
    pools_.at(open_pool_).live_bytes += live_[p].size;
  }
  stats_.bytes_in_use += live_[p].size;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  if (poison_) {
    const auto fill = poison_;
    lock.unlock();
    fill(p, size, stream);
  }
  return p;
}

void CachingAllocator::deallocate(void* ptr, size_t) {
  if (!ptr) return;
  std::lock_guard lock(mutex_);
  auto it = live_.find(ptr);
  SPORE_ASSERT(it != live_.end(), "[", device_name_,
               "] freeing a block this allocator did not hand out");
  Block b = std::move(it->second);
  live_.erase(it);
  stats_.bytes_in_use -= b.size;
  if (auto pool = pools_.find(b.pool); b.pool && pool != pools_.end()) {
    pool->second.live_bytes -= b.size;
    pool->second.free.push_back({ptr, b});  // the recording still uses it
    return;
  }
  b.pool = 0;
  if (b.other_streams.empty()) {  // only its own stream used it: reusable there at once
    cached_[{b.stream, b.size}].push_back(ptr);
    stats_.bytes_cached += b.size;
    return;
  }
  Pending p{ptr, b, {}};
  for (void* s : b.other_streams) p.events.push_back(events_.record(s));
  p.block.other_streams.clear();
  pending_.push_back(std::move(p));
}

void CachingAllocator::record_stream(void* ptr, void* stream) {
  std::lock_guard lock(mutex_);
  auto it = live_.find(ptr);
  if (it == live_.end() || it->second.stream == stream) return;
  auto& others = it->second.other_streams;
  if (std::find(others.begin(), others.end(), stream) == others.end()) others.push_back(stream);
}

int CachingAllocator::begin_pool() {
  std::lock_guard lock(mutex_);
  SPORE_CHECK(!open_pool_, "[", device_name_, "] a capture pool is already open");
  open_pool_ = next_pool_++;
  pools_[open_pool_];
  return open_pool_;
}

void CachingAllocator::end_pool() {
  std::lock_guard lock(mutex_);
  open_pool_ = 0;
}

void CachingAllocator::release_pool(int pool) {
  std::lock_guard lock(mutex_);
  auto it = pools_.find(pool);
  if (it == pools_.end()) return;
  if (open_pool_ == pool) open_pool_ = 0;
  for (auto& [ptr, b] : it->second.free) {
    cached_[{b.stream, b.size}].push_back(ptr);
    stats_.bytes_cached += b.size;
  }
  for (auto& [ptr, b] : live_)  // freed later, they go to the cache
    if (b.pool == pool) b.pool = 0;
  pools_.erase(it);
}

size_t CachingAllocator::pool_bytes(int pool) const {
  std::lock_guard lock(const_cast<std::mutex&>(mutex_));
  auto it = pools_.find(pool);
  if (it == pools_.end()) return 0;
  size_t n = it->second.live_bytes;
  for (const auto& [ptr, b] : it->second.free) n += b.size;
  return n;
}

AllocatorStats CachingAllocator::stats() const {
  std::lock_guard lock(const_cast<std::mutex&>(mutex_));
  return stats_;
}

void CachingAllocator::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak_bytes_in_use = stats_.bytes_in_use;
}

void CachingAllocator::empty_cache() {
  std::lock_guard lock(mutex_);
  collect_pending();
  release_cached();
}

}  // namespace spore::cuda
