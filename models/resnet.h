// ResNet-18/34/50 following MindSpore's model zoo (official/cv/ResNet/src/resnet.py): basic blocks
// (18, 34) or bottlenecks with expansion 4 (50), BatchNorm after every conv (eps 1e-4, momentum
// 0.9, the last BN of each block starting at gamma = 0), 1x1 conv + BN shortcuts when the shape
// changes, global average pooling and a Dense "end_point". Two stems: the ImageNet one (7x7/2 conv,
// 3x3/2 max pool) and the CIFAR one (3x3/1 conv, no pool) for 32x32 inputs.
#pragma once
#include <string>
#include <vector>

#include "spore/nn/nn.h"

namespace spore::models {

enum class ResNetStem { ImageNet, Cifar };

class ResNet : public nn::Cell {
 public:
  // depth 18, 34 or 50.
  ResNet(int depth, int64_t num_classes = 10, ResNetStem stem = ResNetStem::Cifar,
         int64_t in_channels = 3);
  Tensor construct(const Tensor& x) override;  // (N, 3, H, W) -> (N, num_classes)

 private:
  nn::CellPtr stem_;
  std::vector<nn::CellPtr> layers_;
  nn::CellPtr end_point_;
};

std::shared_ptr<ResNet> resnet18(int64_t num_classes = 10, ResNetStem stem = ResNetStem::Cifar);
std::shared_ptr<ResNet> resnet34(int64_t num_classes = 10, ResNetStem stem = ResNetStem::Cifar);
std::shared_ptr<ResNet> resnet50(int64_t num_classes = 10, ResNetStem stem = ResNetStem::Cifar);

}  // namespace spore::models
