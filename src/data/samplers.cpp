// The samplers of spore/data/samplers.h. Randomness comes only from the seed the source passes
// per epoch (core/random.h counter-based draws), so an epoch's indices are reproducible and the
// same in every process that shares the global seed.
#include "spore/data/samplers.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/random.h"
#include "spore/error.h"

namespace spore::data {
namespace {

// Fisher-Yates on v with draws bits(seed, i).
template <typename T>
void permute(std::vector<T>& v, uint64_t seed) {
  for (int64_t i = int64_t(v.size()) - 1; i > 0; --i)
    std::swap(v[size_t(i)], v[random::bits(seed, uint64_t(i)) % uint64_t(i + 1)]);
}

int64_t cap(int64_t n, int64_t num_samples) {
  return num_samples < 0 ? n : std::min(n, num_samples);
}

void check_num_samples(int64_t num_samples, const char* who) {
  SPORE_CHECK(num_samples >= -1, "[", who, "] num_samples must be >= 0 (or -1 for all), got ",
              num_samples);
}

class Sequential : public Sampler {
 public:
  Sequential(int64_t start, int64_t num) : start_(start), num_(num) {}
  std::vector<int64_t> indices(int64_t n, uint64_t) const override {
    std::vector<int64_t> v(static_cast<size_t>(size(n)));
    std::iota(v.begin(), v.end(), start_);
    return v;
  }
  int64_t size(int64_t n) const override { return cap(std::max<int64_t>(0, n - start_), num_); }
  void check(int64_t n, const std::string& where) const override {
    SPORE_CHECK_INDEX(start_ < std::max<int64_t>(n, 1), "[", where,
                      "] SequentialSampler start_index ", start_, " is past the last row (", n,
                      " rows)");
  }
  std::string name() const override { return "SequentialSampler"; }

 private:
  int64_t start_, num_;
};

class Random : public Sampler {
 public:
  Random(bool replacement, int64_t num) : replacement_(replacement), num_(num) {}
  std::vector<int64_t> indices(int64_t n, uint64_t seed) const override {
    const int64_t m = size(n);
    std::vector<int64_t> v;
    if (replacement_) {
      v.resize(size_t(m));
      for (int64_t i = 0; i < m; ++i)
        v[size_t(i)] = int64_t(random::bits(seed, uint64_t(i)) % uint64_t(n));
      return v;
    }
    v.resize(size_t(n));
    std::iota(v.begin(), v.end(), 0);
    permute(v, seed);
    v.resize(size_t(m));
    return v;
  }
  int64_t size(int64_t n) const override {
    if (n == 0) return 0;
    return replacement_ ? (num_ < 0 ? n : num_) : cap(n, num_);
  }
  std::string name() const override { return "RandomSampler"; }

 private:
  bool replacement_;
  int64_t num_;
};

class Distributed : public Sampler {
 public:
  Distributed(int64_t shards, int64_t id, bool shuffle, int64_t num)
      : shards_(shards), id_(id), shuffle_(shuffle), num_(num) {}
  std::vector<int64_t> indices(int64_t n, uint64_t seed) const override {
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    if (shuffle_) permute(order, seed);  // the same permutation in every shard
    const int64_t m = size(n);
    std::vector<int64_t> v(static_cast<size_t>(m));
    for (int64_t k = 0; k < m; ++k) v[size_t(k)] = order[size_t(id_ + k * shards_)];
    return v;
  }
  int64_t size(int64_t n) const override { return cap(n / shards_, num_); }
  std::string name() const override { return "DistributedSampler"; }

 private:
  int64_t shards_, id_;
  bool shuffle_;
  int64_t num_;
};

class Subset : public Sampler {
 public:
  Subset(std::vector<int64_t> idx, int64_t num, bool random)
      : idx_(std::move(idx)), num_(num), random_(random) {}
  std::vector<int64_t> indices(int64_t n, uint64_t seed) const override {
    std::vector<int64_t> v = idx_;
    if (random_) permute(v, seed);
    v.resize(size_t(size(n)));
    return v;
  }
  int64_t size(int64_t) const override { return cap(int64_t(idx_.size()), num_); }
  void check(int64_t n, const std::string& where) const override {
    for (size_t i = 0; i < idx_.size(); ++i)
      SPORE_CHECK_INDEX(idx_[i] >= 0 && idx_[i] < n, "[", where, "] ", name(), " index ", i, " is ",
                        idx_[i], ", outside [0, ", n, ")");
  }
  std::string name() const override { return random_ ? "SubsetRandomSampler" : "SubsetSampler"; }

