// Linear-algebra and neural-network primitives: matmul, conv2d (+ its two backward primitives),
// max/avg/adaptive pooling (+ backwards), batch norm (training / inference / backward) and layer
// norm (+ backward): shape inference, gradient rules and the public functions of spore/ops.h.
// Kernels: backends/cpu/kernels/nn_*.cpp (oneDNN for float32/bf16, plain loops for float64).
//
// To add an nn primitive: a row in ops.def, SPORE_DEFINE_OP here (infer checks every user error
// with the op's shapes in the message), a kernel, and rows in tests/ops/nn_cases.cpp.
#include <cmath>
#include <tuple>

#include "ops/blocked.h"
#include "ops/op.h"
#include "ops/sharding.h"
#include "spore/grad_mode.h"
#include "spore/ops.h"

namespace spore::ops {
namespace {

const Shape& shape4(const TensorMeta& m, const char* what) {
  SPORE_CHECK(m.shape.size() == 4, "expected ", what, " of rank 4 (N, C, H, W), got shape ",
              shape_str(m.shape));
  return m.shape;
}

void check_float(const TensorMeta& m, const char* what) {
  SPORE_CHECK_TYPE(is_floating(m.dtype), "expected a floating-point ", what, ", got ",
                   dtype_name(m.dtype));
}

// The Conv2d attributes, validated.
struct ConvGeom {
  int64_t sh, sw, pt, pb, pl, pr, dh, dw, groups;
};
ConvGeom conv_geom(const Attrs& a) {
  const auto st = a.get_ints("stride"), pad = a.get_ints("padding"), dil = a.get_ints("dilation");
  SPORE_CHECK(st.size() == 2 && pad.size() == 4 && dil.size() == 2,
              "stride (2 values), padding (4) and dilation (2) expected, got ", shape_str(st), ", ",
              shape_str(pad), ", ", shape_str(dil));
  ConvGeom g{st[0], st[1], pad[0], pad[1], pad[2], pad[3], dil[0], dil[1], a.get_int("groups", 1)};
  SPORE_CHECK(g.sh > 0 && g.sw > 0, "stride must be positive, got ", shape_str(st));
  SPORE_CHECK(g.dh > 0 && g.dw > 0, "dilation must be positive, got ", shape_str(dil));
  SPORE_CHECK(g.pt >= 0 && g.pb >= 0 && g.pl >= 0 && g.pr >= 0, "padding must be >= 0, got ",
              shape_str(pad));
  SPORE_CHECK(g.groups > 0, "groups must be positive, got ", g.groups);
  return g;
}

// Output shape of a convolution with input x (N, C, H, W) and weight w (O, C/groups, kh, kw).
Shape conv_out_shape(const Shape& x, const Shape& w, const ConvGeom& g) {
  const int64_t C = x[1], O = w[0];
  SPORE_CHECK(C % g.groups == 0 && O % g.groups == 0, "groups=", g.groups,
              " must divide both the input channels C=", C, " and the output channels O=", O,
              " (input ", shape_str(x), ", weight ", shape_str(w), ")");
  SPORE_CHECK(w[1] == C / g.groups, "input has C=", C, " channels but weight ", shape_str(w),
              " expects C/groups=", w[1], " (groups=", g.groups, "; input ", shape_str(x), ")");
  const int64_t ekh = g.dh * (w[2] - 1) + 1, ekw = g.dw * (w[3] - 1) + 1;
  const int64_t hp = x[2] + g.pt + g.pb, wp = x[3] + g.pl + g.pr;
  SPORE_CHECK(ekh <= hp && ekw <= wp, "kernel (", w[2], ", ", w[3], ") with dilation (", g.dh, ", ",
              g.dw, ") is larger than the padded input (", hp, ", ", wp, ") of input ",
              shape_str(x));
  return {x[0], O, (hp - ekh) / g.sh + 1, (wp - ekw) / g.sw + 1};
}

Attrs conv_base_attrs(const Attrs& a) {
  Attrs r;
  r.set("stride", a.get_ints("stride"));
  r.set("padding", a.get_ints("padding"));
  r.set("dilation", a.get_ints("dilation"));
  r.set("groups", a.get_int("groups", 1));
  return r;
}

// Pooling attributes: kernel_size, stride, padding (4), ceil_mode.
struct PoolGeom {
  int64_t kh, kw, sh, sw, pt, pb, pl, pr;
  bool ceil_mode;
};
PoolGeom pool_geom(const Attrs& a) {
  const auto k = a.get_ints("kernel_size"), s = a.get_ints("stride"), p = a.get_ints("padding");
  SPORE_CHECK(k.size() == 2 && s.size() == 2 && p.size() == 4,
              "kernel_size (2 values), stride (2) and padding (4) expected, got ", shape_str(k),
              ", ", shape_str(s), ", ", shape_str(p));
  PoolGeom g{k[0], k[1], s[0], s[1], p[0], p[1], p[2], p[3], a.get_bool("ceil_mode")};
  SPORE_CHECK(g.kh > 0 && g.kw > 0, "kernel_size must be positive, got ", shape_str(k));
  SPORE_CHECK(g.sh > 0 && g.sw > 0, "stride must be positive, got ", shape_str(s));
  SPORE_CHECK(g.pt >= 0 && g.pb >= 0 && g.pl >= 0 && g.pr >= 0, "padding must be >= 0, got ",
              shape_str(p));
  SPORE_CHECK(2 * std::max(g.pt, g.pb) <= g.kh && 2 * std::max(g.pl, g.pr) <= g.kw, "padding ",
              shape_str(p), " must be at most half the kernel size ", shape_str(k));
  return g;
}

int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p0, int64_t p1, bool ceil_mode) {
  const int64_t span = in + p0 + p1 - k;
  int64_t o = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
  // As PyTorch: with ceil_mode the last window must start inside the input or the leading pad.
  if (ceil_mode && (o - 1) * s >= in + p0) --o;
  return o;
}

Shape pool_out_shape(const Shape& x, const PoolGeom& g) {
  SPORE_CHECK(g.kh <= x[2] + g.pt + g.pb && g.kw <= x[3] + g.pl + g.pr, "pool kernel (", g.kh, ", ",
              g.kw, ") is larger than the padded input (", x[2] + g.pt + g.pb, ", ",
              x[3] + g.pl + g.pr, ") of input ", shape_str(x));
  return {x[0], x[1], pool_out(x[2], g.kh, g.sh, g.pt, g.pb, g.ceil_mode),
          pool_out(x[3], g.kw, g.sw, g.pl, g.pr, g.ceil_mode)};
}

Attrs with_input_shape(const Attrs& a, const Shape& s, const char* key = "input_shape") {
  Attrs r = a;
  r.set(key, s);
  return r;
}

// True unless g is known to be all zeros (the engine's cotangent for an unused output, e.g.
// BatchNorm's batch mean and invstd in training). Other symbolic tensors count as non-zero.
bool maybe_nonzero(const Tensor& g) {
  if (!g.defined() || is_zero_cotangent(g)) return false;
  if (g.is_symbolic()) return true;
  NoGradGuard ng;
  for (double v : g.to_vector<double>())
    if (v != 0) return true;
  return false;
}

DType stats_dtype(DType x) { return x == kFloat64 ? kFloat64 : kFloat32; }

// Shape that broadcasts a per-channel (C,) tensor against x (N, C, ...).
Shape channel_shape(const Tensor& x) {
  Shape s(size_t(x.dim()), 1);
  s[1] = x.size(1);
  return s;
}
Axes non_channel_axes(const Tensor& x) {
  Axes ax{0};
  for (int64_t d = 2; d < x.dim(); ++d) ax.push_back(d);
  return ax;
}

}  // namespace

