// The importer's less common ONNX ops, each as calls to Spore's ops (spore/ops.h), like
// ops_onnx.cpp: the losses (SoftmaxCrossEntropyLoss, NegativeLogLikelihoodLoss), Resize in every
// mode, the indexing ops (Trilu, OneHot, GatherND, the Scatters, Compress, ...), the data-dependent
// ones that run op by op (NonZero, Unique, NonMaxSuppression) and elementwise ops that are exact
// compositions (Mod, BitShift, Sinh, Shrink, ...). Parameters that shape the result (Resize's
// scales, a window's size) must be constants; index inputs may be computed from the data unless
// a handler says otherwise.
#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "onnx/import_internal.h"
#include "onnx/onnx_util.h"
#include "spore/ops.h"

namespace spore::onnx_detail {

bool needs_host_values(const std::string& op_type) {
  return op_type == "NonZero" || op_type == "Unique" || op_type == "NonMaxSuppression" ||
         op_type == "TfIdfVectorizer" || is_random_op(op_type);
}

bool is_random_op(const std::string& op_type) {
  return op_type == "Bernoulli" || op_type == "RandomUniform" || op_type == "RandomUniformLike" ||
         op_type == "RandomNormal" || op_type == "RandomNormalLike";
}

bool is_parameter_input(const std::string& op_type, int index) {
  return (op_type == "Resize" && (index == 1 || index == 2)) ||
         ((op_type == "Upsample" || op_type == "OneHot" || op_type == "Dropout") && index == 1) ||
         (op_type == "Range" && index <= 2) || op_type == "MelWeightMatrix";
}

namespace {

using V = std::vector<Tensor>;
using A = ::onnx::AttributeProto;

Tensor i64(const std::vector<int64_t>& v, Shape s = {}) {
  if (s.empty()) s = {int64_t(v.size())};
  return from_buffer(v.data(), s, kInt64);
}

// A concrete input's values; the op cannot take them from the model's data in Graph mode.
std::vector<double> const_values(const Ctx& c, size_t k, const char* what) {
  if (c.x(k).is_symbolic())
    c.unsupported(std::string(what) +
                  " computed from the model's input data (Spore needs a constant)");
  return values_of(c.x(k));
}

void need_rank(const Ctx& c, const Tensor& x, int64_t rank, const char* op) {
  SPORE_CHECK_KIND(ErrorKind::IOError, x.dim() == rank, c.where, op, " needs a rank-", rank,
                   " input, got ", shape_str(x.shape()));
}

// x with `axis` moved to the end (and back: move_axis(y, -1 -> axis) by the inverse).
Tensor move_axis(const Tensor& x, int64_t from, int64_t to) {
  std::vector<int64_t> perm;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != from) perm.push_back(d);
  perm.insert(perm.begin() + to, from);
  return x.permute(perm);
}

// ---- losses ----

// NegativeLogLikelihoodLoss on log-probabilities lp (N, C, d...) and targets (N, d...).
Tensor nll(const Ctx& c, const Tensor& lp, const Tensor& target0, const Tensor* weight) {
  const std::string red = c.s("reduction", "mean");
  SPORE_CHECK_KIND(ErrorKind::IOError, red == "none" || red == "sum" || red == "mean", c.where,
                   "attribute reduction: \"", red, "\" is not none, sum or mean");
  const Tensor target = target0.to(kInt64);
  Tensor keep;  // where the target is not ignore_index
  Tensor t = target;
  if (c.has("ignore_index")) {
    keep = not_equal(target, full({}, double(c.i("ignore_index", 0)), kInt64));
    t = where(keep, target, full({}, 0, kInt64));
  }
  const Tensor picked = gather(lp, 1, t.unsqueeze(1)).squeeze(1);
  Tensor w = weight ? index_select(*weight, 0, t.reshape({-1})).reshape(t.shape())
                    : ones(t.shape(), lp.dtype());
  if (keep.defined()) w = where(keep, w, scalar_like(0, w));
  const Tensor loss = neg(mul(picked, w));
  if (red == "none") return loss;
  if (red == "sum") return sum(loss);
  return div(sum(loss), sum(w));
}

V nll_op(Ctx& c) {
  const Tensor w = c.has_in(2) ? c.x(2) : Tensor();
  return {nll(c, c.x(0), c.x(1), w.defined() ? &w : nullptr)};
}

V softmax_cross_entropy(Ctx& c) {
  const Tensor lp = log_softmax(c.x(0), 1);
  const Tensor w = c.has_in(2) ? c.x(2) : Tensor();
  return {nll(c, lp, c.x(1), w.defined() ? &w : nullptr), lp};
}

// ---- Resize / Upsample ----

// ONNX's reference resize, one axis at a time (it is separable): the weights of the input
// positions each output position reads, as a dense (out, in) matrix, and which output positions
// fall outside the input (tf_crop_and_resize's extrapolation).
struct AxisResize {
  std::vector<double> w;      // out * in
  std::vector<uint8_t> in;    // out: 1 where the position is inside
  std::vector<int64_t> pick;  // out: the one input read (nearest mode)
};

AxisResize resize_axis(int64_t in_len, int64_t out_len, double scale, const std::string& mode,
                       const std::string& ctm, const std::string& nearest, double cubic_a,
                       bool exclude_outside, double roi_start, double roi_end) {
  AxisResize r;
  r.w.assign(size_t(out_len * in_len), 0.0);
  r.in.assign(size_t(out_len), 1);
  r.pick.assign(size_t(out_len), 0);
  const double out_w =
      scale * double(in_len);  // the reference's "output_width" (may be fractional)
  const int n = mode == "cubic" ? 4 : 2;
  for (int64_t o = 0; o < out_len; ++o) {
    const double x = double(o);
    double xo;
    if (ctm == "align_corners")
      xo = out_w == 1 ? 0 : x * double(in_len - 1) / (out_w - 1);
    else if (ctm == "asymmetric")
      xo = x / scale;
    else if (ctm == "tf_crop_and_resize") {
      xo = out_w == 1 ? (roi_end - roi_start) * double(in_len - 1) / 2
                      : x * (roi_end - roi_start) * double(in_len - 1) / (out_w - 1);
      xo += roi_start * double(in_len - 1);
      if (xo < 0 || xo > double(in_len - 1)) {
        r.in[size_t(o)] = 0;
        continue;
      }
    } else if (ctm == "pytorch_half_pixel")
      xo = out_w != 1 ? (x + 0.5) / scale - 0.5 : -0.5;
    else if (ctm == "half_pixel")
      xo = (x + 0.5) / scale - 0.5;
    else  // tf_half_pixel_for_nn
      xo = (x + 0.5) / scale;
    const double fl = std::floor(xo);
    const bool integer = xo == fl;
    const double ratio = integer ? 1.0 : xo - fl;
    std::vector<double> coef;
    if (mode == "nearest") {
      bool hi;
      if (integer || nearest == "ceil")
        hi = true;
      else if (nearest == "round_prefer_floor")
        hi = ratio > 0.5;
      else if (nearest == "round_prefer_ceil")
        hi = ratio >= 0.5;
      else  // floor
        hi = false;
      coef = {hi ? 0.0 : 1.0, hi ? 1.0 : 0.0};
    } else if (mode == "linear") {
      coef = {1 - ratio, ratio};
    } else {
      const double A = cubic_a, s = ratio + 1, t = 1 - ratio, u = t + 1;
      coef = {((A * s - 5 * A) * s + 8 * A) * s - 4 * A,
              ((A + 2) * ratio - (A + 3)) * ratio * ratio + 1, ((A + 2) * t - (A + 3)) * t * t + 1,
              ((A * u - 5 * A) * u + 8 * A) * u - 4 * A};
    }
    // The n input positions nearest xo (ties to the smaller), in the input padded by
    // ceil(n / 2) copies of its edge values on each side, as the reference does.
    const int64_t pad = (n + 1) / 2, lim = in_len + 2 * pad;
    const double xp = xo + double(pad);
    std::vector<int64_t> cand;
    for (int64_t i = int64_t(std::floor(xp)) - n; i <= int64_t(std::floor(xp)) + n + 1; ++i)
      if (i >= 0 && i < lim) cand.push_back(i);
    std::sort(cand.begin(), cand.end(), [&](int64_t a, int64_t b) {
      const double da = std::abs(xp - double(a)), db = std::abs(xp - double(b));
      return da != db ? da < db : a < b;
    });
    cand.resize(size_t(n));
    std::sort(cand.begin(), cand.end());
    if (exclude_outside) {
      double total = 0;
      for (int k = 0; k < n; ++k) {
        const int64_t idx = cand[size_t(k)] - pad;
        if (idx < 0 || idx >= in_len) coef[size_t(k)] = 0;
        total += coef[size_t(k)];
      }
      for (auto& v : coef) v /= total;
    }
    for (int k = 0; k < n; ++k) {
      const int64_t idx = std::clamp<int64_t>(cand[size_t(k)] - pad, 0, in_len - 1);
      r.w[size_t(o * in_len + idx)] += coef[size_t(k)];
      if (coef[size_t(k)] == 1.0) r.pick[size_t(o)] = idx;
    }
  }
  return r;
}

V resize_op(Ctx& c) {
  const Tensor& x = c.x(0);
  const bool upsample = c.node.op_type() == "Upsample";
  const std::string mode = c.s("mode", "nearest");
  if (mode != "nearest" && mode != "linear" && mode != "cubic" && mode != "bilinear")
    c.unsupported("mode \"" + mode + "\"");
  const std::string m = mode == "bilinear" ? "linear" : mode;
  const bool v11 = !upsample && c.opset >= 11;
  const std::string ctm = v11 ? c.s("coordinate_transformation_mode", "half_pixel") : "asymmetric";
  static const std::set<std::string> ctms{"half_pixel",           "pytorch_half_pixel",
                                          "align_corners",        "asymmetric",
                                          "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  if (!ctms.count(ctm)) c.unsupported("coordinate_transformation_mode \"" + ctm + "\"");
  // Before opset 11 nearest reads floor(x / scale).
  const std::string nearest = v11 ? c.s("nearest_mode", "round_prefer_floor") : "floor";
  if (c.i("antialias", 0)) c.unsupported("antialias = 1");
  if (c.has("axes")) c.unsupported("the axes attribute");
  if (c.s("keep_aspect_ratio_policy", "stretch") != "stretch")
    c.unsupported("keep_aspect_ratio_policy \"" + c.s("keep_aspect_ratio_policy", "") + "\"");
  const int64_t r = x.dim();
  std::vector<double> scales;
  std::vector<int64_t> sizes;
  if (v11 && c.has_in(3) && c.x(3).numel() > 0) {
    for (double v : const_values(c, 3, "sizes")) sizes.push_back(int64_t(v));
    SPORE_CHECK_KIND(ErrorKind::IOError, int64_t(sizes.size()) == r, c.where, "sizes has ",
                     sizes.size(), " values for a rank-", r, " input");
    for (int64_t d = 0; d < r; ++d)
      scales.push_back(double(sizes[size_t(d)]) / double(x.shape()[size_t(d)]));
  } else {
    if (upsample && c.opset < 9) {
      const A* a = c.attr("scales");
      SPORE_CHECK_KIND(ErrorKind::IOError, a, c.where, "attribute scales is missing");
      scales.assign(a->floats().begin(), a->floats().end());
    } else {
      scales = const_values(c, v11 ? 2 : 1, "scales");
    }
    SPORE_CHECK_KIND(ErrorKind::IOError, int64_t(scales.size()) == r, c.where, "scales has ",
                     scales.size(), " values for a rank-", r, " input");
    for (int64_t d = 0; d < r; ++d)
      sizes.push_back(int64_t(std::floor(double(x.shape()[size_t(d)]) * scales[size_t(d)])));
  }
  std::vector<double> roi;
  if (ctm == "tf_crop_and_resize") {
    roi = const_values(c, 1, "roi");
    SPORE_CHECK_KIND(ErrorKind::IOError, int64_t(roi.size()) == 2 * r, c.where, "roi has ",
                     roi.size(), " values for a rank-", r, " input");
  }
  const bool interp = m != "nearest";
  if (interp && !is_floating(x.dtype()))
    c.unsupported("mode \"" + m + "\" on " + dtype_name(x.dtype()) + " data");
  const DType cdt = x.dtype() == kFloat64 ? kFloat64 : kFloat32;
  std::vector<AxisResize> axes;
  for (int64_t d = 0; d < r; ++d) {
    SPORE_CHECK_KIND(ErrorKind::IOError, sizes[size_t(d)] >= 0, c.where, "a negative output size");
    axes.push_back(resize_axis(x.shape()[size_t(d)], sizes[size_t(d)], scales[size_t(d)], m, ctm,
                               nearest, c.f("cubic_coeff_a", -0.75), c.i("exclude_outside", 0) != 0,
                               roi.empty() ? 0 : roi[size_t(d)],
                               roi.empty() ? 1 : roi[size_t(d + r)]));
  }
  auto identity = [&](int64_t d) {
    const int64_t n = x.shape()[size_t(d)];
    bool id = n == sizes[size_t(d)];
    for (int64_t o = 0; id && o < n; ++o)
      id = axes[size_t(d)].in[size_t(o)] && axes[size_t(d)].w[size_t(o * n + o)] == 1.0;
    return id;
  };
  // Nearest upsampling of NCHW by whole factors that reads input o / k (YOLOv5's and U-Nets'
  // Upsample) is Spore's upsample_nearest2d, which has its own kernel.
  auto whole_factor = [&](int64_t d) {
    const int64_t n = x.shape()[size_t(d)], out = sizes[size_t(d)];
    if (n == 0 || out % n != 0 || !roi.empty()) return false;
    for (int64_t o = 0; o < out; ++o)
      if (axes[size_t(d)].pick[size_t(o)] != o / (out / n)) return false;
    return true;
  };
  if (!interp && r == 4 && is_floating(x.dtype()) && identity(0) && identity(1) &&
      whole_factor(2) && whole_factor(3))
    return {upsample_nearest2d(x, {sizes[2], sizes[3]})};
  Tensor y = interp ? x.to(cdt) : x;
  Tensor inside;  // tf_crop_and_resize: where every axis's position is inside the input
  for (int64_t d = 0; d < r; ++d) {
    const int64_t in_len = x.shape()[size_t(d)], out_len = sizes[size_t(d)];
    const AxisResize& ar = axes[size_t(d)];
    if (!identity(d)) {
      if (!interp) {
        y = index_select(y, d, i64(ar.pick));
      } else {
        const Tensor wt = from_buffer(ar.w.data(), {out_len, in_len}, kFloat64).to(cdt).t();
        y = move_axis(matmul(move_axis(y, d, r - 1), wt), r - 1, d);
      }
    }
    if (!roi.empty()) {
      std::vector<uint8_t> mask(ar.in);
      Shape s(size_t(r), 1);
      s[size_t(d)] = out_len;
      const Tensor md = from_buffer(mask.data(), s, kBool);
      inside = inside.defined() ? logical_and(inside, md) : md;
    }
  }
  if (inside.defined()) y = where(inside, y, full({}, c.f("extrapolation_value", 0.0), y.dtype()));
  return {y.to(x.dtype())};
}

// ---- indexing ----

V trilu(Ctx& c) {
  const Tensor& x = c.x(0);
  SPORE_CHECK_KIND(ErrorKind::IOError, x.dim() >= 2, c.where, "Trilu needs rank >= 2, got ",
                   x.dim());
  const int64_t k = c.has_in(1) ? c.const_ints(1, "k").at(0) : 0;
  const bool upper = c.i("upper", 1) != 0;
  const int64_t n = x.shape()[size_t(x.dim() - 2)], m = x.shape()[size_t(x.dim() - 1)];
  std::vector<uint8_t> keep(size_t(n * m));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) keep[size_t(i * m + j)] = upper ? j - i >= k : j - i <= k;
  return {where(from_buffer(keep.data(), {n, m}, kBool), x, scalar_like(0, x))};
}

