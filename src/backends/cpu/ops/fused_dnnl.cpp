// Graph-internal fused primitives made by backends/cpu/passes/dnnl_fusion.cpp (and bn_folding.cpp's
// conv that then takes an activation): a convolution or matmul with its bias, a residual add and an
// activation done by one oneDNN primitive (post-ops). Kernels: backends/cpu/kernels/nn_conv.cpp and
// nn_matmul.cpp.
//
//   conv2d_fused(x, w[, bias][, scale, shift][, residual])
//       = act((conv2d(x, w) + bias) * scale + shift + residual)   (scale, shift: (C) per channel)
//   matmul_fused(a, b[, bias][, residual]) = act(a @ b + bias + residual)
//
// Attributes: the conv2d ones (stride, padding, dilation, groups) for conv2d_fused; has_bias,
// has_scale (conv2d_fused only: a folded BatchNorm), has_residual (which optional inputs are
// present), act ("" for none, relu, leaky_relu, sigmoid, tanh, gelu, gelu_tanh, silu, clamp) with
// alpha (leaky_relu's slope, clamp's min) and beta (clamp's max). Both are kNonDiff: the pass only
// builds them where no gradient flows through.
#include "backends/cpu/ops/rules.h"

namespace spore::cpu::rules {
using namespace ::spore::ops;
namespace {

// Checks the optional inputs after the first `base` ones against the attributes and the output.
void check_epilogue(const Metas& in, const Attrs& a, size_t base, const TensorMeta& out,
                    const Shape& bias_shape) {
  const bool has_bias = a.get_bool("has_bias", false), has_res = a.get_bool("has_residual", false);
  const bool has_scale = a.get_bool("has_scale", false);
  const size_t want = base + size_t(has_bias) + 2 * size_t(has_scale) + size_t(has_res);
  SPORE_CHECK(in.size() == want, "expected ", want, " inputs (has_bias=", has_bias,
              ", has_scale=", has_scale, ", has_residual=", has_res, "), got ", in.size());
  size_t i = base;
  auto per_channel = [&](const char* what) {
    SPORE_CHECK(in[i].shape == bias_shape, what, " must have shape ", shape_str(bias_shape),
                ", got ", shape_str(in[i].shape));
    SPORE_CHECK_TYPE(in[i].dtype == out.dtype, what, " is ", dtype_name(in[i].dtype),
                     " but the output is ", dtype_name(out.dtype));
    ++i;
  };
  if (has_bias) per_channel("bias");
  if (has_scale) {
    per_channel("scale");
    per_channel("shift");
  }
  if (has_res) {
    SPORE_CHECK(in[i].shape == out.shape, "residual must have the output's shape ",
                shape_str(out.shape), ", got ", shape_str(in[i].shape));
    SPORE_CHECK_TYPE(in[i].dtype == out.dtype, "residual is ", dtype_name(in[i].dtype),
                     " but the output is ", dtype_name(out.dtype));
  }
  static const char* kActs[] = {"",     "relu",      "leaky_relu", "sigmoid", "tanh",
                                "gelu", "gelu_tanh", "silu",       "clamp"};
  const std::string act = a.has("act") ? a.get_string("act") : std::string();
  bool known = false;
  for (const char* k : kActs) known = known || act == k;
  SPORE_CHECK(known, "unknown activation '", act,
              "'; expected relu, leaky_relu, sigmoid, tanh, gelu, gelu_tanh, silu or clamp");
}

}  // namespace

OpRules Conv2dFused() {
  return {
      .infer = [](const Metas& in, const Attrs& a) -> Metas {
        SPORE_CHECK(in.size() >= 2, "expected (x, w[, bias][, residual]), got ", in.size(),
                    " inputs");
        // The convolution itself is conv2d's (same checks and messages).
        const Metas conv = op_def(OpId::Conv2d).rules.infer({in[0], in[1]}, a);
        // Per-channel inputs have the logical O = w[0] (the output may be blocked: blocked_y).
        check_epilogue(in, a, 2, conv[0], {in[1].shape[0]});
        return conv;
      },
  };
}

OpRules MatmulFused() {
  return {
      .infer = [](const Metas& in, const Attrs& a) -> Metas {
        SPORE_CHECK(in.size() >= 2, "expected (a, b[, bias][, residual]), got ", in.size(),
                    " inputs");
        SPORE_CHECK(in[0].shape.size() >= 2 && in[1].shape.size() >= 2,
                    "operands of rank >= 2 expected, got ", shape_str(in[0].shape), " and ",
                    shape_str(in[1].shape));
        SPORE_CHECK(!a.get_bool("has_scale", false), "matmul_fused takes no scale/shift");
        const Metas mm = op_def(OpId::Matmul).rules.infer({in[0], in[1]}, Attrs());
        check_epilogue(in, a, 2, mm[0], {mm[0].shape.back()});
        return mm;
      },
  };
}

}  // namespace spore::cpu::rules
