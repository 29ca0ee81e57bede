// The optimizer updates' hyper input (ops.def: a trailing float64 tensor of per-step scalars,
// hyper_input=true): in Graph mode the optimizer passes its learning rate (and Adam's step and
// eps) through one captured hyper tensor per lr schedule, written before every compiled step, so
// a schedule or Adam's bias correction no longer retraces. Checked here:
// - op level: each update with the hyper input == the same update with attributes, bit for bit
//   (float32 / float64, contiguous and strided), and the fused forms likewise;
// - the fusion takes updates sharing one hyper value and never merges two hyper tensors;
// - a traced graph reads the hyper tensor at run time (a new value changes the next run);
// - TrainOneStepCell in Graph mode: a 10-step cosine schedule (Momentum), Adam, AdamWeightDecay,
//   RMSProp, Adagrad, Lamb, per-group schedules: ONE compilation, losses and parameters equal to
//   PyNative (the DCE + fusion graph bitwise, the full pipeline to float32 rounding);
// - optimizers without a hyper input (SGD without momentum) still key the graph on the lr.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "graph/executor.h"
#include "graph/passes.h"
#include "graph/trace.h"
#include "models/mlp.h"
#include "spore/spore.h"

#include "graph/graph_test_util.h"

using namespace spore;
using graph::Graph;
using ops::Attrs;
using ops::OpId;