// Hardmax: 1 at the first maximum along the axis (before opset 13: of the input flattened to 2-D
// at the axis), 0 elsewhere.
V hardmax(Ctx& c) {
  const Tensor& x0 = c.x(0);
  Tensor x = x0;
  int64_t ax;
  if (c.opset >= 13) {
    ax = norm_axis(c.i("axis", -1), x.dim(), c);
  } else {
    const int64_t a = norm_axis(c.i("axis", 1), x.dim(), c);
    int64_t outer = 1;
    for (int64_t d = 0; d < a; ++d) outer *= x.shape()[size_t(d)];
    x = x.reshape({outer, -1});
    ax = 1;
  }
  const int64_t n = x.shape()[size_t(ax)];
  const Tensor i = argmax(x, ax, true);
  Shape s(size_t(x.dim()), 1);
  s[size_t(ax)] = n;
  const Tensor pos = arange(0, double(n), 1, kInt64).reshape(s);
  return {where(equal(i, pos), scalar_like(1, x), scalar_like(0, x)).reshape(x0.shape())};
}

V one_hot_op(Ctx& c) {
  const Tensor& idx0 = c.x(0);
  const int64_t depth = int64_t(c.const_scalar(1, "depth"));
  const Tensor& vals = c.x(2);
  SPORE_CHECK_KIND(ErrorKind::IOError, vals.numel() == 2, c.where,
                   "values must hold [off, on], has ", vals.numel(), " elements");
  const int64_t ax = norm_axis(c.i("axis", -1), idx0.dim() + 1, c);
  Tensor idx = is_floating(idx0.dtype()) ? idx0.to(kFloat64) : idx0.to(kInt64);
  idx = idx.to(kInt64);  // ONNX: a float index is cast to an integer first
  idx = where(less(idx, full({}, 0, kInt64)), add(idx, full({}, double(depth), kInt64)), idx);
  Shape s(size_t(idx0.dim() + 1), 1);
  s[size_t(ax)] = depth;
  const Tensor hit = equal(idx.unsqueeze(ax), arange(0, double(depth), 1, kInt64).reshape(s));
  const Tensor v = vals.reshape({2});
  return {where(hit, v.slice(0, 1, 2).reshape({}), v.slice(0, 0, 1).reshape({}))};
}

V eye_like(Ctx& c) {
  const Tensor& x = c.x(0);
  SPORE_CHECK_KIND(ErrorKind::IOError, x.dim() == 2, c.where,
                   "EyeLike needs a 2-D input, got rank ", x.dim());
  DType dt = x.dtype();
  if (c.has("dtype") && !dtype_from_onnx(int(c.i("dtype", 1)), &dt))
    c.unsupported("dtype = " + onnx_dtype_name(int(c.i("dtype", 1))));
  const int64_t k = c.i("k", 0), n = x.shape()[0], m = x.shape()[1];
  std::vector<double> v(size_t(n * m), 0.0);
  for (int64_t i = 0; i < n; ++i)
    if (i + k >= 0 && i + k < m) v[size_t(i * m + i + k)] = 1;
  return {from_buffer(v.data(), {n, m}, kFloat64).to(dt)};
}

V depth_to_space(Ctx& c) {
  const Tensor& x = c.x(0);
  SPORE_CHECK_KIND(ErrorKind::IOError, x.dim() == 4, c.where, "DepthToSpace needs NCHW, got rank ",
                   x.dim());
  const int64_t b = c.i("blocksize", 0), N = x.shape()[0], C = x.shape()[1], H = x.shape()[2],
                W = x.shape()[3];
  SPORE_CHECK_KIND(ErrorKind::IOError, b > 0 && C % (b * b) == 0, c.where, "blocksize ", b,
                   " does not divide the ", C, " channels into blocksize^2 groups");
  if (c.s("mode", "DCR") == "DCR")
    return {x.reshape({N, b, b, C / (b * b), H, W})
                .permute({0, 3, 4, 1, 5, 2})
                .contiguous()
                .reshape({N, C / (b * b), H * b, W * b})};
  return {x.reshape({N, C / (b * b), b, b, H, W})
              .permute({0, 1, 4, 2, 5, 3})
              .contiguous()
              .reshape({N, C / (b * b), H * b, W * b})};
}

V space_to_depth(Ctx& c) {
  const Tensor& x = c.x(0);
  SPORE_CHECK_KIND(ErrorKind::IOError, x.dim() == 4, c.where, "SpaceToDepth needs NCHW, got rank ",
                   x.dim());
  const int64_t b = c.i("blocksize", 0), N = x.shape()[0], C = x.shape()[1], H = x.shape()[2],
                W = x.shape()[3];
  SPORE_CHECK_KIND(ErrorKind::IOError, b > 0 && H % b == 0 && W % b == 0, c.where, "blocksize ", b,
                   " does not divide the spatial size ", H, "x", W);
  return {x.reshape({N, C, H / b, b, W / b, b})
              .permute({0, 3, 5, 1, 2, 4})
              .contiguous()
              .reshape({N, C * b * b, H / b, W / b})};
}

// Row-major flat offsets into the first k dims of `dims` for index tuples idx (..., k), with
// negative indices counted from the end (in-graph, so the indices may come from the data).
Tensor flat_offsets(const Tensor& idx0, const Shape& dims, int64_t k) {
  std::optional<NoTrace> guard;  // constant indices give constant offsets
  if (!idx0.is_symbolic()) guard.emplace();
  const Tensor idx = idx0.to(kInt64);
  Tensor off = zeros(Shape(idx.shape().begin(), idx.shape().end() - 1), kInt64);
  for (int64_t j = 0; j < k; ++j) {
    const int64_t n = dims[size_t(j)];
    Tensor i = idx.slice(-1, j, j + 1).squeeze(-1);
    i = where(less(i, full({}, 0, kInt64)), add(i, full({}, double(n), kInt64)), i);
    off = add(mul(off, full({}, double(n), kInt64)), i);
  }
  return off;
}

V gather_nd(Ctx& c) {
  const Tensor& x = c.x(0);
  const Tensor& idx = c.x(1);
  const int64_t b = c.i("batch_dims", 0), k = idx.shape().back();
  SPORE_CHECK_KIND(ErrorKind::IOError, b + k <= x.dim(), c.where, "indices tuples of length ", k,
                   " after ", b, " batch dims do not fit a rank-", x.dim(), " input");
  int64_t nb = 1;
  for (int64_t d = 0; d < b; ++d) nb *= x.shape()[size_t(d)];
  const Shape inner(x.shape().begin() + b, x.shape().end());
  Shape rest(inner.begin() + k, inner.end());
  int64_t block = 1, slots = 1;
  for (int64_t v : rest) block *= v;
  for (int64_t d = 0; d < k; ++d) slots *= inner[size_t(d)];
  // data as (batch * slots, block); indices as (batch, m, k) -> rows batch * slots + offset.
  const Tensor data = x.reshape({nb * slots, block});
  const Tensor ix = idx.reshape({nb, -1, k});
  Tensor rows = flat_offsets(ix, inner, k);  // (nb, m)
  rows = add(rows, mul(arange(0, double(nb), 1, kInt64).reshape({nb, 1}),
                       full({}, double(slots), kInt64)));
  Shape out(idx.shape().begin(), idx.shape().end() - 1);
  out.insert(out.end(), rest.begin(), rest.end());
  return {index_select(data, 0, rows.reshape({-1})).reshape(out)};
}

// Scatter with a reduction: `none` replaces (where no index repeats), `add` accumulates; `mul`,
// `max` and `min` apply where the indices are constants without repeats. x2 / idx2 / upd2 are 2-D
// (rows, cols) with scatter along axis `ax`.
Tensor scatter_reduce(const Ctx& c, const Tensor& x, int64_t ax, const Tensor& idx,
                      const Tensor& upd, const std::string& red) {
  if (red == "add") return scatter_add(x, ax, idx, upd);
  if (red != "none" && red != "mul" && red != "max" && red != "min")
    c.unsupported("reduction \"" + red + "\"");
  // Replace-like reductions: each target element receives at most one update.
  if (!idx.is_symbolic()) {
    // The indices are known: check that no element is written twice.
    std::vector<double> cv;
    {
      NoTrace guard;
      cv = values_of(scatter_add(zeros(x.shape(), kInt64), ax, idx, ones(idx.shape(), kInt64)));
    }
    if (std::any_of(cv.begin(), cv.end(), [](double v) { return v > 1; }))
      c.unsupported("reduction \"" + red + "\" with repeated indices");
  } else if (red != "none") {
    c.unsupported("reduction \"" + red + "\" with indices computed from the data");
  }
  const DType acc = is_floating(x.dtype()) ? x.dtype() : kFloat64;
  const Tensor hit =
      greater(scatter_add(zeros(x.shape(), kInt64), ax, idx, ones(idx.shape(), kInt64)),
              full({}, 0, kInt64));
  const Tensor placed = scatter_add(zeros(x.shape(), acc), ax, idx, upd.to(acc)).to(x.dtype());
  Tensor v = placed;
  if (red == "mul") v = mul(x, placed);
  if (red == "max") v = maximum(x, placed);
  if (red == "min") v = minimum(x, placed);
  return where(hit, v, x);
}

V scatter_elements(Ctx& c) {
  const Tensor& x = c.x(0);
  const int64_t ax = norm_axis(c.i("axis", 0), x.dim(), c);
  std::optional<NoTrace> guard;  // constant indices stay constant
  if (!c.x(1).is_symbolic()) guard.emplace();
  Tensor idx = c.x(1).to(kInt64);
  const int64_t n = x.shape()[size_t(ax)];
  idx = where(less(idx, full({}, 0, kInt64)), add(idx, full({}, double(n), kInt64)), idx);
  guard.reset();
  return {scatter_reduce(c, x, ax, idx, c.x(2), c.s("reduction", "none"))};
}

V scatter_nd(Ctx& c) {
  const Tensor& x = c.x(0);
  const Tensor& idx = c.x(1);
  const int64_t k = idx.shape().back();
  SPORE_CHECK_KIND(ErrorKind::IOError, k <= x.dim(), c.where, "index tuples of length ", k,
                   " for a rank-", x.dim(), " input");
  int64_t slots = 1, block = 1;
  for (int64_t d = 0; d < k; ++d) slots *= x.shape()[size_t(d)];
  for (int64_t d = k; d < x.dim(); ++d) block *= x.shape()[size_t(d)];
  std::optional<NoTrace> guard;  // constant indices give a constant scatter index
  if (!idx.is_symbolic()) guard.emplace();
  const Tensor rows = flat_offsets(idx, x.shape(), k).reshape({-1, 1});
  const int64_t m = rows.shape()[0];
  const Tensor idx2 = rows.expand({m, block}).contiguous();
  guard.reset();
  const std::string red = c.s("reduction", "none");
  const Tensor upd = c.x(2).reshape({m, block});
  Tensor y = x.reshape({slots, block});
  if (!idx.is_symbolic() && (red == "mul" || red == "max" || red == "min")) {
    // Constant indices that repeat: applied in rounds, round r taking each target's r-th update,
    // so no round writes an element twice (the reductions are associative).
    std::vector<double> target;
    {
      NoTrace guard;
      target = values_of(rows);
    }
    std::map<double, int64_t> seen;
    std::vector<std::vector<int64_t>> rounds;
    for (int64_t i = 0; i < m; ++i) {
      const int64_t r = seen[target[size_t(i)]]++;
      if (r >= int64_t(rounds.size())) rounds.emplace_back();
      rounds[size_t(r)].push_back(i);
    }
    for (const auto& rr : rounds) {
      const Tensor sel = i64(rr);
      Tensor ir;
      {
        NoTrace guard;
        ir = index_select(idx2, 0, sel);
      }
      y = scatter_reduce(c, y, 0, ir, index_select(upd, 0, sel), red);
    }
    return {y.reshape(x.shape())};
  }
  return {scatter_reduce(c, y, 0, idx2, upd, red).reshape(x.shape())};
}

