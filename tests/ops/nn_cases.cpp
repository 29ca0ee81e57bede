// Op-table rows for the nn primitives (matmul, conv2d and its backwards, pools, batch/layer norm)
// and the optimizer updates. References are plain loops on doubles, written here independently of
// the kernels. The float64 gradient check (grad_test.cpp) runs on every differentiable row; keep
// shapes small, since it re-runs the op twice per input element.
#include <cmath>
#include <limits>
#include <tuple>

#include "op_table.h"

namespace spore::test {
namespace {
using ops::Attrs;
using ops::OpId;

using Vec = std::vector<double>;

// ---- references ---------------------------------------------------------------------------------

// numpy matmul: 1-d operands are promoted (row / column) and stripped afterwards.
Tensor ref_matmul(const Tensor& a, const Tensor& b) {
  Shape as = a.shape(), bs = b.shape();
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  const Shape ab(as.begin(), as.end() - 2), bb(bs.begin(), bs.end() - 2);
  const Shape ob = ops::broadcast_shapes(ab, bb);
  const int64_t B = shape_numel(ob);
  Vec va = values(a), vb = values(b), r(size_t(B * M * N), 0.0);
  for (int64_t bi = 0; bi < B; ++bi) {
    const int64_t ia = broadcast_index(bi, ob, ab), ib = broadcast_index(bi, ob, bb);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k)
          s += va[size_t(ia * M * K + i * K + k)] * vb[size_t(ib * K * N + k * N + j)];
        r[size_t(bi * M * N + i * N + j)] = s;
      }
  }
  Shape out = ob;
  if (a.dim() > 1) out.push_back(M);
  if (b.dim() > 1) out.push_back(N);
  return from_values(r, out, kFloat64);
}

struct CG {  // conv geometry
  int64_t sh = 1, sw = 1, pt = 0, pb = 0, pl = 0, pr = 0, dh = 1, dw = 1, groups = 1;
  Conv2dOptions opt() const {
    return {
        .stride = {sh, sw}, .padding = {pt, pb, pl, pr}, .dilation = {dh, dw}, .groups = groups};
  }
  Attrs attrs() const {
    return Attrs()
        .set("stride", std::vector<int64_t>{sh, sw})
        .set("padding", std::vector<int64_t>{pt, pb, pl, pr})
        .set("dilation", std::vector<int64_t>{dh, dw})
        .set("groups", groups);
  }
  Shape out(const Shape& x, const Shape& w) const {
    return {x[0], w[0], (x[2] + pt + pb - dh * (w[2] - 1) - 1) / sh + 1,
            (x[3] + pl + pr - dw * (w[3] - 1) - 1) / sw + 1};
  }
};

// Visits every (n, o, oh, ow, c, i, j, ih, iw) term of a convolution that lands inside the input.
template <typename F>
void conv_terms(const Shape& x, const Shape& w, const CG& g, F&& f) {
  const Shape y = g.out(x, w);
  const int64_t Cg = x[1] / g.groups, Og = w[0] / g.groups;
  for (int64_t n = 0; n < x[0]; ++n)
    for (int64_t o = 0; o < w[0]; ++o)
      for (int64_t oh = 0; oh < y[2]; ++oh)
        for (int64_t ow = 0; ow < y[3]; ++ow)
          for (int64_t c = 0; c < Cg; ++c)
            for (int64_t i = 0; i < w[2]; ++i)
              for (int64_t j = 0; j < w[3]; ++j) {
                const int64_t ih = oh * g.sh - g.pt + i * g.dh, iw = ow * g.sw - g.pl + j * g.dw;
                if (ih < 0 || ih >= x[2] || iw < 0 || iw >= x[3]) continue;
                const int64_t xi = ((n * x[1] + (o / Og) * Cg + c) * x[2] + ih) * x[3] + iw;
                const int64_t wi = ((o * Cg + c) * w[2] + i) * w[3] + j;
                const int64_t yi = ((n * y[1] + o) * y[2] + oh) * y[3] + ow;
                f(xi, wi, yi);
              }
}

Tensor ref_conv(const Tensor& x, const Tensor& w, const Tensor& b, const CG& g) {
  const Shape ys = g.out(x.shape(), w.shape());
  Vec vx = values(x), vw = values(w), r(size_t(shape_numel(ys)), 0.0);
  conv_terms(x.shape(), w.shape(), g, [&](int64_t xi, int64_t wi, int64_t yi) {
    r[size_t(yi)] += vx[size_t(xi)] * vw[size_t(wi)];
  });
  if (b.defined()) {
    Vec vb = values(b);
    for (size_t i = 0; i < r.size(); ++i)
      r[i] += vb[size_t((int64_t(i) / (ys[2] * ys[3])) % ys[1])];
  }
  return from_values(r, ys, kFloat64);
}
Tensor ref_conv_bwd_data(const Tensor& dy, const Tensor& w, const Shape& xs, const CG& g) {
  Vec vd = values(dy), vw = values(w), r(size_t(shape_numel(xs)), 0.0);
  conv_terms(xs, w.shape(), g, [&](int64_t xi, int64_t wi, int64_t yi) {
    r[size_t(xi)] += vd[size_t(yi)] * vw[size_t(wi)];
  });
  return from_values(r, xs, kFloat64);
}
Tensor ref_conv_bwd_weight(const Tensor& dy, const Tensor& x, const Shape& ws, const CG& g) {
  Vec vd = values(dy), vx = values(x), r(size_t(shape_numel(ws)), 0.0);
  conv_terms(x.shape(), ws, g, [&](int64_t xi, int64_t wi, int64_t yi) {
    r[size_t(wi)] += vd[size_t(yi)] * vx[size_t(xi)];
  });
  return from_values(r, ws, kFloat64);
}

