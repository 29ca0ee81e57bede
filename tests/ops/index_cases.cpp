// Op-table rows for the softmax family, concat/split, the indexing primitives (gather,
// index_select, scatter_add, one_hot, topk, sort, cumsum), pad, dropout, nearest upsampling and
// assign. References are plain loops over row-major coordinates on doubles.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/random.h"
#include "op_table.h"

namespace spore::test {
namespace {
using ops::OpId;

std::vector<int64_t> unravel(int64_t flat, const Shape& s) {
  std::vector<int64_t> c(s.size());
  for (size_t d = s.size(); d-- > 0;) {
    c[d] = flat % s[d];
    flat /= s[d];
  }
  return c;
}
int64_t ravel(const std::vector<int64_t>& c, const Shape& s) {
  int64_t f = 0;
  for (size_t d = 0; d < s.size(); ++d) f = f * s[d] + c[d];
  return f;
}
int64_t norm_axis(int64_t a, size_t r) { return a < 0 ? a + int64_t(r) : a; }

// Flat row-major indices of each lane along `axis`, lanes in row-major order of the other dims.
std::vector<std::vector<int64_t>> lanes(const Shape& s, int64_t axis) {
  const int64_t ax = norm_axis(axis, s.size()), n = s[size_t(ax)];
  int64_t inner = 1, outer = 1;
  for (size_t d = size_t(ax) + 1; d < s.size(); ++d) inner *= s[d];
  for (size_t d = 0; d < size_t(ax); ++d) outer *= s[d];
  std::vector<std::vector<int64_t>> out;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      std::vector<int64_t> l;
      for (int64_t j = 0; j < n; ++j) l.push_back((o * n + j) * inner + i);
      out.push_back(l);
    }
  return out;
}

Tensor ref_softmax(const Tensor& x, int64_t axis, bool log) {
  std::vector<double> v = values(x), r(v.size());
  for (const auto& l : lanes(x.shape(), axis)) {
    double m = -INFINITY, s = 0;
    for (int64_t i : l) m = std::max(m, v[size_t(i)]);
    for (int64_t i : l) s += std::exp(v[size_t(i)] - m);
    for (int64_t i : l)
      r[size_t(i)] = log ? v[size_t(i)] - m - std::log(s) : std::exp(v[size_t(i)] - m) / s;
  }
  return from_values(r, x.shape(), x.dtype());
}

Tensor ref_concat(const Tensors& xs, int64_t axis) {
  Shape out = xs[0].shape();
  const int64_t ax = norm_axis(axis, out.size());
  out[size_t(ax)] = 0;
  for (const Tensor& x : xs) out[size_t(ax)] += x.size(ax);
  std::vector<double> r(size_t(shape_numel(out)));
  int64_t start = 0;
  for (const Tensor& x : xs) {
    std::vector<double> v = values(x);
    for (int64_t i = 0; i < x.numel(); ++i) {
      auto c = unravel(i, x.shape());
      c[size_t(ax)] += start;
      r[size_t(ravel(c, out))] = v[size_t(i)];
    }
    start += x.size(ax);
  }
  return from_values(r, out, xs[0].dtype());
}

Tensor ref_slice(const Tensor& x, int64_t axis, int64_t start, int64_t len) {
  Shape out = x.shape();
  const int64_t ax = norm_axis(axis, out.size());
  out[size_t(ax)] = len;
  std::vector<double> v = values(x), r(size_t(shape_numel(out)));
  for (int64_t i = 0; i < int64_t(r.size()); ++i) {
    auto c = unravel(i, out);
    c[size_t(ax)] += start;
    r[size_t(i)] = v[size_t(ravel(c, x.shape()))];
  }
  return from_values(r, out, x.dtype());
}

Tensor ref_gather(const Tensor& x, int64_t axis, const Tensor& index) {
  const int64_t ax = norm_axis(axis, x.shape().size());
  std::vector<double> v = values(x), iv = values(index), r;
  for (int64_t i = 0; i < index.numel(); ++i) {
    auto c = unravel(i, index.shape());
    c[size_t(ax)] = int64_t(iv[size_t(i)]);
    r.push_back(v[size_t(ravel(c, x.shape()))]);
  }
  return from_values(r, index.shape(), x.dtype());
}

Tensor ref_index_select(const Tensor& x, int64_t axis, const Tensor& index) {
  const int64_t ax = norm_axis(axis, x.shape().size());
  Shape out = x.shape();
  out[size_t(ax)] = index.numel();
  std::vector<double> v = values(x), iv = values(index), r;
  for (int64_t i = 0; i < shape_numel(out); ++i) {
    auto c = unravel(i, out);
    c[size_t(ax)] = int64_t(iv[size_t(c[size_t(ax)])]);
    r.push_back(v[size_t(ravel(c, x.shape()))]);
  }
  return from_values(r, out, x.dtype());
}

Tensor ref_scatter_add(const Tensor& x, int64_t axis, const Tensor& index, const Tensor& src) {
  const int64_t ax = norm_axis(axis, x.shape().size());
  std::vector<double> r = values(x), iv = values(index), sv = values(src);
  for (int64_t i = 0; i < index.numel(); ++i) {
    auto c = unravel(i, index.shape());
    const double s = sv[size_t(ravel(c, src.shape()))];
    c[size_t(ax)] = int64_t(iv[size_t(i)]);
    r[size_t(ravel(c, x.shape()))] += s;
  }
  return from_values(r, x.shape(), x.dtype());
}

Tensor ref_pad(const Tensor& x, const std::vector<int64_t>& pads, double value) {
  Shape out = x.shape();
  const size_t r = out.size();
  std::vector<int64_t> before(r, 0);
  for (size_t k = 0; k < pads.size() / 2; ++k) {
    out[r - 1 - k] += pads[2 * k] + pads[2 * k + 1];
    before[r - 1 - k] = pads[2 * k];
  }
  std::vector<double> v = values(x), res;
  for (int64_t i = 0; i < shape_numel(out); ++i) {
    auto c = unravel(i, out);
    bool inside = true;
    for (size_t d = 0; d < r; ++d) {
      c[d] -= before[d];
      inside = inside && c[d] >= 0 && c[d] < x.shape()[d];
    }
    res.push_back(inside ? v[size_t(ravel(c, x.shape()))] : value);
  }
  return from_values(res, out, x.dtype());
}

Tensor ref_one_hot(const Tensor& index, int64_t depth, DType dt) {
  std::vector<double> iv = values(index), r;
  for (double i : iv)
    for (int64_t k = 0; k < depth; ++k) r.push_back(int64_t(i) == k ? 1 : 0);
  Shape s = index.shape();
  s.push_back(depth);
  return from_values(r, s, dt);
}

// Stable ordering per lane: the k first (value, index) pairs.
Tensors ref_topk(const Tensor& x, int64_t k, int64_t axis, bool largest) {
  Shape out = x.shape();
  out[size_t(norm_axis(axis, out.size()))] = k;
  std::vector<double> v = values(x), rv(size_t(shape_numel(out))), ri(rv.size());
  auto in_l = lanes(x.shape(), axis), out_l = lanes(out, axis);
  for (size_t l = 0; l < in_l.size(); ++l) {
    std::vector<int64_t> order(in_l[l].size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      const double va = v[size_t(in_l[l][size_t(a)])], vb = v[size_t(in_l[l][size_t(b)])];
      return largest ? va > vb : va < vb;
    });
    for (int64_t j = 0; j < k; ++j) {
      rv[size_t(out_l[l][size_t(j)])] = v[size_t(in_l[l][size_t(order[size_t(j)])])];
      ri[size_t(out_l[l][size_t(j)])] = double(order[size_t(j)]);
    }
  }
  return {from_values(rv, out, x.dtype()), from_values(ri, out, kInt64)};
}

