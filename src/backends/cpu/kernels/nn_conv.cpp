// Conv2d, Conv2dBackwardData and Conv2dBackwardWeight on the CPU.
//   float32 / bfloat16: oneDNN direct convolution. Every layout is format_tag::any, so oneDNN picks
//     its blocked layouts; the cached Compiled entry reorders NCHW/OIHW user tensors in and out
//     (the reorder primitives are cached, the buffers come from the allocator). The bias, when
//     given, is added inside the forward primitive.
//   float16: through float32 when oneDNN has no implementation on this CPU.
//   float64: plain loops (used by the float64 gradient checks).
#include <cstring>

#include "backends/cpu/kernels/nn_util.h"
#include "backends/cpu/onednn/onednn.h"
#include "core/parallel.h"

namespace spore::cpu {
namespace {

struct Geom {
  int64_t N, C, H, W, O, kh, kw, OH, OW;
  int64_t sh, sw, pt, pb, pl, pr, dh, dw, G;
};

Geom geom(const Shape& x, const Shape& w, const Shape& y, const ops::Attrs& a) {
  const auto st = a.get_ints("stride"), pad = a.get_ints("padding"), dil = a.get_ints("dilation");
  return {x[0], x[1], x[2], x[3], w[0], w[2], w[3], y[2], y[3], st[0], st[1],
          pad[0], pad[1], pad[2], pad[3], dil[0], dil[1], a.get_int("groups", 1)};
}

enum class Pass { kForward, kBackwardData, kBackwardWeight };

onednn::CacheKey conv_key(Pass p, const Geom& g, DType t, bool bias) {
  onednn::CacheKey k;
  k.add(int64_t(ops::OpId::Conv2d)).add(int64_t(p)).add(int64_t(t)).add(bias);
  k.add({g.N, g.C, g.H, g.W, g.O, g.kh, g.kw, g.sh, g.sw, g.pt, g.pb, g.pl, g.pr, g.dh, g.dw, g.G});
  return k;
}

struct Descs {
  dnnl::memory::desc x_user, w_user, y_user, b_user, x_any, w_any, y_any;
  onednn::dims strides, dil, pad_l, pad_r;
};

Descs descs(const Geom& g, DType t) {
  const onednn::dt d = onednn::to_dnnl(t);
  const onednn::dims xd{g.N, g.C, g.H, g.W}, yd{g.N, g.O, g.OH, g.OW};
  const onednn::dims wd = g.G == 1 ? onednn::dims{g.O, g.C, g.kh, g.kw}
                                   : onednn::dims{g.G, g.O / g.G, g.C / g.G, g.kh, g.kw};
  Descs r;
  r.x_user = {xd, d, onednn::tag::nchw};
  r.y_user = {yd, d, onednn::tag::nchw};
  r.w_user = {wd, d, g.G == 1 ? onednn::tag::oihw : onednn::tag::goihw};
  r.b_user = {{g.O}, d, onednn::tag::x};
  r.x_any = {xd, d, onednn::tag::any};
  r.y_any = {yd, d, onednn::tag::any};
  r.w_any = {wd, d, onednn::tag::any};
  r.strides = {g.sh, g.sw};
  r.dil = {g.dh - 1, g.dw - 1};  // oneDNN counts dilation from 0
  r.pad_l = {g.pt, g.pl};
  r.pad_r = {g.pb, g.pr};
  return r;
}

dnnl::convolution_forward::primitive_desc fwd_pd(const Descs& s, bool bias) {
  using cf = dnnl::convolution_forward;
  auto d = bias ? cf::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                           s.x_any, s.w_any, s.b_user, s.y_any, s.strides, s.dil, s.pad_l, s.pad_r)
                : cf::desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                           s.x_any, s.w_any, s.y_any, s.strides, s.dil, s.pad_l, s.pad_r);
  return cf::primitive_desc(d, onednn::default_attr(), onednn::engine());
}

