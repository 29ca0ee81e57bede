// Optimizer update primitives: ApplyMomentum, ApplyAdam, ApplyRMSProp. Each updates its param and
// state tensors in place (kInplace: no outputs, no gradient). Attributes are listed in ops.def;
// the formulas are in backends/cpu/kernels/optim_update.cpp. Optimizers (src/optim/) call these
// through ops::call so one fused pass touches each parameter once per step.
// FusedApplyMomentum / FusedApplyAdam are their multi-tensor forms, made by the Graph-mode pass
// graph/passes/optimizer_fusion.cpp: one node updating every parameter that shares attributes
// (and hyper input: Graph mode passes the per-step lr / step as a float64 tensor, not attributes).
#include <algorithm>
#include <string>

#include "ops/op.h"

namespace spore::ops {
namespace {

// The optional trailing hyper input (attr hyper_input=true): float64 (k) of per-step scalars
// (ops.def: Momentum / RMSProp [lr], Adam [lr, step, eps]) read at run time.
// Momentum's may also be [lr, momentum] (k2 = 2): the momentum read at run time too.
void check_hyper(const TensorMeta& h, size_t k, size_t index, size_t k2, const Attrs& attrs) {
  // attr gated: one more element after the scalars, the gate (0: leave everything untouched).
  const bool gated = attrs.get_bool("gated", false);
  const size_t g = gated ? 1 : 0;
  SPORE_CHECK_TYPE(h.dtype == kFloat64, "hyper (input ", index, ") must be float64, got ",
                   dtype_name(h.dtype));
  SPORE_CHECK(h.shape == Shape{int64_t(k + g)} || (k2 != 0 && h.shape == Shape{int64_t(k2 + g)}),
              "hyper (input ", index, ") must have shape (", k + g, ",)",
              k2 ? " or (" + std::to_string(k2 + g) + ",)" : std::string(), ", got ",
              shape_str(h.shape),
              gated ? "; with gated=true the gate follows the per-step scalars"
                    : "; pass the per-step scalars in ops.def's order or drop hyper_input");
}

// inputs: param first, then state tensors, grad last; all the same shape and float dtype.
Metas check_update(const Metas& in) {
  const char* names[] = {"param", "state", "state", "grad"};
  SPORE_CHECK_TYPE(is_floating(in[0].dtype), "param must be floating point, got ",
                   dtype_name(in[0].dtype));
  for (size_t i = 1; i < in.size(); ++i) {
    const char* n = i + 1 == in.size() ? "grad" : names[std::min<size_t>(i, 2)];
    SPORE_CHECK(in[i].shape == in[0].shape, n, " (input ", i, ") has shape ",
                shape_str(in[i].shape), " but param has shape ", shape_str(in[0].shape));
    SPORE_CHECK_TYPE(in[i].dtype == in[0].dtype, n, " (input ", i, ") is ", dtype_name(in[i].dtype),
                     " but param is ", dtype_name(in[0].dtype));
  }
  return {};
}

// `per` operands (param, states..., grad), then hyper (k scalars) when hyper_input is set.
template <int per, int k, size_t k2 = 0>
Metas infer_update(const Metas& in, const Attrs& attrs) {
  const bool hyper = attrs.get_bool("hyper_input", false);
  SPORE_CHECK(hyper || !attrs.get_bool("gated", false),
              "gated=true needs hyper_input=true (the gate is the hyper input's last element)");
  const size_t want = size_t(per) + (hyper ? 1 : 0);
  SPORE_CHECK(in.size() == want, "expected ", want, " inputs (", per, " tensors",
              hyper ? " and the hyper input, as hyper_input=true" : "", "), got ", in.size());
  if (hyper) check_hyper(in.back(), size_t(k), want - 1, k2, attrs);
  return check_update(hyper ? Metas(in.begin(), in.end() - 1) : in);
}

// inputs: `per` lists of n tensors each, ops.def's order (params..., then each state..., grads...)
// and, with hyper_input, one hyper shared by all: group t is (in[t], in[n + t], ...,
// in[(per-1) n + t]); each group obeys check_update, and all groups share one float dtype (the
// kernel runs one typed loop over all of them).
template <int per, int k, size_t k2 = 0>
Metas infer_fused_update(const Metas& all, const Attrs& attrs) {
  static_assert(per == 3 || per == 4);
  const bool hyper = attrs.get_bool("hyper_input", false);
  SPORE_CHECK(hyper || !attrs.get_bool("gated", false),
              "gated=true needs hyper_input=true (the gate is the hyper input's last element)");
  const char* layout =
      per == 3 ? "(params..., accums..., grads...)" : "(params..., ms..., vs..., grads...)";
  SPORE_CHECK(
      !all.empty() && (all.size() - (hyper ? 1 : 0)) % per == 0 && all.size() > (hyper ? 1u : 0u),
      "expected ", per, " lists of equal length ", layout, hyper ? " and the hyper input" : "",
      ", got ", all.size(), " inputs");
  if (hyper) check_hyper(all.back(), size_t(k), all.size() - 1, k2, attrs);
  const Metas in = hyper ? Metas(all.begin(), all.end() - 1) : all;
  const size_t n = in.size() / per;
  for (size_t t = 0; t < n; ++t) {
    Metas group;
    for (size_t j = 0; j < size_t(per); ++j) group.push_back(in[j * n + t]);
    try {
      check_update(group);
    } catch (const Error& e) {
      throw Error(e.kind(),
                  "parameter " + std::to_string(t) + " of " + std::to_string(n) + ": " + e.what());
    }
    SPORE_CHECK_TYPE(in[t].dtype == in[0].dtype, "parameter ", t, " is ", dtype_name(in[t].dtype),
                     " but parameter 0 is ", dtype_name(in[0].dtype),
                     "; one fused update takes one dtype (make one node per dtype)");
  }
  return {};
}

}  // namespace

SPORE_DEFINE_OP(ApplyMomentum, {.infer = infer_update<3, 1, 2>});
SPORE_DEFINE_OP(ApplyAdam, {.infer = infer_update<4, 3>});
SPORE_DEFINE_OP(ApplyRMSProp, {.infer = infer_update<4, 1>});
SPORE_DEFINE_OP(FusedApplyMomentum, {.infer = infer_fused_update<3, 1, 2>});
SPORE_DEFINE_OP(FusedApplyAdam, {.infer = infer_fused_update<4, 3>});

}  // namespace spore::ops