V compress(Ctx& c) {
  const Tensor& x = c.x(0);
  const std::vector<double> cond = const_values(c, 1, "condition");
  Tensor src = x;
  int64_t ax = 0;
  if (c.has("axis"))
    ax = norm_axis(c.i("axis", 0), x.dim(), c);
  else
    src = x.reshape({-1});
  std::vector<int64_t> keep;
  const int64_t n = src.shape()[size_t(ax)];
  for (int64_t i = 0; i < std::min<int64_t>(n, int64_t(cond.size())); ++i)
    if (cond[size_t(i)] != 0) keep.push_back(i);
  return {index_select(src, ax, i64(keep))};
}

V reverse_sequence(Ctx& c) {
  const Tensor& x = c.x(0);
  const std::vector<double> lens = const_values(c, 1, "sequence_lens");
  const int64_t bax = c.i("batch_axis", 1), tax = c.i("time_axis", 0);
  SPORE_CHECK_KIND(ErrorKind::IOError, (bax == 0 && tax == 1) || (bax == 1 && tax == 0), c.where,
                   "batch_axis and time_axis must be 0 and 1 (either way)");
  const int64_t B = x.shape()[size_t(bax)], T = x.shape()[size_t(tax)];
  SPORE_CHECK_KIND(ErrorKind::IOError, int64_t(lens.size()) == B, c.where, "sequence_lens has ",
                   lens.size(), " values for a batch of ", B);
  // idx[t][b] (time-major): the source time step of element (t, b).
  std::vector<int64_t> idx(size_t(T * B));
  for (int64_t b = 0; b < B; ++b) {
    const int64_t L = std::clamp<int64_t>(int64_t(lens[size_t(b)]), 0, T);
    for (int64_t t = 0; t < T; ++t) idx[size_t(t * B + b)] = t < L ? L - 1 - t : t;
  }
  Shape s(size_t(x.dim()), 1);
  s[size_t(tax)] = T, s[size_t(bax)] = B;
  Tensor it = i64(idx, {T, B});
  if (tax == 1) it = it.t().contiguous();
  it = it.reshape(s).expand(x.shape()).contiguous();
  return {gather(x, tax, it)};
}

// ---- elementwise ----

V mod_op(Ctx& c) {
  const Tensor &a = c.x(0), &b = c.x(1);
  const DType out = promote_types(a.dtype(), b.dtype());
  const bool fmod = c.i("fmod", 0) != 0;
  if (is_floating(out)) {
    SPORE_CHECK_KIND(ErrorKind::IOError, fmod, c.where,
                     "fmod must be 1 for floating-point inputs (ONNX's rule)");
  }
  // In float64: exact for integers below 2^52, and C's fmod for floats of the input precision.
  const Tensor x = a.to(kFloat64), y = b.to(kFloat64);
  const Tensor q = div(x, y);
  const Tensor qi = fmod ? mul(sign(q), floor(abs(q))) : floor(q);  // trunc or floor
  Tensor r = sub(x, mul(qi, y));
  if (!is_floating(out)) {
    // ONNX's integer Mod by 0 is undefined; Spore gives 0 rather than a NaN cast to an integer.
    r = where(equal(y, full({}, 0.0, kFloat64)), full({}, 0.0, kFloat64), r);
  }
  return {r.to(out)};
}

V bit_shift(Ctx& c) {
  const Tensor &a = c.x(0), &b = c.x(1);
  const std::string dir = c.s("direction", "");
  SPORE_CHECK_KIND(ErrorKind::IOError, dir == "LEFT" || dir == "RIGHT", c.where,
                   "attribute direction: \"", dir, "\" is not LEFT or RIGHT");
  if (a.dtype() != kUInt8) c.unsupported(std::string(dtype_name(a.dtype())) + " data");
  // uint8 in float64: x * 2^y modulo 256 (bits shifted out are dropped), or floor(x / 2^y).
  const Tensor x = a.to(kFloat64),
               p = pow(full({}, 2.0, kFloat64), minimum(b.to(kFloat64), full({}, 8.0, kFloat64)));
  Tensor r;
  if (dir == "LEFT") {
    const Tensor v = mul(x, p), m = full({}, 256.0, kFloat64);
    r = sub(v, mul(floor(div(v, m)), m));
  } else {
    r = floor(div(x, p));
  }
  return {r.to(kUInt8)};
}

V shrink(Ctx& c) {
  const Tensor& x = c.x(0);
  const double l = c.f("lambd", 0.5), bias = c.f("bias", 0.0);
  const Tensor xf = x.to(kFloat64);
  const Tensor lo = full({}, -l, kFloat64), hi = full({}, l, kFloat64),
               bs = full({}, bias, kFloat64);
  const Tensor y = where(less(xf, lo), add(xf, bs),
                         where(greater(xf, hi), sub(xf, bs), full({}, 0.0, kFloat64)));
  return {y.to(x.dtype())};
}

Tensor half_const(const Tensor& x, double v) { return scalar_like(v, x); }

V sinh_op(Ctx& c) {
  const Tensor& x = c.x(0);
  return {mul(half_const(x, 0.5), sub(exp(x), exp(neg(x))))};
}
V cosh_op(Ctx& c) {
  const Tensor& x = c.x(0);
  return {mul(half_const(x, 0.5), add(exp(x), exp(neg(x))))};
}
V asinh_op(Ctx& c) {  // sign(x) log(|x| + sqrt(x^2 + 1)): no cancellation for negative x
  const Tensor& x = c.x(0);
  const Tensor ax = abs(x);
  return {mul(sign(x), log(add(ax, sqrt(add(mul(ax, ax), half_const(x, 1))))))};
}
V acosh_op(Ctx& c) {
  const Tensor& x = c.x(0);
  return {log(add(x, sqrt(sub(mul(x, x), half_const(x, 1)))))};
}
V atanh_op(Ctx& c) {
  const Tensor& x = c.x(0);
  const Tensor one = half_const(x, 1);
  return {mul(half_const(x, 0.5), log(div(add(one, x), sub(one, x))))};
}

// ---- windows ----

V window(Ctx& c, int kind) {  // 0 Hann, 1 Hamming, 2 Blackman
  const int64_t n = int64_t(c.const_scalar(0, "size"));
  SPORE_CHECK_KIND(ErrorKind::IOError, n >= 0, c.where, "size ", n, " is negative");
  const bool periodic = c.i("periodic", 1) != 0;
  DType dt = kFloat32;
  if (!dtype_from_onnx(int(c.i("output_datatype", 1)), &dt))
    c.unsupported("output_datatype " + onnx_dtype_name(int(c.i("output_datatype", 1))));
  const double d = periodic ? double(n) : double(n - 1);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double a = 2 * M_PI * double(i) / d;
    if (kind == 0) v[size_t(i)] = 0.5 - 0.5 * std::cos(a);
    if (kind == 1) v[size_t(i)] = 25.0 / 46 - (1 - 25.0 / 46) * std::cos(a);
    if (kind == 2) v[size_t(i)] = 0.42 - 0.5 * std::cos(a) + 0.08 * std::cos(2 * a);
  }
  return {from_buffer(v.data(), {n}, kFloat64).to(dt)};
}

// ---- normalisation ----

V mean_variance_norm(Ctx& c) {
  const Tensor& x = c.x(0);
  std::vector<int64_t> axes = c.ints("axes", {0, 2, 3});
  for (auto& a : axes) a = norm_axis(a, x.dim(), c);
  const Tensor m = mean(x, axes, true);
  const Tensor d = sub(x, m);
  const Tensor sd = sqrt(mean(mul(d, d), axes, true));
  return {div(d, add(sd, scalar_like(1e-9, x)))};
}

V lrn(Ctx& c) {
  const Tensor& x = c.x(0);
  const int64_t size = c.i("size", 0);
  SPORE_CHECK_KIND(ErrorKind::IOError, size > 0, c.where, "attribute size must be positive");
  const double alpha = c.f("alpha", 1e-4), beta = c.f("beta", 0.75), bias = c.f("bias", 1.0);
  const int64_t C = x.shape()[1], lo = (size - 1) / 2, hi = size - 1 - lo;
  const Tensor sq = mul(x, x);
  // Channel c sums the squares of channels c - lo .. c + hi (zero outside).
  std::vector<int64_t> p(size_t(2 * x.dim()), 0);
  p[size_t(2 * (x.dim() - 2))] = lo, p[size_t(2 * (x.dim() - 2) + 1)] = hi;  // pad dim 1
  const Tensor padded = pad(sq, p, 0);
  Tensor s = padded.slice(1, 0, C);
  for (int64_t k = 1; k < size; ++k) s = add(s, padded.slice(1, k, k + C));
  const Tensor den =
      pow(add(scalar_like(bias, x), mul(scalar_like(alpha / double(size), x), s)), beta);
  return {div(x, den)};
}

V batch_norm_training(Ctx& c) {
  const Tensor& x = c.x(0);
  const double eps = c.f("epsilon", 1e-5), mom = c.f("momentum", 0.9);
  std::vector<int64_t> axes{0};
  for (int64_t d = 2; d < x.dim(); ++d) axes.push_back(d);
  Shape cs(size_t(x.dim()), 1);
  cs[1] = x.shape()[1];
  const Tensor m = mean(x, axes, true);
  const Tensor d = sub(x, m);
  const Tensor var = mean(mul(d, d), axes, true);  // biased, as ONNX's reference
  const Tensor y =
      add(mul(div(d, sqrt(add(var, scalar_like(eps, x)))), c.x(1).reshape(cs)), c.x(2).reshape(cs));
  const Tensor mm = m.reshape({-1}), vv = var.reshape({-1});
  const Tensor rm = add(mul(c.x(3), scalar_like(mom, mm)), mul(mm, scalar_like(1 - mom, mm)));
  const Tensor rv = add(mul(c.x(4), scalar_like(mom, vv)), mul(vv, scalar_like(1 - mom, vv)));
  return {y, rm, rv};
}

// Pad in edge / reflect / wrap mode: each padded axis read through a constant index list.
Tensor pad_indexed(const Ctx& c, const Tensor& x, const std::vector<int64_t>& p,
                   const std::string& mode) {
  Tensor y = x;
  const int64_t r = x.dim();
  for (int64_t d = 0; d < r; ++d) {
    const int64_t before = p[size_t(d)], after = p[size_t(d + r)], n = x.shape()[size_t(d)];
    if (before == 0 && after == 0) continue;
    SPORE_CHECK_KIND(ErrorKind::IOError, before >= 0 && after >= 0, c.where, "mode \"", mode,
                     "\" with negative pads");
    SPORE_CHECK_KIND(ErrorKind::IOError, n > (mode == "reflect" ? 1 : 0), c.where, "mode \"", mode,
                     "\" pads axis ", d, " of size ", n);
    std::vector<int64_t> idx;
    for (int64_t i = -before; i < n + after; ++i) {
      int64_t j = i;
      if (mode == "edge") {
        j = std::clamp<int64_t>(i, 0, n - 1);
      } else if (mode == "wrap") {
        j = ((i % n) + n) % n;
      } else {  // reflect: the mirror without repeating the edge, period 2 (n - 1)
        const int64_t per = 2 * (n - 1);
        j = ((i % per) + per) % per;
        if (j >= n) j = per - j;
      }
      idx.push_back(j);
    }
    y = index_select(y, d, i64(idx));
  }
  return y;
}

// ---- data-dependent shapes (these run op by op: every input is concrete) ----

V non_zero(Ctx& c) {
  const Tensor& x = c.x(0);
  const std::vector<double> v = values_of(x);
  const Shape& s = x.shape();
  std::vector<int64_t> hits;
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] != 0) hits.push_back(int64_t(i));
  const int64_t r = std::max<int64_t>(x.dim(), 1), n = int64_t(hits.size());
  std::vector<int64_t> out(size_t(r * n));
  for (int64_t k = 0; k < n; ++k) {
    int64_t f = hits[size_t(k)];
    for (int64_t d = x.dim() - 1; d >= 0; --d) {
      out[size_t(d * n + k)] = f % s[size_t(d)];
      f /= s[size_t(d)];
    }
  }
  return {i64(out, {x.dim(), n})};
}

V unique(Ctx& c) {
  const Tensor& x = c.x(0);
  const bool sorted = c.i("sorted", 1) != 0;
  Tensor src = x;
  int64_t ax = 0;
  if (c.has("axis"))
    ax = norm_axis(c.i("axis", 0), x.dim(), c);
  else
    src = x.reshape({-1});
  // Slices along ax as rows of doubles (exact for every Spore dtype's values but large int64).
  const Tensor moved = move_axis(src, ax, 0).contiguous();
  const int64_t n = moved.shape()[0], w = n ? moved.numel() / n : 0;
  const std::vector<double> v = values_of(moved);
  auto row = [&](int64_t i) {
    return std::vector<double>(v.begin() + i * w, v.begin() + (i + 1) * w);
  };
  std::vector<int64_t> first;  // the first occurrence of each distinct slice, in order of first
  std::vector<int64_t> inverse(static_cast<size_t>(n));
  std::vector<int64_t> counts;
  for (int64_t i = 0; i < n; ++i) {
    const auto ri = row(i);
    size_t k = 0;
    while (k < first.size() && row(first[k]) != ri) ++k;
    if (k == first.size()) first.push_back(i), counts.push_back(0);
    inverse[size_t(i)] = int64_t(k);
    ++counts[k];
  }
  std::vector<size_t> order(first.size());
  std::iota(order.begin(), order.end(), size_t(0));
  if (sorted)
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return row(first[a]) < row(first[b]); });
  std::vector<int64_t> rank(order.size()), idx, cnt;
  for (size_t k = 0; k < order.size(); ++k) {
    rank[order[k]] = int64_t(k);
    idx.push_back(first[order[k]]);
    cnt.push_back(counts[order[k]]);
  }
  for (auto& i : inverse) i = rank[size_t(i)];
  const Tensor y = move_axis(index_select(moved, 0, i64(idx)), 0, ax).contiguous();
  return {y, i64(idx), i64(inverse), i64(cnt)};
}

