// Optimizer update primitives: ApplyMomentum, ApplyAdam, ApplyRMSProp. Each updates its param and
// state tensors in place (kInplace: no outputs, no gradient). Attributes are listed in ops.def;
// the formulas are in backends/cpu/kernels/optim_update.cpp. Optimizers (src/optim/) call these
// through ops::call so one fused pass touches each parameter once per step.
#include <algorithm>

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

}  // namespace

SPORE_DEFINE_OP(ApplyMomentum, {.infer = infer_update});
SPORE_DEFINE_OP(ApplyAdam, {.infer = infer_update});
SPORE_DEFINE_OP(ApplyRMSProp, {.infer = infer_update});

}  // namespace spore::ops