// ---- matmul ------------------------------------------------------------------------------------

SPORE_DEFINE_OP(Matmul,
                {
                    .infer = [](const Metas& in, const Attrs&) -> Metas {
                      const Shape &a = in[0].shape, &b = in[1].shape;
                      SPORE_CHECK(a.size() >= 2 && b.size() >= 2,
                                  "expected operands of rank >= 2, got ", shape_str(a), " @ ",
                                  shape_str(b));
                      SPORE_CHECK_TYPE(in[0].dtype == in[1].dtype,
                                       "operands have different dtypes: ", dtype_name(in[0].dtype),
                                       " @ ", dtype_name(in[1].dtype));
                      check_float(in[0], "operand");
                      SPORE_CHECK(a.back() == b[b.size() - 2],
                                  "inner dimensions differ: ", shape_str(a), " @ ", shape_str(b));
                      Shape out = broadcast_shapes(Shape(a.begin(), a.end() - 2),
                                                   Shape(b.begin(), b.end() - 2));
                      out.push_back(a[a.size() - 2]);
                      out.push_back(b.back());
                      return {{out, in[0].dtype}};
                    },
                    .vjp = [](const VjpContext& c) -> Tensors {
                      const Tensor &a = c.in(0), &b = c.in(1), &g = c.g();
                      Tensor ga = c.needs(0) ? matmul(g, b.transpose(-1, -2)) : Tensor();
                      Tensor gb;
                      if (!c.needs(1)) {
                        // no gradient for b
                      } else if (b.dim() == 2 && a.dim() > 2) {
                        // (B.., M, K)^T @ (B.., M, N) summed over the batch is one (K, B*M) @ (B*M,
                        // N) product.
                        const int64_t K = a.size(-1), N = g.size(-1);
                        gb = matmul(a.reshape({-1, K}).transpose(0, 1), g.reshape({-1, N}));
                      } else {
                        gb = matmul(a.transpose(-1, -2), g);
                      }
                      return {ga, gb};
                    },
                });

// ---- conv2d ------------------------------------------------------------------------------------

// Blocked activations (ops/blocked.h): with blocked_x / blocked_y the input / output side is
// nChw16c, or nChw8c with the attribute lanes=8 (default 16); weights, biases and the input_shape /
// weight_shape attributes stay logical.
namespace {
int64_t conv_lanes(const Attrs& a) {
  const int64_t L = a.get_int("lanes", blocked::kLanes);
  SPORE_CHECK(blocked::valid_lanes(L), "the lanes attribute (the channel block of blocked_x / ",
              "blocked_y) must be 8 or 16, got ", L);
  return L;
}
Shape conv_blocked_shape(const Shape& nchw, const Attrs& a) {
  return blocked::shape(nchw, conv_lanes(a));
}
// The logical (N, C, H, W) of blocked activation m, which must carry C channels in L lanes.
Shape conv_unblocked(const TensorMeta& m, int64_t C, const Attrs& a, const char* what,
                     const char* flag) {
  const int64_t L = conv_lanes(a);
  SPORE_CHECK(m.shape.size() == 5 && m.shape[4] == L && m.shape[1] == blocked::blocks(C, L),
              "with ", flag, "=true and lanes=", L, " the ", what, " must be blocked (N, ceil(C/",
              L, ")=", blocked::blocks(C, L), ", H, W, ", L, ") for its C=", C,
              " channels, got shape ", shape_str(m.shape));
  return {m.shape[0], C, m.shape[2], m.shape[3]};
}
void check_blocked_dtype(const TensorMeta& m, const Attrs& a) {
  if (!a.get_bool("blocked_x", false) && !a.get_bool("blocked_y", false)) return;
  SPORE_CHECK_TYPE(m.dtype == kFloat32 || m.dtype == kBFloat16 || m.dtype == kFloat16,
                   "the blocked layout (blocked_x / blocked_y) supports float32, bfloat16 and "
                   "float16 only, got ",
                   dtype_name(m.dtype), "; run the op unblocked");
}
}  // namespace

