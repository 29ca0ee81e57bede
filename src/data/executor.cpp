// The OrderedPool (see executor.h), the bad-sample policy (Raise / Skip, the skip counter and its
// log line), sample descriptions for error messages, and the default worker count.
#include "data/executor.h"
#include "spore/profiler.h"

#include <atomic>

#include "core/log.h"

namespace spore::data {

namespace {
std::atomic<int> g_policy{int(ErrorPolicy::Raise)};
std::atomic<int64_t> g_skipped{0};
}  // namespace

void set_error_policy(ErrorPolicy policy) { g_policy = int(policy); }
ErrorPolicy get_error_policy() { return ErrorPolicy(g_policy.load()); }
int64_t get_skipped_count() { return g_skipped; }
void reset_skipped_count() { g_skipped = 0; }

int default_num_workers() {
  const unsigned hw = std::thread::hardware_concurrency();
  return int(std::min<unsigned>(8, hw == 0 ? 1 : hw));
}

std::string describe(const SampleId& id) {
  if (!id.source) return "";
  std::string s = "[" + id.source->name() + "] sample " + std::to_string(id.index);
  const std::string what = id.source->describe_sample(id.index);
  if (!what.empty()) s += " (" + what + ")";
  return s;
}

void throw_with_sample(const SampleId& id, std::exception_ptr err) {
  const std::string where = describe(id);
  try {
    std::rethrow_exception(err);
  } catch (const Error& e) {
    if (where.empty()) throw;
    SPORE_THROW(e.kind(), where, ": ", e.what());
  } catch (const std::exception& e) {
    SPORE_THROW(ErrorKind::RuntimeError, where.empty() ? "[Dataset]" : where, ": ", e.what());
  }
}

void handle_sample_error(const SampleId& id, std::exception_ptr err) {
  if (get_error_policy() == ErrorPolicy::Skip) {
    try {
      std::rethrow_exception(err);
    } catch (const Error& e) {
      ++g_skipped;
      const std::string where = describe(id);
      log::warn("data: skipped {}: {}", where.empty() ? "a sample" : where, e.what());
      return;
    } catch (...) {
    }
  }
  throw_with_sample(id, err);
}

std::optional<std::map<std::string, Tensor>> DictIterator::next() {
  auto row = it_->next();
  if (!row) return std::nullopt;
  std::map<std::string, Tensor> out;
  for (size_t i = 0; i < row->size() && i < names_.size(); ++i) out[names_[i]] = (*row)[i];
  return out;
}

}  // namespace spore::data

namespace spore::data::detail {

OrderedPool::OrderedPool(int workers, int64_t capacity, Pull pull, Work work, const char* stage)
    : pull_(std::move(pull)),
      work_(std::move(work)),
      stage_(stage),
      workers_(workers),
      capacity_(std::max<int64_t>(capacity, workers)) {
  for (int i = 0; i < workers_; ++i) threads_.emplace_back([this] { run_worker(); });
}

OrderedPool::~OrderedPool() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_work_.notify_all();
  for (auto& t : threads_) t.join();
}

void OrderedPool::run_work(int64_t seq, Task& task) {
  const profiling::Span span("data", stage_);
  work_(seq, task);
}

void OrderedPool::run_worker() {
  while (true) {
    int64_t seq;
    Task task;
    {
      std::lock_guard<std::mutex> pull(pull_mu_);
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_work_.wait(lk, [&] { return stop_ || src_done_ || next_seq_ - out_seq_ < capacity_; });
        if (stop_ || src_done_) return;
        seq = next_seq_++;
      }
      bool more = false;
      std::exception_ptr err;
      try {
        more = pull_(seq, task);
      } catch (...) {
        err = std::current_exception();
      }
      if (!more) {  // the end of the input (or its error, handed out in order, then the end)
        {
          std::lock_guard<std::mutex> lk(mu_);
          src_done_ = true;
          end_seq_ = seq + (err ? 1 : 0);
          if (err) {
            task.err = err;
            done_[seq] = std::move(task);
          }
        }
        cv_out_.notify_all();
        cv_work_.notify_all();
        return;
      }
    }
    try {
      run_work(seq, task);
    } catch (...) {
      task.err = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lk(mu_);
      done_[seq] = std::move(task);
    }
    cv_out_.notify_all();
  }
}

std::optional<Task> OrderedPool::next() {
  while (true) {
    if (failed_) return std::nullopt;
    Task task;
    if (workers_ == 0) {  // inline
      if (src_done_) return std::nullopt;
      const int64_t seq = next_seq_++;
      bool more = false;
      try {
        more = pull_(seq, task);
      } catch (...) {
        src_done_ = failed_ = true;
        throw;
      }
      if (!more) {
        src_done_ = true;
        return std::nullopt;
      }
      try {
        run_work(seq, task);
      } catch (...) {
        task.err = std::current_exception();
      }
    } else {
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_out_.wait(lk,
                     [&] { return done_.count(out_seq_) || (src_done_ && out_seq_ >= end_seq_); });
        auto it = done_.find(out_seq_);
        if (it == done_.end()) return std::nullopt;
        task = std::move(it->second);
        done_.erase(it);
        ++out_seq_;
      }
      cv_work_.notify_all();
    }
    if (task.err) {
      failed_ = true;  // an error ends the pass
      std::rethrow_exception(task.err);
    }
    if (task.skipped) continue;
    return task;
  }
}

}  // namespace spore::data::detail
