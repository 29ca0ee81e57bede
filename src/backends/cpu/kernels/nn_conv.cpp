// Conv2d, Conv2dFused, Conv2dBackwardData and Conv2dBackwardWeight on the CPU: the entries of the
// convolution implementation lists (conv_list.h says which runs, in what order, and why) and the
// lists themselves (end of file). The entries here:
//   direct_nchw: conv_direct.cpp's Highway kernels for float32, groups 1, C_in <= 4, plain layouts:
//     forward (Conv2d, Conv2dFused with bias / relu only) and weight gradient. oneDNN computes
//     these in its blocked layouts and the reorders cost as much as the arithmetic; timed against
//     onednn at the first call of a geometry (conv_list.cpp).
//   onednn: oneDNN's direct convolution (float32, bfloat16, float16 where the CPU has it). Layouts
//     are format_tag::any, so oneDNN picks its blocked layouts; the cached Compiled entry reorders
//     NCHW/OIHW user tensors in and out (the reorder primitives are cached, the buffers come from
//     the allocator). Each pass also tries the plain layouts themselves and keeps whichever runs
//     faster ("layout choice"); onednn_blocked / onednn_plain fix the layouts. The bias, when
//     given, is added inside the forward primitive. Conv2dFused (graph-internal, made by
//     backends/cpu/passes/dnnl_fusion.cpp): the same forward primitive with oneDNN post-ops: a
//     per-channel scale and shift (binary mul / add: a folded BatchNorm), a sum for the residual
//     (reordered straight into the primitive's destination buffer) and an eltwise activation; one
//     primitive per post-op set in the cache. Where oneDNN has no implementation for a post-op set
//     (or where it measured faster), the plain conv runs and the epilogue follows in a loop.
//     Blocked activations (attrs blocked_x / blocked_y, made by Graph mode's layout pass): the
//     activation's user descriptor is aBcd16b or aBcd8b (nChw16c / nChw8c, held as the 5-D
//     (N, Cb, H, W, L); attr lanes, the width of the ISA's kernels: backends/cpu/isa.h) instead
//     of nchw, so the candidates that keep the user's layouts run with no activation
//     reorder; the padding lanes of blocked outputs are zeroed after each call
//     (zero_blocked_padding, layout.cpp).
//   onednn_via_f32: float16 / bfloat16 through float32 copies where oneDNN has no implementation.
//   reference: plain loops in float64 (the float64 gradient checks; other dtypes through copies).
// winograd and packed on constant weights are prepared by the constant_convs pass; only their
// predicates are here. winograd on weights that change (training) runs winograd_run
// (conv_winograd.h) for the forward conv and both gradients.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <unordered_map>

#include "backends/cpu/kernels/conv_direct.h"
#include "backends/cpu/kernels/conv_list.h"
#include "backends/cpu/kernels/conv_packed.h"
#include "backends/cpu/kernels/conv_winograd.h"
#include "backends/cpu/kernels/layout.h"
#include "backends/cpu/kernels/nn_util.h"
#include "backends/cpu/onednn/onednn.h"
#include "backends/cpu/ops/ops.h"
#include "core/parallel.h"

