// The general features YOLOv5's recipe trains with, on a tiny regression: summed gradient
// accumulation whose count changes between steps (no recompilation), loss scaling with
// accumulation (overflowed micro-batches skipped), auxiliary outputs (has_aux), and the WarmUp /
// LambdaLR / EMA callbacks against float64 references of YOLOv5's formulas.
#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "spore/amp.h"
#include "spore/context.h"
#include "spore/grad_mode.h"
#include "spore/optim/optimizers.h"
#include "spore/train/callbacks.h"
#include "spore/train/model.h"
#include "spore/train/wrappers.h"
#include "train/train_util.h"

using namespace spore;
using namespace spore::train;
using spore::test::Linear;

namespace {

struct PyNativeAfter {
  ~PyNativeAfter() { set_context({.mode = Mode::PyNative}); }
};

// Sum over rows of the squared error (YOLOv5's loss is likewise times the batch size), and the
// mean absolute error as an auxiliary output.
struct SumLossWithAux : nn::Cell {
  explicit SumLossWithAux(std::shared_ptr<Linear> n) : net(std::move(n)) {
    register_cell("net", net);
  }
  std::vector<Tensor> forward(const std::vector<Tensor>& in) override {
    const Tensor d = (*net)(in[0]) - in[1];
    return {sum(square(d)), mean(abs(d)).detach()};
  }
  std::shared_ptr<Linear> net;
};

std::vector<std::vector<float>> params_of(const nn::Cell& net) {
  std::vector<std::vector<float>> out;
  for (const Tensor& p : net.trainable_params()) out.push_back(p.to_vector<float>());
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

// Updates u = 0.. use counts[u] micro-batches of 4 rows each. kSum with the count changed before
// every update equals one step on the whole rows (a summed loss); Graph mode compiles two graphs.
std::vector<std::vector<float>> run_counts(const std::vector<int64_t>& counts, Mode mode,
                                           bool whole, bool scaled = false) {
  PyNativeAfter restore;
  set_context({.mode = mode});
  auto net = std::make_shared<Linear>(3, 1);
  auto opt = std::make_shared<optim::Momentum>(net->trainable_params(), 0.01, 0.9,
                                               optim::MomentumOptions{.nesterov = true});
  auto cell = std::make_shared<SumLossWithAux>(net);
  std::shared_ptr<TrainOneStepCell> step =
      scaled ? std::make_shared<TrainOneStepWithLossScaleCell>(cell, opt, 1024.0)
             : std::make_shared<TrainOneStepCell>(cell, opt);
  if (!whole) step->set_grad_accumulation(1, GradAccumulation::kSum);
  auto data = spore::test::regression_data(64);
  int64_t row = 0;
  for (int64_t k : counts) {
    if (whole) {
      step->forward({data.x.slice(0, row, row + 4 * k), data.y.slice(0, row, row + 4 * k)});
      row += 4 * k;
      continue;
    }
    step->set_grad_accumulation(k, GradAccumulation::kSum);  // between updates and mid-way
    for (int64_t m = 0; m < k; ++m) {
      if (m == 1) step->set_grad_accumulation(k, GradAccumulation::kSum);
      const auto out =
          step->forward({data.x.slice(0, row, row + 4), data.y.slice(0, row, row + 4)});
      EXPECT_EQ(step->last_aux().size(), 1u);
      row += 4;
    }
  }
  EXPECT_EQ(opt->global_step(), int64_t(counts.size()));
  if (mode == Mode::Graph && !whole && !scaled) EXPECT_EQ(step->jit_stats().traces, 1);
  return params_of(*net);
}

}  // namespace

TEST(Steering, SumAccumulationWithChangingCountEqualsTheWholeBatch) {
  const std::vector<int64_t> counts{1, 2, 3, 2, 4};
  const auto whole = run_counts(counts, Mode::PyNative, true);
  expect_close(run_counts(counts, Mode::PyNative, false), whole, "pynative");
  expect_close(run_counts(counts, Mode::Graph, false), whole, "graph");
  expect_close(run_counts(counts, Mode::Graph, false, /*scaled=*/true), whole, "graph, scaled");
  expect_close(run_counts(counts, Mode::PyNative, false, /*scaled=*/true), whole,
               "pynative, scaled");
}

// A micro-batch whose gradients overflow is left out of the sum; the update still comes.
TEST(Steering, LossScaleAccumulationSkipsOverflowedMicroBatches) {
  auto data = spore::test::regression_data(8);
  std::vector<std::vector<float>> result[2];
  for (int bad = 0; bad < 2; ++bad) {
    auto net = std::make_shared<Linear>(3, 1);
    auto opt = std::make_shared<optim::Momentum>(net->trainable_params(), 0.01, 0.9);
    auto step = std::make_shared<TrainOneStepWithLossScaleCell>(
        std::make_shared<SumLossWithAux>(net), opt, 1024.0);
    step->set_grad_accumulation(3, GradAccumulation::kSum);
    step->forward({data.x.slice(0, 0, 4), data.y.slice(0, 0, 4)});
    if (bad) {  // an inf target: inf gradients, skipped
      const Tensor y = full({4, 1}, std::numeric_limits<double>::infinity());
      step->forward({data.x.slice(0, 4, 8), y});
      EXPECT_TRUE(step->last_overflow());
    } else {
      step->set_grad_accumulation(2, GradAccumulation::kSum);  // the same update without it
    }
    EXPECT_EQ(opt->global_step(), 0);
    step->forward({data.x.slice(0, 4, 8), data.y.slice(0, 4, 8)});
    EXPECT_EQ(opt->global_step(), 1);
    result[bad] = params_of(*net);
  }
  expect_close(result[1], result[0], "overflowed micro-batch skipped");
}

TEST(Steering, AccumulationModeErrors) {
  auto net = std::make_shared<Linear>(3, 1);
  TrainOneStepCell step(std::make_shared<SumLossWithAux>(net),
                        std::make_shared<optim::SGD>(net->trainable_params(), 0.1));
  step.set_grad_accumulation(3);  // mean
  auto data = spore::test::regression_data(4);
  step.forward({data.x, data.y});
  try {
    step.set_grad_accumulation(2, GradAccumulation::kSum);
    ADD_FAILURE() << "switching mode mid-accumulation should fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("GradAccumulation::kSum"), std::string::npos) << e.what();
  }
}

// The aux outputs reach callbacks through Model (RunContext::aux), the loss alone is trained.
TEST(Steering, AuxOutputsReachCallbacks) {
  auto net = std::make_shared<Linear>(3, 1);
  Model model(std::make_shared<SumLossWithAux>(net), nullptr,
              std::make_shared<optim::SGD>(net->trainable_params(), 0.01));
  std::vector<double> aux, loss;
  model.train(1, spore::test::regression_dataset(16, 4),
              {LambdaCallback({.on_step_end = [&](RunContext& c) {
                ASSERT_EQ(c.aux.size(), 1u);
                aux.push_back(c.aux[0].item<double>());
                loss.push_back(c.loss);
              }})});
  ASSERT_EQ(aux.size(), 4u);
  for (size_t i = 0; i < aux.size(); ++i) {
    EXPECT_GT(aux[i], 0);
    EXPECT_LE(aux[i] * aux[i] * 4, loss[i] * (1 + 1e-6));  // mean |d|^2 <= mean d^2
  }
}

namespace {
double interp(double x, double x0, double x1, double y0, double y1) {
  if (x <= x0) return y0;
  if (x >= x1) return y1;
  return y0 + (y1 - y0) * (x - x0) / (x1 - x0);
}
}  // namespace

// WarmUp + LambdaLR with YOLOv5's settings, read at each step against train.py's formulas in
// float64: ni <= nw: accumulate = max(1, round(interp(ni, [0, nw], [1, nbs / bs]))), lr_j =
// interp(ni, [0, nw], [0.1 if j == 0 else 0, lr0 lf(epoch)]), momentum = interp(ni, [0, nw],
// [0.8, 0.937]); afterwards lr_j = lr0 lf(epoch), momentum 0.937.
TEST(Steering, WarmUpAndScheduleFollowYoloV5) {
  for (const bool cos : {false, true}) {
    auto net = std::make_shared<Linear>(3, 1);
    std::vector<optim::ParamGroup> groups(3);
    groups[0].params = {net->parameter("bias")};
    groups[1].params = {net->parameter("weight")};  // group 2 empty: still a group with an lr
    const double lr0 = 0.01, lrf = 0.1, bs = 4, nbs = 14;
    const int64_t epochs = 5, nb = 4;
    auto opt = std::make_shared<optim::Momentum>(groups, lr0, 0.937,
                                                 optim::MomentumOptions{.nesterov = true});
    Model model(std::make_shared<SumLossWithAux>(net), nullptr, opt);
    model.train_network()->set_grad_accumulation(4, GradAccumulation::kSum);
    const auto lf = cos ? one_cycle_lr(lrf, epochs) : linear_lr(lrf, epochs);
    auto warm = std::make_shared<WarmUp>(WarmUpOptions{.epochs = 1.5,
                                                       .min_steps = 5,
                                                       .start_lrs = {0.1},
                                                       .momentum_start = 0.8,
                                                       .momentum_end = 0.937,
                                                       .accumulation = {{1.0, nbs / bs}}});
    int64_t checked = 0;
    auto check = LambdaCallback({.on_step_begin = [&](RunContext& c) {
      const int64_t ni = c.global_step - 1, nw = 6;  // max(round(1.5 * 4), 5)
      const int64_t e = c.epoch - 1;
      const double target = lr0 * lf(e);
      const double f = (1 - double(e) / epochs) * (1 - lrf) + lrf,
                   fc = ((1 - std::cos(double(e) * std::numbers::pi / epochs)) / 2) * (lrf - 1) + 1;
      EXPECT_NEAR(lf(e), cos ? fc : f, 1e-15);
      for (size_t g = 0; g < 3; ++g) {
        const double want =
            ni <= nw ? interp(double(ni), 0, double(nw), g == 0 ? 0.1 : 0.0, target) : target;
        EXPECT_NEAR(opt->group_lr(g), want, 1e-15) << "step " << ni << " group " << g;
      }
      if (ni <= nw) {
        EXPECT_NEAR(opt->momentum().value(), interp(double(ni), 0, double(nw), 0.8, 0.937), 1e-15);
        const int64_t acc = std::max<int64_t>(
            1, int64_t(std::nearbyint(interp(double(ni), 0, double(nw), 1, nbs / bs))));
        EXPECT_EQ(model.train_network()->grad_accumulation(), acc) << "step " << ni;
      } else {
        EXPECT_EQ(opt->momentum().value(), 0.937);
      }
      ++checked;
    }});
    model.train(epochs, spore::test::regression_dataset(16, 4),
                {std::make_shared<LambdaLR>(lf), warm, check});
    EXPECT_EQ(checked, epochs * nb);
    EXPECT_EQ(warm->steps(), 6);
  }
}

TEST(Steering, WarmUpErrors) {
  auto net = std::make_shared<Linear>(3, 1);
  Model model(std::make_shared<SumLossWithAux>(net), nullptr,
              std::make_shared<optim::Adam>(net->trainable_params(), 0.01));
  try {
    model.train(1, spore::test::regression_dataset(8, 4), {WarmUp({.momentum_start = 0.8})});
    ADD_FAILURE() << "Adam has no momentum";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has no momentum"), std::string::npos) << e.what();
  }
  try {
    model.train(1, spore::test::regression_dataset(8, 4), {WarmUp({.accumulation = {{1.0, 4.0}}})});
    ADD_FAILURE() << "a ramp needs kSum";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("GradAccumulation::kSum"), std::string::npos) << e.what();
  }
  EXPECT_THROW(WarmUp({.accumulation = {{0.0, 4.0}}}), Error);
  EXPECT_THROW(LambdaLR(nullptr), Error);
}

