// Conv2d, Conv2dBackwardData and Conv2dBackwardWeight on the CPU.
//   float32 / bfloat16: oneDNN direct convolution. Layouts are format_tag::any, so oneDNN picks
//     its blocked layouts; the cached Compiled entry reorders NCHW/OIHW user tensors in and out
//     (the reorder primitives are cached, the buffers come from the allocator). The forward pass
//     also tries the plain layouts themselves and keeps whichever runs faster (see
//     "forward layout choice"). The bias, when given, is added inside the forward primitive.
//   Conv2dFused (graph-internal, made by graph/passes/dnnl_fusion.cpp): the same forward primitive
//     with oneDNN post-ops: a sum for the residual (reordered straight into the primitive's
//     destination buffer) and an eltwise activation; one primitive per post-op set in the cache.
//   float16: through float32 when oneDNN has no implementation on this CPU.
//   float64: plain loops (used by the float64 gradient checks).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

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

onednn::CacheKey conv_key(Pass p, const Geom& g, DType t, bool bias, const ops::Attrs* post) {
  onednn::CacheKey k;
  k.add(int64_t(post ? ops::OpId::Conv2dFused : ops::OpId::Conv2d)).add(int64_t(p)).add(int64_t(t)).add(bias);
  k.add({g.N, g.C, g.H, g.W, g.O, g.kh, g.kw, g.sh, g.sw, g.pt, g.pb, g.pl, g.pr, g.dh, g.dw, g.G});
  if (post) onednn::add_post_op_key(k, *post);
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

dnnl::convolution_forward::primitive_desc fwd_pd(const Descs& s, bool bias,
                                                 const ops::Attrs* post = nullptr) {
  using cf = dnnl::convolution_forward;
  // A fused conv never has a backward (the pass only fuses what the backward does not read), so
  // it is an inference primitive.
  const auto prop = post ? dnnl::prop_kind::forward_inference : dnnl::prop_kind::forward_training;
  auto d = bias ? cf::desc(prop, dnnl::algorithm::convolution_direct, s.x_any, s.w_any, s.b_user,
                           s.y_any, s.strides, s.dil, s.pad_l, s.pad_r)
                : cf::desc(prop, dnnl::algorithm::convolution_direct, s.x_any, s.w_any, s.y_any,
                           s.strides, s.dil, s.pad_l, s.pad_r);
  dnnl::primitive_attr attr = onednn::default_attr();
  if (post) onednn::set_post_ops(attr, *post);
  return cf::primitive_desc(d, attr, onednn::engine());
}

// ---- forward layout choice ---------------------------------------------------------------------
// oneDNN's fastest convolutions want blocked layouts, so by default every call reorders the NCHW
// input and OIHW weight in and the output back; where oneDNN also has a good implementation on the
// plain layouts themselves (small channel counts, batch 1) those reorders are pure cost. The first
// call with a geometry builds both, times them on zeroed buffers and keeps the faster (reference
// implementations never win). SPORE_CONV_LAYOUT=blocked or plain forces one (for A/B runs).
enum class Layout { kAuto, kBlocked, kPlain };
Layout layout_choice() {
  static const Layout l = [] {
    const char* e = std::getenv("SPORE_CONV_LAYOUT");
    const std::string v = e ? e : "";
    return v == "blocked" ? Layout::kBlocked : v == "plain" ? Layout::kPlain : Layout::kAuto;
  }();
  return l;
}

std::shared_ptr<onednn::Compiled> make_fwd(Descs s, bool bias, const ops::Attrs* post, bool plain) {
  if (plain) {
    s.x_any = s.x_user;
    s.w_any = s.w_user;
    s.y_any = s.y_user;
  }
  auto pd = fwd_pd(s, bias, post);
  if (plain && std::string(pd.impl_info_str()).rfind("ref", 0) == 0) return nullptr;
  std::vector<onednn::ArgSpec> args{{DNNL_ARG_SRC, s.x_user}, {DNNL_ARG_WEIGHTS, s.w_user}};
  if (bias) args.push_back({DNNL_ARG_BIAS, s.b_user});
  args.push_back({DNNL_ARG_DST, s.y_user, true, post && post->get_bool("has_residual", false)});
  return std::make_shared<onednn::Compiled>(dnnl::convolution_forward(pd), pd, std::move(args));
}

// Best of three runs (after a warm-up) on zeroed buffers, in seconds.
double time_prim(onednn::Compiled& c) {
  std::vector<Tensor> bufs;
  std::vector<const void*> ptrs;
  for (size_t bytes : c.arg_bytes()) {
    bufs.push_back(Tensor::empty({int64_t(bytes)}, kUInt8));
    std::memset(bufs.back().data_ptr(), 0, bytes);
    ptrs.push_back(bufs.back().data_ptr());
  }
  const void* init = bufs.back().data_ptr();  // the residual, when it accumulates
  double best = 1e30;
  for (int i = 0; i < 4; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    c.run(ptrs.data(), ptrs.size(), init);
    const double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (i > 0) best = std::min(best, dt);
  }
  return best;
}

std::shared_ptr<onednn::Compiled> choose_fwd(const Descs& s, bool bias, const ops::Attrs* post) {
  const Layout l = layout_choice();
  std::shared_ptr<onednn::Compiled> blocked, plain;
  if (l != Layout::kPlain) blocked = make_fwd(s, bias, post, false);
  if (l != Layout::kBlocked) {
    try {
      plain = make_fwd(s, bias, post, true);
    } catch (const dnnl::error&) {  // no implementation on plain layouts for this geometry
    }
  }
  if (!plain) return blocked ? blocked : make_fwd(s, bias, post, false);
  if (!blocked) return plain;
  return time_prim(*plain) < time_prim(*blocked) ? plain : blocked;
}

// post: Conv2dFused's attributes (forward only).
std::shared_ptr<onednn::Compiled> conv_prim(Pass p, const Geom& g, DType t, bool bias,
                                            const ops::Attrs* post = nullptr) {
  return onednn::cached(conv_key(p, g, t, bias, post), [&]() -> std::shared_ptr<onednn::Compiled> {
    const Descs s = descs(g, t);
    try {
      if (p == Pass::kForward) return choose_fwd(s, bias, post);
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

// Conv2dFused: (x, w[, bias][, residual]) -> act(conv(x, w) + bias + residual).
void conv2d_fused_kernel(ops::KernelContext& ctx) {
  const bool has_bias = ctx.attrs.get_bool("has_bias", false);
  const bool has_res = ctx.attrs.get_bool("has_residual", false);
  Tensor x = dense(ctx.inputs[0]), w = dense(ctx.inputs[1]);
  Tensor b = has_bias ? dense(ctx.inputs[2]) : Tensor();
  Tensor r = has_res ? dense(ctx.inputs[has_bias ? 3 : 2]) : Tensor();
  Tensor& y = ctx.outputs[0];
  if (y.numel() == 0) return;
  const Geom g = geom(x.shape(), w.shape(), y.shape(), ctx.attrs);
  if (y.dtype() == kFloat64) {  // reference loops, then the post-ops one element at a time
    double* yp = y.data<double>();
    conv_fwd_f64(g, x.data<double>(), w.data<double>(), has_bias ? b.data<double>() : nullptr, yp);
    const double* rp = has_res ? r.data<double>() : nullptr;
    parallel_for(0, y.numel(), 4096, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i)
        yp[i] = onednn::apply_activation(ctx.attrs, rp ? yp[i] + rp[i] : yp[i]);
    });
    return;
  }
  auto prim = conv_prim(Pass::kForward, g, y.dtype(), has_bias, &ctx.attrs);
  if (!prim) return run_via_f32(ctx, conv2d_fused_kernel);
  const void* init = has_res ? r.data_ptr() : nullptr;
  if (has_bias) prim->run({x.data_ptr(), w.data_ptr(), b.data_ptr(), y.data_ptr()}, init);
  else prim->run({x.data_ptr(), w.data_ptr(), y.data_ptr()}, init);
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
SPORE_KERNEL(CPU, Conv2dFused, conv2d_fused_kernel, kFloat32, kFloat64, kBFloat16, kFloat16);
SPORE_KERNEL(CPU, Conv2dBackwardData, conv2d_backward_data_kernel, kFloat32, kFloat64, kBFloat16, kFloat16);
SPORE_KERNEL(CPU, Conv2dBackwardWeight, conv2d_backward_weight_kernel, kFloat32, kFloat64, kBFloat16, kFloat16);

}  // namespace spore::cpu
