// Winograd F(2x2, 3x3) and F(4x4, 3x3) on nChw16c or nChw8c activations (see conv_winograd.h).
// Highway, run-time dispatch. The transforms are one-dimensional rows (InputRow, OutputRow,
// WeightRow and, for the weight gradient, GradRow and WeightGradRow) applied to a tile's rows and
// then its columns, templated on the output tile's side M (2 or 4; a patch is A = M + 2 wide and
// has E = A² transformed elements). Described below for F(2x2, 3x3); F(4x4, 3x3) is the same
// with 36 elements in place of 16.
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
// Tiles per block: V (E = (m + 2)² elements of T x C floats) about 1 MiB, at least 12 and at most
// 192 tiles (for F(2x2, 3x3): one V[e] about 64 KiB).
inline int64_t block_tiles(int64_t C, int64_t E) {
  return std::clamp<int64_t>(262144 / (E * C), 12, 192);
}
// The output's tiles of m x m, over the batch.
inline int64_t tiles_of(const WinogradGeom& g) {
  return g.N * ((g.OH + g.m - 1) / g.m) * ((g.OW + g.m - 1) / g.m);
}
constexpr int64_t kMinTilesPerBlock = 32;  // fewer tiles per thread: split the channels instead
float* thread_scratch(size_t n);           // the calling thread's, grown and kept across calls
// Offset of channel c (of `channels`) at pixel p (of `pixels` per plane) of image n in a tensor
// blocked in L lanes: (N, channels / L, pixels, L).
inline int64_t blocked_at(int64_t L, int64_t channels, int64_t pixels, int64_t n, int64_t c,
                          int64_t p) {
  return ((n * (channels / L) + c / L) * pixels + p) * L + c % L;
}
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

// The one-dimensional transforms, applied to the rows and then the columns of a tile. M: the
// output tile's side (2: F(2x2, 3x3), 4: F(4x4, 3x3)); a patch has A = M + 2 rows.
// y = Bᵀ x (A values in, A out): the input transform.
template <int M, class V>
HWY_INLINE void InputRow(const V* x, V* y) {
  if constexpr (M == 2) {  // Bᵀ = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1]
    y[0] = hn::Sub(x[0], x[2]);
    y[1] = hn::Add(x[1], x[2]);
    y[2] = hn::Sub(x[2], x[1]);
    y[3] = hn::Sub(x[1], x[3]);
  } else {  // Bᵀ's rows: [4 0 -5 0 1 0] [0 -4 -4 1 1 0] [0 4 -4 -1 1 0] [0 -2 -1 2 1 0]
            //            [0 2 -1 -2 1 0] [0 4 0 -5 0 1]
    const DG d;
    const auto two = hn::Set(d, 2.f), four = hn::Set(d, 4.f), five = hn::Set(d, 5.f);
    y[0] = hn::MulAdd(four, x[0], hn::NegMulAdd(five, x[2], x[4]));
    y[1] = hn::NegMulAdd(four, hn::Add(x[1], x[2]), hn::Add(x[3], x[4]));
    y[2] = hn::MulAdd(four, hn::Sub(x[1], x[2]), hn::Sub(x[4], x[3]));
    y[3] = hn::MulAdd(two, hn::Sub(x[3], x[1]), hn::Sub(x[4], x[2]));
    y[4] = hn::MulAdd(two, hn::Sub(x[1], x[3]), hn::Sub(x[4], x[2]));
    y[5] = hn::MulAdd(four, x[1], hn::NegMulAdd(five, x[3], x[5]));
  }
}
// y = Aᵀ x (A values in, M out): the output transform.
template <int M, class V>
HWY_INLINE void OutputRow(const V* x, V* y) {
  if constexpr (M == 2) {  // Aᵀ = [1 1 1 0; 0 1 -1 -1]
    y[0] = hn::Add(hn::Add(x[0], x[1]), x[2]);
    y[1] = hn::Sub(hn::Sub(x[1], x[2]), x[3]);
  } else {  // Aᵀ = [1 1 1 1 1 0; 0 1 -1 2 -2 0; 0 1 1 4 4 0; 0 1 -1 8 -8 1]
    const DG d;
    const auto p12 = hn::Add(x[1], x[2]), m12 = hn::Sub(x[1], x[2]);
    const auto p34 = hn::Add(x[3], x[4]), m34 = hn::Sub(x[3], x[4]);
    y[0] = hn::Add(hn::Add(x[0], p12), p34);
    y[1] = hn::MulAdd(hn::Set(d, 2.f), m34, m12);
    y[2] = hn::MulAdd(hn::Set(d, 4.f), p34, p12);
    y[3] = hn::Add(hn::MulAdd(hn::Set(d, 8.f), m34, m12), x[5]);
  }
}

// y = G x (3 values in, A out): the weight transform.
template <int M, class V>
HWY_INLINE void WeightRow(const V* x, V* y) {
  const DG d;
  if constexpr (M == 2) {  // G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1]
    const auto half = hn::Set(d, 0.5f);
    y[0] = x[0];
    y[1] = hn::Mul(half, hn::Add(hn::Add(x[0], x[1]), x[2]));
    y[2] = hn::Mul(half, hn::Add(hn::Sub(x[0], x[1]), x[2]));
    y[3] = x[2];
  } else {  // G's rows: [1/4 0 0] [-1/6 -1/6 -1/6] [-1/6 1/6 -1/6] [1/24 1/12 1/6]
            //           [1/24 -1/12 1/6] [0 0 1]
    const auto p02 = hn::Add(x[0], x[2]);
    const auto e = hn::MulAdd(hn::Set(d, 1.f / 24), x[0], hn::Mul(hn::Set(d, 1.f / 6), x[2]));
    const auto o = hn::Mul(hn::Set(d, 1.f / 12), x[1]);
    const auto sixth = hn::Set(d, -1.f / 6);
    y[0] = hn::Mul(hn::Set(d, 0.25f), x[0]);
    y[1] = hn::Mul(sixth, hn::Add(p02, x[1]));
    y[2] = hn::Mul(sixth, hn::Sub(p02, x[1]));
    y[3] = hn::Add(e, o);
    y[4] = hn::Sub(e, o);
    y[5] = x[2];
  }
}

