// Optimizers: the first three steps on a 2-element parameter against the update rule written out
// by hand (plain scalar loops below), parameter groups, gradient clipping and loss scaling.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "spore/jit.h"
#include "spore/ops.h"
#include "spore/optim/optimizers.h"

using namespace spore;
using namespace spore::optim;

namespace {

const std::vector<std::vector<double>> kGrads = {{0.5, -1.0}, {0.2, 0.4}, {-0.3, 0.1}};
const std::vector<double> kInit = {1.0, -2.0};

Tensor param() { return from_vector<float>({1.0f, -2.0f}, {2}); }
Tensor grad(int s) {
  return from_vector<float>({float(kGrads[size_t(s)][0]), float(kGrads[size_t(s)][1])}, {2});
}

// ref(step t (1-based), p, g) updates p (and its own state) in place for one element.
using Ref = std::function<void(int t, size_t i, double& p, double g)>;

void expect_three_steps(Optimizer& opt, const Tensor& p, const Ref& ref) {
  std::vector<double> want = kInit;
  for (int s = 0; s < 3; ++s) {
    opt.step({grad(s)});
    for (size_t i = 0; i < 2; ++i) ref(s + 1, i, want[i], kGrads[size_t(s)][i]);
    std::vector<double> got = p.to_vector<double>();
    for (size_t i = 0; i < 2; ++i)
      EXPECT_NEAR(got[i], want[i], 1e-6) << opt.name() << " step " << s + 1 << " element " << i;
  }
  EXPECT_EQ(opt.global_step(), 3);
}

}  // namespace

TEST(Optimizer, SGDPlain) {
  Tensor p = param();
  SGD opt({p}, 0.1);
  // Step 1 by hand: p = 1 - 0.1 * 0.5 = 0.95, -2 - 0.1 * -1 = -1.9.
  opt.step({grad(0)});
  EXPECT_NEAR(p.to_vector<double>()[0], 0.95, 1e-7);
  EXPECT_NEAR(p.to_vector<double>()[1], -1.9, 1e-7);
}

TEST(Optimizer, SGDMomentumDampeningWeightDecay) {
  for (double damp : {0.0, 0.3}) {
    Tensor p = param();
    SGD opt({p}, 0.1, {.momentum = 0.9, .dampening = damp, .weight_decay = 0.01});
    std::vector<double> buf(2, 0);
    expect_three_steps(opt, p, [&](int t, size_t i, double& w, double g) {
      g += 0.01 * w;
      buf[i] = t == 1 ? g : 0.9 * buf[i] + (1 - damp) * g;
      w -= 0.1 * buf[i];
    });
  }
}

TEST(Optimizer, SGDNesterov) {
  Tensor p = param();
  SGD opt({p}, 0.05, {.momentum = 0.8, .nesterov = true});
  std::vector<double> buf(2, 0);
  expect_three_steps(opt, p, [&](int t, size_t i, double& w, double g) {
    buf[i] = t == 1 ? g : 0.8 * buf[i] + g;
    w -= 0.05 * (g + 0.8 * buf[i]);
  });
  EXPECT_THROW(SGD({param()}, 0.1, {.momentum = 0.9, .dampening = 0.1, .nesterov = true}), Error);
}

TEST(Optimizer, Momentum) {
  for (bool nesterov : {false, true}) {
    for (double wd : {0.0, 0.1}) {
      Tensor p = param();
      Momentum opt({p}, 0.1, 0.9, {.weight_decay = wd, .nesterov = nesterov});
      std::vector<double> acc(2, 0);
      expect_three_steps(opt, p, [&](int, size_t i, double& w, double g) {
        g += wd * w;
        acc[i] = 0.9 * acc[i] + g;
        w -= nesterov ? 0.1 * (g + 0.9 * acc[i]) : 0.1 * acc[i];
      });
      ASSERT_EQ(opt.state().size(), 1u);
      EXPECT_EQ(opt.state()[0].first, "moments.param0");
    }
  }
}

TEST(Optimizer, MomentumFirstStepByHand) {
  Tensor p = param();
  Momentum opt({p}, 0.1, 0.9);
  opt.step({grad(0)});
  opt.step({grad(1)});
  // accum: [0.5, -1] then [0.45 + 0.2, -0.9 + 0.4] = [0.65, -0.5]; p = [0.95 - 0.065, -1.9 + 0.05].
  std::vector<double> got = p.to_vector<double>();
  EXPECT_NEAR(got[0], 0.885, 1e-6);
  EXPECT_NEAR(got[1], -1.85, 1e-6);
}

