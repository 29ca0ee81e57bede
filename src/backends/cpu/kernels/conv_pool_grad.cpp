// conv2d_backward_weight_pooled (backends/cpu/ops/conv_pool.cpp) on the CPU, float32, groups 1, any
// C_in: dw (O, C, kh, kw) = conv2d_backward_weight(max_pool2d_backward(dy_pooled, indices), x),
// computed from the argmax positions alone: pooled element (n, o, e) with gradient g and index p =
// oh * OW + ow (max_pool2d's convention: the winner in its (OH, OW) conv-output plane) adds
//   g * x[n, c, oh*sh - pt + i*dh, ow*sw - pl + j*dw]   to dw[o, c, i, j]   (zero outside x).
// The (N, O, OH, OW) conv-output gradient is never formed; a 2x2 pool does a quarter of the dense
// weight gradient's multiply-adds. Overlapping pool windows that share a winner simply add.
//
// Layout (Highway, run-time dispatch): each image x[n] is copied into a per-thread zero-padded
// buffer xr whose rows are the padded input rows, so a window never needs a bounds check. Vectors
// (at most 8 lanes) run along a kernel row: accumulator (k, v) holds kernel row k of the window,
// padded columns [v*L, v*L + L) from its left edge; lane l of it is tap j = (v*L + l) / dw where
// that divides (other lanes, and lanes past the kernel row, are discarded). Without dilation the
// buffer interleaves the channels row by row, (Hp, C, RW), so kernel row k = i*C + c sits k*RW
// floats below the window's corner: one stride for all C*kh rows and the inner loop keeps its
// addresses in registers (LeNet: 5 loads + 5 FMAs per pooled element). With dilation it is
// (C, Hp, RW) and the rows of one channel are dh*RW apart. The accumulators of one output stay in
// registers over its whole pooled plane (in groups if there are more than the register file holds).
// Threads split the batch into slots; each slot sums into its own partial (O, K, NV, L), and the
// partials are reduced in slot order at the end: repeatable for a given thread count.
// No allocation per call: the per-thread buffers grow and are kept.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/kernels/conv_pool_grad.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <utility>
#include <vector>

#include "backends/cpu/kernels/nn_util.h"
#include "backends/cpu/ops/ops.h"
#include "core/parallel.h"
#include "ops/op.h"
#include "spore/error.h"

#ifndef SPORE_CONV_POOL_GRAD_ONCE
#define SPORE_CONV_POOL_GRAD_ONCE
namespace spore::cpu::cpgrad {
struct Geom {
  int64_t N, C, H, W, O, kh, kw, OH, OW, PP;  // PP = PH * PW pooled elements per plane
  int64_t sh, sw, pt, pl, dh, dw;
};
// The padded-image buffer for vectors of L lanes. Padded row r of channel c starts at
// c * cstr + r * rstr; kernel rows k (see the file comment) come in segments of seg rows with a
// uniform stride S.
struct Plan {
  int64_t NV;          // vectors per kernel row: ceil(((kw-1)*dw + 1) / L)
  int64_t K;           // kernel rows: C * kh
  int64_t Hp;          // padded rows any window touches
  int64_t RW;          // row length: the last window's left edge + NV * L
  int64_t cstr, rstr;  // channel and padded-row strides
  int64_t seg, S;      // rows per uniform segment and their stride
  bool interleaved;    // dh == 1: (Hp, C, RW), k = i*C + c; else (C, Hp, RW), k = c*kh + i
};
inline Plan plan_of(const Geom& g, int64_t L) {
  Plan p;
  p.NV = ((g.kw - 1) * g.dw + 1 + L - 1) / L;
  p.K = g.C * g.kh;
  p.Hp = (g.OH - 1) * g.sh + (g.kh - 1) * g.dh + 1;
  p.RW = (g.OW - 1) * g.sw + p.NV * L;
  p.interleaved = g.dh == 1;
  p.cstr = p.interleaved ? p.RW : p.Hp * p.RW;
  p.rstr = p.interleaved ? g.C * p.RW : p.RW;
  p.seg = p.interleaved ? p.K : g.kh;
  p.S = p.interleaved ? p.RW : g.dh * p.RW;
  return p;
}
inline int64_t row_of(const Geom& g, const Plan& p, int64_t c, int64_t i) {
  return p.interleaved ? i * g.C + c : c * g.kh + i;
}
template <typename T>
T* thread_buf(std::vector<T>& buf, size_t n) {
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}
}  // namespace spore::cpu::cpgrad
#endif

