// Thread-count control shared by Spore's kernels and oneDNN (both run on OpenMP).
#include "core/parallel.h"

#include <cstdlib>
#include <cstring>

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
