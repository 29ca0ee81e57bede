// Parameter initializers, MindSpore's mindspore.common.initializer: an Initializer is a small value
// (kind + numbers) that fills a fresh tensor of a given shape and dtype from the seeded global
// generator, so set_seed() reproduces a network's initial weights. Initializers can be named by
// string ("he_uniform", "zeros", "normal", ...) wherever a layer option takes one.
// To add a kind: a Kind value, a factory function below, a case in init.cpp (make + name lookup).
#pragma once
#include <cmath>
#include <string>
#include <utility>

#include "spore/tensor.h"

namespace spore::nn {

class Initializer {
 public:
  enum class Kind {
    Default,  // "unset": the layer picks its MindSpore default
    Zero,
    One,
    Constant,         // a = value
    Uniform,          // U(-a, a)
    Normal,           // N(b, a): a = sigma, b = mean
    TruncatedNormal,  // N(b, a) truncated to [lo, hi] (absolute bounds, MindSpore 2.x)
    HeUniform,        // a = negative_slope; mode, nonlinearity
    HeNormal,
    XavierUniform,  // a = gain
    XavierNormal,
    FromTensor,  // copies `value` (shape must match)
  };

  Initializer() = default;               // Default
  Initializer(const char* name);         // NOLINT: "zeros", "he_uniform", ...
  Initializer(const std::string& name);  // NOLINT
  Initializer(Tensor value);             // NOLINT: a given tensor
  Initializer(Kind kind, double a = 0, double b = 0) : kind_(kind), a_(a), b_(b) {}

  bool is_default() const { return kind_ == Kind::Default; }
  Kind kind() const { return kind_; }
  // A fresh (leaf, no grad) tensor of `shape` and `dtype` filled by this initializer.
  Tensor make(const Shape& shape, DType dtype = kFloat32) const;
  std::string str() const;  // "HeUniform(negative_slope=2.23607)"

  // Builders for the optional settings.
  Initializer& mode(std::string m);  // "fan_in" | "fan_out" (He*)
  Initializer& nonlinearity(std::string n);
  Initializer& bounds(double lo, double hi);  // TruncatedNormal

 private:
  Kind kind_ = Kind::Default;
  double a_ = 0, b_ = 0, lo_ = -2, hi_ = 2;
  std::string mode_ = "fan_in", nonlinearity_ = "leaky_relu";
  Tensor value_;
};

// MindSpore's classes with MindSpore's defaults.
inline Initializer Zero() { return Initializer(Initializer::Kind::Zero); }
inline Initializer One() { return Initializer(Initializer::Kind::One); }
inline Initializer Constant(double value) {
  return Initializer(Initializer::Kind::Constant, value);
}
inline Initializer Uniform(double scale = 0.07) {
  return Initializer(Initializer::Kind::Uniform, scale);
}
inline Initializer Normal(double sigma = 0.01, double mean = 0.0) {
  return Initializer(Initializer::Kind::Normal, sigma, mean);
}
inline Initializer TruncatedNormal(double sigma = 0.01, double mean = 0.0, double a = -2.0,
                                   double b = 2.0) {
  return Initializer(Initializer::Kind::TruncatedNormal, sigma, mean).bounds(a, b);
}
// negative_slope defaults to 0 as in MindSpore's class; Dense and Conv2d use HeUniform(sqrt(5)).
inline Initializer HeUniform(double negative_slope = 0, std::string mode = "fan_in",
                             std::string nonlinearity = "leaky_relu") {
  return Initializer(Initializer::Kind::HeUniform, negative_slope)
      .mode(std::move(mode))
      .nonlinearity(std::move(nonlinearity));
}
inline Initializer HeNormal(double negative_slope = 0, std::string mode = "fan_in",
                            std::string nonlinearity = "leaky_relu") {
  return Initializer(Initializer::Kind::HeNormal, negative_slope)
      .mode(std::move(mode))
      .nonlinearity(std::move(nonlinearity));
}
inline Initializer XavierUniform(double gain = 1) {
  return Initializer(Initializer::Kind::XavierUniform, gain);
}
inline Initializer XavierNormal(double gain = 1) {
  return Initializer(Initializer::Kind::XavierNormal, gain);
}

// MindSpore's initializer(init, shape, dtype).
inline Tensor initializer(const Initializer& init, const Shape& shape, DType dtype = kFloat32) {
  return init.make(shape, dtype);
}

// fan_in = shape[1] * prod(shape[2:]), fan_out = shape[0] * prod(shape[2:]); needs rank >= 2.
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Shape& shape);
// calculate_gain("relu") = sqrt(2), ("leaky_relu", a) = sqrt(2 / (1 + a^2)), ("tanh") = 5/3,
// linear / conv / sigmoid = 1, ("selu") = 3/4.
double calculate_gain(const std::string& nonlinearity, double param = 0);

}  // namespace spore::nn