SPORE_DEFINE_OP(
    Conv2d,
    {
        .infer = [](const Metas& in, const Attrs& a) -> Metas {
          SPORE_CHECK(in.size() == 2 || in.size() == 3, "expected (x, w) or (x, w, bias), got ",
                      in.size(), " inputs");
          const bool bx = a.get_bool("blocked_x", false), by = a.get_bool("blocked_y", false);
          Shape x;
          if (!bx) x = shape4(in[0], "input");
          SPORE_CHECK(in[1].shape.size() == 4,
                      "expected weight of rank 4 (O, C/groups, kh, kw), got shape ",
                      shape_str(in[1].shape));
          if (bx)
            x = conv_unblocked(in[0], in[1].shape[1] * conv_geom(a).groups, a, "input",
                               "blocked_x");
          check_float(in[0], "input");
          check_blocked_dtype(in[0], a);
          SPORE_CHECK_TYPE(in[1].dtype == in[0].dtype, "input is ", dtype_name(in[0].dtype),
                           " but weight is ", dtype_name(in[1].dtype));
          const Shape out = conv_out_shape(x, in[1].shape, conv_geom(a));
          if (in.size() == 3) {
            SPORE_CHECK(in[2].shape == Shape{out[1]}, "bias must have shape (", out[1],
                        ") for weight ", shape_str(in[1].shape), ", got ", shape_str(in[2].shape));
            SPORE_CHECK_TYPE(in[2].dtype == in[0].dtype, "input is ", dtype_name(in[0].dtype),
                             " but bias is ", dtype_name(in[2].dtype));
          }
          return {{by ? conv_blocked_shape(out, a) : out, in[0].dtype}};
        },
        .vjp = [](const VjpContext& c) -> Tensors {
          const Tensor &x = c.in(0), &w = c.in(1), &g = c.g();
          // Graph mode's layout pass makes blocked convolutions only in already differentiated
          // graphs.
          SPORE_ASSERT(
              !c.attrs.get_bool("blocked_x", false) && !c.attrs.get_bool("blocked_y", false),
              "conv2d with blocked_x / blocked_y has no gradient rule");
          const Attrs base = conv_base_attrs(c.attrs);
          Tensors r(c.inputs.size());
          // The network input's data gradient is the costly one nobody wants (conv1 of a CNN).
          if (c.needs(0))
            r[0] = call1(OpId::Conv2dBackwardData, {g, w}, with_input_shape(base, x.shape()));
          if (c.needs(1))
            r[1] = call1(OpId::Conv2dBackwardWeight, {g, x},
                         with_input_shape(base, w.shape(), "weight_shape"));
          if (c.inputs.size() == 3 && c.needs(2)) r[2] = sum(g, {0, 2, 3});
          return r;
        },
    });

SPORE_DEFINE_OP(
    Conv2dBackwardData,
    {
        .infer = [](const Metas& in, const Attrs& a) -> Metas {
          const Shape& xs = a.get_ints("input_shape");
          SPORE_CHECK(xs.size() == 4 && in[1].shape.size() == 4, "bad input_shape ", shape_str(xs));
          if (!a.get_bool("blocked_y", false)) {
            SPORE_CHECK(conv_out_shape(xs, in[1].shape, conv_geom(a)) == in[0].shape,
                        "dy has shape ", shape_str(in[0].shape), ", which no conv2d of input ",
                        shape_str(xs), " and weight ", shape_str(in[1].shape), " produces");
          } else {
            const Shape ys = conv_out_shape(xs, in[1].shape, conv_geom(a));
            SPORE_CHECK(in[0].shape == conv_blocked_shape(ys, a),
                        "with blocked_y=true dy must be the blocked ",
                        shape_str(conv_blocked_shape(ys, a)), " of the conv2d output ",
                        shape_str(ys), " (input ", shape_str(xs), ", weight ",
                        shape_str(in[1].shape), "), got shape ", shape_str(in[0].shape));
          }
          check_blocked_dtype(in[0], a);
          return {{a.get_bool("blocked_x", false) ? conv_blocked_shape(xs, a) : xs, in[0].dtype}};
        },
        // Differentiable because it is also the transposed convolution (conv_transpose2d,
        // nn::Conv2dTranspose). dx = conv2d^T(dy, w) is bilinear: <g, conv2d^T(dy, w)> =
        // <conv2d(g, w), dy>, so d/d(dy) = conv2d(g, w) and d/dw = conv2d_backward_weight(dy, g).
        .vjp = [](const VjpContext& c) -> Tensors {
          SPORE_ASSERT(
              !c.attrs.get_bool("blocked_x", false) && !c.attrs.get_bool("blocked_y", false),
              "conv2d_backward_data with blocked_x / blocked_y has no gradient rule");
          const Tensor &dy = c.in(0), &w = c.in(1), &g = c.g();
          const Attrs base = conv_base_attrs(c.attrs);
          Tensors r(2);
          if (c.needs(0)) r[0] = call1(OpId::Conv2d, {g, w}, base);
          if (c.needs(1))
            r[1] = call1(OpId::Conv2dBackwardWeight, {dy, g},
                         with_input_shape(base, w.shape(), "weight_shape"));
          return r;
        },
    });