#ifndef SPORE_UNROLL
#define SPORE_UNROLL _Pragma("GCC unroll 32")
#endif

HWY_BEFORE_NAMESPACE();
namespace spore::cpu::cpgrad {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
// At most 8 lanes: a kernel row is short (LeNet: 5 taps), and on AMD Zen 4 a 512-bit FMA costs
// two 256-bit ones, so wider vectors would only multiply the wasted lanes.
using DV = hn::CappedTag<float, 8>;

// Accumulators per sweep: the rest of the register file holds g's broadcast and a load.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr int kMaxAcc = 28;
#else
constexpr int kMaxAcc = 12;
#endif

int64_t VecLanes() { return int64_t(hn::Lanes(DV())); }

// x[n] (C, H, W) -> xr: padded row r of channel c, column col = x[c][r - pt][col - pl], zero
// outside x.
void build_rows(const Geom& g, const Plan& p, const float* x, float* xr) {
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t r = 0; r < p.Hp; ++r) {
      float* dst = xr + c * p.cstr + r * p.rstr;
      const int64_t ih = r - g.pt;
      if (ih < 0 || ih >= g.H) {
        std::memset(dst, 0, size_t(p.RW) * sizeof(float));
        continue;
      }
      const float* src = x + (c * g.H + ih) * g.W;
      const int64_t lo = std::clamp<int64_t>(g.pl, 0, p.RW),
                    hi = std::clamp<int64_t>(g.pl + g.W, lo, p.RW);
      std::memset(dst, 0, size_t(lo) * sizeof(float));
      std::memcpy(dst + lo, src + (lo - g.pl), size_t(hi - lo) * sizeof(float));
      std::memset(dst + hi, 0, size_t(p.RW - hi) * sizeof(float));
    }
}

// Accumulators (k, v) for k < NR, v < NV (at part + k * pstride + v * L) += sum over the plane's
// pooled elements e of dy[e] * the vector at xr + pos[idx[e]] + k * S + v * L (xr already offset
// to the group's first row and vector). U copies of the accumulators take consecutive elements in
// turn (one FMA chain each would wait on the FMA latency), summed in a fixed order at the end.
// Returns false if an index lies outside the (OH, OW) plane (those elements are skipped).
template <int NR, int NV>
bool Sweep(const float* xr, int64_t S, const int64_t* pos, int64_t plane, const float* dy,
           const int64_t* idx, int64_t PP, float* part, int64_t pstride) {
  constexpr int U = std::clamp(kMaxAcc / (NR * NV), 1, 4);
  const DV d;
  constexpr int64_t L = int64_t(hn::MaxLanes(DV()));
  hn::Vec<DV> acc[U][NR][NV];
  SPORE_UNROLL for (int k = 0; k < NR; ++k) SPORE_UNROLL for (int v = 0; v < NV; ++v) {
    acc[0][k][v] = hn::LoadU(d, part + k * pstride + v * L);
    SPORE_UNROLL for (int u = 1; u < U; ++u) acc[u][k][v] = hn::Zero(d);
  }
  // One pooled element into accumulator copy u: the row pointer walks down by S.
  auto add = [&](int u, const float* rp, float gs) HWY_ATTR {
    const auto gv = hn::Set(d, gs);
    SPORE_UNROLL for (int k = 0; k < NR; ++k) {
      SPORE_UNROLL for (int v = 0; v < NV; ++v) acc[u][k][v] =
          hn::MulAdd(gv, hn::LoadU(d, rp + v * L), acc[u][k][v]);
      rp += S;
    }
  };
  bool ok = true;
  int64_t e = 0;
  for (; e + U <= PP; e += U) {
    uint64_t q[U];
    bool in = true;
    SPORE_UNROLL for (int u = 0; u < U; ++u) {
      q[u] = uint64_t(idx[e + u]);
      in &= q[u] < uint64_t(plane);
    }
    if (!in) [[unlikely]]
      break;  // the rest go one by one below, skipping the bad ones
    SPORE_UNROLL for (int u = 0; u < U; ++u) add(u, xr + pos[q[u]], dy[e + u]);
  }
  for (; e < PP; ++e) {
    const uint64_t q = uint64_t(idx[e]);
    if (q >= uint64_t(plane)) [[unlikely]] {
      ok = false;
      continue;
    }
    add(0, xr + pos[q], dy[e]);
  }
  SPORE_UNROLL for (int k = 0; k < NR; ++k) SPORE_UNROLL for (int v = 0; v < NV; ++v) {
    SPORE_UNROLL for (int u = 1; u < U; ++u) acc[0][k][v] = hn::Add(acc[0][k][v], acc[u][k][v]);
    hn::StoreU(acc[0][k][v], d, part + k * pstride + v * L);
  }
  return ok;
}

