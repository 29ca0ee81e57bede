// Winograd F(2x2, 3x3) on nChw16c activations (see conv_winograd.h). Highway, run-time dispatch.
//
// The tiles (n, th, tw) of the output, 2x2 each, are numbered n-major and cut into blocks of T;
// each thread takes whole blocks (or, with few tiles, a share of one block's output channels).
// Per block, in a per-thread scratch:
//   1. input transform: V (16, T, C) = Bᵀ d B of every tile's 4x4 patch, vectorised over the 16
//      channels a blocked pixel holds (patches that cross the border read zeros there);
//   2. 16 x (O/16) matrix products M[e][ob] (T, 16) = V[e] (T, C) @ U[e][ob] (C, 16), by a 6x16
//      register tile (AVX2: 12 accumulators; one U row of two vectors feeds six broadcast rows);
//   3. output transform: Y = Aᵀ M A per tile and 16 output channels, + beta, + residual, relu or
//   silu,
//      stored straight into y's blocked layout (the second row / column of an edge tile that falls
//      outside an odd-sized output is dropped).
// T is sized so that one V[e] (T x C floats) stays in L2 while the products sweep it.
//
// The transforms (G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1], Bᵀ = [1 0 -1 0; 0 1 1 0; 0 -1 1 0;
// 0 1 0 -1], Aᵀ = [1 1 1 0; 0 1 -1 -1]) are adds and subtracts only (G's halves are exact), so the
// result differs from a direct convolution by float rounding alone: about 1e-6 relative.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/kernels/conv_winograd.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on

#include "backends/cpu/kernels/conv_winograd.h"

#include <algorithm>
#include <vector>

#include "backends/cpu/kernels/nn_util.h"
#include "backends/cpu/kernels/simd_math-inl.h"
#include "backends/cpu/ops/ops.h"
#include "core/parallel.h"
#include "spore/error.h"

#ifndef SPORE_WINOGRAD_ONCE
#define SPORE_WINOGRAD_ONCE
namespace spore::cpu::wino {
// Tiles per block: one V[e] (T x C floats) about 64 KiB, at least 12 and at most 192 tiles.
inline int64_t block_tiles(int64_t C) { return std::clamp<int64_t>(16384 / C, 12, 192); }
constexpr int64_t kMinTilesPerBlock = 32;  // fewer tiles per thread: split the channels instead
float* thread_scratch(size_t n);           // the calling thread's, grown and kept across calls
}  // namespace spore::cpu::wino
#endif

#ifndef SPORE_UNROLL
#define SPORE_UNROLL _Pragma("GCC unroll 32")
#endif

HWY_BEFORE_NAMESPACE();
namespace spore::cpu::wino {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
constexpr size_t kL = hn::MaxLanes(DF());
constexpr size_t kNV = kL >= 16 ? 1 : 16 / kL;  // vectors per 16-channel group
constexpr size_t kStep = kL >= 16 ? 16 : kL;    // lanes per vector actually used
// Rows of the product's register tile: 12 accumulators (AVX2), 12 (AVX-512: one vector per row).
constexpr int kRows = int(12 / kNV) > 0 ? int(12 / kNV) : 1;
using DG = hn::CappedTag<float, kStep>;  // a 16-lane group as kNV vectors of kStep lanes

// Input transform of tiles [t0, t0 + T) into v (16, T, C).
void InputTransform(const WinogradGeom& g, const float* HWY_RESTRICT x, int64_t t0, int64_t T,
                    float* HWY_RESTRICT v) {
  const DG d;
  const int64_t TH = (g.OH + 1) / 2, TW = (g.OW + 1) / 2, Cb = g.C / 16;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t tg = t0 + t, n = tg / (TH * TW), th = tg % (TH * TW) / TW, tw = tg % TW;
    const int64_t ih0 = 2 * th - g.pt, iw0 = 2 * tw - g.pl;
    bool row_in[4], col_in[4];
    for (int i = 0; i < 4; ++i) {
      row_in[i] = ih0 + i >= 0 && ih0 + i < g.H;
      col_in[i] = iw0 + i >= 0 && iw0 + i < g.W;
    }
    for (int64_t cb = 0; cb < Cb; ++cb) {
      const float* xb = x + ((n * Cb + cb) * g.H * g.W) * 16;
      for (size_t lane = 0; lane < 16; lane += kStep) {
        hn::Vec<DG> p[4][4], q[4][4];
        SPORE_UNROLL for (int i = 0; i < 4; ++i) SPORE_UNROLL for (int j = 0; j < 4; ++j) p[i][j] =
            row_in[i] && col_in[j] ? hn::LoadU(d, xb + ((ih0 + i) * g.W + iw0 + j) * 16 + lane)
                                   : hn::Zero(d);
        SPORE_UNROLL for (int j = 0; j < 4; ++j) {  // Bᵀ d: rows
          q[0][j] = hn::Sub(p[0][j], p[2][j]);
          q[1][j] = hn::Add(p[1][j], p[2][j]);
          q[2][j] = hn::Sub(p[2][j], p[1][j]);
          q[3][j] = hn::Sub(p[1][j], p[3][j]);
        }
        float* out = v + t * g.C + cb * 16 + int64_t(lane);
        const int64_t es = T * g.C;                 // between transformed elements e
        SPORE_UNROLL for (int i = 0; i < 4; ++i) {  // (Bᵀ d) B: columns
          hn::StoreU(hn::Sub(q[i][0], q[i][2]), d, out + (i * 4 + 0) * es);
          hn::StoreU(hn::Add(q[i][1], q[i][2]), d, out + (i * 4 + 1) * es);
          hn::StoreU(hn::Sub(q[i][2], q[i][1]), d, out + (i * 4 + 2) * es);
          hn::StoreU(hn::Sub(q[i][1], q[i][3]), d, out + (i * 4 + 3) * es);
        }
      }
    }
  }
}

