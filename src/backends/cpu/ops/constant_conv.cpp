// Graph-internal convolutions on constant weights prepared when the graph compiles, made by
// backends/cpu/passes/constant_convs.cpp between blocked activations (nChw16c, or nChw8c: L = 16 or
// 8 below; the prepared weights keep 16-channel groups either way). Winograd F(2x2, 3x3) or
// F(4x4, 3x3) (backends/cpu/kernels/conv_winograd.h) for 3x3, stride-1 convolutions:
//
//   winograd_weights(w[, bias][, scale, shift]) -> (u, beta)   run once, when the graph compiles
//       u (E, O/16, C, 16): the transformed weights G w Gᵀ * scale, E = 16 (attribute tile 2, the
//       default) or 36 (tile 4); beta (O) = bias * scale + shift
//   conv2d_winograd(x, u, beta[, residual]) = act(conv2d(x, w) * scale + beta + residual)
//       x (N, C/L, H, W, L) -> (N, O/L, OH, OW, L); OH = H + pad_top + pad_bottom - 2
//
// and a direct convolution on packed weights (backends/cpu/kernels/conv_packed.h) for the others:
//
//   pack_conv_weights(w[, bias][, scale, shift]) -> (wp, beta)
//       wp (O/16, kh, kw, C, 16) = w * scale; beta as above
//   conv2d_packed(x, wp, beta[, residual]) = act(conv2d(x, w) * scale + beta + residual)
//       x (N, C/L, H, W, L) -> (N, O/L, OH, OW, L), OH = (H + pad_top + pad_bottom - kh) /
//       stride + 1; or x plain (N, C, H, W) of any C (a network's stem) -> y blocked in the
//       `lanes` attribute's L
//
// Attributes: has_bias, has_scale (the weight ops), tile (winograd_weights); padding (top, bottom,
// left, right), act ("", "relu", "silu" or "sigmoid"), has_residual and (conv2d_packed) stride.
// float32 only; all are kNonDiff.
#include "backends/cpu/kernels/conv_epilogue.h"
#include "backends/cpu/ops/rules.h"

