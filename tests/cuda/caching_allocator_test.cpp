// The CUDA backend's caching allocator, on a fake raw allocator (host memory with a capacity) and
// fake stream events: size classes, reuse on the same stream, blocks used on another stream held
// until its event completes, out of memory after emptying the cache, and the error's numbers.
// Runs without a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <set>
#include <tuple>

#include "backends/cuda/caching_allocator.h"
#include "spore/error.h"

namespace {

using spore::cuda::CachingAllocator;
using spore::cuda::round_size;

struct FakeRaw : spore::cuda::RawDeviceAllocator {
  size_t capacity, used = 0;
  int mallocs = 0, frees = 0;
  std::map<void*, size_t> blocks;
  explicit FakeRaw(size_t cap) : capacity(cap) {}
  void* malloc(size_t n) override {
    if (used + n > capacity) return nullptr;
    void* p = std::malloc(n);
    blocks[p] = n;
    used += n;
    ++mallocs;
    return p;
  }
  void free(void* p) override {
    used -= blocks.at(p);
    blocks.erase(p);
    std::free(p);
    ++frees;
  }
  ~FakeRaw() override {
    for (auto& [p, n] : blocks) std::free(p);
  }
};

// Events that complete when the test says so.
struct FakeEvents {
  std::set<int*> done;
  std::vector<int*> all;
  spore::cuda::StreamEvents hooks() {
    return {[this](void*) {
              all.push_back(new int(0));
              return static_cast<void*>(all.back());
            },
            [this](void* e) { return done.count(static_cast<int*>(e)) > 0; },
            [this](void* e) {
              done.erase(static_cast<int*>(e));
              std::erase(all, static_cast<int*>(e));
              delete static_cast<int*>(e);
            }};
  }
  void complete_all() {
    for (int* e : all) done.insert(e);
  }
};

void* const kStreamA = reinterpret_cast<void*>(0x10);
void* const kStreamB = reinterpret_cast<void*>(0x20);

TEST(CudaCachingAllocator, SizeClasses) {
  EXPECT_EQ(round_size(0), 512u);
  EXPECT_EQ(round_size(1), 512u);
  EXPECT_EQ(round_size(512), 512u);
  EXPECT_EQ(round_size(513), 1024u);
  EXPECT_EQ(round_size((1 << 20) - 1), size_t(1) << 20);
  EXPECT_EQ(round_size((1 << 20) + 1), size_t(2) << 20);
  EXPECT_EQ(round_size((5 << 20) + 3), size_t(6) << 20);
}

TEST(CudaCachingAllocator, ReusesBlocksOnTheirStream) {
  FakeRaw raw(64 << 20);
  FakeEvents ev;
  void* cur = nullptr;
  CachingAllocator a(raw, ev.hooks(), "GPU:0", [&cur] { return cur; });
  cur = kStreamA;
  void* p = a.allocate(1000);
  a.deallocate(p, 1000);
  EXPECT_EQ(a.stats().bytes_cached, 1024u);
  EXPECT_EQ(a.allocate(900), p) << "same class, same stream: the cached block";
  EXPECT_EQ(raw.mallocs, 1);
  cur = kStreamB;
  void* q = a.allocate(900);
  EXPECT_NE(q, p) << "another stream does not take a block of stream A";
  EXPECT_EQ(raw.mallocs, 2);
  const auto s = a.stats();
  EXPECT_EQ(s.bytes_in_use, 2048u);
  EXPECT_EQ(s.cache_hits, 1u);
  EXPECT_EQ(s.cache_misses, 2u);
  // A small request does not take a large cached block, nor a large one a block over twice its
  // size.
  cur = kStreamA;
  void* big = a.allocate(8 << 20);
  a.deallocate(big, 8 << 20);
  EXPECT_NE(a.allocate(1000), big);
  EXPECT_NE(a.allocate((1 << 20) + 1), big);  // 2 MiB class: the 8 MiB block is over twice that
  EXPECT_EQ(a.allocate(5 << 20), big);        // 6 MiB class: it fits
}

TEST(CudaCachingAllocator, BlocksUsedOnAnotherStreamWaitForItsEvent) {
  FakeRaw raw(64 << 20);
  FakeEvents ev;
  void* cur = nullptr;
  CachingAllocator a(raw, ev.hooks(), "GPU:0", [&cur] { return cur; });
  cur = kStreamA;
  void* p = a.allocate(4096);
  a.record_stream(p, kStreamB);  // e.g. a copy on stream B read it
  a.deallocate(p, 4096);
  ASSERT_EQ(ev.all.size(), 1u) << "an event recorded on stream B at free time";
  EXPECT_NE(a.allocate(4096), p) << "stream B may still be reading it";
  ev.complete_all();
  EXPECT_EQ(a.allocate(4096), p) << "B's work has run: reusable";
  EXPECT_TRUE(ev.all.empty()) << "the event was released";
}

TEST(CudaCachingAllocator, OutOfMemoryEmptiesTheCacheThenNamesTheBytes) {
  FakeRaw raw(8 << 20);
  FakeEvents ev;
  void* cur = nullptr;
  CachingAllocator a(raw, ev.hooks(), "GPU:0", [&cur] { return cur; });
  cur = kStreamA;
  void* p = a.allocate(4 << 20);
  a.deallocate(p, 4 << 20);       // cached: 4 MiB
  void* q = a.allocate(6 << 20);  // does not fit beside it: the cache is emptied, retried
  EXPECT_NE(q, nullptr);
  EXPECT_EQ(raw.frees, 1);
  EXPECT_EQ(a.stats().bytes_cached, 0u);
  try {
    a.allocate(4 << 20);
    ADD_FAILURE() << "no error";
  } catch (const spore::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("[GPU:0] out of memory: tried to allocate 4.0 MiB"), std::string::npos) << m;
    EXPECT_NE(m.find("6.0 MiB in use by tensors, 0.0 MiB cached"), std::string::npos) << m;
    EXPECT_NE(m.find("lower the batch size"), std::string::npos) << m;
  }
  a.deallocate(q, 6 << 20);
  a.empty_cache();
  EXPECT_EQ(raw.used, 0u);
  EXPECT_EQ(a.stats().peak_bytes_in_use, size_t(6) << 20);
}

