// A Cell of your own: parameters registered by name, construct() written with ops, sub-cells
// composed into a network, then trained with MindSpore's WithLossCell + TrainOneStepCell to fit
// y = sin(3x) on [-1, 1]. `custom_cell [steps]` (default 500).
#include <spore/spore.h>

#include <cstdlib>
#include <iostream>

using namespace spore;

// y = x W^T + b, the affine map nn::Dense provides, written out to show the parts of a cell.
struct Affine : nn::Cell {
  Affine(int64_t in, int64_t out) {
    register_parameter("weight", nn::initializer(nn::Normal(0.5), {out, in}));
    register_parameter("bias", zeros({out}));
  }
  Tensor construct(const Tensor& x) override {  // (N, in) -> (N, out)
    return x.matmul(parameter("weight").t()) + parameter("bias");
  }
};

// Cells nest: members registered by name give the dotted parameter names ("hidden.weight").
struct Regressor : nn::Cell {
  Affine hidden{1, 32}, out{32, 1};
  Regressor() { register_cells("hidden", hidden, "out", out); }
  Tensor construct(const Tensor& x) override { return out(tanh(hidden(x))); }
};

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 500;
  set_seed(1);
  Tensor x = linspace(-1, 1, 256).reshape({256, 1});  // (256, 1)
  Tensor y = sin(x * 3.0);

  auto net = std::make_shared<Regressor>();
  for (const auto& [name, p] : net->named_parameters())
    std::cout << name << " " << shape_str(p.shape()) << "\n";
  auto with_loss = std::make_shared<train::WithLossCell>(net, std::make_shared<nn::MSELoss>());
  auto optimizer = std::make_shared<optim::Adam>(net->trainable_params(), 0.02);
  train::TrainOneStepCell train_step(with_loss, optimizer);
  train_step.set_train();

  for (int step = 0; step <= steps; ++step) {
    const float loss = train_step(x, y).item<float>();  // forward, backward, Adam update
    if (step % 100 == 0 || step == steps) std::cout << "step " << step << ": loss " << loss << "\n";
  }
}
