// Direct convolution with packed constant weights on nChw16c or nChw8c activations (see
// conv_packed.h). Highway, run-time dispatch.
//
// Where the conv pads, the input is first copied into a zero-bordered buffer (N, C/L, Hp, Wp, L),
// so the products read every tap without bounds checks; an unpadded conv reads x in place. The
// work is cut into tasks (chunk of kChunkRows output pixels, group of 16 output channels), chunk
// major: a thread's consecutive tasks reuse one chunk's input from L2 while the weight panels
// (kh * kw * C * 16 floats each) stream past, and at batch 1 the threads split the output channels
// (each reads half the weights). Per task, register tiles run over all of K = kh * kw * C (AVX2:
// 6 pixels x 16 channels, 12 accumulators; AVX-512: 12 pixels x 32 channels, 24), then the
// epilogue (+ beta, + residual, relu or silu) stores into y's blocked layout. The weights and the
// register tile keep 16-channel groups whatever the activations' block L: with L = 8 a group's
// input channels are two blocks' lanes and its outputs two blocks' (a vector never spans two
// blocks: packed_takes_lanes). (Cutting K into passes whose weights stay in L1, with the partial
// sums parked between passes, measured slower here: bench/micro/constant_conv.cpp.)
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/kernels/conv_packed.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on

#include "backends/cpu/kernels/conv_packed.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/kernels/nn_util.h"
#include "backends/cpu/kernels/simd_math-inl.h"
#include "backends/cpu/ops/ops.h"
#include "core/parallel.h"
#include "spore/error.h"

#ifndef SPORE_CONV_PACKED_ONCE
#define SPORE_CONV_PACKED_ONCE
namespace spore::cpu::pconv {
constexpr int64_t kChunkRows = 192;  // output pixels per task
constexpr int kMaxTaps = 64;         // kh * kw
// Zero-bordered copies up to this many floats are made by one thread (see pad_input).
constexpr int64_t kSerialPadFloats = int64_t(1) << 17;
// The input as the products read it: x itself or its zero-bordered copy, (N, C/L, Hs, Ws, L).
struct Source {
  const float* x;
  int64_t Hs, Ws;
};
}  // namespace spore::cpu::pconv
#endif

#ifndef SPORE_UNROLL
#define SPORE_UNROLL _Pragma("GCC unroll 32")
#endif

