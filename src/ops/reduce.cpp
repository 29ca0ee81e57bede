// Reductions: Sum, Mean, Max, Min, Prod, Argmax, Argmin (inference + gradient rules) and the public
// reduction functions, including the composites var, std, logsumexp and sum_to_shape (the gradient
// of broadcasting, used by the autograd engine). Kernels: backends/cpu/kernels/reduce.cpp.
//
// Attributes: "axes" (int list, empty = all dims), "keepdims" (bool); Argmax/Argmin take one
// "axis". Output dtypes: sum/prod of bool or integers -> int64 (as numpy); mean of integers ->
// float32; max/min keep the dtype; argmax/argmin -> int64.
#include <algorithm>
#include <cmath>

#include "ops/op.h"
#include "spore/grad_mode.h"
#include "spore/ops.h"

namespace spore::ops {
namespace {

// The reduced dims of a tensor of rank r (all when `axes` is empty), as a mask.
std::vector<bool> reduced_mask(const Attrs& a, int64_t rank) {
  const std::vector<int64_t> axes = normalize_axes(a.get_ints("axes", {}), rank);
  std::vector<bool> red(size_t(rank), axes.empty());
  for (int64_t ax : axes)
    if (ax < rank) red[size_t(ax)] = true;
  return red;
}

// x's shape with the reduced dims set to 1 (the keepdims shape).
Shape keep_shape(const Shape& s, const std::vector<bool>& red) {
  Shape k = s;
  for (size_t d = 0; d < s.size(); ++d)
    if (red[d]) k[d] = 1;
  return k;
}

Metas reduce_infer(const Metas& in, const Attrs& a, DType out_dtype, bool needs_elements) {
  const Shape& s = in[0].shape;
  const std::vector<bool> red = reduced_mask(a, int64_t(s.size()));
  const bool keep = a.get_bool("keepdims", false);
  Shape out;
  for (size_t d = 0; d < s.size(); ++d) {
    if (red[d] && needs_elements)
      SPORE_CHECK(s[d] > 0, "cannot reduce over dimension ", d, " of size 0 (input shape ",
                  shape_str(s), "): the result has no identity");
    if (!red[d])
      out.push_back(s[d]);
    else if (keep)
      out.push_back(1);
  }
  return {{out, out_dtype}};
}

DType sum_dtype(DType t) { return is_floating(t) ? t : kInt64; }
DType mean_dtype(DType t) { return is_floating(t) ? t : kFloat32; }

int64_t reduced_count(const Tensor& x, const std::vector<bool>& red) {
  int64_t n = 1;
  for (size_t d = 0; d < red.size(); ++d)
    if (red[d]) n *= x.shape()[d];
  return n;
}

// A reduction result (keepdims or not) in the keepdims shape. A 0-d result already broadcasts
// (and core's reshape of a 0-d tensor to (1, ...) does not terminate at the time of writing).
Tensor as_keep(const Tensor& t, const Shape& ks) { return t.dim() == 0 ? t : t.reshape(ks); }

// g (reduced shape, keepdims or not) broadcast back to x's shape.
Tensor broadcast_back(const Tensor& g, const Tensor& x, const std::vector<bool>& red) {
  return as_keep(g, keep_shape(x.shape(), red)).expand(x.shape());
}

// Max/min: the cotangent goes to the positions equal to the result, split evenly among ties.
Tensors extremum_vjp(const VjpContext& c) {
  const Tensor& x = c.in(0);
  const auto red = reduced_mask(c.attrs, x.dim());
  const Shape ks = keep_shape(x.shape(), red);
  Tensor mask = cast(equal(x, as_keep(c.out(0), ks)), c.g().dtype());
  Tensor count = sum(mask, c.attrs.get_ints("axes", {}), true);
  return {div(mul(as_keep(c.g(), ks), mask), count)};
}

Metas arg_infer(const Metas& in, const Attrs& a) {
  const Shape& s = in[0].shape;
  const int64_t ax = normalize_axis(a.get_int("axis"), int64_t(s.size()));
  Shape out;
  for (size_t d = 0; d < s.size(); ++d) {
    if (int64_t(d) == ax) {
      SPORE_CHECK(s[d] > 0, "cannot take the arg-extremum over dimension ", d,
                  " of size 0 (input shape ", shape_str(s), ")");
      if (a.get_bool("keepdims", false)) out.push_back(1);
    } else {
      out.push_back(s[d]);
    }
  }
  return {{out, kInt64}};
}

}  // namespace

SPORE_DEFINE_OP(Sum,
                {
                    .infer = [](const Metas& in, const Attrs& a) -> Metas {
                      return reduce_infer(in, a, sum_dtype(in[0].dtype), false);
                    },
                    .vjp = [](const VjpContext& c) -> Tensors {
                      return {broadcast_back(c.g(), c.in(0), reduced_mask(c.attrs, c.in(0).dim()))};
                    },
                });

SPORE_DEFINE_OP(Mean, {
                          .infer = [](const Metas& in, const Attrs& a) -> Metas {
                            return reduce_infer(in, a, mean_dtype(in[0].dtype), false);
                          },
                          .vjp = [](const VjpContext& c) -> Tensors {
                            const auto red = reduced_mask(c.attrs, c.in(0).dim());
                            const int64_t n = std::max<int64_t>(reduced_count(c.in(0), red), 1);
                            return {broadcast_back(c.g() / double(n), c.in(0), red)};
                          },
                      });

SPORE_DEFINE_OP(Max, {
                         .infer = [](const Metas& in, const Attrs& a) -> Metas {
                           return reduce_infer(in, a, in[0].dtype, true);
                         },
                         .vjp = extremum_vjp,
                     });

SPORE_DEFINE_OP(Min, {
                         .infer = [](const Metas& in, const Attrs& a) -> Metas {
                           return reduce_infer(in, a, in[0].dtype, true);
                         },
                         .vjp = extremum_vjp,
                     });

SPORE_DEFINE_OP(Prod, {
                          .infer = [](const Metas& in, const Attrs& a) -> Metas {
                            return reduce_infer(in, a, sum_dtype(in[0].dtype), false);
                          },
                          // d prod / d x_i = product of the others. Without zeros that is y / x_i;
                          // with exactly one zero in a slice only the zero's position gets the
                          // product of the rest; with two or more, all get 0.
                          .vjp = [](const VjpContext& c) -> Tensors {
                            const Tensor& x = c.in(0);
                            const auto red = reduced_mask(c.attrs, x.dim());
                            const Shape ks = keep_shape(x.shape(), red);
                            const Axes axes = c.attrs.get_ints("axes", {});
                            const Tensor zero = zeros({}, x.dtype());
                            Tensor is_zero = equal(x, zero);
                            Tensor nzeros = sum(cast(is_zero, x.dtype()), axes, true);
                            Tensor y = as_keep(c.out(0), ks);
                            Tensor g = as_keep(c.g(), ks);
                            Tensor x_safe = where(is_zero, ones({}, x.dtype()), x);
                            Tensor prod_nonzero = prod(x_safe, axes, true);
                            Tensor no_zero =
                                div(y, x_safe);  // used only where the slice has no zero
                            Tensor one_zero = where(is_zero, prod_nonzero, zero);
                            Tensor others =
                                where(equal(nzeros, zero), no_zero,
                                      where(equal(nzeros, ones({}, x.dtype())), one_zero, zero));
                            return {mul(g, others)};
                          },
                      });

SPORE_DEFINE_OP(Argmax, {.infer = arg_infer});
SPORE_DEFINE_OP(Argmin, {.infer = arg_infer});

// AllFinite (mixed precision's overflow check): any number of tensors of any shape and dtype ->
// one bool scalar, true when no element of any input is inf or nan (integers always are finite).
SPORE_DEFINE_OP(AllFinite, {
                               .infer = [](const Metas&, const Attrs&) -> Metas {
                                 return {{Shape{}, kBool}};
                               },
                           });

}  // namespace spore::ops