SPORE_DEFINE_OP(Conv2dBackwardWeight,
                {
                    .infer = [](const Metas& in, const Attrs& a) -> Metas {
                      const Shape& ws = a.get_ints("weight_shape");
                      const bool bx = a.get_bool("blocked_x", false),
                                 by = a.get_bool("blocked_y", false);
                      if (!bx && !by) {
                        SPORE_CHECK(ws.size() == 4 && in[1].shape.size() == 4, "bad weight_shape ",
                                    shape_str(ws));
                        SPORE_CHECK(conv_out_shape(in[1].shape, ws, conv_geom(a)) == in[0].shape,
                                    "dy has shape ", shape_str(in[0].shape),
                                    ", which no conv2d of input ", shape_str(in[1].shape),
                                    " and weight ", shape_str(ws), " produces");
                      } else {
                        SPORE_CHECK(ws.size() == 4, "bad weight_shape ", shape_str(ws));
                        const Shape xs = bx ? conv_unblocked(in[1], ws[1] * conv_geom(a).groups, a,
                                                             "input x", "blocked_x")
                                            : shape4(in[1], "input x");
                        const Shape ys = conv_out_shape(xs, ws, conv_geom(a));
                        const Shape want = by ? conv_blocked_shape(ys, a) : ys;
                        SPORE_CHECK(in[0].shape == want, "dy has shape ", shape_str(in[0].shape),
                                    ", expected ", shape_str(want), (by ? " (blocked_y=true)" : ""),
                                    " for a conv2d of input ", shape_str(xs), " and weight ",
                                    shape_str(ws));
                        check_blocked_dtype(in[0], a);
                      }
                      return {{ws, in[0].dtype}};
                    },
                });

// ---- pooling -----------------------------------------------------------------------------------

// The `blocked` attribute (graph-internal, set by the blocked-layout pass): nChw16c / nChw8c
// activations as 5-D (N, ceil(C/L), H, W, L) tensors, L = 16 or 8 (ops/blocked.h); float32 only.
namespace {
void pool_bn_check_blocked(const TensorMeta& m, const char* op, const char* what) {
  SPORE_CHECK(blocked::lanes_of(m.shape) != 0, op, " with blocked=true expects ", what,
              " of blocked shape (N, ceil(C/L), H, W, L) with L = 8 or 16, got shape ",
              shape_str(m.shape));
  SPORE_CHECK_TYPE(m.dtype == kFloat32, op, ": blocked layout supports float32 only, got ", what,
                   " of ", dtype_name(m.dtype));
}
}  // namespace

SPORE_DEFINE_OP(
    MaxPool2d,
    {
        .infer = [](const Metas& in, const Attrs& a) -> Metas {
          check_float(in[0], "input");
          if (a.get_bool("blocked")) {  // (N, Cb, H, W, L) -> (N, Cb, OH, OW, L) twice
            pool_bn_check_blocked(in[0], "max_pool2d", "input");
            const Shape& x = in[0].shape;
            const int64_t L = x[4];
            // Optional `channels` (logical C): the kernel then zeroes y's padding lanes whatever x
            // holds.
            const int64_t C = a.get_int("channels", x[1] * L);
            SPORE_CHECK(C > 0 && blocked::blocks(C, L) == x[1],
                        "max_pool2d with blocked=true: channels=", C, " needs input of shape (N, ",
                        blocked::blocks(C, L), ", H, W, ", L, "), got ", shape_str(x));
            Shape out = pool_out_shape({x[0], x[1], x[2], x[3]}, pool_geom(a));
            out.push_back(L);
            return {{out, in[0].dtype}, {out, kInt64}};
          }
          const Shape out = pool_out_shape(shape4(in[0], "input"), pool_geom(a));
          return {{out, in[0].dtype}, {out, kInt64}};
        },
        .vjp = [](const VjpContext& c) -> Tensors {
          SPORE_CHECK(
              !c.attrs.get_bool("blocked"),
              "max_pool2d with blocked=true is graph-internal and has no "
              "gradient rule: differentiate the plain op, then run the blocked-layout pass");
          return {call1(OpId::MaxPool2dBackward, {c.g(0), c.out(1)},
                        with_input_shape(c.attrs, c.in(0).shape()))};
        },
    });

SPORE_DEFINE_OP(
    MaxPool2dBackward,
    {
        .infer = [](const Metas& in, const Attrs& a) -> Metas {
          SPORE_CHECK(in[0].shape == in[1].shape, "dy ", shape_str(in[0].shape), " and indices ",
                      shape_str(in[1].shape), " differ");
          SPORE_CHECK_TYPE(in[1].dtype == kInt64, "indices must be int64, got ",
                           dtype_name(in[1].dtype));
          if (a.get_bool(
                  "blocked")) {  // input_shape stays logical (N, C, H, W); dx is (N, Cb, H, W, L)
            pool_bn_check_blocked(in[0], "max_pool2d_backward", "dy");
            const int64_t L = in[0].shape[4];
            const Shape& xs = a.get_ints("input_shape");
            SPORE_CHECK(xs.size() == 4,
                        "max_pool2d_backward with blocked=true expects a logical input_shape "
                        "(N, C, H, W), got ",
                        shape_str(xs));
            Shape dys = pool_out_shape(xs, pool_geom(a));
            dys[1] = blocked::blocks(xs[1], L);
            dys.push_back(L);
            SPORE_CHECK(in[0].shape == dys,
                        "max_pool2d_backward with blocked=true: dy must have shape ",
                        shape_str(dys), " (the blocked pool output of logical input ",
                        shape_str(xs), "), got ", shape_str(in[0].shape));
            return {{{xs[0], blocked::blocks(xs[1], L), xs[2], xs[3], L}, in[0].dtype}};
          }
          return {{a.get_ints("input_shape"), in[0].dtype}};
        },
    });