HWY_BEFORE_NAMESPACE();
namespace spore::cpu::pconv {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
constexpr size_t kL = hn::MaxLanes(DF());
constexpr size_t kNV = kL >= 16 ? 1 : 16 / kL;                // vectors per 16-channel group
constexpr size_t kStep = kL >= 16 ? 16 : kL;                  // lanes per vector actually used
constexpr int kRows = int(12 / kNV) > 0 ? int(12 / kNV) : 1;  // 12 accumulators per group
// Groups of 16 output channels per register tile: where one vector holds a group (AVX-512), two
// groups share each broadcast input (24 accumulators: 2 weight loads and 12 broadcasts per 24
// multiply-adds, where one group's tile needs 13 loads per 12 and the loads bound it).
constexpr int kGroups = kNV == 1 ? 2 : 1;
using DG = hn::CappedTag<float, kStep>;

size_t VectorLanes() { return kStep; }

// The tiles' epilogue: + beta, + residual, relu or silu, stored into y blocked in L lanes.
// out_at: each pixel's offset in y (channel 0); the tile's groups are ob, ob + 1, ...
template <int64_t L, int G, int R>
HWY_INLINE void Epilogue(const PackedConvGeom& g, hn::Vec<DG> (&acc)[R][G * kNV],
                         const int64_t* out_at, int64_t ob, const float* HWY_RESTRICT beta,
                         const float* HWY_RESTRICT res, ConvAct act, float* HWY_RESTRICT y) {
  const DG d;
  const int64_t out_plane = g.OH * g.OW * L;
  SPORE_UNROLL for (size_t k = 0; k < G * kNV; ++k) {
    // The vector's first output channel: group k / kNV of the tile, its (k % kNV)-th vector.
    const int64_t c = (ob + int64_t(k / kNV)) * 16 + int64_t(k % kNV * kStep);
    const auto b = hn::LoadU(d, beta + c);
    SPORE_UNROLL for (int r = 0; r < R; ++r) {
      simd::HWY_NAMESPACE::conv_finish_f(d, hn::Add(acc[r][k], b), res, act, y,
                                         out_at[r] + c / L * out_plane + c % L);
    }
  }
}

// R output pixels for the G output-channel groups ob, ob + 1, ... (16 channels each), over all K
// units (a unit is one (tap, group of 16 input channels): 256 weights at wo + unit * 256 in ob's
// panel (kh, kw, C, 16); the next group's panel follows at wo + panel), then the epilogue into y.
// The activations are blocked in L lanes (16 or 8: an input group is one block or two). in_at /
// out_at: the pixels' offsets in the source (tap 0, channel 0) and in y (channel 0).
template <int64_t L, int G, int R>
HWY_INLINE void Tile(const PackedConvGeom& g, const Source& s, const int64_t* tap_off,
                     const int64_t* in_at, const int64_t* out_at, int64_t ob,
                     const float* HWY_RESTRICT wo, const float* HWY_RESTRICT beta,
                     const float* HWY_RESTRICT res, ConvAct act, float* HWY_RESTRICT y) {
  const DG d;
  const int64_t groups = g.C / 16, plane = s.Hs * s.Ws * L;
  const int64_t units = g.kh * g.kw * groups, panel = units * 256;
  const float* base[R];
  SPORE_UNROLL for (int r = 0; r < R; ++r) base[r] = s.x + in_at[r];
  hn::Vec<DG> acc[R][G * kNV];
  SPORE_UNROLL for (int r = 0; r < R; ++r) SPORE_UNROLL for (size_t k = 0; k < G * kNV; ++k)
      acc[r][k] = hn::Zero(d);
  const float* w = wo;
  int64_t tap = 0, cg = 0;
  for (int64_t u = 0; u < units; ++u, w += 256) {
    const int64_t off = tap_off[tap] + cg * (16 / L) * plane;  // the group's first block
    if (++cg == groups) cg = 0, ++tap;
    SPORE_UNROLL for (int l = 0; l < 16; ++l) {
      hn::Vec<DG> wv[G * kNV];
      SPORE_UNROLL for (size_t k = 0; k < G * kNV; ++k) wv[k] =
          hn::LoadU(d, w + int64_t(k / kNV) * panel + l * 16 + int64_t(k % kNV * kStep));
      const int64_t at = off + (l / L) * plane + l % L;  // input channel cg * 16 + l
      SPORE_UNROLL for (int r = 0; r < R; ++r) {
        const auto b = hn::Set(d, base[r][at]);
        SPORE_UNROLL for (size_t k = 0; k < G * kNV; ++k) acc[r][k] =
            hn::MulAdd(b, wv[k], acc[r][k]);
      }
    }
  }
  Epilogue<L, G, R>(g, acc, out_at, ob, beta, res, act, y);
}

template <int64_t L, int G, int R>
HWY_INLINE void TileTail(int rows, const PackedConvGeom& g, const Source& s, const int64_t* tap_off,
                         const int64_t* in_at, const int64_t* out_at, int64_t ob, const float* wo,
                         const float* beta, const float* res, ConvAct act, float* y) {
  if constexpr (R > 0) {
    if (rows == R) return Tile<L, G, R>(g, s, tap_off, in_at, out_at, ob, wo, beta, res, act, y);
    TileTail<L, G, R - 1>(rows, g, s, tap_off, in_at, out_at, ob, wo, beta, res, act, y);
  }
}

// Tile for a plain (N, C, H, W) input of any C (a network's stem: 3 colour channels) into y
// blocked in L lanes: K runs over (tap, channel), one input channel and 16 weights per group at a
// time (a group's panel is K * 16 weights).
template <int64_t L, int G, int R>
HWY_INLINE void TilePlain(const PackedConvGeom& g, const Source& s, const int64_t* k_off,
                          const int64_t* in_at, const int64_t* out_at, int64_t ob,
                          const float* HWY_RESTRICT wo, const float* HWY_RESTRICT beta,
                          const float* HWY_RESTRICT res, ConvAct act, float* HWY_RESTRICT y) {
  const DG d;
  const int64_t K = g.kh * g.kw * g.C, panel = K * 16;
  const float* base[R];
  SPORE_UNROLL for (int r = 0; r < R; ++r) base[r] = s.x + in_at[r];
  hn::Vec<DG> acc[R][G * kNV];
  SPORE_UNROLL for (int r = 0; r < R; ++r) SPORE_UNROLL for (size_t k = 0; k < G * kNV; ++k)
      acc[r][k] = hn::Zero(d);
  const float* w = wo;
  // k_off: each (tap, channel)'s offset from a pixel's first input, in the weights' order.
  for (int64_t u = 0; u < K; ++u, w += 16) {
    hn::Vec<DG> wv[G * kNV];
    SPORE_UNROLL for (size_t k = 0; k < G * kNV; ++k) wv[k] =
        hn::LoadU(d, w + int64_t(k / kNV) * panel + int64_t(k % kNV * kStep));
    const int64_t at = k_off[u];
    SPORE_UNROLL for (int r = 0; r < R; ++r) {
      const auto b = hn::Set(d, base[r][at]);
      SPORE_UNROLL for (size_t k = 0; k < G * kNV; ++k) acc[r][k] = hn::MulAdd(b, wv[k], acc[r][k]);
    }
  }
  Epilogue<L, G, R>(g, acc, out_at, ob, beta, res, act, y);
}

template <int64_t L, int G, int R>
HWY_INLINE void TilePlainTail(int rows, const PackedConvGeom& g, const Source& s,
                              const int64_t* k_off, const int64_t* in_at, const int64_t* out_at,
                              int64_t ob, const float* wo, const float* beta, const float* res,
                              ConvAct act, float* y) {
  if constexpr (R > 0) {
    if (rows == R) return TilePlain<L, G, R>(g, s, k_off, in_at, out_at, ob, wo, beta, res, act, y);
    TilePlainTail<L, G, R - 1>(rows, g, s, k_off, in_at, out_at, ob, wo, beta, res, act, y);
  }
}

// One task's pixels [0, n_rows) of the chunk for the G groups from ob.
template <int64_t L, int G, bool kPlain>
HWY_INLINE void TaskRows(const PackedConvGeom& g, const Source& s, const int64_t* tap_off,
                         const int64_t* k_off, const int64_t* in_at, const int64_t* out_at,
                         int64_t n_rows, int64_t ob, const float* wp, const float* beta,
                         const float* res, ConvAct act, float* y) {
  // Tiles of kRows pixels; a short last tile shares its rows with the one before it (16 pixels:
  // 8 + 8, not 12 + 4), as a tile of few rows is bound by its loads.
  auto one = [&](int64_t i, int64_t rows) {
    if constexpr (kPlain) {
      const float* wo = wp + ob * g.kh * g.kw * g.C * 16;
      if (rows == kRows)
        return TilePlain<L, G, kRows>(g, s, k_off, in_at + i, out_at + i, ob, wo, beta, res, act,
                                      y);
      TilePlainTail<L, G, kRows - 1>(int(rows), g, s, k_off, in_at + i, out_at + i, ob, wo, beta,
                                     res, act, y);
    } else {
      const float* wo = wp + ob * g.kh * g.kw * (g.C / 16) * 256;
      if (rows == kRows)
        return Tile<L, G, kRows>(g, s, tap_off, in_at + i, out_at + i, ob, wo, beta, res, act, y);
      TileTail<L, G, kRows - 1>(int(rows), g, s, tap_off, in_at + i, out_at + i, ob, wo, beta, res,
                                act, y);
    }
  };
  const int64_t r = n_rows % kRows;
  const int64_t full = n_rows / kRows - (r > 0 && n_rows > kRows ? 1 : 0);
  int64_t i = 0;
  for (int64_t t = 0; t < full; ++t, i += kRows) one(i, kRows);
  const int64_t left = n_rows - i;  // 0, r (< kRows), or kRows + r: two tiles
  if (left > kRows) {
    const int64_t a = (left + 1) / 2;
    one(i, a);
    one(i + a, left - a);
  } else if (left > 0) {
    one(i, left);
  }
}

// Tasks [t0, t1) of (chunk, tile of `per` groups), chunk major, on activations blocked in L lanes
// (kPlain: the input is plain NCHW, the output blocked in L). With an odd number of groups the
// last tile of a chunk has one.
template <int64_t L, bool kPlain = false>
void TasksIn(const PackedConvGeom& g, const Source& s, const float* wp, const float* beta,
             const float* res, ConvAct act, float* y, int64_t per, int64_t t0, int64_t t1) {
  const int64_t Ob = g.O / 16, tiles = (Ob + per - 1) / per, rows = g.N * g.OH * g.OW;
  constexpr int64_t LX = kPlain ? 1 : L;  // the input's block
  int64_t tap_off[kMaxTaps];
  for (int64_t i = 0; i < g.kh; ++i)
    for (int64_t j = 0; j < g.kw; ++j) tap_off[i * g.kw + j] = (i * s.Ws + j) * LX;
  // A plain input: every (tap, channel)'s offset, in the packed weights' order.
  std::vector<int64_t> k_off;
  if constexpr (kPlain) {
    k_off.resize(size_t(g.kh * g.kw * g.C));
    for (int64_t t = 0; t < g.kh * g.kw; ++t)
      for (int64_t c = 0; c < g.C; ++c) k_off[size_t(t * g.C + c)] = tap_off[t] + c * s.Hs * s.Ws;
  }
  int64_t in_at[kChunkRows], out_at[kChunkRows];  // the chunk's pixels, as Tile takes them
  int64_t at_chunk = -1;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t chunk = t / tiles, ob = t % tiles * per;
    const int64_t r_begin = chunk * kChunkRows,
                  n_rows = std::min(rows, r_begin + kChunkRows) - r_begin;
    if (chunk != at_chunk) {
      for (int64_t i = 0; i < n_rows; ++i) {
        const int64_t p = r_begin + i, n = p / (g.OH * g.OW), oh = p % (g.OH * g.OW) / g.OW,
                      ow = p % g.OW;
        in_at[i] = ((n * (kPlain ? g.C : g.C / L) * s.Hs + oh * g.sh) * s.Ws + ow * g.sw) * LX;
        out_at[i] = ((n * (g.O / L) * g.OH + oh) * g.OW + ow) * L;
      }
      at_chunk = chunk;
    }
    const int64_t* ko = k_off.data();
    if (kGroups > 1 && per > 1 && ob + 1 < Ob)
      TaskRows<L, kGroups, kPlain>(g, s, tap_off, ko, in_at, out_at, n_rows, ob, wp, beta, res, act,
                                   y);
    else
      TaskRows<L, 1, kPlain>(g, s, tap_off, ko, in_at, out_at, n_rows, ob, wp, beta, res, act, y);
  }
}

