// View primitives (reshape, permute, slice, expand): inference, the aliasing view and gradient
// rules; plus copy (contiguous) and cast. Tensor's view methods (core/tensor.cpp) call these.
#include <numeric>

#include "ops/op.h"
#include "spore/ops.h"

namespace spore::ops {
namespace {

Tensor alias(const Tensor& in, Shape shape, Shape strides, int64_t offset) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = in.impl().storage;
  impl->dtype = in.dtype();
  impl->device = in.device();
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  return Tensor(std::move(impl));
}

// Pads (before, after) zeros on one dim; a negative `after` trims instead.
Tensor pad_dim(const Tensor& x, int64_t dim, int64_t before, int64_t after) {
  Tensor y = x;
  if (after < 0) {
    y = y.slice(dim, 0, y.size(dim) + after);
    after = 0;
  }
  if (before == 0 && after == 0) return y;
  std::vector<int64_t> pads(size_t(2 * (y.dim() - dim)), 0);  // last dim first
  const size_t k = size_t(2 * (y.dim() - 1 - dim));
  pads[k] = before;
  pads[k + 1] = after;
  return pad(y, pads, 0);
}

}  // namespace

SPORE_DEFINE_OP(Reshape,
                {
                    .infer = [](const Metas& in, const Attrs& a) -> Metas {
                      return {{a.get_ints("shape"), in[0].dtype}};
                    },
                    .vjp = [](const VjpContext& c) -> Tensors {
                      return {c.g().reshape(c.in(0).shape())};
                    },
                    .view = [](const Tensor& in, const Attrs& a, const TensorMeta& out) -> Tensor {
                      // The caller (Tensor::view / reshape) checked viewability; recompute the
                      // strides here.
                      if (in.is_contiguous())
                        return alias(in, out.shape, contiguous_strides(out.shape), in.offset());
                      Shape st;
                      SPORE_ASSERT(view_strides(in.shape(), in.strides(), out.shape, &st),
                                   "reshape of ", shape_str(in.shape()), " strides ",
                                   shape_str(in.strides()), " to ", shape_str(out.shape),
                                   " is not a view; Tensor::reshape should have copied");
                      return alias(in, out.shape, st, in.offset());
                    },
                });

SPORE_DEFINE_OP(Permute,
                {
                    .infer = [](const Metas& in, const Attrs& a) -> Metas {
                      const auto& axes = a.get_ints("axes");
                      const int64_t r = int64_t(in[0].shape.size());
                      SPORE_CHECK(int64_t(axes.size()) == r, "expected ", r,
                                  " axes for a tensor of shape ", shape_str(in[0].shape), ", got ",
                                  shape_str(axes));
                      auto norm = normalize_axes(axes, r);  // throws on repeats / out of range
                      (void)norm;
                      Shape s;
                      for (int64_t ax : axes)
                        s.push_back(in[0].shape[size_t(normalize_axis(ax, r))]);
                      return {{s, in[0].dtype}};
                    },
                    .vjp = [](const VjpContext& c) -> Tensors {
                      const auto& axes = c.attrs.get_ints("axes");
                      std::vector<int64_t> inv(axes.size());
                      for (size_t i = 0; i < axes.size(); ++i)
                        inv[size_t(normalize_axis(axes[i], int64_t(axes.size())))] = int64_t(i);
                      return {c.g().permute(inv)};
                    },
                    .view = [](const Tensor& in, const Attrs& a, const TensorMeta& out) -> Tensor {
                      Shape st;
                      for (int64_t ax : a.get_ints("axes"))
                        st.push_back(in.strides()[size_t(normalize_axis(ax, in.dim()))]);
                      return alias(in, out.shape, st, in.offset());
                    },
                });

namespace {
// Resolves python-style slice bounds on a dim of size n.
void slice_bounds(int64_t n, int64_t& start, int64_t& end, int64_t step) {
  SPORE_CHECK(step > 0, "slice step must be positive, got ", step);
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
}
}  // namespace