namespace spore::cpu {

namespace {

struct Geom {
  int64_t N, C, H, W, O, kh, kw, OH, OW;
  int64_t sh, sw, pt, pb, pl, pr, dh, dw, G;
  bool bx, by;  // x-side / y-side activation blocked (aBcd16b / aBcd8b)
  int64_t L;    // the blocked activations' lanes (16 or 8)
};

// x / y: the activations as the kernel holds them, (N, C, H, W) or blocked (N, Cb, H, W, L) (H and
// W sit at the same positions); a blocked x's logical C comes from the weight.
Geom geom(const Shape& x, const Shape& w, const Shape& y, const ops::Attrs& a) {
  const auto &st = a.get_ints("stride"), &pad = a.get_ints("padding"),
             &dil = a.get_ints("dilation");
  const int64_t G = a.get_int("groups", 1);
  const bool bx = a.get_bool("blocked_x", false), by = a.get_bool("blocked_y", false);
  return {x[0],
          bx ? w[1] * G : x[1],
          x[2],
          x[3],
          w[0],
          w[2],
          w[3],
          y[2],
          y[3],
          st[0],
          st[1],
          pad[0],
          pad[1],
          pad[2],
          pad[3],
          dil[0],
          dil[1],
          G,
          bx,
          by,
          a.get_int("lanes", 16)};
}

// Zeros the padding lanes of a blocked output t (N, Cb, H, W, L) with C logical channels.
void zero_padding(Tensor& t, int64_t C) {
  zero_blocked_padding(t.data_ptr(), t.size(0), C, t.size(2) * t.size(3), itemsize(t.dtype()),
                       t.size(4));
}

// ---- layout choice (inside the onednn entries) --------------------------------------------------
// oneDNN's fastest convolutions want blocked layouts, so by default every call reorders the NCHW
// input and OIHW weight in and the output back; where oneDNN also has a good implementation on the
// plain layouts themselves (small channel counts, batch 1) those reorders are pure cost. The onednn
// entry (kAuto) builds the candidates at the first call of each pass (forward, backward data,
// backward weight) with a geometry, times them on zeroed buffers and keeps the faster (reference
// implementations never win); onednn_blocked / onednn_plain fix the layouts (no timing).
enum class Layout { kAuto, kBlocked, kPlain };

onednn::CacheKey conv_key(ConvProp p, const Geom& g, DType t, bool bias, const ops::Attrs* post,
                          Layout l = Layout::kAuto) {
  onednn::CacheKey k;
  k.add(int64_t(post ? op::Conv2dFused() : ops::OpId::Conv2d))
      .add(int64_t(p))
      .add(int64_t(t))
      .add(bias);
  k.add({g.N, g.C, g.H, g.W, g.O, g.kh, g.kw, g.sh, g.sw, g.pt, g.pb, g.pl, g.pr, g.dh, g.dw, g.G});
  k.add(g.bx).add(g.by).add(g.L).add(int64_t(l));
  if (post) onednn::add_post_op_key(k, *post);
  return k;
}

struct Descs {
  dnnl::memory::desc x_user, w_user, y_user, b_user, c_user, x_any, w_any,
      y_any;                          // c: (1, O, 1, 1)
  dnnl::memory::desc x_nchw, y_nchw;  // the plain layouts (the user's unless blocked)
  onednn::dims strides, dil, pad_l, pad_r;
};

Descs descs(const Geom& g, DType t) {
  const onednn::dt d = onednn::to_dnnl(t);
  const onednn::dims xd{g.N, g.C, g.H, g.W}, yd{g.N, g.O, g.OH, g.OW};
  const onednn::dims wd = g.G == 1 ? onednn::dims{g.O, g.C, g.kh, g.kw}
                                   : onednn::dims{g.G, g.O / g.G, g.C / g.G, g.kh, g.kw};
  Descs r;
  r.x_user = {xd, d, g.bx ? onednn::blocked_tag(g.L) : onednn::tag::nchw};
  r.y_user = {yd, d, g.by ? onednn::blocked_tag(g.L) : onednn::tag::nchw};
  r.w_user = {wd, d, g.G == 1 ? onednn::tag::oihw : onednn::tag::goihw};
  r.b_user = {{g.O}, d, onednn::tag::x};
  r.c_user = {{1, g.O, 1, 1}, d, onednn::tag::nchw};
  r.x_nchw = {xd, d, onednn::tag::nchw};
  r.y_nchw = {yd, d, onednn::tag::nchw};
  r.x_any = {xd, d, onednn::tag::any};
  r.y_any = {yd, d, onednn::tag::any};
  r.w_any = {wd, d, onednn::tag::any};
  r.strides = {g.sh, g.sw};
  r.dil = {g.dh - 1, g.dw - 1};  // oneDNN counts dilation from 0
  r.pad_l = {g.pt, g.pl};
  r.pad_r = {g.pb, g.pr};
  return r;
}

// binary_args: set to the post-ops' extra argument ids (scale, shift) when post has them.
// inference: forward_inference (the same numbers; oneDNN picks from another list of kernels,
// brgconv first, which wins for some geometries and loses for others: choose() times both).
dnnl::convolution_forward::primitive_desc fwd_pd(const Descs& s, bool bias,
                                                 const ops::Attrs* post = nullptr,
                                                 std::vector<int>* binary_args = nullptr,
                                                 bool inference = false) {
  using cf = dnnl::convolution_forward;
  const auto prop =
      inference ? dnnl::prop_kind::forward_inference : dnnl::prop_kind::forward_training;
  auto d = bias ? cf::desc(prop, dnnl::algorithm::convolution_direct, s.x_any, s.w_any, s.b_user,
                           s.y_any, s.strides, s.dil, s.pad_l, s.pad_r)
                : cf::desc(prop, dnnl::algorithm::convolution_direct, s.x_any, s.w_any, s.y_any,
                           s.strides, s.dil, s.pad_l, s.pad_r);
  dnnl::primitive_attr attr = onednn::default_attr();
  if (post) {
    std::vector<int> ids = onednn::set_post_ops(attr, *post, &s.c_user);
    if (binary_args) *binary_args = std::move(ids);
  }
  return cf::primitive_desc(d, attr, onednn::engine());
}

// The layouts a candidate primitive runs on:
//   kAny: oneDNN's preferred ones (the cached entry reorders the user's tensors in and out);
//   kUser: exactly the user's (no reorder at all);
//   kUserActs (blocked activations only): the user's activation layouts, oneDNN's weight layout
//     (the fast kernels on nChw16c want blocked weights; a weight reorder is cheap next to a conv);
//   kNchw (blocked activations only): NCHW / OIHW (the plain implementations such as gemm, which
//     can beat the blocked ones at small channel counts; the blocked activations are reordered).
enum class Cand { kAny, kUser, kUserActs, kNchw };

// One pass's primitive on the layouts of candidate c; null when only a reference implementation
// would run it (c != kAny, or with post-ops: the caller has a faster way). post: Conv2dFused's
// attributes (forward only).
std::shared_ptr<onednn::Compiled> make_prim(ConvProp p, Descs s, bool bias, const ops::Attrs* post,
                                            Cand c, bool inference = false) {
  const bool plain = c != Cand::kAny;
  if (plain) {
    s.x_any = c == Cand::kNchw ? s.x_nchw : s.x_user;
    if (c != Cand::kUserActs) s.w_any = s.w_user;
    s.y_any = c == Cand::kNchw ? s.y_nchw : s.y_user;
  }
  auto is_ref = [&](const dnnl::primitive_desc_base& pd) {
    return (plain || post) && std::string(pd.impl_info_str()).rfind("ref", 0) == 0;
  };
  if (p == ConvProp::kForward) {
    std::vector<int> binary_args;
    auto pd = fwd_pd(s, bias, post, &binary_args, inference);
    if (is_ref(pd)) return nullptr;
    std::vector<onednn::ArgSpec> args{{DNNL_ARG_SRC, s.x_user}, {DNNL_ARG_WEIGHTS, s.w_user}};
    if (bias) args.push_back({DNNL_ARG_BIAS, s.b_user});
    for (int id : binary_args) args.push_back({id, s.c_user});
    args.push_back({DNNL_ARG_DST, s.y_user, true, post && post->get_bool("has_residual", false)});
    return std::make_shared<onednn::Compiled>(dnnl::convolution_forward(pd), pd, std::move(args));
  }
  auto hint = fwd_pd(s, false);
  if (p == ConvProp::kBackwardData) {
    using cb = dnnl::convolution_backward_data;
    cb::primitive_desc pd(cb::desc(dnnl::algorithm::convolution_direct, s.x_any, s.w_any, s.y_any,
                                   s.strides, s.dil, s.pad_l, s.pad_r),
                          onednn::default_attr(), onednn::engine(), hint);
    if (is_ref(pd)) return nullptr;
    return std::make_shared<onednn::Compiled>(
        cb(pd), pd,
        std::vector<onednn::ArgSpec>{{DNNL_ARG_DIFF_DST, s.y_user},
                                     {DNNL_ARG_WEIGHTS, s.w_user},
                                     {DNNL_ARG_DIFF_SRC, s.x_user, true}});
  }
  using cw = dnnl::convolution_backward_weights;
  cw::primitive_desc pd(cw::desc(dnnl::algorithm::convolution_direct, s.x_any, s.w_any, s.y_any,
                                 s.strides, s.dil, s.pad_l, s.pad_r),
                        onednn::default_attr(), onednn::engine(), hint);
  if (is_ref(pd)) return nullptr;
  return std::make_shared<onednn::Compiled>(
      cw(pd), pd,
      std::vector<onednn::ArgSpec>{{DNNL_ARG_DIFF_DST, s.y_user},
                                   {DNNL_ARG_SRC, s.x_user},
                                   {DNNL_ARG_DIFF_WEIGHTS, s.w_user, true}});
}

// Times the candidates on zeroed buffers: a warm-up each, then five rounds running each once in
// turn (so a load spike on a busy machine hits them alike); returns the index with the best time.
size_t fastest(const std::vector<std::shared_ptr<onednn::Compiled>>& cands) {
  struct Bufs {
    std::vector<Tensor> t;
    std::vector<const void*> p;
  };
  std::vector<Bufs> bufs(cands.size());
  for (size_t c = 0; c < cands.size(); ++c)
    for (size_t bytes : cands[c]->arg_bytes()) {
      bufs[c].t.push_back(Tensor::empty({int64_t(bytes)}, kUInt8));
      std::memset(bufs[c].t.back().data_ptr(), 0, bytes);
      bufs[c].p.push_back(bufs[c].t.back().data_ptr());
    }
  // The last argument is the output; as the initial contents of an accumulating one it is zeros.
  auto run = [&](size_t c) { cands[c]->run(bufs[c].p.data(), bufs[c].p.size(), bufs[c].p.back()); };
  auto timed = [&](size_t c) {
    const auto t0 = std::chrono::steady_clock::now();
    run(c);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  std::vector<double> best(cands.size(), 1e30), warm(cands.size());
  for (size_t c = 0; c < cands.size(); ++c) warm[c] = timed(c);
  // A candidate 4x slower than another at warm-up (gemm with binary post-ops can be 10x) is not
  // timed further: at batch 128 its runs would cost seconds.
  const double cut = 4 * *std::min_element(warm.begin(), warm.end());
  for (int r = 0; r < 5; ++r)
    for (size_t c = 0; c < cands.size(); ++c) {
      if (warm[c] > cut) continue;
      best[c] = std::min(best[c], timed(c));
    }
  return size_t(std::min_element(best.begin(), best.end()) - best.begin());
}

// What each timing decided, by the primitive's cache key after a kind: kLayoutChoice, the
// candidate (Cand * 2 + forward_inference) the onednn entry keeps; kFusedChoice, 1 when the plain
// conv + epilogue loop beat the fused primitive. Exported and imported through
// Backend::kernel_choices (a compiled model file carries them) and consulted before timing.
constexpr int64_t kLayoutChoice = 0, kFusedChoice = 1;
std::mutex& choice_mutex() {
  static std::mutex m;
  return m;
}
std::map<std::vector<int64_t>, int64_t>& choices() {
  static auto& c = *new std::map<std::vector<int64_t>, int64_t>;
  return c;
}

// The candidates: blocked, plain and (forward) blocked with forward_inference; the fastest wins.
// With a blocked activation "plain" means the user's layouts, and two more candidates (kUserActs,
// kNchw, see Cand) keep the choice at least as good as with NCHW activations.
std::shared_ptr<onednn::Compiled> choose(ConvProp p, const Descs& s, bool bias,
                                         const ops::Attrs* post, bool blocked, Layout l,
                                         const std::vector<int64_t>& key) {
  std::vector<std::shared_ptr<onednn::Compiled>> cands;
  std::vector<int64_t> codes;  // each candidate's (Cand, inference) as Cand * 2 + inference
  auto make = [&](Cand cand, bool inference) -> std::shared_ptr<onednn::Compiled> {
    try {
      return make_prim(p, s, bias, post, cand, inference);
    } catch (const dnnl::error& e) {  // no implementation for this combination
      if (e.status != dnnl_unimplemented) throw;
    }
    return nullptr;
  };
  auto add = [&](Cand cand, bool inference) {
    if (auto c = make(cand, inference)) {
      cands.push_back(std::move(c));
      codes.push_back(int64_t(cand) * 2 + int64_t(inference));
    }
  };
  std::vector<int64_t> choice_key{kLayoutChoice};
  choice_key.insert(choice_key.end(), key.begin(), key.end());
  int64_t known = -1;
  {
    const std::lock_guard lock(choice_mutex());
    if (auto it = choices().find(choice_key); it != choices().end()) known = it->second;
  }
  if (known >= 0 && known < 8)  // timed before (this process, or a compiled model file): build
    if (auto c = make(Cand(known / 2), known % 2 == 1)) return c;  // only the winner
  if (l != Layout::kPlain) {
    add(Cand::kAny, false);
    // onednn_blocked fixes oneDNN's own layouts without timing (forward_inference may pick
    // another layout, e.g. brgconv's nhwc).
    if (p == ConvProp::kForward && l == Layout::kAuto) add(Cand::kAny, true);
  }
  if (l != Layout::kBlocked) add(Cand::kUser, false);
  if (l != Layout::kBlocked && blocked) {
    add(Cand::kUserActs, false);
    add(Cand::kNchw, false);
  }
  // None: float16 without hardware support (the kernels go through float32), or a post-op set
  // oneDNN cannot fuse (the fused kernel runs the conv, then the epilogue loop).
  if (cands.empty()) return nullptr;
  const size_t best = cands.size() == 1 ? 0 : fastest(cands);
  const std::lock_guard lock(choice_mutex());
  choices()[choice_key] = codes[best];
  return cands[best];
}

std::shared_ptr<onednn::Compiled> conv_prim(ConvProp p, const Geom& g, DType t, bool bias,
                                            const ops::Attrs* post, Layout l) {
  const onednn::CacheKey key = conv_key(p, g, t, bias, post, l);
  return onednn::cached(key, [&]() -> std::shared_ptr<onednn::Compiled> {
    try {
      return choose(p, descs(g, t), bias, post, g.bx || g.by, l, key.values());
    } catch (const dnnl::error& e) {
      if (e.status == dnnl_unimplemented) return nullptr;
      onednn::throw_dnnl_error("dnnl::convolution primitive_desc", int(e.status), e.what(),
                               __FILE__, __LINE__, "check the conv2d shapes, padding and groups");
    }
  });
}

}  // namespace

std::string conv_choices_text() {
  const std::lock_guard lock(choice_mutex());
  std::string out;
  for (const auto& [key, idx] : choices()) {
    out += "conv " + std::to_string(key.size());
    for (int64_t v : key) out += " " + std::to_string(v);
    out += " " + std::to_string(idx) + "\n";
  }
  return out;
}

void load_conv_choices(const std::string& text) {
  std::map<std::vector<int64_t>, int64_t> parsed;  // all or nothing
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    std::istringstream ls(line);
    std::string kind;
    int64_t count = -1, idx = -1;
    ls >> kind >> count;
    SPORE_CHECK(ls && kind == "conv" && count >= 0 && count <= 512, "kernel choices line ", n,
                ": expected \"conv COUNT VALUES... CHOICE\" with COUNT <= 512");
    std::vector<int64_t> key(static_cast<size_t>(count));
    for (auto& v : key) ls >> v;
    ls >> idx;
    std::string rest;
    SPORE_CHECK(ls && !(ls >> rest) && idx >= 0 && idx < 8 && !key.empty() &&
                    (key[0] == kLayoutChoice || key[0] == kFusedChoice),
                "kernel choices line ", n, ": expected ", count,
                " values (the first a kind, 0 or 1) and a choice in [0, 8)");
    parsed[std::move(key)] = idx;
  }
  const std::lock_guard lock(choice_mutex());
  for (auto& [k, v] : parsed) choices()[k] = v;
}

namespace {

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

// The fused epilogue after a plain conv: y = act(y * scale[c] + shift[c] + residual), per (n, c)
// plane; relu (the common case) and no activation have loops the compiler vectorises.
template <typename T>
void epilogue_loop(const ops::Attrs& a, int64_t C, int64_t HW, T* y, const T* scale, const T* shift,
                   const T* res, int64_t n) {
  const std::string act = a.has("act") ? a.get_string("act") : std::string();
  const int kind = act.empty() ? 0 : act == "relu" ? 1 : 2;
  const onednn::Activation activation = onednn::activation_of(a);  // decoded before the loop
  using F = acc_t<T>;
  parallel_for(0, n / HW, std::max<int64_t>(1, 16384 / HW), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t c = p % C;
      const F s = scale ? F(scale[c]) : F(1), b = scale ? F(shift[c]) : F(0);
      T* yp = y + p * HW;
      const T* rp = res ? res + p * HW : nullptr;
      for (int64_t i = 0; i < HW; ++i) {
        F v = F(yp[i]) * s + b + (rp ? F(rp[i]) : F(0));
        if (kind == 1)
          v = v > F(0) ? v : F(0);
        else if (kind == 2)
          v = F(activation(double(v)));
        yp[i] = T(v);
      }
    }
  });
}