size_t TileGroups() { return kGroups; }

void Tasks(const PackedConvGeom& g, const Source& s, const float* wp, const float* beta,
           const float* res, ConvAct act, float* y, int64_t per, int64_t t0, int64_t t1) {
  // L = 8 only where a vector holds at most 8 lanes (packed_conv2d checks packed_takes_lanes).
  if (g.Lx == 1) {
    if (kStep <= 8 && g.L == 8) return TasksIn<8, true>(g, s, wp, beta, res, act, y, per, t0, t1);
    return TasksIn<16, true>(g, s, wp, beta, res, act, y, per, t0, t1);
  }
  if (kStep <= 8 && g.L == 8) return TasksIn<8>(g, s, wp, beta, res, act, y, per, t0, t1);
  TasksIn<16>(g, s, wp, beta, res, act, y, per, t0, t1);
}

}  // namespace HWY_NAMESPACE
}  // namespace spore::cpu::pconv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace spore::cpu {
namespace pconv {
HWY_EXPORT(Tasks);
HWY_EXPORT(VectorLanes);
HWY_EXPORT(TileGroups);

// The calling thread's zero-bordered input buffer, grown and kept across calls.
float* padded_buffer(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}

// x (N, Cb, H, W, L) -> xp (N, Cb, Hp, Wp, L) with the input at (pt, pl) and zeros around it.
void pad_input(const PackedConvGeom& g, const float* x, float* xp, int64_t Hp, int64_t Wp) {
  const int64_t L = g.Lx == 1 ? 1 : g.L, planes = g.N * (g.C / L);
  // Small copies (the deep layers at batch 1: tens of KiB) on the calling thread: waking the
  // other threads for them costs more than the copy, and the conv itself wakes them next.
  const int64_t grain = std::max<int64_t>(1, kSerialPadFloats / (Hp * Wp * L));
  parallel_for(0, planes, grain, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const float* src = x + p * g.H * g.W * L;
      float* dst = xp + p * Hp * Wp * L;
      for (int64_t h = 0; h < Hp; ++h) {
        float* row = dst + h * Wp * L;
        const int64_t ih = h - g.pt;
        if (ih < 0 || ih >= g.H) {
          std::memset(row, 0, size_t(Wp * L) * sizeof(float));
          continue;
        }
        // Columns [pl, pl + W) hold the input row (cut to Wp); the rest are zeros.
        const int64_t c0 = g.pl, n = std::max<int64_t>(0, std::min(g.W, Wp - c0));
        std::memset(row, 0, size_t(c0 * L) * sizeof(float));
        std::memcpy(row + c0 * L, src + ih * g.W * L, size_t(n * L) * sizeof(float));
        std::memset(row + (c0 + n) * L, 0, size_t((Wp - c0 - n) * L) * sizeof(float));
      }
    }
  });
}
}  // namespace pconv

