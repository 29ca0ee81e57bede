// WithLossCell / TrainOneStepCell / WithEvalCell on a tiny linear regression.
#include "spore/train/wrappers.h"

#include <gtest/gtest.h>

#include "spore/context.h"
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

// Gradient accumulation: k micro-batches of b rows, then one update, equals one step on the k*b
// rows (mean loss), in PyNative and in Graph mode (two compiled graphs, each traced once).
namespace {
struct TwoLayer : nn::Cell {  // (N, 3) -> (N, 1) with a tanh in between
  TwoLayer() {
    std::vector<float> w1, w2;
    for (int i = 0; i < 3 * 4; ++i) w1.push_back(0.1f * float((i * 5) % 7) - 0.3f);
    for (int i = 0; i < 4; ++i) w2.push_back(0.2f * float(i) - 0.3f);
    register_parameter("w1", from_vector<float>(w1, {3, 4}));
    register_parameter("b1", zeros({4}));
    register_parameter("w2", from_vector<float>(w2, {4, 1}));
  }
  Tensor construct(const Tensor& x) override {
    return matmul(tanh(matmul(x, parameter("w1")) + parameter("b1")), parameter("w2"));
  }
};

// Parameters after `updates` updates on 32-row batches, each as k micro-batches of 32 / k rows.
std::vector<std::vector<float>> train_accumulated(int64_t k, int updates, Mode mode) {
  set_context({.mode = mode});
  auto net = std::make_shared<TwoLayer>();
  auto loss_net = std::make_shared<WithLossCell>(net, std::make_shared<MSELossCell>());
  auto opt = std::make_shared<optim::Momentum>(net->trainable_params(), 0.1, 0.9);
  TrainOneStepCell step(loss_net, opt);
  step.set_grad_accumulation(k);
  auto data = spore::test::regression_data(32 * updates);
  const int64_t b = 32 / k;
  for (int u = 0; u < updates; ++u)
    for (int64_t m = 0; m < k; ++m) {
      const int64_t start = u * 32 + m * b;
      step(data.x.slice(0, start, start + b), data.y.slice(0, start, start + b));
      EXPECT_EQ(step.micro_step(), (m + 1) % k);
    }
  EXPECT_EQ(opt->global_step(), updates);
  if (mode == Mode::Graph && k > 1) {
    EXPECT_EQ(step.jit_stats().traces, 1);  // the update graph, traced once
  }
  set_context({.mode = Mode::PyNative});
  std::vector<std::vector<float>> out;
  for (const Tensor& p : net->trainable_params()) out.push_back(p.to_vector<float>());
  return out;
}

void expect_close(const std::vector<std::vector<float>>& a,
                  const std::vector<std::vector<float>>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t p = 0; p < a.size(); ++p)
    for (size_t i = 0; i < a[p].size(); ++i)
      EXPECT_NEAR(a[p][i], b[p][i], 1e-5 * (1 + std::abs(b[p][i])))
          << what << " param " << p << " [" << i << "]";
}
}  // namespace

TEST(Wrappers, GradAccumulationEqualsTheWholeBatch) {
  const auto whole = train_accumulated(1, 20, Mode::PyNative);
  expect_close(train_accumulated(4, 20, Mode::PyNative), whole, "pynative k=4");
  expect_close(train_accumulated(2, 20, Mode::PyNative), whole, "pynative k=2");
  expect_close(train_accumulated(4, 20, Mode::Graph), whole, "graph k=4");
  expect_close(train_accumulated(1, 20, Mode::Graph), whole, "graph k=1");
}

TEST(Wrappers, GradAccumulationBadValuesAreErrors) {
  auto net = std::make_shared<Linear>(3, 1);
  auto loss_net = std::make_shared<WithLossCell>(net, std::make_shared<MSELossCell>());
  TrainOneStepCell step(loss_net, std::make_shared<optim::SGD>(net->trainable_params(), 0.1));
  EXPECT_THROW(step.set_grad_accumulation(0), Error);
  step.set_grad_accumulation(3);
  auto data = spore::test::regression_data(8);
  step(data.x, data.y);
  try {
    step.set_grad_accumulation(2);
    ADD_FAILURE() << "changing k mid-accumulation should fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1 of 3 micro-batches"), std::string::npos) << e.what();
  }
}
