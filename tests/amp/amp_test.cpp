// Mixed precision (spore/amp.h): which ops run in which dtype under each level in PyNative (read
// off the autograd tape), float32 master weights and gradients, the loss-scale managers' state
// machine, exact unscaling, overflow skipping and recovery (PyNative and Graph mode), errors.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <set>

#include "autograd/node.h"
#include "models/resnet.h"
#include "spore/allocator.h"
#include "spore/spore.h"
#include "test_util.h"

using namespace spore;
using spore::test::error_of;

namespace {

// Conv -> BatchNorm -> ReLU -> Dense: one op of each precision class (white list, norm, rest).
struct SmallNet : nn::Cell {
  nn::Conv2d conv;
  nn::BatchNorm2d bn{4};
  nn::ReLU act;
  nn::Dense fc{4 * 4 * 4, 3};
  explicit SmallNet(bool conv_bias = true)
      : conv(2, 4, 3, {.pad_mode = "pad", .padding = 1, .has_bias = conv_bias}) {
    register_cells("conv", conv, "bn", bn, "act", act, "fc", fc);
  }
  Tensor construct(const Tensor& x) override { return fc(act(bn(conv(x))).flatten(1)); }
};

// Every tape node reachable from `y`: op name -> the dtypes of (inputs..., "->", outputs...).
using OpDtypes = std::map<std::string, std::vector<std::string>>;
OpDtypes tape_dtypes(const Tensor& y) {
  OpDtypes out;
  std::set<const autograd::Node*> seen;
  std::vector<const autograd::Node*> todo{y.impl().grad_fn.get()};
  while (!todo.empty()) {
    const autograd::Node* n = todo.back();
    todo.pop_back();
    if (!n || !seen.insert(n).second) continue;
    std::vector<std::string> d;
    for (const Tensor& t : n->inputs) {
      d.push_back(dtype_name(t.dtype()));
      todo.push_back(t.impl().grad_fn.get());
    }
    d.push_back("->");
    for (const auto& m : n->out_meta) d.push_back(dtype_name(m.dtype));
    std::string name = ops::op_name(n->op);
    while (out.count(name)) name += "'";  // the second node of the same op
    out[name] = d;
  }
  return out;
}
using V = std::vector<std::string>;
const std::string F32 = "float32", BF = "bfloat16", HF = "float16";

Tensor batch() { return uniform({2, 2, 4, 4}, -1, 1); }

TEST(AmpDispatch, O0IsFloat32Everywhere) {
  SmallNet net;
  amp::auto_mixed_precision(net, amp::Level::O0);
  OpDtypes d = tape_dtypes(net(batch()));
  EXPECT_EQ(d["conv2d"], (V{F32, F32, F32, "->", F32}));
  EXPECT_EQ(d["batch_norm"], (V{F32, F32, F32, "->", F32, F32, F32}));
  EXPECT_EQ(d["matmul"], (V{F32, F32, "->", F32}));
  EXPECT_EQ(d.count("cast"), 0u);
}

TEST(AmpDispatch, O1CastsOnlyTheWhiteListAndBack) {
  SmallNet net;
  amp::auto_mixed_precision(net, amp::Level::O1, kBFloat16);
  Tensor y = net(batch());
  EXPECT_EQ(y.dtype(), kFloat32);
  OpDtypes d = tape_dtypes(y);
  EXPECT_EQ(d["conv2d"], (V{BF, BF, BF, "->", BF}));
  EXPECT_EQ(d["relu"], (V{BF, "->", BF}));
  EXPECT_EQ(d["matmul"], (V{BF, BF, "->", BF}));
  EXPECT_EQ(d["batch_norm"], (V{F32, F32, F32, "->", F32, F32, F32}));  // not on the list
  EXPECT_EQ(d["add"], (V{F32, F32, "->", F32}));                        // Dense's bias add
}

TEST(AmpDispatch, O2KeepsBatchNormFloat32OnLowPrecisionActivations) {
  SmallNet net;
  amp::auto_mixed_precision(net, amp::Level::O2, kFloat16);
  ASSERT_TRUE(net.bn.amp_policy().has_value());
  EXPECT_TRUE(net.bn.amp_policy()->keep_float32);
  EXPECT_FALSE(net.conv.amp_policy()->keep_float32);
  Tensor y = net(batch());
  EXPECT_EQ(y.dtype(), kFloat16);  // build_train_network adds the float32 output cast
  OpDtypes d = tape_dtypes(y);
  EXPECT_EQ(d["conv2d"], (V{HF, HF, HF, "->", HF}));
  // x stays float16, gamma/beta float32; y in x's dtype, statistics float32.
  EXPECT_EQ(d["batch_norm"], (V{HF, F32, F32, "->", HF, F32, F32}));
  EXPECT_EQ(d["relu"], (V{HF, "->", HF}));
  EXPECT_EQ(d["matmul"], (V{HF, HF, "->", HF}));
  EXPECT_EQ(d["add"], (V{HF, HF, "->", HF}));
  // The float32 output wrapper.
  Tensor y32 =
      (*amp::with_float32_output(std::shared_ptr<nn::Cell>(&net, [](nn::Cell*) {})))(batch());
  EXPECT_EQ(y32.dtype(), kFloat32);
}

TEST(AmpDispatch, O3PutsBatchNormInLowPrecisionToo) {
  SmallNet net;
  amp::auto_mixed_precision(net, amp::Level::O3, kBFloat16);
  OpDtypes d = tape_dtypes(net(batch()));
  EXPECT_EQ(d["batch_norm"], (V{BF, BF, BF, "->", BF, F32, F32}));
  EXPECT_EQ(d["conv2d"], (V{BF, BF, BF, "->", BF}));
}

TEST(AmpDispatch, MasterWeightsStayFloat32WithFloat32Gradients) {
  for (amp::Level level : {amp::Level::O1, amp::Level::O2, amp::Level::O3}) {
    SmallNet net;
    amp::auto_mixed_precision(net, level, kBFloat16);
    Tensor loss = sum(cast(net(batch()), kFloat32));
    std::vector<Tensor> ps = net.trainable_params();
    std::vector<Tensor> gs = autograd::grad(loss, ps);
    ASSERT_EQ(gs.size(), ps.size());
    for (size_t i = 0; i < ps.size(); ++i) {
      EXPECT_EQ(ps[i].dtype(), kFloat32) << amp::level_name(level);
      EXPECT_EQ(gs[i].dtype(), kFloat32) << amp::level_name(level) << " grad " << i;
      double s = 0;
      for (double v : gs[i].to_vector<double>()) s += std::fabs(v);
      EXPECT_GT(s, 0) << amp::level_name(level) << " grad " << i << " is all zero";
    }
  }
}

TEST(AmpDispatch, LowPrecisionGradientsTrackFloat32) {
  // Low-precision gradients of the conv weight are the float32 ones up to rounding. (No conv
  // bias: a bias in front of BatchNorm shifts the mean far from zero, and rounding the conv output
  // then costs bfloat16 most of its 8 bits after BatchNorm subtracts that mean.)
  set_seed(3);
  SmallNet net(false);
  Tensor x = batch();
  auto grad_of = [&](amp::Level level, DType dt) {
    amp::auto_mixed_precision(net, level, dt);
    Tensor loss = sum(square(cast(net(x), kFloat32)));
    return autograd::grad(loss, {net.conv.parameter("weight")})[0].to_vector<double>();
  };
  std::vector<double> g32 = grad_of(amp::Level::O0, kFloat16);
  for (amp::Level l : {amp::Level::O1, amp::Level::O2, amp::Level::O3})
    for (DType dt : {kFloat16, kBFloat16}) {
      std::vector<double> g16 = grad_of(l, dt);
      double num = 0, den = 0;
      for (size_t i = 0; i < g32.size(); ++i) {
        num += (g16[i] - g32[i]) * (g16[i] - g32[i]);
        den += g32[i] * g32[i];
      }
      EXPECT_LT(std::sqrt(num / den), dt == kBFloat16 ? 0.03 : 0.005) << amp::level_name(l);
    }
}

TEST(AmpDispatch, CellPolicyScopesAndToFloat) {
  SmallNet net;
  net.to_float(kBFloat16);
  net.fc.to_float(kFloat32);  // a float32 island inside a bfloat16 network
  OpDtypes d = tape_dtypes(net(batch()));
  EXPECT_EQ(d["conv2d"], (V{BF, BF, BF, "->", BF}));
  EXPECT_EQ(d["batch_norm"], (V{BF, BF, BF, "->", BF, F32, F32}));
  EXPECT_EQ(d["matmul"], (V{F32, F32, "->", F32}));
  EXPECT_EQ(amp::current_policy().level, amp::Level::O0);  // restored after the call
  EXPECT_NE(error_of([&] { net.to_float(kInt32); }).find("float16, bfloat16 or float32"),
            std::string::npos);
}

TEST(AmpDispatch, NoGradInferenceRunsInLowPrecision) {
  SmallNet net;
  net.set_train(false);
  amp::auto_mixed_precision(net, amp::Level::O2, kBFloat16);
  NoGradGuard ng;
  Tensor y = net(batch());
  EXPECT_EQ(y.dtype(), kBFloat16);
}

// ---- all_finite ---------------------------------------------------------------------------------

TEST(AllFinite, OnePassOverMixedInputs) {
  Tensor a = ones({3}), b = ones({2, 2}, kFloat16), c = ones({5}, kInt32);
  EXPECT_TRUE(amp::all_finite({a, b, c}).item<bool>());
  EXPECT_TRUE(amp::all_finite({}).item<bool>());
  Tensor big = zeros({100000}, kBFloat16);
  EXPECT_TRUE(amp::all_finite({big}).item<bool>());
  Tensor bad = full({2, 2}, 70000.0).to(kFloat16);  // overflows float16 -> inf
  EXPECT_FALSE(amp::all_finite({a, bad}).item<bool>());
  EXPECT_FALSE(amp::all_finite({a, log(zeros({2})) * 0.0}).item<bool>());  // -inf * 0 = nan
  EXPECT_EQ(amp::all_finite({a}).dtype(), kBool);
  EXPECT_EQ(amp::all_finite({a}).dim(), 0);
}

// ---- loss scale managers ------------------------------------------------------------------------

TEST(LossScale, DynamicManagerStateMachine) {
  amp::DynamicLossScaleManager m(8, 2, 3);
  EXPECT_TRUE(m.updates_scale());
  EXPECT_TRUE(m.get_drop_overflow_update());
  m.update_loss_scale(true);
  EXPECT_EQ(m.get_loss_scale(), 4);  // overflow halves
  m.update_loss_scale(false);
  m.update_loss_scale(false);
  EXPECT_EQ(m.get_loss_scale(), 4);
  m.update_loss_scale(true);  // an overflow restarts the window
  EXPECT_EQ(m.get_loss_scale(), 2);
  m.update_loss_scale(false);
  m.update_loss_scale(false);
  m.update_loss_scale(false);  // a clean window doubles
  EXPECT_EQ(m.get_loss_scale(), 4);
  EXPECT_EQ(m.good_steps(), 0);
  for (int i = 0; i < 10; ++i) m.update_loss_scale(true);
  EXPECT_EQ(m.get_loss_scale(), 1);  // never below 1
  amp::DynamicLossScaleManager d;
  EXPECT_EQ(d.get_loss_scale(), 16777216.0);  // MindSpore's defaults: 2^24, factor 2, window 2000
  for (int i = 0; i < 1999; ++i) d.update_loss_scale(false);
  EXPECT_EQ(d.get_loss_scale(), 16777216.0);
  d.update_loss_scale(false);
  EXPECT_EQ(d.get_loss_scale(), 33554432.0);
}

TEST(LossScale, FixedManager) {
  amp::FixedLossScaleManager m;
  EXPECT_EQ(m.get_loss_scale(), 128);
  EXPECT_TRUE(m.get_drop_overflow_update());
  m.update_loss_scale(true);
  EXPECT_EQ(m.get_loss_scale(), 128);
  amp::FixedLossScaleManager keep(64, false);
  EXPECT_FALSE(keep.get_drop_overflow_update());
  EXPECT_FALSE(keep.updates_scale());
  EXPECT_NE(error_of([] { amp::FixedLossScaleManager(0.5); }).find(">= 1"), std::string::npos);
  EXPECT_NE(error_of([] { amp::DynamicLossScaleManager(8, 1); }).find("scale_factor"),
            std::string::npos);
}

// A one-layer network whose loss gradient is 64 * x: with batch 1 and x = ones, every weight
// gradient is exactly 64, so scale * 64 overflows float32 once scale >= 2^122.
struct Crafted {
  std::shared_ptr<nn::Dense> net = std::make_shared<nn::Dense>(4, 2);
  std::shared_ptr<nn::Cell> loss = std::make_shared<train::LossFn>(
      [](const Tensor& logits, const Tensor&) { return sum(logits) * 64.0; });
  Tensor x = ones({1, 4}), y = zeros({1}, kInt32);
};

std::vector<double> flat_params(const nn::Cell& c) {
  std::vector<double> v;
  for (const Tensor& p : c.trainable_params())
    for (double e : p.to_vector<double>()) v.push_back(e);
  return v;
}

struct ScaleRun {
  std::vector<int> overflow;
  std::vector<double> scale, loss, params;
};

ScaleRun run_crafted(Mode mode, int steps) {
  set_context({.mode = mode});
  set_seed(5);
  Crafted c;
  auto opt = std::make_shared<optim::SGD>(c.net->trainable_params(), 1e-3);
  auto mgr = std::make_shared<amp::DynamicLossScaleManager>(std::ldexp(1.0, 127), 2, 4);
  auto step = std::make_shared<train::TrainOneStepWithLossScaleCell>(
      std::make_shared<train::WithLossCell>(c.net, c.loss), opt, mgr);
  ScaleRun r;
  for (int i = 0; i < steps; ++i) {
    const std::vector<double> before = flat_params(*c.net);
    std::vector<Tensor> out = step->forward({c.x, c.y});
    r.overflow.push_back(out[1].item<bool>());
    r.scale.push_back(out[2].item<double>());
    r.loss.push_back(out[0].item<double>());
    if (r.overflow.back())
      EXPECT_EQ(flat_params(*c.net), before) << "an overflowed step was applied";
    else {
      EXPECT_NE(flat_params(*c.net), before);
      for (const Tensor& g : step->unscaled_grads())  // unscaled exactly
        for (double e : g.to_vector<double>()) EXPECT_EQ(e, 64.0);
    }
  }
  r.params = flat_params(*c.net);
  set_context({.mode = Mode::PyNative});
  return r;
}

TEST(LossScale, OverflowSkipsAndHalvesCleanWindowDoubles) {
  ScaleRun r = run_crafted(Mode::PyNative, 12);
  // 2^127 .. 2^122 overflow (6 steps), then 2^121 is clean; 4 clean steps double it back to 2^122,
  // which overflows again.
  const std::vector<int> want_overflow = {1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 0};
  EXPECT_EQ(r.overflow, want_overflow);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(r.scale[size_t(i)], std::ldexp(1.0, 127 - i));
  EXPECT_EQ(r.scale[6], std::ldexp(1.0, 121));
  EXPECT_EQ(r.scale[10], std::ldexp(1.0, 122));
  EXPECT_EQ(r.scale[11], std::ldexp(1.0, 121));
}

TEST(LossScale, GraphModeMatchesPyNative) {
  ScaleRun eager = run_crafted(Mode::PyNative, 12), graph = run_crafted(Mode::Graph, 12);
  EXPECT_EQ(graph.overflow, eager.overflow);
  EXPECT_EQ(graph.scale, eager.scale);
  EXPECT_EQ(graph.loss, eager.loss);
  EXPECT_EQ(graph.params, eager.params);
}

// The step deciding on the device (Graph mode, gating optimizer, Dynamic / Fixed manager) against
// the host-decided steps: PyNative, and Graph mode with set_decide_on_device(false). The crafted
// gradients are exact (64), so every update gets the same inputs: overflow pattern, scales, step
// counts, parameters and optimizer state equal bit for bit; the losses too, up to the Graph-mode
// matmul's rounding.
struct WrappedManager : amp::LossScaleManager {  // a manager type of the user's: the host decides
  explicit WrappedManager(amp::LossScaleManagerPtr m) : m(std::move(m)) {}
  double get_loss_scale() const override { return m->get_loss_scale(); }
  void update_loss_scale(bool overflow) override { m->update_loss_scale(overflow); }
  bool get_drop_overflow_update() const override { return m->get_drop_overflow_update(); }
  bool updates_scale() const override { return m->updates_scale(); }
  std::string name() const override { return "Wrapped"; }
  amp::LossScaleManagerPtr m;
};

using MakeOptimizer = std::function<optim::OptimizerPtr(std::vector<Tensor>)>;

struct DecidedRun {
  ScaleRun r;
  std::vector<int64_t> steps;  // the optimizer's global step after each call
  std::vector<double> state;
  bool on_device = false;
  int64_t overflow_steps = 0;
  double manager_scale = 0, mid_scale = 0;
};

// lazy: the device-deciding cell books outcomes only when something needs them (as steps still
// queued on a GPU), and the loop reads nothing that would book them (only the step's outputs).
DecidedRun run_decided(Mode mode, bool host, const MakeOptimizer& make,
                       std::function<amp::LossScaleManagerPtr()> manager, int steps,
                       bool lazy = false, int64_t* most_unbooked = nullptr) {
  set_context({.mode = mode});
  set_seed(5);
  Crafted c;
  optim::OptimizerPtr opt = make(c.net->trainable_params());
  amp::LossScaleManagerPtr m = manager();
  auto step = std::make_shared<train::TrainOneStepWithLossScaleCell>(
      std::make_shared<train::WithLossCell>(c.net, c.loss), opt, m);
  step->set_decide_on_device(!host);
  DecidedRun d;
  d.on_device = step->decides_on_device();
  step->set_eager_booking(!lazy);
  for (int i = 0; i < steps; ++i) {
    std::vector<Tensor> out = step->forward({c.x, c.y});
    if (most_unbooked) *most_unbooked = std::max(*most_unbooked, step->unbooked_steps());
    if (!lazy) d.steps.push_back(opt->global_step());  // books a step the device decided
    d.r.overflow.push_back(out[1].item<bool>());
    if (!lazy) EXPECT_EQ(step->last_overflow(), bool(d.r.overflow.back())) << "step " << i;
    // Step 9 is the window's fourth clean step: the scale doubles. The manager, read directly
    // with steps unbooked, books them first.
    if (i == 9) d.mid_scale = m->get_loss_scale();
    d.r.scale.push_back(out[2].item<double>());
    d.r.loss.push_back(out[0].item<double>());
  }
  d.r.params = flat_params(*c.net);
  for (const auto& [name, t] : opt->state())
    for (double e : t.to_vector<double>()) d.state.push_back(e);
  // The manager itself, read first: it books what the device decided (never a step behind).
  d.manager_scale = m->get_loss_scale();
  d.overflow_steps = step->overflow_steps();
  d.r.scale.push_back(step->loss_scale());  // the next step's
  d.steps.push_back(opt->global_step());
  set_context({.mode = Mode::PyNative});
  return d;
}

void expect_device_decided_equals_host(const char* what, const MakeOptimizer& make,
                                       std::function<amp::LossScaleManagerPtr()> manager,
                                       int steps = 12, bool both_outcomes = true) {
  SCOPED_TRACE(what);
  const DecidedRun eager = run_decided(Mode::PyNative, false, make, manager, steps),
                   host = run_decided(Mode::Graph, true, make, manager, steps),
                   device = run_decided(Mode::Graph, false, make, manager, steps);
  EXPECT_FALSE(eager.on_device);
  EXPECT_FALSE(host.on_device);
  EXPECT_TRUE(device.on_device);
  for (const DecidedRun* o : {&host, &device}) {
    EXPECT_EQ(o->r.overflow, eager.r.overflow);
    EXPECT_EQ(o->r.scale, eager.r.scale);
    EXPECT_EQ(o->steps, eager.steps);
    EXPECT_EQ(o->r.params, eager.r.params);
    EXPECT_EQ(o->state, eager.state);
    EXPECT_EQ(o->overflow_steps, eager.overflow_steps);
    ASSERT_EQ(o->r.loss.size(), eager.r.loss.size());
    for (size_t i = 0; i < o->r.loss.size(); ++i)
      EXPECT_NEAR(o->r.loss[i], eager.r.loss[i], 1e-6 * std::abs(eager.r.loss[i]));
  }
  EXPECT_EQ(device.r.loss, host.r.loss);  // the same graph but for the update's gate
  if (!both_outcomes) return;
  EXPECT_NE(std::count(eager.r.overflow.begin(), eager.r.overflow.end(), 1), 0);
  EXPECT_NE(std::count(eager.r.overflow.begin(), eager.r.overflow.end(), 0), 0);
}

auto dynamic_manager() {
  return [] { return std::make_shared<amp::DynamicLossScaleManager>(std::ldexp(1.0, 127), 2, 4); };
}

TEST(LossScale, DeviceDecidesOnlyWhereItCan) {
  set_context({.mode = Mode::Graph});
  Crafted c;
  auto with_loss = std::make_shared<train::WithLossCell>(c.net, c.loss);
  auto momentum = std::make_shared<optim::Momentum>(c.net->trainable_params(), 1e-3, 0.9);
  auto dynamic = std::make_shared<amp::DynamicLossScaleManager>();
  auto cell = [&](optim::OptimizerPtr o, amp::LossScaleManagerPtr m) {
    return std::make_shared<train::TrainOneStepWithLossScaleCell>(with_loss, o, m);
  };
  EXPECT_TRUE(cell(momentum, dynamic)->decides_on_device());
  EXPECT_FALSE(cell(momentum, std::make_shared<WrappedManager>(dynamic))->decides_on_device())
      << "a manager of the user's: its rule runs on the host";
  EXPECT_FALSE(cell(std::make_shared<optim::SGD>(c.net->trainable_params(), 1e-3), dynamic)
                   ->decides_on_device())
      << "SGD without momentum updates with elementwise ops: no gate";
  auto off = cell(momentum, dynamic);
  off->set_decide_on_device(false);
  EXPECT_FALSE(off->decides_on_device());
  set_context({.mode = Mode::PyNative});
  EXPECT_FALSE(cell(momentum, dynamic)->decides_on_device()) << "PyNative decides on the host";
}

TEST(LossScale, DeviceDecidedMomentumEqualsHostDecided) {
  expect_device_decided_equals_host(
      "Momentum",
      [](std::vector<Tensor> p) { return std::make_shared<optim::Momentum>(p, 1e-3, 0.9); },
      dynamic_manager());
  expect_device_decided_equals_host(
      "SGD momentum nesterov",
      [](std::vector<Tensor> p) {
        return std::make_shared<optim::SGD>(
            p, 1e-3, optim::SGDOptions{.momentum = 0.9, .weight_decay = 0.01, .nesterov = true});
      },
      dynamic_manager());
}

// Adam's bias correction and a per-step learning rate depend on how many steps were applied: a
// skipped step must not advance them, and the device decides which steps those are.
TEST(LossScale, DeviceDecidedAdamWithScheduleEqualsHostDecided) {
  std::vector<double> lrs;
  for (int i = 0; i < 16; ++i) lrs.push_back(1e-3 * (1 + 0.25 * i));
  expect_device_decided_equals_host(
      "Adam",
      [lrs](std::vector<Tensor> p) {
        return std::make_shared<optim::Adam>(p, optim::LearningRate(lrs));
      },
      dynamic_manager(), 14);
  expect_device_decided_equals_host(
      "AdamWeightDecay",
      [lrs](std::vector<Tensor> p) {
        return std::make_shared<optim::AdamWeightDecay>(p, optim::LearningRate(lrs));
      },
      dynamic_manager());
  expect_device_decided_equals_host(
      "RMSProp",
      [lrs](std::vector<Tensor> p) {
        return std::make_shared<optim::RMSProp>(p, optim::LearningRate(lrs));
      },
      dynamic_manager());
}

// Booked lazily, the host queues a step without the previous outcomes when the hyper values cannot
// depend on them (Momentum at a constant rate: up to 4 steps unbooked), and books them first when
// they can (Adam's step count, a per-step rate: never more than the step just run). Either way,
// the same bits as the host deciding every step.
TEST(LossScale, DeviceDecidedBookedLazilyEqualsHostDecided) {
  struct Case {
    const char* what;
    MakeOptimizer make;
    int64_t want_most_unbooked;
  };
  std::vector<double> lrs;
  for (int i = 0; i < 16; ++i) lrs.push_back(1e-3 * (1 + 0.25 * i));
  const Case cases[] = {
      {"Momentum, constant lr",
       [](std::vector<Tensor> p) { return std::make_shared<optim::Momentum>(p, 1e-3, 0.9); }, 4},
      {"Momentum, per-step lr",
       [lrs](std::vector<Tensor> p) {
         return std::make_shared<optim::Momentum>(p, optim::LearningRate(lrs), 0.9);
       },
       1},
      {"Adam, constant lr",
       [](std::vector<Tensor> p) { return std::make_shared<optim::Adam>(p, 1e-3); }, 1},
      {"AdamWeightDecay, constant lr",  // no bias correction: its hyper values never change
       [](std::vector<Tensor> p) { return std::make_shared<optim::AdamWeightDecay>(p, 1e-3); }, 4},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    int64_t most = 0;
    const DecidedRun host = run_decided(Mode::Graph, true, c.make, dynamic_manager(), 12, true),
                     lazy = run_decided(Mode::Graph, false, c.make, dynamic_manager(), 12, true,
                                        &most);
    EXPECT_TRUE(lazy.on_device);
    EXPECT_EQ(most, c.want_most_unbooked);
    EXPECT_EQ(lazy.r.overflow, host.r.overflow);
    EXPECT_EQ(lazy.r.scale, host.r.scale);
    EXPECT_EQ(lazy.r.loss, host.r.loss);
    EXPECT_EQ(lazy.r.params, host.r.params);
    EXPECT_EQ(lazy.state, host.state);
    EXPECT_EQ(lazy.steps, host.steps);
    EXPECT_EQ(lazy.overflow_steps, host.overflow_steps);
    EXPECT_EQ(lazy.manager_scale, host.manager_scale);
    EXPECT_EQ(lazy.manager_scale, lazy.r.scale.back());
    EXPECT_EQ(lazy.mid_scale, host.mid_scale);
    EXPECT_EQ(host.mid_scale, std::ldexp(1.0, 122));
  }
}

// A Fixed manager that drops overflowed steps: its scale never changes and the steps are gated.
// 64 * 2^122 overflows float32 (every step skipped); 64 * 2^121 does not (every step applied).
TEST(LossScale, DeviceDecidedFixedScaleEqualsHostDecided) {
  for (int e : {122, 121})
    expect_device_decided_equals_host(
        e == 122 ? "Fixed 2^122" : "Fixed 2^121",
        [](std::vector<Tensor> p) { return std::make_shared<optim::Momentum>(p, 1e-3, 0.9); },
        [e] { return std::make_shared<amp::FixedLossScaleManager>(std::ldexp(1.0, e), true); }, 4,
        /*both_outcomes=*/false);
}

TEST(LossScale, UnscaledStepEqualsUnscaledTraining) {
  // Fixed scale 1024 with dropping: the same parameters as plain training, bit for bit.
  auto data_x = uniform({8, 3}, -1, 1), data_y = uniform({8, 1}, -1, 1);
  std::vector<std::vector<double>> finals;
  for (double scale : {0.0, 1024.0}) {
    set_seed(9);
    auto net = std::make_shared<nn::Dense>(3, 1);
    auto loss = std::make_shared<train::LossFn>(
        [](const Tensor& p, const Tensor& t) { return mean(square(p - t)); });
    auto with_loss = std::make_shared<train::WithLossCell>(net, loss);
    auto opt = std::make_shared<optim::Momentum>(net->trainable_params(), 0.1, 0.9);
    std::shared_ptr<train::TrainOneStepCell> step =
        scale == 0 ? std::make_shared<train::TrainOneStepCell>(with_loss, opt)
                   : std::make_shared<train::TrainOneStepWithLossScaleCell>(with_loss, opt, scale);
    for (int i = 0; i < 5; ++i) step->forward({data_x, data_y});
    finals.push_back(flat_params(*net));
  }
  EXPECT_EQ(finals[0], finals[1]);
}

// The float16 overflow dynamic scaling exists for: at 2^24 the float16 backward overflows; the
// scale drops, those steps are skipped, then training proceeds and the loss falls.
void fp16_recovery(Mode mode) {
  set_context({.mode = mode});
  set_seed(11);
  auto net = std::make_shared<nn::SequentialCell>(
      std::vector<nn::CellPtr>{std::make_shared<nn::Dense>(8, 16), std::make_shared<nn::ReLU>(),
                               std::make_shared<nn::Dense>(16, 3)});
  auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
      nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
  auto opt = std::make_shared<optim::Momentum>(net->trainable_params(), 0.1, 0.9);
  auto cell =
      amp::build_train_network(net, opt, loss, amp::Level::O2, nullptr, std::nullopt, kFloat16);
  auto step = std::dynamic_pointer_cast<train::TrainOneStepWithLossScaleCell>(cell);
  ASSERT_NE(step, nullptr) << "O2 defaults to DynamicLossScaleManager";
  EXPECT_EQ(step->loss_scale(), 16777216.0);
  Tensor x = uniform({32, 8}, -1, 1);
  Tensor y = argmax(matmul(x, uniform({8, 3}, -1, 1)), 1);  // a learnable labelling
  std::vector<double> losses;
  int first_clean = -1;
  for (int i = 0; i < 60; ++i) {
    auto out = step->forward({x, y});
    const bool overflow = out[1].item<bool>();
    if (!overflow && first_clean < 0) first_clean = i;
    if (!overflow) losses.push_back(out[0].item<double>());
  }
  EXPECT_GE(step->overflow_steps(), 3) << "2^24 must overflow float16 at first";
  EXPECT_EQ(first_clean, step->overflow_steps()) << "the overflows come first, then it recovers";
  EXPECT_LT(step->loss_scale(), 16777216.0);
  EXPECT_GE(step->loss_scale(), 1.0);
  for (const Tensor& p : net->trainable_params()) EXPECT_EQ(p.dtype(), kFloat32);
  ASSERT_GE(losses.size(), 20u);
  EXPECT_LT(losses.back(), 0.6 * losses.front())
      << "first " << losses.front() << " last " << losses.back();
  set_context({.mode = Mode::PyNative});
}

TEST(LossScale, Float16OverflowRecoversPyNative) { fp16_recovery(Mode::PyNative); }

// ---- build_train_network / Model / errors -------------------------------------------------------

TEST(BuildTrainNetwork, CellTypesFollowMindSpore) {
  auto make = [](amp::Level level, amp::LossScaleManagerPtr m) {
    auto net = std::make_shared<nn::Dense>(3, 2);
    auto opt = std::make_shared<optim::SGD>(net->trainable_params(), 0.1);
    return amp::build_train_network(net, opt, std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(),
                                    level, m);
  };
  using LS = train::TrainOneStepWithLossScaleCell;
  EXPECT_EQ(std::dynamic_pointer_cast<LS>(make(amp::Level::O0, nullptr)), nullptr);
  EXPECT_NE(std::dynamic_pointer_cast<LS>(make(amp::Level::O2, nullptr)), nullptr);
  EXPECT_EQ(std::dynamic_pointer_cast<LS>(make(amp::Level::O3, nullptr)), nullptr);
  EXPECT_NE(std::dynamic_pointer_cast<LS>(
                make(amp::Level::O3, std::make_shared<amp::FixedLossScaleManager>())),
            nullptr);
  auto plain = std::dynamic_pointer_cast<train::TrainOneStepCell>(
      make(amp::Level::O2, std::make_shared<amp::FixedLossScaleManager>(256, false)));
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(std::dynamic_pointer_cast<LS>(plain), nullptr);
  EXPECT_EQ(plain->sens(), 256);
  EXPECT_EQ(plain->optimizer()->loss_scale(), 256);
}

TEST(BuildTrainNetwork, ModelTakesAmpLevel) {
  auto net = std::make_shared<nn::Dense>(3, 2);
  auto opt = std::make_shared<optim::SGD>(net->trainable_params(), 0.1);
  train::Model model(net,
                     std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
                         nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true}),
                     opt, {"accuracy"}, nullptr, "O2", nullptr, std::nullopt, kBFloat16);
  EXPECT_NE(std::dynamic_pointer_cast<train::TrainOneStepWithLossScaleCell>(model.train_network()),
            nullptr);
  EXPECT_EQ(net->amp_policy()->dtype, kBFloat16);
  Tensor out = model.eval_network()->forward({uniform({4, 3}, -1, 1), zeros({4}, kInt32)})[1];
  EXPECT_EQ(out.dtype(), kFloat32);  // the O2 eval network casts outputs for the metrics
}