V non_max_suppression(Ctx& c) {
  const std::vector<double> boxes = values_of(c.x(0)), scores = values_of(c.x(1));
  const Shape bs = c.x(0).shape(), ss = c.x(1).shape();
  SPORE_CHECK_KIND(
      ErrorKind::IOError,
      bs.size() == 3 && bs[2] == 4 && ss.size() == 3 && ss[0] == bs[0] && ss[2] == bs[1], c.where,
      "boxes must be (B, N, 4) and scores (B, C, N), got ", shape_str(bs), " and ", shape_str(ss));
  const int64_t max_out = c.has_in(2) && c.x(2).numel() ? int64_t(values_of(c.x(2)).at(0)) : 0;
  const double iou_th = c.has_in(3) && c.x(3).numel() ? values_of(c.x(3)).at(0) : 0.0;
  const bool has_score_th = c.has_in(4) && c.x(4).numel();
  const double score_th = has_score_th ? values_of(c.x(4)).at(0) : 0.0;
  const bool center = c.i("center_point_box", 0) != 0;
  const int64_t B = bs[0], N = bs[1], C = ss[1];
  // (y1, x1, y2, x2) with y1 <= y2, x1 <= x2.
  auto corners = [&](int64_t b, int64_t i) {
    const double* p = &boxes[size_t((b * N + i) * 4)];
    if (center)
      return std::array<double, 4>{p[1] - p[3] / 2, p[0] - p[2] / 2, p[1] + p[3] / 2,
                                   p[0] + p[2] / 2};
    return std::array<double, 4>{std::min(p[0], p[2]), std::min(p[1], p[3]), std::max(p[0], p[2]),
                                 std::max(p[1], p[3])};
  };
  auto iou = [&](const std::array<double, 4>& a, const std::array<double, 4>& b) {
    const double ih = std::max(0.0, std::min(a[2], b[2]) - std::max(a[0], b[0]));
    const double iw = std::max(0.0, std::min(a[3], b[3]) - std::max(a[1], b[1]));
    const double inter = ih * iw;
    const double uni = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter;
    return uni > 0 ? inter / uni : 0.0;
  };
  std::vector<int64_t> out;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t k = 0; k < C; ++k) {
      std::vector<int64_t> cand;
      for (int64_t i = 0; i < N; ++i)
        if (!has_score_th || scores[size_t((b * C + k) * N + i)] > score_th) cand.push_back(i);
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t i, int64_t j) {
        return scores[size_t((b * C + k) * N + i)] > scores[size_t((b * C + k) * N + j)];
      });
      std::vector<int64_t> kept;
      for (int64_t i : cand) {
        if (int64_t(kept.size()) >= max_out) break;
        bool ok = true;
        for (int64_t j : kept) ok = ok && iou(corners(b, i), corners(b, j)) <= iou_th;
        if (ok) kept.push_back(i);
      }
      for (int64_t i : kept) out.insert(out.end(), {b, k, i});
    }
  return {i64(out, {int64_t(out.size() / 3), 3})};
}

// ---- quantisation ----

// Saturating round-half-to-even into an 8-bit integer type.
Tensor saturate_to(const Tensor& v, DType dt) {
  const double lo = dt == kUInt8 ? 0 : -128, hi = dt == kUInt8 ? 255 : 127;
  return clamp(round(v), lo, hi).to(dt);
}

// A scale or zero point: one value, or one per slice of x along the attribute axis (default 1),
// shaped to broadcast against x.
Tensor along_axis(const Ctx& c, const Tensor& p, const Tensor& x) {
  if (p.dim() == 0 || p.numel() == 1) return p.reshape({});
  const int64_t axis = norm_axis(c.i("axis", 1), x.dim(), c);
  SPORE_CHECK_KIND(ErrorKind::IOError, p.numel() == x.shape()[size_t(axis)], c.where,
                   "a per-axis scale or zero point has ", p.numel(), " values for axis ", axis,
                   " of size ", x.shape()[size_t(axis)]);
  Shape s(size_t(x.dim()), 1);
  s[size_t(axis)] = p.numel();
  return p.reshape(s);
}

V quantize_linear(Ctx& c) {
  const Tensor& x = c.x(0);
  const DType dt = c.has_in(2) ? c.x(2).dtype() : kUInt8;
  if (dt != kUInt8 && dt != kInt8) c.unsupported(std::string("zero point of ") + dtype_name(dt));
  const Tensor scale = along_axis(c, c.x(1), x).to(kFloat32);
  Tensor v = div(x.to(kFloat32), scale);
  v = round(v);
  if (c.has_in(2)) v = add(v, along_axis(c, c.x(2), x).to(kFloat32));
  return {saturate_to(v, dt)};
}

V dequantize_linear(Ctx& c) {
  const Tensor& x = c.x(0);
  Tensor v = x.to(kFloat32);
  if (c.has_in(2)) v = sub(v, along_axis(c, c.x(2), x).to(kFloat32));
  return {mul(v, along_axis(c, c.x(1), x).to(kFloat32))};
}

V dynamic_quantize_linear(Ctx& c) {
  const Tensor x = c.x(0).to(kFloat32);
  const Tensor zero = full({}, 0.0, kFloat32);
  const Tensor hi = maximum(amax(x), zero), lo = minimum(amin(x), zero);
  const Tensor scale = div(sub(hi, lo), full({}, 255.0, kFloat32));
  const Tensor zp = saturate_to(round(sub(zero, div(lo, scale))), kUInt8);
  const Tensor y = saturate_to(add(round(div(x, scale)), zp.to(kFloat32)), kUInt8);
  return {y, scale, zp};
}

// (a - a_zero) @ (b - b_zero) for 8-bit integers, exact in float64 (sums far below 2^53).
Tensor int_matmul(const Tensor& a, const Tensor& az, const Tensor& b, const Tensor& bz) {
  Tensor x = a.to(kFloat64), y = b.to(kFloat64);
  if (az.defined())
    x = sub(x, az.to(kFloat64).dim() == 1 && az.numel() > 1 ? az.to(kFloat64).reshape({-1, 1})
                                                            : az.to(kFloat64).reshape({}));
  if (bz.defined()) y = sub(y, bz.to(kFloat64).reshape(bz.numel() > 1 ? Shape{-1} : Shape{}));
  return matmul(x, y);
}

V matmul_integer(Ctx& c) {
  return {
      int_matmul(c.x(0), c.has_in(2) ? c.x(2) : Tensor(), c.x(1), c.has_in(3) ? c.x(3) : Tensor())
          .to(kInt32)};
}

V qlinear_matmul(Ctx& c) {
  // a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp
  const Tensor acc = int_matmul(c.x(0), c.x(2), c.x(3), c.x(5));
  const Tensor s = div(mul(c.x(1).to(kFloat64), c.x(4).to(kFloat64)), c.x(6).to(kFloat64));
  const Tensor v = add(round(mul(acc, s.reshape(s.numel() > 1 ? Shape{-1} : Shape{}))),
                       c.x(7).to(kFloat64).reshape({}));
  return {saturate_to(v, c.x(7).dtype())};
}

// ---- Einsum ----

// Einsum by broadcasting: every operand's axes laid out over all the letters, multiplied, and the
// letters not in the output summed.
V einsum(Ctx& c) {
  std::string eq = c.s("equation", "");
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  if (eq.find('.') != std::string::npos) c.unsupported("an ellipsis in the equation");
  const size_t arrow = eq.find("->");
  std::vector<std::string> terms;
  {
    const std::string lhs = eq.substr(0, arrow);
    size_t s = 0;
    for (size_t p; (p = lhs.find(',', s)) != std::string::npos; s = p + 1)
      terms.push_back(lhs.substr(s, p - s));
    terms.push_back(lhs.substr(s));
  }
  SPORE_CHECK_KIND(ErrorKind::IOError, terms.size() == c.in.size(), c.where, "the equation has ",
                   terms.size(), " operands, the node ", c.in.size(), " inputs");
  std::string out;
  if (arrow != std::string::npos) {
    out = eq.substr(arrow + 2);
  } else {  // implicit: the letters used once, in alphabetical order
    std::map<char, int> n;
    for (const auto& t : terms)
      for (char ch : t) ++n[ch];
    for (const auto& [ch, k] : n)
      if (k == 1) out += ch;
  }
  std::string all = out;
  for (const auto& t : terms)
    for (char ch : t)
      if (all.find(ch) == std::string::npos) all += ch;
  std::map<char, int64_t> size;
  Tensor prod_t;
  for (size_t k = 0; k < terms.size(); ++k) {
    Tensor x = c.x(k);
    const std::string& t = terms[k];
    SPORE_CHECK_KIND(ErrorKind::IOError, int64_t(t.size()) == x.dim(), c.where, "operand ", k,
                     " \"", t, "\" names ", t.size(), " axes, has ", x.dim());
    // Repeated letters (a diagonal) are not mapped.
    for (size_t i = 0; i < t.size(); ++i)
      if (t.find(t[i]) != i) c.unsupported("a repeated index in \"" + t + "\"");
    for (size_t i = 0; i < t.size(); ++i) size[t[i]] = x.shape()[i];
    std::vector<int64_t> perm;
    for (char ch : all)
      if (t.find(ch) != std::string::npos) perm.push_back(int64_t(t.find(ch)));
    x = x.permute(perm);
    Shape s;
    for (char ch : all) s.push_back(t.find(ch) != std::string::npos ? size[ch] : 1);
    x = x.reshape(s);
    prod_t = prod_t.defined() ? mul(prod_t, x) : x;
  }
  std::vector<int64_t> red;
  for (size_t i = out.size(); i < all.size(); ++i) red.push_back(int64_t(i));
  return {red.empty() ? prod_t.contiguous() : sum(prod_t, red)};
}

// ---- ConvTranspose ----

V conv_transpose(Ctx& c) {
  Tensor x = c.x(0), w = c.x(1);
  const bool one_d = x.dim() == 3;
  if (one_d) x = x.unsqueeze(2), w = w.unsqueeze(2);
  if (x.dim() != 4)
    c.unsupported(std::to_string(x.dim() - 2) + " spatial dims (Spore maps 1-D and 2-D)");
  auto two = [&](const char* name, int64_t dflt) {
    std::vector<int64_t> v = c.ints(name, {});
    if (v.empty()) v.assign(one_d ? 1 : 2, dflt);
    if (one_d) v.insert(v.begin(), dflt);
    SPORE_CHECK_KIND(ErrorKind::IOError, v.size() == 2, c.where, "attribute ", name,
                     ": expected one value per spatial dim");
    return v;
  };
  const std::vector<int64_t> stride = two("strides", 1), dil = two("dilations", 1),
                             outpad = two("output_padding", 0);
  const std::string ap = c.s("auto_pad", "NOTSET");
  std::vector<int64_t> pads = c.ints("pads", {});
  if (pads.empty()) pads.assign(one_d ? 2 : 4, 0);
  if (one_d) pads = {0, pads.at(0), 0, pads.at(1)};
  SPORE_CHECK_KIND(ErrorKind::IOError, pads.size() == 4, c.where, "attribute pads: expected ",
                   2 * (x.dim() - 2), " values");
  std::vector<int64_t> out_shape = c.ints("output_shape", {});
  if (one_d && !out_shape.empty()) out_shape.insert(out_shape.begin(), 1);
  Conv2dOptions o;
  o.stride = stride, o.dilation = dil, o.groups = c.i("group", 1);
  o.padding.assign(4, 0);
  std::vector<int64_t> out(2);
  for (size_t d = 0; d < 2; ++d) {
    const int64_t in = x.shape()[2 + d], k = w.shape()[2 + d];
    const int64_t full_len = stride[d] * (in - 1) + outpad[d] + (k - 1) * dil[d] + 1;
    int64_t begin = pads[d], end = pads[d + 2];
    if (!out_shape.empty() || ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      // The output size is given (or in * stride): the padding that yields it, split as ONNX says.
      out[d] = !out_shape.empty() ? out_shape.at(out_shape.size() - 2 + d) : in * stride[d];
      const int64_t total = std::max<int64_t>(0, full_len - out[d]);
      begin = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      end = total - begin;
    } else {
      out[d] = full_len - begin - end;
    }
    o.padding[2 * d] = begin, o.padding[2 * d + 1] = end;
    // Spore adds up to stride - 1 rows past the plain transposed size (output_padding).
    const int64_t plain = (in - 1) * stride[d] - begin - end + dil[d] * (k - 1) + 1;
    if (out[d] < plain || out[d] - plain >= std::max<int64_t>(stride[d], 1))
      c.unsupported("an output size " + std::to_string(out[d]) + " that the padding cannot give");
  }
  Tensor y = conv_transpose2d(x, w, o, out);
  if (c.has_in(2)) y = add(y, c.x(2).reshape({1, -1, 1, 1}));
  return {one_d ? y.squeeze(2) : y};
}

// ---- Det: Laplace expansion along the first row (exact arithmetic, for small matrices) ----

Tensor det_of(const Tensor& a, int64_t n) {
  if (n == 1) return a.slice(-1, 0, 1).slice(-2, 0, 1).squeeze(-1).squeeze(-1);
  if (n == 2) {
    auto e = [&](int64_t i, int64_t j) {
      return a.slice(-2, i, i + 1).slice(-1, j, j + 1).squeeze(-1).squeeze(-1);
    };
    return sub(mul(e(0, 0), e(1, 1)), mul(e(0, 1), e(1, 0)));
  }
  Tensor acc;
  const Tensor rest = a.slice(-2, 1, n);
  for (int64_t j = 0; j < n; ++j) {
    std::vector<int64_t> cols;
    for (int64_t k = 0; k < n; ++k)
      if (k != j) cols.push_back(k);
    const Tensor minor = index_select(rest, a.dim() - 1, i64(cols));
    const Tensor term =
        mul(a.slice(-2, 0, 1).slice(-1, j, j + 1).squeeze(-1).squeeze(-1), det_of(minor, n - 1));
    acc = !acc.defined() ? term : (j % 2 ? sub(acc, term) : add(acc, term));
  }
  return acc;
}

