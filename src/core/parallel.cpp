// Thread-count control shared by Spore's kernels and oneDNN (both run on OpenMP).
#include "core/parallel.h"

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SPORE_HAVE_MXCSR 1
#endif

#include "spore/context.h"

namespace spore {
namespace detail {
std::atomic<int> g_fp_mode_version{1};
thread_local int t_fp_mode_version = 0;
}  // namespace detail

namespace {
int g_threads = 0;  // 0: not set, use omp_get_max_threads()
// Flush-to-zero: on unless SPORE_FLUSH_DENORMAL=0 (read once, when the library loads).
std::atomic<bool> g_flush{[] {
  const char* e = std::getenv("SPORE_FLUSH_DENORMAL");
  return !(e && std::strcmp(e, "0") == 0);
}()};
std::atomic<int> g_pool_version{0};  // the version the whole pool was last brought to
}  // namespace

namespace detail {
void apply_fp_mode() {
  const int v = g_fp_mode_version.load();
#ifdef SPORE_HAVE_MXCSR
  constexpr unsigned kFtzDaz = 0x8040;  // FTZ (bit 15) | DAZ (bit 6)
  _mm_setcsr(g_flush ? (_mm_getcsr() | kFtzDaz) : (_mm_getcsr() & ~kFtzDaz));
#endif
  t_fp_mode_version = v;
}
}  // namespace detail

void use_fp_mode_on_pool() {
  use_fp_mode();
  const int v = detail::g_fp_mode_version.load(std::memory_order_relaxed);
  if (g_pool_version.load(std::memory_order_relaxed) == v || omp_in_parallel()) return;
#pragma omp parallel num_threads(get_num_threads())
  use_fp_mode();
  g_pool_version = v;
}

namespace {
// The helper threads of parallel_for_dynamic. A job is open from the moment it is posted until the
// calling thread has run out of pieces to take; a helper joins only an open job (under the mutex),
// and the caller then waits only for the helpers that joined. A helper woken after that sees a
// closed job and goes back to sleep, so no one waits for a thread the OS has not scheduled (and a
// forked child, which has no helpers, runs every piece itself). The pool is never destroyed: its
// threads sleep on the condition variable until the process ends.
class PiecePool {
 public:
  void run(int64_t begin, int64_t end, int64_t piece, int helpers, detail::PieceFn call,
           void* ctx) {
    // One job at a time: a second caller (another thread running a graph) runs its own pieces.
    std::unique_lock<std::mutex> mine(run_mu_, std::try_to_lock);
    if (!mine.owns_lock()) return call(ctx, begin, end);
    Job job{{begin}, end, piece, call, ctx};
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (int(threads_) < helpers) {
        std::thread([this] { work(); }).detach();
        ++threads_;
      }
      job_ = &job;
      want_ = helpers;
      joined_ = 0;
      ++posted_;
    }
    wake_.notify_all();
    job.take_pieces();
    std::unique_lock<std::mutex> lock(mu_);
    job_ = nullptr;  // closed: late helpers join nothing
    done_.wait(lock, [&] { return busy_ == 0; });
  }

 private:
  struct Job {
    std::atomic<int64_t> next;
    int64_t end, piece;
    detail::PieceFn call;
    void* ctx;
    void take_pieces() {
      for (int64_t b = next.fetch_add(piece, std::memory_order_relaxed); b < end;
           b = next.fetch_add(piece, std::memory_order_relaxed))
        call(ctx, b, std::min(end, b + piece));
    }
  };
  void work() {
    t_in_pool = true;
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      wake_.wait(lock, [&] { return posted_ != seen; });
      seen = posted_;
      if (!job_ || joined_ >= want_) continue;
      Job* job = job_;
      ++joined_;
      ++busy_;
      lock.unlock();
      use_fp_mode();
      job->take_pieces();
      lock.lock();
      if (--busy_ == 0) done_.notify_all();
    }
  }

 public:
  static thread_local bool t_in_pool;

 private:
  std::mutex run_mu_, mu_;
  std::condition_variable wake_, done_;
  Job* job_ = nullptr;
  uint64_t posted_ = 0;
  int want_ = 0, joined_ = 0, busy_ = 0;
  size_t threads_ = 0;
};
thread_local bool PiecePool::t_in_pool = false;
}  // namespace

namespace detail {
void run_pieces(int64_t begin, int64_t end, int64_t piece, int helpers, PieceFn call, void* ctx) {
  static PiecePool* pool = new PiecePool;  // never destroyed (see PiecePool)
  pool->run(begin, end, piece, helpers, call, ctx);
}
bool in_piece_pool() { return PiecePool::t_in_pool; }
}  // namespace detail

int get_num_threads() { return g_threads > 0 ? g_threads : omp_get_max_threads(); }
void set_num_threads(int n) {
  g_threads = n > 0 ? n : 0;
  if (n > 0) omp_set_num_threads(n);
  g_pool_version = 0;  // threads the pool may add get the mode at their next region
}

bool set_flush_denormal(bool on) {
#ifdef SPORE_HAVE_MXCSR
  g_flush = on;
  ++detail::g_fp_mode_version;  // every thread re-applies before its next kernel
  use_fp_mode();
  return true;
#else
  return !on;
#endif
}
bool flush_denormal() { return g_flush; }
}  // namespace spore
