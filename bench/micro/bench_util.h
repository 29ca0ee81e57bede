// Shared by the micro benchmarks that time their own A/B loops (steps or calls run in turn, so a
// load spike on this shared VM hits both sides alike).
#pragma once
#include <algorithm>
#include <memory>
#include <vector>

#include "models/lenet.h"
#include "models/resnet.h"
#include "spore/spore.h"

namespace spore::bench {

// The (upper) median of per-run times; 0 for none.
inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::nth_element(v.begin(), v.begin() + std::ptrdiff_t(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// The two training benchmarks' models and one synthetic batch: LeNet-5 (batch 64, 1x28x28) or
// ResNet-18 with the CIFAR stem (batch 32, 3x32x32). net() builds a fresh copy from seed 0 (so
// A and B start equal); x, y come from seed 1.
struct ClassificationJob {
  bool resnet;
  int64_t batch;
  Tensor x, y;
  explicit ClassificationJob(bool resnet_) : resnet(resnet_), batch(resnet_ ? 32 : 64) {
    set_seed(1);
    x = resnet ? randn({batch, 3, 32, 32}) : randn({batch, 1, 28, 28});
    y = randint(0, 10, {batch}, kInt32);
  }
  nn::CellPtr net() const {
    set_seed(0);
    return resnet ? nn::CellPtr(models::resnet18(10, models::ResNetStem::Cifar))
                  : nn::CellPtr(std::make_shared<models::LeNet5>());
  }
};

}  // namespace spore::bench
