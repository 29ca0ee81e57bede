// parallel_for_dynamic (core/parallel.h): every index is run exactly once, whichever thread takes
// it, also when the helper threads are busy with another caller's job or called from inside one.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "core/parallel.h"

namespace spore {
namespace {

// Runs parallel_for_dynamic over [begin, end) and counts the visits of each index.
std::vector<int> visits(int64_t begin, int64_t end, int64_t piece) {
  std::vector<std::atomic<int>> hits(size_t(end > begin ? end : begin) + 1);
  // A range of at most `piece` runs as one call; otherwise pieces of at most `piece` (at least 1).
  const int64_t most = end - begin <= piece ? end - begin : std::max<int64_t>(piece, 1);
  parallel_for_dynamic(begin, end, piece, [&](int64_t b, int64_t e) {
    EXPECT_LT(b, e);
    EXPECT_LE(e - b, most);
    for (int64_t i = b; i < e; ++i) hits[size_t(i)]++;
  });
  std::vector<int> out;
  for (auto& h : hits) out.push_back(h.load());
  return out;
}

TEST(ParallelForDynamic, EveryIndexOnce) {
  set_num_threads(2);
  for (int64_t piece : {0, 1, 3, 7, 100, 1000}) {
    const std::vector<int> v = visits(5, 205, piece);
    for (int64_t i = 0; i < int64_t(v.size()); ++i)
      EXPECT_EQ(v[size_t(i)], i >= 5 && i < 205 ? 1 : 0) << "piece " << piece << " index " << i;
  }
  EXPECT_EQ(visits(3, 3, 1), std::vector<int>(4, 0));  // an empty range calls nothing
  set_num_threads(0);
}

TEST(ParallelForDynamic, NestedAndConcurrentCallers) {
  set_num_threads(2);
  // Inside a piece the call runs on the calling thread; two threads posting at once both finish.
  std::atomic<int64_t> sum{0};
  auto job = [&] {
    for (int r = 0; r < 50; ++r)
      parallel_for_dynamic(0, 64, 4, [&](int64_t b, int64_t e) {
        parallel_for_dynamic(b * 10, e * 10, 1, [&](int64_t b2, int64_t e2) {
          for (int64_t i = b2; i < e2; ++i) sum += i;
        });
      });
  };
  std::thread other(job);
  job();
  other.join();
  EXPECT_EQ(sum.load(), 2 * 50 * (639 * 640 / 2));
  set_num_threads(0);
}

}  // namespace
}  // namespace spore