// The same epilogue on a blocked y (N, Cb, OH, OW, L): channel cb*L + l for lane l; padding
// lanes get scale 1 and shift 0 (their result is zeroed afterwards).
template <typename T>
void epilogue_loop_blocked(const ops::Attrs& a, int64_t C, int64_t HW, int64_t L, T* y,
                           const T* scale, const T* shift, const T* res, int64_t n) {
  const std::string act = a.has("act") ? a.get_string("act") : std::string();
  const int kind = act.empty() ? 0 : act == "relu" ? 1 : 2;
  const onednn::Activation activation = onednn::activation_of(a);
  using F = acc_t<T>;
  const int64_t Cb = (C + L - 1) / L, plane = HW * L;
  parallel_for(0, n / plane, std::max<int64_t>(1, 16384 / plane), [&](int64_t p0, int64_t p1) {
    F s[16], b[16];
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t cb = p % Cb;
      for (int64_t l = 0; l < L; ++l) {
        const int64_t c = cb * L + l;
        s[l] = scale && c < C ? F(scale[c]) : F(1);
        b[l] = scale && c < C ? F(shift[c]) : F(0);
      }
      T* yp = y + p * plane;
      const T* rp = res ? res + p * plane : nullptr;
      for (int64_t i = 0; i < HW; ++i)
        for (int64_t l = 0; l < L; ++l) {
          const int64_t e = i * L + l;
          F v = F(yp[e]) * s[l] + b[l] + (rp ? F(rp[e]) : F(0));
          if (kind == 1)
            v = v > F(0) ? v : F(0);
          else if (kind == 2)
            v = F(activation(double(v)));
          yp[e] = T(v);
        }
    }
  });
}

