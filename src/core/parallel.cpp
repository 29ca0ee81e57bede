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
namespace {
int g_threads = 0;  // 0: not set, use omp_get_max_threads()
bool g_flush = false;

// The MXCSR bits are per thread: set them on this one and on every thread of the OpenMP pool
// (which oneDNN shares), which keeps its threads alive between parallel regions.
void apply_flush_mode() {
#ifdef SPORE_HAVE_MXCSR
  constexpr unsigned kFtzDaz = 0x8040;  // FTZ (bit 15) | DAZ (bit 6)
  const bool on = g_flush;
  auto set = [on] { _mm_setcsr(on ? (_mm_getcsr() | kFtzDaz) : (_mm_getcsr() & ~kFtzDaz)); };
  set();
#pragma omp parallel num_threads(get_num_threads())
  set();
#endif
}

const bool g_flush_default = [] {
  const char* e = std::getenv("SPORE_FLUSH_DENORMAL");
  set_flush_denormal(!(e && std::strcmp(e, "0") == 0));
  return true;
}();
}  // namespace

int get_num_threads() { return g_threads > 0 ? g_threads : omp_get_max_threads(); }
void set_num_threads(int n) {
  g_threads = n > 0 ? n : 0;
  if (n > 0) omp_set_num_threads(n);
  if (g_flush) apply_flush_mode();  // threads the pool may have added
}

bool set_flush_denormal(bool on) {
#ifdef SPORE_HAVE_MXCSR
  g_flush = on;
  apply_flush_mode();
  return true;
#else
  return !on;
#endif
}
bool flush_denormal() { return g_flush; }
}  // namespace spore
