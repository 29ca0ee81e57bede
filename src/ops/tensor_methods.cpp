// The Tensor methods that are sugar for ops (spore/ops.h): declared with Tensor in the core layer,
// defined here in the compiler layer that implements them (Tensor::backward: src/autograd).
#include "ops/op.h"
#include "spore/ops.h"
#include "spore/tensor.h"

namespace spore {

// ---- views: through the view primitives (ops/view.cpp), so autograd and Graph-mode tracing see
// them; only metadata changes ----
namespace {
Shape infer_reshape(const Shape& from, Shape to) {
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < to.size(); ++i) {
    if (to[i] == -1) {
      SPORE_CHECK(infer_at < 0, "[reshape] only one dimension can be -1, got ", shape_str(to));
      infer_at = int64_t(i);
    } else {
      SPORE_CHECK(to[i] >= 0, "[reshape] invalid dimension ", to[i], " in ", shape_str(to));
      known *= to[i];
    }
  }
  const int64_t n = shape_numel(from);
  if (infer_at >= 0) {
    SPORE_CHECK(known > 0 && n % known == 0, "[reshape] cannot reshape ", shape_str(from), " (", n,
                " elements) into ", shape_str(to));
    to[size_t(infer_at)] = n / known;
  }
  SPORE_CHECK(shape_numel(to) == n, "[reshape] cannot reshape ", shape_str(from), " (", n,
              " elements) into ", shape_str(to), " (", shape_numel(to), " elements)");
  return to;
}
}  // namespace

Tensor Tensor::view(const Shape& s) const {
  Shape target = infer_reshape(shape(), s), st;
  SPORE_CHECK(view_strides(shape(), strides(), target, &st),
              "[view] cannot view a tensor of shape ", shape_str(shape()), " with strides ",
              shape_str(strides()), " as ", shape_str(target),
              " without a copy; use reshape(), or contiguous() first");
  return ops::call1(ops::OpId::Reshape, {*this}, ops::Attrs().set("shape", target));
}
Tensor Tensor::reshape(const Shape& s) const {
  Shape target = infer_reshape(shape(), s), st;
  if (target == shape()) return *this;
  if (!is_symbolic() && !view_strides(shape(), strides(), target, &st))
    return contiguous().reshape(target);
  return ops::call1(ops::OpId::Reshape, {*this}, ops::Attrs().set("shape", target));
}
Tensor Tensor::permute(const std::vector<int64_t>& axes) const {
  return ops::call1(ops::OpId::Permute, {*this}, ops::Attrs().set("axes", axes));
}
Tensor Tensor::transpose(int64_t a, int64_t b) const {
  std::vector<int64_t> axes(static_cast<size_t>(dim()), 0);
  for (size_t i = 0; i < axes.size(); ++i) axes[i] = int64_t(i);
  std::swap(axes[size_t(ops::normalize_axis(a, dim()))],
            axes[size_t(ops::normalize_axis(b, dim()))]);
  return permute(axes);
}
Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  return ops::call1(
      ops::OpId::Slice, {*this},
      ops::Attrs().set("dim", d).set("start", start).set("end", end).set("step", step));
}
Tensor Tensor::select(int64_t d, int64_t index) const {
  const int64_t ax = ops::normalize_axis(d, dim()), n = shape()[size_t(ax)];
  SPORE_CHECK_INDEX(index >= -n && index < n, "[select] index ", index, " is out of range for dim ",
                    d, " of size ", n);
  if (index < 0) index += n;
  return slice(ax, index, index + 1).squeeze(ax);
}
Tensor Tensor::expand(const Shape& s) const {
  return ops::call1(ops::OpId::Expand, {*this}, ops::Attrs().set("shape", s));
}
Tensor Tensor::squeeze() const {
  Shape s;
  for (int64_t d : shape())
    if (d != 1) s.push_back(d);
  return reshape(s);
}
Tensor Tensor::squeeze(int64_t d) const {
  const int64_t ax = ops::normalize_axis(d, dim());
  if (shape()[size_t(ax)] != 1) return *this;  // as numpy/torch: squeezing a non-1 dim is a no-op
  Shape s = shape();
  s.erase(s.begin() + ax);
  return reshape(s);
}
Tensor Tensor::unsqueeze(int64_t d) const {
  const int64_t ax = ops::normalize_axis(d, dim() + 1);
  Shape s = shape();
  s.insert(s.begin() + ax, 1);
  return reshape(s);
}
Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  const int64_t a = ops::normalize_axis(start_dim, dim()), b = ops::normalize_axis(end_dim, dim());
  SPORE_CHECK(a <= b, "[flatten] start_dim ", start_dim, " comes after end_dim ", end_dim);
  Shape s(shape().begin(), shape().begin() + a);
  int64_t m = 1;
  for (int64_t i = a; i <= b; ++i) m *= shape()[size_t(i)];
  s.push_back(m);
  s.insert(s.end(), shape().begin() + b + 1, shape().end());
  return reshape(s);
}
Tensor Tensor::contiguous() const {
  if (is_contiguous()) return *this;
  return ops::call1(ops::OpId::Copy, {*this});
}
Tensor Tensor::clone() const { return ops::call1(ops::OpId::Copy, {*this}); }
// ---- sugar for other ops ----

Tensor Tensor::to(DType t) const { return t == dtype() ? *this : cast(*this, t); }
Tensor Tensor::to(Device d, bool non_blocking) const { return to_device(*this, d, non_blocking); }
Tensor Tensor::operator-() const { return neg(*this); }
Tensor Tensor::sum(std::vector<int64_t> axes, bool keepdims) const {
  return spore::sum(*this, std::move(axes), keepdims);
}
Tensor Tensor::mean(std::vector<int64_t> axes, bool keepdims) const {
  return spore::mean(*this, std::move(axes), keepdims);
}
Tensor Tensor::matmul(const Tensor& other) const { return spore::matmul(*this, other); }

}  // namespace spore