// y = A x (M values in, A out): the output transform's transpose, for the output gradient.
template <int M, class V>
HWY_INLINE void GradRow(const V* x, V* y) {
  if constexpr (M == 2) {  // A = [1 0; 1 1; 1 -1; 0 -1]
    y[0] = x[0];
    y[1] = hn::Add(x[0], x[1]);
    y[2] = hn::Sub(x[0], x[1]);
    y[3] = hn::Neg(x[1]);
  } else {  // A's rows: [1 0 0 0] [1 1 1 1] [1 -1 1 -1] [1 2 4 8] [1 -2 4 -8] [0 0 0 1]
    const DG d;
    const auto e = hn::Add(x[0], x[2]), o = hn::Add(x[1], x[3]);
    const auto e4 = hn::MulAdd(hn::Set(d, 4.f), x[2], x[0]);
    const auto o4 = hn::MulAdd(hn::Set(d, 8.f), x[3], hn::Add(x[1], x[1]));
    y[0] = x[0];
    y[1] = hn::Add(e, o);
    y[2] = hn::Sub(e, o);
    y[3] = hn::Add(e4, o4);
    y[4] = hn::Sub(e4, o4);
    y[5] = x[3];
  }
}

// y = Gᵀ x (A values in, 3 out): the weight transform's transpose, for the weight gradient.
template <int M, class V>
HWY_INLINE void WeightGradRow(const V* x, V* y) {
  const DG d;
  if constexpr (M == 2) {  // Gᵀ = [1 .5 .5 0; 0 .5 -.5 0; 0 .5 .5 1]
    const auto half = hn::Set(d, 0.5f);
    const auto h1 = hn::Mul(half, x[1]), h2 = hn::Mul(half, x[2]);
    y[0] = hn::Add(x[0], hn::Add(h1, h2));
    y[1] = hn::Sub(h1, h2);
    y[2] = hn::Add(hn::Add(h1, h2), x[3]);
  } else {  // Gᵀ's rows: [1/4 -1/6 -1/6 1/24 1/24 0] [0 -1/6 1/6 1/12 -1/12 0]
            //            [0 -1/6 -1/6 1/6 1/6 1]
    const auto p12 = hn::Add(x[1], x[2]), m12 = hn::Sub(x[2], x[1]);
    const auto p34 = hn::Add(x[3], x[4]), m34 = hn::Sub(x[3], x[4]);
    const auto sixth = hn::Set(d, 1.f / 6);
    y[0] = hn::MulAdd(hn::Set(d, 0.25f), x[0],
                      hn::MulAdd(hn::Set(d, 1.f / 24), p34, hn::Mul(hn::Set(d, -1.f / 6), p12)));
    y[1] = hn::MulAdd(sixth, m12, hn::Mul(hn::Set(d, 1.f / 12), m34));
    y[2] = hn::Add(hn::Mul(sixth, hn::Sub(p34, p12)), x[5]);
  }
}