Tensor ref_cumsum(const Tensor& x, int64_t axis, bool reverse) {
  std::vector<double> v = values(x), r(v.size());
  for (auto l : lanes(x.shape(), axis)) {
    if (reverse) std::reverse(l.begin(), l.end());
    double acc = 0;
    for (int64_t i : l) r[size_t(i)] = acc += v[size_t(i)];
  }
  return from_values(r, x.shape(), is_floating(x.dtype()) ? x.dtype() : kInt64);
}

Tensor ref_upsample(const Tensor& x, int64_t oh, int64_t ow) {
  const Shape& s = x.shape();
  std::vector<double> v = values(x), r;
  for (int64_t n = 0; n < s[0] * s[1]; ++n)
    for (int64_t i = 0; i < oh; ++i)
      for (int64_t j = 0; j < ow; ++j)
        r.push_back(v[size_t(n * s[2] * s[3] + (i * s[2] / oh) * s[3] + j * s[3] / ow)]);
  return from_values(r, {s[0], s[1], oh, ow}, x.dtype());
}
Tensor ref_upsample_backward(const Tensor& g, const Shape& in) {
  const Shape& s = g.shape();
  std::vector<double> v = values(g), r(size_t(shape_numel(in)), 0.0);
  for (int64_t n = 0; n < s[0] * s[1]; ++n)
    for (int64_t i = 0; i < s[2]; ++i)
      for (int64_t j = 0; j < s[3]; ++j)
        r[size_t(n * in[2] * in[3] + (i * in[2] / s[2]) * in[3] + j * in[3] / s[3])] +=
            v[size_t((n * s[2] + i) * s[3] + j)];
  return from_values(r, in, g.dtype());
}