// For each fused conv (geometry + post-ops), choices() keeps (kFusedChoice) whether the plain conv
// followed by the epilogue loop beat the fused primitive when both were timed at the first call.
// The fused primitive with binary post-ops (a folded BatchNorm) has no implementation on plain
// layouts, so at batch 1 it pays the weight reorder that the unfused plain conv avoids.
struct KeyHash {
  size_t operator()(const onednn::CacheKey& k) const { return k.hash(); }
};

double seconds(const std::function<void()>& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

Geom geom(const ConvDesc& d) {
  return {d.N,  d.C,  d.H,  d.W,  d.O,  d.kh, d.kw, d.OH,        d.OW,        d.sh,   d.sw,
          d.pt, d.pb, d.pl, d.pr, d.dh, d.dw, d.G,  d.blocked_x, d.blocked_y, d.lanes};
}

// The conv, then the epilogue (scale, shift, residual, activation) in a loop: float32 with a
// post-op set oneDNN cannot fuse (or when timed faster), and the float64 reference.
template <typename T>
void conv_then_epilogue(ops::KernelContext& ctx, const Geom& g, Layout l) {
  const bool has_bias = ctx.attrs.get_bool("has_bias", false);
  const bool has_scale = ctx.attrs.get_bool("has_scale", false);
  const bool has_res = ctx.attrs.get_bool("has_residual", false);
  size_t i = 2;
  Tensor x = dense(ctx.inputs[0]), w = dense(ctx.inputs[1]);
  Tensor b = has_bias ? dense(ctx.inputs[i++]) : Tensor();
  Tensor scale = has_scale ? dense(ctx.inputs[i++]) : Tensor();
  Tensor shift = has_scale ? dense(ctx.inputs[i++]) : Tensor();
  Tensor r = has_res ? dense(ctx.inputs[i++]) : Tensor();
  Tensor& y = ctx.outputs[0];
  T* yp = y.data<T>();
  if constexpr (std::is_same_v<T, double>) {
    conv_fwd_f64(g, x.data<double>(), w.data<double>(), has_bias ? b.data<double>() : nullptr, yp);
  } else {
    auto plain = conv_prim(ConvProp::kForward, g, y.dtype(), has_bias, nullptr, l);
    SPORE_ASSERT(plain, "no float32 convolution");
    if (has_bias)
      plain->run({x.data_ptr(), w.data_ptr(), b.data_ptr(), yp});
    else
      plain->run({x.data_ptr(), w.data_ptr(), yp});
  }
  const T* sp = has_scale ? scale.data<T>() : nullptr;
  const T* hp = has_scale ? shift.data<T>() : nullptr;
  const T* rp = has_res ? r.data<T>() : nullptr;
  if (g.by) {
    if constexpr (!std::is_same_v<T, double>)
      epilogue_loop_blocked<T>(ctx.attrs, g.O, g.OH * g.OW, g.L, yp, sp, hp, rp, y.numel());
    return;
  }
  epilogue_loop<T>(ctx.attrs, g.O, g.OH * g.OW, yp, sp, hp, rp, y.numel());
}

// ==== the entries
// ================================================================================== Each: why_not
// (the predicate, "" = takes it) and run. The lists are at the end of the file.

// ---- winograd, packed: constant weights, prepared by the constant_convs pass --------------------
// Winograd does 2.25x fewer multiplies, but its transformed weights are 16/9 the size and are
// streamed once per block of tiles: with few output tiles per thread (a 4x4 map at batch 1)
// reading them costs more than the multiplies saved, and packed is faster.
constexpr int64_t kMinWinogradTilesPerThread = 8;

std::string constant_conv_why_not(const ConvDesc& d) {
  if (d.prop != ConvProp::kForward) return "forward only";
  if (!d.constant_weights)
    return "weights are not graph constants (prepared when a graph compiles)";
  if (!d.blocked_x || !d.blocked_y) return "activations are not blocked (nChw16c / nChw8c)";
  if (d.dtype != kFloat32) return std::string(dtype_name(d.dtype)) + " (float32 only)";
  if (d.O % 16 != 0 || d.C % 16 != 0) return "O and C must be multiples of 16";
  if (d.kh * d.kw > 64) return "more than 64 taps";
  if (d.G != 1 || d.dh != 1 || d.dw != 1) return "groups or dilation";
  if (!conv_act_known(d.act)) return "activation " + d.act + " (relu, silu or sigmoid only)";
  return "";
}
// Weights that are not constants (training: they change every step) take the same kernel through
// winograd_run (conv_winograd.h), which transforms them in the call: the forward conv, the data
// gradient (itself a stride-1 3x3 conv, of dy with the rotated, transposed kernel) and the weight
// gradient (in the Winograd domain); timed against oneDNN at the first call of each geometry and
// pass, so it runs only where it measured faster. SPORE_CONV_IMPL=-winograd turns it off (A/B).
std::string winograd_train_why_not(const ConvDesc& d) {
  if (!d.blocked_x || !d.blocked_y) return "activations are not blocked (nChw16c / nChw8c)";
  if (d.dtype != kFloat32) return std::string(dtype_name(d.dtype)) + " (float32 only)";
  if (d.O % 16 != 0 || d.C % 16 != 0) return "O and C must be multiples of 16";
  if (d.G != 1 || d.dh != 1 || d.dw != 1) return "groups or dilation";
  if (d.kh != 3 || d.kw != 3 || d.sh != 1 || d.sw != 1) return "not a 3x3 stride-1 conv";
  // The data gradient pads dy by 2 - p; the forward's tiles read p rows before the image.
  for (int64_t p : {d.pt, d.pb, d.pl, d.pr})
    if (p < 0 || p > 2) return "padding " + std::to_string(p) + " (0 to 2 only)";
  if (!d.act.empty() && d.act != "relu" && d.act != "silu")
    return "activation " + d.act + " (relu or silu only)";
  return "";
}
// Both kernels keep 16-channel groups in registers; on 8-lane blocks only where a vector holds at
// most 8 lanes (AVX2), so that none spans two blocks.
std::string lanes_why_not(const ConvDesc& d, bool takes) {
  if (takes) return "";
  return "activations blocked in " + std::to_string(d.lanes) +
         " lanes, narrower than this machine's vectors";
}
std::string winograd_why_not(const ConvDesc& d) {
  if (std::string r = d.constant_weights ? constant_conv_why_not(d) : winograd_train_why_not(d);
      !r.empty())
    return r;
  if (std::string r = lanes_why_not(d, winograd_takes_lanes(d.lanes)); !r.empty()) return r;
  if (d.kh != 3 || d.kw != 3 || d.sh != 1 || d.sw != 1) return "not a 3x3 stride-1 conv";
  const bool bwd = d.prop == ConvProp::kBackwardData;  // its output (the tiles) is dx
  const int64_t tiles = d.N * (((bwd ? d.H : d.OH) + 1) / 2) * (((bwd ? d.W : d.OW) + 1) / 2);
  const int64_t want = kMinWinogradTilesPerThread * get_num_threads();
  if (tiles < want)
    return std::to_string(tiles) + " output tiles, fewer than " + std::to_string(want) +
           " (8 per thread): reading its larger weights costs more than its multiplies save";
  return "";
}
// A plain (NCHW) input of fewer than 16 channels into blocked activations (a network's stem: its
// colour channels) is read in place, one channel at a time: oneDNN's kernels for it ran at about
// half the packed kernel's speed (YOLOv5s's 6x6 stride-2 stem, 3 to 32 channels).
std::string packed_why_not(const ConvDesc& d) {
  ConvDesc blocked = d;
  if (!d.blocked_x && d.blocked_y && d.C < 16) blocked.blocked_x = true, blocked.C = 16;
  if (std::string r = constant_conv_why_not(blocked); !r.empty()) return r;
  return lanes_why_not(d, packed_takes_lanes(d.lanes));
}

// ---- direct_nchw (conv_direct.cpp): few input channels, plain NCHW ------------------------------
// oneDNN computes these in its blocked layouts and the reorders cost as much as the arithmetic.
DirectConvGeom direct_geom(const ConvDesc& d) {
  return {d.N, d.C, d.H, d.W, d.O, d.kh, d.kw, d.OH, d.OW, d.sh, d.sw, d.pt, d.pl, d.dh, d.dw};
}
std::string direct_why_not(const ConvDesc& d) {
  if (d.prop == ConvProp::kBackwardData) return "no backward-data kernel";
  if (d.dtype != kFloat32) return std::string(dtype_name(d.dtype)) + " (float32 only)";
  if (d.G != 1) return "groups " + std::to_string(d.G);
  if (d.blocked_x || d.blocked_y) return "blocked activations";
  if (d.scale || d.residual) return "a scale/shift or residual post-op (bias and relu only)";
  if (!d.act.empty() && d.act != "relu") return "activation " + d.act + " (relu only)";
  return direct_conv_why_not(direct_geom(d));
}
void direct_run(ops::KernelContext& ctx, const ConvDesc& d) {
  const DirectConvGeom g = direct_geom(d);
  if (d.prop == ConvProp::kBackwardWeight) {
    Tensor dy = dense(ctx.inputs[0]), x = dense(ctx.inputs[1]);
    return conv2d_direct_backward_weight(g, dy.data<float>(), x.data<float>(),
                                         ctx.outputs[0].data<float>());
  }
  Tensor x = dense(ctx.inputs[0]), w = dense(ctx.inputs[1]);
  Tensor b = d.bias ? dense(ctx.inputs[2]) : Tensor();
  conv2d_direct_forward(g, x.data<float>(), w.data<float>(), d.bias ? b.data<float>() : nullptr,
                        d.act == "relu", ctx.outputs[0].data<float>());
}

// ---- onednn, onednn_blocked, onednn_plain -------------------------------------------------------
template <Layout L>
std::string onednn_why_not(const ConvDesc& d) {
  if (d.dtype == kFloat64) return "float64 (oneDNN has no float64 convolution)";
  const Geom g = geom(d);
  ops::Attrs post;
  const ops::Attrs* pa = d.attrs;
  if (d.fused && !pa) {
    post.set("has_bias", d.bias)
        .set("has_scale", d.scale)
        .set("has_residual", d.residual)
        .set("act", d.act);
    pa = &post;
  }
  if (conv_prim(d.prop, g, d.dtype, d.bias, d.fused ? pa : nullptr, L)) return "";
  // A post-op set oneDNN cannot fuse: float32 runs the plain conv, then the epilogue loop.
  if (d.fused && d.dtype == kFloat32 && conv_prim(d.prop, g, d.dtype, d.bias, nullptr, L))
    return "";
  return "no oneDNN implementation for " + std::string(dtype_name(d.dtype)) + " on this CPU";
}

void onednn_forward(ops::KernelContext& ctx, const ConvDesc& d, Layout l) {
  const Geom g = geom(d);
  Tensor& y = ctx.outputs[0];
  Tensor x = dense(ctx.inputs[0]), w = dense(ctx.inputs[1]);
  if (!d.fused) {
    Tensor b = d.bias ? dense(ctx.inputs[2]) : Tensor();
    auto prim = conv_prim(ConvProp::kForward, g, y.dtype(), d.bias, nullptr, l);
    SPORE_ASSERT(prim, "no oneDNN convolution (onednn's predicate said there was)");
    if (d.bias)
      prim->run({x.data_ptr(), w.data_ptr(), b.data_ptr(), y.data_ptr()});
    else
      prim->run({x.data_ptr(), w.data_ptr(), y.data_ptr()});
    if (g.by) zero_padding(y, g.O);
    return;
  }
  // Conv2dFused: (x, w[, bias][, scale, shift][, residual]) ->
  //   act((conv(x, w) + bias) * scale + shift + residual), scale and shift per output channel.
  auto prim = conv_prim(ConvProp::kForward, g, y.dtype(), d.bias, &ctx.attrs, l);
  auto unfused = [&] { conv_then_epilogue<float>(ctx, g, l); };
  if (!prim) {
    unfused();
  } else {
    size_t i = 2;
    Tensor b = d.bias ? dense(ctx.inputs[i++]) : Tensor();
    Tensor scale = d.scale ? dense(ctx.inputs[i++]) : Tensor();
    Tensor shift = d.scale ? dense(ctx.inputs[i++]) : Tensor();
    Tensor r = d.residual ? dense(ctx.inputs[i++]) : Tensor();
    const void* ptrs[6] = {x.data_ptr(), w.data_ptr()};  // in the order of make_prim's ArgSpecs
    size_t n = 2;
    if (d.bias) ptrs[n++] = b.data_ptr();
    if (d.scale) {
      ptrs[n++] = scale.data_ptr();
      ptrs[n++] = shift.data_ptr();
    }
    ptrs[n++] = y.data_ptr();
    auto fused = [&] { prim->run(ptrs, n, d.residual ? r.data_ptr() : nullptr); };
    if (y.dtype() != kFloat32 || l != Layout::kAuto) {
      fused();
    } else {
      // float32: the first call times both ways on these very buffers (each writes all of y from
      // the inputs, so repeating them is harmless), in turn, best of three.
      const onednn::CacheKey ck = conv_key(ConvProp::kForward, g, y.dtype(), d.bias, &ctx.attrs);
      std::vector<int64_t> key{kFusedChoice};
      key.insert(key.end(), ck.values().begin(), ck.values().end());
      int64_t known = -1;
      {
        const std::lock_guard lock(choice_mutex());
        if (auto it = choices().find(key); it != choices().end()) known = it->second;
      }
      if (known == 1) {
        unfused();
      } else if (known == 0) {
        fused();
      } else {
        double tf = 1e30, tu = 1e30;
        unfused();  // warm-up (creates the plain primitive)
        for (int k = 0; k < 3; ++k) {
          tf = std::min(tf, seconds(fused));
          tu = std::min(tu, seconds(unfused));
        }
        if (tf <= tu) fused();  // y gets the winner's result, bit for bit what later calls compute
        const std::lock_guard lock(choice_mutex());
        choices()[key] = tu < tf;
      }
    }
  }
  // Post-ops (a sigmoid, a shift) make padding lanes non-zero; the contract wants zeros.
  if (g.by) zero_padding(y, g.O);
}

void onednn_backward_data(ops::KernelContext& ctx, const ConvDesc& d, Layout l) {
  const Geom g = geom(d);
  Tensor dy = dense(ctx.inputs[0]), w = dense(ctx.inputs[1]);
  Tensor& dx = ctx.outputs[0];
  auto prim = conv_prim(ConvProp::kBackwardData, g, dx.dtype(), false, nullptr, l);
  SPORE_ASSERT(prim, "no oneDNN convolution (onednn's predicate said there was)");
  prim->run({dy.data_ptr(), w.data_ptr(), dx.data_ptr()});
  if (g.bx) zero_padding(dx, g.C);
}

void conv2d_backward_weight_kernel(ops::KernelContext& ctx);

// oneDNN's bfloat16 weight gradient is 2x faster than float32 on large images but collapses on
// small ones (ResNet-18's 256x8x8: 17-20x slower than float32 on this CPU, 512x4x4: 2-4x). The
// onednn entry's first call of each geometry runs both (the bf16 primitive, and widening dy and x
// to float32 for the float32 primitive: the same result up to the final rounding to bfloat16,
// which both make) and remembers which was faster; onednn_blocked / onednn_plain keep bf16.
bool bf16_weight_grad_via_f32(const Geom& g, ops::KernelContext& ctx, onednn::Compiled& prim) {
  static std::mutex mu;
  static std::unordered_map<onednn::CacheKey, bool, KeyHash> via_f32;  // by geometry
  const onednn::CacheKey key = conv_key(ConvProp::kBackwardWeight, g, kBFloat16, false, nullptr);
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = via_f32.find(key);
    if (it != via_f32.end()) return it->second;
  }
  Tensor dy = dense(ctx.inputs[0]), x = dense(ctx.inputs[1]);
  Tensor& dw = ctx.outputs[0];
  double t16 = 1e30, t32 = 1e30;
  for (int r = 0; r < 2; ++r) {  // the first round warms both up
    t16 = std::min(t16, seconds([&] { prim.run({dy.data_ptr(), x.data_ptr(), dw.data_ptr()}); }));
    t32 = std::min(t32, seconds([&] { run_via_f32(ctx, conv2d_backward_weight_kernel); }));
  }
  const bool use_f32 = t32 < t16;
  std::lock_guard<std::mutex> lock(mu);
  via_f32[key] = use_f32;
  return use_f32;
}