using SweepFn = bool (*)(const float*, int64_t, const int64_t*, int64_t, const float*,
                         const int64_t*, int64_t, float*, int64_t);
template <int NV, size_t... I>
constexpr std::array<SweepFn, sizeof...(I)> sweep_table(std::index_sequence<I...>) {
  return {&Sweep<int(I) + 1, NV>...};
}
constexpr int kMaxNV = 4;  // vectors per group (wider kernel rows take several groups)

// Images [n0, n1) into part (O, K, NV, L), which this zeroes first. pos: the buffer offset of each
// conv-output position's window corner. Returns false on a bad index.
bool Images(const Geom& g, const float* dy, const int64_t* idx, const float* x, const int64_t* pos,
            float* part, int64_t n0, int64_t n1) {
  static constexpr auto t1 = sweep_table<1>(std::make_index_sequence<kMaxAcc>());
  static constexpr auto t2 = sweep_table<2>(std::make_index_sequence<kMaxAcc / 2>());
  static constexpr auto t3 = sweep_table<3>(std::make_index_sequence<kMaxAcc / 3>());
  static constexpr auto t4 = sweep_table<4>(std::make_index_sequence<kMaxAcc / 4>());
  static constexpr const SweepFn* tables[kMaxNV] = {t1.data(), t2.data(), t3.data(), t4.data()};
  const int64_t L = VecLanes();
  const Plan p = plan_of(g, L);
  std::memset(part, 0, size_t(g.O * p.K * p.NV * L) * sizeof(float));
  thread_local std::vector<float> xbuf;
  float* xr = thread_buf(xbuf, size_t(g.C * p.Hp * p.RW));
  const int64_t plane = g.OH * g.OW, pstride = p.NV * L;
  bool ok = true;
  for (int64_t n = n0; n < n1; ++n) {
    build_rows(g, p, x + n * g.C * g.H * g.W, xr);
    for (int64_t o = 0; o < g.O; ++o) {
      const int64_t e0 = (n * g.O + o) * g.PP;
      for (int64_t k0 = 0; k0 < p.K; k0 += p.seg) {  // segments of rows with one stride
        // The segment's first row: channel c0, kernel row i0.
        const int64_t c0 = p.interleaved ? 0 : k0 / g.kh;
        const float* sx = xr + c0 * p.cstr;
        for (int64_t v0 = 0; v0 < p.NV; v0 += kMaxNV) {
          const int64_t nv = std::min<int64_t>(kMaxNV, p.NV - v0);
          // Rows in groups of near-equal size, each at most kMaxAcc / nv.
          const int64_t most = kMaxAcc / nv, ng = (p.seg + most - 1) / most,
                        gs = (p.seg + ng - 1) / ng;
          for (int64_t r = 0; r < p.seg; r += gs) {
            const int64_t nr = std::min(gs, p.seg - r);
            ok &=
                tables[nv - 1][nr - 1](sx + r * p.S + v0 * L, p.S, pos, plane, dy + e0, idx + e0,
                                       g.PP, part + ((o * p.K + k0 + r) * p.NV + v0) * L, pstride);
          }
        }
      }
    }
  }
  return ok;
}

}  // namespace HWY_NAMESPACE
}  // namespace spore::cpu::cpgrad
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace spore::cpu {
namespace cpgrad {
HWY_EXPORT(VecLanes);
HWY_EXPORT(Images);

void backward_weight_pooled(const Geom& g, const float* dy, const int64_t* idx, const float* x,
                            float* dw) {
  const int64_t L = HWY_DYNAMIC_DISPATCH(VecLanes)();
  const Plan p = plan_of(g, L);
  const int64_t K = g.O * p.K * p.NV * L, plane = g.OH * g.OW;
  const int64_t slots = std::clamp<int64_t>(get_num_threads(), 1, g.N);
  // The shared, read-only position table and the partials live on the calling thread.
  thread_local std::vector<int64_t> tab;
  thread_local std::vector<float> parts;
  int64_t* pos = thread_buf(tab, size_t(plane));
  for (int64_t oh = 0, q = 0; oh < g.OH; ++oh)
    for (int64_t ow = 0; ow < g.OW; ++ow, ++q) pos[q] = oh * g.sh * p.rstr + ow * g.sw;
  float* part = thread_buf(parts, size_t(slots * K));
  std::atomic<bool> ok{true};
  parallel_for(0, slots, 1, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s)
      if (!HWY_DYNAMIC_DISPATCH(Images)(g, dy, idx, x, pos, part + s * K, s * g.N / slots,
                                        (s + 1) * g.N / slots))
        ok.store(false, std::memory_order_relaxed);
  });
  SPORE_CHECK_INDEX(ok.load(),
                    "conv2d_backward_weight_pooled: an index lies outside the conv output "
                    "plane of ",
                    g.OH, " x ", g.OW, " = ", plane,
                    " positions; indices must be max_pool2d's "
                    "(h * OW + w of the winner)");
  // dw[o, c, i, j] = sum over slots (in order) of lane j*dw of kernel row (c, i)'s vectors.
  for (int64_t o = 0; o < g.O; ++o)
    for (int64_t c = 0; c < g.C; ++c)
      for (int64_t i = 0; i < g.kh; ++i)
        for (int64_t j = 0; j < g.kw; ++j) {
          const int64_t at = (o * p.K + row_of(g, p, c, i)) * p.NV * L + j * g.dw;
          float s = part[at];
          for (int64_t q = 1; q < slots; ++q) s += part[q * K + at];
          dw[((o * g.C + c) * g.kh + i) * g.kw + j] = s;
        }
}
}  // namespace cpgrad

