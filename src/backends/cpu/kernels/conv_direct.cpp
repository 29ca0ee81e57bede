// Direct NCHW float32 convolution for C_in <= 4 (see conv_direct.h): forward with bias / relu, and
// the weight gradient. Highway, run-time dispatch; vectors run along the output width.
//
// Both passes first copy one image x[n] (C, H, W) into a per-thread zero-padded buffer "xr" whose
// rows are the padded input rows, so the inner loops have no bounds checks:
//   stride_w == 1: one copy per channel, column col = iw + pl; tap (c, i, j) of output (oh, ow)
//     reads xr[c][oh*sh + i*dh][ow + j*dw];
//   stride_w > 1: one copy per (channel, kernel column j) with the columns already strided:
//     xr[c][j][r][ow] = x_pad[r][ow*sw + j*dw], so the loads stay contiguous.
// Either way tap t = (c*kh + i)*kw + j of output row oh reads xr + oh*sh*RW + off[t] + ow.
//   forward: tasks (n, block of up to 8 output channels); per output row and pair of vectors the
//     block's accumulators stay in registers over all taps (one x load feeds OB FMAs).
//   weight gradient: tasks (n, block of up to 6 outputs); each (output, tap) of a group of taps
//     (26 / outputs of them with AVX-512) holds a vector accumulator across the whole (OH, OW)
//     plane (one dy load feeds every tap of its output, one x load every output); they add into a
//     per-thread partial (O, taps, lanes), reduced in a fixed order at the end (deterministic for a
//     given thread count). No allocation per call: the per-thread buffers grow and are kept.
// clang-format off
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "backends/cpu/kernels/conv_direct.cpp"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
// clang-format on

#include "backends/cpu/kernels/conv_direct.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/isa.h"
#include "core/parallel.h"
#include "spore/error.h"

#ifndef SPORE_CONV_DIRECT_ONCE
#define SPORE_CONV_DIRECT_ONCE
namespace spore::cpu::dconv {
// The padded-row buffer's geometry for vectors of L lanes (see the file comment).
struct Plan {
  int64_t OWp;  // OW rounded up to whole vectors
  int64_t RW;   // row length
  int64_t Hp;   // padded rows a window can touch
  int64_t NJ;   // copies per channel: 1 (stride_w 1) or kw
  int64_t CS;   // floats per channel: NJ * Hp * RW
  int64_t JS;   // offset per kernel column: dw (stride_w 1) or Hp * RW
};
inline Plan plan_of(const DirectConvGeom& g, int64_t L) {
  Plan p;
  p.OWp = (g.OW + L - 1) / L * L;
  const bool unit = g.sw == 1;
  p.RW = p.OWp + (unit ? (g.kw - 1) * g.dw : 0);
  p.Hp = (g.OH - 1) * g.sh + (g.kh - 1) * g.dh + 1;
  p.NJ = unit ? 1 : g.kw;
  p.CS = p.NJ * p.Hp * p.RW;
  p.JS = unit ? g.dw : p.Hp * p.RW;
  return p;
}
constexpr int64_t kMaxTaps = 256;
constexpr int64_t kWgradOB = 6;  // weight gradient: outputs per task (sharing the x loads)
// The calling thread's scratch of at least n floats, kept (and grown) across calls.
float* thread_scratch(size_t n);
float* thread_weights(size_t n);
float* thread_rows(size_t n);      // conv2d_direct_forward_rows' output rows
constexpr size_t kRowsSlack = 64;  // readable floats past them (the sink's whole-vector loads)
}  // namespace spore::cpu::dconv
#endif

// The accumulator loops must unroll fully so the accumulators live in registers (GCC 12 does not
// unroll them on its own and keeps them on the stack, at half the speed).
#ifndef SPORE_UNROLL
#define SPORE_UNROLL _Pragma("GCC unroll 32")
#endif