V det(Ctx& c) {
  const Tensor& x = c.x(0);
  SPORE_CHECK_KIND(ErrorKind::IOError,
                   x.dim() >= 2 && x.shape().back() == x.shape()[size_t(x.dim() - 2)], c.where,
                   "Det needs square matrices (..., M, M), got ", shape_str(x.shape()));
  const int64_t n = x.shape().back();
  if (n > 5)
    c.unsupported(std::to_string(n) + "x" + std::to_string(n) +
                  " matrices (Spore expands up to 5x5)");
  return {det_of(x, n)};
}

// ---- training ops (domain ai.onnx.preview.training): one optimiser step ----

// Inputs R (learning rate), T (step count), then `groups` lists of n tensors each.
struct TrainArgs {
  Tensor r;
  int64_t t;
  int64_t n;
};
TrainArgs train_args(const Ctx& c, int64_t groups) {
  const int64_t rest = int64_t(c.in.size()) - 2;
  SPORE_CHECK_KIND(ErrorKind::IOError, rest > 0 && rest % groups == 0, c.where, c.node.op_type(),
                   " takes R, T and ", groups, " lists of equal length, got ", c.in.size(),
                   " inputs");
  return {c.x(0).reshape({}), int64_t(c.const_scalar(1, "T")), rest / groups};
}

V adagrad(Ctx& c) {
  const TrainArgs a = train_args(c, 3);
  const double decay = c.f("decay_factor", 0), eps = c.f("epsilon", 0),
               norm = c.f("norm_coefficient", 0);
  V xs, hs;
  for (int64_t i = 0; i < a.n; ++i) {
    const Tensor &x = c.x(size_t(2 + i)), &g = c.x(size_t(2 + a.n + i)),
                 &h = c.x(size_t(2 + 2 * a.n + i));
    const Tensor r = div(a.r.to(x.dtype()), scalar_like(1 + double(a.t) * decay, x));
    const Tensor gr = add(mul(scalar_like(norm, x), x), g);
    const Tensor hn = add(h, mul(gr, gr));
    xs.push_back(sub(x, div(mul(r, gr), add(sqrt(hn), scalar_like(eps, x)))));
    hs.push_back(hn);
  }
  xs.insert(xs.end(), hs.begin(), hs.end());
  return xs;
}

V momentum(Ctx& c) {
  const TrainArgs a = train_args(c, 3);
  const double alpha = c.f("alpha", 0), beta = c.f("beta", 0), norm = c.f("norm_coefficient", 0);
  const std::string mode = c.s("mode", "standard");
  SPORE_CHECK_KIND(ErrorKind::IOError, mode == "standard" || mode == "nesterov", c.where,
                   "attribute mode: \"", mode, "\" is not standard or nesterov");
  V xs, vs;
  for (int64_t i = 0; i < a.n; ++i) {
    const Tensor &x = c.x(size_t(2 + i)), &g = c.x(size_t(2 + a.n + i)),
                 &v = c.x(size_t(2 + 2 * a.n + i));
    const Tensor r = a.r.to(x.dtype());
    const Tensor gr = add(mul(scalar_like(norm, x), x), g);
    const Tensor vn =
        add(mul(scalar_like(alpha, x), v), mul(scalar_like(a.t > 0 ? beta : 1.0, x), gr));
    xs.push_back(mode == "standard" ? sub(x, mul(r, vn))
                                    : sub(x, mul(r, add(gr, mul(scalar_like(alpha, x), vn)))));
    vs.push_back(vn);
  }
  xs.insert(xs.end(), vs.begin(), vs.end());
  return xs;
}

V adam(Ctx& c) {
  const TrainArgs a = train_args(c, 4);
  const double alpha = c.f("alpha", 0.9), beta = c.f("beta", 0.999), eps = c.f("epsilon", 1e-6),
               norm = c.f("norm_coefficient", 0), post = c.f("norm_coefficient_post", 0);
  const double adj =
      a.t > 0 ? std::sqrt(1 - std::pow(beta, double(a.t))) / (1 - std::pow(alpha, double(a.t)))
              : 1.0;
  V xs, vs, hs;
  for (int64_t i = 0; i < a.n; ++i) {
    const Tensor &x = c.x(size_t(2 + i)), &g = c.x(size_t(2 + a.n + i)),
                 &v = c.x(size_t(2 + 2 * a.n + i)), &h = c.x(size_t(2 + 3 * a.n + i));
    const Tensor gr = add(mul(scalar_like(norm, x), x), g);
    const Tensor vn = add(mul(scalar_like(alpha, x), v), mul(scalar_like(1 - alpha, x), gr));
    const Tensor hn = add(mul(scalar_like(beta, x), h), mul(scalar_like(1 - beta, x), mul(gr, gr)));
    const Tensor r = mul(a.r.to(x.dtype()), scalar_like(adj, x));
    const Tensor xn = sub(x, mul(r, div(vn, add(sqrt(hn), scalar_like(eps, x)))));
    xs.push_back(mul(scalar_like(1 - post, x), xn));
    vs.push_back(vn);
    hs.push_back(hn);
  }
  xs.insert(xs.end(), vs.begin(), vs.end());
  xs.insert(xs.end(), hs.begin(), hs.end());
  return xs;
}

// ---- RNN, GRU, LSTM: the recurrence unrolled over the (constant) sequence length ----

Tensor activation(const Ctx& c, const std::string& name, const Tensor& x) {
  if (name == "Sigmoid") return sigmoid(x);
  if (name == "Tanh") return tanh(x);
  if (name == "Relu") return relu(x);
  c.unsupported("activation " + name + " (Spore maps Sigmoid, Tanh and Relu)");
}

// kind: 0 RNN, 1 GRU, 2 LSTM.
V recurrent(Ctx& c, int kind) {
  const int64_t G = kind == 0 ? 1 : kind == 1 ? 3 : 4;
  const bool batch_major = c.i("layout", 0) != 0;
  const Tensor X = batch_major ? c.x(0).permute({1, 0, 2}) : c.x(0);  // (T, B, I)
  const Tensor &W = c.x(1), &R = c.x(2);
  const int64_t T = X.shape()[0], Bt = X.shape()[1], I = X.shape()[2], nd = W.shape()[0],
                h = R.shape().back();
  const std::string dir = c.s("direction", "forward");
  SPORE_CHECK_KIND(
      ErrorKind::IOError,
      (dir == "bidirectional" && nd == 2) || ((dir == "forward" || dir == "reverse") && nd == 1),
      c.where, "direction \"", dir, "\" with ", nd, " weight sets");
  if (c.has("hidden_size"))
    SPORE_CHECK_KIND(ErrorKind::IOError, c.i("hidden_size", 0) == h, c.where, "hidden_size ",
                     c.i("hidden_size", 0), " but R has ", h, " columns");
  if (c.has("activation_alpha") || c.has("activation_beta"))
    c.unsupported("activation_alpha / activation_beta");
  std::vector<std::string> acts;
  if (const A* a = c.attr("activations")) acts.assign(a->strings().begin(), a->strings().end());
  const std::vector<std::string> dflt = kind == 0 ? std::vector<std::string>{"Tanh"}
                                        : kind == 1
                                            ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                            : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  if (acts.empty())
    for (int64_t d = 0; d < nd; ++d) acts.insert(acts.end(), dflt.begin(), dflt.end());
  SPORE_CHECK_KIND(ErrorKind::IOError, acts.size() == dflt.size() * size_t(nd), c.where,
                   "activations lists ", acts.size(), " functions, expected ",
                   dflt.size() * size_t(nd));
  const double clip = c.f("clip", 0);
  const bool lbr = kind == 1 && c.i("linear_before_reset", 0) != 0;
  std::vector<int64_t> lens(static_cast<size_t>(Bt), T);
  if (c.has_in(4)) {
    const std::vector<double> v = const_values(c, 4, "sequence_lens");
    for (size_t b = 0; b < lens.size() && b < v.size(); ++b) lens[b] = int64_t(v[b]);
  }
  const bool ragged = std::any_of(lens.begin(), lens.end(), [&](int64_t l) { return l != T; });
  // (T, B) time-reversal within each sequence's length, as a gather index over (T, B, H).
  auto reverse = [&](const Tensor& x) {
    std::vector<int64_t> idx(size_t(T * Bt));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t b = 0; b < Bt; ++b) {
        const int64_t L = std::clamp<int64_t>(lens[size_t(b)], 0, T);
        idx[size_t(t * Bt + b)] = t < L ? L - 1 - t : t;
      }
    return gather(x, 0, i64(idx, {T, Bt, 1}).expand(x.shape()).contiguous());
  };
  auto batch_of = [&](const Tensor& v, int64_t d) {  // (nd, B, h) -> (B, h), zeros when absent
    return v.defined() ? v.slice(0, d, d + 1).squeeze(0) : zeros({Bt, h}, X.dtype());
  };
  const Tensor h0 = c.has_in(5) ? c.x(5) : Tensor(),
               c0 = kind == 2 && c.has_in(6) ? c.x(6) : Tensor();
  const Tensor h0t = h0.defined() && batch_major ? h0.permute({1, 0, 2}) : h0;
  const Tensor c0t = c0.defined() && batch_major ? c0.permute({1, 0, 2}) : c0;
  V ys, hs, cs;
  for (int64_t d = 0; d < nd; ++d) {
    const bool rev = dir == "reverse" || (dir == "bidirectional" && d == 1);
    const Tensor Wd = W.slice(0, d, d + 1).squeeze(0), Rd = R.slice(0, d, d + 1).squeeze(0);
    Tensor Wb = zeros({G * h}, X.dtype()), Rb = zeros({G * h}, X.dtype());
    if (c.has_in(3)) {
      const Tensor Bd = c.x(3).slice(0, d, d + 1).squeeze(0);
      Wb = Bd.slice(0, 0, G * h), Rb = Bd.slice(0, G * h, 2 * G * h);
    }
    Tensor P;
    if (kind == 2 && c.has_in(7)) P = c.x(7).slice(0, d, d + 1).squeeze(0);
    const Tensor Xd = rev ? reverse(X) : X;
    const Tensor xw = add(matmul(Xd.reshape({T * Bt, I}), Wd.t()), Wb).reshape({T, Bt, G * h});
    const Tensor Rt = Rd.t();
    Tensor H = batch_of(h0t, d), C = batch_of(c0t, d);
    auto gate = [&](const Tensor& g, int64_t k) { return g.slice(1, k * h, (k + 1) * h); };
    auto clipped = [&](const Tensor& v) { return clip > 0 ? clamp(v, -clip, clip) : v; };
    const std::string* f = &acts[size_t(d) * dflt.size()];
    V steps;
    for (int64_t t = 0; t < T; ++t) {
      const Tensor gx = xw.slice(0, t, t + 1).squeeze(0);
      Tensor Hn, Cn;
      if (kind == 0) {
        Hn = activation(c, f[0], clipped(add(add(gx, matmul(H, Rt)), Rb)));
      } else if (kind == 1) {
        const Tensor gh = matmul(H, Rt), Rb2 = Rb.reshape({1, G * h});
        const Tensor z =
            activation(c, f[0], clipped(add(add(gate(gx, 0), gate(gh, 0)), gate(Rb2, 0))));
        const Tensor r =
            activation(c, f[0], clipped(add(add(gate(gx, 1), gate(gh, 1)), gate(Rb2, 1))));
        const Tensor Rh = gate(Rt, 2), Rbh = gate(Rb2, 2);
        const Tensor hh = lbr ? add(gate(gx, 2), mul(r, add(matmul(H, Rh), Rbh)))
                              : add(add(gate(gx, 2), matmul(mul(r, H), Rh)), Rbh);
        const Tensor ht = activation(c, f[1], clipped(hh));
        Hn = add(mul(sub(scalar_like(1, z), z), ht), mul(z, H));
      } else {
        const Tensor g = add(add(gx, matmul(H, Rt)), Rb);
        Tensor gi = gate(g, 0), go = gate(g, 1), gf = gate(g, 2), gc = gate(g, 3);
        if (P.defined()) {
          gi = add(gi, mul(P.slice(0, 0, h), C));
          gf = add(gf, mul(P.slice(0, 2 * h, 3 * h), C));
        }
        const Tensor i = activation(c, f[0], clipped(gi)), fg = activation(c, f[0], clipped(gf));
        Cn = add(mul(fg, C), mul(i, activation(c, f[1], clipped(gc))));
        if (P.defined()) go = add(go, mul(P.slice(0, h, 2 * h), Cn));
        Hn = mul(activation(c, f[0], clipped(go)), activation(c, f[2], Cn));
      }
      if (ragged) {  // a finished sequence keeps its state and outputs zeros
        std::vector<uint8_t> live(static_cast<size_t>(Bt));
        for (int64_t b = 0; b < Bt; ++b) live[size_t(b)] = t < lens[size_t(b)];
        const Tensor m = from_buffer(live.data(), {Bt, 1}, kBool);
        H = where(m, Hn, H);
        if (kind == 2) C = where(m, Cn, C);
        steps.push_back(where(m, Hn, scalar_like(0, Hn)));
      } else {
        H = Hn;
        if (kind == 2) C = Cn;
        steps.push_back(Hn);
      }
    }
    Tensor Y = stack(steps, 0);  // (T, B, h)
    if (rev) Y = reverse(Y);
    ys.push_back(Y);
    hs.push_back(H);
    cs.push_back(C);
  }
  Tensor Y = stack(ys, 1), Yh = stack(hs, 0), Yc = stack(cs, 0);  // (T, nd, B, h), (nd, B, h)
  if (batch_major) {
    Y = Y.permute({2, 0, 1, 3}).contiguous();
    Yh = Yh.permute({1, 0, 2}).contiguous();
    Yc = Yc.permute({1, 0, 2}).contiguous();
  }
  V out{Y, Yh};
  if (kind == 2) out.push_back(Yc);
  return out;
}

// ---- TfIdfVectorizer (op by op: the n-grams are looked up on the host) ----

