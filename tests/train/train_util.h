// Shared pieces of the train tests: a linear layer, an MSE loss cell and a small regression
// dataset y = x @ [1, -2, 0.5] + 0.3.
#pragma once
#include <memory>

#include "spore/data/dataset.h"
#include "spore/nn/cell.h"
#include "spore/ops.h"

namespace spore::test {

struct Linear : nn::Cell {
  Linear(int64_t in, int64_t out) {
    register_parameter("weight", zeros({in, out}));
    register_parameter("bias", zeros({out}));
  }
  Tensor construct(const Tensor& x) override {  // (N, in) -> (N, out)
    return matmul(x, parameter("weight")) + parameter("bias");
  }
};

struct MSELossCell : nn::Cell {
  Tensor construct(const Tensor& pred, const Tensor& y) override { return mean(square(pred - y)); }
};

struct Regression {
  Tensor x, y;  // (n, 3), (n, 1)
};
inline Regression regression_data(int64_t n) {
  std::vector<float> xs, ys;
  for (int64_t i = 0; i < n; ++i) {
    float a = float((i * 7) % 11) / 11.0f - 0.5f, b = float((i * 5) % 13) / 13.0f - 0.5f,
          c = float((i * 3) % 7) / 7.0f - 0.5f;
    xs.insert(xs.end(), {a, b, c});
    ys.push_back(a - 2 * b + 0.5f * c + 0.3f);
  }
  return {from_vector<float>(xs, {n, 3}), from_vector<float>(ys, {n, 1})};
}
inline data::Dataset regression_dataset(int64_t n, int64_t batch) {
  Regression r = regression_data(n);
  return data::TensorDataset({r.x, r.y}, {"data", "label"}).batch(batch);
}

}  // namespace spore::test