HWY_BEFORE_NAMESPACE();
namespace spore::cpu::dconv {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;

// Register budget: 32 vector registers with AVX-512, 16 below.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr int kMaxOB = 8;    // forward: 8 x 2 accumulators + 2 x loads + a broadcast
constexpr int kMaxAcc = 26;  // weight gradient: at most 26 accumulators + OB dy + an x load
#else
constexpr int kMaxOB = 6;
constexpr int kMaxAcc = 10;
#endif

int64_t VecLanes() { return int64_t(hn::Lanes(DF())); }

// Lanes [0, n) from p (unaligned), zeros above; reads nothing past p + n. And its store twin,
// which writes nothing past p + n (a neighbouring plane may belong to another thread). AVX2 and
// AVX-512 mask in hardware; below that Highway's masked ops want aligned pointers and its blended
// store reads and rewrites the whole vector, so a buffer on the stack stands in.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
HWY_INLINE hn::Vec<DF> load_first(DF d, const float* p, size_t n) {
  return hn::MaskedLoad(hn::FirstN(d, n), d, p);
}
HWY_INLINE void store_first(hn::Vec<DF> v, DF d, float* p, size_t n) {
  hn::BlendedStore(v, hn::FirstN(d, n), d, p);
}
#else
HWY_INLINE hn::Vec<DF> load_first(DF d, const float* p, size_t n) {
  HWY_ALIGN float buf[hn::MaxLanes(DF())] = {};
  std::memcpy(buf, p, n * sizeof(float));
  return hn::Load(d, buf);
}
HWY_INLINE void store_first(hn::Vec<DF> v, DF d, float* p, size_t n) {
  HWY_ALIGN float buf[hn::MaxLanes(DF())];
  hn::Store(v, d, buf);
  std::memcpy(p, buf, n * sizeof(float));
}
#endif
int64_t MaxOB() { return kMaxOB; }

// x[n] (C, H, W) -> xr (C, NJ, Hp, RW), zeros wherever the window reads padding.
void build_rows(const DirectConvGeom& g, const Plan& p, const float* x, float* xr) {
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t jj = 0; jj < p.NJ; ++jj)
      for (int64_t r = 0; r < p.Hp; ++r) {
        float* dst = xr + c * p.CS + (jj * p.Hp + r) * p.RW;
        const int64_t ih = r - g.pt;
        if (ih < 0 || ih >= g.H) {
          std::memset(dst, 0, size_t(p.RW) * sizeof(float));
          continue;
        }
        const float* src = x + (c * g.H + ih) * g.W;
        if (p.NJ == 1) {  // dst[col] = src[col - pl]
          const int64_t lo = std::clamp<int64_t>(g.pl, 0, p.RW),
                        hi = std::clamp<int64_t>(g.pl + g.W, lo, p.RW);
          std::memset(dst, 0, size_t(lo) * sizeof(float));
          std::memcpy(dst + lo, src + (lo - g.pl), size_t(hi - lo) * sizeof(float));
          std::memset(dst + hi, 0, size_t(p.RW - hi) * sizeof(float));
        } else {
          for (int64_t col = 0; col < p.RW; ++col) {
            const int64_t iw = col * g.sw + jj * g.dw - g.pl;
            dst[col] = col < g.OW && iw >= 0 && iw < g.W ? src[iw] : 0.0f;
          }
        }
      }
}

void tap_offsets(const DirectConvGeom& g, const Plan& p, int64_t* off) {
  for (int64_t c = 0; c < g.C; ++c)
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j)
        off[(c * g.kh + i) * g.kw + j] = c * p.CS + i * g.dh * p.RW + j * p.JS;
}

// ---- forward ------------------------------------------------------------------------------------

// V vectors of output row oh (columns c0 ...) for OB output planes y0, y0 + OH*OW, ...
// wp: the block's weights as (taps, OB); b: the block's biases or null.
template <int OB, int V>
HWY_INLINE void fwd_row(const DirectConvGeom& g, const float* row, const int64_t* off, int64_t T,
                        const float* wp, const float* b, bool relu, float* y0, int64_t c0) {
  const DF d;
  const int64_t L = int64_t(hn::Lanes(d)), plane = g.OH * g.OW;
  hn::Vec<DF> acc[OB][V];
  SPORE_UNROLL for (int k = 0; k < OB; ++k) {
    const auto init = b ? hn::Set(d, b[k]) : hn::Zero(d);
    SPORE_UNROLL for (int v = 0; v < V; ++v) acc[k][v] = init;
  }
  for (int64_t t = 0; t < T; ++t) {
    const float* xp = row + off[t] + c0;
    hn::Vec<DF> xv[V];
    SPORE_UNROLL for (int v = 0; v < V; ++v) xv[v] = hn::LoadU(d, xp + v * L);
    const float* wt = wp + t * OB;
    SPORE_UNROLL for (int k = 0; k < OB; ++k) {
      const auto wv = hn::Set(d, wt[k]);
      SPORE_UNROLL for (int v = 0; v < V; ++v) acc[k][v] = hn::MulAdd(wv, xv[v], acc[k][v]);
    }
  }
  const auto zero = hn::Zero(d);
  SPORE_UNROLL for (int k = 0; k < OB; ++k) SPORE_UNROLL for (int v = 0; v < V; ++v) {
    // relu keeps NaN (as the relu op and oneDNN do): only values below zero become zero.
    const auto r = relu ? hn::IfThenZeroElse(hn::Lt(acc[k][v], zero), acc[k][v]) : acc[k][v];
    float* dst = y0 + k * plane + c0 + v * L;
    const int64_t valid = g.OW - (c0 + v * L);
    if (valid >= L)
      hn::StoreU(r, d, dst);
    else
      store_first(r, d, dst, size_t(valid));
  }
}

