// Activation cells (MindSpore nn.ReLU, nn.GELU, ...) with MindSpore's defaults: LeakyReLU
// alpha=0.2, GELU approximate=true. get_activation("relu") builds one by MindSpore's name (used by
// Dense's `activation` option). To add one: a class here, a line in activation.cpp's name table.
#pragma once
#include <memory>
#include <string>

#include "spore/nn/cell.h"

namespace spore::nn {

class ReLU : public Cell {
 public:
  ReLU() { set_cls_name("ReLU"); }
  Tensor construct(const Tensor& x) override;
};
class ReLU6 : public Cell {
 public:
  ReLU6() { set_cls_name("ReLU6"); }
  Tensor construct(const Tensor& x) override;
};
class LeakyReLU : public Cell {
 public:
  explicit LeakyReLU(double alpha = 0.2) : alpha_(alpha) { set_cls_name("LeakyReLU"); }
  Tensor construct(const Tensor& x) override;
  std::string extend_repr() const override;

 private:
  double alpha_;
};
class SiLU : public Cell {
 public:
  SiLU() { set_cls_name("SiLU"); }
  Tensor construct(const Tensor& x) override;
};
class Sigmoid : public Cell {
 public:
  Sigmoid() { set_cls_name("Sigmoid"); }
  Tensor construct(const Tensor& x) override;
};
class Tanh : public Cell {
 public:
  Tanh() { set_cls_name("Tanh"); }
  Tensor construct(const Tensor& x) override;
};
class GELU : public Cell {
 public:
  explicit GELU(bool approximate = true) : approximate_(approximate) { set_cls_name("GELU"); }
  Tensor construct(const Tensor& x) override;
  std::string extend_repr() const override;

 private:
  bool approximate_;
};
class Softmax : public Cell {
 public:
  explicit Softmax(int64_t axis = -1) : axis_(axis) { set_cls_name("Softmax"); }
  Tensor construct(const Tensor& x) override;
  std::string extend_repr() const override;

 private:
  int64_t axis_;
};
class LogSoftmax : public Cell {
 public:
  explicit LogSoftmax(int64_t axis = -1) : axis_(axis) { set_cls_name("LogSoftmax"); }
  Tensor construct(const Tensor& x) override;
  std::string extend_repr() const override;

 private:
  int64_t axis_;
};

// "relu", "relu6", "leakyrelu", "silu" / "swish", "sigmoid", "tanh", "gelu", "softmax",
// "logsoftmax" (case-insensitive); throws naming the known ones otherwise.
CellPtr get_activation(const std::string& name);

}  // namespace spore::nn