SPORE_DEFINE_OP(AvgPool2d,
                {
                    .infer = [](const Metas& in, const Attrs& a) -> Metas {
                      check_float(in[0], "input");
                      return {{pool_out_shape(shape4(in[0], "input"), pool_geom(a)), in[0].dtype}};
                    },
                    .vjp = [](const VjpContext& c) -> Tensors {
                      return {call1(OpId::AvgPool2dBackward, {c.g()},
                                    with_input_shape(c.attrs, c.in(0).shape()))};
                    },
                });

SPORE_DEFINE_OP(AvgPool2dBackward,
                {
                    .infer = [](const Metas& in, const Attrs& a) -> Metas {
                      const Shape& xs = a.get_ints("input_shape");
                      SPORE_CHECK(pool_out_shape(xs, pool_geom(a)) == in[0].shape, "dy has shape ",
                                  shape_str(in[0].shape), ", which no avg_pool2d of input ",
                                  shape_str(xs), " produces");
                      return {{xs, in[0].dtype}};
                    },
                });

SPORE_DEFINE_OP(AdaptiveAvgPool2d, {
                                       .infer = [](const Metas& in, const Attrs& a) -> Metas {
                                         check_float(in[0], "input");
                                         const Shape& x = shape4(in[0], "input");
                                         const auto os = a.get_ints("output_size");
                                         SPORE_CHECK(os.size() == 2 && os[0] > 0 && os[1] > 0,
                                                     "output_size must be 2 positive values, got ",
                                                     shape_str(os));
                                         SPORE_CHECK(x[2] > 0 && x[3] > 0, "input ", shape_str(x),
                                                     " has an empty plane");
                                         return {{{x[0], x[1], os[0], os[1]}, in[0].dtype}};
                                       },
                                       .vjp = [](const VjpContext& c) -> Tensors {
                                         return {call1(OpId::AdaptiveAvgPool2dBackward, {c.g()},
                                                       with_input_shape(c.attrs, c.in(0).shape()))};
                                       },
                                   });

SPORE_DEFINE_OP(AdaptiveAvgPool2dBackward,
                {
                    .infer = [](const Metas& in, const Attrs& a) -> Metas {
                      return {{a.get_ints("input_shape"), in[0].dtype}};
                    },
                });

// ---- batch norm --------------------------------------------------------------------------------

namespace {
void check_channel_param(const TensorMeta& x, const TensorMeta& p, const char* what) {
  SPORE_CHECK(p.shape == Shape{x.shape[1]}, what, " must have shape (", x.shape[1], ") for input ",
              shape_str(x.shape), ", got ", shape_str(p.shape));
  check_float(p, what);
}
void check_bn_input(const TensorMeta& x) {
  SPORE_CHECK(x.shape.size() >= 2, "expected input of rank >= 2 (N, C, ...), got shape ",
              shape_str(x.shape));
  check_float(x, "input");
  int64_t n = 1;
  for (size_t d = 0; d < x.shape.size(); ++d) n *= d == 1 ? 1 : x.shape[d];
  SPORE_CHECK(n > 1, "training needs more than one value per channel, got input shape ",
              shape_str(x.shape));
}
}  // namespace

namespace {
// Blocked batch norm: x (N, Cb, H, W, L) with the logical C = gamma's length, Cb = ceil(C/L).
void check_bn_blocked(const char* op, const TensorMeta& x, const TensorMeta& gamma,
                      const TensorMeta& other, const char* other_name) {
  pool_bn_check_blocked(x, op, "input");
  SPORE_CHECK(gamma.shape.size() == 1, op, " with blocked=true: gamma must have shape (C), got ",
              shape_str(gamma.shape));
  const int64_t C = gamma.shape[0];
  const int64_t L = x.shape[4];
  SPORE_CHECK(x.shape[1] == blocked::blocks(C, L), op, " with blocked=true: gamma has C=", C,
              " channels, so the input must have shape (N, ", blocked::blocks(C, L), ", H, W, ", L,
              "), got ", shape_str(x.shape));
  SPORE_CHECK(other.shape == gamma.shape, op, ": ", other_name, " must have shape (", C,
              ") like gamma, got ", shape_str(other.shape));
  check_float(gamma, "gamma");
}
}  // namespace

