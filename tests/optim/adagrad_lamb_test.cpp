// Adagrad and Lamb (MindSpore's nn.Adagrad / nn.Lamb): Adagrad's trajectory against PyTorch's
// torch.optim.Adagrad (eps = 0, live or the committed fixture, see tests/nn/torch_reference.h) and
// against the rule written out as a loop (update_slots, weight decay, loss scale); Lamb against a
// float64 loop of MindSpore's formula (trust ratio and its edge cases, groups, the trust-ratio
// weight decay), in float64 and float32; state names and the errors.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "nn/torch_reference.h"
#include "spore/ops.h"
#include "spore/optim/optimizers.h"
#include "test_util.h"

using namespace spore;
using namespace spore::optim;

namespace {

double max_abs_diff(const Tensor& t, const std::vector<double>& want) {
  const std::vector<double> got = t.to(kFloat64).to_vector<double>();
  EXPECT_EQ(got.size(), want.size());
  double m = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i)
    m = std::max(m, std::abs(got[i] - want[i]));
  return m;
}

// Seeded values in [-1, 1) (a fixed congruential sequence: the references need no RNG).
std::vector<double> values(size_t n, uint64_t seed) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
    v[i] = double(seed >> 11) / double(1ULL << 53) * 2 - 1;
  }
  return v;
}

}  // namespace

TEST(Adagrad, MatchesPyTorch) {
  const auto& ref = torch_reference::get();
  double worst = 0;
  int n = 0;
  for (const auto& c : ref.doc["adagrad"]) {
    for (DType dt : {kFloat64, kFloat32}) {
      Tensor p = torch_reference::tensor_of(c["param"], dt);
      Adagrad opt({p}, c["lr"].get<double>(),
                  {.accum = c["accum"], .weight_decay = c["weight_decay"]});
      for (size_t s = 0; s < c["grads"].size(); ++s) {
        opt.step({torch_reference::tensor_of(c["grads"][s], dt)});
        const double d = max_abs_diff(p, c["after"][s]["values"].get<std::vector<double>>());
        EXPECT_LE(d, dt == kFloat64 ? 1e-14 : 1e-6) << dtype_name(dt) << " step " << s;
        if (dt == kFloat64) worst = std::max(worst, d);
      }
    }
    ++n;
  }
  std::printf("[adagrad] %d trajectories of 6 steps vs %s: max |diff| float64 %.3g\n", n,
              ref.source.c_str(), worst);
}

TEST(Adagrad, UpdateRuleSlotsDecayAndLossScale) {
  for (bool slots : {true, false}) {
    Tensor p = from_vector<double>({1.0, -2.0, 0.5}, {3});
    Adagrad opt({p}, 0.1,
                {.accum = 0.2, .update_slots = slots, .weight_decay = 0.05, .loss_scale = 4});
    std::vector<double> w{1.0, -2.0, 0.5}, acc(3, 0.2);
    for (int s = 0; s < 4; ++s) {
      const std::vector<double> g = values(3, uint64_t(s + 1));
      std::vector<double> scaled(3);
      for (size_t i = 0; i < 3; ++i) scaled[i] = g[i] * 4;  // the loss-scaled gradient
      opt.step({from_vector(scaled, {3})});
      for (size_t i = 0; i < 3; ++i) {
        const double gi = g[i] + 0.05 * w[i];
        if (slots) acc[i] += gi * gi;
        w[i] -= 0.1 * gi / std::sqrt(acc[i]);
      }
      EXPECT_LE(max_abs_diff(p, w), 1e-15) << "update_slots " << slots << " step " << s;
    }
    EXPECT_LE(max_abs_diff(opt.state()[0].second, acc), 1e-15);
    EXPECT_EQ(opt.state()[0].first, "accum.param0");
  }
}

namespace {

// MindSpore's Lamb for one parameter, in float64 (lamb.py's _update_run_op written as loops).
struct LambRef {
  double b1 = 0.9, b2 = 0.999, eps = 1e-6;
  std::vector<double> m, v;
  void step(int t, double lr, double wd, double trust_wd, std::vector<double>& p,
            const std::vector<double>& g) {
    const size_t n = p.size();
    if (m.empty()) m.assign(n, 0), v.assign(n, 0);
    std::vector<double> mh(n), vh(n);
    double w2 = 0, g2 = 0, r2 = 0;
    for (size_t i = 0; i < n; ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      mh[i] = m[i] / (1 - std::pow(b1, t));
      vh[i] = v[i] / (1 - std::pow(b2, t));
      w2 += p[i] * p[i];
      g2 += g[i] * g[i];
      const double r = mh[i] / std::sqrt(vh[i] + eps) + trust_wd * p[i];
      r2 += r * r;
    }
    const double w_norm = std::sqrt(w2), g_norm = std::sqrt(g2);
    double trust = w_norm > 0 && g_norm > 0 ? w_norm / std::sqrt(r2) : 1.0;
    trust = std::min(std::max(trust, 0.0), 10.0);
    for (size_t i = 0; i < n; ++i) {
      const double u = mh[i] / (std::sqrt(vh[i]) + eps) + wd * p[i];
      p[i] -= trust * lr * u;
    }
  }
};

}  // namespace