struct PG {  // pool geometry
  int64_t kh = 2, kw = 2, sh = 2, sw = 2, pt = 0, pb = 0, pl = 0, pr = 0;
  bool ceil = false, include_pad = true;
  Pool2dOptions opt() const {
    return {.kernel_size = {kh, kw},
            .stride = {sh, sw},
            .padding = {pt, pb, pl, pr},
            .ceil_mode = ceil,
            .count_include_pad = include_pad};
  }
  Attrs attrs(const Shape& in) const {
    return Attrs()
        .set("kernel_size", std::vector<int64_t>{kh, kw})
        .set("stride", std::vector<int64_t>{sh, sw})
        .set("padding", std::vector<int64_t>{pt, pb, pl, pr})
        .set("ceil_mode", ceil)
        .set("count_include_pad", include_pad)
        .set("input_shape", in);
  }
  static int64_t out1(int64_t n, int64_t k, int64_t s, int64_t p0, int64_t p1, bool c) {
    const double v = double(n + p0 + p1 - k) / double(s);
    int64_t o = int64_t(c ? std::ceil(v) : std::floor(v)) + 1;
    if (c && (o - 1) * s >= n + p0) --o;
    return o;
  }
  Shape out(const Shape& x) const {
    return {x[0], x[1], out1(x[2], kh, sh, pt, pb, ceil), out1(x[3], kw, sw, pl, pr, ceil)};
  }
};

// (y, flat argmax index in the plane)
std::pair<Tensor, Tensor> ref_max_pool(const Tensor& x, const PG& g) {
  const Shape& s = x.shape();
  const Shape ys = g.out(s);
  Vec v = values(x), y, idx;
  for (int64_t q = 0; q < s[0] * s[1]; ++q)
    for (int64_t oh = 0; oh < ys[2]; ++oh)
      for (int64_t ow = 0; ow < ys[3]; ++ow) {
        double best = -std::numeric_limits<double>::infinity();
        int64_t bi = -1;
        for (int64_t i = 0; i < g.kh; ++i)
          for (int64_t j = 0; j < g.kw; ++j) {
            const int64_t h = oh * g.sh - g.pt + i, w = ow * g.sw - g.pl + j;
            if (h < 0 || h >= s[2] || w < 0 || w >= s[3]) continue;
            const double e = v[size_t(q * s[2] * s[3] + h * s[3] + w)];
            if (e > best) {
              best = e;
              bi = h * s[3] + w;
            }
          }
        y.push_back(best);
        idx.push_back(double(bi));
      }
  return {from_values(y, ys, kFloat64), from_values(idx, ys, kInt64)};
}

// Visits (input index, output index, divisor) of every average-pool term.
template <typename F>
void avg_terms(const Shape& s, const PG& g, F&& f) {
  const Shape ys = g.out(s);
  for (int64_t q = 0; q < s[0] * s[1]; ++q)
    for (int64_t oh = 0; oh < ys[2]; ++oh)
      for (int64_t ow = 0; ow < ys[3]; ++ow) {
        int64_t cnt = 0, padded = 0;
        for (int pass = 0; pass < 2; ++pass)
          for (int64_t i = 0; i < g.kh; ++i)
            for (int64_t j = 0; j < g.kw; ++j) {
              const int64_t h = oh * g.sh - g.pt + i, w = ow * g.sw - g.pl + j;
              const bool in = h >= 0 && h < s[2] && w >= 0 && w < s[3];
              const bool in_padded =
                  h < s[2] + g.pb && w < s[3] + g.pr;  // PyTorch clips at the far pad
              if (pass == 0) {
                cnt += in;
                padded += in_padded;
                continue;
              }
              if (in)
                f(q * s[2] * s[3] + h * s[3] + w, (q * ys[2] + oh) * ys[3] + ow,
                  double(g.include_pad ? padded : cnt));
            }
      }
}
Tensor ref_avg_pool(const Tensor& x, const PG& g) {
  const Shape ys = g.out(x.shape());
  Vec v = values(x), r(size_t(shape_numel(ys)), 0.0);
  avg_terms(x.shape(), g,
            [&](int64_t xi, int64_t yi, double d) { r[size_t(yi)] += v[size_t(xi)] / d; });
  return from_values(r, ys, kFloat64);
}
Tensor ref_avg_pool_bwd(const Tensor& dy, const Shape& xs, const PG& g) {
  Vec v = values(dy), r(size_t(shape_numel(xs)), 0.0);
  avg_terms(xs, g, [&](int64_t xi, int64_t yi, double d) { r[size_t(xi)] += v[size_t(yi)] / d; });
  return from_values(r, xs, kFloat64);
}