void onednn_backward_weight(ops::KernelContext& ctx, const ConvDesc& d, Layout l) {
  const Geom g = geom(d);
  Tensor dy = dense(ctx.inputs[0]), x = dense(ctx.inputs[1]);
  Tensor& dw = ctx.outputs[0];
  auto prim = conv_prim(ConvProp::kBackwardWeight, g, dw.dtype(), false, nullptr, l);
  SPORE_ASSERT(prim, "no oneDNN convolution (onednn's predicate said there was)");
  if (dw.dtype() == kBFloat16 && l == Layout::kAuto && bf16_weight_grad_via_f32(g, ctx, *prim))
    return run_via_f32(ctx, conv2d_backward_weight_kernel);
  prim->run({dy.data_ptr(), x.data_ptr(), dw.data_ptr()});
}

template <Layout L>
void onednn_run(ops::KernelContext& ctx, const ConvDesc& d) {
  switch (d.prop) {
    case ConvProp::kForward:
      return onednn_forward(ctx, d, L);
    case ConvProp::kBackwardData:
      return onednn_backward_data(ctx, d, L);
    case ConvProp::kBackwardWeight:
      return onednn_backward_weight(ctx, d, L);
  }
}

// ---- onednn_via_f32: float16 / bfloat16 where oneDNN has no implementation ----------------------
void conv2d_kernel(ops::KernelContext& ctx);
void conv2d_backward_data_kernel(ops::KernelContext& ctx);

