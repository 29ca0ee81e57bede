// The global generator: counter-based (a hash of seed and a running counter), so a kernel can fill
// element i from counter base + i on any thread and get the same numbers whatever the thread count.
#pragma once
#include <cmath>
#include <cstdint>

// mix / bits / uniform also compile for the GPU (the CUDA backend's dropout draws the same bits).
#if defined(__CUDACC__)
#define SPORE_HOST_DEVICE __host__ __device__
#else
#define SPORE_HOST_DEVICE
#endif

namespace spore::random {

uint64_t seed();
// Reserves n counters and returns the first; the next call continues after them.
uint64_t reserve(uint64_t n);
inline uint64_t next_u64();

SPORE_HOST_DEVICE inline uint64_t mix(uint64_t x) {  // splitmix64 finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
SPORE_HOST_DEVICE inline uint64_t bits(uint64_t seed, uint64_t counter) {
  return mix(seed ^ mix(counter));
}
// U[0, 1) with 53 random bits.
SPORE_HOST_DEVICE inline double uniform(uint64_t seed, uint64_t counter) {
  return double(bits(seed, counter) >> 11) * (1.0 / 9007199254740992.0);
}
// N(0, 1) by Box-Muller on two uniforms drawn from one counter.
inline double normal(uint64_t seed, uint64_t counter) {
  uint64_t b = bits(seed, counter);
  double u1 = (double((b >> 32) & 0xffffffffu) + 1.0) * (1.0 / 4294967297.0);  // (0, 1)
  double u2 = double(b & 0xffffffffu) * (1.0 / 4294967296.0);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}
inline uint64_t next_u64() { return bits(seed(), reserve(1)); }

}  // namespace spore::random
