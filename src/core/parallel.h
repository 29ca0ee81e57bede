// parallel_for over [begin, end) on the OpenMP pool that oneDNN also uses, so the two never
// oversubscribe the cores. Ranges below `grain` elements run on the calling thread.
#pragma once
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

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

}  // namespace spore
