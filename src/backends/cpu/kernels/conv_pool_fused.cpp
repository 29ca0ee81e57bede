// conv2d_pool_fused (backends/cpu/ops/conv_pool.cpp): max_pool2d(relu?(conv2d(x, w) + bias)) for
// the direct conv kernels' geometries (conv_direct.h: C_in <= 4), float32 NCHW, without writing the
// conv output.
//
// conv2d_direct_forward_rows computes the conv in groups of output rows per task (image n, block
// of output channels) into a small per-thread buffer (bias and relu applied, the same arithmetic
// as conv2d_direct_forward), and the sinks below pool each group into y and indices:
//   tiled pools (kernel == stride, no padding, every window inside the conv plane: LeNet's 2x2/2):
//     a group is one row of windows (kh conv rows); conv rows / columns no window covers (27x27
//     under a 2x2 pool) are skipped or ignored;
//   any other pool (overlapping, padded, ceil_mode): a group is the whole (OH, OW) plane.
// Indices and ties / NaN follow the max_pool2d kernel (nn_pool.cpp): the index is h * OW + w in
// the conv plane, the first maximum (row-major) wins, the first NaN wins over everything.
// The 2x2 sink is SIMD (Highway, run-time dispatch): per pair of conv rows, L windows at a time
// from two deinterleaving loads per row; the scalar 2x2 loop of max_pool2d costs more than the
// conv. Geometries the direct kernels do not take run conv2d_fused's and max_pool2d's kernels
// through a temporary (correct, not fast; the graph pass does not make those).
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/kernels/conv_pool_fused.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/kernels/conv_direct.h"
#include "backends/cpu/kernels/nn_util.h"
#include "backends/cpu/ops/ops.h"

#ifndef SPORE_CONV_POOL_FUSED_ONCE
#define SPORE_CONV_POOL_FUSED_ONCE
namespace spore::cpu::cpool {

struct PoolGeom {
  int64_t kh, kw, sh, sw, pt, pl;
  int64_t OH, OW;  // the conv plane the pool reads
  int64_t PH, PW;  // the pool's output
};

struct SinkCtx {
  PoolGeom p;
  int64_t O;
  float* y;      // (N, O, PH, PW)
  int64_t* idx;  // (N, O, PH, PW)
};

// The general window loop of max_pool2d: window rows [h0, h1) x columns [w0, w1) of plane xp
// (row stride OW) whose row 0 is conv row r0; the index is in the whole conv plane.
inline void pool_window(const float* xp, int64_t OW, int64_t r0, int64_t h0, int64_t h1, int64_t w0,
                        int64_t w1, float* y, int64_t* idx) {
  float best = -std::numeric_limits<float>::infinity();
  int64_t bi = (r0 + h0) * OW + w0;
  for (int64_t h = h0; h < h1; ++h)
    for (int64_t w = w0; w < w1; ++w) {
      const float v = xp[h * OW + w];
      if (v > best || std::isnan(v)) {
        best = v;
        bi = (r0 + h) * OW + w;
        if (std::isnan(v)) goto done;
      }
    }
done:
  *y = best;
  *idx = bi;
}

// max_pool2d's 2x2 loop on windows [p0, p1) of conv rows r0, r1 = r0 + OW (conv row oh0 = r0's):
// the maximum from max(), then the first element not below it gives the index (branch-free); a
// window holding a NaN takes its first NaN.
inline void pool2x2_scalar(const float* r0, int64_t OW, int64_t oh0, int64_t p0, int64_t p1,
                           float* yr, int64_t* ir) {
  const float* r1 = r0 + OW;
  const int64_t base = oh0 * OW;
  for (int64_t pw = p0; pw < p1; ++pw) {
    const int64_t j = 2 * pw;
    const float a = r0[j], b = r0[j + 1], cc = r1[j], d = r1[j + 1];
    const float m = std::max(std::max(a, b), std::max(cc, d));
    int64_t off = OW + j + 1;
    off = cc < m ? off : OW + j;
    off = b < m ? off : j + 1;
    off = a < m ? off : j;
    if ((a + b + cc + d) != (a + b + cc + d)) [[unlikely]] {
      const float v[4] = {a, b, cc, d};
      const int64_t o4[4] = {j, j + 1, OW + j, OW + j + 1};
      for (int q = 0; q < 4; ++q)
        if (std::isnan(v[q])) {
          off = o4[q];
          break;
        }
    }
    yr[pw] = r0[off];
    ir[pw] = base + off;
  }
}
}  // namespace spore::cpu::cpool
#endif

