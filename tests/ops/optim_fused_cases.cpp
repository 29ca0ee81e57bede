// Op-table rows for the multi-tensor optimizer updates FusedApplyMomentum / FusedApplyAdam (made
// by the Graph-mode optimizer fusion). Inputs follow ops.def's layout: all params, then each state
// list, then all grads. Sizes are odd (37, 45, 3, 1) so the SIMD loops' padded tails run; one row
// has a strided gradient, which takes the kernel's strided path. References are plain loops on
// doubles, the same formulas as the single-tensor rows in nn_cases.cpp. The "hyper" rows pass the
// per-step scalars (lr; Adam's lr, step, eps) as the trailing float64 hyper input instead of
// attributes (hyper_input=true), as Graph mode does.
#include <cmath>

#include "op_table.h"

namespace spore::test {
namespace {
using ops::Attrs;
using ops::OpId;
using Vec = std::vector<double>;

// One update group's formula on doubles: (p, states, g) for one parameter.
using Ref = std::function<void(Vec& p, std::vector<Vec*>& s, const Vec& g)>;

OpCase fused_case(std::string name, OpId op, int nstate, std::vector<Shape> shapes, Attrs attrs,
                  Ref ref, bool strided_last_grad = false, std::vector<double> hyper = {}) {
  const size_t n = shapes.size(), per = size_t(nstate) + 2;
  if (!hyper.empty()) attrs.set("hyper_input", true);
  OpCase c{.name = name,
           .op = op,
           .run = [attrs, op, n, per, hyper](const Tensors& t) -> Tensors {
             Tensors cl;  // params and states cloned (updated in place); the grads as they are
             for (size_t i = 0; i < t.size(); ++i)
               cl.push_back(i < (per - 1) * n ? t[i].clone() : t[i]);
             if (!hyper.empty())
               cl.push_back(from_vector(hyper, {int64_t(hyper.size())}));  // float64 (k)
             ops::call(op, cl, attrs);
             cl.resize((per - 1) * n);
             return cl;
           },
           .reference = [ref, n, per](const Tensors& t) -> Tensors {
             std::vector<Vec> vals;
             for (size_t i = 0; i < (per - 1) * n; ++i) vals.push_back(values(t[i]));
             for (size_t j = 0; j < n; ++j) {
               std::vector<Vec*> st;
               for (size_t k = 1; k + 1 < per; ++k) st.push_back(&vals[k * n + j]);
               ref(vals[j], st, values(t[(per - 1) * n + j]));
             }
             Tensors r;
             for (size_t i = 0; i < vals.size(); ++i)
               r.push_back(from_values(vals[i], t[i].shape(), kFloat64));
             return r;
           },
           .grad_check = false};
  for (const Shape& s : shapes) c.inputs.push_back({.shape = s});  // params
  for (int k = 0; k < nstate; ++k)
    for (const Shape& s : shapes) c.inputs.push_back({.shape = s, .lo = 0, .hi = 1});  // states
  for (size_t j = 0; j < n; ++j)
    c.inputs.push_back(
        {.shape = shapes[j], .non_contiguous = strided_last_grad && j + 1 == n});  // grads
  return c;
}

Ref momentum_ref(double lr, double mom, bool nesterov, double wd) {
  return [=](Vec& p, std::vector<Vec*>& s, const Vec& g0) {
    Vec& acc = *s[0];
    for (size_t i = 0; i < p.size(); ++i) {
      const double g = g0[i] + wd * p[i];
      acc[i] = mom * acc[i] + g;
      p[i] -= nesterov ? lr * (g + mom * acc[i]) : lr * acc[i];
    }
  };
}

Ref adam_ref(double lr, double b1, double b2, double eps, double wd, int64_t step, bool decoupled) {
  return [=](Vec& p, std::vector<Vec*>& s, const Vec& g0) {
    Vec &m = *s[0], &v = *s[1];
    for (size_t i = 0; i < p.size(); ++i) {
      const double g = decoupled ? g0[i] : g0[i] + wd * p[i];
      if (decoupled) p[i] -= lr * wd * p[i];
      m[i] = b1 * m[i] + (1 - b1) * g;
      v[i] = b2 * v[i] + (1 - b2) * g * g;
      const double mh = m[i] / (1 - std::pow(b1, double(step))),
                   vh = v[i] / (1 - std::pow(b2, double(step)));
      p[i] -= lr * mh / (std::sqrt(vh) + eps);
    }
  };
}

Ref rms_prop_ref(double lr, double decay, double mom, double eps) {
  return [=](Vec& p, std::vector<Vec*>& s, const Vec& g) {
    Vec &ms = *s[0], &mo = *s[1];
    for (size_t i = 0; i < p.size(); ++i) {
      ms[i] = decay * ms[i] + (1 - decay) * g[i] * g[i];
      mo[i] = mom * mo[i] + lr * g[i] / std::sqrt(ms[i] + eps);
      p[i] -= mo[i];
    }
  };
}

SPORE_OP_CASES({
    // The single-tensor updates with every operand contiguous (their SIMD path; nn_cases.cpp's rows
    // have a strided grad). With one parameter the fused layout is theirs.
    fused_case("apply_momentum/contiguous_odd_size", OpId::ApplyMomentum, 1, {{5, 9}},
               Attrs()
                   .set("lr", 0.05)
                   .set("momentum", 0.8)
                   .set("nesterov", true)
                   .set("weight_decay", 0.01),
               momentum_ref(0.05, 0.8, true, 0.01)),
    fused_case("apply_adam/contiguous_odd_size", OpId::ApplyAdam, 2, {{37}},
               Attrs()
                   .set("lr", 0.01)
                   .set("beta1", 0.9)
                   .set("beta2", 0.999)
                   .set("eps", 1e-8)
                   .set("weight_decay", 0.1)
                   .set("step", int64_t(2)),
               adam_ref(0.01, 0.9, 0.999, 1e-8, 0.1, 2, false)),
    fused_case("fused_apply_momentum/three_params", OpId::FusedApplyMomentum, 1,
               {{37}, {5, 9}, {3}}, Attrs().set("lr", 0.1).set("momentum", 0.9),
               momentum_ref(0.1, 0.9, false, 0.0)),
    fused_case("fused_apply_momentum/nesterov_weight_decay_strided_grad", OpId::FusedApplyMomentum,
               1, {{1}, {4, 9}, {6, 5}},
               Attrs()
                   .set("lr", 0.05)
                   .set("momentum", 0.8)
                   .set("nesterov", true)
                   .set("weight_decay", 0.01),
               momentum_ref(0.05, 0.8, true, 0.01), /*strided_last_grad=*/true),
    fused_case("fused_apply_adam/l2", OpId::FusedApplyAdam, 2, {{37}, {5, 9}},
               Attrs()
                   .set("lr", 0.01)
                   .set("beta1", 0.9)
                   .set("beta2", 0.999)
                   .set("eps", 1e-8)
                   .set("weight_decay", 0.1)
                   .set("step", int64_t(1)),
               adam_ref(0.01, 0.9, 0.999, 1e-8, 0.1, 1, false)),
    fused_case("fused_apply_adam/decoupled_step3_strided_grad", OpId::FusedApplyAdam, 2,
               {{3, 7}, {19}, {4, 6}},
               Attrs()
                   .set("lr", 0.01)
                   .set("beta1", 0.8)
                   .set("beta2", 0.99)
                   .set("eps", 1e-6)
                   .set("weight_decay", 0.5)
                   .set("step", int64_t(3))
                   .set("decoupled", true),
               adam_ref(0.01, 0.8, 0.99, 1e-6, 0.5, 3, true), /*strided_last_grad=*/true),

    // The same updates with the hyper input: no lr / step / eps attributes, the values from it.
    fused_case("apply_momentum/hyper_lr", OpId::ApplyMomentum, 1, {{5, 9}},
               Attrs().set("momentum", 0.8).set("nesterov", true).set("weight_decay", 0.01),
               momentum_ref(0.05, 0.8, true, 0.01), false, {0.05}),
    fused_case("apply_adam/hyper_lr_step_eps", OpId::ApplyAdam, 2, {{37}},
               Attrs().set("beta1", 0.9).set("beta2", 0.999).set("weight_decay", 0.1),
               adam_ref(0.01, 0.9, 0.999, 1e-8, 0.1, 2, false), false, {0.01, 2.0, 1e-8}),
    fused_case("apply_rms_prop/hyper_lr_strided_grad", OpId::ApplyRMSProp, 2, {{3, 7}},
               Attrs().set("decay", 0.9).set("momentum", 0.5).set("eps", 1e-6),
               rms_prop_ref(0.01, 0.9, 0.5, 1e-6),
               /*strided_last_grad=*/true, {0.01}),
    fused_case("fused_apply_momentum/hyper_three_params", OpId::FusedApplyMomentum, 1,
               {{37}, {5, 9}, {3}}, Attrs().set("momentum", 0.9),
               momentum_ref(0.1, 0.9, false, 0.0), false, {0.1}),
    fused_case("fused_apply_adam/hyper_decoupled_step3_strided_grad", OpId::FusedApplyAdam, 2,
               {{3, 7}, {19}, {4, 6}},
               Attrs()
                   .set("beta1", 0.8)
                   .set("beta2", 0.99)
                   .set("weight_decay", 0.5)
                   .set("decoupled", true),
               adam_ref(0.01, 0.8, 0.99, 1e-6, 0.5, 3, true), /*strided_last_grad=*/true,
               {0.01, 3.0, 1e-6}),

    // Gated (attr gated: the hyper ends with the gate): 1 applies the update, 0 leaves every
    // operand as it was (the loss-scaled step that overflowed, decided on the device).
    fused_case("fused_apply_momentum/gate_open", OpId::FusedApplyMomentum, 1, {{37}, {5, 9}},
               Attrs().set("gated", true), momentum_ref(0.1, 0.9, false, 0.0), false,
               {0.1, 0.9, 1.0}),
    fused_case("fused_apply_momentum/gate_closed_strided_grad", OpId::FusedApplyMomentum, 1,
               {{37}, {5, 9}}, Attrs().set("gated", true),
               [](Vec&, std::vector<Vec*>&, const Vec&) {}, /*strided_last_grad=*/true,
               {0.1, 0.9, 0.0}),
    fused_case("apply_adam/gate_closed", OpId::ApplyAdam, 2, {{37}},
               Attrs().set("beta1", 0.9).set("beta2", 0.999).set("gated", true),
               [](Vec&, std::vector<Vec*>&, const Vec&) {}, false, {0.01, 2.0, 1e-8, 0.0}),
    fused_case("apply_rms_prop/gate_open", OpId::ApplyRMSProp, 2, {{3, 7}},
               Attrs().set("decay", 0.9).set("momentum", 0.5).set("eps", 1e-6).set("gated", true),
               rms_prop_ref(0.01, 0.9, 0.5, 1e-6), false, {0.01, 1.0}),
});

}  // namespace
}  // namespace spore::test
