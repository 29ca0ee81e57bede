// Uses the custom swish in both execution modes: PyNative with autograd, and a jit-compiled
// function where Graph mode fuses swish with the ops around it into one elementwise kernel.
#include <spore/spore.h>

#include <cstdio>

#include "swish_op.h"

using namespace spore;

int main() {
  const auto& swish = example::swish();
  Tensor x = randn({4, 8}).set_requires_grad(true);
  Tensor y = swish(x);
  auto [loss, grads] = value_and_grad([&](const Tensor& v) { return swish(v).sum(); }, {x})(x);
  std::printf("swish(x)[0, :4] = %s\nd sum(swish(x)) / dx [0, :4] = %s\n",
              y.slice(0, 0, 1).slice(1, 0, 4).str().c_str(),
              grads[0].slice(0, 0, 1).slice(1, 0, 4).str().c_str());

  auto f = jit(
      [&](const std::vector<Tensor>& a) {
        return std::vector<Tensor>{relu(swish(a[0]) * 2.0 + 1.0)};
      },
      {.name = "swish_block"});
  Tensor z = f({x.detach()})[0];
  std::printf("Graph mode: %zu nodes after the passes\n%s\n", f.stats().nodes,
              f.graph_text().c_str());
  std::printf("max |graph - pynative| = %g\n",
              amax(abs(z - relu(swish(x.detach()) * 2.0 + 1.0))).item<double>());
  return 0;
}