// Same random draw as the kernel's documented contract: element i keeps iff U(seed, base + i) >= p.
Tensors ref_dropout(const Tensor& x, double p, uint64_t seed) {
  set_seed(seed);
  const uint64_t s = random::seed(), base = random::reserve(uint64_t(x.numel()));
  std::vector<double> v = values(x), y, m;
  for (int64_t i = 0; i < x.numel(); ++i) {
    const bool keep = random::uniform(s, base + uint64_t(i)) >= p;
    m.push_back(keep);
    y.push_back(keep ? v[size_t(i)] / (1 - p) : 0);
  }
  return {from_values(y, x.shape(), x.dtype()), from_values(m, x.shape(), kUInt8)};
}

InputSpec index_input(int64_t hi, Shape shape, DType dt = kInt64) {
  return {.make = [=] { return randint(0, hi, shape, dt); }, .differentiable = false};
}
InputSpec const_index(std::vector<double> v, DType dt = kInt64) {
  return {.make = [=] { return from_values(v, {int64_t(v.size())}, dt); }, .differentiable = false};
}
InputSpec distinct(Shape shape) {
  return {.make = [shape] {
    const int64_t n = shape_numel(shape);
    std::vector<double> v = values(randperm(n, kInt64));
    for (double& e : v) e = (e - double(n) / 2) / double(n);
    return from_values(v, shape, kFloat64);
  }};
}

const std::vector<DType> kAllFloats = {kFloat32, kFloat64, kFloat16, kBFloat16};
const std::vector<DType> kSomeInts = {kInt32, kInt64};

#define RUN(expr) [](const Tensors& x) -> Tensors { return {expr}; }

