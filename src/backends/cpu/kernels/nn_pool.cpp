// Pooling kernels on the CPU: max (with int64 argmax indices into each input H*W plane), average
// (count_include_pad, ceil_mode as PyTorch) and adaptive average, plus their backwards. Plain loops
// over (N*C) planes in parallel: a plane is small and hot in cache, and the 2x2 / 3x3 windows of
// real networks are memory-bound, so oneDNN's blocked layouts (and their reorders) would not pay.
// Half types compute in float. The 2x2 stride-2 window (LeNet, VGG...) has its own branch-free
// loop.
//
// max_pool2d / max_pool2d_backward with `blocked` (graph mode's nChw16c / nChw8c activations, 5-D
// (N, Cb, H, W, L), float32): the L channels of one pixel are L consecutive floats, so every
// window step is a vertical SIMD max/compare over whole vectors (Highway, run-time dispatch), no
// gathers. An index is h * W + w of the winner in its (n, cb) plane, per lane. Padding lanes
// (channel >= C) of y, indices and dx are written as zero whatever the inputs hold there.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/kernels/nn_pool.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/kernels/nn_util.h"
#include "core/parallel.h"

#ifndef SPORE_NN_POOL_BLOCKED_GEOM
#define SPORE_NN_POOL_BLOCKED_GEOM
namespace spore::cpu::blkpool {
// Geometry of a blocked max pool: planes are (n, cb), a pixel is `lanes` floats (16 or 8); C is
// the logical channel count (lanes of the last block past C are padding).
struct Geom {
  int64_t Cb, C, H, W, OH, OW, kh, kw, sh, sw, pt, pl;
  bool k2s2;  // 2x2 stride 2, no padding, every window inside the input
  int64_t lanes;
};
}  // namespace spore::cpu::blkpool
#endif

