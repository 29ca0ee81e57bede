// A tiny MLP trained by hand-written SGD (p <- p - lr * g under NoGradGuard): the loss must fall.
// Exercises Dense, SequentialCell, CrossEntropyLoss and autograd together, without the optimizers.
#include <gtest/gtest.h>

#include "nn_test_util.h"
#include "spore/nn/nn.h"

using namespace spore;

TEST(Train, MlpLossFallsWithManualSgd) {
  set_seed(2024);
  // Labels from a fixed random teacher: argmax of a linear map of the inputs.
  Tensor x = randn({64, 4});
  Tensor teacher = randn({4, 3});
  Tensor y = argmax(matmul(x, teacher), 1);  // (64,) int64
  nn::SequentialCell net{std::make_shared<nn::Dense>(4, 16, nn::DenseOptions{.activation = "relu"}),
                         std::make_shared<nn::Dense>(16, 3)};
  nn::CrossEntropyLoss loss_fn;
  const auto params = net.trainable_params();
  ASSERT_EQ(params.size(), 4u);
  double first = 0, last = 0;
  for (int step = 0; step < 50; ++step) {
    Tensor loss = loss_fn(net(x), y);
    const auto grads = autograd::grad(loss, params);
    NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) assign(params[i], params[i] - grads[i] * 0.5);
    (step == 0 ? first : last) = loss.item<double>();
  }
  EXPECT_LT(last, 0.5 * first) << "first " << first << " last " << last;
  // The parameters were updated in place: the net's slots hold the trained tensors.
  EXPECT_TRUE(net.parameter("0.weight").is_same(params[0]));
}