template <typename F>
void adaptive_terms(const Shape& s, int64_t OH, int64_t OW, F&& f) {
  for (int64_t q = 0; q < s[0] * s[1]; ++q)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow) {
        const int64_t h0 = int64_t(std::floor(double(oh * s[2]) / double(OH))),
                      h1 = int64_t(std::ceil(double((oh + 1) * s[2]) / double(OH)));
        const int64_t w0 = int64_t(std::floor(double(ow * s[3]) / double(OW))),
                      w1 = int64_t(std::ceil(double((ow + 1) * s[3]) / double(OW)));
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w)
            f(q * s[2] * s[3] + h * s[3] + w, (q * OH + oh) * OW + ow,
              double((h1 - h0) * (w1 - w0)));
      }
}

// Per-channel batch statistics of x (N, C, ...): mean and biased variance.
void channel_stats(const Tensor& x, Vec& mean, Vec& var) {
  const int64_t C = x.size(1), S = x.numel() / (x.size(0) * C);
  Vec v = values(x);
  mean.assign(size_t(C), 0);
  var.assign(size_t(C), 0);
  const double n = double(x.numel() / C);
  for (size_t i = 0; i < v.size(); ++i) mean[size_t((int64_t(i) / S) % C)] += v[i] / n;
  for (size_t i = 0; i < v.size(); ++i) {
    const double d = v[i] - mean[size_t((int64_t(i) / S) % C)];
    var[size_t((int64_t(i) / S) % C)] += d * d / n;
  }
}

// Per-row statistics over the last D elements.
void row_stats(const Vec& v, int64_t D, Vec& mean, Vec& rstd, double eps) {
  const int64_t rows = int64_t(v.size()) / D;
  mean.assign(size_t(rows), 0);
  rstd.assign(size_t(rows), 0);
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0, ss = 0;
    for (int64_t j = 0; j < D; ++j) s += v[size_t(r * D + j)];
    const double m = s / double(D);
    for (int64_t j = 0; j < D; ++j) ss += (v[size_t(r * D + j)] - m) * (v[size_t(r * D + j)] - m);
    mean[size_t(r)] = m;
    rstd[size_t(r)] = 1 / std::sqrt(ss / double(D) + eps);
  }
}

// ---- row builders ------------------------------------------------------------------------------

OpCase matmul_case(std::string name, Shape a, Shape b, bool nc_a = false, bool nc_b = false,
                   std::vector<DType> dts = {kFloat32, kFloat64, kBFloat16}) {
  return {.name = "matmul/" + name,
          .op = OpId::Matmul,
          .inputs = {{.shape = a, .non_contiguous = nc_a}, {.shape = b, .non_contiguous = nc_b}},
          .run = [](const Tensors& x) -> Tensors { return {matmul(x[0], x[1])}; },
          .reference = [](const Tensors& x) -> Tensors { return {ref_matmul(x[0], x[1])}; },
          .dtypes = dts};
}

OpCase conv_case(std::string name, Shape x, Shape w, CG g, bool bias = false, bool nc = false,
                 std::vector<DType> dts = {kFloat32, kFloat64, kBFloat16}) {
  OpCase c{.name = "conv2d/" + name,
           .op = OpId::Conv2d,
           .inputs = {{.shape = x, .non_contiguous = nc}, {.shape = w, .lo = -0.5, .hi = 0.5}},
           .run = [g, bias](const Tensors& t) -> Tensors {
             return {bias ? conv2d(t[0], t[1], t[2], g.opt()) : conv2d(t[0], t[1], g.opt())};
           },
           .reference = [g, bias](const Tensors& t) -> Tensors {
             return {ref_conv(t[0], t[1], bias ? t[2] : Tensor(), g)};
           },
           .dtypes = dts};
  if (bias) c.inputs.push_back({.shape = {w[0]}});
  return c;
}

OpCase max_pool_case(std::string name, Shape x, PG g, bool nc = false) {
  return {.name = "max_pool2d/" + name,
          .op = OpId::MaxPool2d,
          .inputs = {{.shape = x, .non_contiguous = nc}},
          .run = [g](const Tensors& t) -> Tensors {
            auto [y, i] = max_pool2d_with_indices(t[0], g.opt());
            return {y, i};
          },
          .reference = [g](const Tensors& t) -> Tensors {
            auto [y, i] = ref_max_pool(t[0], g);
            return {y, i};
          },
          .dtypes = {kFloat32, kFloat64, kBFloat16}};
}

OpCase avg_pool_case(std::string name, Shape x, PG g, bool nc = false) {
  return {.name = "avg_pool2d/" + name,
          .op = OpId::AvgPool2d,
          .inputs = {{.shape = x, .non_contiguous = nc}},
          .run = [g](const Tensors& t) -> Tensors { return {avg_pool2d(t[0], g.opt())}; },
          .reference = [g](const Tensors& t) -> Tensors { return {ref_avg_pool(t[0], g)}; },
          .dtypes = {kFloat32, kFloat64, kBFloat16}};
}