// m (R, 16) = v (R rows of stride ldv, C) @ up (C, 16).
template <int R>
HWY_INLINE void Product(const float* HWY_RESTRICT v, int64_t ldv, const float* HWY_RESTRICT up,
                        int64_t C, float* HWY_RESTRICT m) {
  const DG d;
  hn::Vec<DG> acc[R][kNV];
  SPORE_UNROLL for (int r = 0; r < R; ++r) SPORE_UNROLL for (size_t k = 0; k < kNV; ++k) acc[r][k] =
      hn::Zero(d);
  for (int64_t c = 0; c < C; ++c) {
    hn::Vec<DG> w[kNV];
    SPORE_UNROLL for (size_t k = 0; k < kNV; ++k) w[k] = hn::LoadU(d, up + c * 16 + k * kStep);
    SPORE_UNROLL for (int r = 0; r < R; ++r) {
      const auto b = hn::Set(d, v[r * ldv + c]);
      SPORE_UNROLL for (size_t k = 0; k < kNV; ++k) acc[r][k] = hn::MulAdd(b, w[k], acc[r][k]);
    }
  }
  SPORE_UNROLL for (int r = 0; r < R; ++r) SPORE_UNROLL for (size_t k = 0; k < kNV; ++k)
      hn::StoreU(acc[r][k], d, m + r * 16 + k * kStep);
}

// The remainder rows (fewer than kRows) of a block, one template per count.
template <int R>
HWY_INLINE void ProductTail(int rows, const float* v, int64_t ldv, const float* up, int64_t C,
                            float* m) {
  if constexpr (R > 0) {
    if (rows == R) return Product<R>(v, ldv, up, C, m);
    ProductTail<R - 1>(rows, v, ldv, up, C, m);
  }
}

// m (16, O/16, T, 16) = for each e and ob in [ob0, ob1): v[e] (T, C) @ u[e][ob] (C, 16).
void Products(const WinogradGeom& g, const float* HWY_RESTRICT v, const float* HWY_RESTRICT u,
              int64_t T, int64_t ob0, int64_t ob1, float* HWY_RESTRICT m) {
  const int64_t Ob = g.O / 16;
  for (int64_t e = 0; e < 16; ++e)
    for (int64_t ob = ob0; ob < ob1; ++ob) {
      const float* up = u + (e * Ob + ob) * g.C * 16;
      const float* ve = v + e * T * g.C;
      float* me = m + (e * Ob + ob) * T * 16;
      int64_t t = 0;
      for (; t + kRows <= T; t += kRows) Product<kRows>(ve + t * g.C, g.C, up, g.C, me + t * 16);
      if (t < T) ProductTail<kRows - 1>(int(T - t), ve + t * g.C, g.C, up, g.C, me + t * 16);
    }
}