TEST(AmpErrors, BadLevelAndDtype) {
  const std::string lvl = error_of([] { amp::parse_level("O4"); });
  EXPECT_NE(lvl.find("'O4'"), std::string::npos) << lvl;
  EXPECT_NE(lvl.find("'O0', 'O1', 'O2', 'O3'"), std::string::npos) << lvl;
  EXPECT_EQ(amp::parse_level("o2"), amp::Level::O2);
  const std::string dt = error_of([] { amp::parse_dtype("fp8"); });
  EXPECT_NE(dt.find("'fp16'"), std::string::npos) << dt;
  EXPECT_NE(dt.find("'bf16'"), std::string::npos) << dt;
  EXPECT_EQ(amp::parse_dtype("bfloat16"), kBFloat16);
  EXPECT_EQ(amp::parse_dtype("FP16"), kFloat16);
  nn::Dense d(2, 2);
  const std::string t = error_of([&] { amp::auto_mixed_precision(d, amp::Level::O2, kFloat32); });
  EXPECT_NE(t.find("float16 or bfloat16"), std::string::npos) << t;
}

// The same in Graph mode: the float16 casts come from the insert_amp_casts pass, the loss-scale
// control flow from the host around the compiled step.
TEST(LossScale, Float16OverflowRecoversGraph) { fp16_recovery(Mode::Graph); }