// Builds (or finds) the oneDNN primitive for one pass; null when oneDNN has no implementation.
std::shared_ptr<onednn::Compiled> conv_prim(Pass p, const Geom& g, DType t, bool bias) {
  return onednn::cached(conv_key(p, g, t, bias), [&]() -> std::shared_ptr<onednn::Compiled> {
    const Descs s = descs(g, t);
    try {
      if (p == Pass::kForward) {
        auto pd = fwd_pd(s, bias);
        std::vector<onednn::ArgSpec> args{{DNNL_ARG_SRC, s.x_user}, {DNNL_ARG_WEIGHTS, s.w_user}};
        if (bias) args.push_back({DNNL_ARG_BIAS, s.b_user});
        args.push_back({DNNL_ARG_DST, s.y_user, true});
        return std::make_shared<onednn::Compiled>(dnnl::convolution_forward(pd), pd, std::move(args));
      }
      auto hint = fwd_pd(s, false);
      if (p == Pass::kBackwardData) {
        using cb = dnnl::convolution_backward_data;
        cb::primitive_desc pd(cb::desc(dnnl::algorithm::convolution_direct, s.x_any, s.w_any, s.y_any,
                                       s.strides, s.dil, s.pad_l, s.pad_r),
                              onednn::default_attr(), onednn::engine(), hint);
        return std::make_shared<onednn::Compiled>(
            cb(pd), pd,
            std::vector<onednn::ArgSpec>{{DNNL_ARG_DIFF_DST, s.y_user}, {DNNL_ARG_WEIGHTS, s.w_user},
                                         {DNNL_ARG_DIFF_SRC, s.x_user, true}});
      }
      using cw = dnnl::convolution_backward_weights;
      cw::primitive_desc pd(cw::desc(dnnl::algorithm::convolution_direct, s.x_any, s.w_any, s.y_any,
                                     s.strides, s.dil, s.pad_l, s.pad_r),
                            onednn::default_attr(), onednn::engine(), hint);
      return std::make_shared<onednn::Compiled>(
          cw(pd), pd,
          std::vector<onednn::ArgSpec>{{DNNL_ARG_DIFF_DST, s.y_user}, {DNNL_ARG_SRC, s.x_user},
                                       {DNNL_ARG_DIFF_WEIGHTS, s.w_user, true}});
    } catch (const dnnl::error& e) {
      if (e.status == dnnl_unimplemented) return nullptr;
      onednn::throw_dnnl_error("dnnl::convolution primitive_desc", int(e.status), e.what(), __FILE__,
                               __LINE__, "check the conv2d shapes, padding and groups");
    }
  });
}

// ---- float64 reference loops -------------------------------------------------------------------

void conv_fwd_f64(const Geom& g, const double* x, const double* w, const double* b, double* y) {
  const int64_t Cg = g.C / g.G, Og = g.O / g.G;
  parallel_for(0, g.N * g.O, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / g.O, o = r % g.O, grp = o / Og;
      double* yp = y + r * g.OH * g.OW;
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          double s = b ? b[o] : 0.0;
          for (int64_t c = 0; c < Cg; ++c) {
            const double* xp = x + (n * g.C + grp * Cg + c) * g.H * g.W;
            const double* wp = w + (o * Cg + c) * g.kh * g.kw;
            for (int64_t i = 0; i < g.kh; ++i) {
              const int64_t ih = oh * g.sh - g.pt + i * g.dh;
              if (ih < 0 || ih >= g.H) continue;
              for (int64_t j = 0; j < g.kw; ++j) {
                const int64_t iw = ow * g.sw - g.pl + j * g.dw;
                if (iw >= 0 && iw < g.W) s += xp[ih * g.W + iw] * wp[i * g.kw + j];
              }
            }
          }
          yp[oh * g.OW + ow] = s;
        }
    }
  });
}

// Scatters dy through the kernel window; (n, group) pairs write disjoint parts of dx.
void conv_bwd_data_f64(const Geom& g, const double* dy, const double* w, double* dx) {
  const int64_t Cg = g.C / g.G, Og = g.O / g.G;
  std::memset(dx, 0, size_t(g.N * g.C * g.H * g.W) * sizeof(double));
  parallel_for(0, g.N * g.G, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / g.G, grp = r % g.G;
      for (int64_t o = grp * Og; o < (grp + 1) * Og; ++o) {
        const double* dyp = dy + (n * g.O + o) * g.OH * g.OW;
        for (int64_t c = 0; c < Cg; ++c) {
          double* dxp = dx + (n * g.C + grp * Cg + c) * g.H * g.W;
          const double* wp = w + (o * Cg + c) * g.kh * g.kw;
          for (int64_t oh = 0; oh < g.OH; ++oh)
            for (int64_t ow = 0; ow < g.OW; ++ow) {
              const double d = dyp[oh * g.OW + ow];
              for (int64_t i = 0; i < g.kh; ++i) {
                const int64_t ih = oh * g.sh - g.pt + i * g.dh;
                if (ih < 0 || ih >= g.H) continue;
                for (int64_t j = 0; j < g.kw; ++j) {
                  const int64_t iw = ow * g.sw - g.pl + j * g.dw;
                  if (iw >= 0 && iw < g.W) dxp[ih * g.W + iw] += d * wp[i * g.kw + j];
                }
              }
            }
        }
      }
    }
  });
}