TEST(Optimizer, Adam) {
  for (double wd : {0.0, 0.1}) {
    Tensor p = param();
    Adam opt({p}, 0.01, {.eps = 1e-3, .weight_decay = wd});  // eps large enough to matter
    std::vector<double> m(2, 0), v(2, 0);
    expect_three_steps(opt, p, [&](int t, size_t i, double& w, double g) {
      g += wd * w;  // L2: part of the gradient
      m[i] = 0.9 * m[i] + 0.1 * g;
      v[i] = 0.999 * v[i] + 0.001 * g * g;
      double lr_t = 0.01 * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
      w -= lr_t * m[i] / (std::sqrt(v[i]) + 1e-3);  // MindSpore: eps outside the correction
    });
  }
}

TEST(Optimizer, AdamFirstStepMovesByLr) {
  // Bias correction makes the first step lr * g / |g| (up to eps).
  Tensor p = param();
  Adam opt({p}, 0.01);
  opt.step({grad(0)});
  std::vector<double> got = p.to_vector<double>();
  EXPECT_NEAR(got[0], 0.99, 1e-6);
  EXPECT_NEAR(got[1], -1.99, 1e-6);
}

TEST(Optimizer, AdamWeightDecay) {
  for (double wd : {0.0, 0.05}) {
    Tensor p = param();
    AdamWeightDecay opt({p}, 0.01, {.weight_decay = wd});
    std::vector<double> m(2, 0), v(2, 0);
    expect_three_steps(opt, p, [&](int, size_t i, double& w, double g) {
      m[i] = 0.9 * m[i] + 0.1 * g;
      v[i] = 0.999 * v[i] + 0.001 * g * g;
      // MindSpore: no bias correction; the decay is decoupled from the moments.
      w -= 0.01 * (m[i] / (std::sqrt(v[i]) + 1e-6) + wd * w);
    });
    EXPECT_EQ(opt.state()[0].first, "adam_m.param0");
  }
}

TEST(Optimizer, RMSProp) {
  for (double momentum : {0.0, 0.5}) {
    Tensor p = param();
    RMSProp opt({p}, 0.01, {.momentum = momentum});
    std::vector<double> ms(2, 1.0), mom(2, 0);  // MindSpore starts the mean square at 1
    expect_three_steps(opt, p, [&](int, size_t i, double& w, double g) {
      ms[i] = 0.9 * ms[i] + 0.1 * g * g;
      mom[i] = momentum * mom[i] + 0.01 * g / std::sqrt(ms[i] + 1e-10);
      w -= mom[i];
    });
  }
}

TEST(Optimizer, GroupsNoDecayOnBias) {
  Tensor w = from_vector<float>({2.0f, 4.0f}, {2}), b = from_vector<float>({1.0f}, {1});
  Tensor gamma = from_vector<float>({3.0f}, {1});
  auto groups = split_decay_groups({{"fc.weight", w}, {"fc.bias", b}, {"bn.gamma", gamma}});
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].params.size(), 1u);
  EXPECT_EQ(groups[1].params.size(), 2u);
  EXPECT_EQ(*groups[1].weight_decay, 0.0);
  SGD opt(groups, 0.1, {.weight_decay = 0.5});
  EXPECT_EQ(opt.parameter_names(), (std::vector<std::string>{"fc.weight", "fc.bias", "bn.gamma"}));
  opt.step({zeros({2}), zeros({1}), zeros({1})});
  // Only the weight decays: w -= 0.1 * 0.5 * w.
  EXPECT_NEAR(w.to_vector<double>()[0], 1.9, 1e-6);
  EXPECT_NEAR(w.to_vector<double>()[1], 3.8, 1e-6);
  EXPECT_NEAR(b.to_vector<double>()[0], 1.0, 1e-7);
  EXPECT_NEAR(gamma.to_vector<double>()[0], 3.0, 1e-7);
}