 private:
  std::vector<int64_t> idx_;
  int64_t num_;
  bool random_;
};

class Weighted : public Sampler {
 public:
  Weighted(std::vector<double> w, int64_t num, bool replacement)
      : num_(num), replacement_(replacement) {
    cdf_.resize(w.size());
    double s = 0;
    for (size_t i = 0; i < w.size(); ++i) cdf_[i] = (s += w[i]);
    weights_ = std::move(w);
  }
  std::vector<int64_t> indices(int64_t n, uint64_t seed) const override {
    std::vector<int64_t> v;
    v.reserve(size_t(num_));
    if (replacement_) {
      const double total = cdf_.back();
      for (int64_t i = 0; i < num_; ++i) {
        const double u = random::uniform(seed, uint64_t(i)) * total;
        auto it = std::upper_bound(cdf_.begin(), cdf_.end(), u);
        v.push_back(std::min<int64_t>(int64_t(it - cdf_.begin()), int64_t(cdf_.size()) - 1));
      }
      return v;
    }
    // Without replacement: the num_ largest keys u^(1/w) (Efraimidis-Spirakis).
    std::vector<std::pair<double, int64_t>> keys;
    for (size_t i = 0; i < weights_.size(); ++i)
      if (weights_[i] > 0)
        keys.push_back(
            {std::log(std::max(random::uniform(seed, i), 1e-300)) / weights_[i], int64_t(i)});
    std::sort(keys.begin(), keys.end(), [](auto& a, auto& b) { return a.first > b.first; });
    for (int64_t i = 0; i < num_ && i < int64_t(keys.size()); ++i)
      v.push_back(keys[size_t(i)].second);
    return v;
  }
  int64_t size(int64_t) const override { return num_; }
  void check(int64_t n, const std::string& where) const override {
    SPORE_CHECK_INDEX(int64_t(weights_.size()) <= n, "[", where, "] WeightedRandomSampler has ",
                      weights_.size(), " weights but the dataset has only ", n, " rows");
  }
  std::string name() const override { return "WeightedRandomSampler"; }

 private:
  std::vector<double> weights_, cdf_;
  int64_t num_;
  bool replacement_;
};

}  // namespace

SamplerPtr SequentialSampler(int64_t start_index, int64_t num_samples) {
  SPORE_CHECK(start_index >= 0, "[SequentialSampler] start_index must be >= 0, got ", start_index);
  check_num_samples(num_samples, "SequentialSampler");
  return std::make_shared<Sequential>(start_index, num_samples);
}

SamplerPtr RandomSampler(bool replacement, int64_t num_samples) {
  check_num_samples(num_samples, "RandomSampler");
  return std::make_shared<Random>(replacement, num_samples);
}

SamplerPtr DistributedSampler(int64_t num_shards, int64_t shard_id, bool shuffle,
                              int64_t num_samples) {
  SPORE_CHECK(num_shards >= 1, "[DistributedSampler] num_shards must be >= 1, got ", num_shards);
  SPORE_CHECK_INDEX(shard_id >= 0 && shard_id < num_shards,
                    "[DistributedSampler] shard_id must be in [0, ", num_shards, "), got ",
                    shard_id);
  check_num_samples(num_samples, "DistributedSampler");
  return std::make_shared<Distributed>(num_shards, shard_id, shuffle, num_samples);
}

SamplerPtr SubsetRandomSampler(std::vector<int64_t> indices, int64_t num_samples) {
  check_num_samples(num_samples, "SubsetRandomSampler");
  return std::make_shared<Subset>(std::move(indices), num_samples, true);
}

SamplerPtr SubsetSampler(std::vector<int64_t> indices, int64_t num_samples) {
  check_num_samples(num_samples, "SubsetSampler");
  return std::make_shared<Subset>(std::move(indices), num_samples, false);
}

SamplerPtr WeightedRandomSampler(std::vector<double> weights, int64_t num_samples,
                                 bool replacement) {
  SPORE_CHECK(!weights.empty(), "[WeightedRandomSampler] weights is empty");
  double total = 0;
  int64_t positive = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    SPORE_CHECK(std::isfinite(weights[i]) && weights[i] >= 0, "[WeightedRandomSampler] weight ", i,
                " is ", weights[i], "; weights must be finite and >= 0");
    total += weights[i];
    positive += weights[i] > 0;
  }
  SPORE_CHECK(total > 0, "[WeightedRandomSampler] the weights sum to 0");
  SPORE_CHECK(num_samples >= 1, "[WeightedRandomSampler] num_samples must be >= 1, got ",
              num_samples);
  SPORE_CHECK(replacement || num_samples <= positive, "[WeightedRandomSampler] ", num_samples,
              " samples without replacement, but only ", positive, " weights are positive");
  return std::make_shared<Weighted>(std::move(weights), num_samples, replacement);
}

}  // namespace spore::data