OpCase adaptive_case(std::string name, Shape x, int64_t oh, int64_t ow) {
  return {.name = "adaptive_avg_pool2d/" + name,
          .op = OpId::AdaptiveAvgPool2d,
          .inputs = {{.shape = x}},
          .run = [oh, ow](const Tensors& t) -> Tensors {
            return {adaptive_avg_pool2d(t[0], {oh, ow})};
          },
          .reference = [oh, ow](const Tensors& t) -> Tensors {
            const Shape& s = t[0].shape();
            Vec v = values(t[0]), r(size_t(s[0] * s[1] * oh * ow), 0.0);
            adaptive_terms(s, oh, ow, [&](int64_t xi, int64_t yi, double d) {
              r[size_t(yi)] += v[size_t(xi)] / d;
            });
            return {from_values(r, {s[0], s[1], oh, ow}, kFloat64)};
          }};
}

OpCase batch_norm_case(std::string name, Shape x) {
  const int64_t C = x[1];
  return {.name = "batch_norm/" + name,
          .op = OpId::BatchNorm,
          .inputs = {{.shape = x, .lo = -2, .hi = 3},
                     {.shape = {C}, .lo = 0.5, .hi = 1.5},
                     {.shape = {C}}},
          .run = [](const Tensors& t) -> Tensors {
            auto [y, m, v] = batch_norm_train(t[0], t[1], t[2], 1e-5);
            return {y, m, v};
          },
          .reference = [](const Tensors& t) -> Tensors {
            Vec mean, var, v = values(t[0]), g = values(t[1]), b = values(t[2]);
            channel_stats(t[0], mean, var);
            const int64_t C = t[0].size(1), S = t[0].numel() / (t[0].size(0) * C);
            const double n = double(t[0].numel() / C);
            for (size_t i = 0; i < v.size(); ++i) {
              const size_t c = size_t((int64_t(i) / S) % C);
              v[i] = (v[i] - mean[c]) / std::sqrt(var[c] + 1e-5) * g[c] + b[c];
            }
            for (double& e : var) e *= n / (n - 1);
            return {from_values(v, t[0].shape(), kFloat64), from_values(mean, {C}, kFloat64),
                    from_values(var, {C}, kFloat64)};
          }};
}

OpCase layer_norm_case(std::string name, Shape x, int64_t k) {
  const Shape ns(x.end() - k, x.end());
  return {.name = "layer_norm/" + name,
          .op = OpId::LayerNorm,
          .inputs = {{.shape = x, .lo = -2, .hi = 3},
                     {.shape = ns, .lo = 0.5, .hi = 1.5},
                     {.shape = ns}},
          .run = [k](const Tensors& t) -> Tensors {
            auto r = ops::call(OpId::LayerNorm, {t[0], t[1], t[2]},
                               Attrs().set("normalized_ndim", k).set("eps", 1e-5));
            return r;  // y, mean, rstd (the statistics' own gradients are checked too)
          },
          .reference = [k](const Tensors& t) -> Tensors {
            const int64_t D = t[1].numel();
            Vec v = values(t[0]), g = values(t[1]), b = values(t[2]), mean, rstd;
            row_stats(v, D, mean, rstd, 1e-5);
            for (size_t i = 0; i < v.size(); ++i) {
              const size_t r = i / size_t(D), j = i % size_t(D);
              v[i] = (v[i] - mean[r]) * rstd[r] * g[j] + b[j];
            }
            const Shape outer(t[0].shape().begin(), t[0].shape().end() - k);
            return {from_values(v, t[0].shape(), kFloat64), from_values(mean, outer, kFloat64),
                    from_values(rstd, outer, kFloat64)};
          }};
}

// Mixed precision (amp O2 keeps norm cells in float32): the same row with a float16/bfloat16 data
// input and float32 parameters/statistics (`f32` lists those inputs). The kernels compute in
// float32; output 0 keeps the data's dtype and the other outputs are float32 (checked here).
OpCase mixed_norm(OpCase c, std::vector<size_t> f32, size_t data_input = 0) {
  c.name += "_mixed_f32_params";
  for (size_t i : f32) c.inputs[i].fixed_dtype = kFloat32;
  c.dtypes = {kBFloat16, kFloat16};
  c.grad_check = false;  // the float64 gradient checks run on the plain rows
  c.run = [run = c.run, data_input](const Tensors& t) -> Tensors {
    Tensors r = run(t);
    for (size_t k = 0; k < r.size(); ++k) {
      const DType want = k == 0 ? t[data_input].dtype() : kFloat32;
      SPORE_CHECK(r[k].dtype() == want, "output ", k, " is ", dtype_name(r[k].dtype()),
                  ", expected ", dtype_name(want));
    }
    return r;
  };
  return c;
}