template <int OB>
void fwd_block(const DirectConvGeom& g, const Plan& p, const float* xr, const int64_t* off,
               int64_t T, const float* wp, const float* b, bool relu, float* y0) {
  const int64_t L = VecLanes(), nvec = p.OWp / L;
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const float* row = xr + oh * g.sh * p.RW;
    float* yr = y0 + oh * g.OW;
    int64_t v = 0;
    for (; v + 2 <= nvec; v += 2) fwd_row<OB, 2>(g, row, off, T, wp, b, relu, yr, v * L);
    if (v < nvec) fwd_row<OB, 1>(g, row, off, T, wp, b, relu, yr, v * L);
  }
}

using FwdBlockFn = void (*)(const DirectConvGeom&, const Plan&, const float*, const int64_t*,
                            int64_t, const float*, const float*, bool, float*);
template <size_t... I>
constexpr std::array<FwdBlockFn, sizeof...(I)> fwd_table(std::index_sequence<I...>) {
  return {&fwd_block<int(I) + 1>...};
}

// Runs tasks [t0, t1) of (n, block): block bi holds output channels [bi*ob, min(O, bi*ob + ob)).
// Per task: the image's padded rows (rebuilt when n changes) and the block's packed weights, then
// f(p, n, o0, cnt, xr, off, T, wp).
template <class F>
void for_each_task(const DirectConvGeom& g, const float* x, const float* w, int64_t ob, int64_t nob,
                   int64_t t0, int64_t t1, F&& f) {
  const Plan p = plan_of(g, VecLanes());
  const int64_t T = g.C * g.kh * g.kw;
  float* xr = thread_scratch(size_t(g.C * p.CS));
  float* wp = thread_weights(size_t(T * kMaxOB) + size_t(T) * 2);  // packed weights, then offsets
  int64_t* off = reinterpret_cast<int64_t*>(wp + T * kMaxOB);
  tap_offsets(g, p, off);
  int64_t last_n = -1;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t n = t / nob, o0 = (t % nob) * ob, cnt = std::min(ob, g.O - o0);
    if (n != last_n) build_rows(g, p, x + n * g.C * g.H * g.W, xr);
    last_n = n;
    for (int64_t k = 0; k < cnt; ++k)
      for (int64_t tap = 0; tap < T; ++tap) wp[tap * cnt + k] = w[(o0 + k) * T + tap];
    f(p, n, o0, cnt, xr, off, T, wp);
  }
}

void FwdTasks(const DirectConvGeom& g, const float* x, const float* w, const float* b, bool relu,
              float* y, int64_t ob, int64_t nob, int64_t t0, int64_t t1) {
  static constexpr auto table = fwd_table(std::make_index_sequence<kMaxOB>());
  for_each_task(g, x, w, ob, nob, t0, t1,
                [&](const Plan& p, int64_t n, int64_t o0, int64_t cnt, const float* xr,
                    const int64_t* off, int64_t T, const float* wp) {
                  table[size_t(cnt - 1)](g, p, xr, off, T, wp, b ? b + o0 : nullptr, relu,
                                         y + (n * g.O + o0) * g.OH * g.OW);
                });
}

