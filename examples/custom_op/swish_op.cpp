// The custom op itself: everything Spore needs to know about swish, in one place.
#include "swish_op.h"

#include <spore/spore.h>

#include <cmath>

namespace example {
namespace {
// y[i] = x[i] / (1 + exp(-x[i])); sx is 0 (broadcast scalar) or 1.
template <class T>
void swish_row(const T* x, int64_t sx, const T*, int64_t, T* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const T v = x[i * sx];
    y[i] = v / (T(1) + std::exp(-v));
  }
}

spore::CustomOpHandle make() {
  using namespace spore;
  return register_custom_op({
      .name = "example_swish",
      .num_inputs = 1,
      // d swish / dx = s + y (1 - s), s = sigmoid(x), y = swish(x): written with ops, so it also
      // runs traced in Graph mode and is differentiable again.
      .bprop =
          [](const std::vector<Tensor>& in, const Tensor& y, const Tensor& dy) {
            const Tensor s = sigmoid(in[0]);
            return std::vector<Tensor>{dy * (s + y * (1.0 - s))};
          },
      .cpu_row_f32 = swish_row<float>,
      .cpu_row_f64 = swish_row<double>,
      .traits = {.pointwise = true, .zero_preserving = true, .amp = CustomOpTraits::Amp::kAllow16},
  });
}
}  // namespace

const spore::CustomOpHandle& swish() {
  static const spore::CustomOpHandle op = make();  // registered on first use, once
  return op;
}
}  // namespace example