namespace spore {
namespace {
using ops::Attrs;
using ops::OpId;

Tensor reduce_call(OpId id, const Tensor& x, Axes axes, bool keepdims) {
  return ops::call1(id, {x}, Attrs().set("axes", std::move(axes)).set("keepdims", keepdims));
}
int64_t count_over(const Tensor& x, const Axes& axes) {
  if (axes.empty()) return x.numel();
  int64_t n = 1;
  for (int64_t ax : ops::normalize_axes(axes, x.dim()))
    if (ax < x.dim()) n *= x.shape()[size_t(ax)];
  return n;
}
// The shape a keepdims=true reduction collapses to when keepdims is false.
Shape drop_reduced(const Shape& s, const Axes& axes) {
  const std::vector<int64_t> norm = ops::normalize_axes(axes, int64_t(s.size()));
  Shape out;
  for (size_t d = 0; d < s.size(); ++d)
    if (!norm.empty() && std::find(norm.begin(), norm.end(), int64_t(d)) == norm.end())
      out.push_back(s[d]);
  return out;
}
}  // namespace

Tensor sum(const Tensor& x, Axes axes, bool keepdims) {
  return reduce_call(OpId::Sum, x, std::move(axes), keepdims);
}
Tensor mean(const Tensor& x, Axes axes, bool keepdims) {
  return reduce_call(OpId::Mean, x, std::move(axes), keepdims);
}
Tensor amax(const Tensor& x, Axes axes, bool keepdims) {
  return reduce_call(OpId::Max, x, std::move(axes), keepdims);
}
Tensor amin(const Tensor& x, Axes axes, bool keepdims) {
  return reduce_call(OpId::Min, x, std::move(axes), keepdims);
}
Tensor prod(const Tensor& x, Axes axes, bool keepdims) {
  return reduce_call(OpId::Prod, x, std::move(axes), keepdims);
}

Tensor argmax(const Tensor& x, int64_t axis, bool keepdims) {
  return ops::call1(OpId::Argmax, {x}, Attrs().set("axis", axis).set("keepdims", keepdims));
}
Tensor argmin(const Tensor& x, int64_t axis, bool keepdims) {
  return ops::call1(OpId::Argmin, {x}, Attrs().set("axis", axis).set("keepdims", keepdims));
}

Tensor var(const Tensor& x, Axes axes, int64_t ddof, bool keepdims) {
  const Tensor xf = is_floating(x.dtype()) ? x : x.to(kFloat32);
  const int64_t n = count_over(xf, axes);
  SPORE_CHECK(ddof >= 0, "[var] ddof must be non-negative, got ", ddof);
  Tensor d = sub(xf, mean(xf, axes, true));  // two-pass: no cancellation of a large mean
  Tensor ss = sum(mul(d, d), axes, keepdims);
  return ss / double(std::max<int64_t>(n - ddof, 0));  // n <= ddof gives inf/nan as numpy
}

Tensor std(const Tensor& x, Axes axes, int64_t ddof, bool keepdims) {
  return sqrt(var(x, std::move(axes), ddof, keepdims));
}

Tensor logsumexp(const Tensor& x, Axes axes, bool keepdims) {
  SPORE_CHECK_TYPE(is_floating(x.dtype()), "[logsumexp] expected a floating-point tensor, got ",
                   dtype_name(x.dtype()));
  // Shift by the (constant) max so exp never overflows; an infinite max would give inf - inf.
  Tensor m = amax(x, axes, true).detach();  // a constant shift: no gradient through it
  m = where(logical_not(equal(abs(m), full({}, INFINITY, m.dtype()))), m, zeros({}, m.dtype()));
  Tensor r = add(log(sum(exp(sub(x, m)), axes, true)), m);
  return keepdims ? r : r.reshape(drop_reduced(x.shape(), axes));
}

Tensor sum_to_shape(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const int64_t lead = x.dim() - int64_t(shape.size());
  if (lead < 0) {  // the target only adds leading size-1 dims: (3,) -> (1, 3)
    const bool ones_only =
        std::all_of(shape.begin(), shape.begin() - lead, [](int64_t n) { return n == 1; });
    SPORE_CHECK(ones_only, "[sum_to_shape] cannot sum a tensor of shape ", shape_str(x.shape()),
                " to the larger shape ", shape_str(shape));
    return sum_to_shape(x, Shape(shape.begin() - lead, shape.end())).expand(shape);
  }
  Axes axes;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < lead) {
      axes.push_back(d);
      continue;
    }
    const int64_t want = shape[size_t(d - lead)], have = x.shape()[size_t(d)];
    if (want == have) continue;
    SPORE_CHECK(want == 1, "[sum_to_shape] shape ", shape_str(x.shape()), " is not a broadcast of ",
                shape_str(shape), " (dimension ", d, ": ", have, " vs ", want, ")");
    axes.push_back(d);
  }
  if (axes.empty()) return x.reshape(shape);  // only leading size-1 dims differ
  return sum(x, axes, true).reshape(shape);
}

}  // namespace spore
