// Op-table rows for the reductions (sum, mean, max, min, prod, argmax, argmin) and the reduction
// composites (var, std, logsumexp, sum_to_shape). References are plain loops on doubles.
#include <algorithm>
#include <cmath>
#include <limits>

#include "op_table.h"

namespace spore::test {
namespace {
using ops::OpId;

// Generic reduction reference: folds f over the elements sharing an output position, then
// applies fin(acc, count). `axes` may be negative; empty = all.
Tensor ref_reduce(const Tensor& x, std::vector<int64_t> axes, bool keepdims, double init,
                  const std::function<double(double, double)>& f,
                  const std::function<double(double, int64_t)>& fin, DType out_dtype) {
  const Shape& s = x.shape();
  const int64_t r = x.dim();
  std::vector<bool> red(size_t(r), axes.empty());
  for (int64_t a : axes) red[size_t(a < 0 ? a + r : a)] = true;
  Shape out, kept;
  for (int64_t d = 0; d < r; ++d) {
    if (!red[size_t(d)])
      out.push_back(s[size_t(d)]);
    else if (keepdims)
      out.push_back(1);
  }
  std::vector<double> v = values(x), acc(size_t(shape_numel(out)), init);
  int64_t count = 1;
  for (int64_t d = 0; d < r; ++d)
    if (red[size_t(d)]) count *= s[size_t(d)];
  for (int64_t i = 0; i < int64_t(v.size()); ++i) {
    int64_t rem = i, o = 0, mul = 1;
    for (int64_t d = r - 1; d >= 0; --d) {
      const int64_t c = rem % s[size_t(d)];
      rem /= s[size_t(d)];
      if (!red[size_t(d)]) {
        o += c * mul;
        mul *= s[size_t(d)];
      }
    }
    acc[size_t(o)] = f(acc[size_t(o)], v[size_t(i)]);
  }
  for (double& a : acc) a = fin(a, count);
  return from_values(acc, out, out_dtype);
}

double add2(double a, double b) { return a + b; }
double id(double a, int64_t) { return a; }
DType sum_dt(DType t) { return is_floating(t) ? t : kInt64; }

Tensor ref_sum(const Tensor& x, std::vector<int64_t> axes, bool keep) {
  return ref_reduce(x, axes, keep, 0, add2, id, sum_dt(x.dtype()));
}
Tensor ref_mean(const Tensor& x, std::vector<int64_t> axes, bool keep) {
  return ref_reduce(
      x, axes, keep, 0, add2, [](double a, int64_t n) { return a / double(n); },
      is_floating(x.dtype()) ? x.dtype() : kFloat32);
}
Tensor ref_max(const Tensor& x, std::vector<int64_t> axes, bool keep) {
  return ref_reduce(
      x, axes, keep, -INFINITY, [](double a, double b) { return std::max(a, b); }, id, x.dtype());
}
Tensor ref_min(const Tensor& x, std::vector<int64_t> axes, bool keep) {
  return ref_reduce(
      x, axes, keep, INFINITY, [](double a, double b) { return std::min(a, b); }, id, x.dtype());
}
Tensor ref_prod(const Tensor& x, std::vector<int64_t> axes, bool keep) {
  return ref_reduce(
      x, axes, keep, 1, [](double a, double b) { return a * b; }, id, sum_dt(x.dtype()));
}

// Argmax/argmin along one axis: first extremal position.
Tensor ref_arg(const Tensor& x, int64_t axis, bool keep, bool is_max) {
  const Shape& s = x.shape();
  const int64_t r = x.dim(), ax = axis < 0 ? axis + r : axis, n = s[size_t(ax)];
  int64_t inner = 1, outer = 1;
  for (int64_t d = ax + 1; d < r; ++d) inner *= s[size_t(d)];
  for (int64_t d = 0; d < ax; ++d) outer *= s[size_t(d)];
  std::vector<double> v = values(x), res;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t best = 0;
      for (int64_t j = 1; j < n; ++j) {
        const double a = v[size_t((o * n + j) * inner + i)],
                     b = v[size_t((o * n + best) * inner + i)];
        if (is_max ? a > b : a < b) best = j;
      }
      res.push_back(double(best));
    }
  Shape out = s;
  if (keep)
    out[size_t(ax)] = 1;
  else
    out.erase(out.begin() + ax);
  return from_values(res, out, kInt64);
}

Tensor ref_var(const Tensor& x, std::vector<int64_t> axes, int64_t ddof, bool keep) {
  Tensor m = ref_mean(x, axes, true);
  std::vector<double> mv = values(m), v = values(x), sq(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const double d = v[i] - mv[size_t(broadcast_index(int64_t(i), x.shape(), m.shape()))];
    sq[i] = d * d;
  }
  return ref_reduce(
      from_values(sq, x.shape(), x.dtype()), axes, keep, 0, add2,
      [ddof](double a, int64_t n) { return a / double(n - ddof); }, x.dtype());
}

Tensor ref_logsumexp(const Tensor& x, std::vector<int64_t> axes, bool keep) {
  Tensor m = ref_max(x, axes, true);
  std::vector<double> mv = values(m), v = values(x), e(v.size());
  for (size_t i = 0; i < v.size(); ++i)
    e[i] = std::exp(v[i] - mv[size_t(broadcast_index(int64_t(i), x.shape(), m.shape()))]);
  Tensor s = ref_reduce(from_values(e, x.shape(), kFloat64), axes, true, 0, add2, id, kFloat64);
  std::vector<double> sv = values(s);
  for (size_t i = 0; i < sv.size(); ++i) sv[i] = std::log(sv[i]) + mv[i];
  Tensor r = from_values(sv, s.shape(), x.dtype());
  return keep ? r : ref_reduce(r, axes, false, 0, add2, id, x.dtype());  // drop the size-1 dims
}

const std::vector<DType> kFloats = {kFloat32, kFloat64};
const std::vector<DType> kAllFloats = {kFloat32, kFloat64, kFloat16, kBFloat16};
const std::vector<DType> kInts = {kInt32, kInt64, kInt8};

// Distinct values (a permutation, scaled) so max/min/sort gradients have no ties.
InputSpec distinct(Shape shape) {
  return {.make = [shape] {
    const int64_t n = shape_numel(shape);
    std::vector<double> v = values(randperm(n, kInt64));
    for (double& e : v) e = (e - double(n) / 2) / double(n);
    return from_values(v, shape, kFloat64);
  }};
}

#define RUN(expr) [](const Tensors& x) -> Tensors { return {expr}; }

SPORE_OP_CASES({
    // ---- sum ----
    {.name = "sum/all",
     .op = OpId::Sum,
     .inputs = {{.shape = {3, 4}}},
     .run = RUN(sum(x[0])),
     .reference = RUN(ref_sum(x[0], {}, false)),
     .dtypes = kAllFloats},
    {.name = "sum/last_axis",
     .op = OpId::Sum,
     .inputs = {{.shape = {4, 5}}},
     .run = RUN(sum(x[0], {-1})),
     .reference = RUN(ref_sum(x[0], {-1}, false)),
     .dtypes = kAllFloats},
    {.name = "sum/leading_axis_keepdims",
     .op = OpId::Sum,
     .inputs = {{.shape = {6, 5}}},
     .run = RUN(sum(x[0], {0}, true)),
     .reference = RUN(ref_sum(x[0], {0}, true)),
     .dtypes = kAllFloats},
    {.name = "sum/multi_axes_keepdims",
     .op = OpId::Sum,
     .inputs = {{.shape = {2, 3, 4}}},
     .run = RUN(sum(x[0], {0, -1}, true)),
     .reference = RUN(ref_sum(x[0], {0, 2}, true))},
    {.name = "sum/middle_axis",
     .op = OpId::Sum,
     .inputs = {{.shape = {2, 3, 4}}},
     .run = RUN(sum(x[0], {1})),
     .reference = RUN(ref_sum(x[0], {1}, false))},
    {.name = "sum/non_contiguous",
     .op = OpId::Sum,
     .inputs = {{.shape = {5, 4}, .non_contiguous = true}},
     .run = RUN(sum(x[0], {1})),
     .reference = RUN(ref_sum(x[0], {1}, false))},
    {.name = "sum/non_contiguous_axis0",
     .op = OpId::Sum,
     .inputs = {{.shape = {3, 7}, .non_contiguous = true}},
     .run = RUN(sum(x[0], {0})),
     .reference = RUN(ref_sum(x[0], {0}, false))},
    {.name = "sum/broadcast_input",
     .op = OpId::Sum,
     .inputs = {{.shape = {1, 5}}},
     .run = RUN(sum(x[0].expand({4, 5}), {0})),
     .reference = RUN(ref_sum(x[0].expand({4, 5}).contiguous(), {0}, false))},
    {.name = "sum/scalar",
     .op = OpId::Sum,
     .inputs = {{.shape = {}}},
     .run = RUN(sum(x[0])),
     .reference = RUN(x[0].clone())},
    {.name = "sum/int",
     .op = OpId::Sum,
     .inputs = {{.shape = {3, 5}, .lo = -10, .hi = 10}},
     .run = RUN(sum(x[0], {1})),
     .reference = RUN(ref_sum(x[0], {1}, false)),
     .dtypes = kInts},
    {.name = "sum/bool",
     .op = OpId::Sum,
     .inputs = {{.shape = {3, 5}, .lo = 0, .hi = 2}},
     .run = RUN(sum(x[0], {0})),
     .reference = RUN(ref_sum(x[0], {0}, false)),
     .dtypes = {kBool}},
    // Big enough for the vectorised and multi-threaded paths.
    {.name = "sum/large_rows",
     .op = OpId::Sum,
     .inputs = {{.shape = {64, 300}}},
     .run = RUN(sum(x[0], {-1})),
     .reference = RUN(ref_sum(x[0], {-1}, false)),
     .grad_check = false},
    {.name = "sum/large_columns",
     .op = OpId::Sum,
     .inputs = {{.shape = {300, 1100}}},
     .run = RUN(sum(x[0], {0})),
     .reference = RUN(ref_sum(x[0], {0}, false)),
     .grad_check = false},
    {.name = "sum/large_all",
     .op = OpId::Sum,
     .inputs = {{.shape = {100, 1000}, .lo = 0, .hi = 1}},
     .run = RUN(sum(x[0])),
     .reference = RUN(ref_sum(x[0], {}, false)),
     .grad_check = false},
    {.name = "sum_to_shape/broadcast",
     .op = OpId::Sum,
     .inputs = {{.shape = {2, 3, 4}}},
     .run = RUN(sum_to_shape(x[0], {3, 1})),
     .reference = RUN(ref_sum(x[0], {0, 2}, false).reshape({3, 1}))},
    // ---- mean ----
    {.name = "mean/all",
     .op = OpId::Mean,
     .inputs = {{.shape = {3, 4}}},
     .run = RUN(mean(x[0])),
     .reference = RUN(ref_mean(x[0], {}, false)),
     .dtypes = kAllFloats},
    {.name = "mean/axis1_keepdims",
     .op = OpId::Mean,
     .inputs = {{.shape = {3, 4, 2}}},
     .run = RUN(mean(x[0], {1}, true)),
     .reference = RUN(ref_mean(x[0], {1}, true))},
    {.name = "mean/leading_non_contiguous",
     .op = OpId::Mean,
     .inputs = {{.shape = {4, 6}, .non_contiguous = true}},
     .run = RUN(mean(x[0], {0})),
     .reference = RUN(ref_mean(x[0], {0}, false))},
    {.name = "mean/int",
     .op = OpId::Mean,
     .inputs = {{.shape = {3, 5}, .lo = -10, .hi = 10}},
     .run = RUN(mean(x[0], {-1})),
     .reference = RUN(ref_mean(x[0], {-1}, false)),
     .dtypes = kInts},
    {.name = "var/axis0_ddof1",
     .op = OpId::Mean,
     .inputs = {{.shape = {5, 3}}},
     .run = RUN(var(x[0], {0}, 1)),
     .reference = RUN(ref_var(x[0], {0}, 1, false))},
    {.name = "std/all_keepdims",
     .op = OpId::Mean,
     .inputs = {{.shape = {3, 4}}},
     .run = RUN(spore::std(x[0], {}, 0, true)),
     .reference = [](const Tensors& x) -> Tensors {
       std::vector<double> v = values(ref_var(x[0], {}, 0, true));
       return {from_values({std::sqrt(v[0])}, {1, 1}, x[0].dtype())};
     }},
    // ---- max / min ----
    {.name = "amax/last_axis",
     .op = OpId::Max,
     .inputs = {distinct({4, 6})},
     .run = RUN(amax(x[0], {-1})),
     .reference = RUN(ref_max(x[0], {-1}, false)),
     .dtypes = kAllFloats},
    {.name = "amax/multi_axes_keepdims",
     .op = OpId::Max,
     .inputs = {distinct({2, 3, 4})},
     .run = RUN(amax(x[0], {0, 2}, true)),
     .reference = RUN(ref_max(x[0], {0, 2}, true))},
    {.name = "amax/leading_axis",
     .op = OpId::Max,
     .inputs = {distinct({5, 4})},
     .run = RUN(amax(x[0], {0})),
     .reference = RUN(ref_max(x[0], {0}, false)),
     .dtypes = kAllFloats},
    {.name = "amax/all_non_contiguous",
     .op = OpId::Max,
     .inputs = {{.shape = {4, 3}, .non_contiguous = true}},
     .run = RUN(amax(x[0])),
     .reference = RUN(ref_max(x[0], {}, false))},
    {.name = "amax/int",
     .op = OpId::Max,
     .inputs = {{.shape = {3, 5}, .lo = -10, .hi = 10}},
     .run = RUN(amax(x[0], {1})),
     .reference = RUN(ref_max(x[0], {1}, false)),
     .dtypes = kInts},
    {.name = "amax/ties_split_gradient",
     .op = OpId::Max,
     .inputs = {{.make =
                     [] {
                       return tensor({{1, 3, 3}, {2, 2, 0}});
                     }}},
     .run = RUN(amax(x[0], {1})),
     .reference = RUN(ref_max(x[0], {1}, false)),
     .grad_check = false},
    {.name = "amin/axis0_keepdims",
     .op = OpId::Min,
     .inputs = {distinct({4, 3})},
     .run = RUN(amin(x[0], {0}, true)),
     .reference = RUN(ref_min(x[0], {0}, true)),
     .dtypes = kAllFloats},
    {.name = "amin/last_axis_non_contiguous",
     .op = OpId::Min,
     .inputs = {{.shape = {3, 5}, .non_contiguous = true}},
     .run = RUN(amin(x[0], {-1})),
     .reference = RUN(ref_min(x[0], {-1}, false))},
    {.name = "amin/int",
     .op = OpId::Min,
     .inputs = {{.shape = {4, 5}, .lo = -10, .hi = 10}},
     .run = RUN(amin(x[0], {0})),
     .reference = RUN(ref_min(x[0], {0}, false)),
     .dtypes = kInts},
    // ---- prod ----
    {.name = "prod/axis1",
     .op = OpId::Prod,
     .inputs = {{.shape = {3, 4}, .lo = 0.5, .hi = 1.5}},
     .run = RUN(prod(x[0], {1})),
     .reference = RUN(ref_prod(x[0], {1}, false))},
    {.name = "prod/all_keepdims",
     .op = OpId::Prod,
     .inputs = {{.shape = {2, 3}, .lo = 0.5, .hi = 1.5}},
     .run = RUN(prod(x[0], {}, true)),
     .reference = RUN(ref_prod(x[0], {}, true))},
    // Rows with no zero, one zero and two zeros: each takes a different gradient branch.
    {.name = "prod/with_zeros",
     .op = OpId::Prod,
     .inputs = {{.make =
                     [] {
                       return tensor({{0.5, 2, -1.5}, {0, 1.5, 2}, {0, 3, 0}}, kFloat64);
                     }}},
     .run = RUN(prod(x[0], {-1})),
     .reference = RUN(ref_prod(x[0], {-1}, false))},
    {.name = "prod/int",
     .op = OpId::Prod,
     .inputs = {{.shape = {3, 4}, .lo = -3, .hi = 4}},
     .run = RUN(prod(x[0], {0})),
     .reference = RUN(ref_prod(x[0], {0}, false)),
     .dtypes = {kInt32, kInt64}},
    // ---- logsumexp (composite) ----
    {.name = "logsumexp/axis1",
     .op = OpId::Max,
     .inputs = {{.shape = {3, 5}, .lo = -3, .hi = 3}},
     .run = RUN(logsumexp(x[0], {1})),
     .reference = RUN(ref_logsumexp(x[0], {1}, false))},
    {.name = "logsumexp/large_values_keepdims",
     .op = OpId::Max,
     .inputs = {{.shape = {2, 4}, .lo = 500, .hi = 900}},
     .run = RUN(logsumexp(x[0], {0, 1}, true)),
     .reference = RUN(ref_logsumexp(x[0], {0, 1}, true))},
    // ---- argmax / argmin ----
    {.name = "argmax/last_axis",
     .op = OpId::Argmax,
     .inputs = {{.shape = {4, 7}}},
     .run = RUN(argmax(x[0], -1)),
     .reference = RUN(ref_arg(x[0], -1, false, true)),
     .dtypes = kAllFloats},
    {.name = "argmax/axis0_keepdims_non_contiguous",
     .op = OpId::Argmax,
     .inputs = {{.shape = {3, 5}, .non_contiguous = true}},
     .run = RUN(argmax(x[0], 0, true)),
     .reference = RUN(ref_arg(x[0], 0, true, true))},
    {.name = "argmax/int_ties_first",
     .op = OpId::Argmax,
     .inputs = {{.shape = {4, 6}, .lo = -3, .hi = 3}},
     .run = RUN(argmax(x[0], 1)),
     .reference = RUN(ref_arg(x[0], 1, false, true)),
     .dtypes = kInts},
    {.name = "argmin/middle_axis",
     .op = OpId::Argmin,
     .inputs = {{.shape = {2, 5, 3}}},
     .run = RUN(argmin(x[0], 1)),
     .reference = RUN(ref_arg(x[0], 1, false, false))},
    {.name = "argmin/int",
     .op = OpId::Argmin,
     .inputs = {{.shape = {4, 6}, .lo = -3, .hi = 3}},
     .run = RUN(argmin(x[0], -1, true)),
     .reference = RUN(ref_arg(x[0], -1, true, false)),
     .dtypes = kInts},
});

// ---- all_finite (mixed precision's overflow check) ----
// Inputs of several shapes (one strided, one large enough for the SIMD loop and the thread blocks);
// `bad` puts an inf or nan at a given element of the last input.
Tensor with_value_at(const Tensor& t, int64_t i, double v) {
  std::vector<double> x = values(t);
  x[size_t(i)] = v;
  return from_values(x, t.shape(), t.dtype());
}
Tensors ref_all_finite(const Tensors& t) {
  bool ok = true;
  for (const Tensor& x : t)
    for (double v : values(x)) ok = ok && std::isfinite(v);
  return {from_values({ok ? 1.0 : 0.0}, {}, kBool)};
}
Tensors run_all_finite(const Tensors& t) { return {amp::all_finite(t)}; }
InputSpec big_with(int64_t at, double v) {
  return {.make = [at, v] { return with_value_at(uniform({70001}, -1, 1), at, v); }};
}

SPORE_OP_CASES({
    {.name = "all_finite/finite",
     .op = OpId::AllFinite,
     .inputs = {{.shape = {3, 5}}, {.shape = {4, 6}, .non_contiguous = true}, {.shape = {70001}}},
     .run = run_all_finite,
     .reference = ref_all_finite,
     .dtypes = kAllFloats},
    {.name = "all_finite/inf_in_tail",
     .op = OpId::AllFinite,
     .inputs = {{.shape = {3, 5}}, big_with(70000, INFINITY)},
     .run = run_all_finite,
     .reference = ref_all_finite,
     .dtypes = kAllFloats},
    {.name = "all_finite/neg_inf_in_body",
     .op = OpId::AllFinite,
     .inputs = {big_with(40000, -INFINITY), {.shape = {2, 2}}},
     .run = run_all_finite,
     .reference = ref_all_finite,
     .dtypes = kAllFloats},
    {.name = "all_finite/nan_first",
     .op = OpId::AllFinite,
     .inputs = {{.shape = {3}}, big_with(0, NAN)},
     .run = run_all_finite,
     .reference = ref_all_finite,
     .dtypes = kAllFloats},
    {.name = "all_finite/nan_in_strided",
     .op = OpId::AllFinite,
     .inputs = {{.make =
                     [] {
                       return with_value_at(uniform({5, 3}, -1, 1), 7, NAN).transpose(0, 1);
                     }}},
     .run = run_all_finite,
     .reference = ref_all_finite,
     .dtypes = kAllFloats},
    {.name = "all_finite/ints_and_empty",
     .op = OpId::AllFinite,
     .inputs = {{.shape = {4}, .lo = -3, .hi = 3}, {.shape = {0, 3}}},
     .run = run_all_finite,
     .reference = ref_all_finite,
     .dtypes = kInts},
});

}  // namespace
}  // namespace spore::test