// Two parameters (a decayed weight and an undecayed gamma, as MindSpore's default filter groups
// them), 6 steps with a per-step lr, float64: equal to the loop to rounding; float32: to 1e-6.
TEST(Lamb, MatchesMindSporesFormula) {
  const LearningRate lr(std::vector<double>{0.02, 0.015, 0.01, 0.01, 0.005, 0.005});
  for (bool mindspore_trust : {false, true}) {
    for (DType dt : {kFloat64, kFloat32}) {
      const std::vector<double> w0 = values(12, 7), g0 = values(5, 8);
      Tensor w = from_vector(w0, {3, 4}).to(dt), gamma = from_vector(g0, {5}).to(dt);
      std::vector<ParamGroup> groups(2);
      groups[0].params = {w};
      groups[1].params = {gamma};
      groups[1].weight_decay = 0.0;
      LambOptions o{.weight_decay = 0.01};
      if (mindspore_trust) o.trust_ratio_weight_decay = 0.01;
      Lamb opt(groups, lr, o);
      std::vector<double> rw = w0, rg = g0;
      LambRef lw, lg;
      double worst = 0;
      for (int s = 0; s < 6; ++s) {
        const std::vector<double> gw = values(12, uint64_t(100 + s)),
                                  gg = values(5, uint64_t(200 + s));
        opt.step({from_vector(gw, {3, 4}).to(dt), from_vector(gg, {5}).to(dt)});
        lw.step(s + 1, lr.at(s), 0.01, 0.01, rw, gw);
        lg.step(s + 1, lr.at(s), 0.0, mindspore_trust ? 0.01 : 0.0, rg, gg);
        worst = std::max({worst, max_abs_diff(w, rw), max_abs_diff(gamma, rg)});
      }
      EXPECT_LE(worst, dt == kFloat64 ? 1e-14 : 1e-6)
          << dtype_name(dt) << " trust_ratio_weight_decay " << mindspore_trust;
      if (dt == kFloat64)
        std::printf("[lamb] 6 steps, %s trust-ratio decay, float64 vs the loop: max |diff| %.3g\n",
                    mindspore_trust ? "MindSpore's (one value)" : "per-parameter", worst);
      // The updates moved the parameters (and differently from plain Adam's step of ~lr).
      EXPECT_GT(max_abs_diff(w, w0), 1e-3);
    }
  }
}

// ||p|| = 0 or ||g|| = 0: the trust ratio is 1; a tiny g_norm_hat clips it at 10.
TEST(Lamb, TrustRatioEdgeCases) {
  {
    Tensor p = zeros({4}, kFloat64);
    Lamb opt({p}, 0.1);
    opt.step({from_vector<double>({1, -1, 0.5, 0}, {4})});
    // trust 1, m^ = g, v^ = g^2: update = g / (|g| + eps)
    EXPECT_NEAR(p.to_vector<double>()[0], -0.1 / (1 + 1e-6), 1e-15);
    EXPECT_EQ(p.to_vector<double>()[3], 0.0);
  }
  {
    Tensor p = from_vector<double>({3, 4}, {2});
    Lamb opt({p}, 0.1);
    opt.step({zeros({2}, kFloat64)});  // g = 0: no movement, trust 1
    EXPECT_EQ(p.to_vector<double>(), (std::vector<double>{3, 4}));
  }
  {
    // ||p|| = 5, g_norm_hat = ||g / (|g| + eps)|| ~ 1e-? : g tiny against eps, so the ratio
    // exceeds 10 and is clipped: the step is 10 * lr * update.
    Tensor p = from_vector<double>({3, 4}, {2});
    Lamb opt({p}, 0.1);
    const double g = 1e-9;
    opt.step({from_vector<double>({g, g}, {2})});
    const double mh = g, vh = g * g;
    const double u = mh / (std::sqrt(vh) + 1e-6);
    EXPECT_NEAR(p.to_vector<double>()[0], 3 - 10 * 0.1 * u, 1e-15);
  }
}

TEST(AdagradLamb, StateNamesHyperAndErrors) {
  Tensor p = zeros({2});
  Lamb lamb({p}, 0.01);
  const auto st = lamb.state();
  ASSERT_EQ(st.size(), 2u);
  EXPECT_EQ(st[0].first, "lamb_m.param0");
  EXPECT_EQ(st[1].first, "lamb_v.param0");
  // Both read their per-step scalars from the hyper tensor in Graph mode.
  EXPECT_TRUE(lamb.takes_hyper());
  EXPECT_TRUE(Adagrad({zeros({2})}, 0.01).takes_hyper());
  lamb.set_global_step(1);
  lamb.write_hyper();
  const std::vector<double> h = lamb.hyper_tensors()[0].to_vector<double>();
  EXPECT_EQ(h, (std::vector<double>{0.01, 1 - 0.9 * 0.9, 1 - 0.999 * 0.999}));
  // Lamb's norms are over whole parameters: no sharded rebuild.
  EXPECT_EQ(lamb.rebuild(single_group({zeros({2})})), nullptr);
  EXPECT_NE(Adagrad({zeros({2})}, 0.01).rebuild(single_group({zeros({2})})), nullptr);

  auto has = [](const std::string& msg, const std::string& needle) {
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  };
  has(test::error_of([] { Adagrad({zeros({2})}, 0.1, {.accum = -1}); }),
      "[Adagrad] accum (the accumulator's initial value) must be >= 0, got -1");
  has(test::error_of([] { Adagrad({zeros({2})}, 0.1, {.accum = 0, .update_slots = false}); }),
      "[Adagrad] with update_slots=false the accumulator stays at accum, which must then be > 0");
  has(test::error_of([] { Lamb({zeros({2})}, 0.1, {.beta1 = 1.0}); }),
      "[Lamb] beta1 must be in (0, 1), got 1");
  has(test::error_of([] { Lamb({zeros({2})}, 0.1, {.eps = 0}); }), "[Lamb] eps must be > 0");
  has(test::error_of([] { Lamb({zeros({2})}, 0.1, {.weight_decay = -0.1}); }),
      "weight_decay must be >= 0");
}
