// Pooling layers with MindSpore's defaults (kernel_size 1, stride 1, pad_mode "valid"):
//   nn::MaxPool2d pool{2, 2};  nn::MaxPool2d same{3, 2, "same"};
//   nn::AvgPool2d avg{3, 1, {.pad_mode = "pad", .padding = 1, .count_include_pad = false}};
// "same" pads like MindSpore / TensorFlow (output ceil(H / stride)); a "same" average counts only
// real pixels. Inputs are (N, C, H, W) or (C, H, W).
#pragma once
#include <string>

#include "spore/nn/cell.h"
#include "spore/nn/layers.h"

namespace spore::nn {

struct PoolOptions {
  std::string pad_mode = "valid";  // "valid" | "same" | "pad"
  Pad4 padding = 0;                // pad_mode "pad" only
  bool ceil_mode = false;          // pad_mode "pad" only
  bool count_include_pad = true;   // AvgPool2d with pad_mode "pad"
};

class Pool2d : public Cell {
 public:
  Pool2d(std::string name, bool is_max, Int2 kernel_size, Int2 stride, PoolOptions opt);
  Tensor construct(const Tensor& x) override;
  std::string extend_repr() const override;
  // The (top, bottom, left, right) padding for spatial size (h, w).
  std::vector<int64_t> pads_for(int64_t h, int64_t w) const;

 private:
  bool is_max_;
  Int2 kernel_, stride_;
  PoolOptions opt_;
};

class MaxPool2d : public Pool2d {
 public:
  explicit MaxPool2d(Int2 kernel_size = 1, Int2 stride = 1, PoolOptions opt = {})
      : Pool2d("MaxPool2d", true, kernel_size, stride, std::move(opt)) {}
  MaxPool2d(Int2 kernel_size, Int2 stride, const char* pad_mode)
      : MaxPool2d(kernel_size, stride, PoolOptions{.pad_mode = pad_mode}) {}
};

class AvgPool2d : public Pool2d {
 public:
  explicit AvgPool2d(Int2 kernel_size = 1, Int2 stride = 1, PoolOptions opt = {})
      : Pool2d("AvgPool2d", false, kernel_size, stride, std::move(opt)) {}
  AvgPool2d(Int2 kernel_size, Int2 stride, const char* pad_mode)
      : AvgPool2d(kernel_size, stride, PoolOptions{.pad_mode = pad_mode}) {}
};

class AdaptiveAvgPool2d : public Cell {
 public:
  explicit AdaptiveAvgPool2d(Int2 output_size = 1);
  Tensor construct(const Tensor& x) override;
  std::string extend_repr() const override;

 private:
  Int2 output_size_;
};

}  // namespace spore::nn