// Output transform of tiles [t0, t0 + T), output channel blocks [ob0, ob1), from m (16, O/16, T,
// 16) into y, with the epilogue.
void OutputTransform(const WinogradGeom& g, const float* HWY_RESTRICT m, int64_t t0, int64_t T,
                     int64_t ob0, int64_t ob1, const float* HWY_RESTRICT beta,
                     const float* HWY_RESTRICT res, ConvAct act, float* HWY_RESTRICT y) {
  const DG d;
  const int64_t TH = (g.OH + 1) / 2, TW = (g.OW + 1) / 2, Ob = g.O / 16;
  const int64_t es = Ob * T * 16;  // between transformed elements e
  const auto zero = hn::Zero(d);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t tg = t0 + t, n = tg / (TH * TW), th = tg % (TH * TW) / TW, tw = tg % TW;
    const int64_t oh0 = 2 * th, ow0 = 2 * tw;
    const bool two_rows = oh0 + 1 < g.OH, two_cols = ow0 + 1 < g.OW;
    for (int64_t ob = ob0; ob < ob1; ++ob) {
      const float* mt = m + (ob * T + t) * 16;
      const int64_t plane = (n * Ob + ob) * g.OH;
      for (size_t lane = 0; lane < 16; lane += kStep) {
        hn::Vec<DG> s[4][2];  // M A: per row i, the two output columns
        SPORE_UNROLL for (int i = 0; i < 4; ++i) {
          const auto m0 = hn::LoadU(d, mt + (i * 4 + 0) * es + lane);
          const auto m1 = hn::LoadU(d, mt + (i * 4 + 1) * es + lane);
          const auto m2 = hn::LoadU(d, mt + (i * 4 + 2) * es + lane);
          const auto m3 = hn::LoadU(d, mt + (i * 4 + 3) * es + lane);
          s[i][0] = hn::Add(hn::Add(m0, m1), m2);
          s[i][1] = hn::Sub(hn::Sub(m1, m2), m3);
        }
        const auto b = hn::LoadU(d, beta + ob * 16 + int64_t(lane));
        SPORE_UNROLL for (int a = 0; a < 2; ++a) {  // Aᵀ (M A): output row a
          if (a == 1 && !two_rows) break;
          SPORE_UNROLL for (int c = 0; c < 2; ++c) {
            if (c == 1 && !two_cols) break;
            auto o = a == 0 ? hn::Add(hn::Add(s[0][c], s[1][c]), s[2][c])
                            : hn::Sub(hn::Sub(s[1][c], s[2][c]), s[3][c]);
            o = hn::Add(o, b);
            const int64_t at = ((plane + oh0 + a) * g.OW + ow0 + c) * 16 + int64_t(lane);
            if (res) o = hn::Add(o, hn::LoadU(d, res + at));
            if (act == ConvAct::kRelu)
              o = hn::Max(o, zero);
            else if (act == ConvAct::kSilu)
              o = simd::HWY_NAMESPACE::silu_f(d, o);
            hn::StoreU(o, d, y + at);
          }
        }
      }
    }
  }
}