// Optimizer rows: run() updates clones of the inputs and returns them.
OpCase optim_case(std::string name, OpId op, int nstate, Attrs attrs,
                  std::function<void(Vec&, std::vector<Vec>&, const Vec&)> ref) {
  OpCase c{.name = name,
           .op = op,
           .inputs = {{.shape = {3, 7}}},
           .run = [op, attrs](const Tensors& t) -> Tensors {
             Tensors cl;  // param and states cloned (updated in place); the strided grad as is
             for (size_t i = 0; i + 1 < t.size(); ++i) cl.push_back(t[i].clone());
             cl.push_back(t.back());
             ops::call(op, cl, attrs);
             cl.pop_back();
             return cl;
           },
           .reference = [nstate, ref](const Tensors& t) -> Tensors {
             Vec p = values(t[0]);
             std::vector<Vec> st;
             for (int i = 0; i < nstate; ++i) st.push_back(values(t[size_t(1 + i)]));
             ref(p, st, values(t.back()));
             Tensors r{from_values(p, t[0].shape(), kFloat64)};
             for (const Vec& s : st) r.push_back(from_values(s, t[0].shape(), kFloat64));
             return r;
           },
           .grad_check = false};
  for (int i = 0; i < nstate; ++i) c.inputs.push_back({.shape = {3, 7}, .lo = 0, .hi = 1});
  c.inputs.push_back({.shape = {3, 7}, .non_contiguous = true});  // a strided grad
  return c;
}

