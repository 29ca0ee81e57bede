// Samplers: which rows of a random-access source an epoch visits, in which order
// (mindspore.dataset's samplers). Pass one as a source's `sampler` option:
//   data::ImageFolderDataset(dir, {.sampler = data::DistributedSampler(8, rank)})
// A sampler is immutable; the source asks it for each epoch's indices with a seed derived from
// the global seed and the epoch number, so every shard (process) draws the same permutation.
// To add a sampler: subclass Sampler in src/data/samplers.cpp and add a factory here.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace spore::data {

class Sampler {
 public:
  virtual ~Sampler() = default;
  // The dataset indices (each in [0, n)) of one epoch over a source of n rows.
  virtual std::vector<int64_t> indices(int64_t n, uint64_t seed) const = 0;
  // Exactly indices(n, seed).size(), without drawing.
  virtual int64_t size(int64_t n) const = 0;
  // Throws a spore::Error naming `where` when the sampler cannot run on n rows (an index >= n).
  virtual void check(int64_t n, const std::string& where) const {}
  virtual std::string name() const = 0;  // "RandomSampler", ... for error messages
};
using SamplerPtr = std::shared_ptr<const Sampler>;

// Rows start_index, start_index + 1, ... (num_samples of them; -1: to the end).
SamplerPtr SequentialSampler(int64_t start_index = 0, int64_t num_samples = -1);
// A fresh permutation every epoch; with replacement, num_samples uniform draws (-1: n).
SamplerPtr RandomSampler(bool replacement = false, int64_t num_samples = -1);
// Shard shard_id of num_shards: floor(n / num_shards) rows each (the remainder is dropped, so
// shards are disjoint and equal), rows shard_id, shard_id + num_shards, ... of the epoch's order
// (a permutation shared by all shards when shuffle, else 0..n-1). num_samples caps each shard.
SamplerPtr DistributedSampler(int64_t num_shards, int64_t shard_id, bool shuffle = true,
                              int64_t num_samples = -1);
// The given indices, in a fresh random order every epoch / in the given order.
SamplerPtr SubsetRandomSampler(std::vector<int64_t> indices, int64_t num_samples = -1);
SamplerPtr SubsetSampler(std::vector<int64_t> indices, int64_t num_samples = -1);
// num_samples draws of index i with probability weights[i] / sum(weights).
SamplerPtr WeightedRandomSampler(std::vector<double> weights, int64_t num_samples,
                                 bool replacement = true);

}  // namespace spore::data
