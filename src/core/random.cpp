#include "core/random.h"

#include <atomic>

#include "spore/context.h"

namespace spore {
namespace {
std::atomic<uint64_t> g_seed{5489};
std::atomic<uint64_t> g_counter{0};
}  // namespace
void set_seed(uint64_t s) {
  g_seed = s;
  g_counter = 0;
}
uint64_t get_seed() { return g_seed; }
namespace random {
uint64_t seed() { return g_seed; }
uint64_t reserve(uint64_t n) { return g_counter.fetch_add(n); }
}  // namespace random
}  // namespace spore