TEST(Optimizer, GroupLearningRates) {
  Tensor a = from_vector<float>({1.0f}, {1}), b = from_vector<float>({1.0f}, {1});
  std::vector<ParamGroup> groups{{.params = {a}}, {.params = {b}, .lr = LearningRate(0.5)}};
  SGD opt(groups, 0.1);
  opt.step({ones({1}), ones({1})});
  EXPECT_NEAR(a.to_vector<double>()[0], 0.9, 1e-7);
  EXPECT_NEAR(b.to_vector<double>()[0], 0.5, 1e-7);
}

TEST(Optimizer, PerStepLearningRate) {
  Tensor p = from_vector<float>({0.0f}, {1});
  SGD opt({p}, std::vector<double>{0.1, 0.2});  // the last value repeats
  EXPECT_DOUBLE_EQ(opt.current_lr(), 0.1);
  for (int i = 0; i < 3; ++i) opt.step({ones({1})});
  EXPECT_NEAR(p.to_vector<double>()[0], -(0.1 + 0.2 + 0.2), 1e-6);
  EXPECT_DOUBLE_EQ(opt.current_lr(), 0.2);
}

TEST(Optimizer, LossScaleAndUndefinedGrad) {
  Tensor p = from_vector<float>({1.0f}, {1}), q = from_vector<float>({1.0f}, {1});
  SGD opt({p, q}, 0.1, {.loss_scale = 4});
  opt.step({full({1}, 8.0), Tensor()});  // unscaled gradient 2; q has no gradient
  EXPECT_NEAR(p.to_vector<double>()[0], 0.8, 1e-6);
  EXPECT_NEAR(q.to_vector<double>()[0], 1.0, 1e-7);
}

TEST(Optimizer, Errors) {
  Tensor p = param();
  SGD opt({p}, 0.1);
  EXPECT_THROW(opt.step({}), Error);                     // wrong count
  EXPECT_THROW(opt.step({zeros({3})}), Error);           // wrong shape
  EXPECT_THROW(SGD(std::vector<Tensor>{}, 0.1), Error);  // no parameters
  EXPECT_THROW(SGD({p, p}, 0.1), Error);                 // duplicated
  EXPECT_THROW(Adam({param()}, 1e-3, {.beta1 = 1.0}), Error);
  try {
    opt.step({zeros({3})});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shape (3,) but its parameter has shape (2,)"),
              std::string::npos)
        << e.what();
  }
}

TEST(Clip, GlobalNorm) {
  Tensor a = from_vector<float>({3.0f, 4.0f}, {2}), b = from_vector<float>({0.0f, 12.0f}, {2});
  EXPECT_NEAR(global_norm({a, b}), 13.0, 1e-6);
  auto c = clip_by_global_norm({a, b}, 6.5);
  EXPECT_NEAR(c[0].to_vector<double>()[1], 2.0, 1e-6);
  EXPECT_NEAR(c[1].to_vector<double>()[1], 6.0, 1e-6);
  EXPECT_NEAR(global_norm(c), 6.5, 1e-5);
  auto same = clip_by_global_norm({a, b}, 20);
  EXPECT_TRUE(same[0].is_same(a));
  EXPECT_THROW(clip_by_global_norm({a}, 0), Error);
}

TEST(Clip, InsideStep) {
  Tensor p = from_vector<float>({0.0f, 0.0f}, {2});
  SGD opt({p}, 1.0);
  opt.set_clip_grad_norm(1.0);
  opt.step({from_vector<float>({3.0f, 4.0f}, {2})});
  EXPECT_NEAR(p.to_vector<double>()[0], -0.6, 1e-6);
  EXPECT_NEAR(p.to_vector<double>()[1], -0.8, 1e-6);
}