// FwdTasks in groups of R output rows below oh_end, each into a per-thread (cnt, rows, OW) buffer
// handed to sink (conv2d_direct_forward_rows): fwd_block on a geometry whose OH is the group's
// row count, so a row's arithmetic is FwdTasks'.
void FwdRowsTasks(const DirectConvGeom& g, const float* x, const float* w, const float* b,
                  bool relu, int64_t ob, int64_t nob, int64_t t0, int64_t t1, int64_t R,
                  int64_t oh_end, DirectRowSink sink, void* ctx) {
  static constexpr auto table = fwd_table(std::make_index_sequence<kMaxOB>());
  float* rows_buf = thread_rows(size_t(ob * R * g.OW) + kRowsSlack);
  for_each_task(g, x, w, ob, nob, t0, t1,
                [&](const Plan& p, int64_t n, int64_t o0, int64_t cnt, const float* xr,
                    const int64_t* off, int64_t T, const float* wp) {
                  for (int64_t oh0 = 0; oh0 < oh_end; oh0 += R) {
                    DirectConvGeom gr = g;
                    gr.OH = std::min(R, oh_end - oh0);
                    table[size_t(cnt - 1)](gr, p, xr + oh0 * g.sh * p.RW, off, T, wp,
                                           b ? b + o0 : nullptr, relu, rows_buf);
                    sink(ctx, n, o0, cnt, oh0, gr.OH, rows_buf);
                  }
                });
}

// ---- weight gradient ----------------------------------------------------------------------------

// acc (OB outputs x NT taps, at part + k * ostride + t * L) += sum over the planes of dy (output
// k's plane at dyp + k * OH * OW) * the taps' x vectors. OB outputs share each x load: the taps'
// loads are mostly unaligned (split across cache lines), so one load per FMA would bound the loop.
template <int NT, int OB>
void wgrad_sweep(const DirectConvGeom& g, const Plan& p, const float* xr, const int64_t* off,
                 const float* dyp, float* part, int64_t ostride) {
  const DF d;
  const int64_t L = int64_t(hn::Lanes(d)), plane = g.OH * g.OW;
  hn::Vec<DF> acc[OB][NT];
  SPORE_UNROLL for (int k = 0; k < OB; ++k) SPORE_UNROLL for (int t = 0; t < NT; ++t) acc[k][t] =
      hn::LoadU(d, part + k * ostride + t * L);
  const int64_t full = g.OW / L * L;
  const size_t tail = size_t(g.OW - full);
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    const float* row = xr + oh * g.sh * p.RW;
    const float* dyr = dyp + oh * g.OW;
    for (int64_t c0 = 0; c0 < full; c0 += L) {
      hn::Vec<DF> dv[OB];
      SPORE_UNROLL for (int k = 0; k < OB; ++k) dv[k] = hn::LoadU(d, dyr + k * plane + c0);
      SPORE_UNROLL for (int t = 0; t < NT; ++t) {
        const auto xv = hn::LoadU(d, row + off[t] + c0);
        SPORE_UNROLL for (int k = 0; k < OB; ++k) acc[k][t] = hn::MulAdd(dv[k], xv, acc[k][t]);
      }
    }
    if (full < g.OW) {  // masked on both sides: past OW the buffer may hold real (even inf) x
      hn::Vec<DF> dv[OB];
      SPORE_UNROLL for (int k = 0; k < OB; ++k) dv[k] = load_first(d, dyr + k * plane + full, tail);
      SPORE_UNROLL for (int t = 0; t < NT; ++t) {
        const auto xv = load_first(d, row + off[t] + full, tail);
        SPORE_UNROLL for (int k = 0; k < OB; ++k) acc[k][t] = hn::MulAdd(dv[k], xv, acc[k][t]);
      }
    }
  }
  SPORE_UNROLL for (int k = 0; k < OB; ++k) SPORE_UNROLL for (int t = 0; t < NT; ++t)
      hn::StoreU(acc[k][t], d, part + k * ostride + t * L);
}

using SweepFn = void (*)(const DirectConvGeom&, const Plan&, const float*, const int64_t*,
                         const float*, float*, int64_t);
template <int OB, size_t... I>
constexpr std::array<SweepFn, sizeof...(I)> sweep_table(std::index_sequence<I...>) {
  return {&wgrad_sweep<int(I) + 1, OB>...};
}