// Tasks [k0, k1) on the calling thread: task k is part k % parts (a 1/parts share of the output
// channel blocks) of block k / parts of T tiles (the last block may be short).
void Tasks(const WinogradGeom& g, const float* x, const float* u, const float* beta,
           const float* res, ConvAct act, float* y, int64_t T, int64_t parts, int64_t k0,
           int64_t k1) {
  const int64_t tiles = g.N * ((g.OH + 1) / 2) * ((g.OW + 1) / 2), Ob = g.O / 16;
  float* v = thread_scratch(size_t(16 * T * (g.C + g.O)));
  float* m = v + 16 * T * g.C;
  int64_t transformed = -1;  // the block v holds
  for (int64_t k = k0; k < k1; ++k) {
    const int64_t b = k / parts, part = k % parts;
    const int64_t t0 = b * T, Tb = std::min(T, tiles - t0);
    const int64_t ob0 = part * Ob / parts, ob1 = (part + 1) * Ob / parts;
    if (b != transformed) InputTransform(g, x, t0, Tb, v);
    transformed = b;
    Products(g, v, u, Tb, ob0, ob1, m);
    OutputTransform(g, m, t0, Tb, ob0, ob1, beta, res, act, y);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace spore::cpu::wino
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace spore::cpu {
namespace wino {
HWY_EXPORT(Tasks);

float* thread_scratch(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}
}  // namespace wino

void winograd_transform_weights(const float* w, int64_t O, int64_t C, const float* bias,
                                const float* scale, const float* shift, float* u, float* beta) {
  SPORE_ASSERT(O % 16 == 0 && C % 16 == 0, "winograd: channels must be multiples of 16, got O=", O,
               ", C=", C);
  const int64_t Ob = O / 16;
  for (int64_t o = 0; o < O; ++o) {
    const float s = scale ? scale[o] : 1.f;
    beta[o] = (bias ? bias[o] : 0.f) * s + (shift ? shift[o] : 0.f);
    for (int64_t c = 0; c < C; ++c) {
      const float* k = w + (o * C + c) * 9;
      float gk[4][3];  // G g: rows of the 3x3 kernel combined
      for (int j = 0; j < 3; ++j) {
        gk[0][j] = k[j];
        gk[1][j] = 0.5f * (k[j] + k[3 + j] + k[6 + j]);
        gk[2][j] = 0.5f * (k[j] - k[3 + j] + k[6 + j]);
        gk[3][j] = k[6 + j];
      }
      for (int i = 0; i < 4; ++i) {  // (G g) Gᵀ: columns
        const float r[4] = {gk[i][0], 0.5f * (gk[i][0] + gk[i][1] + gk[i][2]),
                            0.5f * (gk[i][0] - gk[i][1] + gk[i][2]), gk[i][2]};
        for (int j = 0; j < 4; ++j)
          u[(((i * 4 + j) * Ob + o / 16) * C + c) * 16 + o % 16] = r[j] * s;
      }
    }
  }
}

void winograd_conv2d(const WinogradGeom& g, const float* x, const float* u, const float* beta,
                     const float* residual, ConvAct act, float* y) {
  SPORE_ASSERT(g.O % 16 == 0 && g.C % 16 == 0,
               "winograd: channels must be multiples of 16, got O=", g.O, ", C=", g.C);
  const int64_t tiles = g.N * ((g.OH + 1) / 2) * ((g.OW + 1) / 2);
  if (tiles == 0) return;
  // Work for every thread. With many tiles, blocks of tiles (smaller blocks for smaller inputs).
  // With few (an 8x8 map at batch 1) the threads split the output channels of one block instead,
  // so each reads only its share of u: there, reading u is most of the cost.
  const int64_t threads = get_num_threads();
  int64_t T, parts = 1;
  if (tiles >= threads * wino::kMinTilesPerBlock) {
    T = std::min(wino::block_tiles(g.C), (tiles + threads - 1) / threads);
  } else {
    T = std::min(wino::block_tiles(g.C), tiles);
    parts = std::min(g.O / 16, (threads * T + tiles - 1) / tiles);
  }
  const int64_t tasks = (tiles + T - 1) / T * parts;
  parallel_for(0, tasks, 1, [&](int64_t k0, int64_t k1) {
    HWY_DYNAMIC_DISPATCH(wino::Tasks)(g, x, u, beta, residual, act, y, T, parts, k0, k1);
  });
}

namespace {

// winograd_weights(w[, bias][, scale, shift]) -> (u, beta) (ops/winograd.cpp).
void winograd_weights_kernel(ops::KernelContext& ctx) {
  const bool has_bias = ctx.attrs.get_bool("has_bias", false);
  const bool has_scale = ctx.attrs.get_bool("has_scale", false);
  size_t i = 1;
  const Tensor w = dense(ctx.inputs[0]);
  const Tensor b = has_bias ? dense(ctx.inputs[i++]) : Tensor();
  const Tensor scale = has_scale ? dense(ctx.inputs[i++]) : Tensor();
  const Tensor shift = has_scale ? dense(ctx.inputs[i++]) : Tensor();
  winograd_transform_weights(
      w.data<float>(), w.size(0), w.size(1), has_bias ? b.data<float>() : nullptr,
      has_scale ? scale.data<float>() : nullptr, has_scale ? shift.data<float>() : nullptr,
      ctx.outputs[0].data<float>(), ctx.outputs[1].data<float>());
}

// conv2d_winograd(x, u, beta[, residual]) -> y, all blocked but u and beta.
void conv2d_winograd_kernel(ops::KernelContext& ctx) {
  Tensor& y = ctx.outputs[0];
  if (y.numel() == 0) return;
  const Tensor x = dense(ctx.inputs[0]), u = dense(ctx.inputs[1]), beta = dense(ctx.inputs[2]);
  const bool has_res = ctx.attrs.get_bool("has_residual", false);
  const Tensor r = has_res ? dense(ctx.inputs[3]) : Tensor();
  const auto pad = ctx.attrs.get_ints("padding");
  const WinogradGeom g{x.size(0), x.size(1) * 16, x.size(2), x.size(3), y.size(1) * 16,
                       y.size(2), y.size(3),      pad[0],    pad[2]};
  const ConvAct act = conv_act(ctx.attrs.has("act") ? ctx.attrs.get_string("act") : "");
  winograd_conv2d(g, x.data<float>(), u.data<float>(), beta.data<float>(),
                  has_res ? r.data<float>() : nullptr, act, y.data<float>());
}

}  // namespace

SPORE_CPU_KERNEL(WinogradWeights, winograd_weights_kernel, kFloat32);
SPORE_CPU_KERNEL(Conv2dWinograd, conv2d_winograd_kernel, kFloat32);

}  // namespace spore::cpu
#endif  // HWY_ONCE
