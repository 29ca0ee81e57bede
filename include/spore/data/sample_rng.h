// The random source of data transforms (RandomCrop, RandomHorizontalFlip, MixUp...). The pipeline
// seeds it per sample from (global seed, pipeline stage, epoch, sample index) before it runs a
// sample's transforms, so the output is the same whatever the number of worker threads.
#pragma once
#include <cstdint>

namespace spore::data {

class SampleRng {
 public:
  void seed(uint64_t s) { state_ = s, counter_ = 0; }
  uint64_t next_u64();                           // uniform 64-bit
  double uniform(double lo = 0, double hi = 1);  // [lo, hi)
  int64_t randint(int64_t lo, int64_t hi);       // [lo, hi)
  bool bernoulli(double p);                      // true with probability p
  double normal(double mean = 0, double stddev = 1);

 private:
  uint64_t state_ = 0x5eed, counter_ = 0;
};

// This thread's generator (each worker has its own).
SampleRng& sample_rng();
// Seed for one sample: mixes the values so nearby indices give unrelated streams.
uint64_t sample_seed(uint64_t global_seed, uint64_t stage, uint64_t epoch, uint64_t index);

}  // namespace spore::data