namespace {

struct PyNativeAfter {
  ~PyNativeAfter() { set_context({.mode = Mode::PyNative}); }
};

Tensor hyper(std::vector<double> v) { return from_vector(v, {int64_t(v.size())}); }

// Bitwise equality of two tensors' elements (same dtype), naming the first difference.
void expect_bits(const Tensor& a, const Tensor& b, const std::string& what) {
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  const Tensor x = a.contiguous(), y = b.contiguous();
  ASSERT_EQ(x.numel(), y.numel()) << what;
  const size_t sz = itemsize(x.dtype());
  const char *p = static_cast<const char*>(x.data_ptr()),
             *q = static_cast<const char*>(y.data_ptr());
  for (int64_t i = 0; i < x.numel(); ++i)
    ASSERT_EQ(std::memcmp(p + i * sz, q + i * sz, sz), 0)
        << what << ": element " << i << ": " << x.to(kFloat64).to_vector<double>()[size_t(i)]
        << " vs " << y.to(kFloat64).to_vector<double>()[size_t(i)];
}

struct UpdateCase {
  const char* name;
  OpId op;
  int nstate;
  Attrs fixed;                 // attributes the hyper input does not replace
  Attrs per_step;              // the attributes it replaces ...
  std::vector<double> values;  // ... and the same values as the hyper input, ops.def's order
};

std::vector<UpdateCase> update_cases() {
  return {
      {"momentum_nesterov_wd",
       OpId::ApplyMomentum,
       1,
       Attrs().set("momentum", 0.9).set("nesterov", true).set("weight_decay", 1e-2),
       Attrs().set("lr", 0.037),
       {0.037}},
      {"adam_l2_step5",
       OpId::ApplyAdam,
       2,
       Attrs()
           .set("beta1", 0.9)
           .set("beta2", 0.999)
           .set("weight_decay", 1e-3)
           .set("decoupled", false),
       Attrs()
           .set("lr", 3e-3)
           .set("step", int64_t(5))
           .set("eps", 1e-8 / std::sqrt(1 - std::pow(0.999, 5.0))),
       {3e-3, 5.0, 1e-8 / std::sqrt(1 - std::pow(0.999, 5.0))}},
      {"adamw_step2p62",
       OpId::ApplyAdam,
       2,
       Attrs().set("beta1", 0.8).set("beta2", 0.99).set("weight_decay", 0.1).set("decoupled", true),
       Attrs().set("lr", 1e-2).set("step", int64_t(1) << 62).set("eps", 1e-6),
       {1e-2, std::ldexp(1.0, 62), 1e-6}},
      {"rms_prop",
       OpId::ApplyRMSProp,
       2,
       Attrs().set("decay", 0.9).set("momentum", 0.5).set("eps", 1e-6),
       Attrs().set("lr", 0.02),
       {0.02}},
  };
}

// (param, states..., grad) from a seed; states >= 0 (RMSProp's mean square); a strided grad when
// asked (the kernels' strided path).
std::vector<Tensor> operands(int nstate, DType dt, bool strided, uint64_t seed) {
  set_seed(seed);
  std::vector<Tensor> t{randn({37, 5}).to(dt)};
  for (int k = 0; k < nstate; ++k) t.push_back(rand({37, 5}).to(dt));
  t.push_back(strided ? randn({5, 37}).to(dt).transpose(0, 1) : randn({37, 5}).to(dt));
  return t;
}

std::vector<Tensor> clone_mutable(const std::vector<Tensor>& t) {
  std::vector<Tensor> out;
  for (size_t i = 0; i + 1 < t.size(); ++i) out.push_back(t[i].clone());
  out.push_back(t.back());
  return out;
}

// A small classifier step: MLP 12 -> 32 -> 32 -> 4, sparse softmax cross-entropy.
struct Rig {
  std::shared_ptr<models::MLP> net;
  optim::OptimizerPtr opt;
  std::shared_ptr<train::TrainOneStepCell> step;
};
using MakeOpt = std::function<optim::OptimizerPtr(nn::Cell& net)>;
Rig make_rig(const MakeOpt& make_opt) {
  set_seed(0);
  Rig r;
  r.net = std::make_shared<models::MLP>(std::vector<int64_t>{12, 32, 32, 4});
  auto loss = std::make_shared<nn::SoftmaxCrossEntropyWithLogits>(
      nn::SoftmaxCrossEntropyWithLogitsOptions{.sparse = true, .reduction = "mean"});
  r.opt = make_opt(*r.net);
  r.step = std::make_shared<train::TrainOneStepCell>(
      std::make_shared<train::WithLossCell>(r.net, loss), r.opt);
  return r;
}

struct Batches {
  std::vector<Tensor> x, y;
};
Batches make_batches() {
  set_seed(7);
  Batches b;
  for (int i = 0; i < 3; ++i) {
    b.x.push_back(randn({8, 12}));
    b.y.push_back(randint(0, 4, {8}, kInt32));
  }
  return b;
}

std::vector<std::vector<float>> params_of(const nn::Cell& net) {
  std::vector<std::vector<float>> out;
  for (const Tensor& p : net.trainable_params()) out.push_back(p.to_vector<float>());
  return out;
}

// `steps` steps of r.step in `mode`; returns the losses.
std::vector<float> run_steps(Rig& r, const Batches& b, int steps, Mode mode) {
  PyNativeAfter restore;
  set_context({.mode = mode});
  std::vector<float> losses;
  for (int i = 0; i < steps; ++i)
    losses.push_back((*r.step)(b.x[size_t(i % 3)], b.y[size_t(i % 3)]).item<float>());
  return losses;
}

// The full Graph-mode pipeline against PyNative: its other fusions (matmul + bias, softmax +
// cross-entropy, elementwise chains) round differently from the op-by-op kernels, so equal to
// float32 rounding (the tolerance of tests/graph/optimizer_fusion_test.cpp), not bitwise; the
// DCE + fusion graph below is compared bitwise.

// Graph mode (full pipeline) against PyNative over `steps` steps of one optimizer: one
// compilation, then cache hits; losses (relative 1e-5) and parameters. Returns the graph rig.
Rig expect_one_graph_matching_pynative(const MakeOpt& make_opt, int steps, const char* what) {
  Batches b = make_batches();
  Rig g = make_rig(make_opt), e = make_rig(make_opt);
  const std::vector<float> lg = run_steps(g, b, steps, Mode::Graph),
                           le = run_steps(e, b, steps, Mode::PyNative);
  const JitStats st = g.step->jit_stats();
  EXPECT_EQ(st.traces, 1) << what;
  EXPECT_EQ(st.cache_hits, steps - 1) << what;
  for (size_t i = 0; i < lg.size(); ++i)
    EXPECT_NEAR(lg[i], le[i], 1e-5 * std::abs(le[i])) << what << ": loss of step " << i;
  test::expect_params_close(params_of(*g.net), params_of(*e.net), what);
  EXPECT_EQ(g.opt->global_step(), steps) << what;
  // The run really moved the parameters.
  EXPECT_NE(params_of(*g.net)[0], params_of(*make_rig(make_opt).net)[0]) << what;
  return g;
}

const optim::LrSchedule kCosine = optim::cosine_decay(1e-3, 0.1, 10);  // a new rate every step
// Adam-family steps are ~lr per element whatever the gradient: smaller rates keep the 10 steps
// out of the chaotic regime where float32 rounding differences grow step by step.
const optim::LrSchedule kCosineAdam = optim::cosine_decay(1e-5, 1e-3, 10);

}  // namespace