// Tasks [t0, t1) of (n, block of outputs [bi * ob, min(O, bi * ob + ob))) into part (O, T, L),
// which this zeroes first.
void WgradTasks(const DirectConvGeom& g, const float* dy, const float* x, float* part, int64_t ob,
                int64_t nob, int64_t t0, int64_t t1) {
  static constexpr auto table1 = sweep_table<1>(std::make_index_sequence<kMaxAcc>());
  static constexpr auto table2 = sweep_table<2>(std::make_index_sequence<kMaxAcc / 2>());
  static constexpr auto table3 = sweep_table<3>(std::make_index_sequence<kMaxAcc / 3>());
  static constexpr auto table4 = sweep_table<4>(std::make_index_sequence<kMaxAcc / 4>());
  static constexpr auto table5 = sweep_table<5>(std::make_index_sequence<kMaxAcc / 5>());
  static constexpr auto table6 = sweep_table<6>(std::make_index_sequence<kMaxAcc / 6>());
  static constexpr const SweepFn* tables[6] = {table1.data(), table2.data(), table3.data(),
                                               table4.data(), table5.data(), table6.data()};
  const int64_t L = VecLanes(), T = g.C * g.kh * g.kw;
  const Plan p = plan_of(g, L);
  std::memset(part, 0, size_t(g.O * T * L) * sizeof(float));
  float* xr = thread_scratch(size_t(g.C * p.CS));
  int64_t* off = reinterpret_cast<int64_t*>(thread_weights(size_t(T) * 2));
  tap_offsets(g, p, off);
  int64_t last_n = -1;
  for (int64_t t = t0; t < t1; ++t) {
    const int64_t n = t / nob, o0 = (t % nob) * ob, cnt = std::min(ob, g.O - o0);
    if (n != last_n) build_rows(g, p, x + n * g.C * g.H * g.W, xr);
    last_n = n;
    const float* dyp = dy + (n * g.O + o0) * g.OH * g.OW;
    // Taps in groups of near-equal size, each at most kMaxAcc / cnt.
    const int64_t most = kMaxAcc / cnt, ng = (T + most - 1) / most, gs = (T + ng - 1) / ng;
    for (int64_t a = 0; a < T; a += gs) {
      const int64_t nt = std::min(gs, T - a);
      tables[cnt - 1][nt - 1](g, p, xr, off + a, dyp, part + (o0 * T + a) * L, T * L);
    }
  }
}

