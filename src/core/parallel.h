// parallel_for over [begin, end) on the OpenMP pool that oneDNN also uses, so the two never
// oversubscribe the cores. Ranges below `grain` elements run on the calling thread.
#pragma once
#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace spore {

int get_num_threads();
void set_num_threads(int n);

template <typename F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, F&& fn) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  const int max_threads = get_num_threads();
  if (n <= grain || max_threads == 1 || omp_in_parallel()) {
    fn(begin, end);
    return;
  }
  const int64_t nt = std::min<int64_t>(max_threads, (n + grain - 1) / grain);
#pragma omp parallel num_threads(int(nt))
  {
    const int64_t t = omp_get_thread_num();
    const int64_t chunk = (n + nt - 1) / nt;
    const int64_t b = begin + t * chunk, e = std::min(end, b + chunk);
    if (b < e) fn(b, e);
  }
}

}  // namespace spore