SPORE_DEFINE_OP(
    BatchNorm,
    {
        .infer = [](const Metas& in, const Attrs& a) -> Metas {
          if (a.get_bool("blocked")) {  // (x_b, gamma (C), beta (C)) -> (y_b, mean (C), invstd (C))
            check_bn_blocked("batch_norm", in[0], in[1], in[2], "beta");
            const Shape& x = in[0].shape;
            SPORE_CHECK(x[0] * x[2] * x[3] > 1,
                        "training needs more than one value per channel, got blocked "
                        "input shape ",
                        shape_str(x));
            return {in[0], {in[1].shape, kFloat32}, {in[1].shape, kFloat32}};
          }
          check_bn_input(in[0]);
          check_channel_param(in[0], in[1], "gamma");
          check_channel_param(in[0], in[2], "beta");
          const Shape c{in[0].shape[1]};
          return {in[0], {c, stats_dtype(in[0].dtype)}, {c, stats_dtype(in[0].dtype)}};
        },
        .vjp = [](const VjpContext& c) -> Tensors {
          SPORE_CHECK(
              !c.attrs.get_bool("blocked"),
              "batch_norm with blocked=true is graph-internal and has no "
              "gradient rule: differentiate the plain op, then run the blocked-layout pass");
          const Tensor &x = c.in(0), &mean = c.out(1), &invstd = c.out(2);
          Tensors r = call(OpId::BatchNormBackward, {c.g(0), x, c.in(1), mean, invstd}, c.attrs);
          // Terms from uses of the batch statistics themselves (batch_norm_train's mean and
          // variance).
          const bool gm = maybe_nonzero(c.g(1)), gi = maybe_nonzero(c.g(2));
          if (gm || gi) {
            const double n = double(x.numel() / x.size(1));
            const Shape cs = channel_shape(x);
            Tensor extra;
            if (gm) extra = (c.g(1) / n).reshape(cs).to(x.dtype());
            if (gi) {
              // d invstd / dx = -invstd^3 (x - mean) / n
              Tensor k = (c.g(2) * invstd * invstd * invstd * (-1.0 / n)).reshape(cs).to(x.dtype());
              Tensor t = (x - mean.reshape(cs).to(x.dtype())) * k;
              extra = extra.defined() ? extra + t : t;
            }
            r[0] = r[0] + extra;
          }
          return r;
        },
    });

SPORE_DEFINE_OP(BatchNormBackward,
                {
                    .infer = [](const Metas& in, const Attrs& a) -> Metas {
                      SPORE_CHECK(in[0].shape == in[1].shape, "dy ", shape_str(in[0].shape),
                                  " and x ", shape_str(in[1].shape), " differ");
                      if (a.get_bool("blocked")) {  // (dy_b, x_b, gamma, mean, invstd) -> (dx_b,
                                                    // dgamma (C), dbeta (C))
                        check_bn_blocked("batch_norm_backward", in[1], in[2], in[3], "mean");
                        check_bn_blocked("batch_norm_backward", in[0], in[2], in[4], "invstd");
                      }
                      return {in[1], in[2], in[2]};
                    },
                });

SPORE_DEFINE_OP(BatchNormInference,
                {
                    .infer = [](const Metas& in, const Attrs&) -> Metas {
                      SPORE_CHECK(in[0].shape.size() >= 2,
                                  "expected input of rank >= 2 (N, C, ...), got shape ",
                                  shape_str(in[0].shape));
                      check_float(in[0], "input");
                      check_channel_param(in[0], in[1], "gamma");
                      check_channel_param(in[0], in[2], "beta");
                      check_channel_param(in[0], in[3], "mean");
                      check_channel_param(in[0], in[4], "var");
                      return {in[0]};
                    },
                    .vjp = [](const VjpContext& c) -> Tensors {
                      const Tensor &x = c.in(0), &g = c.g();
                      const DType d = x.dtype();
                      const Shape cs = channel_shape(x);
                      const Axes ax = non_channel_axes(x);
                      const double eps = c.attrs.get_float("eps");
                      Tensor invstd = rsqrt(c.in(4).to(d) + eps);  // (C)
                      Tensor gamma = c.in(1).to(d), mean = c.in(3).to(d);
                      Tensor xc = x - mean.reshape(cs);
                      Tensor gsum = sum(g, ax), gxc = sum(g * xc, ax);  // (C)
                      Tensor dx = c.needs(0) ? g * (gamma * invstd).reshape(cs) : Tensor();
                      Tensor dgamma = c.needs(1) ? gxc * invstd : Tensor();
                      Tensor dmean = c.needs(3) ? neg(gsum * gamma * invstd) : Tensor();
                      Tensor dvar =
                          c.needs(4) ? gxc * gamma * invstd * invstd * invstd * -0.5 : Tensor();
                      return {dx, dgamma, c.needs(2) ? gsum : Tensor(), dmean, dvar};
                    },
                });

// ---- layer norm --------------------------------------------------------------------------------