// dw[k] = sum over slots s and lanes of part[s][k] (k < K vectors of L lanes), slots in order.
void WgradReduce(const float* part, int64_t slots, int64_t K, float* dw) {
  const DF d;
  const int64_t L = int64_t(hn::Lanes(d));
  for (int64_t k = 0; k < K; ++k) {
    auto s = hn::LoadU(d, part + k * L);
    for (int64_t q = 1; q < slots; ++q) s = hn::Add(s, hn::LoadU(d, part + (q * K + k) * L));
    dw[k] = hn::GetLane(hn::SumOfLanes(d, s));
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace spore::cpu::dconv
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace spore::cpu {
namespace dconv {
HWY_EXPORT(VecLanes);
HWY_EXPORT(MaxOB);
HWY_EXPORT(FwdTasks);
HWY_EXPORT(FwdRowsTasks);
HWY_EXPORT(WgradTasks);
HWY_EXPORT(WgradReduce);

// Per-thread buffers that grow once and are kept across calls; Slot tells them apart.
enum class Slot { kScratch, kWeights, kRows, kPartials };
template <Slot>
float* thread_buffer(size_t n) {
  thread_local std::vector<float> buf;
  if (buf.size() < n) buf.resize(n);
  return buf.data();
}
float* thread_scratch(size_t n) { return thread_buffer<Slot::kScratch>(n); }
float* thread_weights(size_t n) { return thread_buffer<Slot::kWeights>(n); }
float* thread_rows(size_t n) { return thread_buffer<Slot::kRows>(n); }
// Per-call partials of the weight gradient (slots, O, taps, lanes), on the calling thread.
float* thread_partials(size_t n) { return thread_buffer<Slot::kPartials>(n); }

}  // namespace dconv

std::string direct_conv_why_not(const DirectConvGeom& g) {
  if (g.C < 1 || g.C > 4) return std::to_string(g.C) + " input channels (at most 4)";
  if (g.O < 1 || g.N < 1 || g.OH < 1 || g.OW < 1) return "an empty conv";
  if (g.kh < 1 || g.kw < 1 || g.sh < 1 || g.sw < 1 || g.dh < 1 || g.dw < 1)
    return "a degenerate kernel";
  if (g.pt < 0 || g.pl < 0) return "negative padding";
  if (g.C * g.kh * g.kw > dconv::kMaxTaps)
    return std::to_string(g.C * g.kh * g.kw) + " taps (at most " + std::to_string(dconv::kMaxTaps) +
           ")";
  const dconv::Plan p = dconv::plan_of(g, 16);
  if (g.C * p.CS >= (int64_t(8) << 20)) return "its per-thread scratch would pass 32 MiB";
  return "";
}
bool direct_conv_supported(const DirectConvGeom& g) { return direct_conv_why_not(g).empty(); }

void conv2d_direct_forward(const DirectConvGeom& g, const float* x, const float* w, const float* b,
                           bool relu, float* y) {
  const int64_t max_ob = HWY_DYNAMIC_DISPATCH(dconv::MaxOB)();
  const int64_t nob = (g.O + max_ob - 1) / max_ob, ob = (g.O + nob - 1) / nob;
  parallel_for(0, g.N * nob, 1, [&](int64_t t0, int64_t t1) {
    HWY_DYNAMIC_DISPATCH(dconv::FwdTasks)(g, x, w, b, relu, y, ob, nob, t0, t1);
  });
}

void conv2d_direct_forward_rows(const DirectConvGeom& g, const float* x, const float* w,
                                const float* b, bool relu, int64_t R, int64_t oh_end,
                                DirectRowSink sink, void* ctx) {
  SPORE_CHECK(R >= 1 && oh_end >= 0 && oh_end <= g.OH,
              "conv2d_direct_forward_rows: expected R >= 1 and ", "0 <= oh_end <= OH=", g.OH,
              ", got R=", R, ", oh_end=", oh_end);
  const int64_t max_ob = HWY_DYNAMIC_DISPATCH(dconv::MaxOB)();
  const int64_t nob = (g.O + max_ob - 1) / max_ob, ob = (g.O + nob - 1) / nob;
  parallel_for(0, g.N * nob, 1, [&](int64_t t0, int64_t t1) {
    HWY_DYNAMIC_DISPATCH(dconv::FwdRowsTasks)
    (g, x, w, b, relu, ob, nob, t0, t1, R, oh_end, sink, ctx);
  });
}

void conv2d_direct_backward_weight(const DirectConvGeom& g, const float* dy, const float* x,
                                   float* dw) {
  const int64_t L = HWY_DYNAMIC_DISPATCH(dconv::VecLanes)(), T = g.C * g.kh * g.kw;
  const int64_t nob = (g.O + dconv::kWgradOB - 1) / dconv::kWgradOB, ob = (g.O + nob - 1) / nob;
  const int64_t tasks = g.N * nob;  // (n, block of outputs), see WgradTasks
  const int64_t slots = std::clamp<int64_t>(get_num_threads(), 1, tasks), K = g.O * T;
  float* part = dconv::thread_partials(size_t(slots * K * L));
  parallel_for(0, slots, 1, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s) HWY_DYNAMIC_DISPATCH(dconv::WgradTasks)
    (g, dy, x, part + s * K * L, ob, nob, s * tasks / slots, (s + 1) * tasks / slots);
  });
  HWY_DYNAMIC_DISPATCH(dconv::WgradReduce)(part, slots, K, dw);
}

std::vector<std::string> direct_conv_targets() {
  std::vector<std::string> r;
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) r.emplace_back(hwy::TargetName(t));
  return r;
}

void direct_conv_use_target(const std::string& name) {
  // The capped list (backends/cpu/isa.h), not an earlier call's.
  hwy::SetSupportedTargetsForTest(cpu_isa().highway_targets);
  if (name.empty()) return;
  for (int64_t t : hwy::SupportedAndGeneratedTargets())
    if (name == hwy::TargetName(t)) return hwy::SetSupportedTargetsForTest(t);
  SPORE_THROW(ErrorKind::ValueError, "direct_conv_use_target: target '", name,
              "' is not built or not supported on this CPU; see direct_conv_targets()");
}

}  // namespace spore::cpu
#endif  // HWY_ONCE