std::string via_f32_why_not(const ConvDesc& d) {
  if (d.dtype != kFloat16 && d.dtype != kBFloat16) return "float16 / bfloat16 only";
  return "";
}
void via_f32_run(ops::KernelContext& ctx, const ConvDesc& d) {
  // The float32 copy goes through its own list (direct_nchw or onednn).
  switch (d.prop) {
    case ConvProp::kForward:
      return run_via_f32(ctx, conv2d_kernel);
    case ConvProp::kBackwardData:
      return run_via_f32(ctx, conv2d_backward_data_kernel);
    case ConvProp::kBackwardWeight:
      return run_via_f32(ctx, conv2d_backward_weight_kernel);
  }
}

// ---- reference: plain loops in float64 (other dtypes through float64 copies) --------------------
std::string reference_why_not(const ConvDesc& d) {
  if (d.blocked_x || d.blocked_y) return "blocked activations (the loops read NCHW)";
  return "";
}
void reference_f64(ops::KernelContext& ctx) {
  const ConvProp prop = ctx.def.id == ops::OpId::Conv2dBackwardData     ? ConvProp::kBackwardData
                        : ctx.def.id == ops::OpId::Conv2dBackwardWeight ? ConvProp::kBackwardWeight
                                                                        : ConvProp::kForward;
  const ConvDesc d = ConvDesc::of(prop, ctx);
  const Geom g = geom(d);
  Tensor a = dense(ctx.inputs[0]), b = dense(ctx.inputs[1]);
  double* out = ctx.outputs[0].data<double>();
  switch (prop) {
    case ConvProp::kForward:
      if (d.fused) return conv_then_epilogue<double>(ctx, g, Layout::kAuto);
      return conv_fwd_f64(g, a.data<double>(), b.data<double>(),
                          d.bias ? dense(ctx.inputs[2]).data<double>() : nullptr, out);
    case ConvProp::kBackwardData:
      return conv_bwd_data_f64(g, a.data<double>(), b.data<double>(), out);
    case ConvProp::kBackwardWeight:
      return conv_bwd_weight_f64(g, a.data<double>(), b.data<double>(), out);
  }
}
void reference_run(ops::KernelContext& ctx, const ConvDesc& d) {
  if (d.dtype == kFloat64) return reference_f64(ctx);
  // Through float64 copies (the reference of a test, never a fast path).
  ops::Tensors in, out;
  for (const Tensor& t : ctx.inputs)
    in.push_back(is_floating(t.dtype()) ? dense_as(t, kFloat64) : t);
  for (const Tensor& t : ctx.outputs) out.push_back(Tensor::empty(t.shape(), kFloat64));
  ops::KernelContext c64{ctx.def, in, out, ctx.attrs};
  reference_f64(c64);
  for (size_t i = 0; i < out.size(); ++i) convert_into(out[i], ctx.outputs[i]);
}