namespace {
void conv2d_backward_weight_pooled_kernel(ops::KernelContext& ctx) {
  Tensor dy = dense(ctx.inputs[0]), idx = dense(ctx.inputs[1]), x = dense(ctx.inputs[2]);
  Tensor& dw = ctx.outputs[0];
  if (dw.numel() == 0) return;
  const auto st = ctx.attrs.get_ints("stride"), pad = ctx.attrs.get_ints("padding"),
             dil = ctx.attrs.get_ints("dilation"), ys = ctx.attrs.get_ints("conv_output_shape");
  const cpgrad::Geom g{x.size(0),  x.size(1),  x.size(2), x.size(3), dw.size(0),
                       dw.size(2), dw.size(3), ys[2],     ys[3],     dy.size(2) * dy.size(3),
                       st[0],      st[1],      pad[0],    pad[2],    dil[0],
                       dil[1]};
  if (g.N == 0 || g.PP == 0) {
    std::memset(dw.data_ptr(), 0, dw.nbytes());
    return;
  }
  cpgrad::backward_weight_pooled(g, dy.data<float>(), idx.data<int64_t>(), x.data<float>(),
                                 dw.data<float>());
}
}  // namespace

SPORE_CPU_KERNEL(Conv2dBackwardWeightPooled, conv2d_backward_weight_pooled_kernel, kFloat32);

}  // namespace spore::cpu
#endif  // HWY_ONCE