// ---- op level ---------------------------------------------------------------------------------

// Every update with the hyper input gives the bits it gives with the same values as attributes.
TEST(HyperInput, OpWithHyperEqualsAttributesBitwise) {
  for (const UpdateCase& c : update_cases())
    for (DType dt : {kFloat32, kFloat64})
      for (bool strided : {false, true}) {
        const std::string what =
            std::string(c.name) + "/" + dtype_name(dt) + (strided ? "/strided" : "");
        const std::vector<Tensor> src = operands(c.nstate, dt, strided, 3);
        std::vector<Tensor> a = clone_mutable(src), h = clone_mutable(src);
        Attrs with_attrs = c.fixed;
        for (const auto& [k, v] : c.per_step.items()) with_attrs.set(k.c_str(), v);
        ops::call(c.op, a, with_attrs);
        h.push_back(hyper(c.values));
        ops::call(c.op, h, Attrs(c.fixed).set("hyper_input", true));
        for (size_t i = 0; i + 1 < a.size(); ++i)
          expect_bits(a[i], h[i], what + " operand " + std::to_string(i));
        EXPECT_FALSE(std::memcmp(a[0].data_ptr(), src[0].data_ptr(), a[0].nbytes()) == 0)
            << what << ": no update";
      }
}

// The fused forms: (params..., states..., grads..., hyper) == one single update per parameter
// with attributes.
TEST(HyperInput, FusedWithHyperEqualsSingleWithAttributes) {
  for (const UpdateCase& c : update_cases()) {
    if (c.op == OpId::ApplyRMSProp) continue;  // no fused form
    const OpId fused =
        c.op == OpId::ApplyMomentum ? OpId::FusedApplyMomentum : OpId::FusedApplyAdam;
    std::vector<std::vector<Tensor>> singles, groups;
    for (int t = 0; t < 3; ++t) {
      const std::vector<Tensor> src = operands(c.nstate, kFloat32, t == 2, uint64_t(10 + t));
      singles.push_back(clone_mutable(src));
      groups.push_back(clone_mutable(src));
    }
    Attrs with_attrs = c.fixed;
    for (const auto& [k, v] : c.per_step.items()) with_attrs.set(k.c_str(), v);
    for (auto& s : singles) ops::call(c.op, s, with_attrs);
    ops::Tensors in;
    for (size_t k = 0; k < size_t(c.nstate) + 2; ++k)
      for (auto& g : groups) in.push_back(g[k]);
    in.push_back(hyper(c.values));
    ops::call(fused, in, Attrs(c.fixed).set("hyper_input", true));
    for (size_t t = 0; t < 3; ++t)
      for (size_t k = 0; k + 1 < singles[t].size(); ++k)
        expect_bits(singles[t][k], groups[t][k],
                    std::string(c.name) + " parameter " + std::to_string(t));
  }
}

