// Graph-internal conv + max-pool fusions (LeNet-5's first conv), made by the graph pass for the
// geometries the direct conv kernels take (backends/cpu/kernels/conv_direct.h):
//
//   conv2d_pool_fused(x, w[, bias]) = max_pool2d(conv2d_fused(x, w[, bias], act)) -> (y, indices)
//   conv2d_backward_weight_pooled(dy_pooled, indices, x)
//       = conv2d_backward_weight(max_pool2d_backward(dy_pooled, indices), x)
//
// Kernels: backends/cpu/kernels/conv_pool_fused.cpp and conv_pool_grad.cpp. Both are kNonDiff.
#include "backends/cpu/ops/rules.h"

namespace spore::cpu::rules {
using namespace ::spore::ops;

// ==== conv2d_pool_fused ==========================================================================
namespace {

// The max_pool2d attributes from the fused op's pool_-prefixed ones.
Attrs pool_attrs_of(const Attrs& a) {
  Attrs r;
  r.set("kernel_size", a.get_ints("pool_kernel_size", {2, 2}));
  r.set("stride", a.get_ints("pool_stride", {2, 2}));
  r.set("padding", a.get_ints("pool_padding", {0, 0, 0, 0}));
  r.set("ceil_mode", a.get_bool("pool_ceil_mode", false));
  return r;
}

}  // namespace

OpRules Conv2dPoolFused() {
  return {
      .infer = [](const Metas& in, const Attrs& a) -> Metas {
        SPORE_CHECK(in.size() == 2 || in.size() == 3, "expected (x, w[, bias]), got ", in.size(),
                    " inputs");
        for (size_t i = 0; i < in.size(); ++i)
          SPORE_CHECK_TYPE(in[i].dtype == kFloat32, "conv2d_pool_fused supports float32 only, got ",
                           i == 0   ? "x"
                           : i == 1 ? "w"
                                    : "bias",
                           " of ", dtype_name(in[i].dtype));
        SPORE_CHECK(in[0].shape.size() == 4, "expected x of rank 4 (N, C, H, W), got shape ",
                    shape_str(in[0].shape));
        SPORE_CHECK(a.get_int("groups", 1) == 1,
                    "conv2d_pool_fused takes groups=1 only, got groups=", a.get_int("groups", 1));
        SPORE_CHECK(!a.get_bool("has_scale", false) && !a.get_bool("has_residual", false),
                    "conv2d_pool_fused takes only a bias and relu (no scale/shift or residual)");
        const std::string act = a.has("act") ? a.get_string("act") : std::string();
        SPORE_CHECK(act.empty() || act == "relu",
                    "conv2d_pool_fused: act must be \"\" or \"relu\", got '", act, "'");
        // The conv (with the bias checks) is conv2d_fused's, the pool max_pool2d's: same messages.
        const Metas conv = op_def(op::Conv2dFused()).rules.infer(in, a);
        return op_def(OpId::MaxPool2d).rules.infer(conv, pool_attrs_of(a));
      },
  };
}

// ==== conv2d_backward_weight_pooled ==============================================================
// (dy_pooled (N, O, PH, PW) f32, indices (N, O, PH, PW) int64, x (N, C, H, W) f32) -> dw (O, C, kh,
// kw). Attributes: the conv's stride / padding / dilation / groups (1), weight_shape (O, C, kh, kw)
// and conv_output_shape (N, O, OH, OW), the plane the indices (h * OW + w, as max_pool2d's) point
// into.
OpRules Conv2dBackwardWeightPooled() {
  return {
      .infer = [](const Metas& in, const Attrs& a) -> Metas {
        const char* names[3] = {"dy_pooled", "indices", "x"};
        for (int i : {0, 2})
          SPORE_CHECK_TYPE(in[size_t(i)].dtype == kFloat32,
                           "conv2d_backward_weight_pooled supports float32 only, got ", names[i],
                           " of ", dtype_name(in[size_t(i)].dtype));
        SPORE_CHECK_TYPE(in[1].dtype == kInt64,
                         "indices must be int64 (max_pool2d's second output), got ",
                         dtype_name(in[1].dtype));
        SPORE_CHECK(in[0].shape.size() == 4,
                    "expected dy_pooled of rank 4 (N, O, PH, PW), got shape ",
                    shape_str(in[0].shape));
        SPORE_CHECK(in[1].shape == in[0].shape, "indices must have dy_pooled's shape ",
                    shape_str(in[0].shape), ", got ", shape_str(in[1].shape));
        SPORE_CHECK(in[2].shape.size() == 4, "expected x of rank 4 (N, C, H, W), got shape ",
                    shape_str(in[2].shape));
        SPORE_CHECK(a.get_int("groups", 1) == 1,
                    "conv2d_backward_weight_pooled takes groups=1 only, got groups=",
                    a.get_int("groups", 1));
        SPORE_CHECK(a.has("conv_output_shape"),
                    "missing attribute 'conv_output_shape' (N, O, OH, OW): the conv "
                    "output plane the pool's indices point into");
        const Shape ys = a.get_ints("conv_output_shape");
        SPORE_CHECK(ys.size() == 4, "conv_output_shape must be (N, O, OH, OW), got ",
                    shape_str(ys));
        SPORE_CHECK(!a.get_bool("blocked_x", false) && !a.get_bool("blocked_y", false),
                    "conv2d_backward_weight_pooled takes plain NCHW tensors only (no blocked_x / "
                    "blocked_y)");
        const Shape ws = a.get_ints("weight_shape");
        // The conv attribute checks (stride, padding, channels...) are conv2d's, with its messages.
        const Shape want = op_def(OpId::Conv2d).rules.infer({in[2], {ws, kFloat32}}, a)[0].shape;
        SPORE_CHECK(ys == want, "conv_output_shape ", shape_str(ys), " is not the output ",
                    shape_str(want), " of conv2d of x ", shape_str(in[2].shape),
                    " and weight_shape ", shape_str(ws), " with these stride / padding / dilation");
        const Shape& dp = in[0].shape;
        SPORE_CHECK(dp[0] == ys[0] && dp[1] == ys[1], "dy_pooled ", shape_str(dp),
                    " is no max_pool2d output of the conv output ", shape_str(ys),
                    " (N and O differ)");
        return {{ws, kFloat32}};
      },
  };
}

}  // namespace spore::cpu::rules