bool packed_takes_lanes(int64_t lanes) {
  return lanes == 16 || (lanes == 8 && HWY_DYNAMIC_DISPATCH(pconv::VectorLanes)() <= 8);
}

void pack_conv_weights(const float* w, int64_t O, int64_t C, int64_t kh, int64_t kw,
                       const float* bias, const float* scale, const float* shift, float* wp,
                       float* beta) {
  SPORE_ASSERT(O % 16 == 0 && C >= 1, "packed conv: O must be a multiple of 16, got O=", O,
               ", C=", C);
  for (int64_t o = 0; o < O; ++o) {
    const float s = scale ? scale[o] : 1.f;
    beta[o] = (bias ? bias[o] : 0.f) * s + (shift ? shift[o] : 0.f);
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < kh; ++i)
        for (int64_t j = 0; j < kw; ++j)
          wp[((((o / 16) * kh + i) * kw + j) * C + c) * 16 + o % 16] =
              w[((o * C + c) * kh + i) * kw + j] * s;
  }
}

void packed_conv2d(const PackedConvGeom& g, const float* x, const float* wp, const float* beta,
                   const float* residual, ConvAct act, float* y) {
  SPORE_ASSERT(g.O % 16 == 0 && (g.C % 16 == 0 || g.Lx == 1) && g.kh * g.kw <= pconv::kMaxTaps &&
                   packed_takes_lanes(g.L) && (g.Lx == 0 || g.Lx == 1),
               "packed conv: unsupported geometry (O=", g.O, ", C=", g.C, ", ", g.kh * g.kw,
               " taps, lanes ", g.L, ", input block ", g.Lx, ")");
  const int64_t rows = g.N * g.OH * g.OW;
  if (rows == 0) return;
  // The extent the windows read; a conv that pads (or reads past the input) gets a bordered copy.
  const int64_t Hp = (g.OH - 1) * g.sh + g.kh, Wp = (g.OW - 1) * g.sw + g.kw;
  pconv::Source s{x, g.H, g.W};
  if (g.pt > 0 || g.pl > 0 || Hp > g.H || Wp > g.W) {
    float* xp = pconv::padded_buffer(size_t(g.N * g.C * Hp * Wp));
    pconv::pad_input(g, x, xp, Hp, Wp);
    s = {xp, Hp, Wp};
  }
  const int64_t chunks = (rows + pconv::kChunkRows - 1) / pconv::kChunkRows, Ob = g.O / 16;
  // A task is a chunk's pixels for a tile of output-channel groups (two where the kernel's
  // vectors hold one group; one where pairs would leave a thread without a task).
  int64_t per = int64_t(HWY_DYNAMIC_DISPATCH(pconv::TileGroups)());
  if (chunks * ((Ob + per - 1) / per) < 2 * get_num_threads()) per = 1;
  // Pieces of about a sixteenth of the tasks per thread, taken as the threads come (see
  // parallel_for_dynamic): consecutive tasks still share a chunk's input or split its channels.
  const int64_t tasks = chunks * ((Ob + per - 1) / per);
  parallel_for_dynamic(0, tasks, tasks / (16 * get_num_threads()), [&](int64_t t0, int64_t t1) {
    HWY_DYNAMIC_DISPATCH(pconv::Tasks)(g, s, wp, beta, residual, act, y, per, t0, t1);
  });
}