// O2 keeps the activations the tape saves in 16 bits (BatchNorm included: its data input and
// output stay bfloat16), so a ResNet-18 forward (batch 32, training mode) holds at most 0.7x the
// float32 bytes. Measured as the allocator's bytes in use after the forward, minus before; the O2
// figure includes the bfloat16 copies of the weights (22 MB), which dominate at tiny batches.
size_t activation_bytes(amp::Level level) {
  set_seed(1);
  auto net = models::resnet18(10, models::ResNetStem::Cifar);
  amp::auto_mixed_precision(*net, level, kBFloat16);
  Tensor x = uniform({32, 3, 32, 32}, -1, 1);
  const size_t before = cpu_allocator().stats().bytes_in_use;
  Tensor loss = sum(cast((*net)(x), kFloat32));
  return cpu_allocator().stats().bytes_in_use - before;
}

TEST(AmpMemory, ResNet18O2ActivationsAtMost70PercentOfFloat32) {
  const size_t f32 = activation_bytes(amp::Level::O0), bf16 = activation_bytes(amp::Level::O2);
  std::printf(
      "ResNet-18 batch 32 saved activations: float32 %.1f MB, O2 bfloat16 %.1f MB (%.2fx)\n",
      f32 / 1e6, bf16 / 1e6, double(bf16) / double(f32));
  EXPECT_LE(double(bf16), 0.7 * double(f32));
}

