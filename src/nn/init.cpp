// Initializers (spore/nn/init.h): name lookup, fan computation, and the fills. Every random fill
// draws from the seeded global generator (uniform/normal factories, or the counter-based generator
// directly for the truncated normal), so set_seed() reproduces it.
#include "spore/nn/init.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>
#include <vector>

#include "core/random.h"
#include "spore/autograd.h"
#include "spore/ops.h"

namespace spore::nn {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Initializer from_name(const std::string& raw) {
  const std::string n = lower(raw);
  if (n == "zeros" || n == "zero") return Zero();
  if (n == "ones" || n == "one") return One();
  if (n == "normal") return Normal();
  if (n == "uniform") return Uniform();
  if (n == "truncatednormal" || n == "truncated_normal") return TruncatedNormal();
  if (n == "he_uniform" || n == "heuniform") return HeUniform();
  if (n == "he_normal" || n == "henormal") return HeNormal();
  if (n == "xavier_uniform" || n == "xavieruniform") return XavierUniform();
  if (n == "xavier_normal" || n == "xaviernormal") return XavierNormal();
  SPORE_THROW(ErrorKind::ValueError, "[initializer] unknown initializer '", raw,
              "'; expected one of zeros, ones, normal, uniform, truncatednormal, he_uniform, "
              "he_normal, xavier_uniform, xavier_normal");
}

// N(mean, sigma) truncated to [lo, hi] by rejection: element i tries counters base + i * kTries +
// t, so the result does not depend on the order elements are filled in.
Tensor truncated_normal(const Shape& shape, double sigma, double mean, double lo, double hi,
                        DType dtype) {
  constexpr int64_t kTries = 32;
  const int64_t n = shape_numel(shape);
  const uint64_t s = random::seed(), base = random::reserve(uint64_t(n * kTries));
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double x = mean;
    for (int64_t t = 0; t < kTries; ++t) {
      const double c = mean + sigma * random::normal(s, base + uint64_t(i * kTries + t));
      if (c >= lo && c <= hi) {
        x = c;
        break;
      }
    }
    v[size_t(i)] = std::clamp(x, lo, hi);
  }
  Tensor out = from_vector(v, shape);
  return dtype == kFloat64 ? out : out.to(dtype);
}

}  // namespace

Initializer::Initializer(const char* name) : Initializer(from_name(name)) {}
Initializer::Initializer(const std::string& name) : Initializer(from_name(name)) {}
Initializer::Initializer(Tensor value) : kind_(Kind::FromTensor), value_(std::move(value)) {
  SPORE_CHECK(value_.defined(), "[initializer] an initializer tensor must be defined");
}

Initializer& Initializer::mode(std::string m) {
  SPORE_CHECK(m == "fan_in" || m == "fan_out",
              "[initializer] mode must be 'fan_in' or 'fan_out', got '", m, "'");
  mode_ = std::move(m);
  return *this;
}
Initializer& Initializer::nonlinearity(std::string n) {
  calculate_gain(n, 0);  // validates the name
  nonlinearity_ = std::move(n);
  return *this;
}
Initializer& Initializer::bounds(double lo, double hi) {
  SPORE_CHECK(lo < hi, "[TruncatedNormal] lower bound ", lo, " must be below upper bound ", hi);
  lo_ = lo;
  hi_ = hi;
  return *this;
}

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Shape& shape) {
  SPORE_CHECK(shape.size() >= 2,
              "[initializer] fan_in and fan_out can not be computed for a tensor "
              "with fewer than 2 dimensions, got shape ",
              shape_str(shape));
  int64_t receptive = 1;
  for (size_t i = 2; i < shape.size(); ++i) receptive *= shape[i];
  return {shape[1] * receptive, shape[0] * receptive};
}