SPORE_DEFINE_OP(
    LayerNorm,
    {
        .infer = [](const Metas& in, const Attrs& a) -> Metas {
          const Shape& x = in[0].shape;
          const int64_t k = a.get_int("normalized_ndim");
          check_float(in[0], "input");
          SPORE_CHECK(k >= 1 && k <= int64_t(x.size()), "normalized_ndim=", k, " must be in [1, ",
                      x.size(), "] for input ", shape_str(x));
          const Shape norm(x.end() - k, x.end());
          SPORE_CHECK(in[1].shape == norm && in[2].shape == norm, "gamma ", shape_str(in[1].shape),
                      " and beta ", shape_str(in[2].shape), " must have the normalized shape ",
                      shape_str(norm), " of input ", shape_str(x));
          check_float(in[1], "gamma");
          check_float(in[2], "beta");
          const Shape outer(x.begin(), x.end() - k);
          return {in[0], {outer, stats_dtype(in[0].dtype)}, {outer, stats_dtype(in[0].dtype)}};
        },
        .vjp = [](const VjpContext& c) -> Tensors {
          const Tensor &x = c.in(0), &mean = c.out(1), &rstd = c.out(2);
          Tensors r = call(OpId::LayerNormBackward, {c.g(0), x, c.in(1), mean, rstd}, c.attrs);
          const bool gm = maybe_nonzero(c.g(1)), gi = maybe_nonzero(c.g(2));
          if (gm || gi) {
            const int64_t k = c.attrs.get_int("normalized_ndim");
            Shape rs(x.shape().begin(), x.shape().end() - k);
            int64_t d = 1;
            for (int64_t i = 0; i < k; ++i) {
              rs.push_back(1);
              d *= x.size(-1 - i);
            }
            Tensor extra;
            if (gm) extra = (c.g(1) / double(d)).reshape(rs).to(x.dtype());
            if (gi) {
              Tensor kk =
                  (c.g(2) * rstd * rstd * rstd * (-1.0 / double(d))).reshape(rs).to(x.dtype());
              Tensor t = (x - mean.reshape(rs).to(x.dtype())) * kk;
              extra = extra.defined() ? extra + t : t;
            }
            r[0] = r[0] + extra;
          }
          return r;
        },
    });

SPORE_DEFINE_OP(LayerNormBackward, {
                                       .infer = [](const Metas& in, const Attrs&) -> Metas {
                                         SPORE_CHECK(in[0].shape == in[1].shape, "dy ",
                                                     shape_str(in[0].shape), " and x ",
                                                     shape_str(in[1].shape), " differ");
                                         return {in[1], in[2], in[2]};
                                       },
                                   });

}  // namespace spore::ops

// ---- public functions ---------------------------------------------------------------------------
namespace spore {
using ops::Attrs;
using ops::OpId;

Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  SPORE_CHECK(a_in.dim() >= 1 && b_in.dim() >= 1, "[matmul] operands must have rank >= 1, got ",
              shape_str(a_in.shape()), " @ ", shape_str(b_in.shape()));
  const int64_t ka = a_in.size(-1), kb = b_in.dim() == 1 ? b_in.size(0) : b_in.size(-2);
  // Inside a sharded region shapes are the ranks' pieces: the sharding engine moves the operands
  // to matching cuts first, and the op's own inference checks the pieces it multiplies.
  SPORE_CHECK(ka == kb || ops::current_sharding() != nullptr,
              "[matmul] inner dimensions differ: ", shape_str(a_in.shape()), " @ ",
              shape_str(b_in.shape()));
  const DType t = promote_types(a_in.dtype(), b_in.dtype());
  Tensor a = cast(a_in, t), b = cast(b_in, t);
  // numpy: a 1-d left operand is a row vector, a 1-d right operand a column; both are stripped.
  if (a.dim() == 1) a = a.unsqueeze(0);
  if (b.dim() == 1) b = b.unsqueeze(1);
  Tensor y = ops::call1(OpId::Matmul, {a, b});
  if (b_in.dim() == 1) y = y.squeeze(-1);
  if (a_in.dim() == 1) y = y.squeeze(b_in.dim() == 1 ? -1 : -2);
  return y;
}

namespace {
std::vector<int64_t> four_pads(const std::vector<int64_t>& p, const char* op) {
  if (p.size() == 2) return {p[0], p[0], p[1], p[1]};
  if (p.size() == 1) return {p[0], p[0], p[0], p[0]};
  SPORE_CHECK(p.size() == 4, "[", op,
              "] padding takes 1, 2 (h, w) or 4 (top, bottom, left, right) "
              "values, got ",
              shape_str(p));
  return p;
}
std::vector<int64_t> two(const std::vector<int64_t>& v, const char* op, const char* what) {
  if (v.size() == 1) return {v[0], v[0]};
  SPORE_CHECK(v.size() == 2, "[", op, "] ", what, " takes 1 or 2 values, got ", shape_str(v));
  return v;
}
Attrs conv_attrs(const Conv2dOptions& o) {
  Attrs a;
  a.set("stride", two(o.stride, "conv2d", "stride"));
  a.set("padding", four_pads(o.padding, "conv2d"));
  a.set("dilation", two(o.dilation, "conv2d", "dilation"));
  a.set("groups", o.groups);
  return a;
}
Attrs pool_attrs(const Pool2dOptions& o, const char* op) {
  Attrs a;
  const auto k = two(o.kernel_size, op, "kernel_size");
  a.set("kernel_size", k);
  a.set("stride", o.stride.empty() ? k : two(o.stride, op, "stride"));
  a.set("padding", four_pads(o.padding, op));
  a.set("ceil_mode", o.ceil_mode);
  return a;
}
}  // namespace