// `spore train --amp/--amp-dtype`: a short O2 run logs the loss scale; bad values name the valid
// ones.
std::pair<int, std::string> run_cli(const std::string& args) {
  const std::string cmd =
      "OMP_NUM_THREADS=2 " + std::string(SPORE_BINARY_DIR) + "/spore " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out};
}

TEST(AmpCli, TrainFlagsAndErrors) {
  const std::string out_dir =
      (std::filesystem::temp_directory_path() / ("spore_amp_cli_" + std::to_string(getpid())))
          .string();
  auto [code, out] = run_cli(
      "train lenet --epochs 1 --limit 512 --eval-limit 256 --amp O2 --amp-dtype bf16 --out " +
      out_dir);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(
      out.find(
          "mixed precision: O2, bfloat16, DynamicLossScaleManager (initial scale 1.67772e+07)"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find(", loss scale "), std::string::npos) << out;
  std::filesystem::remove_all(out_dir);
  auto [c1, o1] = run_cli("train lenet --amp O4");
  EXPECT_EQ(c1, 1);
  EXPECT_NE(o1.find("'O0', 'O1', 'O2', 'O3'"), std::string::npos) << o1;
  auto [c2, o2] = run_cli("train lenet --amp O2 --amp-dtype int8");
  EXPECT_EQ(c2, 1);
  EXPECT_NE(o2.find("'fp16' (float16) or 'bf16' (bfloat16)"), std::string::npos) << o2;
}

// The vectorised float32 <-> float16/bfloat16 cast (contiguous) gives the same bits as the scalar
// conversion (a strided view takes the scalar path), special values included.
TEST(AmpCast, VectorisedCastMatchesScalarBits) {
  std::vector<float> v = {0.0f,     -0.0f,  1.0f,     -1.5f,     65504.0f,    65519.0f,
                          65520.0f, 1e6f,   -1e38f,   3.4e38f,   1e-8f,       6e-8f,
                          3e-5f,    1e-40f, INFINITY, -INFINITY, 1.00390625f, 1.01171875f};
  for (int i = 0; i < 1000; ++i) v.push_back(std::ldexp(float(i % 97) / 97.0f - 0.5f, i % 60 - 30));
  const int64_t n = int64_t(v.size());
  Tensor x = from_vector(v, {n});
  Tensor x2 = stack({x, x}, 1);  // (n, 2): column 0 is a strided view of x
  for (DType dt : {kFloat16, kBFloat16}) {
    std::vector<double> fast = cast(x, dt).to(kFloat64).to_vector<double>();
    std::vector<double> slow = cast(x2.select(1, 0), dt).to(kFloat64).to_vector<double>();
    ASSERT_EQ(fast.size(), slow.size());
    for (size_t i = 0; i < fast.size(); ++i)
      EXPECT_TRUE(fast[i] == slow[i] || (std::isnan(fast[i]) && std::isnan(slow[i])))
          << dtype_name(dt) << " " << v[i] << ": " << fast[i] << " vs " << slow[i];
    Tensor h = cast(x, dt);
    std::vector<double> back = cast(h, kFloat32).to_vector<double>();
    std::vector<double> back_slow =
        cast(stack({h, h}, 1).select(1, 0), kFloat32).to_vector<double>();
    for (size_t i = 0; i < back.size(); ++i)
      EXPECT_TRUE(back[i] == back_slow[i] || (std::isnan(back[i]) && std::isnan(back_slow[i])));
  }
  Tensor nan = cast(from_vector(std::vector<float>(40, NAN), {40}), kBFloat16);
  for (double e : nan.to(kFloat64).to_vector<double>()) EXPECT_TRUE(std::isnan(e));
}
}  // namespace