namespace spore::cpu::rules {
using namespace ::spore::ops;
namespace {

void check_f32(const TensorMeta& m, const char* what) {
  SPORE_CHECK_TYPE(m.dtype == kFloat32, "constant-weight convolutions support float32 only, got ",
                   what, " of ", dtype_name(m.dtype));
}

// The weight ops' inputs (w[, bias][, scale, shift]) against has_bias / has_scale; w is 4-D with
// O a multiple of 16, and C too unless any_c (the packed conv also takes a plain input of any C).
void check_weight_inputs(const Metas& in, const Attrs& a, bool any_c = false) {
  const bool has_bias = a.get_bool("has_bias", false), has_scale = a.get_bool("has_scale", false);
  const size_t want = 1 + size_t(has_bias) + 2 * size_t(has_scale);
  SPORE_CHECK(in.size() == want, "expected ", want,
              " inputs (w[, bias][, scale, shift]) for has_bias=", has_bias,
              ", has_scale=", has_scale, ", got ", in.size());
  for (size_t i = 0; i < in.size(); ++i) check_f32(in[i], i == 0 ? "w" : "a per-channel input");
  const Shape& w = in[0].shape;
  SPORE_CHECK(w.size() == 4 && w[0] % 16 == 0 && w[1] >= 1 && (any_c || w[1] % 16 == 0),
              "expected a weight (O, C, kh, kw) with O ", any_c ? "" : "and C ",
              any_c ? "a multiple" : "multiples", " of 16, got shape ", shape_str(w));
  for (size_t i = 1; i < in.size(); ++i)
    SPORE_CHECK(in[i].shape == Shape{w[0]}, "per-channel inputs must have shape (", w[0], "), got ",
                shape_str(in[i].shape));
}

// The conv ops' x, beta, padding, act and residual; returns the output's shape for a kh x kw
// kernel with O outputs and the given stride.
Shape check_conv(const Metas& in, const Attrs& a, int64_t O, int64_t kh, int64_t kw, int64_t sh,
                 int64_t sw) {
  const bool has_res = a.get_bool("has_residual", false);
  const Shape& x = in[0].shape;
  SPORE_CHECK(in[2].shape == Shape{O}, "beta must have shape (", O, "), got ",
              shape_str(in[2].shape));
  const Shape pad = a.get_ints("padding");
  SPORE_CHECK(pad.size() == 4 && pad[0] >= 0 && pad[1] >= 0 && pad[2] >= 0 && pad[3] >= 0,
              "padding must be 4 non-negative values (top, bottom, left, right), got ",
              shape_str(pad));
  const int64_t hp = x[2] + pad[0] + pad[1], wp = x[3] + pad[2] + pad[3];
  SPORE_CHECK(hp >= kh && wp >= kw, "a ", kh, "x", kw, " kernel does not fit the padded input ",
              shape_str(x));
  const std::string act = a.has("act") ? a.get_string("act") : std::string();
  SPORE_CHECK(conv_act_known(act), "act must be \"\", \"relu\", \"silu\" or \"sigmoid\", got '",
              act, "'");
  // y's block: x's, or for a plain x (the packed conv's stem) the lanes attribute.
  const int64_t L = x.size() == 5 ? x[4] : a.get_int("lanes", 16);
  SPORE_CHECK(L == 16 || L == 8, "lanes must be 16 or 8, got ", L);
  const Shape y{x[0], O / L, (hp - kh) / sh + 1, (wp - kw) / sw + 1, L};
  if (has_res)
    SPORE_CHECK(in[3].shape == y, "residual must have the output's shape ", shape_str(y), ", got ",
                shape_str(in[3].shape));
  return y;
}

void check_conv_inputs(const Metas& in, const Attrs& a, const char* weights, bool plain_x = false) {
  const bool has_res = a.get_bool("has_residual", false);
  SPORE_CHECK(in.size() == 3 + size_t(has_res), "expected (x, ", weights, ", beta",
              has_res ? ", residual" : "", "), got ", in.size(), " inputs");
  for (size_t i = 0; i < in.size(); ++i)
    check_f32(in[i], i == 0 ? "x" : i == 1 ? weights : i == 2 ? "beta" : "residual");
  SPORE_CHECK((in[0].shape.size() == 5 && (in[0].shape[4] == 16 || in[0].shape[4] == 8)) ||
                  (plain_x && in[0].shape.size() == 4),
              "expected a blocked x (N, C/16, H, W, 16) or (N, C/8, H, W, 8)",
              plain_x ? " or a plain x (N, C, H, W)" : "", ", got shape ", shape_str(in[0].shape));
}

}  // namespace

OpRules WinogradWeights() {
  return {
      .infer = [](const Metas& in, const Attrs& a) -> Metas {
        check_weight_inputs(in, a);
        const Shape& w = in[0].shape;
        SPORE_CHECK(w[2] == 3 && w[3] == 3, "expected a 3x3 weight (O, C, 3, 3), got shape ",
                    shape_str(w));
        const int64_t m = a.get_int("tile", 2);
        SPORE_CHECK(m == 2 || m == 4, "expected tile 2 (F(2x2, 3x3)) or 4 (F(4x4, 3x3)), got ", m);
        return {{{(m + 2) * (m + 2), w[0] / 16, w[1], 16}, kFloat32}, {{w[0]}, kFloat32}};
      },
  };
}

OpRules Conv2dWinograd() {
  return {
      .infer = [](const Metas& in, const Attrs& a) -> Metas {
        check_conv_inputs(in, a, "u");
        const Shape &x = in[0].shape, &u = in[1].shape;
        SPORE_CHECK(
            u.size() == 4 && (u[0] == 16 || u[0] == 36) && u[3] == 16 && u[2] == x[1] * x[4],
            "expected u (16 or 36, O/16, C=", x[1] * x[4],
            ", 16) from winograd_weights, got shape ", shape_str(u));
        return {{check_conv(in, a, u[1] * 16, 3, 3, 1, 1), kFloat32}};
      },
  };
}

OpRules PackConvWeights() {
  return {
      .infer = [](const Metas& in, const Attrs& a) -> Metas {
        check_weight_inputs(in, a, /*any_c=*/true);
        const Shape& w = in[0].shape;
        SPORE_CHECK(w[2] >= 1 && w[3] >= 1 && w[2] * w[3] <= 64,
                    "expected a kernel of 1 to 64 taps, got shape ", shape_str(w));
        return {{{w[0] / 16, w[2], w[3], w[1], 16}, kFloat32}, {{w[0]}, kFloat32}};
      },
  };
}

OpRules Conv2dPacked() {
  return {
      .infer = [](const Metas& in, const Attrs& a) -> Metas {
        check_conv_inputs(in, a, "wp", /*plain_x=*/true);
        const Shape &x = in[0].shape, &wp = in[1].shape;
        const int64_t C = x.size() == 4 ? x[1] : x[1] * x[4];
        SPORE_CHECK(wp.size() == 5 && wp[4] == 16 && wp[3] == C, "expected wp (O/16, kh, kw, C=", C,
                    ", 16) from pack_conv_weights, got shape ", shape_str(wp));
        const Shape st = a.get_ints("stride");
        SPORE_CHECK(st.size() == 2 && st[0] >= 1 && st[1] >= 1,
                    "stride must be 2 positive values, got ", shape_str(st));
        return {{check_conv(in, a, wp[0] * 16, wp[1], wp[2], st[0], st[1]), kFloat32}};
      },
  };
}

}  // namespace spore::cpu::rules
