// WithLossCell / TrainOneStepCell / WithEvalCell on a tiny linear regression.
#include "spore/train/wrappers.h"

#include <gtest/gtest.h>

#include "spore/optim/optimizers.h"
#include "train/train_util.h"

using namespace spore;
using namespace spore::train;
using spore::test::Linear;
using spore::test::MSELossCell;

TEST(Wrappers, TrainOneStepLossFalls) {
  auto net = std::make_shared<Linear>(3, 1);
  auto loss_net = std::make_shared<WithLossCell>(net, std::make_shared<MSELossCell>());
  EXPECT_EQ(loss_net->trainable_params().size(), 2u);
  auto opt = std::make_shared<optim::SGD>(net->trainable_params(), 0.5);
  TrainOneStepCell step(loss_net, opt);
  auto data = spore::test::regression_data(32);
  double first = step(data.x, data.y).item<double>(), last = first;
  for (int i = 0; i < 100; ++i) last = step(data.x, data.y).item<double>();
  EXPECT_GT(first, 0.1);
  EXPECT_LT(last, first * 0.05) << "first " << first << " last " << last;
  EXPECT_EQ(opt->global_step(), 101);
  Tensor l = step(data.x, data.y);
  EXPECT_FALSE(l.requires_grad());  // returned without history
}

TEST(Wrappers, SensScalesGradients) {
  auto data = spore::test::regression_data(8);
  std::vector<std::vector<double>> g;
  for (double sens : {1.0, 3.0}) {
    auto net = std::make_shared<Linear>(3, 1);
    auto loss_net = std::make_shared<WithLossCell>(net, std::make_shared<MSELossCell>());
    TrainOneStepCell step(loss_net, std::make_shared<optim::SGD>(net->trainable_params(), 0.1),
                          sens);
    step(data.x, data.y);
    g.push_back(step.last_grads()[0].to_vector<double>());
  }
  for (size_t i = 0; i < g[0].size(); ++i) EXPECT_NEAR(g[1][i], 3 * g[0][i], 1e-5);
}

TEST(Wrappers, GradReducerHook) {
  auto data = spore::test::regression_data(8);
  auto net = std::make_shared<Linear>(3, 1);
  auto loss_net = std::make_shared<WithLossCell>(net, std::make_shared<MSELossCell>());
  TrainOneStepCell step(loss_net, std::make_shared<optim::SGD>(net->trainable_params(), 0.1));
  int calls = 0;
  step.set_grad_reducer([&](std::vector<Tensor> grads) {
    ++calls;
    for (Tensor& t : grads) t = zeros_like(t);  // a reducer that cancels the update
    return grads;
  });
  step(data.x, data.y);
  EXPECT_EQ(calls, 1);
  for (double w : net->parameter("weight").to_vector<double>()) EXPECT_EQ(w, 0.0);
}

TEST(Wrappers, WithEvalCellOutputs) {
  auto data = spore::test::regression_data(4);
  auto net = std::make_shared<Linear>(3, 1);
  assign(net->parameter("bias"), full({1}, 0.5));
  WithEvalCell eval(net, std::make_shared<MSELossCell>());
  auto out = eval.forward({data.x, data.y});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[1].shape(), (Shape{4, 1}));
  for (double v : out[1].to_vector<double>()) EXPECT_NEAR(v, 0.5, 1e-6);  // weight is zero
  EXPECT_TRUE(out[2].is_same(data.y));
  double want = 0;
  for (double y : data.y.to_vector<double>()) want += (0.5 - y) * (0.5 - y) / 4;
  EXPECT_NEAR(out[0].item<double>(), want, 1e-6);
  EXPECT_NEAR(eval(data.x, data.y).item<double>(), want, 1e-6);
}

TEST(Wrappers, Errors) {
  EXPECT_THROW(WithLossCell(nullptr, std::make_shared<MSELossCell>()), Error);
  auto net = std::make_shared<Linear>(3, 1);
  EXPECT_THROW(TrainOneStepCell(net, nullptr), Error);
}