HWY_BEFORE_NAMESPACE();
namespace spore::cpu::blkpool {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
// The kernels are templates on the block's lanes kB (16 or 8: ops/blocked.h): vectors of at most
// kB floats, so an 8-lane block is read whole whatever the target's width.
template <int kB>
using DFB = hn::CappedTag<float, kB>;

// Lanes [0, valid) of the vector starting at lane j of a block are real channels.
template <class DF>
HWY_INLINE hn::Mask<DF> lanes_valid(DF d, int64_t valid, int64_t j) {
  return hn::FirstN(d, size_t(std::clamp<int64_t>(valid - j, 0, int64_t(hn::Lanes(d)))));
}

// int32 plane indices -> the int64 indices tensor.
template <class DI>
HWY_INLINE void store_idx(DI, hn::Vec<DI> v, int64_t* p) {
#if HWY_TARGET == HWY_SCALAR
  p[0] = hn::GetLane(v);
#else
  const hn::Half<DI> dh;
  const hn::Rebind<int64_t, decltype(dh)> d64;
  hn::StoreU(hn::PromoteTo(d64, hn::LowerHalf(dh, v)), d64, p);
  hn::StoreU(hn::PromoteTo(d64, hn::UpperHalf(dh, v)), d64, p + hn::Lanes(d64));
#endif
}

// One window step: v replaces the running maximum where it is larger or NaN, unless the maximum
// is already a NaN (the first NaN wins, as the plain kernel and PyTorch).
template <class DF, class DI>
HWY_INLINE void step(DF d, DI di, hn::Vec<DF> v, int32_t at, hn::Vec<DF>& best, hn::Vec<DI>& bi) {
  // Not(Eq(v, v)) is "v is NaN": Highway's Ne is an ordered compare (false for NaN).
  const auto take = hn::And(hn::Or(hn::Gt(v, best), hn::Not(hn::Eq(v, v))), hn::Eq(best, best));
  best = hn::IfThenElse(take, v, best);
  bi = hn::IfThenElse(hn::RebindMask(di, take), hn::Set(di, at), bi);
  (void)d;
}

// Planes [q0, q1) of x (N*Cb, H, W, kB) -> y, idx (N*Cb, OH, OW, kB).
template <int kB>
HWY_INLINE void MaxPoolBlockedFwdT(const Geom& g, const float* x, float* y, int64_t* idx,
                                   int64_t q0, int64_t q1) {
  const DFB<kB> d;
  const hn::RebindToSigned<DFB<kB>> di;
  const int64_t L = int64_t(hn::Lanes(d));
  const auto ninf = hn::Set(d, -std::numeric_limits<float>::infinity());
  for (int64_t q = q0; q < q1; ++q) {
    const int64_t valid = g.C - (q % g.Cb) * kB;  // real lanes of this block (>= kB: all)
    const float* xp = x + q * g.H * g.W * kB;
    float* yp = y + q * g.OH * g.OW * kB;
    int64_t* ip = idx + q * g.OH * g.OW * kB;
    for (int64_t j = 0; j < kB; j += L) {
      const auto ok = lanes_valid(d, valid, j);
      const auto oki = hn::RebindMask(di, ok);
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        if (g.k2s2) {
          const float* r0 = xp + 2 * oh * g.W * kB + j;
          const float* r1 = r0 + g.W * kB;
          const int32_t base = int32_t(2 * oh * g.W);
          for (int64_t ow = 0; ow < g.OW; ++ow) {
            const int32_t at = base + int32_t(2 * ow);
            auto best = hn::LoadU(d, r0 + 2 * kB * ow);  // the first element always wins its slot
            auto bi = hn::Set(di, at);
            step(d, di, hn::LoadU(d, r0 + 2 * kB * ow + kB), at + 1, best, bi);
            step(d, di, hn::LoadU(d, r1 + 2 * kB * ow), at + int32_t(g.W), best, bi);
            step(d, di, hn::LoadU(d, r1 + 2 * kB * ow + kB), at + int32_t(g.W) + 1, best, bi);
            const int64_t o = (oh * g.OW + ow) * kB + j;
            hn::StoreU(hn::IfThenElseZero(ok, best), d, yp + o);
            store_idx(di, hn::IfThenElseZero(oki, bi), ip + o);
          }
          continue;
        }
        const int64_t h0 = std::max<int64_t>(oh * g.sh - g.pt, 0),
                      h1 = std::min(oh * g.sh - g.pt + g.kh, g.H);
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const int64_t w0 = std::max<int64_t>(ow * g.sw - g.pl, 0),
                        w1 = std::min(ow * g.sw - g.pl + g.kw, g.W);
          auto best = ninf;
          auto bi = hn::Set(di, int32_t(h0 * g.W + w0));
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w)
              step(d, di, hn::LoadU(d, xp + (h * g.W + w) * kB + j), int32_t(h * g.W + w), best,
                   bi);
          const int64_t o = (oh * g.OW + ow) * kB + j;
          hn::StoreU(hn::IfThenElseZero(ok, best), d, yp + o);
          store_idx(di, hn::IfThenElseZero(oki, bi), ip + o);
        }
      }
    }
  }
}

