// Optimizer update primitives: ApplyMomentum, ApplyAdam, ApplyRMSProp. Each updates its param and
// state tensors in place (kInplace: no outputs, no gradient). Attributes are listed in ops.def;
// the formulas are in backends/cpu/kernels/optim_update.cpp. Optimizers (src/optim/) call these
// through ops::call so one fused pass touches each parameter once per step.
// FusedApplyMomentum / FusedApplyAdam are their multi-tensor forms, made by the Graph-mode pass
// graph/passes/optimizer_fusion.cpp: one node updating every parameter that shares attributes.
#include <algorithm>
#include <string>

#include "ops/op.h"

namespace spore::ops {
namespace {

// inputs: param first, then state tensors, grad last; all the same shape and float dtype.
Metas infer_update(const Metas& in, const Attrs&) {
  const char* names[] = {"param", "state", "state", "grad"};
  SPORE_CHECK_TYPE(is_floating(in[0].dtype), "param must be floating point, got ", dtype_name(in[0].dtype));
  for (size_t i = 1; i < in.size(); ++i) {
    const char* n = i + 1 == in.size() ? "grad" : names[std::min<size_t>(i, 2)];
    SPORE_CHECK(in[i].shape == in[0].shape, n, " (input ", i, ") has shape ", shape_str(in[i].shape),
                " but param has shape ", shape_str(in[0].shape));
    SPORE_CHECK_TYPE(in[i].dtype == in[0].dtype, n, " (input ", i, ") is ", dtype_name(in[i].dtype),
                     " but param is ", dtype_name(in[0].dtype));
  }
  return {};
}

// inputs: `per` lists of n tensors each, ops.def's order (params..., then each state..., grads...):
// group t is (in[t], in[n + t], ..., in[(per-1) n + t]); each group obeys infer_update, and all
// groups share one float dtype (the kernel runs one typed loop over all of them).
template <int per>
Metas infer_fused_update(const Metas& in, const Attrs& attrs) {
  static_assert(per == 3 || per == 4);
  const char* layout = per == 3 ? "(params..., accums..., grads...)" : "(params..., ms..., vs..., grads...)";
  SPORE_CHECK(!in.empty() && in.size() % per == 0, "expected ", per, " lists of equal length ", layout,
              ", got ", in.size(), " inputs (not a positive multiple of ", per, ")");
  const size_t n = in.size() / per;
  for (size_t t = 0; t < n; ++t) {
    Metas group;
    for (size_t k = 0; k < size_t(per); ++k) group.push_back(in[k * n + t]);
    try {
      infer_update(group, attrs);
    } catch (const Error& e) {
      throw Error(e.kind(), "parameter " + std::to_string(t) + " of " + std::to_string(n) + ": " + e.what());
    }
    SPORE_CHECK_TYPE(in[t].dtype == in[0].dtype, "parameter ", t, " is ", dtype_name(in[t].dtype),
                     " but parameter 0 is ", dtype_name(in[0].dtype),
                     "; one fused update takes one dtype (make one node per dtype)");
  }
  return {};
}

}  // namespace

SPORE_DEFINE_OP(ApplyMomentum, {.infer = infer_update});
SPORE_DEFINE_OP(ApplyAdam, {.infer = infer_update});
SPORE_DEFINE_OP(ApplyRMSProp, {.infer = infer_update});
SPORE_DEFINE_OP(FusedApplyMomentum, {.infer = infer_fused_update<3>});
SPORE_DEFINE_OP(FusedApplyAdam, {.infer = infer_fused_update<4>});

}  // namespace spore::ops