// Input transform of tiles [t0, t0 + T) into v (A * A, T, C).
template <int M>
void InputTransform(const WinogradGeom& g, const float* HWY_RESTRICT x, int64_t t0, int64_t T,
                    float* HWY_RESTRICT v) {
  constexpr int A = M + 2;
  const DG d;
  const int64_t TH = (g.OH + M - 1) / M, TW = (g.OW + M - 1) / M, Cb = g.C / 16;
  for (int64_t t = 0; t < T; ++t) {
    const int64_t tg = t0 + t, n = tg / (TH * TW), th = tg % (TH * TW) / TW, tw = tg % TW;
    const int64_t ih0 = M * th - g.pt, iw0 = M * tw - g.pl;
    bool row_in[A], col_in[A];
    for (int i = 0; i < A; ++i) {
      row_in[i] = ih0 + i >= 0 && ih0 + i < g.H;
      col_in[i] = iw0 + i >= 0 && iw0 + i < g.W;
    }
    for (int64_t cb = 0; cb < Cb; ++cb) {
      for (size_t lane = 0; lane < 16; lane += kStep) {
        const float* xb = x + blocked_at(g.L, g.C, g.H * g.W, n, cb * 16 + int64_t(lane), 0);
        hn::Vec<DG> q[A][A];  // Bᵀ d: column j of the patch in, column j of q out
        SPORE_UNROLL for (int j = 0; j < A; ++j) {
          hn::Vec<DG> p[A];
          SPORE_UNROLL for (int i = 0; i < A; ++i) p[i] =
              row_in[i] && col_in[j] ? hn::LoadU(d, xb + ((ih0 + i) * g.W + iw0 + j) * g.L)
                                     : hn::Zero(d);
          hn::Vec<DG> c[A];
          InputRow<M>(p, c);
          SPORE_UNROLL for (int i = 0; i < A; ++i) q[i][j] = c[i];
        }
        float* out = v + t * g.C + cb * 16 + int64_t(lane);
        const int64_t es = T * g.C;                 // between transformed elements e
        SPORE_UNROLL for (int i = 0; i < A; ++i) {  // (Bᵀ d) B: rows
          hn::Vec<DG> r[A];
          InputRow<M>(q[i], r);
          SPORE_UNROLL for (int j = 0; j < A; ++j) hn::StoreU(r[j], d, out + (i * A + j) * es);
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

// m (E, O/16, T, 16) = for each e of the E = (m + 2)² and ob in [ob0, ob1): v[e] (T, C) @ u[e][ob]
// (C, 16).
// Two panels at once where one vector holds all 16 lanes (AVX-512): m0, m1 (R, 16) = v @ up0, up1.
// Each broadcast of v then feeds two FMAs (24 accumulators for 12 rows), so the loads (2 + R per
// input channel) no longer limit the 2R FMAs, as they do with one panel (1 + R loads for R FMAs).
template <int R>
HWY_INLINE void Product2(const float* HWY_RESTRICT v, int64_t ldv, const float* HWY_RESTRICT up0,
                         const float* HWY_RESTRICT up1, int64_t C, float* HWY_RESTRICT m0,
                         float* HWY_RESTRICT m1) {
  const DG d;
  hn::Vec<DG> a0[R], a1[R];
  SPORE_UNROLL for (int r = 0; r < R; ++r) a0[r] = a1[r] = hn::Zero(d);
  for (int64_t c = 0; c < C; ++c) {
    const auto w0 = hn::LoadU(d, up0 + c * 16), w1 = hn::LoadU(d, up1 + c * 16);
    SPORE_UNROLL for (int r = 0; r < R; ++r) {
      const auto b = hn::Set(d, v[r * ldv + c]);
      a0[r] = hn::MulAdd(b, w0, a0[r]);
      a1[r] = hn::MulAdd(b, w1, a1[r]);
    }
  }
  SPORE_UNROLL for (int r = 0; r < R; ++r) {
    hn::StoreU(a0[r], d, m0 + r * 16);
    hn::StoreU(a1[r], d, m1 + r * 16);
  }
}

void Products(const WinogradGeom& g, const float* HWY_RESTRICT v, const float* HWY_RESTRICT u,
              int64_t T, int64_t ob0, int64_t ob1, float* HWY_RESTRICT m) {
  const int64_t Ob = g.O / 16, E = (g.m + 2) * (g.m + 2);
  for (int64_t e = 0; e < E; ++e)
    for (int64_t ob = ob0; ob < ob1;) {
      const float* up = u + (e * Ob + ob) * g.C * 16;
      const float* ve = v + e * T * g.C;
      float* me = m + (e * Ob + ob) * T * 16;
      const bool pair = kNV == 1 && ob + 1 < ob1;  // the next panel: + C * 16 in u, + T * 16 in m
      int64_t t = 0;
      if (pair) {
        for (; t + kRows <= T; t += kRows)
          Product2<kRows>(ve + t * g.C, g.C, up, up + g.C * 16, g.C, me + t * 16,
                          me + (T + t) * 16);
      } else {
        for (; t + kRows <= T; t += kRows) Product<kRows>(ve + t * g.C, g.C, up, g.C, me + t * 16);
      }
      for (int64_t k = 0; k < (pair ? 2 : 1) && t < T; ++k)
        ProductTail<kRows - 1>(int(T - t), ve + t * g.C, g.C, up + k * g.C * 16, g.C,
                               me + (k * T + t) * 16);
      ob += pair ? 2 : 1;
    }
}

// Output transform of tiles [t0, t0 + T), output channel blocks [ob0, ob1), from m (A * A, O/16,
// T, 16) into y, with the epilogue (the rows and columns of an edge tile past the output dropped).
template <int M>
void OutputTransform(const WinogradGeom& g, const float* HWY_RESTRICT m, int64_t t0, int64_t T,
                     int64_t ob0, int64_t ob1, const float* HWY_RESTRICT beta,
                     const float* HWY_RESTRICT res, ConvAct act, float* HWY_RESTRICT y) {
  constexpr int A = M + 2;
  const DG d;
  const int64_t TH = (g.OH + M - 1) / M, TW = (g.OW + M - 1) / M, Ob = g.O / 16;
  const int64_t es = Ob * T * 16;  // between transformed elements e
  for (int64_t t = 0; t < T; ++t) {
    const int64_t tg = t0 + t, n = tg / (TH * TW), th = tg % (TH * TW) / TW, tw = tg % TW;
    const int64_t oh0 = M * th, ow0 = M * tw;
    const int rows = int(std::min<int64_t>(M, g.OH - oh0)),
              cols = int(std::min<int64_t>(M, g.OW - ow0));
    for (int64_t ob = ob0; ob < ob1; ++ob) {
      const float* mt = m + (ob * T + t) * 16;
      for (size_t lane = 0; lane < 16; lane += kStep) {
        const int64_t base = blocked_at(g.L, g.O, g.OH * g.OW, n, ob * 16 + int64_t(lane), 0);
        hn::Vec<DG> s[M][A];  // M A: row i of M in, column i of s out
        SPORE_UNROLL for (int i = 0; i < A; ++i) {
          hn::Vec<DG> r[A], o[M];
          SPORE_UNROLL for (int j = 0; j < A; ++j) r[j] =
              hn::LoadU(d, mt + (i * A + j) * es + lane);
          OutputRow<M>(r, o);
          SPORE_UNROLL for (int c = 0; c < M; ++c) s[c][i] = o[c];
        }
        const auto b = hn::LoadU(d, beta + ob * 16 + int64_t(lane));
        SPORE_UNROLL for (int c = 0; c < M; ++c) {  // Aᵀ (M A): output column c
          if (c >= cols) break;
          hn::Vec<DG> o[M];
          OutputRow<M>(s[c], o);
          SPORE_UNROLL for (int a = 0; a < M; ++a) {
            if (a >= rows) break;
            simd::HWY_NAMESPACE::conv_finish_f(d, hn::Add(o[a], b), res, act, y,
                                               base + ((oh0 + a) * g.OW + ow0 + c) * g.L);
          }
        }
      }
    }
  }
}

// ---- weight gradient ---------------------------------------------------------------------------
// dU[e] (C, O) = sum over tiles of V[e]ᵀ dM[e], with V = Bᵀ d B the forward's input transform and
// dM = A dY Aᵀ the transform of the output gradient's 2x2 tile (the transpose of the output
// transform; outputs past an odd-sized edge are zeros); then dw = Gᵀ dU G (the transpose of the
// weight transform). Each thread sums its blocks of tiles into its own dU.

// Output-gradient transform of tiles [t0, t0 + T) into dm (A * A, O/16, T, 16): A dY Aᵀ, the
// outputs past the edge zeros.
template <int M>
void OutputGradTransform(const WinogradGeom& g, const float* HWY_RESTRICT dy, int64_t t0, int64_t T,
                         float* HWY_RESTRICT dm) {
  constexpr int A = M + 2;
  const DG d;
  const int64_t TH = (g.OH + M - 1) / M, TW = (g.OW + M - 1) / M, Ob = g.O / 16;
  const int64_t es = Ob * T * 16;  // between transformed elements e
  for (int64_t t = 0; t < T; ++t) {
    const int64_t tg = t0 + t, n = tg / (TH * TW), th = tg % (TH * TW) / TW, tw = tg % TW;
    const int64_t oh0 = M * th, ow0 = M * tw;
    const int rows = int(std::min<int64_t>(M, g.OH - oh0)),
              cols = int(std::min<int64_t>(M, g.OW - ow0));
    for (int64_t ob = 0; ob < Ob; ++ob) {
      for (size_t lane = 0; lane < 16; lane += kStep) {
        const float* yb =
            dy + blocked_at(g.L, g.O, g.OH * g.OW, n, ob * 16 + int64_t(lane), oh0 * g.OW + ow0);
        hn::Vec<DG> r[A][M];  // A dY: column c of dY in, column c of r out
        SPORE_UNROLL for (int c = 0; c < M; ++c) {
          hn::Vec<DG> col[M], o[A];
          SPORE_UNROLL for (int i = 0; i < M; ++i) col[i] =
              i < rows && c < cols ? hn::LoadU(d, yb + (i * g.OW + c) * g.L) : hn::Zero(d);
          GradRow<M>(col, o);
          SPORE_UNROLL for (int i = 0; i < A; ++i) r[i][c] = o[i];
        }
        float* out = dm + (ob * T + t) * 16 + int64_t(lane);
        SPORE_UNROLL for (int i = 0; i < A; ++i) {  // (A dY) Aᵀ: rows
          hn::Vec<DG> o[A];
          GradRow<M>(r[i], o);
          SPORE_UNROLL for (int j = 0; j < A; ++j) hn::StoreU(o[j], d, out + (i * A + j) * es);
        }
      }
    }
  }
}

// du (R, 16) (+)= v (T rows of stride ldv, R columns)ᵀ @ dm (T, 16): R input channels by 16 output
// channels in registers over the whole block of tiles.
template <int R>
HWY_INLINE void ProductWgrad(const float* HWY_RESTRICT v, int64_t ldv, const float* HWY_RESTRICT dm,
                             int64_t T, bool first, float* HWY_RESTRICT du) {
  const DG d;
  hn::Vec<DG> acc[R][kNV];
  SPORE_UNROLL for (int r = 0; r < R; ++r) SPORE_UNROLL for (size_t k = 0; k < kNV; ++k) acc[r][k] =
      first ? hn::Zero(d) : hn::LoadU(d, du + r * 16 + k * kStep);
  for (int64_t t = 0; t < T; ++t) {
    hn::Vec<DG> w[kNV];
    SPORE_UNROLL for (size_t k = 0; k < kNV; ++k) w[k] = hn::LoadU(d, dm + t * 16 + k * kStep);
    SPORE_UNROLL for (int r = 0; r < R; ++r) {
      const auto b = hn::Set(d, v[t * ldv + r]);
      SPORE_UNROLL for (size_t k = 0; k < kNV; ++k) acc[r][k] = hn::MulAdd(b, w[k], acc[r][k]);
    }
  }
  SPORE_UNROLL for (int r = 0; r < R; ++r) SPORE_UNROLL for (size_t k = 0; k < kNV; ++k)
      hn::StoreU(acc[r][k], d, du + r * 16 + k * kStep);
}

// Input channels per register tile of the weight gradient: 8 on AVX-512 (with two panels, 16
// accumulators; C, a multiple of 16, leaves no remainder), kRows otherwise.
constexpr int kWRows = kNV == 1 ? 8 : kRows;

// The remainder columns (fewer than kWRows) of a weight-gradient panel, one template per count.
template <int R>
HWY_INLINE void ProductWgradTail(int rows, const float* v, int64_t ldv, const float* dm, int64_t T,
                                 bool first, float* du) {
  if constexpr (R > 0) {
    if (rows == R) return ProductWgrad<R>(v, ldv, dm, T, first, du);
    ProductWgradTail<R - 1>(rows, v, ldv, dm, T, first, du);
  }
}

// The same for two panels of output channels at once (AVX-512, see Product2).
template <int R>
HWY_INLINE void ProductWgrad2(const float* HWY_RESTRICT v, int64_t ldv,
                              const float* HWY_RESTRICT dm0, const float* HWY_RESTRICT dm1,
                              int64_t T, bool first, float* HWY_RESTRICT du0,
                              float* HWY_RESTRICT du1) {
  const DG d;
  hn::Vec<DG> a0[R], a1[R];
  SPORE_UNROLL for (int r = 0; r < R; ++r) {
    a0[r] = first ? hn::Zero(d) : hn::LoadU(d, du0 + r * 16);
    a1[r] = first ? hn::Zero(d) : hn::LoadU(d, du1 + r * 16);
  }
  for (int64_t t = 0; t < T; ++t) {
    const auto w0 = hn::LoadU(d, dm0 + t * 16), w1 = hn::LoadU(d, dm1 + t * 16);
    SPORE_UNROLL for (int r = 0; r < R; ++r) {
      const auto b = hn::Set(d, v[t * ldv + r]);
      a0[r] = hn::MulAdd(b, w0, a0[r]);
      a1[r] = hn::MulAdd(b, w1, a1[r]);
    }
  }
  SPORE_UNROLL for (int r = 0; r < R; ++r) {
    hn::StoreU(a0[r], d, du0 + r * 16);
    hn::StoreU(a1[r], d, du1 + r * 16);
  }
}

// Blocks [b0, b1) of T tiles summed into du (A * A, O/16, C, 16) on the calling thread (first: du
// holds nothing yet).
template <int M>
void WgradBlocksOf(const WinogradGeom& g, const float* x, const float* dy, int64_t T, int64_t b0,
                   int64_t b1, float* du) {
  constexpr int64_t E = (M + 2) * (M + 2);
  const int64_t tiles = tiles_of(g), Ob = g.O / 16;
  float* v = thread_scratch(size_t(E * T * (g.C + g.O)));
  float* dm = v + E * T * g.C;
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t t0 = b * T, Tb = std::min(T, tiles - t0);
    InputTransform<M>(g, x, t0, Tb, v);
    OutputGradTransform<M>(g, dy, t0, Tb, dm);
    const bool first = b == b0;
    for (int64_t e = 0; e < E; ++e)
      for (int64_t ob = 0; ob < Ob;) {
        const float* ve = v + e * Tb * g.C;
        const float* dme = dm + (e * Ob + ob) * Tb * 16;
        float* due = du + (e * Ob + ob) * g.C * 16;
        const bool pair = kNV == 1 && ob + 1 < Ob;  // as Products: two panels per broadcast
        int64_t c = 0;
        if (pair) {
          for (; c + kWRows <= g.C; c += kWRows)
            ProductWgrad2<kWRows>(ve + c, g.C, dme, dme + Tb * 16, Tb, first, due + c * 16,
                                  due + (g.C + c) * 16);
        } else {
          for (; c + kWRows <= g.C; c += kWRows)
            ProductWgrad<kWRows>(ve + c, g.C, dme, Tb, first, due + c * 16);
        }
        if (c < g.C)
          for (int64_t k = 0; k < (pair ? 2 : 1); ++k)
            ProductWgradTail<kWRows - 1>(int(g.C - c), ve + c, g.C, dme + k * Tb * 16, Tb, first,
                                         due + (k * g.C + c) * 16);
        ob += pair ? 2 : 1;
      }
  }
}
void WgradBlocks(const WinogradGeom& g, const float* x, const float* dy, int64_t T, int64_t b0,
                 int64_t b1, float* du) {
  if (g.m == 4) return WgradBlocksOf<4>(g, x, dy, T, b0, b1, du);
  WgradBlocksOf<2>(g, x, dy, T, b0, b1, du);
}

// Rows [k0, k1) (k = (ob, c)) of dw (O, C, 3, 3) = Gᵀ (sum of the parts' dU) G, 16 output channels
// at a time; parts: `parts` buffers du (A * A, O/16, C, 16), `stride` floats apart.
template <int M>
void WgradFinishOf(const WinogradGeom& g, const float* HWY_RESTRICT du, int64_t parts,
                   int64_t stride, float* HWY_RESTRICT dw, int64_t k0, int64_t k1) {
  constexpr int A = M + 2;
  const DG d;
  const int64_t Ob = g.O / 16, es = Ob * g.C * 16;
  HWY_ALIGN float out[9][16];
  for (int64_t k = k0; k < k1; ++k) {
    const int64_t ob = k / g.C, c = k % g.C;
    for (size_t lane = 0; lane < 16; lane += kStep) {
      const float* at = du + (ob * g.C + c) * 16 + int64_t(lane);
      hn::Vec<DG> t[3][A];  // Gᵀ dU: column j of dU in, column j of t out
      SPORE_UNROLL for (int j = 0; j < A; ++j) {
        hn::Vec<DG> col[A], o[3];
        SPORE_UNROLL for (int i = 0; i < A; ++i) {
          col[i] = hn::LoadU(d, at + (i * A + j) * es);
          for (int64_t p = 1; p < parts; ++p)
            col[i] = hn::Add(col[i], hn::LoadU(d, at + p * stride + (i * A + j) * es));
        }
        WeightGradRow<M>(col, o);
        SPORE_UNROLL for (int a = 0; a < 3; ++a) t[a][j] = o[a];
      }
      SPORE_UNROLL for (int a = 0; a < 3; ++a) {  // (Gᵀ dU) G: rows
        hn::Vec<DG> o[3];
        WeightGradRow<M>(t[a], o);
        SPORE_UNROLL for (int b = 0; b < 3; ++b) hn::Store(o[b], d, &out[a * 3 + b][lane]);
      }
    }
    for (int64_t l = 0; l < 16; ++l)
      for (int tap = 0; tap < 9; ++tap) dw[((ob * 16 + l) * g.C + c) * 9 + tap] = out[tap][l];
  }
}
void WgradFinish(const WinogradGeom& g, const float* HWY_RESTRICT du, int64_t parts, int64_t stride,
                 float* HWY_RESTRICT dw, int64_t k0, int64_t k1) {
  if (g.m == 4) return WgradFinishOf<4>(g, du, parts, stride, dw, k0, k1);
  WgradFinishOf<2>(g, du, parts, stride, dw, k0, k1);
}

// Rows [k0, k1) of a transformed weight u (A * A, P, Q, 16): row k = (panel p, row q) = (k / Q,
// k % Q) holds the 16 lanes' G g Gᵀ, one 64-byte line per element e. Lane l's 3x3 kernel g is the
// 9 floats at w + p * panel_stride + q * row_stride + l * lane_stride (rotated by 180 degrees when
// flip), times scale[p * 16 + l] when scale is given. Vectorised over the lanes (gathers), so it
// writes each line of u whole.
template <int M>
void TransformWeightRowsOf(const float* HWY_RESTRICT w, int64_t P, int64_t Q, int64_t panel_stride,
                           int64_t row_stride, int64_t lane_stride, bool flip,
                           const float* HWY_RESTRICT scale, float* HWY_RESTRICT u, int64_t k0,
                           int64_t k1) {
  constexpr int A = M + 2;
  const DG d;
  const hn::RebindToSigned<DG> di;
  for (int64_t k = k0; k < k1; ++k) {
    const int64_t p = k / Q, q = k % Q;
    for (size_t lane = 0; lane < 16; lane += kStep) {
      const float* base = w + p * panel_stride + q * row_stride + int64_t(lane) * lane_stride;
      const auto idx = hn::Mul(hn::Iota(di, 0), hn::Set(di, int32_t(lane_stride)));
      hn::Vec<DG> g[9];
      SPORE_UNROLL for (int t = 0; t < 9; ++t) g[t] =
          hn::GatherIndex(d, base + (flip ? 8 - t : t), idx);
      hn::Vec<DG> gk[A][3];  // G g: column j of g in, column j of G g out
      SPORE_UNROLL for (int j = 0; j < 3; ++j) {
        const hn::Vec<DG> col[3] = {g[j], g[3 + j], g[6 + j]};
        hn::Vec<DG> r[A];
        WeightRow<M>(col, r);
        SPORE_UNROLL for (int i = 0; i < A; ++i) gk[i][j] = r[i];
      }
      const auto s = scale ? hn::LoadU(d, scale + p * 16 + int64_t(lane)) : hn::Set(d, 1.f);
      float* out = u + (p * Q + q) * 16 + int64_t(lane);
      const int64_t es = P * Q * 16;              // between elements e
      SPORE_UNROLL for (int i = 0; i < A; ++i) {  // (G g) Gᵀ: rows
        hn::Vec<DG> r[A];
        WeightRow<M>(gk[i], r);
        SPORE_UNROLL for (int j = 0; j < A; ++j)
            hn::StoreU(hn::Mul(r[j], s), d, out + (i * A + j) * es);
      }
    }
  }
}
void TransformWeightRows(const float* HWY_RESTRICT w, int64_t P, int64_t Q, int64_t panel_stride,
                         int64_t row_stride, int64_t lane_stride, bool flip,
                         const float* HWY_RESTRICT scale, float* HWY_RESTRICT u, int64_t m,
                         int64_t k0, int64_t k1) {
  if (m == 4)
    return TransformWeightRowsOf<4>(w, P, Q, panel_stride, row_stride, lane_stride, flip, scale, u,
                                    k0, k1);
  TransformWeightRowsOf<2>(w, P, Q, panel_stride, row_stride, lane_stride, flip, scale, u, k0, k1);
}

// Tasks [k0, k1) on the calling thread: task k is part k % parts (a 1/parts share of the output
// channel blocks) of block k / parts of T tiles (the last block may be short).
template <int M>
void TasksOf(const WinogradGeom& g, const float* x, const float* u, const float* beta,
             const float* res, ConvAct act, float* y, int64_t T, int64_t parts, int64_t k0,
             int64_t k1) {
  constexpr int64_t E = (M + 2) * (M + 2);
  const int64_t tiles = tiles_of(g), Ob = g.O / 16;
  float* v = thread_scratch(size_t(E * T * (g.C + g.O)));
  float* m = v + E * T * g.C;
  int64_t transformed = -1;  // the block v holds
  for (int64_t k = k0; k < k1; ++k) {
    const int64_t b = k / parts, part = k % parts;
    const int64_t t0 = b * T, Tb = std::min(T, tiles - t0);
    const int64_t ob0 = part * Ob / parts, ob1 = (part + 1) * Ob / parts;
    if (b != transformed) InputTransform<M>(g, x, t0, Tb, v);
    transformed = b;
    Products(g, v, u, Tb, ob0, ob1, m);
    OutputTransform<M>(g, m, t0, Tb, ob0, ob1, beta, res, act, y);
  }
}
void Tasks(const WinogradGeom& g, const float* x, const float* u, const float* beta,
           const float* res, ConvAct act, float* y, int64_t T, int64_t parts, int64_t k0,
           int64_t k1) {
  if (g.m == 4) return TasksOf<4>(g, x, u, beta, res, act, y, T, parts, k0, k1);
  TasksOf<2>(g, x, u, beta, res, act, y, T, parts, k0, k1);
}

size_t VectorLanes() { return kStep; }

}  // namespace HWY_NAMESPACE
}  // namespace spore::cpu::wino
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace spore::cpu {
namespace wino {
HWY_EXPORT(Tasks);
HWY_EXPORT(TransformWeightRows);
HWY_EXPORT(WgradBlocks);
HWY_EXPORT(WgradFinish);
HWY_EXPORT(VectorLanes);

float* thread_scratch(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}
}  // namespace wino

int64_t winograd_tile(int64_t N, int64_t OH, int64_t OW, int64_t C, int64_t O) {
  const int64_t tiles4 = N * ((OH + 3) / 4) * ((OW + 3) / 4);
  const bool enough_tiles = tiles4 >= kMinF4TilesPerThread * get_num_threads();
  const bool small_weights = 36 * C * O * int64_t(sizeof(float)) <= kMaxF4WeightBytes;
  return enough_tiles && small_weights ? 4 : 2;
}

bool winograd_takes_lanes(int64_t lanes) {
  return lanes == 16 || (lanes == 8 && HWY_DYNAMIC_DISPATCH(wino::VectorLanes)() <= 8);
}

void winograd_transform_weights(const float* w, int64_t O, int64_t C, const float* bias,
                                const float* scale, const float* shift, float* u, float* beta,
                                int64_t m) {
  SPORE_ASSERT(O % 16 == 0 && C % 16 == 0, "winograd: channels must be multiples of 16, got O=", O,
               ", C=", C);
  SPORE_ASSERT(m == 2 || m == 4, "winograd: output tiles of 2 or 4, got ", m);
  for (int64_t o = 0; o < O; ++o) {
    const float s = scale ? scale[o] : 1.f;
    beta[o] = (bias ? bias[o] : 0.f) * s + (shift ? shift[o] : 0.f);
  }
  // Panels: 16 output channels (lanes, C * 9 floats apart); rows: input channels. In training this
  // runs every step (u is up to 16 MB): parallel over rows.
  const int64_t P = O / 16;
  parallel_for(0, P * C, 64, [&](int64_t k0, int64_t k1) {
    HWY_DYNAMIC_DISPATCH(wino::TransformWeightRows)
    (w, P, C, 16 * C * 9, 9, C * 9, false, scale, u, m, k0, k1);
  });
}

void winograd_transform_weights_backward_data(const float* w, int64_t O, int64_t C, float* u,
                                              int64_t m) {
  SPORE_ASSERT(O % 16 == 0 && C % 16 == 0, "winograd: channels must be multiples of 16, got O=", O,
               ", C=", C);
  // The data gradient's conv maps O channels to C: its kernel (c, o) is w[o][c] rotated. Panels:
  // 16 input channels of the forward conv (lanes, 9 floats apart); rows: its output channels.
  const int64_t P = C / 16;
  parallel_for(0, P * O, 64, [&](int64_t k0, int64_t k1) {
    HWY_DYNAMIC_DISPATCH(wino::TransformWeightRows)
    (w, P, O, 16 * 9, C * 9, 9, true, nullptr, u, m, k0, k1);
  });
}

void winograd_conv2d(const WinogradGeom& g, const float* x, const float* u, const float* beta,
                     const float* residual, ConvAct act, float* y) {
  SPORE_ASSERT(g.O % 16 == 0 && g.C % 16 == 0 && winograd_takes_lanes(g.L),
               "winograd: channels must be multiples of 16 and the lanes ones the kernels take, "
               "got O=",
               g.O, ", C=", g.C, ", lanes ", g.L);
  SPORE_ASSERT(g.m == 2 || g.m == 4, "winograd: output tiles of 2 or 4, got ", g.m);
  const int64_t tiles = wino::tiles_of(g), E = (g.m + 2) * (g.m + 2);
  if (tiles == 0) return;
  // Work for every thread. With many tiles, blocks of tiles (smaller blocks for smaller inputs).
  // With few (an 8x8 map at batch 1) the threads split the output channels of one block instead,
  // so each reads only its share of u: there, reading u is most of the cost.
  const int64_t threads = get_num_threads();
  int64_t T, parts = 1;
  if (tiles >= threads * wino::kMinTilesPerBlock) {
    T = std::min(wino::block_tiles(g.C, E), (tiles + threads - 1) / threads);
  } else {
    T = std::min(wino::block_tiles(g.C, E), tiles);
    parts = std::min(g.O / 16, (threads * T + tiles - 1) / tiles);
  }
  const int64_t tasks = (tiles + T - 1) / T * parts;
  // Taken in pieces as the threads come (parallel_for_dynamic): a late thread does not hold up
  // the op by its fixed share. A piece is about a sixteenth of a thread's share.
  parallel_for_dynamic(0, tasks, tasks / (16 * threads), [&](int64_t k0, int64_t k1) {
    HWY_DYNAMIC_DISPATCH(wino::Tasks)(g, x, u, beta, residual, act, y, T, parts, k0, k1);
  });
}

void winograd_backward_weight(const WinogradGeom& g, const float* x, const float* dy, float* dw) {
  SPORE_ASSERT(g.O % 16 == 0 && g.C % 16 == 0 && winograd_takes_lanes(g.L),
               "winograd: channels must be multiples of 16 and the lanes ones the kernels take, "
               "got O=",
               g.O, ", C=", g.C, ", lanes ", g.L);
  SPORE_ASSERT(g.m == 2 || g.m == 4, "winograd: output tiles of 2 or 4, got ", g.m);
  const int64_t tiles = wino::tiles_of(g), E = (g.m + 2) * (g.m + 2);
  if (tiles == 0) {
    std::fill_n(dw, g.O * g.C * 9, 0.f);
    return;
  }
  // Blocks as large as a 4 MiB scratch (V and dM) allows, at least the forward's: each block
  // reads and writes the thread's dU (E C O floats) once, so fewer blocks is less traffic.
  const int64_t threads = get_num_threads();
  const int64_t T = std::min(std::max(wino::block_tiles(g.C, E), 1048576 / (E * (g.C + g.O))),
                             (tiles + threads - 1) / threads);
  const int64_t blocks = (tiles + T - 1) / T, parts = std::min(threads, blocks);
  const int64_t stride = E * g.C * g.O;
  Tensor du = Tensor::empty({parts * stride}, kFloat32);
  float* dup = du.data<float>();
  parallel_for(0, parts, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) HWY_DYNAMIC_DISPATCH(wino::WgradBlocks)
    (g, x, dy, T, p * blocks / parts, (p + 1) * blocks / parts, dup + p * stride);
  });
  parallel_for(0, g.O / 16 * g.C, 16, [&](int64_t k0, int64_t k1) {
    HWY_DYNAMIC_DISPATCH(wino::WgradFinish)(g, dup, parts, stride, dw, k0, k1);
  });
}

void winograd_run(ops::KernelContext& ctx, const ConvDesc& d) {
  SPORE_ASSERT(d.kh == 3 && d.kw == 3 && d.sh == 1 && d.sw == 1 && d.blocked_x && d.blocked_y,
               "winograd_run: the list's predicate should have declined ", d.str());
  Tensor& out = ctx.outputs[0];
  const Tensor a = dense(ctx.inputs[0]), w = dense(ctx.inputs[1]);  // (dy, x) for the weight grad
  if (d.prop == ConvProp::kBackwardWeight) {
    const int64_t m = winograd_tile(d.N, d.OH, d.OW, d.C, d.O);
    const WinogradGeom g{d.N, d.C, d.H, d.W, d.O, d.OH, d.OW, d.pt, d.pl, d.lanes, m};
    return winograd_backward_weight(g, w.data<float>(), a.data<float>(), out.data<float>());
  }
  // The transformed weights: made in every call, as the weights change every step (a small cost
  // next to the conv: 16 or 36 C O floats written against 2 N H W C O 9 flops). The tile size as
  // for constant weights, by the conv's output (dx for the data gradient).
  const bool fwd = d.prop == ConvProp::kForward;
  const int64_t m =
      winograd_tile(d.N, fwd ? d.OH : d.H, fwd ? d.OW : d.W, fwd ? d.C : d.O, fwd ? d.O : d.C);
  Tensor u = Tensor::empty({(m + 2) * (m + 2) * d.C * d.O}, kFloat32);
  if (fwd) {
    size_t i = 2;
    const Tensor b = d.bias ? dense(ctx.inputs[i++]) : Tensor();
    const Tensor scale = d.scale ? dense(ctx.inputs[i++]) : Tensor();
    const Tensor shift = d.scale ? dense(ctx.inputs[i++]) : Tensor();
    const Tensor r = d.residual ? dense(ctx.inputs[i++]) : Tensor();
    Tensor beta = Tensor::empty({d.O}, kFloat32);
    winograd_transform_weights(w.data<float>(), d.O, d.C, d.bias ? b.data<float>() : nullptr,
                               d.scale ? scale.data<float>() : nullptr,
                               d.scale ? shift.data<float>() : nullptr, u.data<float>(),
                               beta.data<float>(), m);
    const WinogradGeom g{d.N, d.C, d.H, d.W, d.O, d.OH, d.OW, d.pt, d.pl, d.lanes, m};
    return winograd_conv2d(g, a.data<float>(), u.data<float>(), beta.data<float>(),
                           d.residual ? r.data<float>() : nullptr, conv_act(d.act),
                           out.data<float>());
  }
  // Backward data: dx = conv(dy, w rotated and transposed), padded by 2 - p on each side, so that
  // the output is x's size: dx (N, C, H, W) from dy (N, O, OH, OW).
  winograd_transform_weights_backward_data(w.data<float>(), d.O, d.C, u.data<float>(), m);
  Tensor zero = Tensor::empty({d.C}, kFloat32);
  std::fill_n(zero.data<float>(), d.C, 0.f);
  const WinogradGeom g{d.N, d.O, d.OH, d.OW, d.C, d.H, d.W, 2 - d.pt, 2 - d.pl, d.lanes, m};
  winograd_conv2d(g, a.data<float>(), u.data<float>(), zero.data<float>(), nullptr, ConvAct::kNone,
                  out.data<float>());
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
      ctx.outputs[0].data<float>(), ctx.outputs[1].data<float>(), ctx.attrs.get_int("tile", 2));
}

