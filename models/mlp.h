// A multi-layer perceptron: Dense + activation per hidden layer, a plain Dense output. Used for
// Fashion-MNIST classification (flattening its input) and for the regression example.
#pragma once
#include <string>
#include <vector>

#include "spore/nn/nn.h"

namespace spore::models {

class MLP : public nn::Cell {
 public:
  // sizes: {in, hidden..., out}
  explicit MLP(std::vector<int64_t> sizes, std::string activation = "relu", double dropout = 0);
  Tensor construct(const Tensor& x) override;  // (N, ...) flattened to (N, in) -> (N, out)

 private:
  std::shared_ptr<nn::SequentialCell> body_;
  int64_t in_;
};

}  // namespace spore::models
