// Activation cells and get_activation (spore/nn/activation.h): thin wrappers on spore/ops.h.
#include "spore/nn/activation.h"

#include <cctype>

#include "nn/util.h"
#include "spore/ops.h"

namespace spore::nn {

Tensor ReLU::construct(const Tensor& x) { return relu(x); }
Tensor ReLU6::construct(const Tensor& x) { return relu6(x); }
Tensor LeakyReLU::construct(const Tensor& x) { return leaky_relu(x, alpha_); }
std::string LeakyReLU::extend_repr() const { return "alpha=" + detail::fmt(alpha_); }
Tensor SiLU::construct(const Tensor& x) { return silu(x); }
Tensor Sigmoid::construct(const Tensor& x) { return sigmoid(x); }
Tensor Tanh::construct(const Tensor& x) { return tanh(x); }
Tensor GELU::construct(const Tensor& x) { return gelu(x, approximate_); }
std::string GELU::extend_repr() const {
  return std::string("approximate=") + (approximate_ ? "True" : "False");
}
Tensor Softmax::construct(const Tensor& x) { return softmax(x, axis_); }
std::string Softmax::extend_repr() const { return "axis=" + std::to_string(axis_); }
Tensor LogSoftmax::construct(const Tensor& x) { return log_softmax(x, axis_); }
std::string LogSoftmax::extend_repr() const { return "axis=" + std::to_string(axis_); }

CellPtr get_activation(const std::string& raw) {
  std::string n;
  for (char c : raw) n += char(std::tolower(static_cast<unsigned char>(c)));
  if (n == "relu") return std::make_shared<ReLU>();
  if (n == "relu6") return std::make_shared<ReLU6>();
  if (n == "leakyrelu" || n == "leaky_relu") return std::make_shared<LeakyReLU>();
  if (n == "silu" || n == "swish") return std::make_shared<SiLU>();
  if (n == "sigmoid") return std::make_shared<Sigmoid>();
  if (n == "tanh") return std::make_shared<Tanh>();
  if (n == "gelu") return std::make_shared<GELU>();
  if (n == "softmax") return std::make_shared<Softmax>();
  if (n == "logsoftmax" || n == "log_softmax") return std::make_shared<LogSoftmax>();
  SPORE_THROW(ErrorKind::ValueError, "[get_activation] unknown activation '", raw,
              "'; expected one of relu, relu6, leakyrelu, silu, sigmoid, tanh, gelu, softmax, "
              "logsoftmax");
}

}  // namespace spore::nn