// EMA: after every optimizer update (not after accumulating steps), ema = d ema + (1 - d) w with
// d = 0.9999 (1 - exp(-updates / 2000)), from a copy of the model.
TEST(Steering, EmaUpdatesAfterEachOptimizerUpdate) {
  auto net = std::make_shared<Linear>(3, 1), ema_net = std::make_shared<Linear>(3, 1);
  {
    NoGradGuard ng;
    assign(net->parameter("weight"), full({3, 1}, 0.25));
  }
  auto opt = std::make_shared<optim::SGD>(net->trainable_params(), 0.01);
  Model model(std::make_shared<SumLossWithAux>(net), nullptr, opt);
  model.train_network()->set_grad_accumulation(2, GradAccumulation::kSum);
  auto ema = std::make_shared<EMA>(*net, ema_net);
  EXPECT_EQ(ema_net->parameter("weight").to_vector<float>()[0], 0.25f);
  const std::vector<float> w0 = ema_net->parameter("weight").to_vector<float>();
  std::vector<double> want(w0.begin(), w0.end());
  int64_t updates = 0, last = 0;
  auto follow = LambdaCallback({.on_step_end = [&](RunContext& c) {
    if (c.optimizer->global_step() == last) return;
    last = c.optimizer->global_step();
    const double d = 0.9999 * (1 - std::exp(-double(++updates) / 2000));
    const auto w = net->parameter("weight").to_vector<float>();
    for (size_t i = 0; i < want.size(); ++i) want[i] = d * want[i] + (1 - d) * w[i];
  }});
  model.train(2, spore::test::regression_dataset(16, 4), {ema, follow});
  EXPECT_EQ(ema->updates(), 4);  // 8 steps, 2 per update
  const auto got = ema_net->parameter("weight").to_vector<float>();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6);
  EXPECT_FALSE(ema_net->training());
  EXPECT_THROW(EMA(*net, std::make_shared<Linear>(4, 1)), Error);
}

// A group's own per-step schedule survives the warm-up: during it the schedule's value is the
// target, afterwards the schedule runs on.
TEST(Steering, WarmUpKeepsAStepSchedule) {
  auto net = std::make_shared<Linear>(3, 1);
  const std::vector<double> rates{0.08, 0.07, 0.06, 0.05, 0.04, 0.03, 0.02, 0.01};
  auto opt = std::make_shared<optim::Momentum>(net->trainable_params(), rates, 0.9);
  Model model(std::make_shared<SumLossWithAux>(net), nullptr, opt);
  std::vector<double> seen;
  auto record =
      LambdaCallback({.on_step_begin = [&](RunContext&) { seen.push_back(opt->group_lr(0)); }});
  model.train(2, spore::test::regression_dataset(16, 4),
              {WarmUp({.epochs = 0, .min_steps = 3}), record});
  ASSERT_EQ(seen.size(), 8u);
  for (size_t ni = 0; ni < 8; ++ni)
    EXPECT_NEAR(seen[ni], ni <= 3 ? interp(double(ni), 0, 3, 0, rates[ni]) : rates[ni], 1e-15)
        << "step " << ni;
  EXPECT_EQ(opt->group_lr_schedule(0).at(7), 0.01);
}