// Planes [q0, q1): dx (N*Cb, H, W, kB) from dy, idx (N*Cb, OH, OW, kB). Each window position
// adds dy where the lane's index names it (a compare and a masked add per position instead of
// a scatter); 2x2 stride-2 windows tile the input, so there they store without zeroing first.
template <int kB>
HWY_INLINE void MaxPoolBlockedBwdT(const Geom& g, const float* dy, const int64_t* idx, float* dx,
                                   int64_t q0, int64_t q1) {
  const DFB<kB> d;
  const hn::RebindToSigned<DFB<kB>> di;
  const int64_t L = int64_t(hn::Lanes(d));
  const int64_t plane = g.H * g.W * kB;
  for (int64_t q = q0; q < q1; ++q) {
    const int64_t valid = g.C - (q % g.Cb) * kB;
    const float* gp = dy + q * g.OH * g.OW * kB;
    const int64_t* ip = idx + q * g.OH * g.OW * kB;
    float* xp = dx + q * plane;
    if (g.k2s2) {  // only the rows / columns no window covers need zeros
      if (2 * g.OH < g.H)
        std::memset(xp + 2 * g.OH * g.W * kB, 0, size_t((g.H - 2 * g.OH) * g.W * kB) * 4);
      if (2 * g.OW < g.W)
        for (int64_t h = 0; h < 2 * g.OH; ++h)
          std::memset(xp + (h * g.W + 2 * g.OW) * kB, 0, size_t((g.W - 2 * g.OW) * kB) * 4);
    } else {
      std::memset(xp, 0, size_t(plane) * 4);
    }
    for (int64_t oh = 0; oh < g.OH; ++oh)
      for (int64_t ow = 0; ow < g.OW; ++ow) {
        const int64_t o = (oh * g.OW + ow) * kB;
        alignas(64) int32_t i32[16];
        for (int l = 0; l < kB; ++l) i32[l] = int32_t(ip[o + l]);  // int64 -> int32 (vectorised)
        for (int64_t j = 0; j < kB; j += L) {
          const auto gv = hn::IfThenElseZero(lanes_valid(d, valid, j), hn::LoadU(d, gp + o + j));
          const auto iv = hn::Load(di, i32 + j);
          if (g.k2s2) {
            const int32_t at = int32_t(2 * oh * g.W + 2 * ow);
            float* r0 = xp + int64_t(at) * kB + j;
            float* r1 = r0 + g.W * kB;
            const auto z = hn::Zero(d);
            hn::StoreU(hn::IfThenElse(hn::RebindMask(d, hn::Eq(iv, hn::Set(di, at))), gv, z), d,
                       r0);
            hn::StoreU(hn::IfThenElse(hn::RebindMask(d, hn::Eq(iv, hn::Set(di, at + 1))), gv, z), d,
                       r0 + kB);
            hn::StoreU(hn::IfThenElse(hn::RebindMask(d, hn::Eq(iv, hn::Set(di, at + int32_t(g.W)))),
                                      gv, z),
                       d, r1);
            hn::StoreU(
                hn::IfThenElse(hn::RebindMask(d, hn::Eq(iv, hn::Set(di, at + int32_t(g.W) + 1))),
                               gv, z),
                d, r1 + kB);
            continue;
          }
          const int64_t h0 = std::max<int64_t>(oh * g.sh - g.pt, 0),
                        h1 = std::min(oh * g.sh - g.pt + g.kh, g.H);
          const int64_t w0 = std::max<int64_t>(ow * g.sw - g.pl, 0),
                        w1 = std::min(ow * g.sw - g.pl + g.kw, g.W);
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) {
              float* px = xp + (h * g.W + w) * kB + j;
              const auto hit = hn::RebindMask(d, hn::Eq(iv, hn::Set(di, int32_t(h * g.W + w))));
              hn::StoreU(hn::Add(hn::LoadU(d, px), hn::IfThenElseZero(hit, gv)), d, px);
            }
        }
      }
  }
}