V tfidf(Ctx& c) {
  const Tensor& x = c.x(0);
  if (!is_integral(x.dtype())) c.unsupported(std::string(dtype_name(x.dtype())) + " input");
  SPORE_CHECK_KIND(ErrorKind::IOError, x.dim() == 1 || x.dim() == 2, c.where,
                   "the input must be [C] or [N, C], got rank ", x.dim());
  const int64_t min_n = c.i("min_gram_length", 1), max_n = c.i("max_gram_length", 1),
                max_skip = c.i("max_skip_count", 0);
  const std::string mode = c.s("mode", "TF");
  SPORE_CHECK_KIND(ErrorKind::IOError, mode == "TF" || mode == "IDF" || mode == "TFIDF", c.where,
                   "attribute mode: \"", mode, "\" is not TF, IDF or TFIDF");
  if (c.has("pool_strings")) c.unsupported("pool_strings (STRING tensors)");
  const std::vector<int64_t> counts = c.ints("ngram_counts"), indexes = c.ints("ngram_indexes"),
                             pool = c.ints("pool_int64s");
  std::vector<double> weights;
  if (const A* a = c.attr("weights")) weights.assign(a->floats().begin(), a->floats().end());
  SPORE_CHECK_KIND(ErrorKind::IOError, min_n >= 1 && max_n >= min_n && max_skip >= 0, c.where,
                   "gram lengths ", min_n, "..", max_n, " and max_skip_count ", max_skip);
  // The pool: n-grams of length n + 1 start at counts[n]; the k-th n-gram of the whole pool writes
  // output column indexes[k].
  std::map<std::vector<int64_t>, int64_t> column;
  int64_t ordinal = 0, width = 0;
  for (size_t n = 0; n < counts.size(); ++n) {
    const int64_t b = counts[n], e = n + 1 < counts.size() ? counts[n + 1] : int64_t(pool.size());
    SPORE_CHECK_KIND(ErrorKind::IOError,
                     0 <= b && b <= e && e <= int64_t(pool.size()) && (e - b) % int64_t(n + 1) == 0,
                     c.where, "ngram_counts ", b, "..", e, " do not split pool_int64s into ", n + 1,
                     "-grams");
    for (int64_t p = b; p < e; p += int64_t(n + 1), ++ordinal) {
      SPORE_CHECK_KIND(ErrorKind::IOError, ordinal < int64_t(indexes.size()), c.where,
                       "ngram_indexes has fewer entries than the pool has n-grams");
      column[std::vector<int64_t>(pool.begin() + p, pool.begin() + p + int64_t(n + 1))] =
          indexes[size_t(ordinal)];
      width = std::max(width, indexes[size_t(ordinal)] + 1);
    }
  }
  const int64_t rows = x.dim() == 2 ? x.shape()[0] : 1, len = x.shape().back();
  const std::vector<double> v = values_of(x);
  std::vector<double> out(size_t(rows * width), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double* o = &out[size_t(r * width)];
    for (int64_t n = min_n; n <= max_n; ++n)
      for (int64_t skip = 1; skip <= max_skip + 1; ++skip) {
        for (int64_t s = 0; s + (n - 1) * skip < len; ++s) {
          std::vector<int64_t> g;
          for (int64_t k = 0; k < n; ++k) g.push_back(int64_t(v[size_t(r * len + s + k * skip)]));
          if (auto it = column.find(g); it != column.end()) o[it->second] += 1;
        }
        if (n == 1) break;  // a unigram is the same whatever the skip
      }
    for (int64_t k = 0; k < width; ++k) {
      const double w = weights.empty() ? 1.0 : weights.at(size_t(k));
      if (mode == "IDF") o[k] = o[k] > 0 ? w : 0;
      if (mode == "TFIDF") o[k] *= w;
    }
  }
  return {from_buffer(out.data(), x.dim() == 2 ? Shape{rows, width} : Shape{width}, kFloat64)
              .to(kFloat32)};
}

// ---- GridSample (PyTorch's grid_sample, which ONNX's tests were made with) ----

V grid_sample(Ctx& c) {
  const Tensor& x = c.x(0);
  const Tensor& grid = c.x(1);
  SPORE_CHECK_KIND(ErrorKind::IOError, x.dim() == 4 && grid.dim() == 4 && grid.shape()[3] == 2,
                   c.where, "GridSample needs X (N, C, H, W) and grid (N, Ho, Wo, 2), got ",
                   shape_str(x.shape()), " and ", shape_str(grid.shape()));
  const std::string mode = c.s("mode", "bilinear"), padding = c.s("padding_mode", "zeros");
  if (mode != "bilinear" && mode != "nearest" && mode != "bicubic")
    c.unsupported("mode \"" + mode + "\"");
  if (padding != "zeros" && padding != "border" && padding != "reflection")
    c.unsupported("padding_mode \"" + padding + "\"");
  const bool align = c.i("align_corners", 0) != 0;
  const int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3],
                Ho = grid.shape()[1], Wo = grid.shape()[2];
  const DType dt = x.dtype() == kFloat64 ? kFloat64 : kFloat32;
  auto k = [&](double v) { return full({}, v, dt); };
  const Tensor g = grid.to(dt);
  // Pixel coordinates from [-1, 1].
  auto unnorm = [&](const Tensor& t, int64_t n) {
    return align ? mul(add(t, k(1)), k(double(n - 1) / 2))
                 : div(sub(mul(add(t, k(1)), k(double(n))), k(1)), k(2));
  };
  // Border / reflection padding of a coordinate (zeros padding leaves it).
  auto pad_coord = [&](Tensor t, int64_t n) {
    if (padding == "border") return clamp(t, 0.0, double(n - 1));
    if (padding != "reflection") return t;
    const double lo = align ? 0 : -0.5, span = align ? double(n - 1) : double(n);
    if (span <= 0) return zeros(t.shape(), dt);
    // Reflect into [lo, lo + span]: distance from lo folded with period 2 span.
    Tensor d = abs(sub(t, k(lo)));
    const Tensor flips = floor(div(d, k(span)));
    const Tensor extra = sub(d, mul(flips, k(span)));
    const Tensor odd = not_equal(sub(flips, mul(floor(div(flips, k(2))), k(2))), k(0));
    d = where(odd, sub(k(span), extra), extra);
    return clamp(add(d, k(lo)), 0.0, double(n - 1));
  };
  const Tensor gx = g.slice(3, 0, 1).squeeze(3), gy = g.slice(3, 1, 2).squeeze(3);
  const Tensor ix = unnorm(gx, W), iy = unnorm(gy, H);
  const Tensor flat = x.reshape({N, C, H * W}).to(dt);
  // The value at integer pixel (yy, xx) (N, Ho, Wo), 0 outside the image.
  auto read = [&](const Tensor& yy, const Tensor& xx) {
    const Tensor inside =
        logical_and(logical_and(greater_equal(xx, k(0)), less_equal(xx, k(double(W - 1)))),
                    logical_and(greater_equal(yy, k(0)), less_equal(yy, k(double(H - 1)))));
    const Tensor idx =
        add(mul(clamp(yy, 0.0, double(H - 1)), k(double(W))), clamp(xx, 0.0, double(W - 1)))
            .to(kInt64)
            .reshape({N, 1, Ho * Wo})
            .expand({N, C, Ho * Wo})
            .contiguous();
    const Tensor v = gather(flat, 2, idx).reshape({N, C, Ho, Wo});
    return where(inside.unsqueeze(1), v, k(0));
  };
  Tensor y;
  if (mode == "nearest") {
    y = read(round(pad_coord(iy, H)), round(pad_coord(ix, W)));
  } else if (mode == "bilinear") {
    const Tensor px = pad_coord(ix, W), py = pad_coord(iy, H);
    const Tensor x0 = floor(px), y0 = floor(py);
    const Tensor wx1 = sub(px, x0), wy1 = sub(py, y0), wx0 = sub(k(1), wx1), wy0 = sub(k(1), wy1);
    const Tensor x1 = add(x0, k(1)), y1 = add(y0, k(1));
    auto term = [&](const Tensor& yy, const Tensor& xx, const Tensor& w) {
      return mul(read(yy, xx), w.unsqueeze(1));
    };
    y = add(add(term(y0, x0, mul(wy0, wx0)), term(y0, x1, mul(wy0, wx1))),
            add(term(y1, x0, mul(wy1, wx0)), term(y1, x1, mul(wy1, wx1))));
  } else {  // bicubic: 4 x 4 taps around the unpadded point, each tap's coordinate padded
    const double A = -0.75;
    auto cubic = [&](const Tensor& t) {   // the 4 weights for offsets -1, 0, 1, 2 at fraction t
      auto near = [&](const Tensor& d) {  // |d| <= 1
        return add(mul(mul(sub(mul(k(A + 2), d), k(A + 3)), d), d), k(1));
      };
      auto far = [&](const Tensor& d) {  // 1 < |d| < 2
        return sub(mul(add(mul(sub(mul(k(A), d), k(5 * A)), d), k(8 * A)), d), k(4 * A));
      };
      return std::array<Tensor, 4>{far(add(t, k(1))), near(t), near(sub(k(1), t)),
                                   far(sub(k(2), t))};
    };
    const Tensor x0 = floor(ix), y0 = floor(iy);
    const auto wx = cubic(sub(ix, x0)), wy = cubic(sub(iy, y0));
    for (int a = 0; a < 4; ++a)
      for (int b = 0; b < 4; ++b) {
        const Tensor yy = pad_coord(add(y0, k(a - 1)), H), xx = pad_coord(add(x0, k(b - 1)), W);
        const Tensor t = mul(read(yy, xx), mul(wy[size_t(a)], wx[size_t(b)]).unsqueeze(1));
        y = y.defined() ? add(y, t) : t;
      }
  }
  return {y.to(x.dtype())};
}

// ---- MaxUnpool: the values written at their flat NCHW indices into zeros ----

V max_unpool(Ctx& c) {
  const Tensor& x = c.x(0);
  need_rank(c, x, 4, "MaxUnpool");
  const std::vector<int64_t> k = c.ints("kernel_shape"), st = c.ints("strides", {1, 1}),
                             p = c.ints("pads", {0, 0, 0, 0});
  SPORE_CHECK_KIND(ErrorKind::IOError, k.size() == 2 && st.size() == 2 && p.size() == 4, c.where,
                   "kernel_shape, strides and pads must describe 2 spatial dims");
  Shape dflt{x.shape()[0], x.shape()[1], 0, 0};
  for (size_t d = 0; d < 2; ++d)
    dflt[2 + d] = (x.shape()[2 + d] - 1) * st[d] + k[d] - p[d] - p[d + 2];
  Shape out = dflt;
  Tensor idx = c.x(1).to(kInt64).reshape({-1});
  if (c.has_in(2)) {
    const std::vector<int64_t> os = c.const_ints(2, "output_shape");
    SPORE_CHECK_KIND(ErrorKind::IOError,
                     os.size() == 4 && os[0] == dflt[0] && os[1] == dflt[1] && os[2] >= dflt[2] &&
                         os[3] >= dflt[3],
                     c.where, "output_shape ", shape_str(os), " is smaller than the unpooled ",
                     shape_str(dflt));
    out = Shape(os.begin(), os.end());
    // The indices count in the unpooled shape; the (h, w) they name keeps its place in the larger
    // output (in float64, exact for any index below 2^53).
    const Tensor f = idx.to(kFloat64);
    auto num = [](int64_t v) { return full({}, double(v), kFloat64); };
    const Tensor nc = floor(div(f, num(dflt[2] * dflt[3])));
    const Tensor rem = sub(f, mul(nc, num(dflt[2] * dflt[3])));
    const Tensor h = floor(div(rem, num(dflt[3]))), w = sub(rem, mul(h, num(dflt[3])));
    idx = add(add(mul(nc, num(out[2] * out[3])), mul(h, num(out[3]))), w).to(kInt64);
  }
  int64_t total = 1;
  for (int64_t v : out) total *= v;
  const Tensor y = scatter_add(zeros({total}, x.dtype()), 0, idx, x.reshape({-1}));
  return {y.reshape(out)};
}

// ---- DFT / STFT: matrix products with constant cos / sin tables ----

// The DFT of x (..., n, 2) (real, imaginary) along axis `ax` (< the last), with `len` points
// (x cropped or zero-padded), the first `bins` outputs; `inverse` conjugates and divides by len.
Tensor dft_along(const Tensor& x0, int64_t ax, int64_t len, int64_t bins, bool inverse) {
  Tensor x = x0;
  const int64_t n = x.shape()[size_t(ax)];
  if (n > len) x = x.slice(ax, 0, len);
  if (n < len) {
    std::vector<int64_t> p(size_t(2 * x.dim()), 0);
    p[size_t(2 * (x.dim() - 1 - ax) + 1)] = len - n;
    x = pad(x, p, 0);
  }
  const DType dt = x.dtype() == kFloat64 ? kFloat64 : kFloat32;
  std::vector<double> cs(size_t(len * bins)), sn(size_t(len * bins));
  const double sgn = inverse ? 1 : -1;
  for (int64_t t = 0; t < len; ++t)
    for (int64_t f = 0; f < bins; ++f) {
      const double a = 2 * M_PI * double((t * f) % len) / double(len);
      cs[size_t(t * bins + f)] = std::cos(a) / (inverse ? double(len) : 1.0);
      sn[size_t(t * bins + f)] = sgn * std::sin(a) / (inverse ? double(len) : 1.0);
    }
  const Tensor Cm = from_buffer(cs.data(), {len, bins}, kFloat64).to(dt),
               Sm = from_buffer(sn.data(), {len, bins}, kFloat64).to(dt);
  // (re + i im)(cos + i sin) = (re cos - im sin) + i (re sin + im cos), along ax moved last.
  const int64_t r = x.dim();
  const Tensor re = move_axis(x.slice(-1, 0, 1).squeeze(-1).to(dt), ax, r - 2);
  const Tensor im = move_axis(x.slice(-1, 1, 2).squeeze(-1).to(dt), ax, r - 2);
  const Tensor yr = sub(matmul(re, Cm), matmul(im, Sm)), yi = add(matmul(re, Sm), matmul(im, Cm));
  return move_axis(stack({yr, yi}, -1), r - 2, ax).to(x0.dtype());
}