TEST(HyperInput, BadHyperIsAClearError) {
  const std::vector<Tensor> t = operands(1, kFloat32, false, 1);
  auto err = [&](Tensor h) {
    try {
      ops::Tensors in = clone_mutable(t);
      in.push_back(h);
      ops::call(OpId::ApplyMomentum, in, Attrs().set("momentum", 0.9).set("hyper_input", true));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(
      err(hyper({0.1, 0.2, 0.3})).find("hyper (input 3) must have shape (1,) or (2,), got (3,)"),
      std::string::npos)
      << err(hyper({0.1, 0.2, 0.3}));
  EXPECT_NE(err(full({1}, 0.1)).find("hyper (input 3) must be float64, got float32"),
            std::string::npos)
      << err(full({1}, 0.1));
  // hyper_input set but no hyper operand: the count says what is missing.
  std::string m;
  try {
    ops::call(OpId::ApplyMomentum, clone_mutable(t),
              Attrs().set("momentum", 0.9).set("hyper_input", true));
  } catch (const Error& e) {
    m = e.what();
  }
  EXPECT_NE(m.find("expected 4 inputs (3 tensors and the hyper input"), std::string::npos) << m;
}

// attr gated: the hyper's element after the scalars is the gate. 0 leaves every operand's bits as
// they were; 1 gives the ungated update's bits. Single and fused forms, contiguous and strided.
TEST(HyperInput, GateZeroSkipsGateOneApplies) {
  for (const UpdateCase& c : update_cases())
    for (bool strided : {false, true})
      for (bool fused : {false, true}) {
        if (fused && c.op == OpId::ApplyRMSProp) continue;  // no fused form
        const OpId op = !fused                        ? c.op
                        : c.op == OpId::ApplyMomentum ? OpId::FusedApplyMomentum
                                                      : OpId::FusedApplyAdam;
        const std::string what =
            std::string(c.name) + (strided ? "/strided" : "") + (fused ? "/fused" : "");
        const std::vector<Tensor> src = operands(c.nstate, kFloat32, strided, 7);
        std::vector<Tensor> plain = clone_mutable(src), on = clone_mutable(src),
                            off = clone_mutable(src);
        plain.push_back(hyper(c.values));
        ops::call(op, plain, Attrs(c.fixed).set("hyper_input", true));
        for (auto [t, gate] : {std::pair{&on, 1.0}, std::pair{&off, 0.0}}) {
          std::vector<double> v = c.values;
          v.push_back(gate);
          t->push_back(hyper(v));
          ops::call(op, *t, Attrs(c.fixed).set("hyper_input", true).set("gated", true));
        }
        for (size_t i = 0; i + 1 < src.size(); ++i) {
          expect_bits(on[i], plain[i], what + " gate 1, operand " + std::to_string(i));
          expect_bits(off[i], src[i], what + " gate 0, operand " + std::to_string(i));
        }
      }
}

TEST(HyperInput, BadGateIsAClearError) {
  const std::vector<Tensor> t = operands(1, kFloat32, false, 1);
  auto err = [&](Attrs a, std::vector<double> h) {
    try {
      ops::Tensors in = clone_mutable(t);
      if (!h.empty()) in.push_back(hyper(h));
      ops::call(OpId::ApplyMomentum, in, a.set("momentum", 0.9));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string no_hyper = err(Attrs().set("gated", true), {});
  EXPECT_NE(no_hyper.find("gated=true needs hyper_input=true"), std::string::npos) << no_hyper;
  // Momentum's hyper is [lr] or [lr, momentum]; gated, one more: (2,) or (3,).
  const std::string size =
      err(Attrs().set("hyper_input", true).set("gated", true), {0.1, 0.9, 1, 1});
  EXPECT_NE(size.find("must have shape (2,) or (3,), got (4,); with gated=true the gate follows"),
            std::string::npos)
      << size;
}

// ---- graph level ------------------------------------------------------------------------------

// Three updates sharing hyper tensor A and one reading B (same value, another tensor): the three
// fuse (the fused node ends with A), B's stays single; the graph reads the hyper values at run
// time, and fused == unfused bitwise on both runs.
TEST(HyperInput, FusionTakesOneHyperValueAndReadsItAtRunTime) {
  const Attrs at = Attrs()
                       .set("momentum", 0.9)
                       .set("nesterov", false)
                       .set("weight_decay", 0.0)
                       .set("hyper_input", true);
  auto make = [&](std::vector<Tensor>& state, Tensor& ha, Tensor& hb) {
    state.clear();
    for (int64_t n : {37, 5, 3, 11}) {
      state.push_back(full({n}, 1.0));
      state.push_back(zeros({n}));
    }
    ha = hyper({0.5});
    hb = hyper({0.5});
  };
  std::vector<Tensor> s1, s2;
  Tensor ha1, hb1, ha2, hb2;
  make(s1, ha1, hb1);
  make(s2, ha2, hb2);
  auto fn_of = [&](std::vector<Tensor>& s, Tensor& ha, Tensor& hb) {
    return [&](const std::vector<Tensor>& a) {
      for (size_t i = 0; i < 4; ++i)
        ops::call(OpId::ApplyMomentum, {s[2 * i], s[2 * i + 1], a[i] * 1.0, i == 3 ? hb : ha}, at);
      return std::vector<Tensor>{s[0] + 0.0};
    };
  };
  set_seed(5);
  const std::vector<Tensor> grads{randn({37}), randn({5}), randn({3}), randn({11})};
  auto gf = graph::trace(fn_of(s1, ha1, hb1), grads);
  auto gu = graph::trace(fn_of(s2, ha2, hb2), grads);
  EXPECT_EQ(graph::fuse_optimizer(*gf), 3u);
  EXPECT_EQ(gf->count(OpId::FusedApplyMomentum), 1u);
  EXPECT_EQ(gf->count(OpId::ApplyMomentum), 1u);
  for (const auto& n : gf->nodes)
    if (n->op == OpId::FusedApplyMomentum) {
      ASSERT_EQ(n->inputs.size(), 3u * 3 + 1);
      EXPECT_TRUE(n->inputs.back()->tensor.is_same(ha1));
    }
  graph::verify(*gf);
  graph::Executor ef(std::shared_ptr<Graph>(std::move(gf))),
      eu(std::shared_ptr<Graph>(std::move(gu)));
  ef.run(grads);
  eu.run(grads);
  // Momentum from acc = 0: p = 1 - 0.5 g after one step.
  const std::vector<float> g0 = grads[0].to_vector<float>();
  std::vector<float> p0 = s1[0].to_vector<float>();
  for (size_t i = 0; i < g0.size(); ++i) EXPECT_FLOAT_EQ(p0[i], 1.0f - 0.5f * g0[i]) << i;
  // A new rate in the same tensors: the next run uses it (acc = 0.9 g + g, p -= 0.25 acc).
  for (Tensor* h : {&ha1, &hb1, &ha2, &hb2}) h->data<double>()[0] = 0.25;
  ef.run(grads);
  eu.run(grads);
  p0 = s1[0].to_vector<float>();
  for (size_t i = 0; i < g0.size(); ++i)
    EXPECT_NEAR(p0[i], 1.0f - 0.5f * g0[i] - 0.25f * 1.9f * g0[i], 1e-6) << i;
  for (size_t i = 0; i < s1.size(); ++i)
    expect_bits(s1[i], s2[i], "fused vs unfused " + std::to_string(i));
}

// The traced step reads the optimizer's hyper tensor: a DCE + fusion graph run over 10 steps
// (write_hyper() before each run) is bit-equal to PyNative, losses and parameters.
static void expect_traced_bit_equal(const MakeOpt& opt, OpId fused, const char* what) {
  Batches b = make_batches();
  Rig g = make_rig(opt), e = make_rig(opt);
  auto gr = graph::trace([&](const std::vector<Tensor>& a) { return g.step->forward(a); },
                         {b.x[0], b.y[0]}, "train_step");
  graph::dead_code_elimination(*gr);
  if (fused != OpId::ApplyRMSProp) {
    EXPECT_EQ(graph::fuse_optimizer(*gr), g.net->trainable_params().size()) << what;
    EXPECT_EQ(gr->count(fused), 1u) << what;
  }
  graph::Executor ex(std::shared_ptr<Graph>(std::move(gr)));
  std::vector<float> lg;
  for (int i = 0; i < 10; ++i) {
    g.opt->set_global_step(i);
    g.opt->write_hyper();
    lg.push_back(ex.run({b.x[size_t(i % 3)], b.y[size_t(i % 3)]}).at(0).item<float>());
  }
  const std::vector<float> le = run_steps(e, b, 10, Mode::PyNative);
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(lg[size_t(i)], le[size_t(i)]) << what << ": loss of step " << i;
  const auto pg = params_of(*g.net), pe = params_of(*e.net);
  for (size_t p = 0; p < pg.size(); ++p)
    ASSERT_EQ(std::memcmp(pg[p].data(), pe[p].data(), pg[p].size() * sizeof(float)), 0)
        << what << ": parameter " << p;
}

TEST(HyperInput, TracedStepsBitEqualToPyNative) {
  expect_traced_bit_equal(
      [](nn::Cell& n) {
        return std::make_shared<optim::Momentum>(n.trainable_params(), kCosine, 0.9);
      },
      OpId::FusedApplyMomentum, "cosine Momentum");
  expect_traced_bit_equal(
      [](nn::Cell& n) {
        return std::make_shared<optim::Adam>(n.trainable_params(), kCosineAdam,
                                             optim::AdamOptions{.weight_decay = 1e-4});
      },
      OpId::FusedApplyAdam, "cosine Adam");
  expect_traced_bit_equal(
      [](nn::Cell& n) {
        return std::make_shared<optim::AdamWeightDecay>(
            n.trainable_params(), kCosineAdam, optim::AdamWeightDecayOptions{.weight_decay = 1e-2});
      },
      OpId::FusedApplyAdam, "cosine AdamWeightDecay");
  expect_traced_bit_equal(
      [](nn::Cell& n) {
        return std::make_shared<optim::RMSProp>(n.trainable_params(), kCosine,
                                                optim::RMSPropOptions{.momentum = 0.5});
      },
      OpId::ApplyRMSProp, "cosine RMSProp");
}

// ---- TrainOneStepCell in Graph mode ----------------------------------------------------------

// The acceptance case: a per-step cosine schedule compiles ONE graph (it compiled one per rate,
// 10 here, when the rate was an attribute) and matches PyNative.
TEST(HyperInput, CosineScheduleMomentumCompilesOneGraph) {
  Rig g = expect_one_graph_matching_pynative(
      [](nn::Cell& n) {
        return std::make_shared<optim::Momentum>(n.trainable_params(), kCosine, 0.9);
      },
      10, "cosine Momentum");
  EXPECT_EQ(g.step->jit_stats().cache_size, 1u);
}

TEST(HyperInput, ConstantLrMomentumUnchanged) {
  expect_one_graph_matching_pynative(
      [](nn::Cell& n) {
        return std::make_shared<optim::Momentum>(
            n.trainable_params(), 0.05, 0.9,
            optim::MomentumOptions{.weight_decay = 1e-3, .nesterov = true});
      },
      10, "constant Momentum");
}

// Adam's step (bias correction) used to be an attribute: one graph per step.
TEST(HyperInput, AdamCompilesOneGraph) {
  expect_one_graph_matching_pynative(
      [](nn::Cell& n) {
        return std::make_shared<optim::Adam>(n.trainable_params(), 3e-3,
                                             optim::AdamOptions{.weight_decay = 1e-4});
      },
      10, "Adam");
  expect_one_graph_matching_pynative(
      [](nn::Cell& n) {
        return std::make_shared<optim::Adam>(n.trainable_params(), optim::warmup(1e-3, 4));
      },
      10, "Adam + warmup");
}

TEST(HyperInput, AdamWeightDecayAndRMSPropCompileOneGraph) {
  expect_one_graph_matching_pynative(
      [](nn::Cell& n) {
        return std::make_shared<optim::AdamWeightDecay>(
            n.trainable_params(), kCosineAdam, optim::AdamWeightDecayOptions{.weight_decay = 1e-2});
      },
      10, "AdamWeightDecay");
  expect_one_graph_matching_pynative(
      [](nn::Cell& n) {
        return std::make_shared<optim::RMSProp>(n.trainable_params(), kCosine,
                                                optim::RMSPropOptions{.momentum = 0.5});
      },
      10, "RMSProp");
}

// Adagrad and Lamb update with elementwise ops and norms that read the hyper tensor ([lr]; Lamb's
// [lr, 1 - beta1^t, 1 - beta2^t]): one graph for a whole cosine schedule, equal to PyNative.
TEST(HyperInput, AdagradAndLambCompileOneGraph) {
  expect_one_graph_matching_pynative(
      [](nn::Cell& n) {
        return std::make_shared<optim::Adagrad>(n.trainable_params(), kCosine,
                                                optim::AdagradOptions{.weight_decay = 1e-3});
      },
      10, "Adagrad");
  expect_one_graph_matching_pynative(
      [](nn::Cell& n) {
        return std::make_shared<optim::Lamb>(n.trainable_params(), kCosineAdam,
                                             optim::LambOptions{.weight_decay = 1e-2});
      },
      10, "Lamb");
}

// Two groups, one with its own schedule: two hyper tensors (two fused updates), one graph.
TEST(HyperInput, GroupScheduleGetsItsOwnHyperTensor) {
  const MakeOpt opt = [](nn::Cell& n) {
    std::vector<optim::ParamGroup> groups = optim::split_decay_groups(n.named_parameters());
    groups[1].lr =
        optim::LearningRate(optim::piecewise_constant({3, 6, 10}, {0.1, 0.05, 0.01}));  // biases
    return std::make_shared<optim::Momentum>(groups, kCosine, 0.9,
                                             optim::MomentumOptions{.weight_decay = 1e-3});
  };
  Rig g = expect_one_graph_matching_pynative(opt, 10, "per-group schedules");
  ASSERT_EQ(g.opt->hyper_tensors().size(), 2u);
  EXPECT_EQ(g.opt->hyper_tensors()[0].to_vector<double>(), (std::vector<double>{kCosine(9), 0.9}));
  EXPECT_EQ(g.opt->hyper_tensors()[1].to_vector<double>(), (std::vector<double>{0.01, 0.9}));
}

// Adam's hyper values: [lr, step + 1, eps / sqrt(1 - beta2^(step + 1))]; AdamWeightDecay's step
// is 2^62 (no bias correction, as MindSpore).
TEST(HyperInput, WriteHyperValues) {
  Tensor p = zeros({3});
  optim::Adam adam({p}, kCosine, optim::AdamOptions{.beta2 = 0.99, .eps = 1e-7});
  EXPECT_TRUE(adam.takes_hyper());
  EXPECT_TRUE(adam.hyper_tensors().empty());
  adam.set_global_step(4);
  adam.write_hyper();
  ASSERT_EQ(adam.hyper_tensors().size(), 1u);
  EXPECT_EQ(adam.hyper_tensors()[0].to_vector<double>(),
            (std::vector<double>{kCosine(4), 5.0, 1e-7 / std::sqrt(1 - std::pow(0.99, 5.0))}));
  optim::AdamWeightDecay adamw({p}, 0.01);
  adamw.write_hyper();
  EXPECT_EQ(adamw.hyper_tensors()[0].to_vector<double>()[1], std::ldexp(1.0, 62));
  EXPECT_FALSE(optim::SGD({p}, 0.1).takes_hyper());  // elementwise update: lr traced in
  EXPECT_TRUE(optim::SGD({p}, 0.1, optim::SGDOptions{.momentum = 0.9}).takes_hyper());
}

// SGD without momentum has no update primitive (elementwise ops): its lr stays in the graph, so
// the cell still keys the compiled step on it (one graph per rate) and stays correct.
TEST(HyperInput, PlainSgdScheduleStillKeysOnTheRate) {
  Batches b = make_batches();
  const MakeOpt opt = [](nn::Cell& n) {
    return std::make_shared<optim::SGD>(n.trainable_params(),
                                        optim::LearningRate(std::vector<double>{0.1, 0.05}));
  };
  Rig g = make_rig(opt), e = make_rig(opt);
  const std::vector<float> lg = run_steps(g, b, 4, Mode::Graph),
                           le = run_steps(e, b, 4, Mode::PyNative);
  EXPECT_EQ(g.step->jit_stats().traces, 2);
  for (size_t i = 0; i < lg.size(); ++i) EXPECT_NEAR(lg[i], le[i], 1e-5 * std::abs(le[i])) << i;
  test::expect_params_close(params_of(*g.net), params_of(*e.net), "plain SGD");
}

// PyTorch's param_groups[g]['lr'] = v and a momentum ramp between compiled steps (a warm-up): the
// values reach the graph through the hyper tensors, so ONE compilation serves them all, and the
// run matches PyNative with the same settings.
TEST(HyperInput, SetGroupLrAndMomentumDoNotRecompile) {
  PyNativeAfter restore;
  const MakeOpt make = [](nn::Cell& n) {
    return std::make_shared<optim::Momentum>(optim::split_decay_groups(n.named_parameters()), 0.05,
                                             0.9, optim::MomentumOptions{.nesterov = true});
  };
  Batches b = make_batches();
  std::vector<float> losses[2];
  Rig rigs[2] = {make_rig(make), make_rig(make)};
  for (int m = 0; m < 2; ++m) {
    set_context({.mode = m == 0 ? Mode::Graph : Mode::PyNative});
    Rig& r = rigs[m];
    for (int i = 0; i < 6; ++i) {
      r.opt->set_group_lr(0, 0.01 * (i + 1));
      r.opt->set_group_lr(1, 0.1 / (i + 1));
      r.opt->set_momentum(0.8 + 0.02 * i);
      losses[m].push_back(
          r.step->forward({b.x[size_t(i % 3)], b.y[size_t(i % 3)]})[0].item<float>());
    }
  }
  EXPECT_EQ(rigs[0].step->jit_stats().traces, 1);
  EXPECT_EQ(rigs[0].step->jit_stats().cache_hits, 5);
  for (size_t i = 0; i < losses[0].size(); ++i)
    EXPECT_NEAR(losses[0][i], losses[1][i], 1e-5 * std::abs(losses[1][i])) << "step " << i;
  test::expect_params_close(params_of(*rigs[0].net), params_of(*rigs[1].net), "set_group_lr");
}
