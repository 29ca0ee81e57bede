// Graph-internal Winograd F(2x2, 3x3) convolution (backends/cpu/kernels/conv_winograd.h), made by
// backends/cpu/passes/winograd.cpp for 3x3, stride-1 convolutions with constant weights between
// blocked (nChw16c) activations:
//
//   winograd_weights(w[, bias][, scale, shift]) -> (u, beta)   run once, when the graph compiles
//       u (16, O/16, C, 16): the transformed weights G w Gᵀ * scale; beta (O) = bias * scale + shift
//   conv2d_winograd(x, u, beta[, residual]) = act(conv2d(x, w) * scale + beta + residual)
//       x (N, C/16, H, W, 16) -> (N, O/16, OH, OW, 16); OH = H + pad_top + pad_bottom - 2
//
// Attributes: has_bias, has_scale (winograd_weights); padding (top, bottom, left, right), act
// ("" or "relu") and has_residual (conv2d_winograd). float32 only; both are kNonDiff.
#include "ops/op.h"

namespace spore::ops {
namespace {

void check_f32(const TensorMeta& m, const char* what) {
  SPORE_CHECK_TYPE(m.dtype == kFloat32, "winograd convolution supports float32 only, got ", what,
                   " of ", dtype_name(m.dtype));
}

}  // namespace

SPORE_DEFINE_OP(WinogradWeights, {
  .infer = [](const Metas& in, const Attrs& a) -> Metas {
    const bool has_bias = a.get_bool("has_bias", false), has_scale = a.get_bool("has_scale", false);
    const size_t want = 1 + size_t(has_bias) + 2 * size_t(has_scale);
    SPORE_CHECK(in.size() == want, "expected ", want, " inputs (w[, bias][, scale, shift]) for has_bias=",
                has_bias, ", has_scale=", has_scale, ", got ", in.size());
    const Shape& w = in[0].shape;
    SPORE_CHECK(w.size() == 4 && w[2] == 3 && w[3] == 3 && w[0] % 16 == 0 && w[1] % 16 == 0,
                "expected a 3x3 weight (O, C, 3, 3) with O and C multiples of 16, got shape ",
                shape_str(w));
    for (size_t i = 0; i < in.size(); ++i) check_f32(in[i], i == 0 ? "w" : "a per-channel input");
    for (size_t i = 1; i < in.size(); ++i)
      SPORE_CHECK(in[i].shape == Shape{w[0]}, "per-channel inputs must have shape (", w[0], "), got ",
                  shape_str(in[i].shape));
    return {{{16, w[0] / 16, w[1], 16}, kFloat32}, {{w[0]}, kFloat32}};
  },
});

SPORE_DEFINE_OP(Conv2dWinograd, {
  .infer = [](const Metas& in, const Attrs& a) -> Metas {
    const bool has_res = a.get_bool("has_residual", false);
    SPORE_CHECK(in.size() == 3 + size_t(has_res), "expected (x, u, beta", has_res ? ", residual" : "",
                "), got ", in.size(), " inputs");
    for (size_t i = 0; i < in.size(); ++i) check_f32(in[i], i == 0 ? "x" : i == 1 ? "u" : i == 2 ? "beta" : "residual");
    const Shape &x = in[0].shape, &u = in[1].shape;
    SPORE_CHECK(x.size() == 5 && x[4] == 16, "expected a blocked x (N, C/16, H, W, 16), got shape ",
                shape_str(x));
    SPORE_CHECK(u.size() == 4 && u[0] == 16 && u[3] == 16 && u[2] == x[1] * 16,
                "expected u (16, O/16, C=", x[1] * 16, ", 16) from winograd_weights, got shape ",
                shape_str(u));
    SPORE_CHECK(in[2].shape == Shape{u[1] * 16}, "beta must have shape (", u[1] * 16, "), got ",
                shape_str(in[2].shape));
    const Shape pad = a.get_ints("padding");
    SPORE_CHECK(pad.size() == 4 && pad[0] >= 0 && pad[1] >= 0 && pad[2] >= 0 && pad[3] >= 0,
                "padding must be 4 non-negative values (top, bottom, left, right), got ", shape_str(pad));
    const int64_t OH = x[2] + pad[0] + pad[1] - 2, OW = x[3] + pad[2] + pad[3] - 2;
    SPORE_CHECK(OH > 0 && OW > 0, "a 3x3 kernel does not fit the padded input ", shape_str(x));
    const std::string act = a.has("act") ? a.get_string("act") : std::string();
    SPORE_CHECK(act.empty() || act == "relu", "act must be \"\" or \"relu\", got '", act, "'");
    const Shape y{x[0], u[1], OH, OW, 16};
    if (has_res)
      SPORE_CHECK(in[3].shape == y, "residual must have the output's shape ", shape_str(y), ", got ",
                  shape_str(in[3].shape));
    return {{y, kFloat32}};
  },
});

}  // namespace spore::ops