// conv2d_winograd(x, u, beta[, residual]) -> y, all blocked (in 16 or 8 lanes) but u and beta.
void conv2d_winograd_kernel(ops::KernelContext& ctx) {
  Tensor& y = ctx.outputs[0];
  if (y.numel() == 0) return;
  const Tensor x = dense(ctx.inputs[0]), u = dense(ctx.inputs[1]), beta = dense(ctx.inputs[2]);
  const bool has_res = ctx.attrs.get_bool("has_residual", false);
  const Tensor r = has_res ? dense(ctx.inputs[3]) : Tensor();
  const auto pad = ctx.attrs.get_ints("padding");
  const int64_t L = x.size(4);
  const WinogradGeom g{
      x.size(0), x.size(1) * L, x.size(2), x.size(3), y.size(1) * L,          y.size(2),
      y.size(3), pad[0],        pad[2],    L,         u.size(0) == 36 ? 4 : 2};
  const ConvAct act = conv_act(ctx.attrs.has("act") ? ctx.attrs.get_string("act") : "");
  winograd_conv2d(g, x.data<float>(), u.data<float>(), beta.data<float>(),
                  has_res ? r.data<float>() : nullptr, act, y.data<float>());
}

}  // namespace

SPORE_CPU_KERNEL(WinogradWeights, winograd_weights_kernel, kFloat32);
SPORE_CPU_KERNEL(Conv2dWinograd, conv2d_winograd_kernel, kFloat32);

}  // namespace spore::cpu
#endif  // HWY_ONCE
