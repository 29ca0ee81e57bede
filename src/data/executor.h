// OrderedPool: the parallel engine of the data pipeline. Items are pulled one at a time (under a
// lock, numbered in pull order: seq 0, 1, ...), processed concurrently on worker threads, and
// handed out strictly in seq order, so the output never depends on thread timing. At most
// `capacity` items are in flight (pulled but not yet handed out): back-pressure on the producer.
// Destroying the pool stops the workers and joins them: a worker finishes at most the item it
// is processing. With workers == 0 everything runs inline on the caller's thread.
// Used by Map (pull = the child's next row, work = the transforms) and by file sources
// (pull = the next sampled index, work = read + decode).
#pragma once
#include <condition_variable>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "data/node.h"

namespace spore::data::detail {

struct Task {
  std::optional<Row> row;  // filled by pull (Map) or work (sources)
  SampleId id;
  int64_t index = -1;      // a source's dataset index
  bool skipped = false;    // work dropped the sample (Skip policy)
  std::exception_ptr err;  // handed out (rethrown) at this seq
};

class OrderedPool {
 public:
  // pull(seq, task): fills task for item seq, false at the end; it may throw (the error is
  // handed out at that seq and ends the pass). work(seq, task): processes it; it may throw.
  using Pull = std::function<bool(int64_t seq, Task& task)>;
  using Work = std::function<void(int64_t seq, Task& task)>;
  // stage: the profiler's name for this pool's work ("map", "source"; a string literal).
  OrderedPool(int workers, int64_t capacity, Pull pull, Work work, const char* stage = "data");
  ~OrderedPool();
  OrderedPool(const OrderedPool&) = delete;
  OrderedPool& operator=(const OrderedPool&) = delete;

  // The next processed, non-skipped task in order; nullopt at the end. Rethrows task errors.
  std::optional<Task> next();

 private:
  void run_worker();
  void run_work(int64_t seq, Task& task);  // work_ in a profiler span
  Pull pull_;
  Work work_;
  const char* stage_;
  int workers_;
  int64_t capacity_;
  std::mutex pull_mu_;  // one puller at a time; taken before mu_, never after
  std::mutex mu_;       // guards everything below
  std::condition_variable cv_work_, cv_out_;
  std::map<int64_t, Task> done_;  // finished tasks by seq
  int64_t next_seq_ = 0, out_seq_ = 0, end_seq_ = -1;
  bool src_done_ = false, stop_ = false, failed_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace spore::data::detail
