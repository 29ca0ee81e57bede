// Op-table rows for the graph-internal oneDNN fused primitives conv2d_fused and matmul_fused
// (kNonDiff: no gradient check). References are plain loops on doubles written here.
#include <cmath>

#include "backends/cpu/ops/ops.h"
#include "op_table.h"

namespace spore::test {
namespace {
using ops::Attrs;
using ops::OpId;
using Vec = std::vector<double>;

double act_ref(const std::string& act, double x, double alpha, double beta) {
  if (act == "relu") return std::max(x, 0.0);
  if (act == "leaky_relu") return x > 0 ? x : alpha * x;
  if (act == "sigmoid") return 1 / (1 + std::exp(-x));
  if (act == "tanh") return std::tanh(x);
  if (act == "gelu") return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
  if (act == "silu") return x / (1 + std::exp(-x));
  if (act == "clamp") return std::min(std::max(x, alpha), beta);
  return x;
}

// Stride-1 convolution with symmetric padding p: y[n,o,i,j] = sum x[n,c,i+u-p,j+v-p] w[o,c,u,v].
Vec ref_conv(const Tensor& x, const Tensor& w, int64_t p, Shape& out) {
  const Shape xs = x.shape(), ws = w.shape();
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], O = ws[0], K = ws[2];
  const int64_t OH = H + 2 * p - K + 1, OW = W + 2 * p - K + 1;
  out = {N, O, OH, OW};
  Vec vx = values(x), vw = values(w), y(size_t(N * O * OH * OW), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j) {
          double s = 0;
          for (int64_t c = 0; c < C; ++c)
            for (int64_t u = 0; u < K; ++u)
              for (int64_t v = 0; v < K; ++v) {
                const int64_t ih = i + u - p, iw = j + v - p;
                if (ih >= 0 && ih < H && iw >= 0 && iw < W)
                  s += vx[size_t(((n * C + c) * H + ih) * W + iw)] *
                       vw[size_t(((o * C + c) * K + u) * K + v)];
              }
          y[size_t(((n * O + o) * OH + i) * OW + j)] = s;
        }
  return y;
}

Attrs post_attrs(bool bias, bool res, const std::string& act, double alpha = 0, double beta = 0) {
  return Attrs()
      .set("has_bias", bias)
      .set("has_residual", res)
      .set("act", act)
      .set("alpha", alpha)
      .set("beta", beta);
}

// scale: a folded BatchNorm's per-channel scale and shift (inputs after the bias).
OpCase conv_fused_case(std::string name, bool bias, bool res, std::string act, double alpha = 0,
                       double beta = 0, bool scale = false) {
  const Shape x{2, 3, 5, 5}, w{4, 3, 3, 3}, y{2, 4, 5, 5};
  OpCase c{.name = "conv2d_fused/" + name,
           .op = cpu::op::Conv2dFused(),
           .inputs = {{.shape = x}, {.shape = w, .lo = -0.5, .hi = 0.5}},
           .run = [=](const Tensors& t) -> Tensors {
             Attrs a = post_attrs(bias, res, act, alpha, beta).set("has_scale", scale);
             a.set("stride", std::vector<int64_t>{1, 1})
                 .set("padding", std::vector<int64_t>{1, 1, 1, 1});
             a.set("dilation", std::vector<int64_t>{1, 1}).set("groups", int64_t(1));
             return {ops::call1(cpu::op::Conv2dFused(), t, a)};
           },
           .reference = [=](const Tensors& t) -> Tensors {
             Shape ys;
             Vec r = ref_conv(t[0], t[1], 1, ys);
             size_t k = 2;
             Vec vb = bias ? values(t[k++]) : Vec();
             Vec vs = scale ? values(t[k++]) : Vec(), vh = scale ? values(t[k++]) : Vec();
             Vec vr = res ? values(t[k++]) : Vec();
             for (size_t i = 0; i < r.size(); ++i) {
               const size_t c = (i / 25) % 4;
               double v = r[i] + (bias ? vb[c] : 0.0);
               if (scale) v = v * vs[c] + vh[c];
               v += res ? vr[i] : 0.0;
               r[i] = act_ref(act, v, alpha, beta);
             }
             return {from_values(r, ys, kFloat64)};
           },
           .dtypes = {kFloat32, kFloat64, kBFloat16}};
  if (bias) c.inputs.push_back({.shape = {4}});
  if (scale) {
    c.inputs.push_back({.shape = {4}, .lo = 0.5, .hi = 1.5});
    c.inputs.push_back({.shape = {4}});
  }
  if (res) c.inputs.push_back({.shape = y});
  return c;
}

OpCase matmul_fused_case(std::string name, bool bias, bool res, std::string act, bool nc_b = false,
                         double alpha = 0, double beta = 0) {
  const int64_t M = 5, K = 7, N = 6;
  OpCase c{
      .name = "matmul_fused/" + name,
      .op = cpu::op::MatmulFused(),
      .inputs = {{.shape = {M, K}},
                 {.shape = nc_b ? Shape{K, N} : Shape{K, N}, .non_contiguous = nc_b}},
      .run = [=](const Tensors& t) -> Tensors {
        return {ops::call1(cpu::op::MatmulFused(), t, post_attrs(bias, res, act, alpha, beta))};
      },
      .reference = [=](const Tensors& t) -> Tensors {
        Vec a = values(t[0]), b = values(t[1]), r(size_t(M * N));
        Vec vb = bias ? values(t[2]) : Vec(), vr = res ? values(t[bias ? 3 : 2]) : Vec();
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            double s = 0;
            for (int64_t k = 0; k < K; ++k) s += a[size_t(i * K + k)] * b[size_t(k * N + j)];
            s += (bias ? vb[size_t(j)] : 0.0) + (res ? vr[size_t(i * N + j)] : 0.0);
            r[size_t(i * N + j)] = act_ref(act, s, alpha, beta);
          }
        return {from_values(r, {M, N}, kFloat64)};
      },
      .dtypes = {kFloat32, kFloat64, kBFloat16}};
  if (bias) c.inputs.push_back({.shape = {N}});
  if (res) c.inputs.push_back({.shape = {M, N}});
  return c;
}

SPORE_OP_CASES({
    conv_fused_case("bias_relu", true, false, "relu"),
    conv_fused_case("residual_relu", false, true, "relu"),
    conv_fused_case("bias_residual_sigmoid", true, true, "sigmoid"),
    conv_fused_case("bias_only_leaky", true, false, "leaky_relu", 0.2),
    conv_fused_case("bias_clamp", true, false, "clamp", -0.3, 0.4),
    conv_fused_case("scale_shift_relu", false, false, "relu", 0, 0, true),
    conv_fused_case("scale_shift_residual_relu", false, true, "relu", 0, 0, true),
    conv_fused_case("bias_scale_shift", true, false, "", 0, 0, true),
    matmul_fused_case("bias_relu", true, false, "relu"),
    matmul_fused_case("bias_relu_transposed_b", true, false, "relu", true),
    matmul_fused_case("bias_residual_gelu", true, true, "gelu"),
    matmul_fused_case("residual_tanh", false, true, "tanh"),
    matmul_fused_case("bias_silu", true, false, "silu"),
    matmul_fused_case("no_act", true, true, ""),
});

}  // namespace
}  // namespace spore::test