SPORE_OP_CASES({
    // ---- matmul ----
    matmul_case("2d", {5, 7}, {7, 4}, false, false, {kFloat32, kFloat64, kBFloat16, kFloat16}),
    matmul_case("transposed_operands", {5, 7}, {7, 4}, true, true),
    matmul_case("batched", {3, 4, 5}, {3, 5, 2}),
    matmul_case("broadcast_weights", {2, 3, 4, 5}, {5, 6}),
    matmul_case("broadcast_batch", {2, 1, 4, 5}, {3, 5, 2}),
    matmul_case("broadcast_lhs", {4, 5}, {3, 5, 2}),
    matmul_case("vec_mat", {5}, {5, 3}),
    matmul_case("mat_vec", {4, 5}, {5}),
    matmul_case("dot", {6}, {6}),
    matmul_case("batched_transposed", {2, 4, 5}, {2, 5, 3}, true, false),

    // ---- conv2d ----
    conv_case("basic", {2, 3, 6, 6}, {4, 3, 3, 3}, {}),
    conv_case("stride2_pad1", {2, 3, 7, 7}, {4, 3, 3, 3},
              {.sh = 2, .sw = 2, .pt = 1, .pb = 1, .pl = 1, .pr = 1}),
    conv_case("asym_pad_dilation", {1, 2, 7, 6}, {3, 2, 3, 2},
              {.pt = 1, .pb = 0, .pl = 2, .pr = 1, .dh = 2, .dw = 1}),
    conv_case("groups", {2, 4, 5, 5}, {6, 2, 3, 3}, {.groups = 2}),
    conv_case("depthwise", {1, 4, 5, 5}, {4, 1, 3, 3},
              {.pt = 1, .pb = 1, .pl = 1, .pr = 1, .groups = 4}),
    conv_case("bias", {2, 3, 5, 5}, {4, 3, 3, 3}, {.pt = 1, .pb = 1, .pl = 1, .pr = 1}, true),
    conv_case("non_contiguous", {1, 2, 5, 6}, {3, 2, 2, 2}, {.sh = 1, .sw = 2}, false, true),
    conv_case("1x1_float16", {2, 3, 4, 4}, {5, 3, 1, 1}, {}, true, false, {kFloat32, kFloat16}),
    conv_case("lenet_conv1", {2, 1, 8, 8}, {6, 1, 5, 5}, {.pt = 2, .pb = 2, .pl = 2, .pr = 2},
              true),
    {.name = "conv2d_backward_data/stride2",
     .op = OpId::Conv2dBackwardData,
     .inputs = {{.shape = {2, 4, 4, 4}}, {.shape = {4, 3, 3, 3}}},
     .run = [](const Tensors& t) -> Tensors {
       const CG g{.sh = 2, .sw = 2, .pt = 1, .pb = 1, .pl = 1, .pr = 1};
       return {ops::call1(OpId::Conv2dBackwardData, {t[0], t[1]},
                          g.attrs().set("input_shape", Shape{2, 3, 7, 7}))};
     },
     .reference = [](const Tensors& t) -> Tensors {
       return {ref_conv_bwd_data(t[0], t[1], {2, 3, 7, 7},
                                 {.sh = 2, .sw = 2, .pt = 1, .pb = 1, .pl = 1, .pr = 1})};
     },
     .dtypes = {kFloat32, kFloat64, kBFloat16}},
    // The transposed convolution (conv_transpose2d) is this primitive: an output size the stride
    // leaves ambiguous (PyTorch's output_padding), groups and dilation.
    {.name = "conv2d_backward_data/transpose_output_padding_groups",
     .op = OpId::Conv2dBackwardData,
     .inputs = {{.shape = {2, 4, 3, 4}}, {.shape = {4, 3, 3, 2}}},
     .run = [](const Tensors& t) -> Tensors {
       const CG g{
           .sh = 2, .sw = 3, .pt = 1, .pb = 0, .pl = 0, .pr = 1, .dh = 1, .dw = 2, .groups = 2};
       return {conv_transpose2d(t[0], t[1], g.opt(), {7, 12})};  // minimum (6, 11)
     },
     .reference = [](const Tensors& t) -> Tensors {
       return {ref_conv_bwd_data(
           t[0], t[1], {2, 6, 7, 12},
           {.sh = 2, .sw = 3, .pt = 1, .pb = 0, .pl = 0, .pr = 1, .dh = 1, .dw = 2, .groups = 2})};
     },
     .dtypes = {kFloat32, kFloat64, kBFloat16}},
    {.name = "conv2d_backward_weight/groups_dilation",
     .op = OpId::Conv2dBackwardWeight,
     .inputs = {{.shape = {2, 4, 4, 5}}, {.shape = {2, 4, 7, 6}}},
     .run = [](const Tensors& t) -> Tensors {
       const CG g{.pt = 1, .pb = 0, .pl = 0, .pr = 1, .dh = 2, .dw = 1, .groups = 2};
       return {ops::call1(OpId::Conv2dBackwardWeight, {t[0], t[1]},
                          g.attrs().set("weight_shape", Shape{4, 2, 3, 3}))};
     },
     .reference = [](const Tensors& t) -> Tensors {
       return {ref_conv_bwd_weight(
           t[0], t[1], {4, 2, 3, 3},
           {.pt = 1, .pb = 0, .pl = 0, .pr = 1, .dh = 2, .dw = 1, .groups = 2})};
     },
     .dtypes = {kFloat32, kFloat64, kBFloat16}},

    // ---- pools ----
    max_pool_case("2x2", {2, 3, 6, 6}, {}),
    max_pool_case("2x2_odd", {2, 3, 7, 9}, {}),  // the 2x2 fast path drops the last row / column
    max_pool_case("3x3_stride2_pad1", {1, 2, 7, 7},
                  {.kh = 3, .kw = 3, .pt = 1, .pb = 1, .pl = 1, .pr = 1}),
    max_pool_case("ceil_mode", {1, 2, 7, 7}, {.ceil = true}),
    max_pool_case("asymmetric", {1, 2, 5, 8},
                  {.kh = 2, .kw = 3, .sh = 1, .sw = 2, .pt = 1, .pb = 0, .pl = 1, .pr = 1}),
    max_pool_case("non_contiguous", {2, 2, 6, 4}, {}, true),
    {.name = "max_pool2d_backward/3x3_stride2",
     .op = OpId::MaxPool2dBackward,
     .inputs = {{.shape = {1, 2, 7, 7}, .differentiable = false}, {.shape = {1, 2, 3, 3}}},
     .run = [](const Tensors& t) -> Tensors {
       const PG g{.kh = 3, .kw = 3};  // overlapping windows: one input can win twice
       auto idx = max_pool2d_with_indices(t[0], g.opt()).second;
       return {ops::call1(OpId::MaxPool2dBackward, {t[1], idx}, g.attrs(t[0].shape()))};
     },
     .reference = [](const Tensors& t) -> Tensors {
       const PG g{.kh = 3, .kw = 3};
       Vec idx = values(ref_max_pool(t[0], g).second), dy = values(t[1]),
           r(size_t(t[0].numel()), 0.0);
       for (size_t i = 0; i < dy.size(); ++i) r[(i / 9) * 49 + size_t(idx[i])] += dy[i];
       return {from_values(r, t[0].shape(), kFloat64)};
     }},
    avg_pool_case("2x2", {2, 3, 6, 6}, {}),
    avg_pool_case("3x3_pad1_include_pad", {1, 2, 7, 7},
                  {.kh = 3, .kw = 3, .pt = 1, .pb = 1, .pl = 1, .pr = 1}),
    avg_pool_case("3x3_pad1_exclude_pad", {1, 2, 7, 7},
                  {.kh = 3, .kw = 3, .pt = 1, .pb = 1, .pl = 1, .pr = 1, .include_pad = false}),
    avg_pool_case("ceil_mode_pad", {1, 2, 6, 6},
                  {.kh = 3, .kw = 3, .pt = 1, .pb = 1, .pl = 1, .pr = 1, .ceil = true}),
    avg_pool_case("non_contiguous", {2, 2, 4, 6}, {.sh = 1, .sw = 1}, true),
    {.name = "avg_pool2d_backward/ceil_pad",
     .op = OpId::AvgPool2dBackward,
     .inputs = {{.shape = {1, 2, 4, 4}}},
     .run = [](const Tensors& t) -> Tensors {
       const PG g{.kh = 3, .kw = 3, .pt = 1, .pb = 1, .pl = 1, .pr = 1, .ceil = true};
       return {ops::call1(OpId::AvgPool2dBackward, {t[0]}, g.attrs({1, 2, 6, 6}))};
     },
     .reference = [](const Tensors& t) -> Tensors {
       return {
           ref_avg_pool_bwd(t[0], {1, 2, 6, 6},
                            {.kh = 3, .kw = 3, .pt = 1, .pb = 1, .pl = 1, .pr = 1, .ceil = true})};
     }},
    adaptive_case("7x5_to_3x2", {1, 2, 7, 5}, 3, 2),
    adaptive_case("global", {2, 3, 4, 4}, 1, 1),
    adaptive_case("upsample", {1, 1, 3, 2}, 4, 5),
    {.name = "adaptive_avg_pool2d_backward/7x5_to_3x2",
     .op = OpId::AdaptiveAvgPool2dBackward,
     .inputs = {{.shape = {1, 2, 3, 2}}},
     .run = [](const Tensors& t) -> Tensors {
       return {ops::call1(OpId::AdaptiveAvgPool2dBackward, {t[0]},
                          Attrs()
                              .set("output_size", std::vector<int64_t>{3, 2})
                              .set("input_shape", Shape{1, 2, 7, 5}))};
     },
     .reference = [](const Tensors& t) -> Tensors {
       Vec v = values(t[0]), r(70, 0.0);
       adaptive_terms({1, 2, 7, 5}, 3, 2, [&](int64_t xi, int64_t yi, double d) {
         r[size_t(xi)] += v[size_t(yi)] / d;
       });
       return {from_values(r, {1, 2, 7, 5}, kFloat64)};
     }},

    // ---- normalisation ----
    batch_norm_case("nchw", {3, 2, 3, 2}),
    batch_norm_case("nc", {5, 3}),
    {.name = "batch_norm_backward/nchw",
     .op = OpId::BatchNormBackward,
     .inputs = {{.shape = {3, 2, 2, 3}},
                {.shape = {3, 2, 2, 3}, .lo = -2, .hi = 3},
                {.shape = {2}, .lo = 0.5, .hi = 1.5}},
     .run = [](const Tensors& t) -> Tensors {
       auto f =
           ops::call(OpId::BatchNorm, {t[1], t[2], zeros_like(t[2])}, Attrs().set("eps", 1e-5));
       return ops::call(OpId::BatchNormBackward, {t[0], t[1], t[2], f[1], f[2]},
                        Attrs().set("eps", 1e-5));
     },
     .reference = [](const Tensors& t) -> Tensors {
       Vec mean, var, dy = values(t[0]), x = values(t[1]), g = values(t[2]);
       channel_stats(t[1], mean, var);
       const size_t C = 2, S = 6;
       const double n = 18;
       Vec sdy(C, 0), sdyx(C, 0), dx(x.size());
       for (size_t i = 0; i < x.size(); ++i) {
         const size_t c = (i / S) % C;
         sdy[c] += dy[i];
         sdyx[c] += dy[i] * (x[i] - mean[c]) / std::sqrt(var[c] + 1e-5);
       }
       for (size_t i = 0; i < x.size(); ++i) {
         const size_t c = (i / S) % C;
         const double is = 1 / std::sqrt(var[c] + 1e-5), xh = (x[i] - mean[c]) * is;
         dx[i] = g[c] * is * (dy[i] - sdy[c] / n - xh * sdyx[c] / n);
       }
       return {from_values(dx, t[1].shape(), kFloat64), from_values(sdyx, {2}, kFloat64),
               from_values(sdy, {2}, kFloat64)};
     }},
    {.name = "batch_norm_inference/nchw",
     .op = OpId::BatchNormInference,
     .inputs = {{.shape = {2, 3, 2, 2}},
                {.shape = {3}},
                {.shape = {3}},
                {.shape = {3}},
                {.shape = {3}, .lo = 0.5, .hi = 2}},
     .run = [](const Tensors& t) -> Tensors {
       return {batch_norm_infer(t[0], t[1], t[2], t[3], t[4], 1e-3)};
     },
     .reference = [](const Tensors& t) -> Tensors {
       Vec x = values(t[0]), g = values(t[1]), b = values(t[2]), m = values(t[3]), v = values(t[4]);
       for (size_t i = 0; i < x.size(); ++i) {
         const size_t c = (i / 4) % 3;
         x[i] = (x[i] - m[c]) / std::sqrt(v[c] + 1e-3) * g[c] + b[c];
       }
       return {from_values(x, t[0].shape(), kFloat64)};
     }},
    layer_norm_case("last_dim", {3, 4, 5}, 1),
    layer_norm_case("last_two_dims", {2, 3, 4}, 2),
    {.name = "layer_norm_backward/last_dim",
     .op = OpId::LayerNormBackward,
     .inputs = {{.shape = {4, 6}},
                {.shape = {4, 6}, .lo = -2, .hi = 3},
                {.shape = {6}, .lo = 0.5, .hi = 1.5}},
     .run = [](const Tensors& t) -> Tensors {
       const Attrs a = Attrs().set("normalized_ndim", int64_t(1)).set("eps", 1e-5);
       auto f = ops::call(OpId::LayerNorm, {t[1], t[2], zeros_like(t[2])}, a);
       return ops::call(OpId::LayerNormBackward, {t[0], t[1], t[2], f[1], f[2]}, a);
     },
     .reference = [](const Tensors& t) -> Tensors {
       Vec dy = values(t[0]), x = values(t[1]), g = values(t[2]), mean, rstd, dx(x.size()),
           dg(6, 0), db(6, 0);
       row_stats(x, 6, mean, rstd, 1e-5);
       for (size_t r = 0; r < 4; ++r) {
         double a = 0, c = 0;
         for (size_t j = 0; j < 6; ++j) {
           const double xh = (x[r * 6 + j] - mean[r]) * rstd[r];
           a += dy[r * 6 + j] * g[j];
           c += dy[r * 6 + j] * g[j] * xh;
           dg[j] += dy[r * 6 + j] * xh;
           db[j] += dy[r * 6 + j];
         }
         for (size_t j = 0; j < 6; ++j) {
           const double xh = (x[r * 6 + j] - mean[r]) * rstd[r];
           dx[r * 6 + j] = rstd[r] * (dy[r * 6 + j] * g[j] - a / 6 - xh * c / 6);
         }
       }
       return {from_values(dx, {4, 6}, kFloat64), from_values(dg, {6}, kFloat64),
               from_values(db, {6}, kFloat64)};
     }},

    mixed_norm(batch_norm_case("nchw", {3, 2, 3, 2}), {1, 2}),
    mixed_norm(layer_norm_case("last_dim", {3, 4, 5}, 1), {1, 2}),

    // ---- optimizer updates ----
    optim_case("apply_momentum/plain", OpId::ApplyMomentum, 1,
               Attrs().set("lr", 0.1).set("momentum", 0.9),
               [](Vec& p, std::vector<Vec>& s, const Vec& g) {
                 for (size_t i = 0; i < p.size(); ++i) {
                   s[0][i] = 0.9 * s[0][i] + g[i];
                   p[i] -= 0.1 * s[0][i];
                 }
               }),
    optim_case("apply_momentum/nesterov_weight_decay", OpId::ApplyMomentum, 1,
               Attrs()
                   .set("lr", 0.05)
                   .set("momentum", 0.8)
                   .set("nesterov", true)
                   .set("weight_decay", 0.01),
               [](Vec& p, std::vector<Vec>& s, const Vec& g0) {
                 for (size_t i = 0; i < p.size(); ++i) {
                   const double g = g0[i] + 0.01 * p[i];
                   s[0][i] = 0.8 * s[0][i] + g;
                   p[i] -= 0.05 * (g + 0.8 * s[0][i]);
                 }
               }),
    optim_case("apply_adam/l2", OpId::ApplyAdam, 2,
               Attrs()
                   .set("lr", 0.01)
                   .set("beta1", 0.9)
                   .set("beta2", 0.999)
                   .set("eps", 1e-8)
                   .set("weight_decay", 0.1)
                   .set("step", int64_t(1)),
               [](Vec& p, std::vector<Vec>& s, const Vec& g0) {
                 for (size_t i = 0; i < p.size(); ++i) {
                   const double g = g0[i] + 0.1 * p[i];
                   s[0][i] = 0.9 * s[0][i] + 0.1 * g;
                   s[1][i] = 0.999 * s[1][i] + 0.001 * g * g;
                   const double mh = s[0][i] / (1 - 0.9), vh = s[1][i] / (1 - 0.999);
                   p[i] -= 0.01 * mh / (std::sqrt(vh) + 1e-8);
                 }
               }),
    optim_case("apply_adam/decoupled_step3", OpId::ApplyAdam, 2,
               Attrs()
                   .set("lr", 0.01)
                   .set("beta1", 0.8)
                   .set("beta2", 0.99)
                   .set("eps", 1e-6)
                   .set("weight_decay", 0.5)
                   .set("step", int64_t(3))
                   .set("decoupled", true),
               [](Vec& p, std::vector<Vec>& s, const Vec& g) {
                 for (size_t i = 0; i < p.size(); ++i) {
                   p[i] -= 0.01 * 0.5 * p[i];
                   s[0][i] = 0.8 * s[0][i] + 0.2 * g[i];
                   s[1][i] = 0.99 * s[1][i] + 0.01 * g[i] * g[i];
                   const double mh = s[0][i] / (1 - std::pow(0.8, 3)),
                                vh = s[1][i] / (1 - std::pow(0.99, 3));
                   p[i] -= 0.01 * mh / (std::sqrt(vh) + 1e-6);
                 }
               }),
    optim_case("apply_rms_prop/momentum", OpId::ApplyRMSProp, 2,
               Attrs().set("lr", 0.01).set("decay", 0.9).set("momentum", 0.5).set("eps", 1e-6),
               [](Vec& p, std::vector<Vec>& s, const Vec& g) {
                 for (size_t i = 0; i < p.size(); ++i) {
                   s[0][i] = 0.9 * s[0][i] + 0.1 * g[i] * g[i];
                   s[1][i] = 0.5 * s[1][i] + 0.01 * g[i] / std::sqrt(s[0][i] + 1e-6);
                   p[i] -= s[1][i];
                 }
               }),
});

// The mixed-precision copies of the backward and inference rows above (same file, so they are
// registered already): (row, float32 inputs, data input).
SPORE_OP_CASES([] {
  const std::vector<std::tuple<std::string, std::vector<size_t>, size_t>> rows = {
      {"batch_norm_backward/nchw", {2}, 1},
      {"batch_norm_inference/nchw", {1, 2, 3, 4}, 0},
      {"layer_norm_backward/last_dim", {2}, 1},
  };
  std::vector<OpCase> out;
  for (const auto& [name, f32, data] : rows)
    for (const OpCase& c : op_cases())
      if (c.name == name) out.push_back(mixed_norm(c, f32, data));
  return out;
}());

}  // namespace
}  // namespace spore::test