// A real signal (..., 1) as complex (..., 2).
Tensor as_complex(const Tensor& x) {
  if (x.shape().back() == 2) return x;
  return concat({x, zeros(x.shape(), x.dtype())}, -1);
}

V dft(Ctx& c) {
  const Tensor& x = c.x(0);
  SPORE_CHECK_KIND(ErrorKind::IOError,
                   x.dim() >= 2 && (x.shape().back() == 1 || x.shape().back() == 2), c.where,
                   "DFT needs a signal (..., 1) or (..., 2), got ", shape_str(x.shape()));
  const int64_t ax = norm_axis(c.i("axis", 1), x.dim() - 1, c);
  const int64_t len = c.has_in(1) && c.x(1).numel() ? int64_t(c.const_scalar(1, "dft_length"))
                                                    : x.shape()[size_t(ax)];
  const bool inverse = c.i("inverse", 0) != 0, onesided = c.i("onesided", 0) != 0;
  if (inverse && onesided) c.unsupported("inverse with onesided = 1");
  return {dft_along(as_complex(x), ax, len, onesided ? len / 2 + 1 : len, inverse)};
}

V stft(Ctx& c) {
  const Tensor& x = c.x(0);
  SPORE_CHECK_KIND(ErrorKind::IOError, x.dim() == 3 && (x.shape()[2] == 1 || x.shape()[2] == 2),
                   c.where, "STFT needs a signal (batch, length, 1 or 2), got ",
                   shape_str(x.shape()));
  const int64_t step = int64_t(c.const_scalar(1, "frame_step"));
  Tensor window = c.has_in(2) ? c.x(2) : Tensor();
  int64_t len = c.has_in(3)        ? int64_t(c.const_scalar(3, "frame_length"))
                : window.defined() ? window.numel()
                                   : 0;
  SPORE_CHECK_KIND(ErrorKind::IOError, step > 0 && len > 0 && len <= x.shape()[1], c.where,
                   "frame_step ", step, " and frame length ", len, " for a signal of ",
                   x.shape()[1]);
  const bool onesided = c.i("onesided", 1) != 0;
  const int64_t frames = (x.shape()[1] - len) / step + 1;
  std::vector<int64_t> idx;
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t t = 0; t < len; ++t) idx.push_back(f * step + t);
  const Tensor cx = as_complex(x);
  Tensor fr = index_select(cx, 1, i64(idx)).reshape({x.shape()[0], frames, len, 2});
  if (window.defined()) fr = mul(fr, window.to(fr.dtype()).reshape({1, 1, len, 1}));
  return {dft_along(fr, 2, len, onesided ? len / 2 + 1 : len, false)};
}

// ONNX's reference MelWeightMatrix (a constant: every input is a number): triangular filters
// between mel-spaced points, mapped to DFT bins by integer division.
V mel_weight_matrix(Ctx& c) {
  const int64_t mels = int64_t(c.const_scalar(0, "num_mel_bins")),
                dft_len = int64_t(c.const_scalar(1, "dft_length")),
                rate = int64_t(c.const_scalar(2, "sample_rate"));
  const double lo = c.const_scalar(3, "lower_edge_hertz"),
               hi = c.const_scalar(4, "upper_edge_hertz");
  SPORE_CHECK_KIND(ErrorKind::IOError, mels > 0 && dft_len > 0 && rate > 0, c.where,
                   "num_mel_bins, dft_length and sample_rate must be positive");
  DType dt = kFloat32;
  if (!dtype_from_onnx(int(c.i("output_datatype", 1)), &dt))
    c.unsupported("output_datatype " + onnx_dtype_name(int(c.i("output_datatype", 1))));
  const int64_t bins = dft_len / 2 + 1;
  const double lo_mel = 2595 * std::log10(1 + lo / 700), hi_mel = 2595 * std::log10(1 + hi / 700);
  const double step = (hi_mel - lo_mel) / double(mels + 2);
  std::vector<int64_t> f(static_cast<size_t>(mels + 2));
  for (int64_t i = 0; i < mels + 2; ++i) {
    const double hz = 700 * (std::pow(10.0, (double(i) * step + lo_mel) / 2595) - 1);
    f[size_t(i)] = int64_t(std::floor(double(dft_len + 1) * hz / double(rate)));
  }
  std::vector<double> out(size_t(bins * mels), 0.0);
  auto at = [&](int64_t j, int64_t i) -> double& {
    SPORE_CHECK_KIND(ErrorKind::IOError, j >= 0 && j < bins, c.where, "a mel filter reaches bin ",
                     j, " of ", bins, " (upper_edge_hertz above the Nyquist frequency)");
    return out[size_t(j * mels + i)];
  };
  for (int64_t i = 0; i < mels; ++i) {
    const int64_t l = f[size_t(i)], m = f[size_t(i + 1)], r = f[size_t(i + 2)];
    if (m == l)
      at(m, i) = 1;
    else
      for (int64_t j = l; j <= m; ++j) at(j, i) = double(j - l) / double(m - l);
    if (r > m)
      for (int64_t j = m; j < r; ++j) at(j, i) = double(r - j) / double(r - m);
  }
  return {from_buffer(out.data(), {bins, mels}, kFloat64).to(dt)};
}

// QLinearConv: ConvInteger's exact integer convolution, plus the int32 bias, requantised.
V qlinear_conv(Ctx& c, const Handler& conv) {
  Ctx f{c.node, {}, c.opset, c.where, c.subgraph};
  const Tensor x = sub(c.x(0).to(kFloat64), c.x(2).to(kFloat64).reshape({}));
  const Tensor wz = c.x(5).to(kFloat64);
  const Tensor w =
      sub(c.x(3).to(kFloat64), wz.numel() > 1 ? wz.reshape({-1, 1, 1, 1}) : wz.reshape({}));
  f.in = {x, w};
  Tensor acc = conv(f).at(0);
  if (c.has_in(8)) acc = add(acc, c.x(8).to(kFloat64).reshape({1, -1, 1, 1}));
  const Tensor ws = c.x(4).to(kFloat64);
  const Tensor scale = div(mul(c.x(1).to(kFloat64).reshape({}),
                               ws.numel() > 1 ? ws.reshape({1, -1, 1, 1}) : ws.reshape({})),
                           c.x(6).to(kFloat64).reshape({}));
  const Tensor v = add(round(mul(acc, scale)), c.x(7).to(kFloat64).reshape({}));
  return {saturate_to(v, c.x(7).dtype())};
}

// ---- control flow: If with a constant condition, Loop and Scan unrolled ----

const ::onnx::GraphProto& graph_attr(const Ctx& c, const char* name) {
  const A* a = c.attr(name);
  SPORE_CHECK_KIND(ErrorKind::IOError, a && a->has_g(), c.where, "attribute ", name,
                   " (a graph) is missing");
  return a->g();
}

V if_op(Ctx& c) {
  if (c.x(0).is_symbolic())
    c.unsupported("a condition computed from the model's input data (Spore needs a constant)");
  const bool cond = c.const_scalar(0, "cond") != 0;
  return c.subgraph(graph_attr(c, cond ? "then_branch" : "else_branch"), {});
}

// The most iterations a Loop is unrolled to (the graph grows with each).
constexpr int64_t kMaxUnroll = 100000;

V loop_op(Ctx& c) {
  const ::onnx::GraphProto& body = graph_attr(c, "body");
  const int64_t trips = c.has_in(0) ? int64_t(c.const_scalar(0, "M")) : kMaxUnroll + 1;
  bool cond = true;
  if (c.has_in(1)) {
    if (c.x(1).is_symbolic())
      c.unsupported("a condition computed from the model's input data (Spore needs a constant)");
    cond = c.const_scalar(1, "cond") != 0;
  }
  V state(c.in.begin() + 2, c.in.end());
  const size_t nv = state.size();
  SPORE_CHECK_KIND(ErrorKind::IOError, size_t(body.output_size()) >= 1 + nv, c.where,
                   "the body has ", body.output_size(), " outputs for ", nv, " loop values");
  std::vector<V> scans(size_t(body.output_size()) - 1 - nv);
  int64_t i = 0;
  for (; i < trips && cond; ++i) {
    if (i == kMaxUnroll)
      c.unsupported("more than " + std::to_string(kMaxUnroll) + " iterations (it is unrolled)");
    V ins{full({}, double(i), kInt64), full({}, 1, kBool)};
    ins.insert(ins.end(), state.begin(), state.end());
    const V out = c.subgraph(body, ins);
    if (out[0].is_symbolic())
      c.unsupported("a body condition computed from the model's input data (it is unrolled)");
    {
      NoTrace guard;
      cond = out[0].to(kFloat64).reshape({-1}).to_vector<double>().at(0) != 0;
    }
    for (size_t k = 0; k < nv; ++k) state[k] = out[1 + k];
    for (size_t k = 0; k < scans.size(); ++k) scans[k].push_back(out[1 + nv + k]);
  }
  V result = state;
  for (auto& sc : scans) {
    if (sc.empty()) c.unsupported("scan outputs of a Loop that runs no iteration");
    result.push_back(stack(sc, 0));
  }
  return result;
}

// Scan over axis scan_input_axes[k] of each scan input; opset 8's form has a batch axis 0 and a
// sequence_lens input first, and is run once per batch element.
V scan_op(Ctx& c) {
  const ::onnx::GraphProto& body = graph_attr(c, "body");
  const int64_t m = c.i("num_scan_inputs", 0);
  const bool v8 = c.opset < 9;
  const size_t first = v8 ? 1 : 0;
  SPORE_CHECK_KIND(ErrorKind::IOError, m >= 1 && size_t(m) + first <= c.in.size(), c.where,
                   "num_scan_inputs ", m, " with ", c.in.size(), " inputs");
  const size_t n = c.in.size() - first - size_t(m);  // loop-carried states
  const size_t outs = size_t(body.output_size());
  SPORE_CHECK_KIND(ErrorKind::IOError, outs >= n, c.where, "the body has ", outs, " outputs for ",
                   n, " states");
  auto list = [&](const char* name, size_t count) {
    std::vector<int64_t> v = c.ints(name);
    if (v.empty()) v.assign(count, 0);
    SPORE_CHECK_KIND(ErrorKind::IOError, v.size() == count, c.where, "attribute ", name, " has ",
                     v.size(), " values, expected ", count);
    return v;
  };
  const std::vector<int64_t> in_dirs = list(v8 ? "directions" : "scan_input_directions", size_t(m));
  const std::vector<int64_t> in_axes =
      v8 ? std::vector<int64_t>(size_t(m), 0) : list("scan_input_axes", size_t(m));
  const std::vector<int64_t> out_dirs =
      v8 ? std::vector<int64_t>(outs - n, 0) : list("scan_output_directions", outs - n);
  const std::vector<int64_t> out_axes =
      v8 ? std::vector<int64_t>(outs - n, 0) : list("scan_output_axes", outs - n);
  // One scan over states `st` and scan inputs `xs` (without a batch axis).
  auto run = [&](V st, const V& xs) {
    std::vector<int64_t> ax(static_cast<size_t>(m));
    for (size_t k = 0; k < size_t(m); ++k) ax[k] = norm_axis(in_axes[k], xs[k].dim(), c);
    const int64_t T = xs[0].shape()[size_t(ax[0])];
    std::vector<V> ys(outs - n);
    for (int64_t t = 0; t < T; ++t) {
      V ins = st;
      for (size_t k = 0; k < size_t(m); ++k) {
        const int64_t tt = in_dirs[k] ? T - 1 - t : t;
        ins.push_back(xs[k].slice(ax[k], tt, tt + 1).squeeze(ax[k]));
      }
      const V out = c.subgraph(body, ins);
      for (size_t k = 0; k < n; ++k) st[k] = out[k];
      for (size_t k = 0; k < ys.size(); ++k) ys[k].push_back(out[n + k]);
    }
    V result = st;
    for (size_t k = 0; k < ys.size(); ++k) {
      if (ys[k].empty()) c.unsupported("a scan over an empty sequence");
      if (out_dirs[k]) std::reverse(ys[k].begin(), ys[k].end());
      result.push_back(stack(ys[k], norm_axis(out_axes[k], ys[k][0].dim() + 1, c)));
    }
    return result;
  };
  V st(c.in.begin() + long(first), c.in.begin() + long(first + n));
  V xs(c.in.begin() + long(first + n), c.in.end());
  if (!v8) return run(st, xs);
  if (c.has_in(0)) c.unsupported("sequence_lens (opset 8)");
  const int64_t B = xs[0].shape()[0];
  std::vector<V> per(outs);
  for (int64_t b = 0; b < B; ++b) {
    V sb, xb;
    for (const Tensor& t : st) sb.push_back(t.slice(0, b, b + 1).squeeze(0));
    for (const Tensor& t : xs) xb.push_back(t.slice(0, b, b + 1).squeeze(0));
    const V r = run(sb, xb);
    for (size_t k = 0; k < outs; ++k) per[k].push_back(r[k]);
  }
  V result;
  for (auto& p : per) result.push_back(stack(p, 0));
  return result;
}

// ---- pooling in 3 or more spatial dims, or dilated: the window's taps as strided slices ----