HWY_BEFORE_NAMESPACE();
namespace spore::cpu::cpool {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;

// Lanes [0, n) of v to p (writes nothing past p + n: the next window row may be another thread's);
// and of the int32 indices at, widened, to the int64 p. AVX2 / AVX-512 mask in hardware, other
// targets go through a buffer on the stack.
HWY_INLINE void store_first(hn::Vec<DF> v, int64_t n, float* p) {
  const DF d;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  hn::BlendedStore(v, hn::FirstN(d, size_t(n)), d, p);
#else
  HWY_ALIGN float buf[hn::MaxLanes(DF())];
  hn::Store(v, d, buf);
  std::memcpy(p, buf, size_t(n) * sizeof(float));
#endif
}
HWY_INLINE void store_idx_first(hn::Vec<DI> at, int64_t n, int64_t* p) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  const hn::Half<DI> dh;
  const hn::Rebind<int64_t, decltype(dh)> d64;
  const int64_t H = int64_t(hn::Lanes(d64));
  const auto lo = hn::PromoteTo(d64, hn::LowerHalf(dh, at));
  const auto hi = hn::PromoteTo(d64, hn::UpperHalf(dh, at));
  if (n >= 2 * H) {
    hn::StoreU(lo, d64, p);
    hn::StoreU(hi, d64, p + H);
    return;
  }
  hn::BlendedStore(lo, hn::FirstN(d64, size_t(std::min(n, H))), d64, p);
  if (n > H) hn::BlendedStore(hi, hn::FirstN(d64, size_t(n - H)), d64, p + H);
#else
  const DI di;
  HWY_ALIGN int32_t buf[hn::MaxLanes(DI())];
  hn::Store(at, di, buf);
  for (int64_t l = 0; l < n; ++l) p[l] = buf[l];
#endif
}

