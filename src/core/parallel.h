// parallel_for over [begin, end) on the OpenMP pool that oneDNN also uses, so the two never
// oversubscribe the cores. Ranges below `grain` elements run on the calling thread.
#pragma once
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <type_traits>

namespace spore {

int get_num_threads();
void set_num_threads(int n);

// The floating-point mode (flush-to-zero, spore/context.h set_flush_denormal) is per thread: each
// thread that runs a kernel applies the current one when it is out of date (one thread-local
// compare when it is not).
namespace detail {
extern std::atomic<int> g_fp_mode_version;
extern thread_local int t_fp_mode_version;
void apply_fp_mode();  // on the calling thread
}  // namespace detail
inline void use_fp_mode() {
  if (detail::t_fp_mode_version != detail::g_fp_mode_version.load(std::memory_order_relaxed))
    detail::apply_fp_mode();
}
// Brings every thread of the OpenMP pool (which oneDNN shares) up to date; cheap when they are.
void use_fp_mode_on_pool();

template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, F&& fn) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  use_fp_mode();
  const int max_threads = get_num_threads();
  if (n <= grain || max_threads == 1 || omp_in_parallel()) {
    fn(begin, end);
    return;
  }
  const int64_t nt = std::min<int64_t>(max_threads, (n + grain - 1) / grain);
#pragma omp parallel num_threads(int(nt))
  {
    use_fp_mode();
    const int64_t t = omp_get_thread_num();
    const int64_t chunk = (n + nt - 1) / nt;
    const int64_t b = begin + t * chunk, e = std::min(end, b + chunk);
    if (b < e) fn(b, e);
  }
}

namespace detail {
using PieceFn = void (*)(void* ctx, int64_t begin, int64_t end);
// parallel_for_dynamic's engine (parallel.cpp): the calling thread and up to `helpers` threads of a
// small pool of Spore's own take the pieces.
void run_pieces(int64_t begin, int64_t end, int64_t piece, int helpers, PieceFn call, void* ctx);
bool in_piece_pool();  // whether the calling thread is one of that pool's
}  // namespace detail

// parallel_for for kernels whose work is already cut into independent tasks (the constant-weight
// convolutions): the threads take pieces of `piece` elements from a shared counter as they come,
// and the call returns as soon as every piece is done. Its helper threads are Spore's own, not
// OpenMP's, because an OpenMP region also waits for a thread that has not started yet: on a busy
// machine (passive threads must first be woken and scheduled) that wait, once per op, was most of
// what two threads lost at batch 1. Here a helper that wakes late finds the work taken and joins
// nothing. fn may be called several times per thread, with ascending ranges; ranges of at most
// `piece` elements run on the calling thread. Same thread count as parallel_for.
template <typename F>
void parallel_for_dynamic(int64_t begin, int64_t end, int64_t piece, F&& fn) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  use_fp_mode();
  piece = std::max<int64_t>(piece, 1);
  const int max_threads = get_num_threads();
  if (n <= piece || max_threads == 1 || omp_in_parallel() || detail::in_piece_pool()) {
    fn(begin, end);
    return;
  }
  const int64_t nt = std::min<int64_t>(max_threads, (n + piece - 1) / piece);
  using Fn = std::remove_reference_t<F>;
  detail::run_pieces(
      begin, end, piece, int(nt - 1),
      [](void* ctx, int64_t b, int64_t e) { (*static_cast<Fn*>(ctx))(b, e); },
      const_cast<void*>(static_cast<const void*>(&fn)));
}

}  // namespace spore