// ---- the kernels --------------------------------------------------------------------------------
void conv2d_kernel(ops::KernelContext& ctx) {
  if (ctx.outputs[0].numel() > 0) run_conv(ConvProp::kForward, ctx);
}
void conv2d_backward_data_kernel(ops::KernelContext& ctx) {
  if (ctx.outputs[0].numel() > 0) run_conv(ConvProp::kBackwardData, ctx);
}
void conv2d_backward_weight_kernel(ops::KernelContext& ctx) {
  if (ctx.outputs[0].numel() > 0) run_conv(ConvProp::kBackwardWeight, ctx);
}

}  // namespace

// ==== the lists
// ======================================================================================
const std::vector<ConvImpl>& conv_impls(ConvProp prop) {
  static const ConvImpl winograd{"winograd", winograd_why_not, winograd_run, /*timed=*/true};
  static const ConvImpl packed{"packed", packed_why_not, nullptr};
  static const ConvImpl direct{"direct_nchw", direct_why_not, direct_run, /*timed=*/true};
  static const ConvImpl onednn{"onednn", onednn_why_not<Layout::kAuto>, onednn_run<Layout::kAuto>};
  static const ConvImpl blocked{"onednn_blocked", onednn_why_not<Layout::kBlocked>,
                                onednn_run<Layout::kBlocked>};
  static const ConvImpl plain{"onednn_plain", onednn_why_not<Layout::kPlain>,
                              onednn_run<Layout::kPlain>};
  static const ConvImpl via_f32{"onednn_via_f32", via_f32_why_not, via_f32_run};
  static const ConvImpl reference{"reference", reference_why_not, reference_run};
  static const std::vector<ConvImpl> forward{winograd, packed, direct,  onednn,
                                             blocked,  plain,  via_f32, reference};
  static const std::vector<ConvImpl> backward_data{winograd, onednn,  blocked,
                                                   plain,    via_f32, reference};
  static const std::vector<ConvImpl> backward_weight{winograd, direct,  onednn,   blocked,
                                                     plain,    via_f32, reference};
  switch (prop) {
    case ConvProp::kForward:
      return forward;
    case ConvProp::kBackwardData:
      return backward_data;
    case ConvProp::kBackwardWeight:
      return backward_weight;
  }
  return forward;
}

