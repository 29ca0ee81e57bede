// Thread-count control shared by Spore's kernels and oneDNN (both run on OpenMP).
#include "core/parallel.h"

namespace spore {
namespace {
int g_threads = 0;  // 0: not set, use omp_get_max_threads()
}
int get_num_threads() { return g_threads > 0 ? g_threads : omp_get_max_threads(); }
void set_num_threads(int n) {
  g_threads = n > 0 ? n : 0;
  if (n > 0) omp_set_num_threads(n);
}
}  // namespace spore