HWY_NOINLINE void MaxPoolBlockedFwd(const Geom g, const float* x, float* y, int64_t* idx,
                                    int64_t q0, int64_t q1) {
  if (g.lanes == 8) return MaxPoolBlockedFwdT<8>(g, x, y, idx, q0, q1);
  MaxPoolBlockedFwdT<16>(g, x, y, idx, q0, q1);
}
HWY_NOINLINE void MaxPoolBlockedBwd(const Geom g, const float* dy, const int64_t* idx, float* dx,
                                    int64_t q0, int64_t q1) {
  if (g.lanes == 8) return MaxPoolBlockedBwdT<8>(g, dy, idx, dx, q0, q1);
  MaxPoolBlockedBwdT<16>(g, dy, idx, dx, q0, q1);
}

}  // namespace HWY_NAMESPACE
}  // namespace spore::cpu::blkpool
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace spore::cpu {
namespace blkpool {
HWY_EXPORT(MaxPoolBlockedFwd);
HWY_EXPORT(MaxPoolBlockedBwd);
}  // namespace blkpool
namespace {

struct Pool {
  int64_t planes, H, W, OH, OW, kh, kw, sh, sw, pt, pb, pl, pr;
};

Pool pool_of(const Shape& x, const Shape& y, const ops::Attrs& a) {
  const auto k = a.get_ints("kernel_size"), s = a.get_ints("stride"), p = a.get_ints("padding");
  return {x[0] * x[1], x[2], x[3], y[2], y[3], k[0], k[1], s[0], s[1], p[0], p[1], p[2], p[3]};
}

int64_t plane_grain(const Pool& p) {
  return std::max<int64_t>(1, 16384 / std::max<int64_t>(p.H * p.W, 1));
}

// The 2x2 stride-2 window of CNNs (every window inside the plane), branch-free: on real data
// "is this one bigger" is a coin flip the branch predictor loses. The maximum m comes from max(),
// then the first element equal to m (row-major) gives the index and the value (so -0 / +0 ties
// keep the first, as the general loop). A window holding a NaN (m may then be wrong) takes the
// general loop's answer: its first NaN.
template <typename T>
void max_pool_2x2_plane(const Pool& p, const T* xp, T* yp, int64_t* ip) {
  using A = acc_t<T>;
  const int64_t W = p.W;
  for (int64_t oh = 0; oh < p.OH; ++oh) {
    const T* r0 = xp + 2 * oh * W;
    const T* r1 = r0 + W;
    T* yr = yp + oh * p.OW;
    int64_t* ir = ip + oh * p.OW;
    const int64_t base = 2 * oh * W;
    for (int64_t ow = 0; ow < p.OW; ++ow) {
      const int64_t j = 2 * ow;
      const A a = A(r0[j]), b = A(r0[j + 1]), c = A(r1[j]), d = A(r1[j + 1]);
      const A m = std::max(std::max(a, b), std::max(c, d));
      // v == m written as !(v < m) (the same without NaN): one flag, so the compiler emits cmov.
      int64_t off = W + j + 1;
      off = c < m ? off : W + j;
      off = b < m ? off : j + 1;
      off = a < m ? off : j;
      if ((a + b + c + d) != (a + b + c + d)) [[unlikely]] {  // a NaN (or inf - inf) in the window
        const A v[4] = {a, b, c, d};
        const int64_t o4[4] = {j, j + 1, W + j, W + j + 1};
        for (int k = 0; k < 4; ++k)
          if (std::isnan(v[k])) {
            off = o4[k];
            break;
          }
      }
      yr[ow] = r0[off];
      ir[ow] = base + off;
    }
  }
}

template <typename T>
void max_pool_fwd(const Pool& p, const T* x, T* y, int64_t* idx) {
  using A = acc_t<T>;
  const bool k2s2 = p.kh == 2 && p.kw == 2 && p.sh == 2 && p.sw == 2 && p.pt == 0 && p.pl == 0 &&
                    2 * p.OH <= p.H && 2 * p.OW <= p.W;
  parallel_for(0, p.planes, plane_grain(p), [&](int64_t q0, int64_t q1) {
    if (k2s2) {
      for (int64_t q = q0; q < q1; ++q)
        max_pool_2x2_plane<T>(p, x + q * p.H * p.W, y + q * p.OH * p.OW, idx + q * p.OH * p.OW);
      return;
    }
    for (int64_t q = q0; q < q1; ++q) {
      const T* xp = x + q * p.H * p.W;
      T* yp = y + q * p.OH * p.OW;
      int64_t* ip = idx + q * p.OH * p.OW;
      for (int64_t oh = 0; oh < p.OH; ++oh) {
        const int64_t h0 = std::max<int64_t>(oh * p.sh - p.pt, 0),
                      h1 = std::min(oh * p.sh - p.pt + p.kh, p.H);
        for (int64_t ow = 0; ow < p.OW; ++ow) {
          const int64_t w0 = std::max<int64_t>(ow * p.sw - p.pl, 0),
                        w1 = std::min(ow * p.sw - p.pl + p.kw, p.W);
          A best = -std::numeric_limits<A>::infinity();
          int64_t bi = h0 * p.W + w0;
          for (int64_t h = h0; h < h1; ++h)
            for (int64_t w = w0; w < w1; ++w) {
              const A v = A(xp[h * p.W + w]);
              if (v > best || std::isnan(v)) {  // NaN propagates, as PyTorch
                best = v;
                bi = h * p.W + w;
                if (std::isnan(v)) goto done;
              }
            }
        done:
          yp[oh * p.OW + ow] = T(best);
          ip[oh * p.OW + ow] = bi;
        }
      }
    }
  });
}

template <typename T>
void max_pool_bwd(int64_t planes, int64_t in_plane, int64_t out_plane, const T* dy,
                  const int64_t* idx, T* dx) {
  using A = acc_t<T>;
  parallel_for(0, planes, std::max<int64_t>(1, 16384 / std::max<int64_t>(in_plane, 1)),
               [&](int64_t q0, int64_t q1) {
                 for (int64_t q = q0; q < q1; ++q) {
                   T* dxp = dx + q * in_plane;
                   const T* dyp = dy + q * out_plane;
                   const int64_t* ip = idx + q * out_plane;
                   if constexpr (std::is_same_v<T, A>) {
                     std::fill(dxp, dxp + in_plane, T(0));
                     for (int64_t o = 0; o < out_plane; ++o) dxp[ip[o]] += dyp[o];
                   } else {  // accumulate half types in float
                     std::vector<float> acc(size_t(in_plane), 0.0f);
                     for (int64_t o = 0; o < out_plane; ++o) acc[size_t(ip[o])] += float(dyp[o]);
                     for (int64_t i = 0; i < in_plane; ++i) dxp[i] = T(acc[size_t(i)]);
                   }
                 }
               });
}

// The PyTorch avg-pool divisor of window (oh, ow) and its clipped bounds.
struct Window {
  int64_t h0, h1, w0, w1, div;
};
Window avg_window(const Pool& p, int64_t oh, int64_t ow, bool include_pad) {
  int64_t h0 = oh * p.sh - p.pt, w0 = ow * p.sw - p.pl;
  int64_t h1 = std::min(h0 + p.kh, p.H + p.pb), w1 = std::min(w0 + p.kw, p.W + p.pr);
  const int64_t padded = (h1 - h0) * (w1 - w0);
  h0 = std::max<int64_t>(h0, 0);
  w0 = std::max<int64_t>(w0, 0);
  h1 = std::min(h1, p.H);
  w1 = std::min(w1, p.W);
  return {h0, h1, w0, w1, include_pad ? padded : (h1 - h0) * (w1 - w0)};
}

template <typename T>
void avg_pool_fwd(const Pool& p, bool include_pad, const T* x, T* y) {
  using A = acc_t<T>;
  parallel_for(0, p.planes, plane_grain(p), [&](int64_t q0, int64_t q1) {
    for (int64_t q = q0; q < q1; ++q) {
      const T* xp = x + q * p.H * p.W;
      T* yp = y + q * p.OH * p.OW;
      for (int64_t oh = 0; oh < p.OH; ++oh)
        for (int64_t ow = 0; ow < p.OW; ++ow) {
          const Window wd = avg_window(p, oh, ow, include_pad);
          A s = 0;
          for (int64_t h = wd.h0; h < wd.h1; ++h)
            for (int64_t w = wd.w0; w < wd.w1; ++w) s += A(xp[h * p.W + w]);
          yp[oh * p.OW + ow] = T(wd.div > 0 ? s / A(wd.div) : A(0));
        }
    }
  });
}

template <typename T>
void avg_pool_bwd(const Pool& p, bool include_pad, const T* dy, T* dx) {
  using A = acc_t<T>;
  parallel_for(0, p.planes, plane_grain(p), [&](int64_t q0, int64_t q1) {
    std::vector<A> acc(size_t(p.H * p.W));
    for (int64_t q = q0; q < q1; ++q) {
      std::fill(acc.begin(), acc.end(), A(0));
      const T* dyp = dy + q * p.OH * p.OW;
      for (int64_t oh = 0; oh < p.OH; ++oh)
        for (int64_t ow = 0; ow < p.OW; ++ow) {
          const Window wd = avg_window(p, oh, ow, include_pad);
          if (wd.div <= 0) continue;
          const A g = A(dyp[oh * p.OW + ow]) / A(wd.div);
          for (int64_t h = wd.h0; h < wd.h1; ++h)
            for (int64_t w = wd.w0; w < wd.w1; ++w) acc[size_t(h * p.W + w)] += g;
        }
      T* dxp = dx + q * p.H * p.W;
      for (int64_t i = 0; i < p.H * p.W; ++i) dxp[i] = T(acc[size_t(i)]);
    }
  });
}

// PyTorch's adaptive bins: [floor(i*n/out), ceil((i+1)*n/out)).
inline int64_t bin_start(int64_t i, int64_t n, int64_t out) { return (i * n) / out; }
inline int64_t bin_end(int64_t i, int64_t n, int64_t out) { return ((i + 1) * n + out - 1) / out; }

template <typename T>
void adaptive_avg(int64_t planes, int64_t H, int64_t W, int64_t OH, int64_t OW, const T* src,
                  T* dst, bool backward) {
  using A = acc_t<T>;
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(H * W, 1));
  parallel_for(0, planes, grain, [&](int64_t q0, int64_t q1) {
    std::vector<A> acc(backward ? size_t(H * W) : 0);
    for (int64_t q = q0; q < q1; ++q) {
      if (backward) std::fill(acc.begin(), acc.end(), A(0));
      for (int64_t oh = 0; oh < OH; ++oh) {
        const int64_t h0 = bin_start(oh, H, OH), h1 = bin_end(oh, H, OH);
        for (int64_t ow = 0; ow < OW; ++ow) {
          const int64_t w0 = bin_start(ow, W, OW), w1 = bin_end(ow, W, OW);
          const A inv = A(1) / A((h1 - h0) * (w1 - w0));
          if (!backward) {
            const T* xp = src + q * H * W;
            A s = 0;
            for (int64_t h = h0; h < h1; ++h)
              for (int64_t w = w0; w < w1; ++w) s += A(xp[h * W + w]);
            dst[q * OH * OW + oh * OW + ow] = T(s * inv);
          } else {
            const A g = A(src[q * OH * OW + oh * OW + ow]) * inv;
            for (int64_t h = h0; h < h1; ++h)
              for (int64_t w = w0; w < w1; ++w) acc[size_t(h * W + w)] += g;
          }
        }
      }
      if (backward)
        for (int64_t i = 0; i < H * W; ++i) dst[q * H * W + i] = T(acc[size_t(i)]);
    }
  });
}

template <typename F>
void visit_float(DType t, F&& f) {
  switch (t) {
    case kFloat32:
      return f(float{});
    case kFloat64:
      return f(double{});
    case kBFloat16:
      return f(BFloat16{});
    case kFloat16:
      return f(Half{});
    default:
      SPORE_ASSERT(false, "pool kernel called with dtype ", dtype_name(t));
  }
}

// Blocked geometry from the logical input (N, C, H, W) and output planes (OH, OW).
blkpool::Geom blocked_geom(int64_t C, int64_t H, int64_t W, int64_t OH, int64_t OW, int64_t L,
                           const ops::Attrs& a) {
  const auto k = a.get_ints("kernel_size"), s = a.get_ints("stride"), p = a.get_ints("padding");
  blkpool::Geom g{(C + L - 1) / L, C, H, W, OH, OW, k[0], k[1], s[0], s[1], p[0], p[2], false, L};
  g.k2s2 = g.kh == 2 && g.kw == 2 && g.sh == 2 && g.sw == 2 && g.pt == 0 && g.pl == 0 &&
           2 * OH <= H && 2 * OW <= W;
  return g;
}

void check_blocked_f32(const Tensor& t, const char* op) {
  SPORE_ASSERT(t.dtype() == kFloat32, op, ": blocked layout supports float32 only, got ",
               dtype_name(t.dtype()));
}

// Blocked planes are 16x (8x) larger than plain ones: ~4 (8) planes of 28x28 per task.
int64_t blocked_grain(int64_t plane_floats) {
  return std::max<int64_t>(1, 65536 / std::max<int64_t>(plane_floats, 1));
}

// x (N, Cb, H, W, L) -> y, indices (N, Cb, OH, OW, L). The logical C is not an input of the op:
// the optional attribute `channels` gives it (then y's padding lanes are zeroed whatever x holds);
// without it every lane is pooled, so a zero-padded x (what every blocked producer writes) gives
// a zero-padded y.
void max_pool2d_blocked(ops::KernelContext& ctx) {
  Tensor x = dense(ctx.inputs[0]);
  Tensor &y = ctx.outputs[0], &idx = ctx.outputs[1];
  check_blocked_f32(x, "max_pool2d");
  if (y.numel() == 0) return;
  const int64_t Cb = x.size(1), L = x.size(4);
  const blkpool::Geom g = blocked_geom(ctx.attrs.get_int("channels", Cb * L), x.size(2), x.size(3),
                                       y.size(2), y.size(3), L, ctx.attrs);
  SPORE_ASSERT(g.Cb == Cb, "max_pool2d: channels=", g.C, " does not match ", Cb,
               " blocks of input ", shape_str(x.shape()));
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  int64_t* ip = idx.data<int64_t>();
  // The grain counts window steps, not input floats: a small plane with a large window (YOLOv5's
  // SPPF: 5x5 over 10x10 maps) is still worth two threads.
  const int64_t grain = blocked_grain(std::max(g.H * g.W, g.OH * g.OW * g.kh * g.kw / 4) * L);
  parallel_for(0, x.size(0) * Cb, grain, [&](int64_t q0, int64_t q1) {
    HWY_DYNAMIC_DISPATCH(blkpool::MaxPoolBlockedFwd)(g, xp, yp, ip, q0, q1);
  });
}

// dy, indices (N, Cb, OH, OW, L), input_shape = logical (N, C, H, W) -> dx (N, Cb, H, W, L).
void max_pool2d_backward_blocked(ops::KernelContext& ctx) {
  Tensor dy = dense(ctx.inputs[0]), idx = dense(ctx.inputs[1]);
  Tensor& dx = ctx.outputs[0];
  check_blocked_f32(dx, "max_pool2d_backward");
  if (dx.numel() == 0) return;
  if (dy.numel() == 0) {
    std::memset(dx.data_ptr(), 0, dx.nbytes());
    return;
  }
  const auto xs = ctx.attrs.get_ints("input_shape");
  const blkpool::Geom g =
      blocked_geom(xs[1], xs[2], xs[3], dy.size(2), dy.size(3), dx.size(4), ctx.attrs);
  const float* gp = dy.data<float>();
  const int64_t* ip = idx.data<int64_t>();
  float* xp = dx.data<float>();
  parallel_for(0, dx.size(0) * g.Cb, blocked_grain(g.H * g.W * g.lanes),
               [&](int64_t q0, int64_t q1) {
                 HWY_DYNAMIC_DISPATCH(blkpool::MaxPoolBlockedBwd)(g, gp, ip, xp, q0, q1);
               });
}

void max_pool2d_kernel(ops::KernelContext& ctx) {
  if (ctx.attrs.get_bool("blocked")) return max_pool2d_blocked(ctx);
  Tensor x = dense(ctx.inputs[0]);
  Tensor &y = ctx.outputs[0], &idx = ctx.outputs[1];
  if (y.numel() == 0) return;
  const Pool p = pool_of(x.shape(), y.shape(), ctx.attrs);
  visit_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    max_pool_fwd<T>(p, x.data<T>(), y.data<T>(), idx.data<int64_t>());
  });
}