void conv_bwd_weight_f64(const Geom& g, const double* dy, const double* x, double* dw) {
  const int64_t Cg = g.C / g.G, Og = g.O / g.G;
  parallel_for(0, g.O * Cg, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t o = r / Cg, c = r % Cg, grp = o / Og;
      for (int64_t i = 0; i < g.kh; ++i)
        for (int64_t j = 0; j < g.kw; ++j) {
          double s = 0;
          for (int64_t n = 0; n < g.N; ++n) {
            const double* dyp = dy + (n * g.O + o) * g.OH * g.OW;
            const double* xp = x + (n * g.C + grp * Cg + c) * g.H * g.W;
            for (int64_t oh = 0; oh < g.OH; ++oh) {
              const int64_t ih = oh * g.sh - g.pt + i * g.dh;
              if (ih < 0 || ih >= g.H) continue;
              for (int64_t ow = 0; ow < g.OW; ++ow) {
                const int64_t iw = ow * g.sw - g.pl + j * g.dw;
                if (iw >= 0 && iw < g.W) s += dyp[oh * g.OW + ow] * xp[ih * g.W + iw];
              }
            }
          }
          dw[r * g.kh * g.kw + i * g.kw + j] = s;
        }
    }
  });
}

// ---- kernels -------------------------------------------------------------------------------------

void conv2d_kernel(ops::KernelContext& ctx) {
  const bool has_bias = ctx.inputs.size() == 3;
  Tensor x = dense(ctx.inputs[0]), w = dense(ctx.inputs[1]);
  Tensor b = has_bias ? dense(ctx.inputs[2]) : Tensor();
  Tensor& y = ctx.outputs[0];
  if (y.numel() == 0) return;
  const Geom g = geom(x.shape(), w.shape(), y.shape(), ctx.attrs);
  if (y.dtype() == kFloat64)
    return conv_fwd_f64(g, x.data<double>(), w.data<double>(), has_bias ? b.data<double>() : nullptr,
                        y.data<double>());
  auto prim = conv_prim(Pass::kForward, g, y.dtype(), has_bias);
  if (!prim) return run_via_f32(ctx, conv2d_kernel);
  if (has_bias) prim->run({x.data_ptr(), w.data_ptr(), b.data_ptr(), y.data_ptr()});
  else prim->run({x.data_ptr(), w.data_ptr(), y.data_ptr()});
}

void conv2d_backward_data_kernel(ops::KernelContext& ctx) {
  Tensor dy = dense(ctx.inputs[0]), w = dense(ctx.inputs[1]);
  Tensor& dx = ctx.outputs[0];
  if (dx.numel() == 0) return;
  const Geom g = geom(dx.shape(), w.shape(), dy.shape(), ctx.attrs);
  if (dx.dtype() == kFloat64) return conv_bwd_data_f64(g, dy.data<double>(), w.data<double>(), dx.data<double>());
  auto prim = conv_prim(Pass::kBackwardData, g, dx.dtype(), false);
  if (!prim) return run_via_f32(ctx, conv2d_backward_data_kernel);
  prim->run({dy.data_ptr(), w.data_ptr(), dx.data_ptr()});
}

void conv2d_backward_weight_kernel(ops::KernelContext& ctx) {
  Tensor dy = dense(ctx.inputs[0]), x = dense(ctx.inputs[1]);
  Tensor& dw = ctx.outputs[0];
  if (dw.numel() == 0) return;
  const Geom g = geom(x.shape(), dw.shape(), dy.shape(), ctx.attrs);
  if (dw.dtype() == kFloat64)
    return conv_bwd_weight_f64(g, dy.data<double>(), x.data<double>(), dw.data<double>());
  auto prim = conv_prim(Pass::kBackwardWeight, g, dw.dtype(), false);
  if (!prim) return run_via_f32(ctx, conv2d_backward_weight_kernel);
  prim->run({dy.data_ptr(), x.data_ptr(), dw.data_ptr()});
}

}  // namespace

SPORE_KERNEL(CPU, Conv2d, conv2d_kernel, kFloat32, kFloat64, kBFloat16, kFloat16);
SPORE_KERNEL(CPU, Conv2dBackwardData, conv2d_backward_data_kernel, kFloat32, kFloat64, kBFloat16, kFloat16);
SPORE_KERNEL(CPU, Conv2dBackwardWeight, conv2d_backward_weight_kernel, kFloat32, kFloat64, kBFloat16, kFloat16);

}  // namespace spore::cpu