// The Graph-mode hyper tensors (one per parameter group, float64): PyNative steps never make them
// (the updates take attributes, as before); write_hyper() fills them with the current step's
// values, Momentum's [lr, momentum].
TEST(Hyper, OneTensorPerScheduleWrittenOnDemand) {
  Tensor a = param(), b = param(), c = param();
  std::vector<ParamGroup> groups(2);
  groups[0].params = {a, b};
  groups[1].params = {c};
  groups[1].lr = LearningRate(std::vector<double>{0.5, 0.25});
  Momentum opt(groups, LearningRate(std::vector<double>{0.1, 0.2, 0.3}), 0.9);
  EXPECT_TRUE(opt.takes_hyper());
  opt.step({grad(0), grad(0), grad(0)});
  EXPECT_TRUE(opt.hyper_tensors().empty());
  opt.write_hyper();  // step 1
  ASSERT_EQ(opt.hyper_tensors().size(), 2u);
  EXPECT_EQ(opt.hyper_tensors()[0].dtype(), kFloat64);
  EXPECT_EQ(opt.hyper_tensors()[0].to_vector<double>(), (std::vector<double>{0.2, 0.9}));
  EXPECT_EQ(opt.hyper_tensors()[1].to_vector<double>(), (std::vector<double>{0.25, 0.9}));
  const void* storage = opt.hyper_tensors()[0].data_ptr();
  opt.set_global_step(2);
  opt.write_hyper();  // in place: a compiled graph holding the tensor sees the new value
  EXPECT_EQ(opt.hyper_tensors()[0].data_ptr(), storage);
  EXPECT_EQ(opt.hyper_tensors()[0].to_vector<double>(), (std::vector<double>{0.3, 0.9}));
  // A group's lr and the momentum set during training land in the same tensors.
  opt.set_group_lr(1, 0.125);
  opt.set_momentum(0.8);
  opt.write_hyper();
  EXPECT_EQ(opt.hyper_tensors()[0].data_ptr(), storage);
  EXPECT_EQ(opt.hyper_tensors()[0].to_vector<double>(), (std::vector<double>{0.3, 0.8}));
  EXPECT_EQ(opt.hyper_tensors()[1].to_vector<double>(), (std::vector<double>{0.125, 0.8}));
  // SGD with dampening updates with elementwise ops: no hyper input.
  EXPECT_FALSE(SGD({param()}, 0.1, {.momentum = 0.9, .dampening = 0.1}).takes_hyper());
  EXPECT_TRUE(RMSProp({param()}, 0.1).takes_hyper());
}

namespace {

// PyTorch's param_groups[g]['lr'] = v: the group's lr becomes a constant; the others keep theirs.
TEST(ParamGroups, SetGroupLrAndMomentum) {
  Tensor a = param(), b = param();
  std::vector<ParamGroup> groups(2);
  groups[0].params = {a};
  groups[1].params = {b};
  groups[1].weight_decay = 0.5;
  Momentum opt(groups, 0.1, 0.9);
  ASSERT_EQ(opt.num_groups(), 2u);
  EXPECT_EQ(opt.group_lr(0), 0.1);
  opt.set_group_lr(1, 0.02);
  EXPECT_EQ(opt.group_lr(0), 0.1);
  EXPECT_EQ(opt.group_lr(1), 0.02);
  EXPECT_EQ(opt.lr_of(1), 0.02);
  EXPECT_EQ(opt.weight_decay_of(1), 0.5);
  EXPECT_EQ(opt.momentum().value(), 0.9);
  opt.set_momentum(0.5);
  EXPECT_EQ(opt.momentum().value(), 0.5);
  // Bad input: the index, the value, an optimizer without momentum.
  EXPECT_THROW(opt.set_group_lr(2, 0.1), Error);
  EXPECT_THROW(opt.group_lr(5), Error);
  EXPECT_THROW(opt.set_group_lr(0, -1.0), Error);
  EXPECT_THROW(opt.set_momentum(-0.1), Error);
  Adam adam({param()}, 0.1);
  EXPECT_FALSE(adam.momentum().has_value());
  try {
    adam.set_momentum(0.9);
    FAIL() << "Adam has no momentum";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no momentum"), std::string::npos) << e.what();
  }
  SGD plain({param()}, 0.1);
  EXPECT_THROW(plain.set_momentum(0.9), Error);
}

// Clipping traced into a graph gives what the eager clip gives, both sides of the threshold.
TEST(Clip, TracedClipMatchesEager) {
  for (const double max_norm : {0.5, 100.0}) {
    std::vector<Tensor> g{tensor({3.0f, 4.0f}), tensor({12.0f})};  // norm 13
    const std::vector<Tensor> eager = clip_by_global_norm(g, max_norm);
    auto f =
        jit([max_norm](const std::vector<Tensor>& in) { return clip_by_global_norm(in, max_norm); },
            {.name = "clip"});
    const std::vector<Tensor> traced = f(g);
    for (size_t i = 0; i < g.size(); ++i) {
      const auto e = eager[i].to_vector<float>(), t = traced[i].to_vector<float>();
      for (size_t j = 0; j < e.size(); ++j) EXPECT_NEAR(t[j], e[j], 1e-6) << max_norm;
    }
  }
}

}  // namespace