void max_pool2d_backward_kernel(ops::KernelContext& ctx) {
  if (ctx.attrs.get_bool("blocked")) return max_pool2d_backward_blocked(ctx);
  Tensor dy = dense(ctx.inputs[0]), idx = dense(ctx.inputs[1]);
  Tensor& dx = ctx.outputs[0];
  if (dx.numel() == 0) return;
  const int64_t planes = dx.size(0) * dx.size(1);
  if (dy.numel() == 0) {
    std::memset(dx.data_ptr(), 0, dx.nbytes());
    return;
  }
  visit_float(dx.dtype(), [&](auto tag) {
    using T = decltype(tag);
    max_pool_bwd<T>(planes, dx.size(2) * dx.size(3), dy.size(2) * dy.size(3), dy.data<T>(),
                    idx.data<int64_t>(), dx.data<T>());
  });
}

void avg_pool2d_kernel(ops::KernelContext& ctx) {
  Tensor x = dense(ctx.inputs[0]);
  Tensor& y = ctx.outputs[0];
  if (y.numel() == 0) return;
  const Pool p = pool_of(x.shape(), y.shape(), ctx.attrs);
  const bool inc = ctx.attrs.get_bool("count_include_pad", true);
  visit_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    avg_pool_fwd<T>(p, inc, x.data<T>(), y.data<T>());
  });
}

