// The ONNX importer's op table: each ONNX op type as calls to Spore's ops (spore/ops.h). Opset
// differences (attributes that became inputs) are handled where the op is. To support another
// op: a handler in handlers() below; an op that needs data-dependent shapes reads its shape
// input with const_ints (an error when the value depends on the model's input data).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "onnx/import_internal.h"
#include "onnx/onnx_util.h"
#include "spore/ops.h"

namespace spore::onnx_detail {

using A = ::onnx::AttributeProto;

const A* Ctx::attr(const char* name) const {
  for (const auto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}
int64_t Ctx::i(const char* name, int64_t dflt) const {
  const A* a = attr(name);
  if (!a) return dflt;
  SPORE_CHECK_KIND(ErrorKind::IOError, a->type() == A::INT || a->has_i(), where, "attribute ", name,
                   ": expected an INT");
  return a->i();
}
double Ctx::f(const char* name, double dflt) const {
  const A* a = attr(name);
  if (!a) return dflt;
  SPORE_CHECK_KIND(ErrorKind::IOError, a->type() == A::FLOAT || a->has_f(), where, "attribute ",
                   name, ": expected a FLOAT");
  return a->f();
}
std::string Ctx::s(const char* name, const std::string& dflt) const {
  const A* a = attr(name);
  return a ? a->s() : dflt;
}
std::vector<int64_t> Ctx::ints(const char* name, std::vector<int64_t> dflt) const {
  const A* a = attr(name);
  if (!a) return dflt;
  return {a->ints().begin(), a->ints().end()};
}
void Ctx::inputs_exactly(size_t n) const {
  SPORE_CHECK_KIND(ErrorKind::IOError, in.size() == n, where, "has ", in.size(), " inputs; ",
                   node.op_type(), " takes ", n, " (the model is malformed)");
}
const Tensor& Ctx::x(size_t k) const {
  SPORE_CHECK_KIND(ErrorKind::IOError, has_in(k), where, "input ", k, " is required but absent");
  return in[k];
}
std::vector<int64_t> Ctx::const_ints(size_t k, const char* what) const {
  const Tensor& t = x(k);
  if (t.is_symbolic())
    unsupported("input " + std::to_string(k) + " (" + what +
                ") computed from the model's input data (Spore needs a constant: an initializer, "
                "a Constant, or a value computed from shapes)");
  NoTrace guard;
  return t.to_vector<int64_t>();
}
double Ctx::const_scalar(size_t k, const char* what) const {
  const Tensor& t = x(k);
  if (t.is_symbolic())
    unsupported("input " + std::to_string(k) + " (" + what +
                ") computed from the model's input data (Spore needs a constant)");
  SPORE_CHECK_KIND(ErrorKind::IOError, t.numel() == 1, where, "input ", k, " (", what,
                   ") must hold one value, has ", t.numel());
  NoTrace guard;
  return t.to_vector<double>()[0];
}
void Ctx::unsupported(const std::string& what) const {
  SPORE_THROW(ErrorKind::NotImplemented, where, "unsupported ONNX op ", node.op_type(), " with ",
              what);
}

int64_t norm_axis(int64_t a, int64_t rank, const Ctx& c) {
  SPORE_CHECK_KIND(ErrorKind::IOError, a >= -rank && a < std::max<int64_t>(rank, 1), c.where,
                   "axis ", a, " is out of range for rank ", rank);
  return a < 0 ? a + rank : a;
}

std::vector<double> values_of(const Tensor& t) {
  NoTrace guard;
  return t.to(kFloat64).reshape({-1}).to_vector<double>();
}

namespace {

using V = std::vector<Tensor>;

bool is_int(DType t) { return !is_floating(t) && t != kBool; }

Tensor trunc(const Tensor& x) { return mul(sign(x), floor(abs(x))); }

// The input's reduction axes: an attribute before `input_opset`, input 1 from then on.
std::vector<int64_t> reduce_axes(Ctx& c, int64_t input_opset) {
  if (c.opset >= input_opset) return c.has_in(1) ? c.const_ints(1, "axes") : std::vector<int64_t>{};
  return c.ints("axes");
}

template <typename F>
Handler reducer(int64_t input_opset, F f) {
  return [input_opset, f](Ctx& c) -> V {
    const Tensor& x = c.x(0);
    std::vector<int64_t> axes = reduce_axes(c, input_opset);
    const bool keep = c.i("keepdims", 1) != 0;
    if (axes.empty() && c.i("noop_with_empty_axes", 0)) return {x};
    if (axes.empty())
      for (int64_t d = 0; d < x.dim(); ++d) axes.push_back(d);
    for (auto& a : axes) a = norm_axis(a, x.dim(), c);
    return {f(x, axes, keep)};
  };
}

Handler unary(Tensor (*f)(const Tensor&)) {
  return [f](Ctx& c) -> V {
    c.inputs_exactly(1);
    return {f(c.x(0))};
  };
}
Handler binary(Tensor (*f)(const Tensor&, const Tensor&)) {
  return [f](Ctx& c) -> V {
    c.inputs_exactly(2);
    return {f(c.x(0), c.x(1))};
  };
}
template <typename F>
Handler variadic(F f) {
  return [f](Ctx& c) -> V {
    Tensor acc = c.x(0);
    for (size_t k = 1; k < c.in.size(); ++k) acc = f(acc, c.x(k));
    return {acc};
  };
}

// 2-D conv / pool geometry: pads (top, bottom, left, right) for Spore from ONNX's pads or auto_pad.
std::vector<int64_t> spatial_pads(const Ctx& c, const Shape& x, const std::vector<int64_t>& k,
                                  const std::vector<int64_t>& stride,
                                  const std::vector<int64_t>& dil) {
  const std::string ap = c.s("auto_pad", "NOTSET");
  if (ap == "NOTSET") {
    const auto p = c.ints("pads", {0, 0, 0, 0});
    SPORE_CHECK_KIND(ErrorKind::IOError, p.size() == 4, c.where,
                     "attribute pads: expected 4 values for 2 "
                     "spatial dims, got ",
                     p.size());
    return {p[0], p[2], p[1], p[3]};
  }
  if (ap == "VALID") return {0, 0, 0, 0};
  SPORE_CHECK_KIND(ErrorKind::IOError, ap == "SAME_UPPER" || ap == "SAME_LOWER", c.where,
                   "attribute auto_pad: \"", ap,
                   "\" is not NOTSET, VALID, SAME_UPPER or SAME_LOWER");
  std::vector<int64_t> r(4);
  for (int d = 0; d < 2; ++d) {
    const int64_t in = x[size_t(2 + d)], out = (in + stride[size_t(d)] - 1) / stride[size_t(d)];
    const int64_t total = std::max<int64_t>(
        0, (out - 1) * stride[size_t(d)] + (k[size_t(d)] - 1) * dil[size_t(d)] + 1 - in);
    const int64_t small = total / 2, big = total - small;
    r[size_t(2 * d)] = ap == "SAME_UPPER" ? small : big;
    r[size_t(2 * d + 1)] = ap == "SAME_UPPER" ? big : small;
  }
  return r;
}

void need_2d(const Ctx& c, const Tensor& x) {
  if (x.dim() != 4)
    c.unsupported(std::to_string(x.dim() - 2) + " spatial dims (Spore maps the 2-D form)");
}

V conv(Ctx& c) {
  const Tensor& x = c.x(0);
  const Tensor& w = c.x(1);
  need_2d(c, x);
  const std::vector<int64_t> k{w.shape()[2], w.shape()[3]};
  Conv2dOptions o;
  o.stride = c.ints("strides", {1, 1});
  o.dilation = c.ints("dilations", {1, 1});
  o.groups = c.i("group", 1);
  o.padding = spatial_pads(c, x.shape(), k, o.stride, o.dilation);
  return {c.has_in(2) ? conv2d(x, w, c.x(2), o) : conv2d(x, w, o)};
}

V pool(Ctx& c, bool max) {
  const Tensor& x0 = c.x(0);
  if (x0.dim() == 3) {  // 1-D: as 2-D over (1, L)
    const std::string ap = c.s("auto_pad", "NOTSET");
    if (ap != "NOTSET" && ap != "VALID") c.unsupported("auto_pad " + ap + " in 1-D");
    if (max && c.node.output_size() > 1 && !c.node.output(1).empty())
      c.unsupported("the Indices output");
    if (c.ints("dilations", {1}) != std::vector<int64_t>{1}) c.unsupported("dilations");
    const auto p = ap == "VALID" ? std::vector<int64_t>{0, 0} : c.ints("pads", {0, 0});
    Pool2dOptions o;
    o.kernel_size = {1, c.ints("kernel_shape").at(0)};
    o.stride = {1, c.ints("strides", {1}).at(0)};
    o.padding = {0, 0, p.at(0), p.at(1)};
    o.ceil_mode = c.i("ceil_mode", 0) != 0;
    o.count_include_pad = c.i("count_include_pad", 0) != 0;
    const Tensor x = x0.unsqueeze(2);
    return {(max ? max_pool2d(x, o) : avg_pool2d(x, o)).squeeze(2)};
  }
  const bool integer = !is_floating(x0.dtype());
  const Tensor x = integer ? x0.to(kFloat32) : x0;
  need_2d(c, x);
  const bool want_indices = max && c.node.output_size() > 1 && !c.node.output(1).empty();
  const auto dil = c.ints("dilations", {1, 1});
  if (dil != std::vector<int64_t>{1, 1}) c.unsupported("dilations");
  Pool2dOptions o;
  o.kernel_size = c.ints("kernel_shape");
  SPORE_CHECK_KIND(ErrorKind::IOError, o.kernel_size.size() == 2, c.where,
                   "attribute kernel_shape: expected 2 values");
  o.stride = c.ints("strides", {1, 1});
  o.padding = spatial_pads(c, x.shape(), o.kernel_size, o.stride, dil);
  o.ceil_mode = c.i("ceil_mode", 0) != 0;
  o.count_include_pad = c.i("count_include_pad", 0) != 0;
  const auto& pd = o.padding;
  const bool wide = 2 * std::max(pd[0], pd[1]) > o.kernel_size[0] ||
                    2 * std::max(pd[2], pd[3]) > o.kernel_size[1];
  Tensor y;
  if (want_indices) {
    // Spore's indices count within each (n, c) plane; ONNX's count over the whole NCHW tensor.
    if (wide) c.unsupported("the Indices output with pads wider than half the kernel");
    auto [v, idx] = max_pool2d_with_indices(x, o);
    const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3],
                  plane = H * W;
    if (c.i("storage_order", 0)) {  // column-major within the plane: w * H + h (exact in float64)
      const Tensor f = idx.to(kFloat64), h = floor(div(f, full({}, double(W), kFloat64)));
      const Tensor w = sub(f, mul(h, full({}, double(W), kFloat64)));
      idx = add(mul(w, full({}, double(H), kFloat64)), h).to(kInt64);
    }
    const Tensor base = mul(arange(0, double(N * C), 1, kInt64).reshape({N, C, 1, 1}),
                            full({}, double(plane), kInt64));
    return {integer ? v.to(x0.dtype()) : v, add(idx, base)};
  }
  if (!wide) {
    y = max ? max_pool2d(x, o) : avg_pool2d(x, o);
  } else {  // pads wider than half the kernel (ONNX allows them): pad explicitly, pool unpadded
    const std::vector<int64_t> sp{pd[2], pd[3], pd[0], pd[1]};  // (left, right, top, bottom)
    Pool2dOptions u = o;
    u.padding = {0, 0, 0, 0};
    u.count_include_pad = true;
    if (max) {
      y = max_pool2d(pad(x, sp, -INFINITY), u);
    } else if (o.count_include_pad) {
      y = avg_pool2d(pad(x, sp, 0), u);
    } else {  // average over the real elements only: pooled values / pooled mask
      const Tensor ones = full({1, 1, x.shape()[2], x.shape()[3]}, 1.0, x.dtype());
      y = div(avg_pool2d(pad(x, sp, 0), u), avg_pool2d(pad(ones, sp, 0), u));
    }
  }
  return {integer ? y.to(x0.dtype()) : y};
}

V batch_norm(Ctx& c) {
  if (c.i("training_mode", 0)) c.unsupported("training_mode = 1");
  const Tensor& x = c.x(0);
  const double eps = c.f("epsilon", 1e-5);
  if (x.dim() == 4) return {batch_norm_infer(x, c.x(1), c.x(2), c.x(3), c.x(4), eps)};
  // (N, C, ...) -> (N, C, L, 1)
  Shape s = x.shape();
  const Tensor y =
      batch_norm_infer(x.reshape({s[0], s[1], -1, 1}), c.x(1), c.x(2), c.x(3), c.x(4), eps);
  return {y.reshape(s)};
}

V matmul_op(Ctx& c) {
  Tensor a = c.x(0), b = c.x(1);
  const bool av = a.dim() == 1, bv = b.dim() == 1;
  if (av) a = a.unsqueeze(0);
  if (bv) b = b.unsqueeze(-1);
  Tensor y = matmul(a, b);
  if (av) y = y.squeeze(-2);
  if (bv) y = y.squeeze(-1);
  return {y};
}

V gemm(Ctx& c) {
  Tensor a = c.x(0), b = c.x(1);
  if (c.i("transA", 0)) a = a.t();
  if (c.i("transB", 0)) b = b.t();
  Tensor y = matmul(a, b);
  const double alpha = c.f("alpha", 1.0), beta = c.f("beta", 1.0);
  if (alpha != 1.0) y = mul(y, scalar_like(alpha, y));
  if (c.has_in(2)) {
    Tensor cc = c.x(2);
    if (beta != 1.0) cc = mul(cc, scalar_like(beta, cc));
    y = add(y, cc);
  }
  return {y};
}

Tensor softmax_like(Ctx& c, bool log) {
  const Tensor& x = c.x(0);
  if (c.opset >= 13) {
    const int64_t ax = norm_axis(c.i("axis", -1), x.dim(), c);
    return log ? log_softmax(x, ax) : softmax(x, ax);
  }
  // Before opset 13: the input is flattened to 2-D at axis (default 1).
  const int64_t ax = norm_axis(c.i("axis", 1), x.dim(), c);
  const Tensor x2 = x.reshape(
      {std::accumulate(x.shape().begin(), x.shape().begin() + ax, int64_t(1), std::multiplies<>()),
       -1});
  return (log ? log_softmax(x2, 1) : softmax(x2, 1)).reshape(x.shape());
}

V reshape_op(Ctx& c) {
  const Tensor& x = c.x(0);
  std::vector<int64_t> s = c.opset >= 5 ? c.const_ints(1, "shape") : c.ints("shape");
  const bool allowzero = c.i("allowzero", 0) != 0;
  for (size_t d = 0; d < s.size(); ++d)
    if (s[d] == 0 && !allowzero) {
      SPORE_CHECK_KIND(ErrorKind::IOError, d < size_t(x.dim()), c.where, "shape ", shape_str(s),
                       ": a 0 copies an input dim that does not exist");
      s[d] = x.shape()[d];
    }
  return {x.reshape(s)};
}

std::vector<int64_t> axes_of(Ctx& c, size_t input, const char* what) {
  if (c.opset >= 13) return c.has_in(input) ? c.const_ints(input, what) : std::vector<int64_t>{};
  return c.ints("axes");
}

V squeeze_op(Ctx& c) {
  Tensor x = c.x(0);
  auto axes = axes_of(c, 1, "axes");
  if (axes.empty()) return {x.squeeze()};
  for (auto& a : axes) a = norm_axis(a, x.dim(), c);
  std::sort(axes.rbegin(), axes.rend());
  for (int64_t a : axes) {
    SPORE_CHECK_KIND(ErrorKind::IOError, x.shape()[size_t(a)] == 1, c.where, "Squeeze axis ", a,
                     " has size ", x.shape()[size_t(a)], ", not 1");
    x = x.squeeze(a);
  }
  return {x};
}

V unsqueeze_op(Ctx& c) {
  Tensor x = c.x(0);
  auto axes = axes_of(c, 1, "axes");
  const int64_t out_rank = x.dim() + int64_t(axes.size());
  for (auto& a : axes) a = norm_axis(a, out_rank, c);
  std::sort(axes.begin(), axes.end());
  for (int64_t a : axes) x = x.unsqueeze(a);
  return {x};
}

V flatten_op(Ctx& c) {
  const Tensor& x = c.x(0);
  int64_t ax = c.i("axis", 1);
  if (ax < 0) ax += x.dim();
  SPORE_CHECK_KIND(ErrorKind::IOError, ax >= 0 && ax <= x.dim(), c.where, "axis out of range");
  int64_t outer = 1;
  for (int64_t d = 0; d < ax; ++d) outer *= x.shape()[size_t(d)];
  int64_t inner = 1;
  for (int64_t d = ax; d < x.dim(); ++d) inner *= x.shape()[size_t(d)];
  return {x.reshape({outer, inner})};
}

V transpose_op(Ctx& c) {
  const Tensor& x = c.x(0);
  std::vector<int64_t> perm = c.ints("perm");
  if (perm.empty())
    for (int64_t d = x.dim() - 1; d >= 0; --d) perm.push_back(d);
  return {x.permute(perm)};
}

V concat_op(Ctx& c) {
  std::vector<Tensor> xs;
  for (size_t k = 0; k < c.in.size(); ++k) xs.push_back(c.x(k));
  return {concat(xs, norm_axis(c.i("axis", 0), xs[0].dim(), c))};
}

V split_op(Ctx& c) {
  const Tensor& x = c.x(0);
  const int64_t ax = norm_axis(c.i("axis", 0), x.dim(), c);
  std::vector<int64_t> sizes =
      c.opset >= 13 ? (c.has_in(1) ? c.const_ints(1, "split") : std::vector<int64_t>{})
                    : c.ints("split");
  const int64_t n = x.shape()[size_t(ax)];
  if (sizes.empty()) {
    const int64_t parts = c.i("num_outputs", c.node.output_size());
    const int64_t piece = (n + parts - 1) / parts;
    for (int64_t s = 0; s < n; s += piece) sizes.push_back(std::min(piece, n - s));
  }
  return split(x, sizes, ax);
}

V slice_op(Ctx& c) {
  Tensor x = c.x(0);
  std::vector<int64_t> starts, ends, axes, steps;
  if (c.opset >= 10) {
    starts = c.const_ints(1, "starts");
    ends = c.const_ints(2, "ends");
    if (c.has_in(3)) axes = c.const_ints(3, "axes");
    if (c.has_in(4)) steps = c.const_ints(4, "steps");
  } else {
    starts = c.ints("starts");
    ends = c.ints("ends");
    axes = c.ints("axes");
  }
  SPORE_CHECK_KIND(ErrorKind::IOError, starts.size() == ends.size(), c.where,
                   "starts and ends differ in length");
  if (axes.empty())
    for (size_t k = 0; k < starts.size(); ++k) axes.push_back(int64_t(k));
  if (steps.empty()) steps.assign(starts.size(), 1);
  SPORE_CHECK_KIND(ErrorKind::IOError,
                   axes.size() == starts.size() && steps.size() == starts.size(), c.where,
                   "starts, ends, axes and steps differ in length");
  for (size_t k = 0; k < starts.size(); ++k) {
    const int64_t ax = norm_axis(axes[k], x.dim(), c), dim = x.shape()[size_t(ax)], step = steps[k];
    SPORE_CHECK_KIND(ErrorKind::IOError, step != 0, c.where, "a step of 0");
    int64_t s = starts[k], e = ends[k];
    if (s < 0) s += dim;
    if (e < 0 && e > std::numeric_limits<int64_t>::min() / 2) e += dim;
    if (step > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      e = std::clamp<int64_t>(e, 0, dim);
      if (e < s) e = s;
      x = x.slice(ax, s, e, step);
    } else {
      s = std::clamp<int64_t>(s, -1, dim - 1);
      e = std::clamp<int64_t>(e, -1, dim - 1);
      std::vector<int64_t> idx;
      for (int64_t i = s; i > e; i += step) idx.push_back(i);
      x = index_select(x, ax, from_buffer(idx.data(), {int64_t(idx.size())}, kInt64));
    }
  }
  return {x};
}

// Indices with negative entries counted from the end of a dim of size n.
Tensor fix_indices(const Tensor& idx0, int64_t n) {
  Tensor idx = idx0.to(kInt64);
  if (!idx.is_symbolic()) {
    std::vector<int64_t> v = idx.to_vector<int64_t>();
    for (auto& i : v)
      if (i < 0) i += n;
    return from_buffer(v.data(), idx.shape(), kInt64);
  }
  return where(less(idx, full({}, 0, kInt64)), add(idx, full({}, double(n), kInt64)), idx);
}

V gather_op(Ctx& c) {
  const Tensor& x = c.x(0);
  const int64_t ax = norm_axis(c.i("axis", 0), x.dim(), c);
  const Tensor idx = fix_indices(c.x(1), x.shape()[size_t(ax)]);
  const Tensor flat = index_select(x, ax, idx.reshape({-1}));
  Shape s(x.shape().begin(), x.shape().begin() + ax);
  s.insert(s.end(), idx.shape().begin(), idx.shape().end());
  s.insert(s.end(), x.shape().begin() + ax + 1, x.shape().end());
  return {flat.reshape(s)};
}

V gather_elements_op(Ctx& c) {
  const Tensor& x = c.x(0);
  const int64_t ax = norm_axis(c.i("axis", 0), x.dim(), c);
  return {gather(x, ax, fix_indices(c.x(1), x.shape()[size_t(ax)]))};
}

Shape broadcast_shape(Shape a, Shape b, const Ctx& c) {
  if (a.size() < b.size()) std::swap(a, b);
  b.insert(b.begin(), a.size() - b.size(), 1);
  for (size_t d = 0; d < a.size(); ++d) {
    SPORE_CHECK_KIND(ErrorKind::IOError, a[d] == b[d] || a[d] == 1 || b[d] == 1, c.where, "shapes ",
                     shape_str(a), " and ", shape_str(b), " do not broadcast");
    if (a[d] == 1) a[d] = b[d];
  }
  return a;
}

V expand_op(Ctx& c) {
  Tensor x = c.x(0);
  const Shape target = broadcast_shape(x.shape(), c.const_ints(1, "shape"), c);
  while (x.dim() < int64_t(target.size())) x = x.unsqueeze(0);
  return {x.expand(target).contiguous()};
}

V tile_op(Ctx& c) {
  const Tensor& x = c.x(0);
  const auto reps = c.const_ints(1, "repeats");
  SPORE_CHECK_KIND(ErrorKind::IOError, reps.size() == size_t(x.dim()), c.where, "repeats has ",
                   reps.size(), " values for a rank-", x.dim(), " input");
  Shape inter, expanded, out;
  for (size_t d = 0; d < reps.size(); ++d) {
    inter.push_back(1), inter.push_back(x.shape()[d]);
    expanded.push_back(reps[d]), expanded.push_back(x.shape()[d]);
    out.push_back(reps[d] * x.shape()[d]);
  }
  return {x.reshape(inter).expand(expanded).contiguous().reshape(out)};
}

V pad_op(Ctx& c) {
  const Tensor& x = c.x(0);
  const std::string mode = c.s("mode", "constant");
  if (mode != "constant") c.unsupported("mode \"" + mode + "\"");
  std::vector<int64_t> p;
  double value = 0;
  if (c.opset >= 11) {
    p = c.const_ints(1, "pads");
    if (c.has_in(3)) c.unsupported("the axes input");
    if (c.has_in(2) &&
        c.x(2).is_symbolic()) {  // a value computed from the data: x padded with 0 + v * border
      const size_t r = size_t(x.dim());
      SPORE_CHECK_KIND(ErrorKind::IOError, p.size() == 2 * r, c.where, "pads has ", p.size(),
                       " values for rank ", r);
      std::vector<int64_t> sp;
      for (size_t k = 0; k < r; ++k) sp.push_back(p[r - 1 - k]), sp.push_back(p[2 * r - 1 - k]);
      const Tensor border = sub(full({}, 1.0, x.dtype()), pad(ones(x.shape(), x.dtype()), sp, 0));
      return {add(pad(x, sp, 0), mul(border, c.x(2).to(x.dtype()).reshape({})))};
    }
    if (c.has_in(2)) value = c.const_scalar(2, "constant_value");
  } else {
    p = c.ints(c.opset >= 2 ? "pads" : "paddings");
    value = c.f("value", 0);
  }
  const size_t r = size_t(x.dim());
  SPORE_CHECK_KIND(ErrorKind::IOError, p.size() == 2 * r, c.where, "pads has ", p.size(),
                   " values for rank ", r);
  std::vector<int64_t> sp;
  for (size_t k = 0; k < r; ++k) sp.push_back(p[r - 1 - k]), sp.push_back(p[2 * r - 1 - k]);
  return {pad(x, sp, value)};
}

V clip_op(Ctx& c) {
  Tensor x = c.x(0);
  if (c.opset >= 11) {  // min / max inputs: numbers when constant, else elementwise max / min
    for (size_t k = 1; k <= 2; ++k) {
      if (!c.has_in(k)) continue;
      const Tensor& b = c.x(k);
      if (b.is_symbolic())
        x = k == 1 ? maximum(x, b.to(x.dtype())) : minimum(x, b.to(x.dtype()));
      else
        x = k == 1 ? clamp(x, c.const_scalar(1, "min"), std::nullopt)
                   : clamp(x, std::nullopt, c.const_scalar(2, "max"));
    }
    return {x};
  }
  std::optional<double> lo, hi;
  if (c.has("min")) lo = c.f("min", 0);
  if (c.has("max")) hi = c.f("max", 0);
  if (!lo && !hi) return {x};
  return {clamp(x, lo, hi)};
}

// Before opset 19, ONNX casts a float to bfloat16 by dropping its low 16 bits (rounding toward
// zero; opset 19 rounds to nearest even, as Spore's cast does). Computed in float64, where every
// step is exact: |x| = m 2^e with 1 <= m < 2, bfloat16 keeps 7 bits after the point, so the result
// is floor(|x| / 2^(e-7)) 2^(e-7) with x's sign (e >= -126: float32's subnormals share one ulp).
Tensor bf16_truncate(const Tensor& x0) {
  const Tensor x = x0.to(kFloat64), ax = abs(x);
  const Tensor two = full({}, 2.0, kFloat64), one = full({}, 1.0, kFloat64);
  Tensor e = floor(div(log(ax), full({}, std::log(2.0), kFloat64)));
  e = where(greater(pow(two, e), ax), sub(e, one), e);  // log's rounding, corrected both ways
  e = where(less_equal(pow(two, add(e, one)), ax), add(e, one), e);
  e = maximum(e, full({}, -126.0, kFloat64));
  const Tensor ulp = pow(two, sub(e, full({}, 7.0, kFloat64)));
  const Tensor t = mul(sign(x), mul(floor(div(ax, ulp)), ulp));
  // Zeros, infinities and NaNs stay as they are (the formula would give NaN for them).
  const Tensor special = logical_or(
      logical_or(equal(ax, full({}, 0.0, kFloat64)), equal(ax, full({}, INFINITY, kFloat64))),
      not_equal(x, x));
  return where(special, x, t).to(kBFloat16);
}

// Cast and CastLike.
Tensor onnx_cast(const Ctx& c, const Tensor& x, DType dt) {
  if (dt == kBFloat16 && c.opset < 19 && is_floating(x.dtype()) && x.dtype() != kBFloat16)
    return bf16_truncate(x);
  return x.to(dt);
}

V cast_op(Ctx& c) {
  DType dt;
  const int64_t to = c.i("to", 0);
  if (!dtype_from_onnx(int(to), &dt)) c.unsupported("to = " + onnx_dtype_name(int(to)));
  return {onnx_cast(c, c.x(0), dt)};
}

Tensor constant_of(const A& a, const Ctx& c) {
  switch (a.type()) {
    case A::TENSOR:
      return from_tensor_proto(a.t(), c.where + "attribute " + a.name() + ": ");
    case A::FLOAT:
      return full({}, a.f(), kFloat32);
    case A::INT:
      return full({}, double(a.i()), kInt64);
    case A::FLOATS: {
      std::vector<float> v(a.floats().begin(), a.floats().end());
      return from_buffer(v.data(), {int64_t(v.size())}, kFloat32);
    }
    case A::INTS: {
      std::vector<int64_t> v(a.ints().begin(), a.ints().end());
      return from_buffer(v.data(), {int64_t(v.size())}, kInt64);
    }
    default:
      c.unsupported("attribute " + a.name() + " (strings, sparse tensors)");
  }
}

V constant_op(Ctx& c) {
  SPORE_CHECK_KIND(ErrorKind::IOError, c.node.attribute_size() == 1, c.where,
                   "a Constant needs exactly one "
                   "value attribute, found ",
                   c.node.attribute_size());
  return {constant_of(c.node.attribute(0), c)};
}

V constant_of_shape(Ctx& c) {
  const auto s = c.const_ints(0, "shape");
  Tensor v = c.has("value") ? constant_of(*c.attr("value"), c) : full({}, 0, kFloat32);
  return {full(s, v.to(kFloat64).reshape({-1}).to_vector<double>().at(0), v.dtype())};
}

V shape_op(Ctx& c) {
  const Shape& s = c.x(0).shape();
  const int64_t r = int64_t(s.size());
  int64_t b = c.i("start", 0), e = c.i("end", r);
  if (b < 0) b += r;
  if (e < 0) e += r;
  b = std::clamp<int64_t>(b, 0, r), e = std::clamp<int64_t>(e, b, r);
  std::vector<int64_t> v(s.begin() + b, s.begin() + e);
  return {from_buffer(v.data(), {int64_t(v.size())}, kInt64)};
}

V range_op(Ctx& c) {
  for (size_t k = 0; k < 3; ++k)
    if (c.x(k).is_symbolic())
      c.unsupported(
          "bounds computed from the input data in Graph mode (the output's shape would depend on "
          "the data)");
  const double s = c.const_scalar(0, "start"), l = c.const_scalar(1, "limit"),
               d = c.const_scalar(2, "delta");
  SPORE_CHECK_KIND(ErrorKind::IOError, d != 0, c.where, "Range delta is 0");
  const int64_t n = std::max<int64_t>(0, int64_t(std::ceil((l - s) / d)));
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = s + double(i) * d;
  return {from_buffer(v.data(), {n}, kFloat64).to(c.x(0).dtype())};
}

Tensor div_op(const Tensor& a, const Tensor& b) {
  if (is_int(a.dtype()) && is_int(b.dtype()))  // ONNX: integer division truncates
    return trunc(div(a.to(kFloat64), b.to(kFloat64))).to(promote_types(a.dtype(), b.dtype()));
  return div(a, b);
}

V pow_op(Ctx& c) {
  const Tensor& a = c.x(0);
  Tensor y =
      pow(a.to(promote_types(a.dtype(), kFloat32)), c.x(1).to(promote_types(a.dtype(), kFloat32)));
  if (is_int(a.dtype())) y = round(y);
  return {y.to(a.dtype())};
}

V elu(Ctx& c, double alpha, double gamma) {
  const Tensor& x = c.x(0);
  Tensor neg = mul(scalar_like(alpha, x), sub(exp(x), scalar_like(1, x)));
  Tensor y = where(greater(x, scalar_like(0, x)), x, neg);
  if (gamma != 1) y = mul(y, scalar_like(gamma, x));
  return {y};
}

V argm(Ctx& c, bool max) {
  const Tensor& x = c.x(0);
  const int64_t ax = norm_axis(c.i("axis", 0), x.dim(), c);
  const bool keep = c.i("keepdims", 1) != 0;
  if (!c.i("select_last_index", 0)) return {max ? argmax(x, ax, keep) : argmin(x, ax, keep)};
  // The last index of the extreme: the first in the reversed axis, counted from the end.
  const int64_t n = x.shape()[size_t(ax)];
  std::vector<int64_t> rev(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) rev[size_t(i)] = n - 1 - i;
  const Tensor xr = index_select(x, ax, from_buffer(rev.data(), {n}, kInt64));
  const Tensor i = max ? argmax(xr, ax, keep) : argmin(xr, ax, keep);
  return {sub(full({}, double(n - 1), kInt64), i)};
}

V topk_op(Ctx& c) {
  const Tensor& x = c.x(0);
  const int64_t k =
      c.opset >= 10 ? c.const_ints(1, "K").at(0) : c.i("k", 1);  // K: a 1-element tensor
  const int64_t ax = norm_axis(c.i("axis", -1), x.dim(), c);
  auto [v, i] = topk(x, k, ax, c.i("largest", 1) != 0, c.i("sorted", 1) != 0);
  return {v, i};
}

V cumsum_op(Ctx& c) {
  const Tensor& x = c.x(0);
  const int64_t ax = norm_axis(c.const_ints(1, "axis").at(0), x.dim(), c);
  const bool exclusive = c.i("exclusive", 0) != 0;
  const Tensor cs = cumsum(x, ax);
  Tensor y =
      c.i("reverse", 0) ? add(sub(sum(x, {ax}, true), cs), x) : cs;  // reverse: total - cumsum + x
  if (exclusive) y = sub(y, x);
  return {y};
}

V layer_norm_op(Ctx& c) {
  const Tensor& x = c.x(0);
  const int64_t ax = norm_axis(c.i("axis", -1), x.dim(), c);
  const double eps = c.f("epsilon", 1e-5);
  const Shape norm_shape(x.shape().begin() + ax, x.shape().end());
  const bool simple = c.node.output_size() == 1 && c.x(1).shape() == norm_shape &&
                      (!c.has_in(2) || c.x(2).shape() == norm_shape) && is_floating(x.dtype());
  if (simple) {
    const Tensor beta = c.has_in(2) ? c.x(2) : zeros(norm_shape, x.dtype());
    return {layer_norm(x, c.x(1), beta, x.dim() - ax, eps)};
  }
  std::vector<int64_t> axes;
  for (int64_t d = ax; d < x.dim(); ++d) axes.push_back(d);
  const Tensor xf = x.to(kFloat32);
  const Tensor m = mean(xf, axes, true);
  const Tensor d = sub(xf, m);
  const Tensor inv = rsqrt(add(mean(mul(d, d), axes, true), full({}, eps, kFloat32)));
  Tensor y = mul(mul(d, inv), c.x(1).to(kFloat32));
  if (c.has_in(2)) y = add(y, c.x(2).to(kFloat32));
  return {y.to(x.dtype()), m, inv};
}

V instance_norm_op(Ctx& c) {
  const Tensor& x = c.x(0);
  std::vector<int64_t> axes;
  for (int64_t d = 2; d < x.dim(); ++d) axes.push_back(d);
  const Tensor m = mean(x, axes, true);
  const Tensor d = sub(x, m);
  const Tensor inv = rsqrt(add(mean(mul(d, d), axes, true), scalar_like(c.f("epsilon", 1e-5), x)));
  Shape cs(size_t(x.dim()), 1);
  cs[1] = x.shape()[1];
  return {add(mul(mul(d, inv), c.x(1).reshape(cs)), c.x(2).reshape(cs))};
}

V global_pool(Ctx& c, bool max) {
  const Tensor& x = c.x(0);
  std::vector<int64_t> axes;
  for (int64_t d = 2; d < x.dim(); ++d) axes.push_back(d);
  return {max ? amax(x, axes, true) : mean(x, axes, true)};
}

V dropout_op(Ctx& c) {
  const Tensor& x = c.x(0);
  bool training = false;
  if (c.opset >= 12 && c.has_in(2)) {
    if (c.x(2).is_symbolic()) c.unsupported("training_mode computed from the model's input data");
    training = c.const_scalar(2, "training_mode") != 0;
  }
  const double ratio =
      c.opset >= 12 ? (c.has_in(1) ? c.const_scalar(1, "ratio") : 0.5) : c.f("ratio", 0.5);
  if (!training || ratio == 0) {  // inference (or nothing dropped): the identity, mask all true
    V out{x};
    if (c.node.output_size() > 1) out.push_back(full(x.shape(), 1, kBool));
    return out;
  }
  SPORE_CHECK_KIND(ErrorKind::IOError, ratio > 0 && ratio < 1, c.where, "ratio ", ratio,
                   " is not in [0, 1)");
  // Spore's dropout op on ones draws the scaled mask (0 or 1 / (1 - ratio)) when the model runs,
  // a fresh draw each run (ONNX's seed attribute is not honoured: Spore's global generator is).
  const Tensor m =
      dropout(ones(x.shape(), is_floating(x.dtype()) ? x.dtype() : kFloat32), ratio, true);
  V out{mul(x, m.to(x.dtype()))};
  if (c.node.output_size() > 1) out.push_back(not_equal(m, scalar_like(0, m)));
  return out;
}

}  // namespace

const std::map<std::string, Handler>& handlers() {
  static const std::map<std::string, Handler> table = [] {
    std::map<std::string, Handler> t;
    t["Abs"] = unary(abs);
    t["Neg"] = unary(neg);
    t["Exp"] = unary(exp);
    t["Log"] = unary(log);
    t["Sqrt"] = unary(sqrt);
    t["Sin"] = unary(sin);
    t["Cos"] = unary(cos);
    t["Tan"] = [](Ctx& c) -> V { return {div(sin(c.x(0)), cos(c.x(0)))}; };
    t["Tanh"] = unary(tanh);
    t["Sigmoid"] = unary(sigmoid);
    t["Relu"] = unary(relu);
    t["Floor"] = unary(floor);
    t["Ceil"] = unary(ceil);
    t["Round"] = unary(round);
    t["Sign"] = unary(sign);
    t["Erf"] = unary(erf);
    t["Not"] = unary(logical_not);
    t["Reciprocal"] = unary(reciprocal);
    t["Identity"] = [](Ctx& c) -> V { return {c.x(0)}; };
    t["Softplus"] = [](Ctx& c) -> V { return {softplus(c.x(0), 1, 1e30)}; };
    t["Softsign"] = [](Ctx& c) -> V {
      const Tensor& x = c.x(0);
      return {div(x, add(abs(x), scalar_like(1, x)))};
    };
    t["LeakyRelu"] = [](Ctx& c) -> V { return {leaky_relu(c.x(0), c.f("alpha", 0.01))}; };
    t["Elu"] = [](Ctx& c) -> V { return elu(c, c.f("alpha", 1.0), 1.0); };
    t["Selu"] = [](Ctx& c) -> V {
      return elu(c, c.f("alpha", 1.67326319217681884765625),
                 c.f("gamma", 1.05070102214813232421875));
    };
    t["Celu"] = [](Ctx& c) -> V {
      const Tensor& x = c.x(0);
      const double a = c.f("alpha", 1.0);
      const Tensor neg =
          mul(scalar_like(a, x), sub(exp(div(x, scalar_like(a, x))), scalar_like(1, x)));
      return {add(relu(x), minimum(scalar_like(0, x), neg))};
    };
    t["HardSigmoid"] = [](Ctx& c) -> V {
      const Tensor& x = c.x(0);
      return {
          clamp(add(mul(x, scalar_like(c.f("alpha", 0.2), x)), scalar_like(c.f("beta", 0.5), x)),
                0.0, 1.0)};
    };
    t["HardSwish"] = [](Ctx& c) -> V {
      const Tensor& x = c.x(0);
      return {mul(x, clamp(add(mul(x, scalar_like(1.0 / 6, x)), scalar_like(0.5, x)), 0.0, 1.0))};
    };
    t["ThresholdedRelu"] = [](Ctx& c) -> V {
      const Tensor& x = c.x(0);
      return {where(greater(x, scalar_like(c.f("alpha", 1.0), x)), x, scalar_like(0, x))};
    };
    t["PRelu"] = [](Ctx& c) -> V {
      const Tensor& x = c.x(0);
      return {where(less(x, scalar_like(0, x)), mul(x, c.x(1)), x)};
    };
    t["IsNaN"] = [](Ctx& c) -> V { return {not_equal(c.x(0), c.x(0))}; };
    t["IsInf"] = [](Ctx& c) -> V {
      const Tensor& x = c.x(0);
      const Tensor inf = scalar_like(INFINITY, x);
      Tensor r = full(x.shape(), 0, kBool);
      if (c.i("detect_positive", 1)) r = logical_or(r, equal(x, inf));
      if (c.i("detect_negative", 1)) r = logical_or(r, equal(x, neg(inf)));
      return {r};
    };
    t["Add"] = binary(add);
    t["Sub"] = binary(sub);
    t["Mul"] = binary(mul);
    t["Div"] = binary(div_op);
    t["Pow"] = pow_op;
    t["Equal"] = binary(equal);
    t["Less"] = binary(less);
    t["LessOrEqual"] = binary(less_equal);
    t["Greater"] = binary(greater);
    t["GreaterOrEqual"] = binary(greater_equal);
    t["And"] = binary(logical_and);
    t["Or"] = binary(logical_or);
    t["Xor"] = binary(logical_xor);
    t["Where"] = [](Ctx& c) -> V { return {where(c.x(0), c.x(1), c.x(2))}; };
    t["Max"] = variadic(maximum);
    t["Min"] = variadic(minimum);
    t["Sum"] = variadic(add);
    t["Mean"] = [](Ctx& c) -> V {
      Tensor acc = c.x(0);
      for (size_t k = 1; k < c.in.size(); ++k) acc = add(acc, c.x(k));
      return {div(acc, scalar_like(double(c.in.size()), acc))};
    };
    t["MatMul"] = matmul_op;
    t["Gemm"] = gemm;
    t["Conv"] = conv;
    t["MaxPool"] = [](Ctx& c) { return pool(c, true); };
    t["AveragePool"] = [](Ctx& c) { return pool(c, false); };
    t["GlobalAveragePool"] = [](Ctx& c) { return global_pool(c, false); };
    t["GlobalMaxPool"] = [](Ctx& c) { return global_pool(c, true); };
    t["BatchNormalization"] = batch_norm;
    t["LayerNormalization"] = layer_norm_op;
    t["InstanceNormalization"] = instance_norm_op;
    t["Softmax"] = [](Ctx& c) -> V { return {softmax_like(c, false)}; };
    t["LogSoftmax"] = [](Ctx& c) -> V { return {softmax_like(c, true)}; };
    t["Reshape"] = reshape_op;
    t["Flatten"] = flatten_op;
    t["Squeeze"] = squeeze_op;
    t["Unsqueeze"] = unsqueeze_op;
    t["Transpose"] = transpose_op;
    t["Concat"] = concat_op;
    t["Split"] = split_op;
    t["Slice"] = slice_op;
    t["Gather"] = gather_op;
    t["GatherElements"] = gather_elements_op;
    t["Expand"] = expand_op;
    t["Tile"] = tile_op;
    t["Pad"] = pad_op;
    t["Clip"] = clip_op;
    t["Cast"] = cast_op;
    t["CastLike"] = [](Ctx& c) -> V { return {onnx_cast(c, c.x(0), c.x(1).dtype())}; };
    t["Constant"] = constant_op;
    t["ConstantOfShape"] = constant_of_shape;
    t["Shape"] = shape_op;
    t["Size"] = [](Ctx& c) -> V { return {full({}, double(c.x(0).numel()), kInt64)}; };
    t["Range"] = range_op;
    t["Dropout"] = dropout_op;
    t["ArgMax"] = [](Ctx& c) { return argm(c, true); };
    t["ArgMin"] = [](Ctx& c) { return argm(c, false); };
    t["TopK"] = topk_op;
    t["CumSum"] = cumsum_op;
    t["ReduceSum"] =
        reducer(13, [](const Tensor& x, const Axes& a, bool k) { return sum(x, a, k); });
    t["ReduceMean"] =
        reducer(18, [](const Tensor& x, const Axes& a, bool k) { return mean(x, a, k); });
    t["ReduceMax"] =
        reducer(18, [](const Tensor& x, const Axes& a, bool k) { return amax(x, a, k); });
    t["ReduceMin"] =
        reducer(18, [](const Tensor& x, const Axes& a, bool k) { return amin(x, a, k); });
    t["ReduceProd"] =
        reducer(18, [](const Tensor& x, const Axes& a, bool k) { return prod(x, a, k); });
    t["ReduceL1"] =
        reducer(18, [](const Tensor& x, const Axes& a, bool k) { return sum(abs(x), a, k); });
    t["ReduceL2"] = reducer(
        18, [](const Tensor& x, const Axes& a, bool k) { return sqrt(sum(mul(x, x), a, k)); });
    t["ReduceSumSquare"] =
        reducer(18, [](const Tensor& x, const Axes& a, bool k) { return sum(mul(x, x), a, k); });
    t["ReduceLogSum"] =
        reducer(18, [](const Tensor& x, const Axes& a, bool k) { return log(sum(x, a, k)); });
    t["ReduceLogSumExp"] =
        reducer(18, [](const Tensor& x, const Axes& a, bool k) { return logsumexp(x, a, k); });
    add_extra_handlers(t);
    return t;
  }();
  return table;
}

}  // namespace spore::onnx_detail