TEST(CudaCachingAllocator, PoisonFillsEveryBlockHandedOutOnItsStream) {
  FakeRaw raw(64 << 20);
  FakeEvents ev;
  CachingAllocator a(raw, ev.hooks(), "GPU:0");
  std::vector<std::tuple<void*, size_t, void*>> fills;
  a.set_poison([&](void* p, size_t n, void* s) {
    std::memset(p, 0xFF, n);
    fills.emplace_back(p, n, s);
  });
  void* p = a.allocate_on(100, kStreamA);
  ASSERT_EQ(fills.size(), 1u);
  EXPECT_EQ(fills[0], std::make_tuple(p, size_t(512), kStreamA));
  std::memset(p, 0, 100);
  a.deallocate(p, 100);
  void* q = a.allocate_on(200, kStreamA);  // the cached block again: poisoned again
  EXPECT_EQ(q, p);
  ASSERT_EQ(fills.size(), 2u);
  EXPECT_EQ(static_cast<unsigned char*>(q)[0], 0xFF);
  a.deallocate(q, 200);
}

}  // namespace

// Capture pools (CUDA graphs): a recording writes the blocks it allocated at every replay, so they
// must not go back to the cache while it lives.
TEST(CudaCachingAllocator, CapturePoolKeepsTheRecordingsBlocks) {
  FakeRaw raw(64 << 20);
  FakeEvents ev;
  void* cur = kStreamA;
  CachingAllocator a(raw, ev.hooks(), "GPU:0", [&cur] { return cur; });
  void* before = a.allocate(4096);
  a.deallocate(before, 4096);  // cached: a capture may take it (it is the recording's from then on)
  const int pool = a.begin_pool();
  void* t1 = a.allocate(4096);  // a kernel's temporary during capture
  EXPECT_EQ(t1, before);
  a.deallocate(t1, 4096);
  void* t2 = a.allocate(3000);  // a later kernel of the recording reuses the pool's block
  EXPECT_EQ(t2, t1);
  void* kept = a.allocate(1 << 20);  // e.g. a replaced output still referenced after capture
  a.end_pool();
  a.deallocate(t2, 3000);
  EXPECT_EQ(a.pool_bytes(pool), 4096u + round_size(1 << 20));
  EXPECT_EQ(a.stats().bytes_cached, 0u) << "nothing of the pool is in the cache";
  EXPECT_NE(a.allocate(4096), t1) << "outside the capture nobody else gets the recording's block";
  a.deallocate(kept, 1 << 20);  // freed after capture: still the recording's
  EXPECT_NE(a.allocate(1 << 20), kept);
  EXPECT_EQ(a.pool_bytes(pool), 4096u + round_size(1 << 20));
  // The recording is destroyed: its blocks are the cache's again.
  a.release_pool(pool);
  EXPECT_EQ(a.pool_bytes(pool), 0u);
  EXPECT_EQ(a.allocate(1000), t1);
  EXPECT_EQ(a.allocate(1 << 20), kept);
}

TEST(CudaCachingAllocator, CapturePoolLiveBlocksReturnToTheCacheAfterRelease) {
  FakeRaw raw(64 << 20);
  FakeEvents ev;
  void* cur = kStreamA;
  CachingAllocator a(raw, ev.hooks(), "GPU:0", [&cur] { return cur; });
  const int pool = a.begin_pool();
  EXPECT_THROW(a.begin_pool(), spore::Error) << "one capture at a time";
  void* p = a.allocate(2048);
  a.end_pool();
  a.release_pool(pool);  // the recording died while p was still held
  a.deallocate(p, 2048);
  EXPECT_EQ(a.stats().bytes_cached, 2048u);
  EXPECT_EQ(a.allocate(2048), p);
  EXPECT_EQ(a.stats().bytes_in_use, 2048u);
}