// The 2x2 tiled sink: buf (cnt, 2, OW) holds conv rows oh0, oh0 + 1 (pool row oh0 / 2). The
// lane-wise twin of pool2x2_scalar (same compares, so the same winner); vectors with a NaN in a
// window go to the scalar loop. Loads may run up to 2L floats past a row (kRowsSlack).
void Pool2x2Rows(const SinkCtx* cp, int64_t n, int64_t o0, int64_t cnt, int64_t oh0,
                 const float* buf) {
  const SinkCtx& c = *cp;
  const PoolGeom& p = c.p;
  const DF d;
  const DI di;
  const int64_t L = int64_t(hn::Lanes(d)), OW = p.OW, ph = oh0 / 2;
  const auto two = hn::Set(di, 2);
  for (int64_t k = 0; k < cnt; ++k) {
    const float* r0 = buf + k * 2 * OW;
    const float* r1 = r0 + OW;
    const int64_t o = ((n * c.O + o0 + k) * p.PH + ph) * p.PW;
    float* yr = c.y + o;
    int64_t* ir = c.idx + o;
    for (int64_t p0 = 0; p0 < p.PW; p0 += L) {
      const int64_t nv = std::min(L, p.PW - p0);
      hn::Vec<DF> a, b, cc, dd;
      hn::LoadInterleaved2(d, r0 + 2 * p0, a, b);
      hn::LoadInterleaved2(d, r1 + 2 * p0, cc, dd);
      const auto valid = hn::FirstN(d, size_t(nv));
      const auto sum = hn::Add(hn::Add(a, b), hn::Add(cc, dd));
      if (!hn::AllFalse(d, hn::AndNot(hn::Eq(sum, sum), valid))) [[unlikely]] {
        pool2x2_scalar(r0, OW, oh0, p0, p0 + nv, yr, ir);
        continue;
      }
      const auto m = hn::Max(hn::Max(a, b), hn::Max(cc, dd));
      // Lane l's window starts at conv column j = 2 * (p0 + l): index oh0 * OW + j (+1, +OW).
      const auto j = hn::Mul(hn::Add(hn::Iota(di, 0), hn::Set(di, int32_t(p0))), two);
      const auto base = hn::Add(j, hn::Set(di, int32_t(oh0 * OW)));
      const auto one = hn::Set(di, 1), row = hn::Set(di, int32_t(OW));
      auto v = dd;
      auto at = hn::Add(base, hn::Add(row, one));
      auto keep = hn::Lt(cc, m);  // keep the later pick unless this one is not below m
      v = hn::IfThenElse(keep, v, cc);
      at = hn::IfThenElse(hn::RebindMask(di, keep), at, hn::Add(base, row));
      keep = hn::Lt(b, m);
      v = hn::IfThenElse(keep, v, b);
      at = hn::IfThenElse(hn::RebindMask(di, keep), at, hn::Add(base, one));
      keep = hn::Lt(a, m);
      v = hn::IfThenElse(keep, v, a);
      at = hn::IfThenElse(hn::RebindMask(di, keep), at, base);
      if (nv == L)
        hn::StoreU(v, d, yr + p0);
      else
        store_first(v, nv, yr + p0);
      store_idx_first(at, nv, ir + p0);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace spore::cpu::cpool
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace spore::cpu {
namespace cpool {
HWY_EXPORT(Pool2x2Rows);
}  // namespace cpool
namespace {
using cpool::pool_window;
using cpool::PoolGeom;
using cpool::SinkCtx;

// Tiled pools: buf (cnt, kh, OW) holds conv rows [oh0, oh0 + kh), i.e. pool row oh0 / kh.
void tiled_sink(void* vctx, int64_t n, int64_t o0, int64_t cnt, int64_t oh0, int64_t rows,
                const float* buf) {
  const SinkCtx& c = *static_cast<const SinkCtx*>(vctx);
  const PoolGeom& p = c.p;
  if (p.kh == 2 && p.kw == 2)
    return HWY_DYNAMIC_DISPATCH(cpool::Pool2x2Rows)(&c, n, o0, cnt, oh0, buf);
  const int64_t ph = oh0 / p.kh, OW = p.OW;
  for (int64_t k = 0; k < cnt; ++k) {
    const float* r0 = buf + k * rows * OW;
    const int64_t o = ((n * c.O + o0 + k) * p.PH + ph) * p.PW;
    float* yr = c.y + o;
    int64_t* ir = c.idx + o;
    for (int64_t pw = 0; pw < p.PW; ++pw)
      pool_window(r0, OW, oh0, 0, p.kh, pw * p.kw, pw * p.kw + p.kw, yr + pw, ir + pw);
  }
}

// Any pool: buf (cnt, OH, OW) holds whole conv planes; windows clipped to the plane as max_pool2d.
void plane_sink(void* vctx, int64_t n, int64_t o0, int64_t cnt, int64_t oh0, int64_t rows,
                const float* buf) {
  const SinkCtx& c = *static_cast<const SinkCtx*>(vctx);
  const PoolGeom& p = c.p;
  (void)oh0;
  for (int64_t k = 0; k < cnt; ++k) {
    const float* xp = buf + k * rows * p.OW;
    const int64_t o = (n * c.O + o0 + k) * p.PH * p.PW;
    for (int64_t ph = 0; ph < p.PH; ++ph) {
      const int64_t h0 = std::max<int64_t>(ph * p.sh - p.pt, 0),
                    h1 = std::min(ph * p.sh - p.pt + p.kh, p.OH);
      for (int64_t pw = 0; pw < p.PW; ++pw) {
        const int64_t w0 = std::max<int64_t>(pw * p.sw - p.pl, 0),
                      w1 = std::min(pw * p.sw - p.pl + p.kw, p.OW);
        pool_window(xp, p.OW, 0, h0, h1, w0, w1, c.y + o + ph * p.PW + pw,
                    c.idx + o + ph * p.PW + pw);
      }
    }
  }
}

ops::Attrs pool_attrs(const ops::Attrs& a) {
  ops::Attrs r;
  r.set("kernel_size", a.get_ints("pool_kernel_size", {2, 2}));
  r.set("stride", a.get_ints("pool_stride", {2, 2}));
  r.set("padding", a.get_ints("pool_padding", {0, 0, 0, 0}));
  r.set("ceil_mode", a.get_bool("pool_ceil_mode", false));
  return r;
}

// Not a direct-kernel geometry: conv2d_fused's kernel into a temporary, then max_pool2d's.
void unfused(ops::KernelContext& ctx, const Shape& conv_shape) {
  const ops::KernelEntry* conv = ops::find_kernel(op::Conv2dFused(), DeviceType::CPU);
  const ops::KernelEntry* pool = ops::find_kernel(ops::OpId::MaxPool2d, DeviceType::CPU);
  SPORE_CHECK(conv && pool,
              "conv2d_pool_fused: the conv2d_fused / max_pool2d CPU kernels are missing");
  ops::Tensors cout{Tensor::empty(conv_shape, kFloat32)};
  ops::KernelContext cc{ops::op_def(op::Conv2dFused()), ctx.inputs, cout, ctx.attrs};
  conv->fn(cc);
  const ops::Attrs pa = pool_attrs(ctx.attrs);
  ops::KernelContext pc{ops::op_def(ops::OpId::MaxPool2d), cout, ctx.outputs, pa};
  pool->fn(pc);
}

void conv2d_pool_fused_kernel(ops::KernelContext& ctx) {
  Tensor& y = ctx.outputs[0];
  Tensor& idx = ctx.outputs[1];
  if (y.numel() == 0) return;
  const ops::Attrs& a = ctx.attrs;
  const Shape& xs = ctx.inputs[0].shape();
  const Shape& ws = ctx.inputs[1].shape();
  const auto st = a.get_ints("stride"), pad = a.get_ints("padding"), dil = a.get_ints("dilation");
  const int64_t OH = (xs[2] + pad[0] + pad[1] - dil[0] * (ws[2] - 1) - 1) / st[0] + 1;
  const int64_t OW = (xs[3] + pad[2] + pad[3] - dil[1] * (ws[3] - 1) - 1) / st[1] + 1;
  const DirectConvGeom g{xs[0], xs[1], xs[2], xs[3],  ws[0],  ws[2],  ws[3], OH,
                         OW,    st[0], st[1], pad[0], pad[2], dil[0], dil[1]};
  if (!direct_conv_supported(g)) return unfused(ctx, {xs[0], ws[0], OH, OW});

  const auto pk = a.get_ints("pool_kernel_size", {2, 2}), ps = a.get_ints("pool_stride", {2, 2});
  const auto pp = a.get_ints("pool_padding", {0, 0, 0, 0});
  SinkCtx sc{{pk[0], pk[1], ps[0], ps[1], pp[0], pp[2], OH, OW, y.size(2), y.size(3)},
             ws[0],
             y.data<float>(),
             idx.data<int64_t>()};
  const PoolGeom& p = sc.p;
  const bool tiled = p.kh == p.sh && p.kw == p.sw && pp[0] == 0 && pp[1] == 0 && pp[2] == 0 &&
                     pp[3] == 0 && p.PH * p.kh <= OH && p.PW * p.kw <= OW;
  const bool has_bias = a.get_bool("has_bias", false);
  const bool relu = a.has("act") && a.get_string("act") == "relu";
  Tensor x = dense(ctx.inputs[0]), w = dense(ctx.inputs[1]);
  Tensor b = has_bias ? dense(ctx.inputs[2]) : Tensor();
  const float* bp = has_bias ? b.data<float>() : nullptr;
  if (tiled)
    conv2d_direct_forward_rows(g, x.data<float>(), w.data<float>(), bp, relu, p.kh, p.PH * p.kh,
                               &tiled_sink, &sc);
  else
    conv2d_direct_forward_rows(g, x.data<float>(), w.data<float>(), bp, relu, OH, OH, &plane_sink,
                               &sc);
}

}  // namespace

SPORE_CPU_KERNEL(Conv2dPoolFused, conv2d_pool_fused_kernel, kFloat32);

}  // namespace spore::cpu
#endif  // HWY_ONCE