ConvDesc ConvDesc::of(ConvProp prop, const Shape& x, const Shape& w, const Shape& y, DType dtype,
                      const ops::Attrs& a, bool fused, size_t num_inputs) {
  ConvDesc d;
  d.prop = prop;
  d.dtype = dtype;
  const Geom g = cpu::geom(x, w, y, a);
  d.N = g.N, d.C = g.C, d.H = g.H, d.W = g.W, d.O = g.O, d.kh = g.kh, d.kw = g.kw, d.OH = g.OH,
  d.OW = g.OW;
  d.sh = g.sh, d.sw = g.sw, d.pt = g.pt, d.pb = g.pb, d.pl = g.pl, d.pr = g.pr, d.dh = g.dh,
  d.dw = g.dw;
  d.G = g.G, d.blocked_x = g.bx, d.blocked_y = g.by, d.lanes = g.L;
  if (prop == ConvProp::kForward) {
    d.fused = fused;
    if (fused) {
      d.bias = a.get_bool("has_bias", false);
      d.scale = a.get_bool("has_scale", false);
      d.residual = a.get_bool("has_residual", false);
      if (a.has("act")) d.act = a.get_string("act");
    } else {
      d.bias = num_inputs == 3;
    }
  }
  d.attrs = &a;
  return d;
}

ConvDesc ConvDesc::of(ConvProp prop, const ops::KernelContext& ctx) {
  // x / w / y as the kernel holds them, whichever is the output.
  const Shape& w =
      prop == ConvProp::kBackwardWeight ? ctx.outputs[0].shape() : ctx.inputs[1].shape();
  const Shape& x = prop == ConvProp::kForward        ? ctx.inputs[0].shape()
                   : prop == ConvProp::kBackwardData ? ctx.outputs[0].shape()
                                                     : ctx.inputs[1].shape();
  const Shape& y = prop == ConvProp::kForward ? ctx.outputs[0].shape() : ctx.inputs[0].shape();
  return of(prop, x, w, y, ctx.outputs[0].dtype(), ctx.attrs, ctx.def.id != ops::OpId::Conv2d,
            ctx.inputs.size());
}

SPORE_KERNEL(CPU, Conv2d, conv2d_kernel, kFloat32, kFloat64, kBFloat16, kFloat16);
SPORE_CPU_KERNEL(Conv2dFused, conv2d_kernel, kFloat32, kFloat64, kBFloat16, kFloat16);
SPORE_KERNEL(CPU, Conv2dBackwardData, conv2d_backward_data_kernel, kFloat32, kFloat64, kBFloat16,
             kFloat16);
SPORE_KERNEL(CPU, Conv2dBackwardWeight, conv2d_backward_weight_kernel, kFloat32, kFloat64,
             kBFloat16, kFloat16);

}  // namespace spore::cpu
