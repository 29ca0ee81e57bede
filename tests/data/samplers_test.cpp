// Samplers and the common source options: coverage, distribution, reshuffling per epoch, shard
// disjointness (DistributedSampler and num_shards), subsets, weights, and option errors.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "data_util.h"
#include "spore/context.h"
#include "spore/data/dataset.h"

using namespace spore;
using namespace spore::testing_data;

namespace {
data::Dataset with(data::SamplerPtr s, int64_t n = 20) {
  return data::GeneratorDataset(std::function<data::Row(int64_t)>(
                                    [](int64_t i) { return data::Row{scalar_i32(int32_t(i))}; }),
                                n, {"i"}, {.sampler = std::move(s)});
}
std::vector<int64_t> epoch(const data::Dataset& ds) { return ints(ds, 0); }
std::vector<int64_t> iota64(int64_t a, int64_t b) {
  std::vector<int64_t> v;
  for (int64_t i = a; i < b; ++i) v.push_back(i);
  return v;
}
std::vector<int64_t> sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}
}  // namespace

TEST(Samplers, SequentialAndRandom) {
  set_seed(5);
  EXPECT_EQ(epoch(with(data::SequentialSampler())), iota64(0, 20));
  auto seq = with(data::SequentialSampler(15, 10));
  EXPECT_EQ(seq.get_dataset_size(), 5);
  EXPECT_EQ(epoch(seq), iota64(15, 20));
  auto rnd = with(data::RandomSampler());
  const auto e0 = epoch(rnd), e1 = epoch(rnd);
  EXPECT_EQ(sorted(e0), iota64(0, 20));
  EXPECT_NE(e0, e1);
  EXPECT_NE(e0, iota64(0, 20));
  auto capped = with(data::RandomSampler(false, 7));
  EXPECT_EQ(capped.get_dataset_size(), 7);
  const auto ce = epoch(capped);
  EXPECT_EQ(std::set<int64_t>(ce.begin(), ce.end()).size(), 7u);
  // With replacement: uniform draws; 20000 draws over 20 rows, each about 1000 times.
  auto rep = with(data::RandomSampler(true, 20000));
  EXPECT_EQ(rep.get_dataset_size(), 20000);
  std::map<int64_t, int> count;
  for (int64_t v : epoch(rep)) ++count[v];
  EXPECT_EQ(count.size(), 20u);
  for (auto& [k, c] : count) EXPECT_NEAR(c, 1000, 150) << k;
}

TEST(Samplers, DistributedShardsAreDisjointAndCover) {
  set_seed(8);
  for (bool shuffle : {false, true}) {
    std::vector<int64_t> all;
    for (int64_t s = 0; s < 4; ++s) {
      auto ds = with(data::DistributedSampler(4, s, shuffle));
      EXPECT_EQ(ds.get_dataset_size(), 5);
      auto e = epoch(ds);
      all.insert(all.end(), e.begin(), e.end());
    }
    EXPECT_EQ(sorted(all), iota64(0, 20)) << "shuffle " << shuffle;
  }
  // 22 rows in 4 shards: 5 each, the 2 left over dropped, still disjoint.
  std::set<int64_t> seen;
  for (int64_t s = 0; s < 4; ++s)
    for (int64_t v : epoch(with(data::DistributedSampler(4, s), 22)))
      EXPECT_TRUE(seen.insert(v).second);
  EXPECT_EQ(seen.size(), 20u);
  // The same via the num_shards option, on a file-free source, in every epoch.
  auto src = [](int64_t shard) {
    return data::GeneratorDataset(std::function<data::Row(int64_t)>(
                                      [](int64_t i) { return data::Row{scalar_i32(int32_t(i))}; }),
                                  30, {"i"}, {.shuffle = true, .num_shards = 3, .shard_id = shard});
  };
  auto a = src(0), b = src(1), c = src(2);
  for (int e = 0; e < 2; ++e) {
    std::vector<int64_t> u;
    for (auto* d : {&a, &b, &c}) {
      auto v = epoch(*d);
      u.insert(u.end(), v.begin(), v.end());
    }
    EXPECT_EQ(sorted(u), iota64(0, 30)) << "epoch " << e;
  }
  EXPECT_NE(error_of([] { data::DistributedSampler(2, 2); }).find("shard_id"), std::string::npos);
}

TEST(Samplers, SubsetAndWeighted) {
  set_seed(2);
  EXPECT_EQ(epoch(with(data::SubsetSampler({4, 2, 9}))), (std::vector<int64_t>{4, 2, 9}));
  auto sr = with(data::SubsetRandomSampler({1, 3, 5, 7, 11}));
  EXPECT_EQ(sorted(epoch(sr)), (std::vector<int64_t>{1, 3, 5, 7, 11}));
  EXPECT_NE(error_of([] { with(data::SubsetSampler({3, 25})); }).find("25"), std::string::npos);
  // Weights 0, 1, 3: index 0 never, index 2 about three times as often as index 1.
  auto w = with(data::WeightedRandomSampler({0, 1, 3}, 8000), 3);
  std::map<int64_t, int> count;
  for (int64_t v : epoch(w)) ++count[v];
  EXPECT_EQ(count[0], 0);
  EXPECT_NEAR(double(count[2]) / count[1], 3.0, 0.3);
  auto no_rep = with(data::WeightedRandomSampler({1, 1, 5, 0}, 3, false), 4);
  EXPECT_EQ(sorted(epoch(no_rep)), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_NE(error_of([] {
              data::WeightedRandomSampler({1, -1}, 2);
            }).find("weight 1"),
            std::string::npos);
}

TEST(Samplers, OptionErrorsAndNumSamples) {
  auto fn = std::function<data::Row(int64_t)>(
      [](int64_t i) { return data::Row{scalar_i32(int32_t(i))}; });
  EXPECT_NE(error_of([&] {
              data::GeneratorDataset(fn, 10, {"i"},
                                     {.shuffle = true, .sampler = data::RandomSampler()});
            }).find("not both"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              data::GeneratorDataset(fn, 10, {"i"}, {.num_shards = 2, .shard_id = 2});
            }).find("shard_id"),
            std::string::npos);
  auto capped =
      data::GeneratorDataset(fn, 10, {"i"}, {.num_samples = 4, .sampler = data::RandomSampler()});
  EXPECT_EQ(capped.get_dataset_size(), 4);
  EXPECT_EQ(epoch(capped).size(), 4u);
}
