#include "models/resnet.h"

namespace spore::models {
namespace {

nn::CellPtr conv(int64_t in, int64_t out, int64_t k, int64_t stride) {
  return std::make_shared<nn::Conv2d>(
      in, out, k, nn::Conv2dOptions{.stride = stride, .pad_mode = "pad", .padding = k / 2});
}
nn::CellPtr bn(int64_t c, bool last = false) {
  nn::BatchNormOptions o{.eps = 1e-4, .momentum = 0.9};
  if (last) o.gamma_init = nn::Zero();  // residual branch starts as identity
  return std::make_shared<nn::BatchNorm2d>(c, o);
}

// Basic block (expansion 1) or bottleneck (expansion 4), with the zoo's names.
class ResidualBlock : public nn::Cell {
 public:
  ResidualBlock(int64_t in, int64_t out, int64_t stride, bool bottleneck) {
    set_cls_name(bottleneck ? "ResidualBlock" : "ResidualBlockBase");
    const int64_t ch = bottleneck ? out / 4 : out;
    if (bottleneck) {  // 1x1 reduce, 3x3 (strided), 1x1 expand
      add("conv1", conv(in, ch, 1, 1), "bn1", bn(ch));
      add("conv2", conv(ch, ch, 3, stride), "bn2", bn(ch));
      add("conv3", conv(ch, out, 1, 1), "bn3", bn(out, true));
    } else {  // 3x3 (strided), 3x3
      add("conv1", conv(in, out, 3, stride), "bn1", bn(out));
      add("conv2", conv(out, out, 3, 1), "bn2", bn(out, true));
    }
    if (stride != 1 || in != out) {
      down_ = std::make_shared<nn::SequentialCell>(
          std::vector<nn::CellPtr>{conv(in, out, 1, stride), bn(out)});
      register_cell("down_sample_layer", down_);
    }
  }
  Tensor construct(const Tensor& x) override {
    Tensor y = x;
    for (size_t i = 0; i < convs_.size(); ++i) {
      y = (*bns_[i])((*convs_[i])(y));
      if (i + 1 < convs_.size()) y = relu(y);
    }
    return relu(y + (down_ ? (*down_)(x) : x));
  }

 private:
  void add(const std::string& cn, nn::CellPtr c, const std::string& bnn, nn::CellPtr b) {
    register_cell(cn, c);
    register_cell(bnn, b);
    convs_.push_back(std::move(c));
    bns_.push_back(std::move(b));
  }
  std::vector<nn::CellPtr> convs_, bns_;
  nn::CellPtr down_;
};

}  // namespace

ResNet::ResNet(int depth, int64_t num_classes, ResNetStem stem, int64_t in_channels) {
  set_cls_name("ResNet");
  std::vector<int64_t> blocks;
  bool bottleneck = false;
  if (depth == 18)
    blocks = {2, 2, 2, 2};
  else if (depth == 34)
    blocks = {3, 4, 6, 3};
  else if (depth == 50)
    blocks = {3, 4, 6, 3}, bottleneck = true;
  else
    SPORE_THROW(ErrorKind::ValueError, "[ResNet] depth must be 18, 34 or 50, got ", depth);
  const std::vector<int64_t> outs = bottleneck ? std::vector<int64_t>{256, 512, 1024, 2048}
                                               : std::vector<int64_t>{64, 128, 256, 512};
  std::vector<nn::CellPtr> stem_cells;
  if (stem == ResNetStem::ImageNet) {
    stem_cells = {conv(in_channels, 64, 7, 2), bn(64), std::make_shared<nn::ReLU>(),
                  std::make_shared<nn::MaxPool2d>(3, 2, "same")};
  } else {
    stem_cells = {conv(in_channels, 64, 3, 1), bn(64), std::make_shared<nn::ReLU>()};
  }
  stem_ = std::make_shared<nn::SequentialCell>(stem_cells);
  register_cell("stem", stem_);
  int64_t in = 64;
  for (size_t l = 0; l < 4; ++l) {
    std::vector<nn::CellPtr> layer;
    for (int64_t b = 0; b < blocks[l]; ++b) {
      const int64_t stride = (b == 0 && l > 0) ? 2 : 1;
      layer.push_back(std::make_shared<ResidualBlock>(in, outs[l], stride, bottleneck));
      in = outs[l];
    }
    layers_.push_back(std::make_shared<nn::SequentialCell>(layer));
    register_cell("layer" + std::to_string(l + 1), layers_.back());
  }
  end_point_ = std::make_shared<nn::Dense>(in, num_classes);
  register_cell("end_point", end_point_);
}

Tensor ResNet::construct(const Tensor& x) {
  Tensor y = (*stem_)(x);
  for (auto& l : layers_) y = (*l)(y);
  y = mean(y, {2, 3});  // global average pool: (N, C)
  return (*end_point_)(y);
}

std::shared_ptr<ResNet> resnet18(int64_t n, ResNetStem s) {
  return std::make_shared<ResNet>(18, n, s);
}
std::shared_ptr<ResNet> resnet34(int64_t n, ResNetStem s) {
  return std::make_shared<ResNet>(34, n, s);
}
std::shared_ptr<ResNet> resnet50(int64_t n, ResNetStem s) {
  return std::make_shared<ResNet>(50, n, s);
}

}  // namespace spore::models
