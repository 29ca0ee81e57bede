// Gradients of any function, MindSpore-style (the README's value_and_grad program): the value of
// f(w) = sum(w * w) and its gradient 2w, then a few steps of gradient descent with them.
// `value_and_grad [steps]` (default 20).
#include <spore/spore.h>

#include <cstdlib>
#include <iostream>

using namespace spore;

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 20;
  Tensor w = tensor({1.0, 2.0, 3.0});
  auto f = [](const Tensor& v) { return (v * v).sum(); };
  auto [loss, grads] = value_and_grad(f, {w})(w);
  std::cout << "f(w) = " << loss.item<float>() << ", df/dw = " << grads[0]
            << "\n";  // 14, [2, 4, 6]

  // The same transform drives a descent: w <- w - 0.1 * df/dw shrinks w towards 0.
  for (int step = 1; step <= steps; ++step) {
    auto [value, g] = value_and_grad(f, {w})(w);
    w = w - g[0] * 0.1;
    if (step % 5 == 0) std::cout << "step " << step << ": f(w) = " << value.item<float>() << "\n";
  }
  std::cout << "final f(w) = " << f(w).item<float>() << "\n";
}