namespace {

// pack_conv_weights(w[, bias][, scale, shift]) -> (wp, beta) (ops/winograd.cpp).
void pack_conv_weights_kernel(ops::KernelContext& ctx) {
  const bool has_bias = ctx.attrs.get_bool("has_bias", false);
  const bool has_scale = ctx.attrs.get_bool("has_scale", false);
  size_t i = 1;
  const Tensor w = dense(ctx.inputs[0]);
  const Tensor b = has_bias ? dense(ctx.inputs[i++]) : Tensor();
  const Tensor scale = has_scale ? dense(ctx.inputs[i++]) : Tensor();
  const Tensor shift = has_scale ? dense(ctx.inputs[i++]) : Tensor();
  pack_conv_weights(w.data<float>(), w.size(0), w.size(1), w.size(2), w.size(3),
                    has_bias ? b.data<float>() : nullptr, has_scale ? scale.data<float>() : nullptr,
                    has_scale ? shift.data<float>() : nullptr, ctx.outputs[0].data<float>(),
                    ctx.outputs[1].data<float>());
}

// conv2d_packed(x, wp, beta[, residual]) -> y, all blocked (in 16 or 8 lanes) but wp and beta.
void conv2d_packed_kernel(ops::KernelContext& ctx) {
  Tensor& y = ctx.outputs[0];
  if (y.numel() == 0) return;
  const Tensor x = dense(ctx.inputs[0]), wp = dense(ctx.inputs[1]), beta = dense(ctx.inputs[2]);
  const bool has_res = ctx.attrs.get_bool("has_residual", false);
  const Tensor r = has_res ? dense(ctx.inputs[3]) : Tensor();
  const auto pad = ctx.attrs.get_ints("padding"), st = ctx.attrs.get_ints("stride");
  const bool plain = x.dim() == 4;  // a plain NCHW input (any C), y blocked in y's lanes
  const int64_t L = y.size(4);
  PackedConvGeom g{x.size(0),     plain ? x.size(1) : x.size(1) * L,
                   x.size(2),     x.size(3),
                   y.size(1) * L, wp.size(1),
                   wp.size(2),    y.size(2),
                   y.size(3),     st[0],
                   st[1],         pad[0],
                   pad[2],        L};
  g.Lx = plain ? 1 : 0;
  const ConvAct act = conv_act(ctx.attrs.has("act") ? ctx.attrs.get_string("act") : "");
  packed_conv2d(g, x.data<float>(), wp.data<float>(), beta.data<float>(),
                has_res ? r.data<float>() : nullptr, act, y.data<float>());
}

}  // namespace

SPORE_CPU_KERNEL(PackConvWeights, pack_conv_weights_kernel, kFloat32);
SPORE_CPU_KERNEL(Conv2dPacked, conv2d_packed_kernel, kFloat32);

}  // namespace spore::cpu
#endif  // HWY_ONCE