SPORE_OP_CASES({
    // ---- softmax / log_softmax ----
    {.name = "softmax/last_axis",
     .op = OpId::Softmax,
     .inputs = {{.shape = {4, 7}, .lo = -3, .hi = 3}},
     .run = RUN(softmax(x[0])),
     .reference = RUN(ref_softmax(x[0], -1, false)),
     .dtypes = kAllFloats},
    {.name = "softmax/axis0",
     .op = OpId::Softmax,
     .inputs = {{.shape = {5, 3}, .lo = -3, .hi = 3}},
     .run = RUN(softmax(x[0], 0)),
     .reference = RUN(ref_softmax(x[0], 0, false))},
    {.name = "softmax/middle_axis_non_contiguous",
     .op = OpId::Softmax,
     .inputs = {{.shape = {2, 4, 3}, .lo = -3, .hi = 3, .non_contiguous = true}},
     .run = RUN(softmax(x[0], 1)),
     .reference = RUN(ref_softmax(x[0], 1, false))},
    {.name = "softmax/large_logits",
     .op = OpId::Softmax,
     .inputs = {{.shape = {3, 6}, .lo = 500, .hi = 1000}},
     .run = RUN(softmax(x[0])),
     .reference = RUN(ref_softmax(x[0], -1, false)),
     .grad_check = false},
    {.name = "softmax/long_rows",
     .op = OpId::Softmax,
     .inputs = {{.shape = {64, 1000}, .lo = -5, .hi = 5}},
     .run = RUN(softmax(x[0])),
     .reference = RUN(ref_softmax(x[0], -1, false)),
     .grad_check = false},
    {.name = "log_softmax/last_axis",
     .op = OpId::LogSoftmax,
     .inputs = {{.shape = {4, 7}, .lo = -3, .hi = 3}},
     .run = RUN(log_softmax(x[0])),
     .reference = RUN(ref_softmax(x[0], -1, true)),
     .dtypes = kAllFloats},
    {.name = "log_softmax/axis0_non_contiguous",
     .op = OpId::LogSoftmax,
     .inputs = {{.shape = {3, 5}, .lo = -3, .hi = 3, .non_contiguous = true}},
     .run = RUN(log_softmax(x[0], 0)),
     .reference = RUN(ref_softmax(x[0], 0, true))},
    {.name = "log_softmax/large_logits",
     .op = OpId::LogSoftmax,
     .inputs = {{.shape = {2, 5}, .lo = -1000, .hi = 1000}},
     .run = RUN(log_softmax(x[0], -1)),
     .reference = RUN(ref_softmax(x[0], -1, true)),
     .grad_check = false},
    // ---- concat / stack / split / chunk ----
    {.name = "concat/axis1_three",
     .op = OpId::Concat,
     .inputs = {{.shape = {2, 3}}, {.shape = {2, 1}}, {.shape = {2, 4}}},
     .run = RUN(concat({x[0], x[1], x[2]}, 1)),
     .reference = RUN(ref_concat(x, 1))},
    {.name = "concat/axis0_non_contiguous",
     .op = OpId::Concat,
     .inputs = {{.shape = {3, 4}, .non_contiguous = true}, {.shape = {2, 4}}},
     .run = RUN(concat({x[0], x[1]}, 0)),
     .reference = RUN(ref_concat(x, 0))},
    {.name = "concat/negative_axis_3d",
     .op = OpId::Concat,
     .inputs = {{.shape = {2, 3, 2}}, {.shape = {2, 3, 3}}},
     .run = RUN(concat({x[0], x[1]}, -1)),
     .reference = RUN(ref_concat(x, -1)),
     .dtypes = {kFloat32, kFloat64, kFloat16, kInt32, kInt64, kUInt8}},
    {.name = "stack/axis1",
     .op = OpId::Concat,
     .inputs = {{.shape = {2, 3}}, {.shape = {2, 3}}},
     .run = RUN(stack({x[0], x[1]}, 1)),
     .reference = RUN(ref_concat({x[0].reshape({2, 1, 3}), x[1].reshape({2, 1, 3})}, 1))},
    {.name = "split/axis0",
     .op = OpId::Split,
     .inputs = {{.shape = {6, 3}}},
     .run = [](const Tensors& x) -> Tensors {
       return split(x[0], {1, 3, 2}, 0);
     },
     .reference = [](const Tensors& x) -> Tensors {
       return {ref_slice(x[0], 0, 0, 1), ref_slice(x[0], 0, 1, 3), ref_slice(x[0], 0, 4, 2)};
     },
     .dtypes = {kFloat32, kFloat64, kInt32}},
    {.name = "split/last_axis_non_contiguous",
     .op = OpId::Split,
     .inputs = {{.shape = {5, 4}, .non_contiguous = true}},
     .run = [](const Tensors& x) -> Tensors {
       return split(x[0], {1, 3}, -1);
     },
     .reference = [](const Tensors& x) -> Tensors {
       return {ref_slice(x[0], 1, 0, 1), ref_slice(x[0], 1, 1, 3)};
     }},
    {.name = "chunk/uneven",
     .op = OpId::Split,
     .inputs = {{.shape = {2, 7}}},
     .run = [](const Tensors& x) -> Tensors { return chunk(x[0], 3, 1); },
     .reference = [](const Tensors& x) -> Tensors {
       return {ref_slice(x[0], 1, 0, 3), ref_slice(x[0], 1, 3, 3), ref_slice(x[0], 1, 6, 1)};
     }},
    // ---- gather / index_select / scatter_add ----
    {.name = "gather/axis1",
     .op = OpId::Gather,
     .inputs = {{.shape = {3, 4}}, index_input(4, {3, 5})},
     .run = RUN(gather(x[0], 1, x[1])),
     .reference = RUN(ref_gather(x[0], 1, x[1])),
     .dtypes = {kFloat32, kFloat64, kFloat16, kInt32}},
    {.name = "gather/axis0_smaller_index",
     .op = OpId::Gather,
     .inputs = {{.shape = {4, 5}}, index_input(4, {3, 3})},
     .run = RUN(gather(x[0], 0, x[1])),
     .reference = RUN(ref_gather(x[0], 0, x[1]))},
    {.name = "gather/int32_index_non_contiguous",
     .op = OpId::Gather,
     .inputs = {{.shape = {4, 3}, .non_contiguous = true}, index_input(3, {3, 2}, kInt32)},
     .run = RUN(gather(x[0], -1, x[1])),
     .reference = RUN(ref_gather(x[0], -1, x[1]))},
    {.name = "index_select/axis0_repeats",
     .op = OpId::IndexSelect,
     .inputs = {{.shape = {5, 3}}, const_index({4, 0, 0, 2})},
     .run = RUN(index_select(x[0], 0, x[1])),
     .reference = RUN(ref_index_select(x[0], 0, x[1])),
     .dtypes = {kFloat32, kFloat64, kInt64, kUInt8}},
    {.name = "index_select/last_axis_3d",
     .op = OpId::IndexSelect,
     .inputs = {{.shape = {2, 3, 4}}, const_index({3, 1}, kInt32)},
     .run = RUN(index_select(x[0], -1, x[1])),
     .reference = RUN(ref_index_select(x[0], 2, x[1]))},
    {.name = "index_select/non_contiguous",
     .op = OpId::IndexSelect,
     .inputs = {{.shape = {4, 5}, .non_contiguous = true}, const_index({1, 4, 2})},
     .run = RUN(index_select(x[0], 1, x[1])),
     .reference = RUN(ref_index_select(x[0], 1, x[1]))},
    {.name = "scatter_add/axis0",
     .op = OpId::ScatterAdd,
     .inputs = {{.shape = {4, 5}}, index_input(4, {3, 5}), {.shape = {3, 5}}},
     .run = RUN(scatter_add(x[0], 0, x[1], x[2])),
     .reference = RUN(ref_scatter_add(x[0], 0, x[1], x[2])),
     .dtypes = {kFloat32, kFloat64, kInt64}},
    {.name = "scatter_add/axis1_src_larger",
     .op = OpId::ScatterAdd,
     .inputs = {{.shape = {3, 4}}, index_input(4, {2, 6}), {.shape = {3, 7}}},
     .run = RUN(scatter_add(x[0], 1, x[1], x[2])),
     .reference = RUN(ref_scatter_add(x[0], 1, x[1], x[2]))},
    {.name = "scatter_add/non_contiguous",
     .op = OpId::ScatterAdd,
     .inputs = {{.shape = {4, 3}, .non_contiguous = true},
                index_input(3, {3, 3}),
                {.shape = {3, 3}, .non_contiguous = true}},
     .run = RUN(scatter_add(x[0], -1, x[1], x[2])),
     .reference = RUN(ref_scatter_add(x[0], 1, x[1], x[2]))},
    // ---- pad ----
    {.name = "pad/last_dim",
     .op = OpId::Pad,
     .inputs = {{.shape = {2, 3, 4}}},
     .run = RUN(pad(x[0], {1, 2})),
     .reference = RUN(ref_pad(x[0], {1, 2}, 0)),
     .dtypes = {kFloat32, kFloat64, kFloat16, kInt32}},
    {.name = "pad/two_dims_value",
     .op = OpId::Pad,
     .inputs = {{.shape = {2, 3, 4}}},
     .run = RUN(pad(x[0], {1, 0, 2, 1}, 0.5)),
     .reference = RUN(ref_pad(x[0], {1, 0, 2, 1}, 0.5))},
    {.name = "pad/negative_crops",
     .op = OpId::Pad,
     .inputs = {{.shape = {3, 5}}},
     .run = RUN(pad(x[0], {-1, 2, 1, -2})),
     .reference = RUN(ref_pad(x[0], {-1, 2, 1, -2}, 0))},
    {.name = "pad/non_contiguous_all_dims",
     .op = OpId::Pad,
     .inputs = {{.shape = {3, 4}, .non_contiguous = true}},
     .run = RUN(pad(x[0], {2, 1, 1, 1}, -1)),
     .reference = RUN(ref_pad(x[0], {2, 1, 1, 1}, -1))},
    // ---- one_hot ----
    {.name = "one_hot/int64",
     .op = OpId::OneHot,
     .inputs = {index_input(4, {5})},
     .run = RUN(one_hot(x[0], 4)),
     .reference = RUN(ref_one_hot(x[0], 4, kFloat32)),
     .dtypes = {kFloat32}},
    {.name = "one_hot/int32_2d_float64",
     .op = OpId::OneHot,
     .inputs = {index_input(6, {2, 3}, kInt32)},
     .run = RUN(one_hot(x[0], 6, kFloat64)),
     .reference = RUN(ref_one_hot(x[0], 6, kFloat64)),
     .dtypes = {kFloat32}},
    // ---- dropout (seeded inside run, so the gradient check is deterministic) ----
    {.name = "dropout/p0.3",
     .op = OpId::Dropout,
     .inputs = {{.shape = {6, 7}}},
     .run = [](const Tensors& x) -> Tensors {
       set_seed(77);
       return ops::call(OpId::Dropout, {x[0]}, ops::Attrs().set("p", 0.3));
     },
     .reference = [](const Tensors& x) -> Tensors { return ref_dropout(x[0], 0.3, 77); }},
    {.name = "dropout/non_contiguous",
     .op = OpId::Dropout,
     .inputs = {{.shape = {5, 4}, .non_contiguous = true}},
     .run = [](const Tensors& x) -> Tensors {
       set_seed(5);
       return ops::call(OpId::Dropout, {x[0]}, ops::Attrs().set("p", 0.5));
     },
     .reference = [](const Tensors& x) -> Tensors { return ref_dropout(x[0], 0.5, 5); },
     .dtypes = kAllFloats},
    // ---- nearest upsampling ----
    {.name = "upsample_nearest2d/integer_scale",
     .op = OpId::UpsampleNearest2d,
     .inputs = {{.shape = {1, 2, 3, 4}}},
     .run = RUN(upsample_nearest2d(x[0], {6, 8})),
     .reference = RUN(ref_upsample(x[0], 6, 8)),
     .dtypes = kAllFloats},
    {.name = "upsample_nearest2d/fractional_scale",
     .op = OpId::UpsampleNearest2d,
     .inputs = {{.shape = {2, 1, 5, 3}}},
     .run = RUN(upsample_nearest2d(x[0], {7, 4})),
     .reference = RUN(ref_upsample(x[0], 7, 4))},
    {.name = "upsample_nearest2d/downsample_non_contiguous",
     .op = OpId::UpsampleNearest2d,
     .inputs = {{.shape = {1, 2, 6, 5}, .non_contiguous = true}},
     .run = RUN(upsample_nearest2d(x[0], {4, 3})),
     .reference = RUN(ref_upsample(x[0], 4, 3))},
    {.name = "upsample_nearest2d_backward/fractional",
     .op = OpId::UpsampleNearest2dBackward,
     .inputs = {{.shape = {2, 3, 7, 5}}},
     .run = RUN(ops::call1(OpId::UpsampleNearest2dBackward, {x[0]},
                           ops::Attrs().set("input_shape", Shape{2, 3, 3, 4}))),
     .reference = RUN(ref_upsample_backward(x[0], {2, 3, 3, 4}))},
    // ---- topk / sort ----
    {.name = "topk/largest_last_axis",
     .op = OpId::TopK,
     .inputs = {distinct({4, 6})},
     .run = [](const Tensors& x) -> Tensors {
       auto [v, i] = topk(x[0], 3);
       return {v, i};
     },
     .reference = [](const Tensors& x) -> Tensors { return ref_topk(x[0], 3, -1, true); },
     .dtypes = kAllFloats},
    {.name = "topk/smallest_axis0_non_contiguous",
     .op = OpId::TopK,
     .inputs = {{.shape = {5, 4}, .non_contiguous = true}},
     .run = [](const Tensors& x) -> Tensors {
       auto [v, i] = topk(x[0], 2, 0, false);
       return {v, i};
     },
     .reference = [](const Tensors& x) -> Tensors { return ref_topk(x[0], 2, 0, false); }},
    {.name = "topk/int_ties_stable",
     .op = OpId::TopK,
     .inputs = {{.shape = {3, 8}, .lo = -3, .hi = 3}},
     .run = [](const Tensors& x) -> Tensors {
       auto [v, i] = topk(x[0], 4, 1);
       return {v, i};
     },
     .reference = [](const Tensors& x) -> Tensors { return ref_topk(x[0], 4, 1, true); },
     .dtypes = kSomeInts},
    {.name = "sort/ascending_last_axis",
     .op = OpId::Sort,
     .inputs = {distinct({3, 5})},
     .run = [](const Tensors& x) -> Tensors {
       auto [v, i] = sort(x[0]);
       return {v, i};
     },
     .reference = [](const Tensors& x) -> Tensors { return ref_topk(x[0], 5, -1, false); },
     .dtypes = kAllFloats},
    {.name = "sort/descending_axis0",
     .op = OpId::Sort,
     .inputs = {distinct({4, 3})},
     .run = [](const Tensors& x) -> Tensors {
       auto [v, i] = sort(x[0], 0, true);
       return {v, i};
     },
     .reference = [](const Tensors& x) -> Tensors { return ref_topk(x[0], 4, 0, true); }},
    {.name = "sort/int_stable",
     .op = OpId::Sort,
     .inputs = {{.shape = {2, 9}, .lo = -3, .hi = 3}},
     .run = [](const Tensors& x) -> Tensors {
       auto [v, i] = sort(x[0]);
       return {v, i};
     },
     .reference = [](const Tensors& x) -> Tensors { return ref_topk(x[0], 9, -1, false); },
     .dtypes = {kInt32, kInt64, kInt8}},
    {.name = "argsort/descending",
     .op = OpId::Sort,
     .inputs = {distinct({2, 6})},
     .run = RUN(argsort(x[0], -1, true)),
     .reference = RUN(ref_topk(x[0], 6, -1, true)[1]),
     .grad_check = false},
    // ---- cumsum ----
    {.name = "cumsum/axis0",
     .op = OpId::Cumsum,
     .inputs = {{.shape = {4, 3}}},
     .run = RUN(cumsum(x[0], 0)),
     .reference = RUN(ref_cumsum(x[0], 0, false)),
     .dtypes = kAllFloats},
    {.name = "cumsum/last_axis_non_contiguous",
     .op = OpId::Cumsum,
     .inputs = {{.shape = {3, 5}, .non_contiguous = true}},
     .run = RUN(cumsum(x[0], -1)),
     .reference = RUN(ref_cumsum(x[0], -1, false))},
    {.name = "cumsum/reverse_middle",
     .op = OpId::Cumsum,
     .inputs = {{.shape = {2, 4, 3}}},
     .run = RUN(ops::call1(OpId::Cumsum, {x[0]}, ops::Attrs().set("axis", 1).set("reverse", true))),
     .reference = RUN(ref_cumsum(x[0], 1, true))},
    {.name = "cumsum/int",
     .op = OpId::Cumsum,
     .inputs = {{.shape = {3, 6}, .lo = -10, .hi = 10}},
     .run = RUN(cumsum(x[0], 1)),
     .reference = RUN(ref_cumsum(x[0], 1, false)),
     .dtypes = {kInt32, kInt64, kInt8}},
    // ---- assign (in place: returns the destination) ----
    {.name = "assign/broadcast_cast",
     .op = OpId::Assign,
     .inputs = {{.shape = {1, 4}, .fixed_dtype = kFloat64}},
     .run = [](const Tensors& x) -> Tensors {
       Tensor dst = zeros({3, 4}, kFloat32);
       assign(dst, x[0]);
       return {dst};
     },
     .reference = RUN(x[0].expand({3, 4}).contiguous().to(kFloat32)),
     .dtypes = {kFloat64}},
    {.name = "assign/into_strided_view",
     .op = OpId::Assign,
     .inputs = {{.shape = {2, 3}}},
     .run = [](const Tensors& x) -> Tensors {
       Tensor buf = zeros({3, 4}, x[0].dtype());
       assign(buf.slice(1, 1, 3).t(), x[0]);  // a (2, 3) view with strides (1, 4)
       return {buf};
     },
     .reference = [](const Tensors& x) -> Tensors {
       std::vector<double> v = values(x[0]), r(12, 0.0);
       for (int i = 0; i < 2; ++i)
         for (int j = 0; j < 3; ++j) r[size_t(j * 4 + 1 + i)] = v[size_t(i * 3 + j)];
       return {from_values(r, {3, 4}, x[0].dtype())};
     },
     .dtypes = {kFloat32, kFloat64, kInt32, kBFloat16}},
});

}  // namespace
}  // namespace spore::test
