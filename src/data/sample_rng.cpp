#include "spore/data/sample_rng.h"

#include "core/random.h"

namespace spore::data {

uint64_t SampleRng::next_u64() { return random::bits(state_, counter_++); }
double SampleRng::uniform(double lo, double hi) {
  return lo + (hi - lo) * random::uniform(state_, counter_++);
}
int64_t SampleRng::randint(int64_t lo, int64_t hi) {
  return hi <= lo ? lo : lo + int64_t(next_u64() % uint64_t(hi - lo));
}
bool SampleRng::bernoulli(double p) { return uniform() < p; }
double SampleRng::normal(double mean, double stddev) {
  return mean + stddev * random::normal(state_, counter_++);
}

SampleRng& sample_rng() {
  thread_local SampleRng rng;
  return rng;
}

uint64_t sample_seed(uint64_t global_seed, uint64_t stage, uint64_t epoch, uint64_t index) {
  return random::mix(random::mix(random::mix(global_seed ^ 0x9e3779b97f4a7c15ull) ^ stage) ^
                     epoch) ^
         random::mix(index);
}

}  // namespace spore::data