double calculate_gain(const std::string& nonlinearity, double param) {
  const std::string n = lower(nonlinearity);
  if (n == "linear" || n == "conv1d" || n == "conv2d" || n == "conv3d" || n == "conv_transpose1d" ||
      n == "conv_transpose2d" || n == "conv_transpose3d" || n == "sigmoid")
    return 1.0;
  if (n == "tanh") return 5.0 / 3.0;
  if (n == "relu") return std::sqrt(2.0);
  if (n == "leaky_relu") return std::sqrt(2.0 / (1.0 + param * param));
  if (n == "selu") return 3.0 / 4.0;
  SPORE_THROW(ErrorKind::ValueError, "[initializer] unsupported nonlinearity '", nonlinearity,
              "'; expected linear, conv2d, sigmoid, tanh, relu, leaky_relu or selu");
}

Tensor Initializer::make(const Shape& shape, DType dtype) const {
  SPORE_CHECK_TYPE(is_floating(dtype) || kind_ == Kind::Zero || kind_ == Kind::One ||
                       kind_ == Kind::Constant || kind_ == Kind::FromTensor,
                   "[initializer] ", str(), " needs a floating dtype, got ", dtype_name(dtype));
  NoGradGuard no_grad;
  auto he_fan = [&] {
    auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(shape);
    return double(mode_ == "fan_in" ? fan_in : fan_out);
  };
  auto xavier_fans = [&] {
    auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(shape);
    return double(fan_in + fan_out);
  };
  switch (kind_) {
    case Kind::Default:
      SPORE_THROW(ErrorKind::ValueError,
                  "[initializer] a default (unset) initializer has no values; "
                  "the layer should have chosen one");
    case Kind::Zero:
      return zeros(shape, dtype);
    case Kind::One:
      return ones(shape, dtype);
    case Kind::Constant:
      return full(shape, a_, dtype);
    case Kind::Uniform:
      return uniform(shape, -a_, a_, dtype);
    case Kind::Normal:
      return normal(shape, b_, a_, dtype);
    case Kind::TruncatedNormal:
      return truncated_normal(shape, a_, b_, lo_, hi_, dtype);
    case Kind::HeUniform: {
      const double bound = calculate_gain(nonlinearity_, a_) * std::sqrt(3.0 / he_fan());
      return uniform(shape, -bound, bound, dtype);
    }
    case Kind::HeNormal:
      return normal(shape, 0, calculate_gain(nonlinearity_, a_) / std::sqrt(he_fan()), dtype);
    case Kind::XavierUniform: {
      const double bound = a_ * std::sqrt(6.0 / xavier_fans());
      return uniform(shape, -bound, bound, dtype);
    }
    case Kind::XavierNormal:
      return normal(shape, 0, a_ * std::sqrt(2.0 / xavier_fans()), dtype);
    case Kind::FromTensor: {
      SPORE_CHECK(value_.shape() == shape, "[initializer] the initializer tensor has shape ",
                  shape_str(value_.shape()), " but the parameter needs shape ", shape_str(shape));
      return value_.detach().to(dtype).clone().detach();
    }
  }
  return {};
}

std::string Initializer::str() const {
  std::ostringstream os;
  switch (kind_) {
    case Kind::Default:
      os << "Default()";
      break;
    case Kind::Zero:
      os << "Zero()";
      break;
    case Kind::One:
      os << "One()";
      break;
    case Kind::Constant:
      os << "Constant(value=" << a_ << ")";
      break;
    case Kind::Uniform:
      os << "Uniform(scale=" << a_ << ")";
      break;
    case Kind::Normal:
      os << "Normal(sigma=" << a_ << ", mean=" << b_ << ")";
      break;
    case Kind::TruncatedNormal:
      os << "TruncatedNormal(sigma=" << a_ << ", mean=" << b_ << ", a=" << lo_ << ", b=" << hi_
         << ")";
      break;
    case Kind::HeUniform:
    case Kind::HeNormal:
      os << (kind_ == Kind::HeUniform ? "HeUniform" : "HeNormal") << "(negative_slope=" << a_
         << ", mode=" << mode_ << ", nonlinearity=" << nonlinearity_ << ")";
      break;
    case Kind::XavierUniform:
      os << "XavierUniform(gain=" << a_ << ")";
      break;
    case Kind::XavierNormal:
      os << "XavierNormal(gain=" << a_ << ")";
      break;
    case Kind::FromTensor:
      os << "Tensor(shape=" << shape_str(value_.shape()) << ")";
      break;
  }
  return os.str();
}

}  // namespace spore::nn