void avg_pool2d_backward_kernel(ops::KernelContext& ctx) {
  Tensor dy = dense(ctx.inputs[0]);
  Tensor& dx = ctx.outputs[0];
  if (dx.numel() == 0) return;
  const Pool p = pool_of(dx.shape(), dy.shape(), ctx.attrs);
  const bool inc = ctx.attrs.get_bool("count_include_pad", true);
  visit_float(dx.dtype(), [&](auto tag) {
    using T = decltype(tag);
    avg_pool_bwd<T>(p, inc, dy.data<T>(), dx.data<T>());
  });
}

void adaptive_avg_pool2d_kernel(ops::KernelContext& ctx) {
  Tensor x = dense(ctx.inputs[0]);
  Tensor& y = ctx.outputs[0];
  if (y.numel() == 0) return;
  visit_float(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    adaptive_avg<T>(x.size(0) * x.size(1), x.size(2), x.size(3), y.size(2), y.size(3), x.data<T>(),
                    y.data<T>(), false);
  });
}

void adaptive_avg_pool2d_backward_kernel(ops::KernelContext& ctx) {
  Tensor dy = dense(ctx.inputs[0]);
  Tensor& dx = ctx.outputs[0];
  if (dx.numel() == 0) return;
  visit_float(dx.dtype(), [&](auto tag) {
    using T = decltype(tag);
    adaptive_avg<T>(dx.size(0) * dx.size(1), dx.size(2), dx.size(3), dy.size(2), dy.size(3),
                    dy.data<T>(), dx.data<T>(), true);
  });
}

}  // namespace

#define SPORE_POOL_DTYPES kFloat32, kFloat64, kBFloat16, kFloat16
SPORE_KERNEL(CPU, MaxPool2d, max_pool2d_kernel, SPORE_POOL_DTYPES);
SPORE_KERNEL(CPU, MaxPool2dBackward, max_pool2d_backward_kernel, SPORE_POOL_DTYPES);
SPORE_KERNEL(CPU, AvgPool2d, avg_pool2d_kernel, SPORE_POOL_DTYPES);
SPORE_KERNEL(CPU, AvgPool2dBackward, avg_pool2d_backward_kernel, SPORE_POOL_DTYPES);
SPORE_KERNEL(CPU, AdaptiveAvgPool2d, adaptive_avg_pool2d_kernel, SPORE_POOL_DTYPES);
SPORE_KERNEL(CPU, AdaptiveAvgPool2dBackward, adaptive_avg_pool2d_backward_kernel,
             SPORE_POOL_DTYPES);

}  // namespace spore::cpu
#endif  // HWY_ONCE