SPORE_DEFINE_OP(
    Slice,
    {
        .infer = [](const Metas& in, const Attrs& a) -> Metas {
          Shape s = in[0].shape;
          const int64_t d = normalize_axis(a.get_int("dim"), int64_t(s.size()));
          int64_t start = a.get_int("start"), end = a.get_int("end"), step = a.get_int("step");
          slice_bounds(s[size_t(d)], start, end, step);
          s[size_t(d)] = (end - start + step - 1) / step;
          return {{s, in[0].dtype}};
        },
        .vjp = [](const VjpContext& c) -> Tensors {
          const Tensor& x = c.in(0);
          const int64_t d = normalize_axis(c.attrs.get_int("dim"), x.dim()), n = x.size(d);
          int64_t start = c.attrs.get_int("start"), end = c.attrs.get_int("end"),
                  step = c.attrs.get_int("step");
          slice_bounds(n, start, end, step);
          Tensor g = c.g();
          const int64_t m = g.size(d);
          if (step >
              1) {  // interleave step-1 zeros after each element: (.., m, ..) -> (.., m*step, ..)
            g = pad_dim(g.unsqueeze(d + 1), d + 1, 0, step - 1);
            Shape s = g.shape();
            s[size_t(d)] = m * step;
            s.erase(s.begin() + d + 1);
            g = g.reshape(s);
          }
          return {pad_dim(g, d, start, n - start - g.size(d))};
        },
        .view = [](const Tensor& in, const Attrs& a, const TensorMeta& out) -> Tensor {
          const int64_t d = normalize_axis(a.get_int("dim"), in.dim());
          int64_t start = a.get_int("start"), end = a.get_int("end"), step = a.get_int("step");
          slice_bounds(in.size(d), start, end, step);
          Shape st = in.strides();
          const int64_t off = in.offset() + start * st[size_t(d)];
          st[size_t(d)] *= step;
          return alias(in, out.shape, st, off);
        },
    });

SPORE_DEFINE_OP(Expand,
                {
                    .infer = [](const Metas& in, const Attrs& a) -> Metas {
                      Shape target = a.get_ints("shape");
                      const Shape& s = in[0].shape;
                      SPORE_CHECK(target.size() >= s.size(), "cannot expand shape ", shape_str(s),
                                  " to fewer dims ", shape_str(target));
                      const size_t off = target.size() - s.size();
                      for (size_t i = 0; i < target.size(); ++i) {
                        if (i >= off && target[i] == -1) target[i] = s[i - off];
                        SPORE_CHECK(target[i] >= 0, "cannot expand to ",
                                    shape_str(a.get_ints("shape")));
                        if (i >= off)
                          SPORE_CHECK(s[i - off] == target[i] || s[i - off] == 1,
                                      "cannot expand shape ", shape_str(s), " to ",
                                      shape_str(target), ": dimension ", i - off, " has size ",
                                      s[i - off], " (only size-1 dims can be expanded)");
                      }
                      return {{target, in[0].dtype}};
                    },
                    .vjp = [](const VjpContext& c) -> Tensors {
                      return {c.g()};
                    },  // engine sums back to input shape
                    .view = [](const Tensor& in, const Attrs& a, const TensorMeta& out) -> Tensor {
                      Shape st(out.shape.size(), 0);
                      const size_t off = out.shape.size() - size_t(in.dim());
                      for (size_t i = 0; i < size_t(in.dim()); ++i)
                        st[off + i] = in.shape()[i] == out.shape[off + i] ? in.strides()[i] : 0;
                      return alias(in, out.shape, st, in.offset());
                    },
                });

SPORE_DEFINE_OP(Copy, {
                          .infer = [](const Metas& in, const Attrs&) -> Metas { return {in[0]}; },
                          .vjp = [](const VjpContext& c) -> Tensors { return {c.g()}; },
                      });

SPORE_DEFINE_OP(Cast, {
                          .infer = [](const Metas& in, const Attrs& a) -> Metas {
                            return {{in[0].shape, a.get_dtype("dtype")}};
                          },
                          .vjp = [](const VjpContext& c) -> Tensors {
                            if (!is_floating(c.in(0).dtype())) return {Tensor()};
                            return {c.g()};  // the engine casts it back to the input's dtype
                          },
                      });

}  // namespace spore::ops

namespace spore {
Tensor cast(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  return ops::call1(ops::OpId::Cast, {x}, ops::Attrs().set("dtype", dtype));
}
}  // namespace spore