V pool_nd(Ctx& c, bool max) {
  const Tensor& x0 = c.x(0);
  if (max && c.node.output_size() > 1 && !c.node.output(1).empty())
    c.unsupported("the Indices output with dilations or 3 or more spatial dims");
  const int64_t S = x0.dim() - 2;
  SPORE_CHECK_KIND(ErrorKind::IOError, S >= 1, c.where, "pooling needs (N, C, spatial...), got ",
                   shape_str(x0.shape()));
  const bool integer = !is_floating(x0.dtype());
  const Tensor x = integer ? x0.to(kFloat64) : x0;
  auto per_dim = [&](const char* name, int64_t dflt, size_t count) {
    std::vector<int64_t> v = c.ints(name);
    if (v.empty()) v.assign(count, dflt);
    SPORE_CHECK_KIND(ErrorKind::IOError, v.size() == count, c.where, "attribute ", name, " has ",
                     v.size(), " values, expected ", count);
    return v;
  };
  const std::vector<int64_t> k = per_dim("kernel_shape", 1, size_t(S)),
                             st = per_dim("strides", 1, size_t(S)),
                             dil = per_dim("dilations", 1, size_t(S));
  std::vector<int64_t> pads = per_dim("pads", 0, size_t(2 * S));
  const bool ceil_mode = c.i("ceil_mode", 0) != 0;
  const std::string ap = c.s("auto_pad", "NOTSET");
  std::vector<int64_t> out(static_cast<size_t>(S)), extra(static_cast<size_t>(S));
  for (int64_t d = 0; d < S; ++d) {
    const size_t u = size_t(d);
    const int64_t in = x.shape()[u + 2], span = (k[u] - 1) * dil[u] + 1;
    if (ap == "SAME_UPPER" || ap == "SAME_LOWER") {
      out[u] = (in + st[u] - 1) / st[u];
      const int64_t total = std::max<int64_t>(0, (out[u] - 1) * st[u] + span - in);
      pads[u] = ap == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[u + size_t(S)] = total - pads[u];
    } else {
      if (ap == "VALID") pads[u] = pads[u + size_t(S)] = 0;
      const int64_t room = in + pads[u] + pads[u + size_t(S)] - span;
      SPORE_CHECK_KIND(ErrorKind::IOError, room >= 0, c.where, "the window (", span,
                       ") is larger than the padded input (", in + pads[u] + pads[u + size_t(S)],
                       ") on spatial axis ", d);
      out[u] = (ceil_mode ? (room + st[u] - 1) / st[u] : room / st[u]) + 1;
      // A window must start inside the input or its leading pad (PyTorch's and ONNX's rule).
      if (ceil_mode && (out[u] - 1) * st[u] >= in + pads[u]) --out[u];
    }
    extra[u] =
        std::max<int64_t>(0, (out[u] - 1) * st[u] + span - (in + pads[u] + pads[u + size_t(S)]));
  }
  // Spore's pad takes (before, after) pairs from the last axis back.
  auto spore_pads = [&](bool with_extra, bool with_explicit) {
    std::vector<int64_t> p;
    for (int64_t d = S - 1; d >= 0; --d) {
      const size_t u = size_t(d);
      p.push_back(with_explicit ? pads[u] : 0);
      p.push_back((with_explicit ? pads[u + size_t(S)] : 0) + (with_extra ? extra[u] : 0));
    }
    p.push_back(0), p.push_back(0), p.push_back(0), p.push_back(0);  // N, C
    return p;
  };
  const Tensor xp = pad(x, spore_pads(true, true), max ? -INFINITY : 0.0);
  // Tap t of the window: every spatial axis sliced from its offset, by the stride.
  auto taps = [&](const Tensor& src, auto combine) {
    Tensor acc;
    int64_t n = 1;
    for (int64_t v : k) n *= v;
    for (int64_t t = 0; t < n; ++t) {
      Tensor v = src;
      int64_t r = t;
      for (int64_t d = S - 1; d >= 0; --d) {
        const size_t u = size_t(d);
        const int64_t j = r % k[u];
        r /= k[u];
        const int64_t b = j * dil[u];
        v = v.slice(d + 2, b, b + (out[u] - 1) * st[u] + 1, st[u]);
      }
      acc = acc.defined() ? combine(acc, v) : v;
    }
    return acc;
  };
  Tensor y;
  if (max) {
    y = taps(xp, [](const Tensor& a, const Tensor& b) { return maximum(a, b); });
  } else {
    const Tensor total = taps(xp, [](const Tensor& a, const Tensor& b) { return add(a, b); });
    // The number of counted elements under each window: the input (and its explicit pads with
    // count_include_pad), never ceil mode's extra.
    Shape ones_shape(size_t(x.dim()), 1);
    for (int64_t d = 0; d < S; ++d) ones_shape[size_t(d + 2)] = x.shape()[size_t(d + 2)];
    const bool include = c.i("count_include_pad", 0) != 0;
    Tensor ones_t = ones(ones_shape, x.dtype());
    if (include) ones_t = pad(ones_t, spore_pads(false, true), 1.0);  // explicit pads count
    ones_t = pad(ones_t, spore_pads(true, !include), 0.0);            // the rest does not
    const Tensor count = taps(ones_t, [](const Tensor& a, const Tensor& b) { return add(a, b); });
    y = div(total, count);
  }
  return {integer ? y.to(x0.dtype()) : y};
}

// ---- random generators (op by op, so that each run draws afresh; ONNX's seed attribute is not
// honoured: Spore's global generator, set_seed, is) ----

DType dtype_attr(const Ctx& c, DType dflt) {
  if (!c.has("dtype")) return dflt;
  DType dt;
  if (!dtype_from_onnx(int(c.i("dtype", 1)), &dt))
    c.unsupported("dtype = " + onnx_dtype_name(int(c.i("dtype", 1))));
  return dt;
}

Shape random_shape(const Ctx& c, bool like) {
  if (like) return c.x(0).shape();
  const std::vector<int64_t> s = c.ints("shape");
  return Shape(s.begin(), s.end());
}

V random_uniform(Ctx& c, bool like) {
  const DType dt = dtype_attr(c, like ? c.x(0).dtype() : kFloat32);
  const double lo = c.f("low", 0), hi = c.f("high", 1);
  const Tensor u = rand(random_shape(c, like), kFloat64);
  return {add(mul(u, full({}, hi - lo, kFloat64)), full({}, lo, kFloat64)).to(dt)};
}

V random_normal(Ctx& c, bool like) {
  const DType dt = dtype_attr(c, like ? c.x(0).dtype() : kFloat32);
  const Tensor z = randn(random_shape(c, like), kFloat64);
  return {
      add(mul(z, full({}, c.f("scale", 1), kFloat64)), full({}, c.f("mean", 0), kFloat64)).to(dt)};
}

V bernoulli(Ctx& c) {
  const Tensor& p = c.x(0);
  return {less(rand(p.shape(), kFloat64), p.to(kFloat64)).to(dtype_attr(c, p.dtype()))};
}

// Arctangent in float64 without an atan primitive: |x| > 1 reduced through atan(x) = pi/2 -
// atan(1/x), then Newton's method on tan(y) = t (y -= (sin y - t cos y) cos y) from the guess
// t / (1 + 0.28 t^2) (off by < 0.005): the error squares each step (5e-3, 3e-5, 6e-10, 4e-19),
// so four steps reach float64's rounding of Spore's sin and cos.
Tensor atan64(const Tensor& x) {
  auto k = [](double v) { return full({}, v, kFloat64); };
  const Tensor ax = abs(x), big = greater(ax, k(1));
  const Tensor t = where(big, div(k(1), ax), ax);  // in [0, 1]; |x| = inf gives 0
  Tensor y = div(t, add(k(1), mul(k(0.28), mul(t, t))));
  for (int i = 0; i < 4; ++i) {
    const Tensor cy = cos(y);
    y = sub(y, mul(sub(sin(y), mul(t, cy)), cy));
  }
  y = where(big, sub(k(M_PI / 2), y), y);
  return mul(sign(x), y);
}

V atan_op(Ctx& c) {
  const Tensor& x = c.x(0);
  return {atan64(x.to(kFloat64)).to(x.dtype())};
}
V asin_op(Ctx& c) {  // atan(x / sqrt(1 - x^2)); |x| > 1 gives NaN, as asin does
  const Tensor& x = c.x(0);
  const Tensor d = x.to(kFloat64);
  return {atan64(div(d, sqrt(sub(full({}, 1.0, kFloat64), mul(d, d))))).to(x.dtype())};
}
V acos_op(Ctx& c) {  // 2 atan(sqrt((1 - x) / (1 + x))): no cancellation near x = 1
  const Tensor& x = c.x(0);
  const Tensor d = x.to(kFloat64), one = full({}, 1.0, kFloat64);
  const Tensor r = sqrt(div(sub(one, d), add(one, d)));
  return {mul(full({}, 2.0, kFloat64), atan64(r)).to(x.dtype())};
}

}  // namespace

void add_extra_handlers(std::map<std::string, Handler>& t) {
  t["NegativeLogLikelihoodLoss"] = nll_op;
  t["SoftmaxCrossEntropyLoss"] = softmax_cross_entropy;
  t["Resize"] = resize_op;
  t["Upsample"] = resize_op;
  t["Trilu"] = trilu;
  t["Hardmax"] = hardmax;
  t["OneHot"] = one_hot_op;
  t["EyeLike"] = eye_like;
  t["DepthToSpace"] = depth_to_space;
  t["SpaceToDepth"] = space_to_depth;
  t["GatherND"] = gather_nd;
  t["ScatterElements"] = scatter_elements;
  t["Scatter"] = scatter_elements;
  t["ScatterND"] = scatter_nd;
  t["Compress"] = compress;
  t["ReverseSequence"] = reverse_sequence;
  t["Mod"] = mod_op;
  t["BitShift"] = bit_shift;
  t["Shrink"] = shrink;
  t["Sinh"] = sinh_op;
  t["Cosh"] = cosh_op;
  t["Asinh"] = asinh_op;
  t["Acosh"] = acosh_op;
  t["Atanh"] = atanh_op;
  t["Atan"] = atan_op;
  t["Asin"] = asin_op;
  t["Acos"] = acos_op;
  t["HannWindow"] = [](Ctx& c) { return window(c, 0); };
  t["HammingWindow"] = [](Ctx& c) { return window(c, 1); };
  t["BlackmanWindow"] = [](Ctx& c) { return window(c, 2); };
  t["MeanVarianceNormalization"] = mean_variance_norm;
  t["LRN"] = lrn;
  t["NonZero"] = non_zero;
  t["Unique"] = unique;
  t["NonMaxSuppression"] = non_max_suppression;
  t["QuantizeLinear"] = quantize_linear;
  t["DequantizeLinear"] = dequantize_linear;
  t["DynamicQuantizeLinear"] = dynamic_quantize_linear;
  t["MatMulInteger"] = matmul_integer;
  t["QLinearMatMul"] = qlinear_matmul;
  t["Einsum"] = einsum;
  t["ConvTranspose"] = conv_transpose;
  t["Det"] = det;
  t["TfIdfVectorizer"] = tfidf;
  t["GridSample"] = grid_sample;
  t["MaxUnpool"] = max_unpool;
  t["DFT"] = dft;
  t["STFT"] = stft;
  t["MelWeightMatrix"] = mel_weight_matrix;
  t["If"] = if_op;
  t["Bernoulli"] = bernoulli;
  t["RandomUniform"] = [](Ctx& c) { return random_uniform(c, false); };
  t["RandomUniformLike"] = [](Ctx& c) { return random_uniform(c, true); };
  t["RandomNormal"] = [](Ctx& c) { return random_normal(c, false); };
  t["RandomNormalLike"] = [](Ctx& c) { return random_normal(c, true); };
  t["Loop"] = loop_op;
  t["Scan"] = scan_op;
  t["RNN"] = [](Ctx& c) { return recurrent(c, 0); };
  t["GRU"] = [](Ctx& c) { return recurrent(c, 1); };
  t["LSTM"] = [](Ctx& c) { return recurrent(c, 2); };
  t["ai.onnx.preview.training::Adagrad"] = adagrad;
  t["ai.onnx.preview.training::Momentum"] = momentum;
  t["ai.onnx.preview.training::Adam"] = adam;
  // Training-mode BatchNormalization (opset 14's training_mode = 1) and the edge / reflect / wrap
  // Pad modes wrap the handlers of ops_onnx.cpp.
  const Handler bn = t.at("BatchNormalization");
  t["BatchNormalization"] = [bn](Ctx& c) -> V {
    return c.i("training_mode", 0) ? batch_norm_training(c) : bn(c);
  };
  // ConvInteger: Conv on (x - x_zero_point) and (w - w_zero_point) in float64, where the integer
  // sums are exact (below 2^53), then int32.
  const Handler conv = t.at("Conv");
  t["ConvInteger"] = [conv](Ctx& c) -> V {
    Ctx f{c.node, {}, c.opset, c.where, c.subgraph};
    Tensor x = c.x(0).to(kFloat64), w = c.x(1).to(kFloat64);
    if (c.has_in(2)) x = sub(x, c.x(2).to(kFloat64).reshape({}));
    if (c.has_in(3)) {
      const Tensor z = c.x(3).to(kFloat64);
      w = sub(w, z.numel() > 1 ? z.reshape({-1, 1, 1, 1}) : z.reshape({}));
    }
    f.in = {x, w};
    return {conv(f).at(0).to(kInt32)};
  };
  t["QLinearConv"] = [conv](Ctx& c) { return qlinear_conv(c, conv); };
  for (const char* op : {"MaxPool", "AveragePool"}) {
    const Handler two_d = t.at(op);
    const bool max = std::string(op) == "MaxPool";
    t[op] = [two_d, max](Ctx& c) -> V {
      const std::vector<int64_t> dil = c.ints("dilations");
      const bool dilated = std::any_of(dil.begin(), dil.end(), [](int64_t d) { return d != 1; });
      return c.x(0).dim() > 4 || dilated ? pool_nd(c, max) : two_d(c);
    };
  }
  const Handler pad0 = t.at("Pad");
  t["Pad"] = [pad0](Ctx& c) -> V {
    const std::string mode = c.s("mode", "constant");
    if (mode == "constant") return pad0(c);
    if (mode != "edge" && mode != "reflect" && mode != "wrap")
      c.unsupported("mode \"" + mode + "\"");
    if (c.opset >= 11 && c.has_in(3)) c.unsupported("the axes input");
    const std::vector<int64_t> p =
        c.opset >= 11 ? c.const_ints(1, "pads") : c.ints(c.opset >= 2 ? "pads" : "paddings");
    SPORE_CHECK_KIND(ErrorKind::IOError, int64_t(p.size()) == 2 * c.x(0).dim(), c.where,
                     "pads has ", p.size(), " values for rank ", c.x(0).dim());
    return {pad_indexed(c, c.x(0), p, mode)};
  };
}

}  // namespace spore::onnx_detail