Tensor conv2d(const Tensor& x, const Tensor& w, const Conv2dOptions& opt) {
  return ops::call1(OpId::Conv2d, {x, w}, conv_attrs(opt));
}
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dOptions& opt) {
  if (!bias.defined()) return conv2d(x, w, opt);
  return ops::call1(OpId::Conv2d, {x, w, bias}, conv_attrs(opt));
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Conv2dOptions& opt,
                        std::vector<int64_t> output_size) {
  SPORE_CHECK(x.dim() == 4 && w.dim() == 4,
              "[conv_transpose2d] expected input (N, C_in, H, W) and weight (C_in, C_out/groups, "
              "kh, kw), got shapes ",
              shape_str(x.shape()), " and ", shape_str(w.shape()));
  const Attrs a = conv_attrs(opt);
  const auto st = a.get_ints("stride"), pad = a.get_ints("padding"), dil = a.get_ints("dilation");
  // The smallest input of the transposed convolution that maps to x's (H, W).
  const int64_t h0 = (x.size(2) - 1) * st[0] - pad[0] - pad[1] + dil[0] * (w.size(2) - 1) + 1,
                w0 = (x.size(3) - 1) * st[1] - pad[2] - pad[3] + dil[1] * (w.size(3) - 1) + 1;
  if (output_size.empty()) output_size = {h0, w0};
  output_size = two(output_size, "conv_transpose2d", "output_size");
  SPORE_CHECK(output_size[0] >= h0 && output_size[0] < h0 + st[0] && output_size[1] >= w0 &&
                  output_size[1] < w0 + st[1],
              "[conv_transpose2d] output_size ", shape_str(output_size),
              " is not reachable: for input ", shape_str(x.shape()), ", weight ",
              shape_str(w.shape()), ", stride ", shape_str(st), " and padding ", shape_str(pad),
              " it must be in [", h0, ", ", h0 + st[0] - 1, "] x [", w0, ", ", w0 + st[1] - 1,
              "] (output_padding must be smaller than the stride)");
  SPORE_CHECK(w.size(0) == x.size(1), "[conv_transpose2d] input has ", x.size(1),
              " channels but weight ", shape_str(w.shape()), " expects C_in=", w.size(0));
  SPORE_CHECK(h0 > 0 && w0 > 0, "[conv_transpose2d] padding ", shape_str(pad),
              " leaves no output for input ", shape_str(x.shape()), " and weight ",
              shape_str(w.shape()));
  Attrs b = a;
  b.set("input_shape", Shape{x.size(0), w.size(1) * opt.groups, output_size[0], output_size[1]});
  return ops::call1(OpId::Conv2dBackwardData, {x, w}, b);
}

std::pair<Tensor, Tensor> scaled_dot_product_attention(const Tensor& q, const Tensor& k,
                                                       const Tensor& v, const Tensor& mask,
                                                       double dropout_p,
                                                       std::optional<double> scale) {
  SPORE_CHECK(q.dim() >= 2 && k.dim() >= 2 && v.dim() >= 2 && q.size(-1) == k.size(-1) &&
                  k.size(-2) == v.size(-2),
              "[scaled_dot_product_attention] expected q (..., L, E), k (..., S, E) and v (..., "
              "S, Ev), got shapes ",
              shape_str(q.shape()), ", ", shape_str(k.shape()), " and ", shape_str(v.shape()));
  SPORE_CHECK(dropout_p >= 0 && dropout_p < 1,
              "[scaled_dot_product_attention] dropout_p must be in [0, 1), got ", dropout_p);
  const double s = scale.value_or(1.0 / std::sqrt(double(q.size(-1))));
  Tensor scores = matmul(q * s, k.transpose(-1, -2));  // (..., L, S)
  if (mask.defined()) {
    SPORE_CHECK_TYPE(is_floating(mask.dtype()),
                     "[scaled_dot_product_attention] mask must be a float tensor added to the "
                     "scores, got ",
                     dtype_name(mask.dtype()),
                     "; turn a boolean mask into one with where(mask, -inf, 0) (or the reverse, "
                     "by your convention)");
    scores = scores + mask.to(scores.dtype());
  }
  Tensor weights = softmax(scores, -1);
  if (dropout_p > 0) weights = dropout(weights, dropout_p, true);
  return {matmul(weights, v), weights};
}

std::pair<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, const Pool2dOptions& opt) {
  auto r = ops::call(OpId::MaxPool2d, {x}, pool_attrs(opt, "max_pool2d"));
  return {r[0], r[1]};
}
Tensor max_pool2d(const Tensor& x, const Pool2dOptions& opt) {
  return max_pool2d_with_indices(x, opt).first;
}

Tensor avg_pool2d(const Tensor& x, const Pool2dOptions& opt) {
  Attrs a = pool_attrs(opt, "avg_pool2d");
  a.set("count_include_pad", opt.count_include_pad);
  return ops::call1(OpId::AvgPool2d, {x}, a);
}

Tensor adaptive_avg_pool2d(const Tensor& x, std::vector<int64_t> output_size) {
  return ops::call1(
      OpId::AdaptiveAvgPool2d, {x},
      Attrs().set("output_size", two(output_size, "adaptive_avg_pool2d", "output_size")));
}

std::tuple<Tensor, Tensor, Tensor> batch_norm_train(const Tensor& x, const Tensor& gamma,
                                                    const Tensor& beta, double eps) {
  auto r = ops::call(OpId::BatchNorm, {x, gamma, beta}, Attrs().set("eps", eps));
  const double n = double(x.numel() / x.size(1));
  // invstd = 1 / sqrt(var_biased + eps); the running statistics want the unbiased variance.
  Tensor var = (reciprocal(square(r[2])) - eps) * (n / (n - 1));
  return {r[0], r[1], var};
}

Tensor batch_norm_infer(const Tensor& x, const Tensor& gamma, const Tensor& beta,
                        const Tensor& mean, const Tensor& var, double eps) {
  return ops::call1(OpId::BatchNormInference, {x, gamma, beta, mean, var}, Attrs().set("eps", eps));
}

Tensor layer_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int64_t normalized_ndim,
                  double eps) {
  return ops::call(OpId::LayerNorm, {x, gamma, beta},
                   Attrs().set("normalized_ndim", normalized_ndim).set("eps", eps))[0];
}

}  // namespace spore
